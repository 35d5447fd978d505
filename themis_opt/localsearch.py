"""Local search over which chunk takes which order, each candidate timed by the simulator.

The heuristics decide how many chunks take each order well (the load
programs) but not *which* chunks: the chunks of one class are
interchangeable, yet the position of an order among them decides when its
phases reach the queues, and with it the makespan: on 4D all-reduces another
arrangement of the same orders is often several percent shorter than the
balanced policy's even spread (see the docs' benchmark page).

The search:

1. restarts: the orders of every chunk class are shuffled over its chunks
   (starting from each given assignment in turn) and timed with fifo and
   scf, for a share of the simulations (or of the time, if that is shorter);
2. moves from the best: swap the orders of two chunks of one class, or give
   one chunk another order, keeping a move that is no worse and, at a
   temperature above 0, a worse one with probability
   ``exp(-worse / temperature)``; the temperature falls linearly to 0 over
   the simulations left (as many as the time left allows at the restarts'
   pace).

Two strategies share these steps: a plain descent after restarts for half
the simulations for one collective and annealing after restarts for a tenth
for several (:func:`strategy_for`; the shares and the temperature are
:class:`~themis_opt.params.SearchParams`).
With several workers, the descent runs once per worker, worker ``n`` seeded
``seed + n``, and the shortest schedule wins; the annealing runs once, its
candidates timed by all workers at once (``workers`` candidates drawn from
the current assignment, the first accepted taken): one walk of about
``workers`` times the simulations rather than ``workers`` walks.

With ``keep_counts`` only swaps are made: every schedule keeps the number of
chunks of each class on each order that its start has.

It draws from ``random.Random(seed)`` and stops after ``evaluations``
simulations (or at the deadline), so with time to spare the same call gives
the same schedule.
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from themis_opt.budget import Deadline, OutOfTime, die_with_parent
from themis_opt.errors import counted
from themis_opt.instance import Instance
from themis_opt.methods import Intra
from themis_opt.orders import Orders
from themis_opt.params import SearchParams
from themis_opt.result import is_proven
from themis_opt.schedule import Schedule
from themis_opt.simulator import PhaseMemo, check_orders, phase_plan, retime, sequences_of, simulate_makespan

logger = logging.getLogger(__name__)
SEARCH = SearchParams()  # the defaults


@dataclass(frozen=True)
class Strategy:
    """How one search spends its simulations.

    Parameters
    ----------
    restart_share
        Share of the simulations (or of the time) for restarts.
    temperature
        Starting temperature of the moves after them, times the best
        makespan; 0 keeps only moves that are no worse (a descent).
    shared
        With several workers, run one search whose candidates they all
        time (a longer walk) rather than one search each (more walks).
    """

    restart_share: float
    temperature: float
    shared: bool = False


def strategy_for(instance: Instance, params: SearchParams = SEARCH) -> Strategy:
    """A descent after restarts for one collective, annealing after restarts for several."""
    if len(instance.collectives) == 1:
        return Strategy(restart_share=params.descent_restart_share, temperature=0.0)
    return Strategy(params.annealing_restart_share, params.annealing_temperature, shared=True)


def default_evaluations(instance: Instance, params: SearchParams = SEARCH) -> int:
    """How many simulations a search of ``instance`` may run: ``params.evaluations``, or by
    default ``evaluations_per_pair`` per ordered pair of chunks of one class, at least ``min_evaluations``.
    """
    if params.evaluations is not None:
        return params.evaluations
    pairs = sum(len(cls.chunks) * (len(cls.chunks) - 1) for cls in instance.chunk_classes)
    return max(params.min_evaluations, params.evaluations_per_pair * pairs)


class _Optimal(Exception):
    """A schedule met the target bound: the search is over."""


def improve_assignment(
    instance: Instance,
    starts: Sequence[Orders],
    *,
    seed: int = 0,
    evaluations: int | None = None,
    deadline: Deadline | None = None,
    keep_counts: bool = False,
    target: float | None = None,
    workers: int = 1,
    strategy: Strategy | None = None,
    params: SearchParams = SEARCH,
) -> Schedule | None:
    """The best schedule found by rearranging and changing chunks' orders.

    Parameters
    ----------
    instance
        The instance.
    starts
        Assignments to start from (each chunk's order, keyed by (collective,
        chunk)), e.g. the orders of the best heuristic schedule and the even
        spread of the load program's counts. Each is timed as it stands
        first.
    seed
        Seed of the search's random choices.
    evaluations
        How many simulations the search may run; by default
        :func:`default_evaluations`.
    deadline
        When to stop with the best so far.
    keep_counts
        Only rearrange: every schedule timed has the order counts of the
        start it came from (shuffles and swaps; no order is replaced).
    target
        A proven lower bound: the search stops as soon as a schedule meets it
        (within the optimality tolerance), as nothing can be better.
    workers
        Processes at once: this process and forked ones (on Linux and
        outside daemonic processes, such as a cluster's workers; elsewhere
        this process alone). A strategy that is not ``shared`` runs one
        search per worker, search ``n`` seeded ``seed + n``, and the shortest
        schedule wins, a tie going to the lower ``n``; a ``shared`` one runs
        the search seeded ``seed`` here, its candidates timed by all of them.
        Either way, with time to spare the result does not depend on timing.
    strategy
        How each search spends its simulations; by default
        :func:`strategy_for` the instance.
    params
        The searches' tuning numbers.

    Returns
    -------
    Schedule or None
        The shortest schedule timed; ``None`` if not even one was timed
        before ``deadline``.
    """
    deadline = deadline or Deadline()
    strategy = strategy or strategy_for(instance, params)
    options = {
        "strategy": strategy,
        "evaluations": evaluations if evaluations is not None else default_evaluations(instance, params),
        "deadline": deadline,
        "keep_counts": keep_counts,
        "target": target,
    }

    def run(n: int) -> dict[str, Any]:
        return {"seed": seed + n, **options}

    if strategy.shared and workers > 1 and _can_fork():
        timers = [_fork_timer(instance) for _ in range(1, workers)]
        try:
            return _search(instance, starts, **run(0), timers=timers)
        finally:
            _stop(timers)
    helpers = (
        [_fork(_search, (instance, starts), {**run(n), "handover": True}) for n in range(1, workers)]
        if _can_fork()
        else []
    )
    try:
        found = [_search(instance, starts, **run(0))]
        if found[0] is None or target is None or not is_proven(found[0].makespan, target, instance.origin_ns):
            found += [_result_of(helper, deadline, params.handover_grace) for helper in helpers]
    finally:
        _stop(helpers)
    timed = [schedule for schedule in found if schedule is not None]
    return min(timed, key=lambda schedule: schedule.makespan) if timed else None  # min keeps the first of ties


def _can_fork() -> bool:
    # fork: the helper starts in milliseconds with this process's instance and caches; daemonic
    # processes may not have children
    return sys.platform == "linux" and not multiprocessing.current_process().daemon


Helper = tuple[multiprocessing.process.BaseProcess, Connection]


def _fork(search: Callable[..., Any], args: tuple[Any, ...], options: dict[str, Any]) -> Helper:
    """A forked process running ``search(*args, **options)``, and the end of the pipe its answer comes through."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_helper, args=(send, search, args, options), daemon=True)
    process.start()
    send.close()
    return process, receive


