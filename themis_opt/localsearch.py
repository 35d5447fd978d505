"""Local search over which chunk takes which order, each candidate timed by the simulator.

The heuristics decide how many chunks take each order well (the load
programs) but not *which* chunks: the chunks of one class are
interchangeable, yet the position of an order among them decides when its
phases reach the queues, and with it the makespan: on the 4D all-reduces of
``bench/exact_scale.py`` another arrangement of the same orders is often
several percent shorter than the balanced policy's even spread.

The search:

1. restarts: the orders of every chunk class are shuffled over its chunks
   (starting from each given assignment in turn) and timed with fifo and
   scf, for half the simulations (or half the time, if that is shorter);
2. descent from the best: swap the orders of two chunks of one class, or give
   one chunk another order, keeping a move that is no worse.

With ``keep_counts`` only swaps are made: every schedule keeps the number of
chunks of each class on each order that its start has.

It draws from ``random.Random(seed)`` and stops after ``evaluations``
simulations (or at the deadline), so with time to spare the same call gives
the same schedule.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.instance import Instance
from themis_opt.methods import Intra
from themis_opt.result import is_proven
from themis_opt.schedule import Schedule
from themis_opt.simulator import Orders, PhaseMemo, check_orders, simulate_makespan

logger = logging.getLogger(__name__)

# Simulations per search (half restarts, half descent): ten per ordered pair of interchangeable chunks, as
# the swaps grow with the square of a class, and at least 2,400. On the 4D all-reduces of
# bench/exact_scale.py, 16 chunks and 10 s: 10 of 15 runs proven with 2,400, 7 of 15 with 9,600
# (the search takes time the counts-fixed stage needs); 32 chunks and 60 s: 9,600 did better on
# all five (0.00-0.85% against 0.09-1.17%); 8 collectives of 16 chunks: the time share ends it.
EVALUATIONS_PER_PAIR = 10
MIN_EVALUATIONS = 2400


def default_evaluations(instance: Instance) -> int:
    """How many simulations a search of ``instance`` may run unless told:
    ``EVALUATIONS_PER_PAIR`` per ordered pair of chunks of one class, at least ``MIN_EVALUATIONS``.
    """
    pairs = sum(len(cls.chunks) * (len(cls.chunks) - 1) for cls in instance.chunk_classes)
    return max(MIN_EVALUATIONS, EVALUATIONS_PER_PAIR * pairs)


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
        ``EVALUATIONS_PER_PAIR`` per ordered pair of chunks of one class, at least
        ``MIN_EVALUATIONS``.
    deadline
        When to stop with the best so far.
    keep_counts
        Only rearrange: every schedule timed has the order counts of the
        start it came from (shuffles and swaps; no order is replaced).
    target
        A proven lower bound: the search stops as soon as a schedule meets it
        (within the optimality tolerance), as nothing can be better.

    Returns
    -------
    Schedule or None
        The shortest schedule timed; ``None`` if not even one was timed
        before ``deadline``.
    """
    deadline = deadline or Deadline()
    if evaluations is None:
        evaluations = default_evaluations(instance)
    rng = random.Random(seed)
    classes = [cls for cls in instance.chunk_classes if instance.order_count(cls.collective) > 1]
    if keep_counts:  # a class of one chunk has nothing to swap with
        classes = [cls for cls in classes if len(cls.chunks) > 1]
    known = {cls: sorted({start[(cls.collective, k)] for start in starts for k in cls.chunks}) for cls in classes}
    # the best makespan, how to build its schedule, its orders and policy
    best: tuple[float, Callable[..., Schedule], Orders, Intra] | None = None
    used = 0
    origin = min(task.issue_ns for task in instance.tasks)
    memo: PhaseMemo = {}

    def time_it(orders: Orders, policy: Intra) -> float:
        nonlocal best, used
        deadline.check("assignment search")  # a small run checks no deadline of its own
        used += 1
        makespan, build = simulate_makespan(instance, orders, policy, deadline, memo)
        if best is None or makespan < best[0]:
            best = (makespan, build, orders, policy)
            if target is not None and is_proven(makespan, target, origin):
                raise _Optimal
        return makespan

    for orders in starts:
        check_orders(instance, orders)  # every later assignment rearranges these or draws valid orders
    try:
        for orders in starts:
            for policy in Intra:
                time_it(dict(orders), policy)
        if not classes:
            return None if best is None else best[1]()
        n = 0
        # restarts take half the simulations, or half the time when that runs out first: the descent
        # from the best restart is where most of the improvement comes from
        halfway = deadline.share(0.5)
        while used < evaluations // 2 and not halfway.expired():
            orders = dict(starts[n % len(starts)])
            n += 1
            for cls in classes:
                taken = [orders[(cls.collective, k)] for k in cls.chunks]
                rng.shuffle(taken)
                orders.update({(cls.collective, k): o for k, o in zip(cls.chunks, taken)})
            for policy in Intra:
                time_it(orders, policy)
        assert best is not None
        current_makespan, _, current, policy = best
        for _ in range(4 * evaluations):  # moves that change nothing are drawn again, a bounded number of times
            if used >= evaluations:
                break
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
            if candidate == current:
                continue
            makespan = time_it(candidate, policy)
            if makespan <= current_makespan:
                current, current_makespan = candidate, makespan
    except (OutOfTime, _Optimal):
        pass
    if best is None:
        return None
    logger.info("assignment search: %d schedules timed, best %.3f ns (%s)", used, best[0], best[3].value)
    return best[1]()  # one schedule built, of thousands timed
