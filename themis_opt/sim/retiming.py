"""Schedules from fixed orders *and* fixed sequences: every phase and compute task at its earliest start.

CP-SAT's and the sequence search's answers are sequences per dimension; these
functions turn them into timed schedules (left-shifted: nothing can start
earlier without changing a sequence). With pipeline stages a sequence is per
stage's dimension, keyed by its lane ``stage * num_dims + dim``
(:meth:`~themis_opt.instance.Instance.lane`), and the compute sequence is
followed per stage.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from themis_opt.errors import InputError
from themis_opt.instance import Collective, Instance
from themis_opt.orders import Orders, check_orders
from themis_opt.schedule import Schedule
from themis_opt.sim.engine import build_schedule, phase_plan


def sequences_of(instance: Instance, schedule: Schedule) -> dict[int, list[tuple[int, int]]]:
    """Per dimension (per lane: a stage's dimension), the phases of ``schedule`` by start time, as
    (chunk index in ``instance.chunk_ids``, phase position in the chunk).
    """
    index = {cid: i for i, cid in enumerate(instance.chunk_ids)}
    entries: dict[int, list[tuple[float, float, int, int]]] = {}
    for chunk in schedule.chunks:
        i = index[(chunk.collective, chunk.chunk)]
        for p, phase in enumerate(chunk.phases):
            entries.setdefault(instance.lane(chunk.collective, phase.dim), []).append(
                (phase.start_ns, phase.end_ns, i, p)
            )
    return {d: [(i, p) for _, _, i, p in sorted(seq)] for d, seq in entries.items()}


def compute_sequence_of(schedule: Schedule) -> list[int]:
    """The compute tasks of ``schedule`` in the order the compute unit runs them."""
    return [c.compute for c in sorted(schedule.computes, key=lambda c: (c.start_ns, c.end_ns, c.compute))]


def left_shift(
    instance: Instance,
    orders: Orders,
    sequences: Mapping[int, Sequence[tuple[int, int]]],
    compute_sequence: Sequence[int] = (),
    *,
    durations: Sequence[Sequence[float]] | None = None,
    compute_durations: Sequence[float] | None = None,
    issues: Sequence[float] | None = None,
    lags: Sequence[Sequence[float]] | None = None,
) -> tuple[list[list[float]], list[float]]:
    """Earliest start of every phase and compute task given fixed orders and sequences.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk).
    sequences
        Per dimension (per lane, with stages), the phases it serves in that
        order, each as (chunk index in ``instance.chunk_ids``, phase position
        in the chunk).
    compute_sequence
        The compute tasks (indices) in the order the compute unit runs them
        (with stages: each stage's unit runs its own in this order).
    durations, compute_durations, issues, lags
        Per chunk the duration of each phase, per compute task its duration,
        per task its issue time and the lag of each of its dependencies, all
        in one unit; ``None`` takes the instance's (pass rounded values to
        plan in integer time).

    Returns
    -------
    tuple
        Per chunk (in ``instance.chunk_ids`` order) each phase's start, and
        each compute task's start.

    Raises
    ------
    InputError
        If the sequences miss or repeat a phase or a compute task, or
        contradict the chunk orders or the dependencies.
    """
    check_orders(instance, orders)
    plan = phase_plan(instance, orders)
    tasks = instance.tasks
    dur = durations if durations is not None else [[s.duration for s in p] for p in plan]
    cdur = compute_durations if compute_durations is not None else [t.duration_ns for t in instance.computes]
    issue = issues if issues is not None else [t.issue_ns for t in tasks]
    lag = lags if lags is not None else [[d.lag_ns for d in t.after] for t in tasks]
    ids = instance.chunk_ids
    # nodes: phases, then compute tasks, then one release and one end per task
    offset = [0] * (len(ids) + 1)
    for i, chunk_plan in enumerate(plan):
        offset[i + 1] = offset[i] + len(chunk_plan)
    phases = offset[-1]
    computes = len(instance.computes)
    release0, end0 = phases + computes, phases + computes + len(tasks)
    size = end0 + len(tasks)
    succ: list[list[tuple[int, float]]] = [[] for _ in range(size)]
    base = [0.0] * size
    length = [0.0] * size
    task_of_coll = [t for t, task in enumerate(tasks) if isinstance(task, Collective)]
    task_of_compute = [t for t, task in enumerate(tasks) if not isinstance(task, Collective)]
    seen_phase = [False] * phases
    capacity = instance.network.active_chunks
    lane_of: dict[int, int] = {}  # with several phases at once: a phase node's dimension
    for d, seq in sequences.items():
        for pos, (i, p) in enumerate(seq):
            if not (0 <= i < len(ids) and 0 <= p < len(plan[i])) or instance.lane(ids[i][0], plan[i][p].dim) != d:
                raise InputError(f"sequences[{d}][{pos}]", f"no phase ({i}, {p}) runs on dimension {d}")
            if seen_phase[offset[i] + p]:
                raise InputError(f"sequences[{d}][{pos}]", f"phase ({i}, {p}) is sequenced twice")
            seen_phase[offset[i] + p] = True
            if capacity > 1:
                lane_of[offset[i] + p] = d
            if pos:
                j, q = seq[pos - 1]
                # one at a time: after the one before ends; several: no earlier than it starts (below:
                # and once fewer than ``capacity`` of the ones before are still running)
                gap = 0.0 if capacity == 1 else -math.inf
                succ[offset[j] + q].append((offset[i] + p, gap))
    if not all(seen_phase):
        raise InputError("sequences", f"must sequence all {phases} phases, got {sum(seen_phase)}")
    if sorted(compute_sequence) != list(range(computes)):
        raise InputError("compute_sequence", f"must list every compute task once, got {list(compute_sequence)}")
    before: dict[int, int] = {}  # per stage, the compute task its unit ran last
    for b in compute_sequence:
        stage = instance.computes[b].stage
        if stage in before:
            succ[phases + before[stage]].append((phases + b, 0.0))
        before[stage] = b
    for i, (c, _) in enumerate(ids):
        for p in range(len(plan[i])):
            length[offset[i] + p] = dur[i][p]
            if p:
                succ[offset[i] + p - 1].append((offset[i] + p, 0.0))
        succ[release0 + task_of_coll[c]].append((offset[i], 0.0))
        succ[offset[i + 1] - 1].append((end0 + task_of_coll[c], 0.0))
    for j in range(computes):
        length[phases + j] = cdur[j]
        succ[release0 + task_of_compute[j]].append((phases + j, 0.0))
        succ[phases + j].append((end0 + task_of_compute[j], 0.0))
    for t, waited in enumerate(instance.predecessors):
        base[release0 + t] = issue[t]
        for p, wait in zip(waited, lag[t]):
            succ[end0 + p].append((release0 + t, wait))
    indegree = [0] * size
    for edges in succ:
        for v, _ in edges:
            indegree[v] += 1
    start = list(base)
    stack = [v for v in range(size) if not indegree[v]]
    done = 0
    running: dict[int, list[float]] = {d: [] for d in sequences}  # the latest ends on each dimension
    while stack:
        u = stack.pop()
        done += 1
        if u in lane_of:  # every phase before it on its dimension is placed: wait for a free place
            ends = running[lane_of[u]]  # the ``capacity`` latest ends so far, least first
            if len(ends) == capacity:
                start[u] = max(start[u], ends[0])
                heapq.heappushpop(ends, start[u] + length[u])
            else:
                heapq.heappush(ends, start[u] + length[u])
        end = start[u] + length[u]
        for v, extra in succ[u]:
            if extra == -math.inf:  # start after start
                if start[u] > start[v]:
                    start[v] = start[u]
            elif end + extra > start[v]:
                start[v] = end + extra
            indegree[v] -= 1
            if not indegree[v]:
                stack.append(v)
    if done != size:
        raise InputError("sequences", "contradict the chunk orders or the dependencies (a cycle of precedences)")
    phase_starts = [[start[offset[i] + p] for p in range(len(plan[i]))] for i in range(len(ids))]
    return phase_starts, [start[phases + j] for j in range(computes)]


def retime(
    instance: Instance,
    orders: Orders,
    sequences: Mapping[int, Sequence[tuple[int, int]]],
    compute_sequence: Sequence[int] = (),
) -> Schedule:
    """The left-shifted schedule of fixed orders and sequences, with the cost
    model's durations (see :func:`left_shift`).
    """
    starts, compute_starts = left_shift(instance, orders, sequences, compute_sequence)
    return build_schedule(instance, orders, phase_plan(instance, orders), starts, compute_starts)
