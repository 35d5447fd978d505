"""The assignment search: which chunk takes which order, each candidate timed by the simulator.

The heuristics decide how many chunks take each order well (the load
programs) but not *which* chunks: the chunks of one class are
interchangeable, yet the position of an order among them decides when its
phases reach the queues, and with it the makespan: on 4D all-reduces another
arrangement of the same orders is often several percent shorter than the
balanced policy's even spread (see the docs' benchmark page).

The search:

1. restarts: the orders of every chunk class are shuffled over its chunks
   (starting from each given assignment in turn) and timed under each of
   the search's policies (fifo, scf and tail by default), for a share of
   the simulations (or of the time, if that is shorter);
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
With several workers, the search runs once per worker, worker ``n`` seeded
``seed + n`` and walking under the ``n``-th of ``search.walk_policies``
(cyclically: tail, then scf), and the shortest schedule wins. A ``shared`` strategy runs one
walk instead, its candidates timed by all workers at once (``workers``
candidates drawn from the current assignment, the first accepted taken); with
the compiled core a simulation is shorter than a round trip to another
process, so this is slower than one walk per worker (see the docs' benchmark
page).

Assignments are arrays of small integers, one per chunk
(:class:`~themis_opt.search.timer.AssignmentTimer`'s tokens: in the compiled
core, the chunk's phase table), so a move copies an array and swaps two of
its entries.

With ``keep_counts`` only swaps are made: every schedule keeps the number of
chunks of each class on each order that its start has.

It draws from ``random.Random(seed)`` and stops after ``evaluations``
simulations (or at the deadline), so with time to spare the same call gives
the same schedule. The moves run in the compiled core where it can
(:meth:`~themis_opt.search.walk.walk_in_core`, ``search.walk_in_core``): the
same draws from the same generator, so the same walk as the Python loop here,
which stays as the reference.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import random
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from themis_opt.budget import Deadline, OutOfTime, die_with_parent
from themis_opt.errors import counted
from themis_opt.helpers import Helper, can_fork, fork, result_of, stop
from themis_opt.instance import Instance
from themis_opt.orders import Orders, check_orders
from themis_opt.result import is_proven
from themis_opt.schedule import Schedule
from themis_opt.search.params import SearchParams
from themis_opt.search.pool import rate_line
from themis_opt.search.timer import AssignmentTimer
from themis_opt.search.walk import CLOCK_DRAWS, MoveDraws, WalkRules, WalkState, walk_in_core
from themis_opt.sim.queues import Intra

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
    split_policies
        With several workers and one search each, search ``n`` restarts and
        moves under the ``n``-th of ``search.walk_policies`` (cyclically)
        alone rather than under the policy of its best restart: several
        policies are walked (a walk keeps its policy, and walks that all took
        the one that ends worse from their restarts fell behind; see the
        docs' benchmark page).
    """

    restart_share: float
    temperature: float
    shared: bool = False
    split_policies: bool = True


def strategy_for(instance: Instance, params: SearchParams = SEARCH) -> Strategy:
    """A descent after restarts for one collective, annealing after restarts for several."""
    if len(instance.collectives) == 1:
        return Strategy(restart_share=params.descent_restart_share, temperature=0.0)
    return Strategy(params.annealing_restart_share, params.annealing_temperature)


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
    policies: Sequence[Intra] = tuple(Intra),
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
    policies
        The intra-dimension policies the starts and restarts are timed under
        (a walk keeps one: with several workers and ``split_policies``,
        worker ``n`` the ``n``-th of ``params.walk_policies``, cyclically,
        else that of the best restart).
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
        "policies": tuple(policies),
        "params": params,
    }

    def run(n: int) -> dict[str, Any]:
        split = strategy.split_policies and not strategy.shared and workers > 1 and can_fork()
        walks = params.walk_policies
        return {"seed": seed + n, "walk": Intra(walks[n % len(walks)]) if split else None, **options}

    timer = AssignmentTimer(instance, snapshots=params.snapshots)
    if strategy.shared and workers > 1 and can_fork():
        timers = [_fork_timer(timer) for _ in range(1, workers)]
        try:
            return _search(timer, starts, **run(0), timers=timers)
        finally:
            stop(timers)
    helpers = (
        [fork(_search, (timer, starts), {**run(n), "handover": True}) for n in range(1, workers)] if can_fork() else []
    )
    try:
        found = [_search(timer, starts, **run(0))]
        if found[0] is None or target is None or not is_proven(found[0].makespan, target, instance.origin_ns):
            found += [result_of(helper, deadline, params.handover_grace) for helper in helpers]
    finally:
        stop(helpers)
    timed = [schedule for schedule in found if schedule is not None]
    return min(timed, key=lambda schedule: schedule.makespan) if timed else None  # min keeps the first of ties


