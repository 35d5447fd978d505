"""The compiled model of an instance: what is worked out from it once, and kept while it lives.

:func:`model_of` gives an instance's :class:`Model`, the one owner of everything derived from the
instance that more than one part reads: the phase plans' costs per chunk class and order
(:class:`ClassCost`, :class:`OrderProfile`), each task's shortest duration, the task graph's heads
and tails (the tail policy's priorities, the bounds' releases and deliveries), and the compiled
core's arrays. The simulator, the searches, the bounds and the CP-SAT model read them here, so
each is computed once per instance whatever reads it first.

Everything here is a fact of the model (no bound is proven here): the bounds in
:mod:`themis_opt.bounds` are built from these quantities.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, assert_never

from themis_opt.budget import Deadline
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
from themis_opt.policies import baseline_order, planned_bytes


@dataclass
class Model:
    """One instance's compiled model: its derived quantities, computed on first use.

    Parameters
    ----------
    memo
        The answers worked out so far, by name (shared by every process the instance is sent to).
    plans
        Every chunk phase plan asked for so far (:func:`chunk_plan`), by the collective's shape,
        the chunk's size, its order and whether the baseline merges it.
    local
        What belongs to this process only (the compiled core's arrays and their addresses): not
        pickled with the instance.
    """

    memo: dict[str, Any] = field(default_factory=dict)
    local: dict[str, Any] = field(default_factory=dict)
    plans: dict[tuple[Any, ...], tuple[PhaseSpec, ...]] = field(default_factory=dict)

    def __getstate__(self) -> dict[str, Any]:
        return {"memo": self.memo, "local": {}, "plans": self.plans}


def model_of(instance: Instance) -> Model:
    """``instance``'s :class:`Model`, kept on the instance itself (as its cached properties are):
    a cache keyed by the instance would hash every task and dependency per call.
    """
    found: Model | None = instance.__dict__.get("_model")
    if found is None:
        found = instance.__dict__["_model"] = Model()
    return found


def offsets(lengths: Iterable[int]) -> array[int]:
    """Where each of ``lengths`` starts, and the total (CSR offsets)."""
    return array("q", [0, *itertools.accumulate(lengths)])


def task_graph(instance: Instance) -> dict[str, array[Any]]:
    """The task graph as typed arrays, made once per instance, as both engines read it (the C
    core's ``Model`` points at them): per task whether it is a collective (``is_coll``), its index
    among the collectives or the compute tasks (``which``), its issue time and count of
    dependencies (``pending_in``), its successors and their lags (CSR: ``succ_ptr``,
    ``succ_task``, ``succ_lag``); per collective its chunks, its first chunk's index, its priority,
    its task, its active dimensions (CSR: ``active_ptr``, ``active``) and the bytes Themis plans
    a chunk by (``nominal``); per compute task its duration and task; per dimension its size and
    bandwidth.
    """
    found: dict[str, array[Any]] | None = model_of(instance).memo.get("task_graph")
    if found is not None:
        return found
    tasks = instance.tasks
    colls = instance.collectives
    is_coll = [isinstance(t, Collective) for t in tasks]
    which, counts = [], [0, 0]
    for flag in is_coll:
        which.append(counts[flag])
        counts[flag] += 1
    succ_ptr, succ_task, succ_lag = _successors(instance)
    dims = instance.network.dimensions
    active = instance.active_dims
    chunks = [c.chunks for c in colls]
    found = {
        "is_coll": array("B", is_coll),
        "which": array("i", which),
        "issue": array("d", [t.issue_ns for t in tasks]),
        "pending_in": array("i", [len(t.after) for t in tasks]),
        "succ_ptr": succ_ptr,
        "succ_task": succ_task,
        "succ_lag": succ_lag,
        "chunks": array("i", chunks),
        "first_chunk": array("i", offsets(chunks)[:-1]),
        "priority": array("q", [c.priority for c in colls]),
        "task_of_coll": array("i", [t for t, flag in enumerate(is_coll) if flag]),
        "active_ptr": offsets(len(a) for a in active),
        "active": array("i", [d for a in active for d in a]),
        "nominal": array("q", [planned_bytes(instance, c) for c in range(len(colls))]),
        "compute_dur": array("d", [t.duration_ns for t in instance.computes]),
        "task_of_compute": array("i", [t for t, flag in enumerate(is_coll) if not flag]),
        "dim_size": array("q", [d.size for d in dims]),
        "dim_bandwidth": array("d", [d.bandwidth_gbps for d in dims]),
    }
    model_of(instance).memo["task_graph"] = found
    return found


def _successors(instance: Instance) -> tuple[array[int], array[int], array[float]]:
    """Per task the tasks waiting for it and their lags (CSR), in task order and then ``after``
    order: the predecessors turned around at once (a million dependencies in milliseconds).
    """
    preds = instance.predecessors
    lags = dependency_lags(instance)
    edges = sum(map(len, preds))
    if not edges:  # no graph (a single collective, a set issued at times): numpy not even imported
        return array("q", bytes(8 * (len(preds) + 1))), array("i"), array("d")
    import numpy as np  # imported here: half a command's start where there is no graph

    before = np.fromiter(itertools.chain.from_iterable(preds), dtype=np.int64, count=edges)
    waiting = np.repeat(np.arange(len(preds), dtype=np.int32), [len(p) for p in preds])
    by_before = np.argsort(before, kind="stable")
    lag = np.fromiter(itertools.chain.from_iterable(lags), dtype=np.float64, count=edges)
    ptr = np.zeros(len(preds) + 1, dtype=np.int64)
    np.cumsum(np.bincount(before, minlength=len(preds)), out=ptr[1:])
    return array("q", ptr.tobytes()), array("i", waiting[by_before].tobytes()), array("d", lag[by_before].tobytes())


def plan_key(
    instance: Instance, collective: int, nbytes: float, order: tuple[int, ...], merged: bool = False
) -> tuple[Any, ...]:
    """What a chunk's phase plan depends on: its collective's shape, its size, its order and
    whether the baseline merges it (chunks of one key share their plan).
    """
    coll = instance.collectives[collective]
    # a group's ring costs differ by its members, and a chunk's share by how its collective is cut
    cut = (coll.chunks, coll.chunk_bytes, coll.last_chunk_bytes) if coll.group else ()
    return coll.kind, coll.group, cut, nbytes, order, merged


def chunk_plan(
    instance: Instance, collective: int, nbytes: float, order: tuple[int, ...], merged: bool = False
) -> tuple[PhaseSpec, ...]:
    """The phases of a chunk of ``nbytes`` of ``collective`` taking ``order`` (``merged``: as the
    baseline runs it), from the cost model (:func:`~themis_opt.cost.chunk_phases`), worked out once
    per shape: every part that needs a phase plan reads it here.
    """
    key = plan_key(instance, collective, nbytes, order, merged)
    plans = model_of(instance).plans
    found = plans.get(key)
    if found is None:
        found = plans[key] = chunk_phases(instance, collective, nbytes, tuple(order), merged)
    return found


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


def traffic_bytes(instance: Instance, collective: int, deadline: Deadline | None = None) -> float:
    """What one NPU moves for a whole collective, whatever the orders, in bytes
    at the bandwidths of the dimensions that carry it.

    Where every algorithm of the collective moves its bytes at the
    dimension's bandwidth, that is the data it sends: x (N - 1) / N for a
    reduce-scatter over N NPUs, whatever the order. Elsewhere (a fully
    connected dimension under a ring, a double binary tree, messages that do
    not share a port) it is the least, over the orders, of each phase's
    :func:`~themis_opt.cost.wire_time` times its dimension's bandwidth.
    Computed once per kind, dimensions, size and chunking; 0 (valid, weaker)
    where it takes the least over the orders and ``deadline`` has passed.
    """
    deadline = deadline or Deadline()
    coll = instance.collectives[collective]
    dims = instance.active_dims[collective]
    key = (coll.kind, dims, coll.size_bytes, coll.chunks, coll.chunk_bytes)
    memo = model_of(instance).memo.setdefault("traffic", {})
    found: float | None = memo.get(key)
    if found is not None:
        return found
    if coll.kind is Kind.ALL_TO_ALL:  # one fixed order, the size kept: each dimension's share is fixed
        phases = chunk_plan(instance, collective, float(coll.size_bytes), dims)
        found = sum(_weighted(instance, collective, p) for p in phases)
    elif _moves_at_bandwidth(instance, collective):
        npus = math.prod(instance.network.dimensions[d].size for d in dims)
        one_way = coll.size_bytes * (npus - 1) / npus
        found = 2 * one_way if coll.kind is Kind.ALL_REDUCE else one_way
    elif deadline.expired():  # the closed forms above cost nothing; only the least over the orders takes time
        return 0.0
    else:
        found = sum(
            len(cls.chunks) * _least_weighted(instance, cls) for cls in classes_by_collective(instance)[collective]
        )
    memo[key] = found
    return found


def classes_by_collective(instance: Instance) -> list[list[ChunkClass]]:
    """Per collective, its chunk classes."""
    memo = model_of(instance).memo
    found: list[list[ChunkClass]] | None = memo.get("classes")
    if found is None:
        found = [[] for _ in instance.collectives]
        for cls in instance.chunk_classes:
            found[cls.collective].append(cls)
        memo["classes"] = found
    return found


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
        return min(
            sum(_weighted(instance, c, p) for p in phases) for phases in chunk_ways(instance, c, cls.chunk_bytes)
        )
    return sum(_weighted(instance, c, p) for p in _smallest_phases(instance, cls))


def chunk_ways(instance: Instance, collective: int, chunk_bytes: int) -> Iterator[tuple[PhaseSpec, ...]]:
    """Every way a chunk may run: each order, and the baseline's order merged where the baseline merges."""
    for order in instance.orders[collective]:
        yield chunk_plan(instance, collective, chunk_bytes, order)
        if order == baseline_order(instance, collective) and merges(instance, collective, baseline=True):
            yield chunk_plan(instance, collective, chunk_bytes, order, merged=True)


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


def shortest_durations(instance: Instance, deadline: Deadline | None = None) -> tuple[float, ...]:
    """Per task, a lower bound on how long it lasts: a compute task's duration;
    for a collective, its slowest chunk class taking that class's fastest order.

    A collective whose classes are not all costed by ``deadline`` lasts 0 (valid, weaker); the
    answer is kept for later calls only when complete.
    """
    found: tuple[float, ...] | None = model_of(instance).memo.get("shortest")
    if found is not None:
        return found
    deadline = deadline or Deadline()
    fastest = [0.0] * len(instance.collectives)
    complete = True
    durations = model_of(instance).memo.setdefault("durations", {})  # by kind, dimensions, size and chunking
    for c, classes in enumerate(classes_by_collective(instance)):
        coll = instance.collectives[c]
        key = (coll.kind, instance.active_dims[c], coll.size_bytes, coll.chunks, coll.chunk_bytes)
        if key in durations:
            fastest[c] = durations[key]
            continue
        costs = [class_cost(instance, cls, deadline) for cls in classes]
        known = [(cls, cost) for cls, cost in zip(classes, costs) if cost is not None]
        complete = complete and len(known) == len(classes)
        if len(known) == len(classes):
            fastest[c] = durations[key] = _least_duration(instance, c, known, deadline)
        elif known:
            fastest[c] = max(cost.fastest for _, cost in known)
    out = []
    c = 0
    for task in instance.tasks:
        if isinstance(task, Compute):
            out.append(task.duration_ns)
        else:
            out.append(fastest[c])
            c += 1
    shortest = tuple(out)
    if complete:
        model_of(instance).memo["shortest"] = shortest
    return shortest


def _least_duration(
    instance: Instance, collective: int, costs: list[tuple[ChunkClass, ClassCost]], deadline: Deadline
) -> float:
    """A lower bound on how long ``collective`` takes once released, from its classes' ``costs``: its
    slowest chunk class on its fastest order; on every dimension, the least time before some chunk
    reaches it, every chunk's least work there and the least time after (a dimension runs its phases
    one after another, ``active_chunks`` at once); its traffic at the bandwidth of its dimensions.
    """
    network = instance.network
    best = max(cost.fastest for _, cost in costs)
    for d in instance.active_dims[collective]:
        heads = [h for _, cost in costs if (h := cost.head[d]) is not None]
        tails = [t for _, cost in costs if (t := cost.tail[d]) is not None]
        if heads and tails:
            best = max(best, min(heads) + sum(len(cls.chunks) * cost.busy[d] for cls, cost in costs) + min(tails))
    rate = sum(network.dimensions[d].bytes_per_ns for d in instance.active_dims[collective])
    return max(best, traffic_bytes(instance, collective, deadline) / (rate * network.active_chunks))


def _fastest_chunk(instance: Instance, cls: ChunkClass) -> float:
    """A lower bound on how long one chunk of ``cls`` takes: its fastest order,
    or, with more than 720 orders to try, every phase at its smallest possible
    input (a reduce-scatter after all other dimensions, an all-gather on the shard).
    """
    cost = class_cost(instance, cls, Deadline())
    assert cost is not None  # no deadline
    return cost.fastest


@dataclass(frozen=True)
class ClassCost:
    """The least one chunk of a class costs, each quantity over every way it may run (its orders,
    and the baseline's merged phases where it merges): no single order need attain them all.

    Parameters
    ----------
    fastest
        The chunk's least duration.
    busy
        Per dimension, its least busy time there, ns, over the phases the dimension runs at once
        (``active_chunks``).
    head
        Per dimension, the least time from its release to its first phase there (``None``: no
        phase there in any order).
    tail
        Per dimension, the least time from the end of its last phase there to its own end.
    """

    fastest: float
    busy: tuple[float, ...]
    head: tuple[float | None, ...]
    tail: tuple[float | None, ...]


def class_cost(instance: Instance, cls: ChunkClass, deadline: Deadline) -> ClassCost | None:
    """The :class:`ClassCost` of ``cls``, computed once per kind, dimensions and chunk size (the
    layers of a model share a few); ``None`` if it is not known and ``deadline`` has passed.
    """
    c = cls.collective
    key = (instance.collectives[c].kind, instance.active_dims[c], cls.chunk_bytes)
    costs = model_of(instance).memo.setdefault("costs", {})
    found: ClassCost | None = costs.get(key)
    if found is None:
        if deadline.expired():
            return None
        found = costs[key] = _class_cost(instance, cls)
    return found


def _class_cost(instance: Instance, cls: ChunkClass) -> ClassCost:
    """:func:`class_cost` computed: over every way to run, or, with more than 720 orders, from
    every phase at its least input (a dimension's head and tail then at 0).
    """
    c = cls.collective
    network = instance.network
    num_dims = network.num_dims
    if instance.order_count(c) <= 720:
        ways = list(chunk_ways(instance, c, cls.chunk_bytes))
        least = least_profile([way_profile(phases, 0.0, num_dims, network.active_chunks) for phases in ways])
        fastest = min(sum(p.duration for p in phases) for phases in ways)
        return ClassCost(fastest, least.busy, least.head, least.tail)
    smallest = _smallest_phases(instance, cls)
    busy = [0.0] * num_dims
    for p in smallest:
        busy[p.dim] += p.duration / network.active_chunks
    if merges(instance, c, baseline=True):
        # the baseline's merged all-reduce phase may be shorter than the two it stands for: a
        # dimension's least is then no more than that phase at its least input
        kind = instance.collectives[c].kind
        npus = math.prod(group_size(network, kind, d) for d in instance.active_dims[c])
        for d in instance.active_dims[c]:
            algorithm = network.dimensions[d].algorithm_for(kind)
            x = cls.chunk_bytes * group_size(network, kind, d) / npus
            merged = phase_duration(network, d, performed(Op.ALL_REDUCE, algorithm), x, algorithm)
            busy[d] = min(busy[d], merged / network.active_chunks)
    active = set(instance.active_dims[c])
    edge = tuple(0.0 if d in active else None for d in range(num_dims))
    return ClassCost(sum(p.duration for p in smallest), tuple(busy), edge, edge)


def earliest_releases(instance: Instance, deadline: Deadline | None = None) -> tuple[float, ...]:
    """Per task, a lower bound on its release: its issue time, and each
    dependency's earliest release plus shortest duration plus lag;
    :class:`~themis_opt.budget.OutOfTime` if ``deadline`` passes first.
    """
    found: tuple[float, ...] | None = model_of(instance).memo.get("heads")
    if found is None:
        deadline = deadline or Deadline()
        found = heads_and_tails(instance, shortest_durations(instance), deadline)[0]
        deadline.check("earliest releases")  # else they may be the issue times alone
    return found


def heads_and_tails(
    instance: Instance, shortest: tuple[float, ...], deadline: Deadline
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per task, its head (a lower bound on its release: its issue time, and every dependency's
    head plus shortest duration plus lag) and its tail (a lower bound on the time from its end to
    the makespan: every task waiting for it, its lag plus shortest duration plus tail), in
    O(tasks + dependencies). Where ``deadline`` passes first: issue times and tails of 0 (valid,
    weaker); kept for later calls only when complete and ``shortest`` is.
    """
    memo = model_of(instance).memo
    if "heads" in memo and memo.get("shortest") is shortest:
        return memo["heads"], memo["tails"]
    tasks = instance.tasks
    n = len(tasks)
    fallback = tuple(task.issue_ns for task in tasks), (0.0,) * n
    preds, lags, order = instance.predecessors, dependency_lags(instance), instance.topological_order
    head = [task.issue_ns for task in tasks]
    tail = [0.0] * n
    for k, t in enumerate(order):
        h = head[t]
        for p, lag in zip(preds[t], lags[t]):
            if head[p] + shortest[p] + lag > h:
                h = head[p] + shortest[p] + lag
        head[t] = h
        if not k % 256 and deadline.expired():
            return fallback
    for k, t in enumerate(reversed(order)):
        after = shortest[t] + tail[t]
        for p, lag in zip(preds[t], lags[t]):
            if lag + after > tail[p]:
                tail[p] = lag + after
        if not k % 256 and deadline.expired():
            return tuple(head), (0.0,) * n
    heads, tails = tuple(head), tuple(tail)
    if memo.get("shortest") is shortest:
        memo["heads"], memo["tails"] = heads, tails
    return heads, tails


def collective_tails(instance: Instance, deadline: Deadline | None = None) -> tuple[float, ...]:
    """Per collective, its task's tail (:func:`heads_and_tails` with :func:`shortest_durations`): the
    least time from its end to the makespan. The tail policy's priorities (see the simulator).

    Raises
    ------
    OutOfTime
        If ``deadline`` passes first (weaker tails would be other priorities, not a slower answer).
    """
    deadline = deadline or Deadline()
    tails = heads_and_tails(instance, shortest_durations(instance), deadline)[1]
    deadline.check("the tail policy's priorities")  # else they may be the fallback's zeros
    return tuple(tails[t] for t, task in enumerate(instance.tasks) if isinstance(task, Collective))


def dependency_lags(instance: Instance) -> tuple[tuple[float, ...], ...]:
    """Per task, its dependencies' lags, beside :attr:`~themis_opt.instance.Instance.predecessors`
    (made once).
    """
    memo = model_of(instance).memo
    found: tuple[tuple[float, ...], ...] | None = memo.get("lags")
    if found is None:
        found = memo["lags"] = tuple(tuple([dep.lag_ns for dep in task.after]) for task in instance.tasks)
    return found


def collective_releases(instance: Instance) -> tuple[float, ...]:
    """Per collective, the lower bound on its release (its issue time without dependencies)."""
    release = earliest_releases(instance)
    return per_collective(instance, release)


def per_collective(instance: Instance, values: tuple[float, ...]) -> tuple[float, ...]:
    """The entries of per-task ``values`` that belong to collectives, in collective order."""
    return tuple(values[t] for t, task in enumerate(instance.tasks) if isinstance(task, Collective))


def way_profile(phases: tuple[PhaseSpec, ...], issue: float, num_dims: int, at_once: int) -> OrderProfile:
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


def least_profile(profiles: list[OrderProfile]) -> OrderProfile:
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
