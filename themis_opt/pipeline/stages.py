"""The cpsat method's stages, each a function of the call's context and its budget."""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Generator, Hashable, Iterator
from typing import TYPE_CHECKING

from themis_opt.bounds import iteration_counts, solvers_loaded
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.cost import merging_shortens
from themis_opt.errors import counted
from themis_opt.heuristics import balanced_schedule, baseline_schedule, themis_schedule
from themis_opt.instance import Instance
from themis_opt.orders import Counts, Orders
from themis_opt.pipeline.context import Context
from themis_opt.policies import counts_match, spread_orders
from themis_opt.result import (
    Status,
    is_proven,
    optimality_tolerance,
)
from themis_opt.schedule import Schedule
from themis_opt.search.counts import counts_within, level_counts
from themis_opt.sim import simulate
from themis_opt.sim.queues import Intra

if TYPE_CHECKING:  # CP-SAT is imported only when it runs
    from themis_opt.cpsat import CpsatOutcome

logger = logging.getLogger(__name__)


def warm_start(ctx: Context, budget: Deadline) -> None:
    """The best of the heuristics that finish in time: the baseline may take all the time left
    (without it there is nothing to search from), each further one a share of what is left then.
    """
    instance = ctx.instance
    makers: tuple[Callable[[Deadline], Schedule], ...] = (
        lambda d: baseline_schedule(instance, Intra.FIFO, d, merged=False),
        lambda d: themis_schedule(instance, Intra.FIFO, d),
        lambda d: themis_schedule(instance, Intra.SCF, d),
        lambda d: balanced_schedule(instance, deadline=d, memo=ctx.memo, params=ctx.params, target=ctx.bounds.best)[0],
    )
    share = ctx.params.pipeline.warm_share
    candidates: list[Schedule] = []
    for n, make in enumerate(makers):
        try:
            candidates.append(make(budget if n == 0 else budget.share(share)))
        except OutOfTime:
            ctx.note = "cpsat: out of time before every warm start was timed"
            break
    if merging_shortens(instance):
        with contextlib.suppress(OutOfTime):
            ctx.merged = baseline_schedule(instance, Intra.FIFO, budget.share(share))
    given = ctx.given
    if given is not None and len(given.columns().dim) != instance.num_phases:
        # the caller's baseline with merged all-reduce phases: not a start the split stages can take
        if ctx.merged is None or given.makespan < ctx.merged.makespan:
            ctx.merged = given
        given = None
    for schedule in [*candidates, *([given] if given is not None else [])]:
        if ctx.best is None or schedule.makespan < ctx.best.makespan:
            ctx.best = schedule
    if ctx.best is not None:
        ctx.trajectory.append((time.perf_counter() - ctx.t0, ctx.best.makespan))


def assignment_search(ctx: Context, budget: Deadline) -> None:
    """The assignment search from the best schedule's orders, from the fill-and-drain counts spread
    evenly, with several collectives from the counts that level each collective's load over the
    dimensions, and from the iteration bound's counts spread evenly, one seed per worker; it stops
    once it meets the lower bound.
    """
    from themis_opt.search import improve_assignment

    instance = ctx.instance
    assert ctx.best is not None
    starts: dict[str, Orders] = {"the best schedule's": ctx.best.orders}
    counts = ctx.counts(budget)
    if counts is not None:
        starts["fill-and-drain's"] = spread_orders(instance, counts.counts)
        # with one collective, leveling its load is the program's own objective: nothing to add
        share = budget.share(ctx.params.pipeline.counts_share)
        level = level_counts(instance, counts, share, ctx.params.bounds) if len(instance.collectives) > 1 else None
        if level is not None:
            starts["the level counts'"] = spread_orders(instance, level)
    # the iteration bound's counts (this call's: it ran) see the task graph and the issue times
    iteration = iteration_counts(instance) if ctx.bounds.iteration is not None else None
    if iteration is not None:
        starts["the iteration bound's"] = spread_orders(instance, iteration)
    logger.info("assignment search: from %s orders", ", ".join(starts))
    found = improve_assignment(instance, list(starts.values()), deadline=budget, **ctx.search_options())
    ctx.offer(found)


