"""Dimension orders: the types (one chunk's, every chunk's, counts per class, a planner) and their checks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from themis_opt.errors import InputError
from themis_opt.instance import ChunkClass, Instance, Kind

Order = tuple[int, ...]  # the dimensions one chunk visits, in turn
Orders = Mapping[tuple[int, int], Order]  # (collective, chunk) -> its order
Counts = dict[ChunkClass, dict[Order, int]]  # per chunk class, how many of its chunks take each order
# (collective, release time, whether the compute unit has waited for a collective so far) -> one order per chunk
Planner = Callable[[int, float, bool], Sequence[Order]]


def check_orders(instance: Instance, orders: Orders) -> None:
    """Raise :class:`InputError` unless ``orders`` gives every chunk one of its
    collective's orders (a permutation of its dimensions of size >= 2; the
    ascending one for an all-to-all).
    """
    for c, k in instance.chunk_ids:
        check_order(instance, c, k, orders.get((c, k)))


def check_order(instance: Instance, c: int, k: int, order: Sequence[int] | None) -> None:
    """Raise :class:`InputError` unless ``order`` is one chunk ``(c, k)`` may take (see :func:`check_orders`)."""
    if order is None:
        raise InputError(f"orders[{c}, {k}]", "missing: every chunk needs an order")
    dims = instance.active_dims[c]
    if sorted(order) != list(dims):
        raise InputError(f"orders[{c}, {k}]", f"must be a permutation of {list(dims)}, got {list(order)}")
    if instance.collectives[c].kind is Kind.ALL_TO_ALL and tuple(order) != dims:
        raise InputError(f"orders[{c}, {k}]", f"an all-to-all takes the ascending order {list(dims)}")
