"""One phase on one dimension: its messages, its steps and their latencies, its reductions.

How long a phase of a ring, direct, halving-doubling or double binary tree
algorithm lasts on one dimension (the model: :mod:`themis_opt.cost`).
"""

from __future__ import annotations

import functools
import math
from typing import assert_never

from themis_opt.instance import Algorithm, Dimension, Network, Op, Topology


def link_gbps(dim: Dimension) -> float:
    """Bandwidth one message gets in ``dim``, GB/s (2^30 B): a fully-connected dimension's link's share."""
    if dim.topology is Topology.FULLY_CONNECTED:
        return dim.bandwidth_gbps / max(1, dim.physical_size - 1)
    return dim.bandwidth_gbps


def link_bytes_per_ns(dim: Dimension) -> float:
    """Bandwidth one message gets in ``dim``, bytes per ns."""
    if dim.topology is Topology.FULLY_CONNECTED:
        return dim.bytes_per_ns / max(1, dim.physical_size - 1)
    return dim.bytes_per_ns


def hops_apart(dim: Dimension, distance: int) -> int:
    """Hops between two NPUs ``distance`` positions apart along ``dim`` (its own positions)."""
    match dim.topology:
        case Topology.RING:
            apart = distance * dim.stride
            return min(apart, dim.physical_size - apart)
        case Topology.FULLY_CONNECTED:
            return 1
        case Topology.SWITCH:
            return 2
        case _ as unreachable:
            assert_never(unreachable)


def _ring_latency(dim: Dimension, steps: int, whole: bool) -> float:
    """Hop latency of the dearest ``steps`` consecutive links of the ring ``dim`` (relayed, cyclic).

    Every link joins neighbours one position apart, except the last, which
    closes the ring from the far end: on a dimension carved from a larger
    ring it spans ``size - 1`` positions. ``whole``: each link's latency in
    whole ns.
    """
    n = dim.size
    near, far = (_hop_latency(dim, hops_apart(dim, k), whole) for k in (1, n - 1))
    full, rest = divmod(steps, n)
    cycle = (n - 1) * near + far
    return full * cycle + (max(rest * near, (rest - 1) * near + far) if rest else 0.0)


def _hop_latency(dim: Dimension, hops: int, whole: bool) -> float:
    return float(math.floor(hops * dim.latency_ns)) if whole else hops * dim.latency_ns


def _shares_port(network: Network, dim: Dimension) -> bool:
    """Whether the messages an NPU sends at once in ``dim`` share its bandwidth."""
    return not network.congestion_unaware and dim.topology is not Topology.FULLY_CONNECTED


def _steps_of(network: Network, dim: Dimension, algorithm: Algorithm, op: Op) -> tuple[tuple[int, int, float], ...]:
    """The steps of one phase as (hops, messages sent at once, bytes per message per input byte).

    A ring is not listed step by step (its steps are relayed): see :func:`_duration`.
    """
    steps = algorithm.spec.steps
    if steps is None:
        raise ValueError(f"{algorithm.value} is not listed step by step")
    return steps(dim.size, functools.partial(hops_apart, dim), op)


def ring_steps(n: int, op: Op) -> tuple[int, float]:
    """A ring's relayed steps on ``n`` NPUs and bytes per message per input byte."""
    match op:
        case Op.REDUCE_SCATTER:
            return n - 1, 1 / n
        case Op.ALL_GATHER:
            return n - 1, 1.0
        case Op.ALL_REDUCE:
            return 2 * (n - 1), 1 / n
        case Op.ALL_TO_ALL:
            return n * (n - 1) // 2, 1 / n
        case Op.SEND:
            raise ValueError("a send is one message, not a ring's steps")
        case _ as unreachable:
            assert_never(unreachable)


def reduced_messages(algorithm: Algorithm, op: Op, n: int, x: float) -> tuple[float, ...]:
    """The bytes of each received message of a phase that is reduced before the next is sent
    (ASTRA-sim 2.x's packet bundles: only reduce-scatter and all-reduce reduce, and not every
    receipt), for a phase of ``op`` on ``x`` bytes over ``n`` NPUs.
    """
    reductions = algorithm.spec.reductions
    if reductions is None:
        if op not in (Op.REDUCE_SCATTER, Op.ALL_REDUCE):
            return ()
        raise ValueError(f"{algorithm.value}: reductions at a local memory bandwidth are not modelled")
    return reductions(op, n, x)


def reduction_ns(network: Network, algorithm: Algorithm, op: Op, n: int, x: float) -> float:
    """The time a phase's reductions take at the network's ``reduction_gbps`` (0 without one):
    three times each reduced message's bytes over it, each product's factor in whole ns.
    """
    if network.reduction_gbps is None:
        return 0.0
    return sum(3.0 * math.floor(s / network.reduction_gbps) for s in reduced_messages(algorithm, op, n, x))


def message_delay_ns(network: Network, dim: Dimension) -> float:
    """What the model adds to each step's message on ``dim`` beyond its hops' latency and its bytes
    over the link (:func:`_duration`): the network's endpoint delay and the dimension's message overhead.
    """
    return network.endpoint_delay_ns + dim.message_overhead_ns


def phase_delay_of(network: Network, algorithm: Algorithm, op: Op, n: int, x: float) -> float:
    """What the model adds once to a phase of ``op`` on ``x`` bytes over ``n`` NPUs: the network's
    phase delay and the phase's reductions.
    """
    return network.phase_delay_ns + reduction_ns(network, algorithm, op, n, x)


@functools.lru_cache(maxsize=8192)
def _duration(network: Network, d: int, algorithm: Algorithm, op: Op, x: float, quiet: bool) -> float:
    """A phase of ``op`` on ``x`` bytes on dimension ``d``; ``quiet``: its wire time alone
    (no delay, latency or overhead). A network of ``integer_messages`` keeps every message's
    latency and bytes-over-bandwidth time in whole ns, as ASTRA-sim 1.0's analytical backend does;
    one of ``integer_message_sums`` their sum, as 2.x's does.
    """
    dim = network.dimensions[d]
    whole = network.integer_messages or network.integer_message_sums  # quiet: floor(w) <= floor(l + w)
    delay, overhead = (0.0, 0.0) if quiet else (network.endpoint_delay_ns, dim.message_overhead_ns)
    total = 0.0 if quiet else phase_delay_of(network, algorithm, op, dim.size, x)
    link = link_bytes_per_ns(dim)

    def wire(seconds: float) -> float:
        return float(math.floor(seconds)) if whole else seconds

    if algorithm is Algorithm.RING:
        steps, per = ring_steps(dim.size, op)
        if network.integer_message_sums and not quiet:  # every message to a neighbour, truncated whole
            message = math.floor(hops_apart(dim, 1) * dim.latency_ns + per * x / link)
            return total + steps * (delay + overhead + message)
        hops = 0.0 if quiet else _ring_latency(dim, steps, whole)
        return total + steps * (delay + overhead + wire(per * x / link)) + hops
    shared = _shares_port(network, dim)
    for hops, messages, per in _steps_of(network, dim, algorithm, op):
        moved = messages * per * x / dim.bytes_per_ns if shared else per * x / link
        if network.integer_message_sums and not quiet:
            total += delay + overhead + math.floor(hops * dim.latency_ns + moved)
            continue
        latency = 0.0 if quiet else _hop_latency(dim, hops, whole)
        total += delay + latency + overhead + wire(moved)
    return total
