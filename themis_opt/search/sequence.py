"""The sequence search: the order in which each dimension serves its phases, every candidate re-timed
exactly; moves on the critical path mostly, restarts when stuck.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from typing import Any

import themis_opt.sim.core as simcore
import themis_opt.sim.timers as timers
from themis_opt.budget import Deadline
from themis_opt.helpers import can_fork, fork, result_of, stop
from themis_opt.instance import Instance
from themis_opt.result import is_proven
from themis_opt.schedule import Schedule
from themis_opt.search.params import SearchParams
from themis_opt.search.pool import rate_line
from themis_opt.sim import phase_plan, retime, sequences_of

logger = logging.getLogger(__name__)
SEARCH = SearchParams()  # the defaults


def sequences_searchable(instance: Instance) -> bool:
    """Whether :func:`improve_sequences` handles ``instance``: collectives only, no dependencies, one stage."""
    return not instance.is_task_graph and instance.num_stages == 1


class _Sequences:
    """One schedule's orders as a graph of phases (chunk precedences and
    issue times fixed), whose dimension sequences the search changes: each
    candidate is timed by a longest-path pass over it, as
    :func:`~themis_opt.sim.left_shift` would time it.

    Where a dimension runs ``k`` phases at once (``active_chunks``), it is
    ``k`` lanes, each one phase at a time: the start's phases go, by start
    time, to the lowest lane free then, and the search swaps phases within a
    lane and moves them to any lane of their dimension. A candidate's
    makespan is then that of its lanes, which its
    schedule (:meth:`schedule`: every dimension's phases by their lane
    start, left-shifted with ``k`` at once) can only shorten.
    """

    def __init__(self, instance: Instance, schedule: Schedule) -> None:
        self.orders = schedule.orders
        plan = phase_plan(instance, self.orders)
        self.where: list[tuple[int, int]] = []  # node -> (chunk index, phase position)
        self.length: list[float] = []
        self.release: list[float] = []
        self.job_next: list[int] = []
        self.job_prev: list[int] = []
        offset = []
        for i, (c, _) in enumerate(instance.chunk_ids):
            offset.append(len(self.length))
            for p, spec in enumerate(plan[i]):
                node = len(self.length)
                self.where.append((i, p))
                self.length.append(spec.duration)
                self.release.append(instance.collectives[c].issue_ns)
                self.job_prev.append(node - 1 if p else -1)
                self.job_next.append(node + 1 if p + 1 < len(plan[i]) else -1)
        self.lanes = instance.network.active_chunks
        self.start = self._lanes(
            instance,
            {d: [offset[i] + p for i, p in seq] for d, seq in sequences_of(instance, schedule).items()},
            schedule,
        )
        self.compiled = (
            timers.PhaseGraph(self.length, self.release, self.job_next, self.job_prev) if simcore.available() else None
        )

    def time(self, sequences: dict[int, list[int]]) -> tuple[float, list[float], list[float]] | None:
        """Makespan, earliest starts and tails (time from each phase's start
        to the end, past its own duration) of ``sequences``; ``None`` if they
        contradict the chunk orders (a cycle). In the compiled core where it is built.
        """
        if self.compiled is not None:
            return self.compiled.time(list(sequences.values()))  # type: ignore[return-value]
        size = len(self.length)
        length, job_next, job_prev = self.length, self.job_next, self.job_prev
        machine_next = [-1] * size
        indegree = [int(job_prev[v] >= 0) for v in range(size)]
        for seq in sequences.values():
            for a, b in zip(seq, seq[1:]):
                machine_next[a] = b
                indegree[b] += 1
        head = list(self.release)
        stack = [v for v in range(size) if not indegree[v]]
        order = []
        while stack:
            u = stack.pop()
            order.append(u)
            end = head[u] + length[u]
            for v in (job_next[u], machine_next[u]):
                if v >= 0:
                    if end > head[v]:
                        head[v] = end
                    indegree[v] -= 1
                    if not indegree[v]:
                        stack.append(v)
        if len(order) != size:
            return None
        tail = [0.0] * size
        for u in reversed(order):
            after = 0.0
            for v in (job_next[u], machine_next[u]):
                if v >= 0 and length[v] + tail[v] > after:
                    after = length[v] + tail[v]
            tail[u] = after
        return max(h + d for h, d in zip(head, length)), head, tail

    def _lanes(self, instance: Instance, sequences: dict[int, list[int]], schedule: Schedule) -> dict[int, list[int]]:
        """``sequences`` (by dimension) by lane, keyed ``d * lanes + lane``; with one phase at a
        time, as they are.
        """
        if self.lanes == 1:
            return sequences
        index = {cid: i for i, cid in enumerate(instance.chunk_ids)}
        starts: dict[tuple[int, int], float] = {}
        for chunk in schedule.chunks:
            for p, phase in enumerate(chunk.phases):
                starts[(index[(chunk.collective, chunk.chunk)], p)] = phase.start_ns
        found: dict[int, list[int]] = {}
        for d, seq in sequences.items():
            free = [-math.inf] * self.lanes  # each lane's last end
            for v in seq:
                start = starts[self.where[v]]
                lane = next((n for n in range(self.lanes) if free[n] <= start), None)
                if lane is None:  # not from a valid schedule's times: the lane that frees first
                    lane = min(range(self.lanes), key=free.__getitem__)
                free[lane] = start + self.length[v]
                found.setdefault(d * self.lanes + lane, []).append(v)
        return found

    def schedule(self, instance: Instance, sequences: dict[int, list[int]]) -> Schedule:
        """The exact left-shifted schedule of ``sequences`` (lanes merged by their starts)."""
        if self.lanes > 1:
            timed = self.time(sequences)
            assert timed is not None
            head = timed[1]
            merged: dict[int, list[tuple[float, int, int]]] = {}
            for key, seq in sequences.items():
                merged.setdefault(key // self.lanes, []).extend((head[v], key, v) for v in seq)
            sequences = {d: [v for _, _, v in sorted(entries)] for d, entries in merged.items()}
        return retime(instance, self.orders, {d: [self.where[v] for v in seq] for d, seq in sequences.items()})


def improve_sequences_per_start(
    instance: Instance,
    starts: Sequence[Schedule],
    *,
    seed: int = 0,
    evaluations: int | None = None,
    deadline: Deadline | None = None,
    target: float | None = None,
    workers: int = 1,
    temperature: float | None = None,
    params: SearchParams = SEARCH,
) -> list[Schedule | None]:
    """The best schedules found by changing the order in which each dimension
    serves the phases, every chunk keeping its order.

    The moves are those of job-shop local search: two phases next to each
    other on a dimension and on a critical path (the first ends as the second
    starts, and together they make the makespan) are swapped, or one of them
    is moved to another place on the dimension; a few moves are made
    anywhere. Each candidate is timed exactly by a longest-path pass (phases
    start as early as their chunk and their dimension's sequence allow), and
    a move that is no worse is kept, a worse one with probability
    ``exp(-worse / (temperature * makespan))``.

    Parameters
    ----------
    instance
        The instance: collectives only, without dependencies
        (:func:`sequences_searchable`); otherwise nothing is searched.
    starts
        Valid schedules of ``instance`` to start from; each search keeps its
        start's orders.
    seed
        Seed of the first search's random choices.
    evaluations
        Candidates each search may time; by default
        ``params.sequence_evaluations_per_phase`` per phase.
    deadline
        When to stop with the best so far.
    target
        A proven lower bound: a search stops as soon as it meets it.
    workers
        Searches at once. Search ``n`` starts from ``starts[n % len(starts)]``
        seeded ``seed + n``, for ``n`` below the larger of ``workers`` and
        ``len(starts)``: this process runs search 0 and forked processes
        searches 1 to ``workers - 1`` (as in :func:`improve_assignment`);
        searches left over run in this process one after another, sharing
        its time. Of one start's searches the shortest schedule wins, a tie
        going to the lower ``n``.
    temperature
        Of the moves, times the current makespan; 0 keeps only moves that
        are no worse (default: ``params.sequence_temperature``).
    params
        The searches' tuning numbers.

    Returns
    -------
    list of Schedule or None
        Per start, the shortest schedule its searches found (it keeps that
        start's orders); ``None`` where none timed it in time. All ``None``
        for a task graph.
    """
    if not sequences_searchable(instance) or not starts:
        return [None] * len(starts)
    deadline = deadline or Deadline()
    count = max(workers, len(starts))
    options = {
        "evaluations": evaluations,
        "target": target,
        "temperature": params.sequence_temperature if temperature is None else temperature,
        "params": params,
    }

    def run(n: int, until: Deadline, handover: bool = False) -> dict[str, Any]:
        return {"seed": seed + n, "deadline": until, "handover": handover, **options}

    forked = range(1, workers) if can_fork() else range(0)
    helpers = [fork(_sequence_search, (instance, starts[n % len(starts)]), run(n, deadline, True)) for n in forked]
    found: list[tuple[float, int, dict[int, list[int]]]] = []
    try:
        own = [n for n in range(count) if n not in forked]
        for left, n in enumerate(own):
            share = deadline.share(1 / (len(own) - left))
            outcome = _sequence_search(instance, starts[n % len(starts)], **run(n, share))
            if outcome is not None:
                found.append((outcome[0], n, outcome[1]))
                if target is not None and is_proven(outcome[0], target, instance.origin_ns):
                    break
        else:
            for n, helper in zip(forked, helpers):
                answer = result_of(helper, deadline, params.handover_grace)
                if answer is not None:
                    found.append((answer[0], n, answer[1]))
    finally:
        stop(helpers)
    best: list[Schedule | None] = [None] * len(starts)
    for _, n, sequences in sorted(found, key=lambda entry: entry[:2]):
        if best[n % len(starts)] is None:
            best[n % len(starts)] = _Sequences(instance, starts[n % len(starts)]).schedule(instance, sequences)
    return best


def improve_sequences(instance: Instance, starts: Sequence[Schedule], **options: Any) -> Schedule | None:
    """The shortest schedule of :func:`improve_sequences_per_start` with the
    same arguments, a tie going to the earlier start; ``None`` for a task
    graph, without starts, or if the deadline passed before the starts were
    timed.
    """
    found = improve_sequences_per_start(instance, starts, **options)
    return min((s for s in found if s is not None), key=lambda s: s.makespan, default=None)


def _sequence_search(
    instance: Instance,
    start: Schedule,
    *,
    seed: int,
    evaluations: int | None,
    deadline: Deadline,
    target: float | None,
    temperature: float,
    params: SearchParams,
    handover: bool = False,
) -> tuple[float, dict[int, list[int]]] | None:
    """One sequence search from ``start``: the best makespan and sequences
    (nodes of :class:`_Sequences`), or ``None`` without time to time the start.

    With ``handover`` (a helper) it stops while the time left is still twice
    its longest evaluation and a little, so that its answer reaches the
    caller before ``deadline``.
    """
    if deadline.expired():
        return None
    searched = time.perf_counter()
    graph = _Sequences(instance, start)
    rng = random.Random(seed)
    budget = evaluations if evaluations is not None else params.sequence_evaluations_per_phase * len(graph.length)
    current = {d: list(seq) for d, seq in graph.start.items()}
    timed = graph.time(current)
    assert timed is not None  # a valid schedule's sequences have no cycle
    makespan, head, tail = timed
    best, best_sequences = makespan, {d: list(seq) for d, seq in current.items()}
    dims = [d for d, seq in current.items() if len(seq) > 1]
    origin = instance.origin_ns
    patience = params.sequence_patience_per_phase * len(graph.length)
    longest = 0.0
    used = last_best = 1
    while used < budget and dims and not (target is not None and is_proven(best, target, origin)):
        if deadline.expired() or (handover and deadline.remaining() < 2 * longest + 0.05):
            break
        if used - last_best > patience:  # stuck: start again from the start
            current = {d: list(seq) for d, seq in graph.start.items()}
            makespan, head, tail = graph.time(current)  # type: ignore[misc]
            last_best = used
        tight = makespan * 1e-9
        critical = [
            (d, k)
            for d, seq in current.items()
            for k, (a, b) in enumerate(zip(seq, seq[1:]))
            if abs(head[a] + graph.length[a] - head[b]) <= tight
            and abs(head[a] + graph.length[a] + tail[a] - makespan) <= tight
            and abs(head[b] + graph.length[b] + tail[b] - makespan) <= tight
        ]
        if not critical or rng.random() < params.random_moves:
            movable = [d for d, seq in current.items() if len(seq) > 1]  # lanes grow and shrink
            if not movable:  # every lane down to one phase: nothing to swap
                break
            d = rng.choice(movable)
            k = rng.randrange(len(current[d]) - 1)
        else:
            d, k = rng.choice(critical)
        seq = current[d]
        before = {d: list(seq)}
        if rng.random() < 0.5:
            seq[k], seq[k + 1] = seq[k + 1], seq[k]
        else:
            moved = seq.pop(k + rng.randrange(2))
            if graph.lanes > 1:  # elsewhere on its dimension: in any of its lanes
                lane = d - d % graph.lanes + rng.randrange(graph.lanes)
                before.setdefault(lane, list(current.get(lane, [])))
                seq = current.setdefault(lane, [])
            seq.insert(rng.randrange(len(seq) + 1), moved)
        began = time.perf_counter()
        timed = graph.time(current)
        longest = max(longest, time.perf_counter() - began)
        used += 1
        if timed is None or (
            timed[0] > makespan
            and not (temperature > 0 and rng.random() < math.exp((makespan - timed[0]) / (temperature * makespan)))
        ):
            current.update(before)
            continue
        makespan, head, tail = timed
        if makespan < best:
            best, best_sequences = makespan, {d: list(seq) for d, seq in current.items()}
            last_best = used
    logger.info("sequence search: %s, best %.3f ns", rate_line(used, "candidate", searched), best)
    return best, best_sequences
