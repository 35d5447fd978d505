"""The bounds that need no solver (ideal bandwidth, critical path, compute) and the quantities the load
programs are built from: each order's busy time, head and tail per dimension, and the programs' values.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import assert_never

from themis_opt.cost import (
    PhaseSpec,
    chunk_phases,
    group_size,
    merges,
    performed,
    phase_duration,
    phase_plan_of,
    wire_ns,
    wire_time,
)
from themis_opt.instance import AllReducePhases, ChunkClass, Collective, Compute, Instance, Kind, Op
from themis_opt.orders import Counts
from themis_opt.params import BoundsParams
from themis_opt.policies import baseline_order

logger = logging.getLogger(__name__)

BOUNDS = BoundsParams()  # the defaults
SAFETY = 1e-8  # relative: covers the solvers' float tolerances and float sums (a margin, not a tuning number)


@dataclass(frozen=True)
class OrderProfile:
    """What one chunk of a class costs each dimension when it takes one order.

    Parameters
    ----------
    busy
        Per dimension, total duration of the chunk's phases on it, ns, over
        the phases the dimension runs at once (``active_chunks``).
    head
        Per dimension, issue time plus the time the chunk spends before its
        first phase on it (``None`` where it has no phase).
    tail
        Per dimension, time the chunk spends after its last phase on it.
    """

    busy: tuple[float, ...]
    head: tuple[float | None, ...]
    tail: tuple[float | None, ...]


def traffic_bytes(instance: Instance, collective: int) -> float:
    """What one NPU moves for a whole collective, whatever the orders, in bytes
    at the bandwidths of the dimensions that carry it.

    Where every algorithm of the collective moves its bytes at the
    dimension's bandwidth, that is the data it sends: x (N - 1) / N for a
    reduce-scatter over N NPUs, whatever the order. Elsewhere (a fully
    connected dimension under a ring, a double binary tree, messages that do
    not share a port) it is the least, over the orders, of each phase's
    :func:`~themis_opt.cost.wire_time` times its dimension's bandwidth.
    """
    coll = instance.collectives[collective]
    if coll.kind is Kind.ALL_TO_ALL:  # one fixed order, the size kept: each dimension's share is fixed
        phases = chunk_phases(instance, collective, float(coll.size_bytes), instance.active_dims[collective])
        return sum(_weighted(instance, collective, p) for p in phases)
    if _moves_at_bandwidth(instance, collective):
        npus = math.prod(instance.network.dimensions[d].size for d in instance.active_dims[collective])
        one_way = coll.size_bytes * (npus - 1) / npus
        return 2 * one_way if coll.kind is Kind.ALL_REDUCE else one_way
    return sum(
        len(cls.chunks) * _least_weighted(instance, cls)
        for cls in instance.chunk_classes
        if cls.collective == collective
    )


def _weighted(instance: Instance, collective: int, phase: PhaseSpec) -> float:
    """A phase's wire time times its dimension's bandwidth: the bytes it moves at that bandwidth."""
    return wire_ns(instance, collective, phase) * instance.network.dimensions[phase.dim].bytes_per_ns


def _moves_at_bandwidth(instance: Instance, collective: int) -> bool:
    """Whether every phase of ``collective`` moves the bytes it sends at its dimension's bandwidth."""
    network = instance.network
    kind = instance.collectives[collective].kind
    if network.all_reduce_phases is AllReducePhases.PER_DIMENSION and kind is Kind.ALL_REDUCE:
        return False
    if instance.collectives[collective].group:  # a ring of NPUs, its messages costed link by link
        return False
    for d in instance.active_dims[collective]:
        dim = network.dimensions[d]
        algorithm = dim.algorithm_for(kind)
        if algorithm.flattened or algorithm.spec.all_reduces or dim.carved:
            return False
        for op, sent in ((Op.REDUCE_SCATTER, (dim.size - 1) / dim.size), (Op.ALL_GATHER, dim.size - 1.0)):
            if not math.isclose(wire_time(network, d, op, 1.0, algorithm) * dim.bytes_per_ns, sent, rel_tol=1e-12):
                return False
    return True


def _least_weighted(instance: Instance, cls: ChunkClass) -> float:
    """The least bandwidth-weighted traffic of one chunk of ``cls``: over its orders (and the
    baseline's merged phases), or, with more than 720 orders, every phase at its least.
    """
    c = cls.collective
    if instance.order_count(c) <= 720:
        return min(sum(_weighted(instance, c, p) for p in phases) for phases in _variants(instance, c, cls.chunk_bytes))
    return sum(_weighted(instance, c, p) for p in _smallest_phases(instance, cls))


