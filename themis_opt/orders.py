"""The types of dimension orders: one chunk's, every chunk's, how many chunks take each, and a planner."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from themis_opt.instance import ChunkClass

Order = tuple[int, ...]  # the dimensions one chunk visits, in turn
Orders = Mapping[tuple[int, int], Order]  # (collective, chunk) -> its order
Counts = dict[ChunkClass, dict[Order, int]]  # per chunk class, how many of its chunks take each order
# (collective, release time, whether the compute unit has waited for a collective so far) -> one order per chunk
Planner = Callable[[int, float, bool], Sequence[Order]]
