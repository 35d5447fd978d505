"""ASTRA-sim 2.x's communicator groups: a collective's one ring over its group's NPUs, and a send.

The model: :mod:`themis_opt.cost`.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from themis_opt.cost.flattened import _charged
from themis_opt.cost.steps import link_bytes_per_ns
from themis_opt.instance import Collective, Kind, Network, Op

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


GROUP_STEP_DELAY_NS = 10.0  # ASTRA-sim 2.x: a group's ring is "local", its MemBus delay fixed, not endpoint-delay


def group_links(network: Network, group: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per link of a group's ring (member k to member k + 1, cyclic): the dimension its messages are
    costed in (the lowest in which the two NPUs differ) and their hops there.
    """
    import numpy as np

    src = np.array(group, dtype=np.int64)
    dims, hops = _charged(_innermost(network), src, np.roll(src, -1))
    return tuple(int(d) for d in dims), tuple(int(h) for h in hops)


@functools.lru_cache(maxsize=64)
def _innermost(network: Network) -> Network:
    """``network`` charging every message in the lowest dimension its NPUs differ in (ASTRA-sim 2.x's rule)."""
    import dataclasses

    return network if network.innermost_charge else dataclasses.replace(network, innermost_charge=True)


def _group_steps(
    network: Network, group: tuple[int, ...], op: Op, x: float, quiet: bool
) -> tuple[np.ndarray, float, float, int, int]:
    """A phase of ``op`` on ``x`` bytes on a group's ring: each link's message cost, the delay of a
    step, the reduction of a reduced receipt, the steps, and how many of the first receipts are reduced.
    """
    import numpy as np

    n = len(group)
    if op is Op.ALL_TO_ALL:
        raise ValueError("a group's ring runs no all-to-all here")
    dims, hops = (np.array(v) for v in group_links(network, group))
    steps = 2 * (n - 1) if op is Op.ALL_REDUCE else n - 1
    message = math.floor(x) if op is Op.ALL_GATHER else math.floor(x) // n
    rate = np.array([link_bytes_per_ns(network.dimensions[d]) for d in dims])
    reducing = n - 1 if op in (Op.REDUCE_SCATTER, Op.ALL_REDUCE) else 0
    if quiet:
        cost: np.ndarray = message / rate
        return cost, 0.0, 0.0, steps, reducing
    latency = np.array([network.dimensions[d].latency_ns for d in dims]) * hops
    overhead = np.array([network.dimensions[d].message_overhead_ns for d in dims])
    cost = np.floor(latency + message / rate) + overhead
    return cost, GROUP_STEP_DELAY_NS, group_reduction_ns(network, message), steps, reducing


def group_reduction_ns(network: Network, message: float) -> float:
    """A reduced receipt of ``message`` bytes on a group's ring: three times its bytes at the network's
    ``reduction_gbps`` (0 without one), in whole ns.
    """
    return 0.0 if network.reduction_gbps is None else 3.0 * math.floor(message / network.reduction_gbps)


@functools.lru_cache(maxsize=4096)
def group_ring_ns(network: Network, group: tuple[int, ...], op: Op, x: float, quiet: bool = False) -> float:
    """A phase of ``op`` on ``x`` bytes (an all-gather's: each NPU's shard) on a group's ring, as ASTRA-sim 2.x
    times it (see :mod:`themis_opt.cost`), alone: every NPU starts it at once; ``quiet``: its wire time
    alone (no delays, latencies or reductions).

    Steps: n - 1 (reduce-scatter, all-gather) or 2 (n - 1) (all-reduce) of ``x // n`` bytes (an all-gather's:
    ``x``); the first n - 1 receipts of a reduce-scatter or an all-reduce are reduced.
    """
    return group_chain_ns(network, group, op, (x,), quiet)


