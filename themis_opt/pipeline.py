"""The cpsat method: its stages, in order, each with its share of the time left, its cap and when it runs.

Every stage after the first runs only while the best schedule is not proven optimal:

1. **warm start**: the best of the heuristics and of the caller's schedule;
   the baseline may take all the time left, each other heuristic
   ``warm_share`` of it;
2. **assignment search**: ``assignment`` of the time left
   (``assignment_large_share`` above ``large_phases`` phases), when more is
   left than the warm start took;
3. **at the bound**: ``at_bound`` (at most 5 s), up to 128 phases and 4,096
   order literals;
4. **sequence search**: ``sequence``, up to ``large_phases`` phases,
   collectives only;
5. **windows**: all the time left, when the exact model is too large (it
   ends the method);
6. **counts fixed**: ``counts_fixed`` (at most 20 s), up to ``large_phases``
   phases and 4,096 order literals;
7. **refutation**: ``refutation`` (at most 10 s), one collective of up to 128
   phases and 4,096 order literals: it raises the bound;
8. **full model**: all the time left (it ends the method).

The shares, caps and limits are :class:`~themis_opt.params.PipelineParams`
(a stage is switched off with ``enabled = false``); :data:`STAGES` is the
table the method runs, and :func:`describe` gives it as data. Where the
baseline's merged all-reduce phase is shorter than the split ones every other
stage works with (a double binary tree on the last dimension), the baseline's
schedule is kept when it is better, and CP-SAT's own bound, which holds for
split schedules, is dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from themis_opt.bounds import LoadSolution, Memo, integer_load_bound, reported, solvers_loaded
from themis_opt.budget import Deadline, OutOfTime, available_workers
from themis_opt.cost import merging_shortens
from themis_opt.errors import counted
from themis_opt.heuristics import balanced_schedule, baseline_schedule, themis_schedule
from themis_opt.instance import Instance
from themis_opt.methods import MethodCall, SolveOptions
from themis_opt.orders import Counts, Orders
from themis_opt.params import SolveParams, Stage
from themis_opt.policies import counts_match, spread_orders
from themis_opt.result import (
    Bounds,
    Interrupted,
    Result,
    SolverStats,
    Status,
    is_proven,
    optimality_tolerance,
    result_of,
)
from themis_opt.schedule import Schedule
from themis_opt.search.counts import counts_within, level_counts
from themis_opt.sim import simulate
from themis_opt.sim.queues import Intra

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.cpsat import CpsatOutcome

logger = logging.getLogger(__name__)


@dataclass
class Context:
    """What the stages of one cpsat call share: the instance, its bounds, the time, the best
    schedule so far and how it came about, and the load programs' answers (computed once).
    """

    instance: Instance
    bounds: Bounds
    deadline: Deadline
    params: SolveParams
    options: SolveOptions
    workers: int  # the options' workers, or the cores available
    t0: float
    memo: Memo = field(default_factory=dict)
    given: Schedule | None = None  # the caller's schedule, a warm start besides the heuristics'
    best: Schedule | None = None
    trajectory: list[tuple[float, float]] = field(default_factory=list)
    warm_cost: float = 0.0  # seconds the warm start took: a search with less time could not time one schedule
    spread: Schedule | None = None  # the sequence search's best from the program's counts: a hint
    merged: Schedule | None = None  # the baseline's merged schedule, where it may be shorter
    stats: SolverStats | None = None
    note: str = ""
    status: Status | None = None  # set when CP-SAT says the model is infeasible or invalid
    done: bool = False  # a stage that ends the method ran

    @property
    def literals(self) -> int:
        """Order literals of the exact model: chunks times orders."""
        return sum(coll.chunks * self.instance.order_count(c) for c, coll in enumerate(self.instance.collectives))

    @property
    def exact_fits(self) -> bool:
        """Whether the exact model is small enough to build."""
        cpsat = self.params.cpsat
        return self.literals <= cpsat.max_order_literals and self.instance.num_phases <= cpsat.max_phases

    def proven(self) -> bool:
        """Whether the best schedule meets the lower bound (within the optimality tolerance)."""
        return self.best is not None and is_proven(self.best.makespan, self.bounds.best, self.instance.origin_ns)

    def may_search(self) -> bool:
        """Whether a search may start: not proven, and more time left than the warm start took."""
        return not self.proven() and self.deadline.remaining() > self.warm_cost

    def keep_cpsat_bound(self, bound: float | None) -> None:
        """Keep CP-SAT's ``bound`` of the exact model, if higher than the one kept (``None``: none found)."""
        if bound is not None:
            self.bounds = dataclasses.replace(self.bounds, cpsat=max(self.bounds.cpsat or 0.0, bound))

    def adopt(self, outcome: CpsatOutcome) -> None:
        """Keep a CP-SAT run's schedule, trajectory and statistics if it beat the best."""
        assert self.best is not None
        if outcome.schedule.makespan < self.best.makespan:
            self.best = outcome.schedule
            self.trajectory.extend(outcome.trajectory[1:])
            self.stats = outcome.stats

    def offer(self, schedule: Schedule | None) -> None:
        """Keep ``schedule`` if it is shorter than the best; the trajectory notes where the best stands."""
        if schedule is not None and (self.best is None or schedule.makespan < self.best.makespan):
            self.best = schedule
        if self.best is not None:
            self.trajectory.append((time.perf_counter() - self.t0, self.best.makespan))

    def counts(self, budget: Deadline) -> LoadSolution | None:
        """The fill-and-drain program's order counts, from the memo or computed in part of ``budget``."""
        return integer_load_bound(
            self.instance,
            fill_drain=True,
            deadline=budget.share(self.params.pipeline.counts_share),
            memo=self.memo,
            params=self.params.bounds,
        )

    def search_options(self) -> dict[str, Any]:
        """What every local search of this call is given besides its starts and deadline."""
        return {
            "seed": self.options.seed,
            "target": self.bounds.best,
            "workers": self.workers,
            "params": self.params.search,
        }

    def cpsat(self, start: Schedule, deadline: Deadline, **options: Any) -> CpsatOutcome:
        """CP-SAT from ``start`` with this call's options (see :func:`~themis_opt.cpsat.solve_cpsat`)."""
        if not solvers_loaded(deadline, self.params.bounds, cpsat=True):
            raise OutOfTime("cpsat: out of time before CP-SAT was loaded")
        from themis_opt.cpsat import solve_cpsat  # CP-SAT is imported only when it runs

        return solve_cpsat(
            self.instance,
            start,
            deadline=deadline,
            workers=self.workers,
            seed=self.options.seed,
            quantum_ns=self.options.quantum_ns,
            log=self.options.log,
            t0=self.t0,
            lower_bound=self.bounds.best,
            params=self.params.cpsat,
            **options,
        )