def _variants(instance: Instance, collective: int, chunk_bytes: int) -> Iterator[tuple[PhaseSpec, ...]]:
    """Every way a chunk may run: each order, and the baseline's order merged where the baseline merges."""
    for order in instance.orders[collective]:
        yield chunk_phases(instance, collective, chunk_bytes, order)
        if order == baseline_order(instance, collective) and merges(instance, collective, baseline=True):
            yield chunk_phases(instance, collective, chunk_bytes, order, merged=True)


def _smallest_phases(instance: Instance, cls: ChunkClass) -> list[PhaseSpec]:
    """One phase per place of a chunk of ``cls``, each at the least input any order gives it
    (a reduce-scatter after all other dimensions, an all-gather on the shard).
    """
    c = cls.collective
    network = instance.network
    kind = instance.collectives[c].kind
    dims = instance.active_dims[c]
    npus = math.prod(group_size(network, kind, d) for d in dims)
    phases = []
    for d, place in phase_plan_of(network, kind, dims):
        algorithm = network.dimensions[d].algorithm_for(kind)
        op = performed(place, algorithm)
        n = group_size(network, kind, d)
        match place:
            case Op.REDUCE_SCATTER:
                smallest = cls.chunk_bytes * n / npus
            case Op.ALL_GATHER | Op.ALL_REDUCE:
                smallest = cls.chunk_bytes / npus
            case Op.ALL_TO_ALL | Op.SEND:
                smallest = float(cls.chunk_bytes)
            case _ as unreachable:
                assert_never(unreachable)
        phases.append(PhaseSpec(d, op, smallest, smallest, phase_duration(network, d, op, smallest, algorithm)))
    return phases


def shortest_durations(instance: Instance) -> tuple[float, ...]:
    """Per task, a lower bound on how long it lasts: a compute task's duration;
    for a collective, its slowest chunk class taking that class's fastest order.
    """
    fastest: dict[int, float] = {}
    for cls in instance.chunk_classes:
        fastest[cls.collective] = max(fastest.get(cls.collective, 0.0), _fastest_chunk(instance, cls))
    out = []
    c = 0
    for task in instance.tasks:
        if isinstance(task, Compute):
            out.append(task.duration_ns)
        else:
            out.append(fastest[c])
            c += 1
    return tuple(out)


def _fastest_chunk(instance: Instance, cls: ChunkClass) -> float:
    """A lower bound on how long one chunk of ``cls`` takes: its fastest order,
    or, with more than 720 orders to try, every phase at its smallest possible
    input (a reduce-scatter after all other dimensions, an all-gather on the shard).
    """
    c = cls.collective
    if instance.order_count(c) <= 720:
        return min(sum(p.duration for p in phases) for phases in _variants(instance, c, cls.chunk_bytes))
    return sum(p.duration for p in _smallest_phases(instance, cls))


@functools.lru_cache(maxsize=64)
def earliest_releases(instance: Instance) -> tuple[float, ...]:
    """Per task, a lower bound on its release: its issue time, and each
    dependency's earliest release plus shortest duration plus lag.
    """
    shortest = shortest_durations(instance)
    index = instance.task_index
    release = [task.issue_ns for task in instance.tasks]
    for t in _topological(instance):
        for dep in instance.tasks[t].after:
            p = index[dep.task]
            release[t] = max(release[t], release[p] + shortest[p] + dep.lag_ns)
    return tuple(release)


def _topological(instance: Instance) -> list[int]:
    """The tasks, each after the tasks it waits for."""
    index = instance.task_index
    waiting = [len(task.after) for task in instance.tasks]
    users: list[list[int]] = [[] for _ in instance.tasks]
    for t, task in enumerate(instance.tasks):
        for dep in task.after:
            users[index[dep.task]].append(t)
    ready = [t for t, n in enumerate(waiting) if not n]
    out = []
    while ready:
        t = ready.pop()
        out.append(t)
        for u in users[t]:
            waiting[u] -= 1
            if not waiting[u]:
                ready.append(u)
    return out


def collective_releases(instance: Instance) -> tuple[float, ...]:
    """Per collective, the lower bound on its release (its issue time without dependencies)."""
    release = earliest_releases(instance)
    return tuple(release[t] for t, task in enumerate(instance.tasks) if isinstance(task, Collective))


