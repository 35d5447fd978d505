"""The scripts behind the docs' figures (``bench/figures``) and the tuning experiments (``bench/experiments``).

Every script runs from the project's root as a module, ``python -m bench.figures.NAME`` or
``python -m bench.experiments.NAME``, and takes ``--help``; the instances they share are in
:mod:`bench.instances`.
"""
