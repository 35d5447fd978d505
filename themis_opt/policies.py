"""Inter-dimension policies: which order each chunk takes through the dimensions.

* :func:`baseline_orders`: the same order for every chunk, ascending
  (descending for a standalone all-gather).
* :func:`themis_orders`: ASTRA-sim's OfflineGreedy (Themis, ISCA 2022), a
  greedy load balancer with a threshold that falls back to the baseline order.
* :func:`spread_orders`: given how many chunks of each class take each order,
  interleave the orders evenly over the chunk sequence (the ``balanced``
  policy takes its counts from the fill-and-drain bound); :func:`counts_match`
  says whether orders have given counts.

The simulator times the orders.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import assert_never

from themis_opt.instance import ChunkClass, Instance, Kind

MIB = 2**20


def baseline_order(instance: Instance, collective: int) -> tuple[int, ...]:
    """The baseline order of one collective's chunks."""
    dims = instance.active_dims[collective]
    match instance.collectives[collective].kind:
        case Kind.ALL_GATHER:
            return tuple(reversed(dims))
        case Kind.ALL_REDUCE | Kind.REDUCE_SCATTER | Kind.ALL_TO_ALL | Kind.SEND:
            return dims
        case _ as unreachable:
            assert_never(unreachable)


def baseline_orders(instance: Instance) -> dict[tuple[int, int], tuple[int, ...]]:
    """Every chunk takes its collective's baseline order."""
    per_collective = [baseline_order(instance, c) for c in range(len(instance.collectives))]
    return {(c, k): per_collective[c] for c, k in instance.chunk_ids}


def planned_bytes(instance: Instance, collective: int) -> int:
    """The bytes Themis plans a chunk of ``collective`` by: its input, an all-gather's shard
    (ASTRA-sim's chunk size), else the chunk.
    """
    coll = instance.collectives[collective]
    if coll.kind is not Kind.ALL_GATHER:
        return coll.chunk_bytes
    dims = instance.network.dimensions
    return coll.chunk_bytes // math.prod(dims[d].size for d in instance.active_dims[collective])


class ThemisTracker:
    """Themis's greedy load tracker (ASTRA-sim 1.0's OfflineGreedy), planning one
    collective at a time, when it is released.

    The tracker keeps a list of (dimension, load) entries, loads in MiB of
    traffic normalised to dimension 0's bandwidth, latency ignored. For each
    chunk it sorts the list by load (stably; reversed for an all-gather), and
    if the load gap it could close is below 1/16 of the chunk it falls back to
    the ascending order and puts the list back in dimension order; otherwise
    the chunk takes the list's order. Either way the chunk's traffic is then
    charged along its order, from the chunk's input (an all-gather's shard).
    The loads are reset whenever a collective (all-to-alls included) is
    planned at a release time other than the last reset's; once the NPU has
    waited for a collective, ASTRA-sim's NPU 0 no longer plans first, so the
    reset comes after the collective is planned (from the loads before).

    An all-reduce is planned as a reduce-scatter (its all-gather half mirrors
    it). As in ASTRA-sim, an all-gather's fallback takes the ascending order
    and charges the list reversed by position (the load of dimension
    D - 1 - i gets what dimension i carried). An all-to-all is never
    reordered: it takes the baseline (ascending) order, as does a send.

    With several pipeline stages each stage has its own tracker state (its
    NPU plans its own collectives on its own dimensions); ``waited`` is then
    whether that stage's compute unit has waited for a collective.
    """

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        # per stage: [dimension, load] entries (the dimension stays an int), and the last reset's time
        self._state: dict[int, tuple[list[list[float]], float | None]] = {}
        self._entries: list[list[float]] = []

    @property
    def fresh(self) -> bool:
        """Whether the tracker has planned nothing yet."""
        return not self._state

    def plan(self, c: int, release_ns: float, waited: bool = False) -> list[tuple[int, ...]]:
        """The order of every chunk of collective ``c``, released at ``release_ns``
        (``waited``: the NPU has waited for a collective before).
        """
        dims = self.instance.network.dimensions
        stage = self.instance.collectives[c].stage
        entries, reset_at = self._state.get(stage, ([], None))
        fresh = reset_at is None or release_ns != reset_at
        if not entries or (fresh and not waited):
            entries = [[d, 0.0] for d in range(len(dims))]
        self._entries = entries
        orders = self._plan(c)
        if fresh and waited:  # NPU 0 resets only now, after another NPU planned from the loads before
            self._entries = [[d, 0.0] for d in range(len(dims))]
        self._state[stage] = (self._entries, release_ns)
        return orders

    def _plan(self, c: int) -> list[tuple[int, ...]]:
        instance = self.instance
        coll = instance.collectives[c]
        dims = instance.network.dimensions
        if coll.kind in (Kind.ALL_TO_ALL, Kind.SEND):
            return [baseline_order(instance, c)] * coll.chunks
        is_ag = coll.kind is Kind.ALL_GATHER
        active = instance.active_dims[c]
        involved = set(active)
        nominal = planned_bytes(instance, c)
        b0 = dims[0].bandwidth_gbps
        orders = []
        for _ in range(coll.chunks):
            entries = self._entries
            entries.sort(key=lambda e: e[1])
            if is_ag:
                entries.reverse()
            ranked = [e for e in entries if e[0] in involved]
            first = dims[int(ranked[0][0])]
            if is_ag:
                last = dims[int(ranked[-1][0])]
                gap = abs(ranked[-1][1] - ranked[0][1])
                diff = int(gap * (last.bandwidth_gbps / b0) / (last.size - 1) * MIB)
                for entry in ranked[:-1]:
                    diff //= dims[int(entry[0])].size
            else:
                gap = abs(entries[-1][1] - ranked[0][1])
                diff = int(gap * (first.bandwidth_gbps / b0) / ((first.size - 1) / first.size) * MIB)
            if diff < nominal // 16:  # fall back: ascending, the list in dimension order (reversed for AG)
                order = active
                entries.sort(key=lambda e: e[0])
                if is_ag:
                    entries.reverse()
                charged = [entries[d] for d in range(len(dims)) if d in involved]  # by position, as ASTRA-sim
            else:
                order = tuple(int(e[0]) for e in ranked)
                charged = ranked
            size = nominal
            for d, entry in zip(order, charged):
                n, share = dims[d].size, dims[d].bandwidth_gbps / b0
                if is_ag:
                    entry[1] += (size / MIB) * (n - 1) / share
                    size *= n
                else:
                    entry[1] += (size / MIB) * ((n - 1) / n) / share
                    size //= n
            orders.append(order)
        return orders


