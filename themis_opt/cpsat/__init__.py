"""The CP-SAT solver: the one adapter every CP-SAT run goes through (:mod:`~themis_opt.cpsat.solver`),
the exact model (:mod:`~themis_opt.cpsat.model`), running it from a warm start
(:mod:`~themis_opt.cpsat.driver`), asking it one assignment after another under a cap
(:mod:`~themis_opt.cpsat.refute`) and the window search for instances too large for it
(:mod:`~themis_opt.cpsat.windows`).

The names below are imported on first use: the adapter alone loads only CP-SAT's compiled helper,
the exact model its Python layer (with pandas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from themis_opt.lazy import lazy_names

if _TYPE_CHECKING:  # pragma: no cover
    from themis_opt.cpsat.driver import (
        CpsatOutcome as CpsatOutcome,
        alone_bound as alone_bound,
        solve_cpsat as solve_cpsat,
    )
    from themis_opt.cpsat.model import (
        CpsatModel as CpsatModel,
        default_quantum as default_quantum,
        exact_quantum as exact_quantum,
        quanta as quanta,
        relabel as relabel,
    )
    from themis_opt.cpsat.refute import CappedModel as CappedModel, ask_at_once as ask_at_once
    from themis_opt.cpsat.windows import improve_by_windows as improve_by_windows

_HOMES = {
    "CappedModel": "refute",
    "ask_at_once": "refute",
    "CpsatOutcome": "driver",
    "alone_bound": "driver",
    "solve_cpsat": "driver",
    "CpsatModel": "model",
    "default_quantum": "model",
    "exact_quantum": "model",
    "quanta": "model",
    "relabel": "model",
    "improve_by_windows": "windows",
}
__all__ = sorted(_HOMES)


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