# ------------------------------------------------------------------ stages


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
    evenly and, with several collectives, from the counts that level each collective's load over
    the dimensions, one seed per worker; it stops once it meets the lower bound.
    """
    from themis_opt.search import improve_assignment

    instance = ctx.instance
    assert ctx.best is not None
    starts: list[Orders] = [ctx.best.orders]
    counts = ctx.counts(budget)
    if counts is not None:
        starts.append(spread_orders(instance, counts.counts))
        # with one collective, leveling its load is the program's own objective: nothing to add
        share = budget.share(ctx.params.pipeline.counts_share)
        level = level_counts(instance, counts, share, ctx.params.bounds) if len(instance.collectives) > 1 else None
        if level is not None:
            starts.append(spread_orders(instance, level))
    found = improve_assignment(instance, starts, deadline=budget, **ctx.search_options())
    ctx.offer(found)


def at_bound(ctx: Context, budget: Deadline) -> None:
    """Ask CP-SAT, for the fill-and-drain program's counts and then every other assignment whose
    fill-and-drain value meets the bound, whether it admits a schedule at the bound (counts fixed,
    the horizon cut there, the first schedule found ends it). A yes is a schedule that meets the
    bound; the answers are never reported as bounds or statuses.
    """
    instance = ctx.instance
    assert ctx.best is not None
    bound = ctx.bounds.best
    cap = bound + optimality_tolerance(bound, instance.origin_ns)
    first = ctx.counts(budget)
    if first is None:
        return
    asked = 0
    try:
        for counts in itertools.chain([first.counts], counts_within(instance, cap, budget, ctx.params.bounds)):
            if asked and counts == first.counts:
                continue
            asked += 1
            outcome = ctx.cpsat(ctx.best, budget, counts=counts, cap=cap)
            if is_proven(outcome.schedule.makespan, bound, instance.origin_ns):
                logger.info("at the bound: counts %d meet it", asked)
                ctx.offer(outcome.schedule)
                return
    except OutOfTime:
        pass
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
    ``L``. Caps ``refute_step`` above the bound, then twice as far each round (a quarter as far
    after one stopped short), the last half the tolerance below the best; a round stopped short
    still proves the least value not refuted (see docs/methods.md, the refutation stage).
    """
    if not solvers_loaded(budget, ctx.params.bounds, cpsat=True):
        return
    from themis_opt.cpsat.driver import BOUND_MARGIN  # CP-SAT is imported only when it runs
    from themis_opt.cpsat.refute import CappedModel
    from themis_opt.search.counts import counts_by_value

    instance = ctx.instance
    pipeline = ctx.params.pipeline
    origin, step = instance.origin_ns, pipeline.refute_step
    while not ctx.proven() and not budget.expired():
        assert ctx.best is not None
        level = ctx.bounds.best
        # half the tolerance below the best: refuted there, the best is proven, margin and all
        upper = ctx.best.makespan - optimality_tolerance(ctx.best.makespan, origin) / 2
        cap = min(origin + (level - origin) * (1 + step), upper)
        if cap <= level:
            return
        reached, shorter = level, False  # below reached all refuted at the cap; a schedule found within it
        found = counts_by_value(instance, budget, ctx.params.bounds)
        try:
            model = CappedModel(
                instance,
                ctx.best,
                cap,
                lower_bound=level,
                workers=ctx.workers,
                seed=ctx.options.seed,
                deadline=budget,
                params=ctx.params.cpsat,
            )
            while True:
                reached, counts = next(found)
                if reached >= cap:
                    reached = cap
                    break
                outcome = model.ask(counts, budget.cap(pipeline.refute_seconds))
                if outcome.status != Status.INFEASIBLE:  # a schedule within the cap, or no answer in time
                    shorter = outcome.schedule.makespan < ctx.best.makespan
                    ctx.offer(outcome.schedule)
                    break
        except StopIteration as end:
            if end.value:  # the program proved no assignment is left
                reached = cap
        except OutOfTime:
            pass
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
        step *= 2


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


