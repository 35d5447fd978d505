"""The congestion-free analytical cost model (ASTRA-sim's analytical backend).

A phase runs one reduce-scatter or all-gather of one chunk on one dimension::

    duration = steps * (hops * latency + endpoint_delay) + bytes_sent / bandwidth

with ``steps`` = n - 1 (ring), 1 (direct), log2 n (halving-doubling); ``hops``
= 2 on a switch, 1 otherwise; ``bytes_sent`` = x (n - 1) / n for a
reduce-scatter of x bytes and x (n - 1) for an all-gather of x bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def steps(dim: Dimension) -> int:
    """Number of algorithm steps of one phase on ``dim``."""
    if dim.algorithm is Algorithm.RING:
        return dim.size - 1
    if dim.algorithm is Algorithm.DIRECT:
        return 1
    return int(math.log2(dim.size))


def hops(dim: Dimension) -> int:
    """Hops per step: 2 through a switch, 1 on direct links."""
    return 2 if dim.topology is Topology.SWITCH else 1


def bytes_sent(dim: Dimension, op: Op, bytes_in: float) -> float:
    """Bytes one NPU sends in a phase of ``op`` with ``bytes_in`` input."""
    n = dim.size
    return bytes_in * (n - 1) / n if op is Op.REDUCE_SCATTER else bytes_in * (n - 1)


def phase_duration(network: Network, dim_index: int, op: Op, bytes_in: float) -> float:
    """Duration in ns of a phase of ``op`` on dimension ``dim_index``."""
    dim = network.dimensions[dim_index]
    latency = steps(dim) * (hops(dim) * dim.latency_ns + network.endpoint_delay_ns)
    return latency + bytes_sent(dim, op, bytes_in) / dim.bytes_per_ns


def chunk_phases(
    instance: Instance, collective: int, chunk_bytes: float, order: tuple[int, ...]
) -> tuple[PhaseSpec, ...]:
    """The phases of one chunk that visits the dimensions in ``order``.

    An all-reduce runs reduce-scatter over ``order`` then all-gather over its
    reverse; a reduce-scatter runs the first half; an all-gather runs
    all-gather over ``order`` from the shard ``chunk_bytes / prod(n)``.
    """
    network = instance.network
    kind = instance.collectives[collective].kind
    sizes = [network.dimensions[d].size for d in order]
    if kind is Kind.ALL_GATHER:
        plan = [(d, Op.ALL_GATHER) for d in order]
        x = chunk_bytes / math.prod(sizes)
    else:
        plan = [(d, Op.REDUCE_SCATTER) for d in order]
        if kind is Kind.ALL_REDUCE:
            plan += [(d, Op.ALL_GATHER) for d in reversed(order)]
        x = float(chunk_bytes)
    phases = []
    for d, op in plan:
        n = network.dimensions[d].size
        out = x / n if op is Op.REDUCE_SCATTER else x * n
        phases.append(PhaseSpec(d, op, x, out, phase_duration(network, d, op, x)))
        x = out
    return tuple(phases)
