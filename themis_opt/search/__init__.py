"""The local searches the cpsat method runs before CP-SAT: which chunk takes which order
(:mod:`~themis_opt.search.assignment`) and in which order each dimension serves its phases
(:mod:`~themis_opt.search.sequence`), both spread over helper processes (:mod:`~themis_opt.helpers`);
their parameters (:mod:`~themis_opt.search.params`).

The names below are imported on first use: reading the parameters loads no search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from themis_opt.lazy import lazy_names

if _TYPE_CHECKING:  # pragma: no cover
    from themis_opt.search.assignment import (
        Strategy as Strategy,
        default_evaluations as default_evaluations,
        improve_assignment as improve_assignment,
        strategy_for as strategy_for,
    )
    from themis_opt.search.sequence import (
        improve_sequences as improve_sequences,
        improve_sequences_per_start as improve_sequences_per_start,
        sequences_searchable as sequences_searchable,
    )

_HOMES = {
    "Strategy": "assignment",
    "default_evaluations": "assignment",
    "improve_assignment": "assignment",
    "strategy_for": "assignment",
    "improve_sequences": "sequence",
    "improve_sequences_per_start": "sequence",
    "sequences_searchable": "sequence",
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names(__name__, _HOMES)