# ------------------------------------------------------------------- table


@dataclass(frozen=True)
class StageSpec:
    """One row of the table: a stage, where its settings are, when it runs, and what it does.

    Parameters
    ----------
    name
        What logs and docs call it.
    settings
        The :class:`~themis_opt.params.PipelineParams` field with its share,
        cap and limits; ``None`` for a stage that takes all the time left.
    runs
        Whether it runs, given the call's context (its settings' limits are
        checked besides).
    run
        The stage itself: it improves ``ctx.best`` within the budget given.
    starts
        Whether it makes the first schedule (it runs without one, and the
        time it takes is the least a later search needs: ``warm_cost``).
    """

    name: str
    settings: str | None
    runs: Callable[[Context], bool]
    run: Callable[[Context, Deadline], None]
    starts: bool = False


def _small(ctx: Context) -> bool:
    """At most ``large_phases`` phases: above, only the assignment search and CP-SAT run."""
    return ctx.instance.num_phases <= ctx.params.pipeline.large_phases


def _alone(ctx: Context) -> bool:
    """One collective, small: several multiply the assignments, and CP-SAT proves two in a second."""
    return _small(ctx) and len(ctx.instance.collectives) == 1


STAGES: tuple[StageSpec, ...] = (
    StageSpec("warm start", None, lambda ctx: True, warm_start, starts=True),
    StageSpec("assignment search", "assignment", Context.may_search, assignment_search),
    StageSpec("at the bound", "at_bound", lambda ctx: _small(ctx) and ctx.may_search(), at_bound),
    StageSpec("probe", "probe", lambda ctx: _small(ctx) and ctx.may_search(), probe),
    StageSpec("sequence search", "sequence", lambda ctx: _small(ctx) and ctx.may_search(), sequence_search),
    StageSpec("windows", None, lambda ctx: not ctx.exact_fits, windows),
    StageSpec("counts fixed", "counts_fixed", _small, counts_fixed),
    StageSpec("refutation", "refutation", lambda ctx: _alone(ctx) and ctx.exact_fits and ctx.may_search(), refutation),
    StageSpec("full model", None, lambda ctx: True, full_model),
)