def at_bound(ctx: Context, budget: Deadline) -> None:
    """Ask CP-SAT, for the fill-and-drain program's counts and then every other assignment whose
    fill-and-drain value meets the bound, whether it admits a schedule at the bound (counts fixed,
    the horizon cut there, the first schedule found ends it): ``pipeline.at_bound_lanes`` at once
    (see :func:`~themis_opt.cpsat.ask_at_once`), the program's counts for the whole stage, each
    other in ``pipeline.at_bound_seconds`` at first. A yes is a schedule that meets the bound; the
    answers are never reported as bounds or statuses.
    """
    from themis_opt.cpsat import ask_at_once  # CP-SAT is imported only when it runs

    instance = ctx.instance
    assert ctx.best is not None
    bound = ctx.bounds.best
    cap = bound + optimality_tolerance(bound, instance.origin_ns)
    first = ctx.counts(budget)
    if first is None:
        return
    pipeline = ctx.params.pipeline
    others = counts_within(instance, cap, budget, ctx.params.bounds)
    questions = itertools.chain(
        [(first.counts, math.inf)], ((c, pipeline.at_bound_seconds) for c in others if c != first.counts)
    )
    try:
        models = ctx.capped(cap, budget, pipeline.at_bound_lanes)
        outcome, asked = ask_at_once(
            models, questions, budget, lambda _, o: is_proven(o.schedule.makespan, bound, instance.origin_ns)
        )
    except OutOfTime:
        outcome, asked = None, 0
    if outcome is not None:
        logger.info("at the bound: %s of counts asked, one meets it", counted(asked, "assignment"))
        ctx.offer(outcome.schedule)
        return
    logger.info("at the bound: %s of counts asked, none met it", counted(asked, "assignment"))
    ctx.offer(None)


def spread(instance: Instance, counts: Counts, deadline: Deadline) -> Schedule:
    """Order ``counts`` spread evenly over the chunks, timed under every policy: the shortest."""
    orders = spread_orders(instance, counts)
    return min((simulate(instance, orders, p, deadline) for p in Intra), key=lambda s: s.makespan)


def sequence_search(ctx: Context, budget: Deadline) -> None:
    """The sequence search from the fill-and-drain counts spread evenly and from the best
    schedule, one search per worker; it stops once it meets the lower bound. Its best from the
    spread counts is kept as the counts-fixed stage's hint.
    """
    from themis_opt.search import improve_sequences_per_start, sequences_searchable

    instance = ctx.instance
    assert ctx.best is not None
    if not sequences_searchable(instance):
        return
    starts = [ctx.best]
    counts = ctx.counts(budget)
    try:
        if counts is not None:
            starts.insert(0, spread(instance, counts.counts, budget))
    except OutOfTime:
        pass
    found = improve_sequences_per_start(instance, starts, deadline=budget, **ctx.search_options())
    if len(starts) == 2:  # the spread start went first
        ctx.spread = found[0]
    ctx.offer(min((s for s in found if s is not None), key=lambda s: s.makespan, default=None))


def windows(ctx: Context, budget: Deadline) -> None:
    """The exact model would be too large: the large-neighbourhood search from the best schedule
    (windows of collectives re-solved by CP-SAT) until the deadline; the method ends here.
    """
    assert ctx.best is not None
    cpsat = ctx.params.cpsat
    too_large = (
        f"cpsat: the exact model would have {ctx.literals} order literals and {ctx.instance.num_phases} phases "
        f"(limits {cpsat.max_order_literals} and {cpsat.max_phases})"
    )
    ctx.done = True
    if not solvers_loaded(budget, ctx.params.bounds, cpsat=True):
        ctx.note = f"{too_large}; out of time before CP-SAT was loaded: the best heuristic schedule is returned"
        return
    from themis_opt.cpsat import improve_by_windows

    ctx.note = (
        f"{too_large}: large-neighbourhood search from the best heuristic schedule instead "
        "(windows of collectives re-solved by CP-SAT)"
    )
    try:
        best, trajectory = improve_by_windows(
            ctx.instance, ctx.best, deadline=budget, workers=ctx.workers, seed=ctx.options.seed, t0=ctx.t0, params=cpsat
        )
    except OutOfTime:
        return
    ctx.best = best
    ctx.trajectory.extend(trajectory[1:])


