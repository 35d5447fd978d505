"""The CP-SAT solver: the exact model (:mod:`~themis_opt.cpsat.model`), running it from a warm start
(:mod:`~themis_opt.cpsat.driver`) and the window search for instances too large for it
(:mod:`~themis_opt.cpsat.windows`). Importing it loads OR-Tools' CP-SAT.
"""

from themis_opt.cpsat.driver import CpsatOutcome, alone_bound, solve_cpsat
from themis_opt.cpsat.model import CpsatModel, default_quantum, exact_quantum, quanta, relabel
from themis_opt.cpsat.windows import improve_by_windows

__all__ = [
    "CpsatModel",
    "CpsatOutcome",
    "alone_bound",
    "default_quantum",
    "exact_quantum",
    "improve_by_windows",
    "quanta",
    "relabel",
    "solve_cpsat",
]
