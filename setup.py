"""Builds the simulator's compiled core (themis_opt/sim/_simcore.c); everything else is in pyproject.toml.

The core is a plain C library that themis_opt.sim.core loads with ctypes. It is
optional: where it cannot be compiled, the install goes on and the simulator
runs in Python (the same schedules, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "themis_opt.sim._simcore",
            sources=["themis_opt/sim/_simcore.c"],
            extra_compile_args=["-O2", "-std=c99", "-ffp-contract=off"],  # the same arithmetic as Python,
            optional=True,
        )
    ]
)
