"""The table of stages (:data:`STAGES`): when each runs and with what share, and running them."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from themis_opt.bounds import reported
from themis_opt.budget import Deadline, available_workers
from themis_opt.methods import MethodCall
from themis_opt.params import SolveParams, Stage
from themis_opt.pipeline import stages as st
from themis_opt.pipeline.context import Context
from themis_opt.result import Interrupted, Result, result_of

logger = logging.getLogger(__name__)


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
    StageSpec("warm start", None, lambda ctx: True, st.warm_start, starts=True),
    StageSpec("assignment search", "assignment", Context.may_search, st.assignment_search),
    StageSpec("at the bound", "at_bound", lambda ctx: _small(ctx) and ctx.may_search(), st.at_bound),
    StageSpec("probe", "probe", lambda ctx: _small(ctx) and ctx.may_search(), st.probe),
    StageSpec(
        "refutation", "refutation", lambda ctx: _alone(ctx) and ctx.exact_fits and ctx.may_search(), st.refutation
    ),
    StageSpec("sequence search", "sequence", lambda ctx: _small(ctx) and ctx.may_search(), st.sequence_search),
    StageSpec("windows", None, lambda ctx: not ctx.exact_fits, st.windows),
    StageSpec("counts fixed", "counts_fixed", _small, st.counts_fixed),
    StageSpec("full model", None, lambda ctx: True, st.full_model),
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