def critical_path_bound(instance: Instance) -> float:
    """The longest dependency chain, every collective at its shortest duration."""
    shortest = shortest_durations(instance)
    return max(r + d for r, d in zip(earliest_releases(instance), shortest))


def least_busy_bound(instance: Instance, params: BoundsParams = BOUNDS) -> float | None:
    """A dimension's least possible busy time, latency included, with no solver: every chunk at the
    order that costs the dimension least, between the least head and the least tail over all orders
    (the fill-and-drain bound with every choice relaxed), and for every issue time the work issued
    then or later; the largest over the dimensions. ``None`` where the orders are too many to list.
    """
    if not load_programs_fit(instance, params):
        return None
    profiles = order_profiles(instance)
    best = 0.0
    for d in range(instance.network.num_dims):
        least = {cls: min(p.busy[d] for p in per.values()) for cls, per in profiles.items()}
        for t, later in _issue_cuts(instance):
            best = max(best, t + sum(len(cls.chunks) * least[cls] for cls in later))
        used = [p for per in profiles.values() for p in per.values() if p.head[d] is not None]
        if used:
            load = sum(len(cls.chunks) * least[cls] for cls in profiles)
            head = min(p.head[d] for p in used)  # type: ignore[type-var]
            tail = min(p.tail[d] for p in used)  # type: ignore[type-var]
            best = max(best, head + load + tail)  # type: ignore[operator]
    return best * (1 - SAFETY)


def compute_bound(instance: Instance) -> float | None:
    """For every earliest release t of a compute task: t plus the work of the
    compute tasks released no earlier (the compute unit runs one at a time;
    with pipeline stages, of that task's stage: each has its own unit);
    ``None`` without compute tasks.
    """
    release = earliest_releases(instance)
    work = [
        (release[t], task.duration_ns, task.stage) for t, task in enumerate(instance.tasks) if isinstance(task, Compute)
    ]
    if not work:
        return None
    return max(t + sum(d for r, d, k in work if r >= t and k == stage) for t, _, stage in set(work))


def ideal_bound(instance: Instance) -> float:
    """The ideal bandwidth bound.

    For one all-reduce of S bytes over dimensions with N NPUs in all:
    ``2 S (N - 1) / N / sum(B_d)`` (half of it for a reduce-scatter or an
    all-gather). With several collectives, for every release time t (a lower
    bound on when each collective may start), the traffic of the collectives
    released at or after t over the bandwidth of the dimensions they use,
    plus t; the largest of these. With pipeline stages, the largest over the
    stages of each stage's alone (:func:`stage_parts`).
    """
    if instance.num_stages > 1:
        return max(ideal_bound(part) for part in stage_parts(instance))
    dims = instance.network.dimensions
    releases = collective_releases(instance)
    traffic = [traffic_bytes(instance, c) for c in range(len(instance.collectives))]
    best = 0.0
    for t in sorted(set(releases)):
        later = [c for c, r in enumerate(releases) if r >= t]
        used = {d for c in later for d in instance.active_dims[c]}
        rate = sum(dims[d].bytes_per_ns for d in used) * instance.network.active_chunks
        best = max(best, t + sum(traffic[c] for c in later) / rate)
    return best


@functools.lru_cache(maxsize=16)
def order_profiles(instance: Instance) -> dict[ChunkClass, dict[tuple[int, ...], OrderProfile]]:
    """Per chunk class and order, the :class:`OrderProfile` of one chunk
    (heads counted from the collective's earliest release).
    """
    releases = collective_releases(instance)
    num_dims = instance.network.num_dims
    at_once = instance.network.active_chunks
    profiles: dict[ChunkClass, dict[tuple[int, ...], OrderProfile]] = {}
    for cls in instance.chunk_classes:
        issue = releases[cls.collective]
        per_order = {}
        for order in instance.orders[cls.collective]:
            ways = [chunk_phases(instance, cls.collective, cls.chunk_bytes, order)]
            if order == baseline_order(instance, cls.collective) and merges(instance, cls.collective, baseline=True):
                # the baseline's way to run that order: its least costs count too
                ways.append(chunk_phases(instance, cls.collective, cls.chunk_bytes, order, merged=True))
            per_order[order] = _least_profile([_profile(phases, issue, num_dims, at_once) for phases in ways])
        profiles[cls] = per_order
    return profiles