@functools.lru_cache(maxsize=4096)
def group_chain_ns(
    network: Network, group: tuple[int, ...], op: Op, sizes: tuple[float, ...], quiet: bool = False
) -> float:
    """Phases of ``op`` on ``sizes`` bytes one after another on a group's ring, as ASTRA-sim 2.x runs the
    chunks of a collective there: every NPU starts the first at once, then each starts the next as soon as
    it has finished the one before, waiting for no other NPU. The latest NPU's end.

    An NPU sends a step once it has received the step before (and its receipt is posted with its send), so
    its chain of receipts runs back along the ring across the phases: on links of unequal costs the
    phases together last as long as the dearest run of all their steps, consecutive links, not each
    phase its own dearest run. ``quiet``: the wire time alone.
    """
    import numpy as np

    start = np.zeros(len(group))
    for x in sizes:
        cost, delay, reduction, steps, reducing = _group_steps(network, group, op, x, quiet)
        if np.all(cost == cost[0]) and np.all(start == start[0]):  # every link alike: the chain is every NPU's
            start = start + (delay + steps * (cost[0] + delay) + reducing * reduction)
            continue
        sent = start + delay  # each NPU's send of the current step (member k sends to member k + 1)
        for s in range(steps):
            received = np.maximum(np.roll(sent + cost, 1), sent)  # member k receives from member k - 1
            sent = received + delay + (reduction if s < reducing else 0.0)
        start = sent
    return float(start.max())


def group_chunk_ns(network: Network, coll: Collective, op: Op, chunk_bytes: float) -> float:
    """A chunk's share of its group collective's phases (see :mod:`themis_opt.cost`): ``op`` on a chunk of
    ``chunk_bytes`` of ``coll``, whose chunks run ``network.active_chunks`` at once.

    2.x's NPUs run a collective's chunks on its group's ring one after another without waiting for one
    another (:func:`group_chain_ns`), ``active_chunks`` such chains side by side. Chunks of one size share
    the longest chain's time equally; with a last chunk of another size (one chunk at a time) every other
    chunk takes an equal share of their own chain's and the last what it adds. A chunk of a size ``coll``
    does not cut, or a last chunk of another size beside chunks at once: the chunk alone
    (:func:`group_ring_ns`).
    """
    n = len(coll.group)

    def phase_bytes(nbytes: int | float) -> float:
        return float(nbytes) / n if coll.kind is Kind.ALL_GATHER else float(nbytes)

    regular, last = phase_bytes(coll.chunk_bytes), phase_bytes(coll.last_chunk_bytes)
    chunk = phase_bytes(chunk_bytes)
    lanes = network.active_chunks
    if chunk not in (regular, last) or (regular != last and lanes > 1):
        return group_ring_ns(network, coll.group, op, chunk)
    if regular == last:
        longest = -(-coll.chunks // lanes)  # chunks in the longest chain
        return group_chain_ns(network, coll.group, op, (regular,) * longest) / longest
    before = group_chain_ns(network, coll.group, op, (regular,) * (coll.chunks - 1))
    if chunk == regular:
        return before / (coll.chunks - 1)
    return group_chain_ns(network, coll.group, op, (regular,) * (coll.chunks - 1) + (last,)) - before


@functools.lru_cache(maxsize=4096)
def send_ns(network: Network, src: int, dst: int, x: float, quiet: bool = False) -> float:
    """One message of ``x`` bytes from NPU ``src`` to NPU ``dst``, as ASTRA-sim 2.x's congestion-unaware
    backend costs it: in the lowest dimension in which the two differ, ``hops x latency + x / link
    bandwidth`` there, plus the dimension's message overhead; no endpoint delay. A network of
    ``integer_message_sums`` truncates the sum to whole ns (2.x), one of ``integer_messages`` each part.
    ``quiet``: the wire time alone.
    """
    dims, hops = group_links(network, (src, dst))
    dim = network.dimensions[dims[0]]
    wire = x / link_bytes_per_ns(dim)
    whole = network.integer_messages or network.integer_message_sums
    if quiet:
        return float(math.floor(wire)) if whole else wire
    latency = hops[0] * dim.latency_ns
    if network.integer_message_sums:
        return float(math.floor(latency + wire)) + dim.message_overhead_ns
    if network.integer_messages:
        return float(math.floor(latency) + math.floor(wire)) + dim.message_overhead_ns
    return latency + wire + dim.message_overhead_ns