def _helper(  # pragma: no cover - runs in the forked process
    send: Connection, search: Callable[..., Any], args: tuple[Any, ...], options: dict[str, Any]
) -> None:
    die_with_parent()
    try:
        found = search(*args, **options)
    except BaseException:  # Ctrl-C reaches the whole process group; the parent stops this process
        found = None
    send.send(found)


def _result_of(helper: Helper, deadline: Deadline, grace: float) -> Any:
    """A helper's answer, waiting for it at most ``grace`` seconds past ``deadline`` (then ``None``)."""
    _, receive = helper
    try:
        if receive.poll(None if math.isinf(deadline.at) else deadline.remaining() + grace):
            return receive.recv()
    except (EOFError, OSError):  # the helper died without an answer
        pass
    finally:
        receive.close()
    return None


def _stop(helpers: Sequence[Helper]) -> None:
    """Kill the helpers still running (an answer no longer awaited) and reap them all."""
    for process, _ in helpers:
        if process.is_alive():
            process.kill()
        process.join()


def _fork_timer(instance: Instance) -> Helper:
    """A forked process that times the assignments sent to it (see :func:`_timer`)."""
    context = multiprocessing.get_context("fork")
    mine, theirs = context.Pipe()
    process = context.Process(target=_timer, args=(theirs, instance), daemon=True)
    process.start()
    theirs.close()
    return process, mine