def _profile(phases: tuple[PhaseSpec, ...], issue: float, num_dims: int, at_once: int) -> OrderProfile:
    """One way's profile; a dimension that runs ``at_once`` phases at once is busy a share of each."""
    total = sum(p.duration for p in phases)
    busy = [0.0] * num_dims
    head: list[float | None] = [None] * num_dims
    tail: list[float | None] = [None] * num_dims
    elapsed = 0.0
    for p in phases:
        busy[p.dim] += p.duration / at_once
        if head[p.dim] is None:
            head[p.dim] = issue + elapsed
        elapsed += p.duration
        tail[p.dim] = total - elapsed
    return OrderProfile(tuple(busy), tuple(head), tuple(tail))


def _least_profile(profiles: list[OrderProfile]) -> OrderProfile:
    """Each entry at its least over ``profiles`` (of one order's ways to run): below every one of them."""
    if len(profiles) == 1:
        return profiles[0]

    def least(values: tuple[float | None, ...]) -> float | None:
        present = [v for v in values if v is not None]
        return min(present) if present else None

    return OrderProfile(
        tuple(min(b) for b in zip(*(p.busy for p in profiles))),
        tuple(least(h) for h in zip(*(p.head for p in profiles))),
        tuple(least(t) for t in zip(*(p.tail for p in profiles))),
    )


def _issue_cuts(instance: Instance) -> list[tuple[float, list[ChunkClass]]]:
    """(t, classes released at or after t) for every distinct earliest release t."""
    releases = collective_releases(instance)
    cuts = []
    for t in sorted(set(releases)):
        later = [cls for cls in instance.chunk_classes if releases[cls.collective] >= t]
        cuts.append((t, later))
    return cuts


def load_variables(instance: Instance) -> int:
    """How many order counts the load programs of ``instance`` have."""
    return sum(instance.order_count(cls.collective) for cls in instance.chunk_classes)


def load_programs_fit(instance: Instance, params: BoundsParams = BOUNDS) -> bool:
    """Whether the load programs are small enough to run (see ``params.max_load_variables``); never on
    several pipeline stages, whose dimensions are each stage's own (they run on each stage alone:
    :func:`stage_parts`).
    """
    return instance.num_stages == 1 and load_variables(instance) <= params.max_load_variables


def stage_parts(instance: Instance) -> list[Instance]:
    """Each pipeline stage with a collective, as a one-stage instance of its tasks alone
    (:meth:`~themis_opt.instance.Instance.stage_part`), every task issued no earlier than its earliest
    release in the whole graph (:func:`earliest_releases`, which bounds it in every schedule). A valid
    schedule restricted to a stage's tasks is a valid schedule of its part (the stages share no
    resource, and the dependencies between them become these issue times, which it meets), so every
    lower bound of a part is one of the instance.
    """
    releases = earliest_releases(instance)
    parts = (instance.stage_part(s, releases) for s in range(instance.num_stages))
    return [part for part in parts if part is not None]


def _origin(instance: Instance) -> float:
    """The earliest release of a collective: the load programs measure time from here."""
    return min(collective_releases(instance))


def load_value(instance: Instance, counts: Counts) -> float:
    """The integer load program's objective for the order ``counts``, in ns: over every issue
    time and dimension, the time plus the load of the collectives issued then or later.
    """
    profiles = order_profiles(instance)
    best = 0.0
    for t, later in _issue_cuts(instance):
        for d in range(instance.network.num_dims):
            load = sum(n * profiles[cls][o].busy[d] for cls in later for o, n in counts[cls].items() if n)
            best = max(best, t + load)
    return best


def fill_drain_value(instance: Instance, counts: Counts) -> float:
    """The fill-and-drain program's objective for the order ``counts``, in ns (no rounding)."""
    profiles = order_profiles(instance)
    used = [(cls, o, p) for cls in profiles for o, p in profiles[cls].items() if counts[cls].get(o, 0) > 0]
    best = load_value(instance, counts)
    for d in range(instance.network.num_dims):
        on_d = [(cls, o, p) for cls, o, p in used if p.head[d] is not None]
        if on_d:
            head = min(p.head[d] for _, _, p in on_d)  # type: ignore[type-var]
            tail = min(p.tail[d] for _, _, p in on_d)  # type: ignore[type-var]
            best = max(best, head + tail + sum(counts[cls][o] * p.busy[d] for cls, o, p in on_d))  # type: ignore[operator]
    return best
