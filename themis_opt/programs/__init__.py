"""Programs: a schedule as every NPU's sends, receives and computations, checked, timed and written.

:func:`program_of` builds a :class:`Program` from a result and its instance; :func:`check_program`
proves it runs to its end and leaves every NPU with its collective's result; :func:`time_program`
times it as ASTRA-sim 2.x's custom collectives are timed; :mod:`themis_opt.programs.astra` writes
and reads it as a folder ASTRA-sim 2.x runs.
"""

from themis_opt.programs.build import program_of
from themis_opt.programs.check import check_program
from themis_opt.programs.ir import Link, OpKind, Program, ProgramCollective
from themis_opt.programs.scope import check_programmable
from themis_opt.programs.timing import Timing, time_program

__all__ = [
    "Link",
    "OpKind",
    "Program",
    "ProgramCollective",
    "Timing",
    "check_program",
    "check_programmable",
    "program_of",
    "time_program",
]