def counts_fixed(ctx: Context, budget: Deadline) -> None:
    """CP-SAT on the restriction to the fill-and-drain program's order counts (every chunk's order
    fixed by the symmetry breaking: a sequencing problem), from the first hint with those counts
    (the best schedule, then the sequence search's from the spread counts), else from the spread
    counts. When that program's bound is tight, some optimal schedule has counts optimal in it.
    """
    assert ctx.best is not None
    counts = ctx.counts(budget)
    if counts is None:
        return
    try:
        hints = [h for h in (ctx.best, ctx.spread) if h is not None]
        hint = next((h for h in hints if counts_match(ctx.instance, h.orders, counts.counts)), None)
        outcome = ctx.cpsat(hint or spread(ctx.instance, counts.counts, budget), budget, counts=counts.counts)
    except OutOfTime:
        return
    ctx.adopt(outcome)


def refutation(ctx: Context, budget: Deadline) -> None:
    """Raise the bound: for a cap ``L``, every assignment of order counts of fill-and-drain value
    below ``L`` (in increasing value) shown by CP-SAT to admit no schedule ending by ``L`` proves
    ``L``. Caps ``refute_step`` above the bound, then twice as far each round that took under
    ``refute_growth`` of the stage's time left, as far otherwise (a quarter as far after one
    stopped short), the last half the tolerance below the best; a round stopped short
    still proves the least value not refuted (see docs/methods.md, the refutation stage). The
    assignments are asked ``pipeline.refute_lanes`` at once, each ``refute_seconds`` at first and
    four times as long once the others have been asked (:func:`~themis_opt.cpsat.ask_at_once`).
    """
    if not solvers_loaded(budget, ctx.params.bounds, cpsat=True):
        return
    from themis_opt.cpsat import ask_at_once  # CP-SAT is imported only when it runs
    from themis_opt.cpsat.driver import BOUND_MARGIN
    from themis_opt.search.counts import counts_by_value

    instance = ctx.instance
    pipeline = ctx.params.pipeline
    origin, step = instance.origin_ns, pipeline.refute_step
    refuted: dict[Hashable, float] = {}  # per assignment refuted, the highest cap: refuted at any lower one too
    drawn = _Drawn(counts_by_value(instance, budget, ctx.params.bounds))  # one program for every round
    while not ctx.proven() and not budget.expired():
        assert ctx.best is not None
        level = ctx.bounds.best
        # half the tolerance below the best: refuted there, the best is proven, margin and all
        upper = ctx.best.makespan - optimality_tolerance(ctx.best.makespan, origin) / 2
        cap = min(origin + (level - origin) * (1 + step), upper)
        if cap <= level:
            return
        began = time.perf_counter()
        round_ = _Refuting(drawn, level, cap, pipeline.refute_seconds, refuted)
        try:
            models = ctx.capped(cap, budget, pipeline.refute_lanes)
            outcome, _ = ask_at_once(models, round_.questions(), budget, round_.answered)
        except OutOfTime:
            outcome = None
        shorter = outcome is not None and outcome.schedule.makespan < ctx.best.makespan
        if outcome is not None:
            ctx.offer(outcome.schedule)
        reached = round_.reached()
        logger.info(
            "refutation: cap %.6g ns, %s refuted (%d known), reached %.6g ns%s",
            cap,
            counted(len(round_.refuted), "assignment"),
            round_.known,
            reached,
            "" if reached >= cap else " (stopped short)",
        )
        if reached < cap:  # a round stopped short: what it refuted still counts
            if reached > level:
                ctx.keep_cpsat_bound(reached)
            if shorter:  # on with the next round below the new best
                continue
            if step <= pipeline.refute_step:
                return
            step = max(pipeline.refute_step, step / 4)  # a closer cap: fewer assignments, each refuted sooner
            continue
        logger.info("refutation: no schedule ends by %.6g ns", cap)
        ctx.keep_cpsat_bound(cap * (1 - BOUND_MARGIN))  # the model's times are whole quanta within a margin
        if cap == upper:
            return
        if time.perf_counter() - began < budget.remaining() * pipeline.refute_growth:
            step *= 2  # twice as far: many times the assignments, so only after a quick round


