"""Files in and out: this project's JSON (:mod:`~themis_opt.formats.native`: instances, results), ASTRA-sim's
configurations and Chakra traces (:mod:`~themis_opt.formats.astra`) and ASTRA-sim 1.0's workload text
(:mod:`~themis_opt.formats.workload_text`).
"""
