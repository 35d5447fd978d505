"""Builds the simulator's compiled core (themis_opt/sim/_simcore/); everything else is in pyproject.toml.

The core is a plain C library that themis_opt.sim.core loads with ctypes: the .c
files of themis_opt/sim/_simcore/ (see simcore.h, which they share), compiled into
one library, the extension themis_opt.sim._simcore. It is optional: where it cannot
be compiled, the install goes on and the simulator runs in Python (the same
schedules, slower).
"""

from glob import glob

from setuptools import Extension, setup

CORE = "themis_opt/sim/_simcore"

setup(
    ext_modules=[
        Extension(
            "themis_opt.sim._simcore",
            sources=sorted(glob(f"{CORE}/*.c")),
            depends=sorted(glob(f"{CORE}/*.h")),  # rebuilt when a header changes; in the sdist
            include_dirs=[CORE],
            extra_compile_args=["-O2", "-std=c99", "-ffp-contract=off"],  # the same arithmetic as Python,
            optional=True,
        )
    ]
)
