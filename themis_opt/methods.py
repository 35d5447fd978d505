"""The registry of scheduling methods, and the intra-dimension policies that time them.

``solve``, the command line, ``bench`` and the reports read methods from here
and nowhere else; this module imports nothing heavy, so the command line can
list the methods without loading a solver.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, get_args


class Intra(StrEnum):
    """Intra-dimension policy: which waiting phase a free dimension serves next."""

    FIFO = "fifo"
    SCF = "scf"


MethodName = Literal["baseline", "themis", "balanced", "cpsat"]


@dataclass(frozen=True)
class Method:
    """One scheduling method, as solve, the CLI, bench and reports know it.

    Parameters
    ----------
    name
        What users type.
    orders
        How it chooses every chunk's order, in a few words.
    default_intra
        The intra-dimension policy that times it by default; ``None`` when it
        tries both (balanced) or sequences the dimensions itself (cpsat).
    searches
        Whether it runs CP-SAT.
    load_bounds
        Whether it computes the solver-based load bounds by default (cheap
        methods report only the ideal bound unless given more).
    variants
        The runs bench and ``solve --method all`` make of it: the name, or
        ``name-intra`` for each intra-dimension policy worth comparing.
    """

    name: MethodName
    orders: str
    default_intra: Intra | None
    searches: bool
    load_bounds: bool
    variants: tuple[str, ...]

    @staticmethod
    def split(variant: str) -> tuple[str, str | None]:
        """``themis-scf`` -> (``themis``, ``scf``); ``cpsat`` -> (``cpsat``, None)."""
        name, _, intra = variant.partition("-")
        return name, intra or None


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("baseline", "one fixed order for every chunk", Intra.FIFO, False, False, ("baseline",)),
        Method("themis", "Themis's greedy load balancer", Intra.SCF, False, False, ("themis-fifo", "themis-scf")),
        Method("balanced", "order counts of the load bounds, spread evenly", None, False, True, ("balanced",)),
        Method("cpsat", "CP-SAT chooses orders and sequences", None, True, True, ("cpsat",)),
    )
}
assert set(METHODS) == set(get_args(MethodName))
VARIANTS = tuple(v for m in METHODS.values() for v in m.variants)  # what bench runs, in this order
