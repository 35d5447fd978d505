"""The congestion-free analytical cost model (ASTRA-sim's analytical backend).

A phase runs one reduce-scatter or all-gather of one chunk on one dimension::

    duration = steps * (hops * latency + endpoint_delay) + bytes_sent / bandwidth

with ``steps`` = n - 1 (ring), 1 (direct), log2 n (halving-doubling); ``hops``
= 2 on a switch, 1 otherwise; ``bytes_sent`` = x (n - 1) / n for a
reduce-scatter of x bytes and x (n - 1) for an all-gather of x bytes.

An all-to-all phase keeps its size (x in, x out) and runs the dimension's
all-to-all algorithm: ring, n (n - 1) / 2 steps of one hop each and
x (n - 1) / 2 bytes sent; direct, one step and x (n - 1) / n bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import assert_never

from themis_opt.instance import Algorithm, Dimension, Instance, Kind, Network, Op, Topology


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a chunk, untimed: where it runs, what it moves, how long.

    Parameters
    ----------
    dim
        Dimension index.
    op
        Reduce-scatter or all-gather.
    bytes_in, bytes_out
        Data held before and after the phase (real numbers: no rounding).
    duration
        Duration in ns under the cost model.
    """

    dim: int
    op: Op
    bytes_in: float
    bytes_out: float
    duration: float


def steps(dim: Dimension, op: Op = Op.REDUCE_SCATTER) -> int:
    """Number of algorithm steps of one phase of ``op`` on ``dim``."""
    algorithm = dim.all_to_all_algorithm if op is Op.ALL_TO_ALL else dim.algorithm
    match algorithm:
        case Algorithm.RING:
            return dim.size * (dim.size - 1) // 2 if op is Op.ALL_TO_ALL else dim.size - 1
        case Algorithm.DIRECT:
            return 1
        case Algorithm.HALVING_DOUBLING:
            return int(math.log2(dim.size))
        case _ as unreachable:
            assert_never(unreachable)


def hops(dim: Dimension, op: Op = Op.REDUCE_SCATTER) -> int:
    """Hops per step: 2 through a switch, 1 on direct links (and 1 for a ring all-to-all)."""
    if op is Op.ALL_TO_ALL and dim.all_to_all_algorithm is Algorithm.RING:
        return 1
    return 2 if dim.topology is Topology.SWITCH else 1


def bytes_sent(dim: Dimension, op: Op, bytes_in: float) -> float:
    """Bytes one NPU sends in a phase of ``op`` with ``bytes_in`` input."""
    n = dim.size
    match op:
        case Op.REDUCE_SCATTER:
            return bytes_in * (n - 1) / n
        case Op.ALL_GATHER:
            return bytes_in * (n - 1)
        case Op.ALL_TO_ALL:
            if dim.all_to_all_algorithm is Algorithm.RING:
                return bytes_in * (n - 1) / 2
            return bytes_in * (n - 1) / n
        case _ as unreachable:
            assert_never(unreachable)


def phase_duration(network: Network, dim_index: int, op: Op, bytes_in: float) -> float:
    """Duration in ns of a phase of ``op`` on dimension ``dim_index``."""
    dim = network.dimensions[dim_index]
    latency = steps(dim, op) * (hops(dim, op) * dim.latency_ns + network.endpoint_delay_ns)
    return latency + bytes_sent(dim, op, bytes_in) / dim.bytes_per_ns


def phase_plan_of(kind: Kind, order: tuple[int, ...]) -> list[tuple[int, Op]]:
    """The (dimension, operation) of each phase of a chunk of ``kind`` taking ``order``."""
    match kind:
        case Kind.ALL_REDUCE:
            return [(d, Op.REDUCE_SCATTER) for d in order] + [(d, Op.ALL_GATHER) for d in reversed(order)]
        case Kind.REDUCE_SCATTER:
            return [(d, Op.REDUCE_SCATTER) for d in order]
        case Kind.ALL_GATHER:
            return [(d, Op.ALL_GATHER) for d in order]
        case Kind.ALL_TO_ALL:
            return [(d, Op.ALL_TO_ALL) for d in order]
        case _ as unreachable:
            assert_never(unreachable)


def chunk_phases(
    instance: Instance, collective: int, chunk_bytes: float, order: tuple[int, ...]
) -> tuple[PhaseSpec, ...]:
    """The phases of one chunk that visits the dimensions in ``order``.

    An all-reduce runs reduce-scatter over ``order`` then all-gather over its
    reverse; a reduce-scatter runs the first half; an all-gather runs
    all-gather over ``order`` from the shard ``chunk_bytes / prod(n)``; an
    all-to-all runs one all-to-all phase per dimension, size unchanged.
    """
    network = instance.network
    kind = instance.collectives[collective].kind
    plan = phase_plan_of(kind, order)
    # an all-gather starts from its shard; every other kind from the whole chunk
    x = (
        chunk_bytes / math.prod(network.dimensions[d].size for d in order)
        if kind is Kind.ALL_GATHER
        else float(chunk_bytes)
    )
    phases = []
    for d, op in plan:
        n = network.dimensions[d].size
        match op:
            case Op.REDUCE_SCATTER:
                out = x / n
            case Op.ALL_GATHER:
                out = x * n
            case Op.ALL_TO_ALL:
                out = x
            case _ as unreachable:
                assert_never(unreachable)
        phases.append(PhaseSpec(d, op, x, out, phase_duration(network, d, op, x)))
        x = out
    return tuple(phases)
