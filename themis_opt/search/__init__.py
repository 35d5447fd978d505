"""The local searches the cpsat method runs before CP-SAT: which chunk takes which order
(:mod:`~themis_opt.search.assignment`) and in which order each dimension serves its phases
(:mod:`~themis_opt.search.sequence`), both spread over helper processes (:mod:`~themis_opt.search.pool`).
"""

from themis_opt.search.assignment import Strategy, default_evaluations, improve_assignment, strategy_for
from themis_opt.search.sequence import improve_sequences, improve_sequences_per_start, sequences_searchable

__all__ = [
    "Strategy",
    "default_evaluations",
    "improve_assignment",
    "improve_sequences",
    "improve_sequences_per_start",
    "sequences_searchable",
    "strategy_for",
]
