"""A chunk's phases: which dimension and part of its collective each runs, what it moves, how long.

:func:`chunk_phases` is the one place the model's durations are defined
(the model: :mod:`themis_opt.cost`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import assert_never

from themis_opt.cost.flattened import _flattened_duration
from themis_opt.cost.groups import group_chunk_ns, group_ring_ns, send_ns
from themis_opt.cost.steps import _duration, phase_delay_of
from themis_opt.instance import Algorithm, AllReducePhases, Instance, Kind, Network, Op


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a chunk, untimed: where it runs, what it moves, how long.

    Parameters
    ----------
    dim
        Dimension index.
    op
        What the phase does (a double binary tree always all-reduces).
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


def performed(op: Op, algorithm: Algorithm) -> Op:
    """What a phase in the place of ``op`` does under ``algorithm``: a double binary tree all-reduces."""
    return algorithm.spec.performed(op)


def group_size(network: Network, kind: Kind, d: int) -> int:
    """NPUs one phase of a ``kind`` collective on dimension ``d`` spans (every NPU when flattened)."""
    return network.num_npus if network.flattened(kind) else network.dimensions[d].size


def phase_duration(network: Network, d: int, op: Op, bytes_in: float, algorithm: Algorithm | None = None) -> float:
    """Duration in ns of a phase of ``op`` with ``bytes_in`` on dimension ``d``.

    ``algorithm`` defaults to the dimension's algorithm for ``op`` (its
    all-reduce algorithm for reduce-scatter, all-gather and all-reduce
    phases, its all-to-all algorithm for all-to-all ones).
    """
    algorithm = algorithm or _algorithm_of(network, d, op)
    op = performed(op, algorithm)
    if algorithm.flattened:
        return _flattened_duration(network, algorithm, op, float(bytes_in), False)
    return _duration(network, d, algorithm, op, float(bytes_in), False)


def phase_delay_ns(network: Network, d: int, op: Op, bytes_in: float, algorithm: Algorithm | None = None) -> float:
    """What :func:`phase_duration` adds once to a phase beyond its steps' messages: the network's
    phase delay and the phase's reductions (each step's message adds
    :func:`~themis_opt.cost.steps.message_delay_ns`).
    """
    algorithm = algorithm or _algorithm_of(network, d, op)
    op = performed(op, algorithm)
    if algorithm.flattened:
        assert algorithm.spec.unflattened is not None  # a flattened algorithm runs its unflattened one over every NPU
        return phase_delay_of(network, algorithm.spec.unflattened, op, network.num_npus, float(bytes_in))
    return phase_delay_of(network, algorithm, op, network.dimensions[d].size, float(bytes_in))


def _algorithm_of(network: Network, d: int, op: Op) -> Algorithm:
    """Dimension ``d``'s algorithm for a phase of ``op`` (its all-to-all one for an all-to-all phase)."""
    dim = network.dimensions[d]
    return dim.all_to_all_algorithm if op is Op.ALL_TO_ALL else dim.algorithm


def wire_time(network: Network, d: int, op: Op, bytes_in: float, algorithm: Algorithm) -> float:
    """The part of a phase's duration that its bytes take (no delay, latency or overhead)."""
    op = performed(op, algorithm)
    if algorithm.flattened:
        return _flattened_duration(network, algorithm, op, float(bytes_in), True)
    return _duration(network, d, algorithm, op, float(bytes_in), True)


def phase_plan_of(network: Network, kind: Kind, order: tuple[int, ...], merged: bool = False) -> list[tuple[int, Op]]:
    """The (dimension, place) of each phase of a chunk of ``kind`` taking ``order``.

    The place is the phase's part of the collective (a double binary tree
    all-reduces in either place); no two phases of a chunk share one.
    ``merged`` runs the last dimension of an all-reduce's order as one
    all-reduce phase (the baseline under ``local_bw_aware``).
    """
    match kind:
        case Kind.ALL_REDUCE:
            if network.all_reduce_phases is AllReducePhases.PER_DIMENSION:
                return [(d, Op.ALL_REDUCE) for d in order]
            if merged:
                rest = order[:-1]
                return (
                    [(d, Op.REDUCE_SCATTER) for d in rest]
                    + [(order[-1], Op.ALL_REDUCE)]
                    + [(d, Op.ALL_GATHER) for d in reversed(rest)]
                )
            return [(d, Op.REDUCE_SCATTER) for d in order] + [(d, Op.ALL_GATHER) for d in reversed(order)]
        case Kind.REDUCE_SCATTER:
            return [(d, Op.REDUCE_SCATTER) for d in order]
        case Kind.ALL_GATHER:
            return [(d, Op.ALL_GATHER) for d in order]
        case Kind.ALL_TO_ALL:
            return [(d, Op.ALL_TO_ALL) for d in order]
        case Kind.SEND:
            return [(d, Op.SEND) for d in order]
        case _ as unreachable:
            assert_never(unreachable)