def _timer(connection: Connection, instance: Instance) -> None:  # pragma: no cover - runs in the forked process
    """Answer every ``(orders, policy)`` received with its simulated makespan, until the pipe closes."""
    die_with_parent()
    memo: PhaseMemo = {}
    try:
        while True:
            orders, policy = connection.recv()
            connection.send(simulate_makespan(instance, orders, policy, Deadline(), memo)[0])
    except (EOFError, OSError, KeyboardInterrupt):
        pass


def _answer(connection: Connection, deadline: Deadline) -> float | None:
    """A timer's makespan; ``None`` if it died; :class:`OutOfTime` if it does not answer before ``deadline``."""
    try:
        if not connection.poll(None if math.isinf(deadline.at) else max(0.0, deadline.remaining())):
            raise OutOfTime("assignment search: a timer did not answer in time")
        return float(connection.recv())
    except (EOFError, OSError):
        return None


def _search(
    instance: Instance,
    starts: Sequence[Orders],
    *,
    seed: int,
    strategy: Strategy,
    evaluations: int,
    deadline: Deadline,
    keep_counts: bool,
    target: float | None,
    handover: bool = False,
    timers: Sequence[Helper] = (),
) -> Schedule | None:
    """One search with ``strategy`` (:func:`improve_assignment` with one worker).

    It stops while the time left is still twice its longest simulation (four times with
    ``handover``, in a helper), so that its schedule is built (and sent) before
    ``deadline``: on 4,096 chunks building, pickling and unpickling a schedule each took
    about as long as a simulation. With ``timers``
    (see :func:`_fork_timer`) it draws one candidate more than there are timers, times them
    all at once and takes the first it accepts: the walk depends on how many timers there
    are, never on which answers first.
    """
    rng = random.Random(seed)
    classes = [cls for cls in instance.chunk_classes if instance.order_count(cls.collective) > 1]
    if keep_counts:  # a class of one chunk has nothing to swap with
        classes = [cls for cls in classes if len(cls.chunks) > 1]
    known = {cls: sorted({start[(cls.collective, k)] for start in starts for k in cls.chunks}) for cls in classes}
    # the best makespan, how to build its schedule, its orders and policy
    best: tuple[float, Callable[..., Schedule], Orders, Intra] | None = None
    used = 0
    origin = instance.origin_ns
    memo: PhaseMemo = {}

    longest = 0.0  # the longest simulation so far, s

    def time_it(orders: Orders, policy: Intra) -> float:
        nonlocal best, used, longest
        deadline.check("assignment search")  # a small run checks no deadline of its own
        if deadline.remaining() < (4 if handover else 2) * longest:
            # kept for building the best schedule (a timer's is simulated again first) and, in a helper,
            # sending it: with one simulation's worth kept, large instances overran the deadline
            raise OutOfTime("assignment search: the time left is for building the schedule")
        used += 1
        start = time.perf_counter()
        makespan, build = simulate_makespan(instance, orders, policy, deadline, memo)
        longest = max(longest, time.perf_counter() - start)
        keep(makespan, build, orders, policy)
        return makespan

    def keep(makespan: float, build: Callable[..., Schedule], orders: Orders, policy: Intra) -> None:
        nonlocal best
        if best is None or makespan < best[0]:
            best = (makespan, build, orders, policy)
            if target is not None and is_proven(makespan, target, origin):
                raise _Optimal

    def time_all(jobs: Sequence[tuple[Orders, Intra]]) -> list[float]:
        """Each job's makespan: the first timed here, the others by the timers, at once
        (a job whose timer died is timed here instead).
        """
        nonlocal used
        sent = []
        for (_, connection), job in zip(timers, jobs[1:]):
            try:
                connection.send(job)
                sent.append(True)
            except OSError:
                sent.append(False)
        makespans = [time_it(*jobs[0])]
        for (_, connection), job, ok in zip(timers, jobs[1:], sent):
            makespan = _answer(connection, deadline) if ok else None
            if makespan is None:
                makespans.append(time_it(*job))
                continue
            used += 1
            keep(makespan, functools.partial(rebuild, *job), *job)
            makespans.append(makespan)
        return makespans

    def rebuild(orders: Orders, policy: Intra) -> Schedule:
        """A timer's schedule, simulated again here (if it stays the best)."""
        return simulate_makespan(instance, orders, policy, Deadline(), memo)[1]()

    def draw(current: Orders) -> Orders:
        """A move from ``current``: a swap within a class, or one chunk given another order."""
        candidate = dict(current)
        cls = rng.choice(classes)
        a = rng.choice(cls.chunks)
        if len(cls.chunks) > 1 and (keep_counts or rng.random() < 0.6):
            b = rng.choice(cls.chunks)
            key_a, key_b = (cls.collective, a), (cls.collective, b)
            candidate[key_a], candidate[key_b] = candidate[key_b], candidate[key_a]
        elif rng.random() < 0.8:  # an order some start gives this class: the load programs chose well
            candidate[(cls.collective, a)] = rng.choice(known[cls])
        else:
            dims = list(instance.active_dims[cls.collective])
            rng.shuffle(dims)
            candidate[(cls.collective, a)] = tuple(dims)
        return candidate

    for orders in starts:
        check_orders(instance, orders)  # every later assignment rearranges these or draws valid orders
    try:
        for orders in starts:
            for policy in Intra:
                time_it(dict(orders), policy)
        if not classes:
            return None if best is None else best[1]()
        n = 0
        began, restarted = time.perf_counter(), used
        restarts_end = deadline.share(strategy.restart_share)
        while used < evaluations * strategy.restart_share and not restarts_end.expired():
            orders = dict(starts[n % len(starts)])
            n += 1
            for cls in classes:
                taken = [orders[(cls.collective, k)] for k in cls.chunks]
                rng.shuffle(taken)
                orders.update({(cls.collective, k): o for k, o in zip(cls.chunks, taken)})
            jobs = [(orders, policy) for policy in Intra]
            for k in range(0, len(jobs), 1 + len(timers)):
                time_all(jobs[k : k + 1 + len(timers)])
        assert best is not None
        current_makespan, _, current, policy = best
        # the cooling runs over the simulations left (so that with time to spare it, like the result, does
        # not depend on the clock) or, where the time left is too short for them at the restarts' pace,
        # over the time left: planned as simulations at that pace, it ended hot on 8 collectives (the moves
        # time one policy, in other batches; 10,205 planned, 8,900 made, 1.50-2.87% above the bound)
        moves = evaluations - used
        pace = (time.perf_counter() - began) / max(1, used - restarted)
        by_clock = pace > 0 and deadline.remaining() / pace < moves
        first, moves_began, span = used, time.perf_counter(), deadline.remaining()
        if by_clock:
            logger.info("assignment search: %s, then moves for %.1f s", counted(used, "restart"), span)
        else:
            logger.info("assignment search: %s, then %s", counted(used, "restart"), counted(moves, "move"))

        def cooled() -> float:
            """How far the cooling has gone, 0 to 1."""
            if by_clock:
                return (time.perf_counter() - moves_began) / span
            return (used - first) / max(1, moves)

        draws = 0
        while used < evaluations and draws < 4 * evaluations:  # moves that change nothing are drawn again
            candidates: list[Orders] = []
            while len(candidates) < min(1 + len(timers), evaluations - used) and draws < 4 * evaluations:
                draws += 1
                candidate = draw(current)
                if candidate != current:
                    candidates.append(candidate)
            if not candidates:
                break
            for candidate, makespan in zip(candidates, time_all([(c, policy) for c in candidates])):
                temperature = strategy.temperature * best[0] * max(0.0, 1.0 - cooled())
                if makespan <= current_makespan or (
                    temperature > 0 and rng.random() < math.exp((current_makespan - makespan) / temperature)
                ):
                    current, current_makespan = candidate, makespan
                    break  # the later candidates were moves from the old current
    except (OutOfTime, _Optimal):
        pass
    if best is None:
        return None
    logger.info("assignment search: %s timed, best %.3f ns (%s)", counted(used, "schedule"), best[0], best[3].value)
    return best[1]()  # one schedule built, of thousands timed