def themis_orders(instance: Instance) -> dict[tuple[int, int], tuple[int, ...]]:
    """Themis's orders when every collective is released at its issue time.

    Collectives are planned by issue time (then index). In a task graph a
    collective's release depends on the schedule: there the simulator plans
    with a :class:`ThemisTracker` as each collective is released.
    """
    tracker = ThemisTracker(instance)
    orders: dict[tuple[int, int], tuple[int, ...]] = {}
    planning = sorted(range(len(instance.collectives)), key=lambda c: (instance.collectives[c].issue_ns, c))
    for c in planning:
        for k, order in enumerate(tracker.plan(c, instance.collectives[c].issue_ns)):
            orders[(c, k)] = order
    return orders


def spread_orders(
    instance: Instance, counts: Mapping[ChunkClass, Mapping[tuple[int, ...], int]]
) -> dict[tuple[int, int], tuple[int, ...]]:
    """Interleave each class's orders evenly over its chunks.

    The chunk at position i of a class of n chunks takes the order furthest
    behind its share ``(i + 1) * count / n`` (ties: the lexicographically
    smaller order), so every prefix of the chunk sequence holds the orders in
    nearly the proportions of the whole.

    Parameters
    ----------
    instance
        The instance.
    counts
        For every chunk class of the instance, how many of its chunks take
        each order; the counts of a class add up to its size.
    """
    orders: dict[tuple[int, int], tuple[int, ...]] = {}
    for cls in instance.chunk_classes:
        want = {order: n for order, n in sorted(counts[cls].items()) if n > 0}
        size = len(cls.chunks)
        if sum(want.values()) != size:
            raise ValueError(f"counts of class {cls} add up to {sum(want.values())}, not {size}")
        taken = dict.fromkeys(want, 0)
        for i, k in enumerate(cls.chunks):
            # Integer form of (i + 1) * count / size - taken: no float ties.
            order = max(want, key=lambda o: ((i + 1) * want[o] - size * taken[o], [-d for d in o]))
            taken[order] += 1
            orders[(cls.collective, k)] = order
    return orders


def counts_match(
    instance: Instance,
    orders: Mapping[tuple[int, int], tuple[int, ...]],
    counts: Mapping[ChunkClass, Mapping[tuple[int, ...], int]],
) -> bool:
    """Whether exactly ``counts[cls][order]`` chunks of each class take each order in ``orders``."""
    for cls in instance.chunk_classes:
        taken: dict[tuple[int, ...], int] = {}
        for k in cls.chunks:
            order = orders[(cls.collective, k)]
            taken[order] = taken.get(order, 0) + 1
        if taken != {o: n for o, n in counts[cls].items() if n}:
            return False
    return True