def _fork_timer(timer: AssignmentTimer) -> Helper:
    """A forked process that times the assignments sent to it (see :func:`_timer`)."""
    context = multiprocessing.get_context("fork")
    mine, theirs = context.Pipe()
    process = context.Process(target=_timer, args=(theirs, timer), daemon=True)
    process.start()
    theirs.close()
    return process, mine


def _timer(connection: Connection, timer: AssignmentTimer) -> None:  # pragma: no cover - runs in the forked process
    """Answer every ``(tokens, policy, cutoff, made)`` received with its simulated makespan (see
    :meth:`~themis_opt.search.timer.AssignmentTimer.makespan`), until the pipe closes; ``made`` are the
    tokens the sender made since the last job, made here in the same order so that both number them alike.
    """
    die_with_parent()
    try:
        while True:
            tokens, policy, cutoff, made = connection.recv()
            for c, k, order in made:
                timer.token(c, k, order)
            connection.send(timer.makespan(array("i", tokens), policy, Deadline(), cutoff))
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
    timer: AssignmentTimer,
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
    walk: Intra | None = None,
    policies: tuple[Intra, ...] = tuple(Intra),
    params: SearchParams = SEARCH,
) -> Schedule | None:
    """One search with ``strategy`` (:func:`improve_assignment` with one worker).

    With ``walk``, the restarts and moves time that policy alone (the starts are timed under
    each of ``policies``), and the moves begin from its best restart; by default the restarts
    are timed under each of ``policies`` and the moves keep the policy of the best restart.

    Assignments are arrays of the ``timer``'s tokens. It stops while the time left is still
    twice its longest simulation (four times with ``handover``, in a helper), so that its
    schedule is built (and sent) before ``deadline``: on 4,096 chunks building, pickling and
    unpickling a schedule each took about as long as a simulation. With ``timers`` (see
    :func:`_fork_timer`) it draws one candidate more than there are timers, times them all at
    once and takes the first it accepts: the walk depends on how many timers there are, never
    on which answers first. Without timers the moves run in the compiled core where it
    can (``params.walk_in_core``; :meth:`~themis_opt.search.walk.walk_in_core`): the same
    walk, draw for draw.
    """
    instance = timer.instance
    rng = random.Random(seed)
    position = {cid: i for i, cid in enumerate(instance.chunk_ids)}
    classes = [cls for cls in instance.chunk_classes if instance.order_count(cls.collective) > 1]
    if keep_counts:  # a class of one chunk has nothing to swap with
        classes = [cls for cls in classes if len(cls.chunks) > 1]
    for orders in starts:
        check_orders(instance, orders)  # every later assignment rearranges these or draws valid orders
    begun = [timer.tokens(orders) for orders in starts]
    # each class's chunks' positions in an assignment, and the tokens some start gives them
    places = {cls: [position[(cls.collective, k)] for k in cls.chunks] for cls in classes}
    known = {cls: sorted({tokens[i] for tokens in begun for i in places[cls]}) for cls in classes}
    best: tuple[float, array[int], Intra] | None = None  # the best makespan, its tokens and policy
    leading: dict[Intra, tuple[float, array[int]]] = {}  # the best makespan and tokens under each policy
    used = 0
    origin = instance.origin_ns
    longest = 0.0  # the longest simulation so far, s
    told = [0] * len(timers)  # how many of the timer's made tokens each timer has been sent
    room_factor = params.handover_room_simulations if handover else params.room_simulations
    max_draws = params.draws_per_evaluation * evaluations

    def room() -> None:
        """:class:`OutOfTime` unless there is time for one more simulation."""
        deadline.check("assignment search")  # a small run checks no deadline of its own
        if deadline.remaining() < room_factor * longest:  # kept for building (and sending) the best schedule
            raise OutOfTime("assignment search: the time left is for building the schedule")

    def time_it(tokens: array[int], policy: Intra, cutoff: float = math.inf) -> float:
        """The makespan of ``tokens``, or ``math.inf`` once it is sure to exceed ``cutoff``."""
        nonlocal used, longest
        room()
        used += 1
        start = time.perf_counter()
        makespan = timer.makespan(tokens, policy, deadline, cutoff)
        longest = max(longest, time.perf_counter() - start)
        keep(makespan, tokens, policy)
        return makespan

    def keep(makespan: float, tokens: array[int], policy: Intra) -> None:
        nonlocal best
        if policy not in leading or makespan < leading[policy][0]:
            leading[policy] = (makespan, tokens)
        if best is None or makespan < best[0]:
            best = (makespan, tokens, policy)
            if target is not None and is_proven(makespan, target, origin):
                raise _Optimal

    def time_all(jobs: Sequence[tuple[array[int], Intra, float]]) -> list[float]:
        """Each job's makespan (or ``math.inf`` above its cutoff): the first timed here, the
        others by the timers, at once (a job whose timer died is timed here instead).
        """
        nonlocal used
        sent = []
        for n, ((_, connection), job) in enumerate(zip(timers, jobs[1:])):
            try:
                connection.send((job[0].tobytes(), job[1], job[2], timer.made[told[n] :]))
                told[n] = len(timer.made)
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
            keep(makespan, job[0], job[1])
            makespans.append(makespan)
        return makespans

    def draw(current: array[int]) -> array[int] | None:
        """A move from ``current``: a swap within a class, or one chunk given another order;
        ``None`` if it changes nothing.
        """
        cls = rng.choice(classes)
        chunk = rng.randrange(len(cls.chunks))
        a = places[cls][chunk]
        if len(cls.chunks) > 1 and (keep_counts or rng.random() < params.swap_share):
            b = places[cls][rng.randrange(len(cls.chunks))]
            if current[a] == current[b]:
                return None
            candidate = current[:]
            candidate[a], candidate[b] = current[b], current[a]
            return candidate
        if rng.random() < params.known_share:  # an order some start gives this class
            token = rng.choice(known[cls])
        else:
            dims = list(instance.active_dims[cls.collective])
            rng.shuffle(dims)
            token = timer.token(cls.collective, cls.chunks[chunk], dims)
        if token == current[a]:
            return None
        candidate = current[:]
        candidate[a] = token
        return candidate

    searched = time.perf_counter()
    try:
        for tokens in begun:
            for policy in policies:
                time_it(tokens[:], policy)
        if not classes:
            return None if best is None else timer.schedule(best[1], best[2])
        n = 0
        began, restarted = time.perf_counter(), used
        restarts_end = deadline.share(strategy.restart_share)
        while used < evaluations * strategy.restart_share and not restarts_end.expired():
            tokens = begun[n % len(begun)][:]
            n += 1
            for cls in classes:
                where = places[cls]
                taken = [tokens[i] for i in where]
                rng.shuffle(taken)
                for i, token in zip(where, taken):
                    tokens[i] = token
            timing = [walk] if walk is not None else list(policies)
            for k in range(0, len(timing), 1 + len(timers)):
                # only a new best (of the walk's policy) matters here: a run stops once it cannot be one
                cutoff = best[0] if best is not None else math.inf
                if walk is not None:
                    cutoff = leading[walk][0] if walk in leading else math.inf
                time_all([(tokens, policy, cutoff) for policy in timing[k : k + 1 + len(timers)]])
        assert best is not None
        current_makespan, current, policy = best
        if walk is not None:
            (current_makespan, current), policy = leading[walk], walk
        if not timers:  # the moves resume from the current's run (the timers' runs would not have it)
            room()  # it may be timed again
            timer.adopt(current, policy, deadline)
        # the cooling runs over the simulations left (so that with time to spare it, like the result, does
        # not depend on the clock) or, where the time left is too short for them at the restarts' pace,
        # over the time left: planned as simulations at that pace, it ended hot on 8 collectives
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
            if by_clock:  # no span: the deadline had passed when the moves began
                return (time.perf_counter() - moves_began) / span if span > 0 else 1.0
            return (used - first) / max(1, moves)

        draws = 0
        dims = [instance.active_dims[cls.collective] for cls in classes]
        in_core = timer.in_core
        if params.walk_in_core and not timers and in_core is not None and MoveDraws.fits(dims):
            state = WalkState(current, current_makespan, best[1], best[0], used, draws, longest)
            rules = WalkRules(
                rng, policy, evaluations, max_draws, strategy.temperature, by_clock, first, moves,
                moves_began, span, deadline, room_factor, target,
            )  # fmt: skip
            draws_from = MoveDraws(
                tuple(tuple(places[cls]) for cls in classes),
                tuple(tuple(known[cls]) for cls in classes),
                tuple(tuple(d) for d in dims),
                keep_counts,
                params.swap_share,
                params.known_share,
            )

            def make(k: int, j: int, order: list[int]) -> int:
                return timer.token(classes[k].collective, classes[k].chunks[j], order)

            try:
                ended = walk_in_core(in_core, draws_from, rules, state, make)
                logger.info("assignment search: the moves in the core ended (%s)", ended)
            finally:
                used, longest = state.used, state.longest
                if state.best_makespan < best[0]:
                    best = (state.best_makespan, state.best, policy)
        else:  # the reference: drawn and timed here
            while used < evaluations and draws < max_draws:  # moves that change nothing are drawn again
                candidates: list[array[int]] = []
                while len(candidates) < min(1 + len(timers), evaluations - used) and draws < max_draws:
                    draws += 1
                    if draws % CLOCK_DRAWS == 0:  # moves that change nothing take time too
                        deadline.check("assignment search")
                    candidate = draw(current)
                    if candidate is not None:
                        candidates.append(candidate)
                if not candidates:
                    break
                # a move is kept if no worse, or worse by less than temperature x -ln(u) (the Metropolis
                # rule): u is drawn first, so that each simulation stops once past what it could be kept at
                temperature = strategy.temperature * best[0] * max(0.0, 1.0 - cooled())
                cutoffs = [
                    current_makespan - (temperature * math.log(1.0 - rng.random()) if temperature > 0 else 0.0)
                    for _ in candidates
                ]
                timed = time_all([(c, policy, cutoff) for c, cutoff in zip(candidates, cutoffs)])
                for candidate, makespan, cutoff in zip(candidates, timed, cutoffs):
                    if makespan <= cutoff:
                        current, current_makespan = candidate, makespan
                        if not timers:  # the last run: adopted as it stands
                            timer.adopt(current, policy, deadline)
                        break  # the later candidates were moves from the old current
    except (OutOfTime, _Optimal):
        pass
    if best is None:
        return None
    logger.info(
        "assignment search: %s, best %.3f ns (%s)", rate_line(used, "schedule", searched), best[0], best[2].value
    )
    return timer.schedule(best[1], best[2])  # one schedule built, of thousands timed
