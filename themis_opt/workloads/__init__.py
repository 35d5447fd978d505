"""Training iterations as task graphs.

* :mod:`~themis_opt.workloads.astra1`: ASTRA-sim 1.0's workload loop;
* :mod:`~themis_opt.workloads.zoo`: the model zoo (ResNet, GNMT, DLRM, Transformer-1T);
* :mod:`~themis_opt.workloads.llm`: LLMs laid out with tensor, expert and data parallelism.
"""