def _budget(ctx: Context, spec: StageSpec, stage: Stage | None) -> Deadline:
    """The stage's share of the time left, capped."""
    if stage is None:
        return ctx.deadline
    share = stage.share
    if spec.settings == "assignment" and not _small(ctx):
        share = ctx.params.pipeline.assignment_large_share
    budget = ctx.deadline.share(share)
    return budget.cap(stage.cap) if stage.cap is not None else budget


def _fits(ctx: Context, stage: Stage | None) -> bool:
    """Whether the stage is enabled and the instance within its limits."""
    if stage is None:
        return True
    if not stage.enabled:
        return False
    if stage.max_phases is not None and ctx.instance.num_phases > stage.max_phases:
        return False
    return stage.max_literals is None or ctx.literals <= stage.max_literals


def run_stages(ctx: Context, stages: tuple[StageSpec, ...] = STAGES) -> None:
    """Run the ``stages`` in order, each while the best is not proven, until one ends the method."""
    for spec in stages:
        if ctx.done or (ctx.best is None and not spec.starts):
            break
        if not spec.starts and ctx.proven():
            logger.info("the best schedule meets the lower bound: %s and later stages are not needed", spec.name)
            break
        stage: Stage | None = getattr(ctx.params.pipeline, spec.settings) if spec.settings else None
        if not _fits(ctx, stage) or not spec.runs(ctx):
            continue
        began = time.perf_counter()
        budget = _budget(ctx, spec, stage)
        logger.info("stage %s: %.3g s", spec.name, budget.remaining())
        spec.run(ctx, budget)
        if spec.starts:
            ctx.warm_cost += time.perf_counter() - began
    if ctx.merged is not None:  # the baseline's merged phases: CP-SAT's bound holds for split schedules only
        ctx.bounds = dataclasses.replace(ctx.bounds, cpsat=None)
        if ctx.best is None or ctx.merged.makespan < ctx.best.makespan:
            ctx.best = ctx.merged
            ctx.trajectory.append((time.perf_counter() - ctx.t0, ctx.best.makespan))


def describe(stages: tuple[StageSpec, ...] = STAGES, params: SolveParams | None = None) -> list[dict[str, Any]]:
    """The table as data: per stage its name and its share, cap and limits (for docs and logs)."""
    params = params or SolveParams()
    rows = []
    for spec in stages:
        stage = getattr(params.pipeline, spec.settings) if spec.settings else None
        rows.append({"stage": spec.name, **(dataclasses.asdict(stage) if stage is not None else {"share": 1.0})})
    return rows


def run_cpsat(call: MethodCall) -> Result:
    """cpsat: the stages of :data:`STAGES`, in order; the result reports the load programs' bounds only
    if the call asks for them (the stages use them either way).
    """
    ctx = Context(
        call.instance,
        call.bounds,
        call.deadline,
        call.params,
        call.options,
        call.options.workers if call.options.workers is not None else available_workers(),
        call.t0,
        memo=call.memo,
        given=call.warm,
    )
    try:
        run_stages(ctx)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the best schedule so far is the answer
        if ctx.best is None:
            raise
        ctx.note = "; ".join(filter(None, [ctx.note, "interrupted: the best schedule found before it"]))
        raise Interrupted(_result(call, ctx)) from stop
    return _result(call, ctx)


def _result(call: MethodCall, ctx: Context) -> Result:
    """The result of cpsat: the best schedule of ``ctx``, the bounds the call reports."""
    trajectory = tuple(ctx.trajectory) if ctx.best is not None else ()
    return result_of(
        call.instance,
        "cpsat",
        None,
        ctx.best,
        reported(ctx.bounds, call.report_programs),
        call.t0,
        ctx.status,
        stats=ctx.stats,
        trajectory=trajectory,
        note=ctx.note,
    )