class _Refuting:
    """One round of the refutation stage: the assignments below ``cap`` in increasing value (from
    ``found``, the stage's :class:`_Drawn`), those refuted, and how far that
    reaches: the least value not refuted (``cap`` once every assignment below it is; ``level``, the
    bound so far, before any is drawn). ``before`` holds the earlier rounds' refutations, each at
    its highest cap: one at this cap or above is not asked again (no schedule ends by a cap, so
    none by a lower one); this round's are added to it.
    """

    def __init__(
        self,
        found: _Drawn,
        level: float,
        cap: float,
        seconds: float,
        before: dict[Hashable, float],
    ) -> None:
        self.found, self.cap, self.seconds, self.before = found, cap, seconds, before
        self.drawn: dict[Hashable, float] = {}  # per assignment drawn (its key), its value
        self.refuted: set[Hashable] = set()
        self.known = 0  # refuted in an earlier round at this cap or above
        self.last = level  # the last value drawn (the bound before any): none drawn later is below it
        self.done = False  # every assignment below the cap drawn (or none left)

    def questions(self) -> Iterator[tuple[Counts, float]]:
        for value, counts in self.found:
            self.last = value
            if value >= self.cap:
                self.done = True
                return
            key = _key(counts)
            self.drawn[key] = value
            if self.before.get(key, -math.inf) >= self.cap:
                self.refuted.add(key)
                self.known += 1
                continue
            yield counts, self.seconds
        self.done = self.done or bool(self.found.none_left)

    def answered(self, counts: Counts, outcome: CpsatOutcome) -> bool:
        """Keeps a refutation; a schedule within the cap ends the round."""
        if outcome.status is Status.INFEASIBLE:
            key = _key(counts)
            self.refuted.add(key)
            self.before[key] = max(self.before.get(key, -math.inf), self.cap)
        return outcome.status is Status.FEASIBLE

    def reached(self) -> float:
        """The least value of an assignment not refuted: every one below it is."""
        open_ = [v for key, v in self.drawn.items() if key not in self.refuted]
        if open_:
            return min(open_)
        return self.cap if self.done else min(self.last, self.cap)


class _Drawn:
    """The assignments of :func:`~themis_opt.search.counts.counts_by_value`, each drawn from its
    program once and kept: every round iterates them from the first (in increasing value, each
    value a bound on every one after it), the program solved further only past those kept.
    """

    def __init__(self, found: Generator[tuple[float, Counts], None, bool]) -> None:
        self.found = found
        self.kept: list[tuple[float, Counts]] = []
        self.none_left: bool | None = None  # once the program ended: whether it proved no assignment is left

    def __iter__(self) -> Iterator[tuple[float, Counts]]:
        n = 0
        while True:
            if n < len(self.kept):
                yield self.kept[n]
                n += 1
                continue
            if self.none_left is not None:
                return
            try:
                self.kept.append(next(self.found))
            except StopIteration as end:
                self.none_left = bool(end.value)
                return


def _key(counts: Counts) -> Hashable:
    """An assignment as a value to look up: per class, its orders' counts."""
    return tuple((cls, tuple(sorted(orders.items()))) for cls, orders in counts.items())


def probe(ctx: Context, budget: Deadline) -> None:
    """CP-SAT on the exact model, hinted with the best schedule, for a share of the time: where it
    proves its bound sooner than the searches before the last stage would leave it time, the call
    ends early; its bound and any better schedule are kept.
    """
    assert ctx.best is not None
    try:
        outcome = ctx.cpsat(ctx.best, budget)
    except OutOfTime:
        return
    if outcome.status in (Status.INFEASIBLE, Status.MODEL_INVALID):
        logger.error("CP-SAT says %s for a model with a valid warm start", outcome.status.value)
        return
    ctx.keep_cpsat_bound(outcome.bound)
    ctx.adopt(outcome)


def full_model(ctx: Context, budget: Deadline) -> None:
    """CP-SAT on the exact model, hinted with the best schedule, until the deadline."""
    assert ctx.best is not None
    ctx.done = True
    try:
        outcome = ctx.cpsat(ctx.best, budget)
    except OutOfTime:
        ctx.note = "cpsat: out of time while building the model: the best heuristic schedule is returned"
        return
    ctx.keep_cpsat_bound(outcome.bound)
    ctx.stats = outcome.stats
    if outcome.status in (Status.INFEASIBLE, Status.MODEL_INVALID):
        logger.error("CP-SAT says %s for a model with a valid warm start", outcome.status.value)
        ctx.status, ctx.best = outcome.status, None
        return
    ctx.best = outcome.schedule
    ctx.trajectory.extend(outcome.trajectory[1:])