# ----------------------------------------------------------------- sequence search


def sequences_searchable(instance: Instance) -> bool:
    """Whether :func:`improve_sequences` handles ``instance``: collectives only, no dependencies."""
    return not instance.is_task_graph


class _Sequences:
    """One schedule's orders as a graph of phases (chunk precedences and
    issue times fixed), whose dimension sequences the search changes: each
    candidate is timed by a longest-path pass over it, as
    :func:`~themis_opt.simulator.left_shift` would time it.
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
        self.start = {d: [offset[i] + p for i, p in seq] for d, seq in sequences_of(instance, schedule).items()}

    def time(self, sequences: dict[int, list[int]]) -> tuple[float, list[float], list[float]] | None:
        """Makespan, earliest starts and tails (time from each phase's start
        to the end, past its own duration) of ``sequences``; ``None`` if they
        contradict the chunk orders (a cycle).
        """
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

    def schedule(self, instance: Instance, sequences: dict[int, list[int]]) -> Schedule:
        """The exact left-shifted schedule of ``sequences``."""
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

    forked = range(1, workers) if _can_fork() else range(0)
    helpers = [_fork(_sequence_search, (instance, starts[n % len(starts)]), run(n, deadline, True)) for n in forked]
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
                answer = _result_of(helper, deadline, params.handover_grace)
                if answer is not None:
                    found.append((answer[0], n, answer[1]))
    finally:
        _stop(helpers)
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
            d = rng.choice(dims)
            k = rng.randrange(len(current[d]) - 1)
        else:
            d, k = rng.choice(critical)
        seq = current[d]
        before = list(seq)
        if rng.random() < 0.5:
            seq[k], seq[k + 1] = seq[k + 1], seq[k]
        else:
            moved = seq.pop(k + rng.randrange(2))
            seq.insert(rng.randrange(len(seq) + 1), moved)
        began = time.perf_counter()
        timed = graph.time(current)
        longest = max(longest, time.perf_counter() - began)
        used += 1
        if timed is None or (
            timed[0] > makespan
            and not (temperature > 0 and rng.random() < math.exp((makespan - timed[0]) / (temperature * makespan)))
        ):
            current[d] = before
            continue
        makespan, head, tail = timed
        if makespan < best:
            best, best_sequences = makespan, {d: list(seq) for d, seq in current.items()}
            last_best = used
    logger.info("sequence search: %s timed, best %.3f ns", counted(used, "candidate"), best)
    return best, best_sequences
