"""The bounds that need no solver (ideal bandwidth, critical path, compute) and the quantities the load
programs are built from: each order's busy time, head and tail per dimension, and the programs' values.

They are built from the compiled model's quantities (:mod:`themis_opt.sim.model`: each chunk class's
least costs, each task's shortest duration, the task graph's heads and tails).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from themis_opt.bounds.params import BoundsParams
from themis_opt.budget import Deadline
from themis_opt.cost import merges
from themis_opt.instance import ChunkClass, Compute, Instance
from themis_opt.orders import Counts
from themis_opt.policies import baseline_order
from themis_opt.sim.model import (
    ClassCost,
    OrderProfile,
    chunk_plan,
    class_cost,
    collective_releases,
    earliest_releases,
    least_profile,
    model_of,
    per_collective,
    shortest_durations,
    traffic_bytes,
    way_profile,
)

logger = logging.getLogger(__name__)

BOUNDS = BoundsParams()  # the defaults
SAFETY = 1e-8  # relative: covers the solvers' float tolerances and float sums (a margin, not a tuning number)


def critical_path_bound(instance: Instance) -> float:
    """The longest dependency chain, every collective at its shortest duration."""
    shortest = shortest_durations(instance)
    return max(r + d for r, d in zip(earliest_releases(instance), shortest))


def least_busy_bound(instance: Instance, params: BoundsParams = BOUNDS) -> float | None:
    """A dimension's least possible busy time, latency included, with no solver: every chunk at the
    order that costs the dimension least, between the least head and the least tail over all orders
    (the fill-and-drain bound with every choice relaxed), and for every issue time the work issued
    then or later; the largest over the dimensions. ``params`` is not used (kept for callers).
    """
    del params
    return _least_busy(instance, collective_releases(instance), _costs(instance, Deadline()))


def _costs(instance: Instance, deadline: Deadline) -> list[ClassCost]:
    """Every chunk class's :class:`ClassCost`, in class order; a class not costed by ``deadline``
    costs nothing (valid, weaker).
    """
    num_dims = instance.network.num_dims
    out = []
    for cls in instance.chunk_classes:
        cost = class_cost(instance, cls, deadline)
        if cost is None:  # nothing known but where its phases are: a head and a tail of 0 there
            active = set(instance.active_dims[cls.collective])
            edge = tuple(0.0 if d in active else None for d in range(num_dims))
            cost = ClassCost(0.0, (0.0,) * num_dims, edge, edge)
        out.append(cost)
    return out


def _least_busy(instance: Instance, releases: tuple[float, ...], costs: list[ClassCost]) -> float:
    """:func:`least_busy_bound` from the collectives' ``releases`` and the classes' ``costs``, in
    O(classes log classes) per dimension: every issue time's work from suffix sums.
    """
    classes = instance.chunk_classes
    by_release = sorted(range(len(classes)), key=lambda i: releases[classes[i].collective], reverse=True)
    best = 0.0
    for d in range(instance.network.num_dims):
        work = [len(cls.chunks) * cost.busy[d] for cls, cost in zip(classes, costs)]
        load = sum(work)  # in class order: the same sum as every issue time's when there is one
        if len({releases[cls.collective] for cls in classes}) == 1:
            best = max(best, releases[classes[0].collective] + load)
        else:
            later = 0.0
            for k, i in enumerate(by_release):
                later += work[i]
                t = releases[classes[i].collective]
                if k + 1 == len(by_release) or releases[classes[by_release[k + 1]].collective] != t:
                    best = max(best, t + later)
        heads = [releases[cls.collective] + h for cls, cost in zip(classes, costs) if (h := cost.head[d]) is not None]
        tails = [q for cost in costs if (q := cost.tail[d]) is not None]
        if heads and tails:
            best = max(best, min(heads) + load + min(tails))
    return best * (1 - SAFETY)


def compute_bound(instance: Instance) -> float | None:
    """For every earliest release t of a compute task: t plus the work of the
    compute tasks released no earlier (the compute unit runs one at a time;
    with pipeline stages, of that task's stage: each has its own unit);
    ``None`` without compute tasks.
    """
    return _compute(instance, earliest_releases(instance))


def _compute(instance: Instance, release: tuple[float, ...]) -> float | None:
    """:func:`compute_bound` from per-task ``release``, each stage's compute unit apart, by suffix sums:
    O(n log n).
    """
    by_stage: dict[int, list[tuple[float, float]]] = {}
    for t, task in enumerate(instance.tasks):
        if isinstance(task, Compute):
            by_stage.setdefault(task.stage, []).append((release[t], task.duration_ns))
    if not by_stage:
        return None
    best = 0.0
    for work in by_stage.values():
        work.sort(reverse=True)
        later = 0.0
        for k, (r, d) in enumerate(work):
            later += d
            if k + 1 == len(work) or work[k + 1][0] != r:
                best = max(best, r + later)
    return best


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
    return _ideal(instance, collective_releases(instance), Deadline())


def _ideal(instance: Instance, releases: tuple[float, ...], deadline: Deadline) -> float:
    """:func:`ideal_bound` from the collectives' ``releases``, by suffix sums: O(n log n); a
    collective whose traffic is not known by ``deadline`` moves nothing (valid, weaker).
    """
    dims = instance.network.dimensions
    traffic = [traffic_bytes(instance, c, deadline) for c in range(len(instance.collectives))]
    at_once = instance.network.active_chunks
    used: set[int] = set()
    if len(set(releases)) == 1:  # the same sums as one issue time always had
        used = {d for c in range(len(releases)) for d in instance.active_dims[c]}
        return releases[0] + sum(traffic) / (sum(dims[d].bytes_per_ns for d in used) * at_once)
    best = 0.0
    later = 0.0
    rate = 0.0
    by_release = sorted(range(len(releases)), key=lambda c: releases[c], reverse=True)
    for k, c in enumerate(by_release):
        later += traffic[c]
        for d in instance.active_dims[c]:
            if d not in used:
                used.add(d)
                rate = sum(dims[e].bytes_per_ns for e in sorted(used)) * at_once
        t = releases[c]
        if k + 1 == len(by_release) or releases[by_release[k + 1]] != t:
            best = max(best, t + later / rate)
    return best


@functools.lru_cache(maxsize=16)
def order_profiles(instance: Instance) -> dict[ChunkClass, dict[tuple[int, ...], OrderProfile]]:
    """Per chunk class and order, the :class:`~themis_opt.sim.model.OrderProfile` of one chunk
    (heads counted from the collective's earliest release).
    """
    releases = collective_releases(instance)
    num_dims = instance.network.num_dims
    at_once = instance.network.active_chunks
    profiles: dict[ChunkClass, dict[tuple[int, ...], OrderProfile]] = {}
    # a chunk's phases depend on its collective only through these (the layers of a model share a few)
    shapes: dict[tuple[Any, ...], dict[tuple[int, ...], OrderProfile]] = {}
    for cls in instance.chunk_classes:
        c = cls.collective
        coll = instance.collectives[c]
        key = (coll.kind, coll.group, coll.size_bytes, coll.chunks, instance.active_dims[c], cls.chunk_bytes)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = {}
            for order in instance.orders[c]:
                ways = [chunk_plan(instance, c, cls.chunk_bytes, order)]
                if order == baseline_order(instance, c) and merges(instance, c, baseline=True):
                    # the baseline's way to run that order: its least costs count too
                    ways.append(chunk_plan(instance, c, cls.chunk_bytes, order, merged=True))
                shape[order] = least_profile([way_profile(phases, 0.0, num_dims, at_once) for phases in ways])
        issue = releases[c]
        profiles[cls] = {
            order: OrderProfile(p.busy, tuple(None if h is None else issue + h for h in p.head), p.tail)
            for order, p in shape.items()
        }
    return profiles


def _issue_cuts(instance: Instance, every: bool = False) -> list[tuple[float, list[ChunkClass]]]:
    """(t, classes released at or after t) for the distinct earliest releases t (``every``), or for
    those of them that can bind.

    A cut reads ``makespan >= t + (on some dimension) the load of the classes released at or after t``.
    It cannot bind where the classes released from t up to a later cut kept, t', load no dimension
    for longer than t' - t in any of their orders: that cut's value is then at least this one's,
    whatever the counts. Such cuts are left out, with 1 ns and a millionth to spare (the programs'
    rounding: fill-and-drain's unit is at most 1 ns below spans of 2^40 ns), except the first
    (fill-and-drain's heads and tails stand for it), so that a pipeline stage of thousands of
    collectives released one after another does not make a program of their square (3,000 releases
    x 3,000 classes); a value over the cuts is the same either way. The cuts come in time order,
    each with its classes in instance order. Kept per instance.
    """
    memo = model_of(instance).memo
    key = "issue_cuts_every" if every else "issue_cuts"
    found: list[tuple[float, list[ChunkClass]]] | None = memo.get(key)
    if found is not None:
        return found
    releases = collective_releases(instance)
    times = sorted(set(releases))
    if not every:
        times = _binding_releases(instance, releases)
    found = [(t, [cls for cls in instance.chunk_classes if releases[cls.collective] >= t]) for t in times]
    memo[key] = found
    return found


def _binding_releases(instance: Instance, releases: tuple[float, ...]) -> list[float]:
    """The releases whose cuts can bind (:func:`_issue_cuts`), ascending."""
    profiles = order_profiles(instance)
    num_dims = instance.network.num_dims
    heaviest: dict[float, list[float]] = {}  # per release, per dimension, its classes' most load
    for cls in instance.chunk_classes:
        most = heaviest.setdefault(releases[cls.collective], [0.0] * num_dims)
        for d in range(num_dims):
            most[d] += len(cls.chunks) * max(p.busy[d] for p in profiles[cls].values())
    times = sorted(heaviest)
    kept = [times[-1]]
    between = [0.0] * num_dims  # the most load released from a cut up to the next one kept
    for t in reversed(times[:-1]):
        between = [b + w for b, w in zip(between, heaviest[t])]
        if t == times[0] or any(b * (1 + 1e-6) + 1.0 >= kept[-1] - t for b in between):  # it may bind
            kept.append(t)
            between = [0.0] * num_dims
    return kept[::-1]


def program_cuts(instance: Instance, params: BoundsParams = BOUNDS) -> list[tuple[float, list[ChunkClass]]]:
    """The issue cuts a load program's rows take: every one, unless they hold more than
    ``params.every_cut_entries`` classes counted with repeats (the square of the releases where they
    come one after another); then those that can bind (:func:`_issue_cuts`: the same optimum).
    """
    releases = collective_releases(instance)
    rank = {t: i + 1 for i, t in enumerate(sorted(set(releases)))}  # the cuts at or before a release
    entries = sum(rank[releases[cls.collective]] for cls in instance.chunk_classes)
    return _issue_cuts(instance, every=entries <= params.every_cut_entries)


def load_variables(instance: Instance) -> int:
    """How many order counts the load programs of ``instance`` have."""
    return sum(instance.order_count(cls.collective) for cls in instance.chunk_classes)


def load_programs_fit(instance: Instance, params: BoundsParams = BOUNDS) -> bool:
    """Whether the load programs are small enough to run (see ``params.max_load_variables``); never on
    several pipeline stages, whose dimensions are each stage's own (they run on each stage alone:
    :func:`stage_parts`).
    """
    return instance.num_stages == 1 and load_variables(instance) <= params.max_load_variables


def stage_parts(instance: Instance, deadline: Deadline | None = None) -> list[Instance]:
    """Each pipeline stage with a collective, as a one-stage instance of its tasks alone
    (:meth:`~themis_opt.instance.Instance.stage_part`), every task issued no earlier than its earliest
    release in the whole graph (:func:`~themis_opt.sim.model.earliest_releases`, which bounds it in
    every schedule). A valid schedule restricted to a stage's tasks is a valid schedule of its part
    (the stages share no resource, and the dependencies between them become these issue times, which
    it meets), so every lower bound of a part is one of the instance. Kept per instance once complete; ``deadline`` is
    checked between parts (:class:`~themis_opt.budget.OutOfTime` when it passes first).
    """
    memo = model_of(instance).memo
    found: list[Instance] | None = memo.get("stage_parts")
    if found is None:  # kept: the bounds and balanced each split the stages (0.1-0.2 s on 24,000 phases)
        deadline = deadline or Deadline()
        releases = earliest_releases(instance, deadline)
        found = []
        for stage in range(instance.num_stages):
            deadline.check("splitting the pipeline stages")
            part = instance.stage_part(stage, releases)
            if part is not None:
                found.append(part)
        memo["stage_parts"] = found
    return list(found)


def load_origin(instance: Instance, deadline: Deadline | None = None) -> float:
    """The earliest release of a collective: the load programs measure time from here
    (:class:`~themis_opt.budget.OutOfTime` if the releases are not known by ``deadline``).
    """
    return min(per_collective(instance, earliest_releases(instance, deadline)))


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