def growth(op: Op, n: int) -> float:
    """How a phase of ``op`` on ``n`` NPUs scales the data it holds."""
    match op:
        case Op.REDUCE_SCATTER:
            return 1 / n
        case Op.ALL_GATHER:
            return float(n)
        case Op.ALL_REDUCE | Op.ALL_TO_ALL | Op.SEND:
            return 1.0
        case _ as unreachable:
            assert_never(unreachable)


def merges(instance: Instance, collective: int, baseline: bool) -> bool:
    """Whether a chunk of ``collective`` runs its last dimension as one all-reduce phase."""
    return (
        baseline
        and instance.collectives[collective].kind is Kind.ALL_REDUCE
        and instance.network.all_reduce_phases is AllReducePhases.LOCAL_BW_AWARE
    )


def merging_shortens(instance: Instance) -> bool:
    """Whether the baseline's merged all-reduce phase is shorter than the split phases it stands for
    (a double binary tree on the last dimension: one all-reduce instead of two), so that schedules
    that split every chunk cannot match it.
    """
    for c, coll in enumerate(instance.collectives):
        if merges(instance, c, baseline=True):
            order = instance.active_dims[c]  # an all-reduce's baseline order
            split = sum(p.duration for p in chunk_phases(instance, c, coll.chunk_bytes, order))
            merged = sum(p.duration for p in chunk_phases(instance, c, coll.chunk_bytes, order, merged=True))
            if merged < split * (1 - 1e-12):
                return True
    return False


GROUP_OPS = {
    Kind.ALL_REDUCE: Op.ALL_REDUCE,
    Kind.REDUCE_SCATTER: Op.REDUCE_SCATTER,
    Kind.ALL_GATHER: Op.ALL_GATHER,
    Kind.SEND: Op.SEND,
}


def wire_ns(instance: Instance, collective: int, phase: PhaseSpec) -> float:
    """The part of a phase of ``collective`` that its bytes take (no delay, latency or overhead)."""
    coll = instance.collectives[collective]
    if coll.kind is Kind.SEND:
        return send_ns(instance.network, coll.group[0], coll.group[1], phase.bytes_in, quiet=True)
    if coll.group:
        return group_ring_ns(instance.network, coll.group, phase.op, phase.bytes_in, quiet=True)
    algorithm = instance.network.dimensions[phase.dim].algorithm_for(coll.kind)
    return wire_time(instance.network, phase.dim, phase.op, phase.bytes_in, algorithm)


def collective_plan(
    instance: Instance, collective: int, order: tuple[int, ...], merged: bool = False
) -> list[tuple[int, Op]]:
    """The (dimension, place) of each phase of a chunk of ``collective`` taking ``order``
    (:func:`phase_plan_of`; a group's ring is one phase).
    """
    coll = instance.collectives[collective]
    if coll.group:
        return [(order[0], GROUP_OPS[coll.kind])]
    return phase_plan_of(instance.network, coll.kind, order, merged)


def chunk_phases(
    instance: Instance, collective: int, chunk_bytes: float, order: tuple[int, ...], merged: bool = False
) -> tuple[PhaseSpec, ...]:
    """The phases of one chunk that visits the dimensions in ``order``.

    An all-reduce runs reduce-scatter over ``order`` then all-gather over its
    reverse (see :func:`phase_plan_of` for ``merged`` and the other
    :class:`~themis_opt.instance.AllReducePhases`); a reduce-scatter runs the
    first half; an all-gather runs all-gather over ``order`` from its shard
    (``chunk_bytes`` over what its phases multiply it by); an all-to-all runs
    one all-to-all phase per dimension, size unchanged.
    """
    network = instance.network
    coll = instance.collectives[collective]
    kind = coll.kind
    if kind is Kind.SEND:  # one message
        x = float(chunk_bytes)
        return (PhaseSpec(order[0], Op.SEND, x, x, send_ns(network, coll.group[0], coll.group[1], x)),)
    if coll.group:  # one phase on the group's ring, from the shard for an all-gather
        n, op = len(coll.group), GROUP_OPS[kind]
        x = float(chunk_bytes) / n if kind is Kind.ALL_GATHER else float(chunk_bytes)
        return (PhaseSpec(order[0], op, x, x * growth(op, n), group_chunk_ns(network, coll, op, chunk_bytes)),)
    plan = [
        (d, place, network.dimensions[d].algorithm_for(kind))
        for d, place in phase_plan_of(network, kind, order, merged)
    ]
    x = float(chunk_bytes)
    if kind is Kind.ALL_GATHER:  # an all-gather starts from its shard
        x /= math.prod(growth(performed(place, alg), group_size(network, kind, d)) for d, place, alg in plan)
    phases = []
    for d, place, algorithm in plan:
        op = performed(place, algorithm)
        out = x * growth(op, group_size(network, kind, d))
        phases.append(PhaseSpec(d, op, x, out, phase_duration(network, d, op, x, algorithm)))
        x = out
    return tuple(phases)
