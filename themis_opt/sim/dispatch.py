"""``simulate``: a schedule from every chunk's order, in the compiled core where it can run, else in Python.

Both engines follow the same rules step for step (:mod:`themis_opt.sim.engine`
describes them), so the makespans and schedules are the same; the tests
compare them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import themis_opt.sim.core as core
from themis_opt.budget import Deadline, gc_paused
from themis_opt.instance import Instance
from themis_opt.orders import Orders, Planner, check_orders
from themis_opt.policies import ThemisTracker
from themis_opt.schedule import ComputeSchedule, Schedule
from themis_opt.sim.engine import PhaseMemo, build_schedule, run_python
from themis_opt.sim.queues import Intra, queue_policy

Engine = Literal["auto", "core", "python"]


def core_runs(
    instance: Instance, orders: Orders | Planner, engine: Engine, intra: str = Intra.FIFO
) -> tuple[bool, Orders | None]:
    """Whether the compiled core runs ``orders`` under ``engine`` and the policy ``intra``, and the
    orders it takes (``None``: a planner).

    The core runs every instance (pipeline stages and sends too) under the policies it has a case
    for; another policy runs in Python.
    """
    if queue_policy(intra).c_code is None:
        if engine == "core":
            raise RuntimeError(f"the compiled simulator core does not run the {intra} policy")
        return False, None
    if engine == "python" or not core.available():
        if engine == "core":
            raise RuntimeError("the compiled simulator core is not available")
        return False, None
    if not callable(orders):
        return True, orders
    tracker = getattr(orders, "__self__", None)
    if isinstance(tracker, ThemisTracker) and tracker.fresh and core.plannable(instance):
        return True, None
    if engine == "core":
        raise RuntimeError("the compiled simulator core plans only with a fresh ThemisTracker")
    return False, None


def _core_builder(instance: Instance, run: core.CoreRun) -> Callable[..., Schedule]:
    """The schedule of a run of the core: its chunks are built when first asked for."""

    def build(deadline: Deadline | None = None) -> Schedule:
        computes = tuple(
            ComputeSchedule(j, start, start + task.duration_ns)
            for j, (task, start) in enumerate(zip(instance.computes, run.compute_starts))
        )
        return Schedule.lazy(
            lambda: build_schedule(instance, run.orders(instance), run.plan(), run.phase_starts(), ()).chunks,
            computes,
            run.schedule_makespan,
            run.busy_ns,
            run.collective_ends,
            lambda: run.columns(instance),
            lambda: run.orders(instance),
        )

    return build


def simulate(
    instance: Instance,
    orders: Orders | Planner,
    intra: Intra | str = Intra.FIFO,
    deadline: Deadline | None = None,
    *,
    baseline: bool = False,
    engine: Engine = "auto",
) -> Schedule:
    """Time every task's phases and compute under an intra-dimension policy.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk); or a planner
        ``(collective, release_ns) -> one order per chunk`` called when each
        collective is released (Themis's tracker plans this way).
    intra
        The intra-dimension policy's name (:data:`~themis_opt.sim.queues.QUEUE_POLICIES`).
    deadline
        When to give up (checked every few thousand events).
    baseline
        Cut all-reduces into phases as the baseline does (under
        ``local_bw_aware`` its last dimension runs one all-reduce phase).
    engine
        ``auto``: the compiled core (:mod:`themis_opt.sim.core`) for fixed
        orders and for a fresh :class:`~themis_opt.policies.ThemisTracker`'s
        ``plan`` (which it leaves untouched), else Python; ``core`` or
        ``python`` to choose (the same schedule either way).

    Returns
    -------
    Schedule
        The timed schedule; dimensions never idle while a phase waits for
        them, nor the compute unit while a compute task is ready.

    Raises
    ------
    OutOfTime
        If ``deadline`` passes first.
    InputError
        If ``orders`` misses a chunk or gives one an order it cannot take.
    """
    deadline = deadline or Deadline()
    queue_policy(intra)  # known, before any work
    in_core, core_orders = core_runs(instance, orders, engine, intra)
    if not callable(orders) and not in_core:  # the core checks each distinct order as it meets it
        check_orders(instance, orders)
    with gc_paused():
        if in_core:
            run = core.run(instance, core_orders, intra, deadline, baseline=baseline)
            build = _core_builder(instance, run)
        else:
            _, build = run_python(instance, orders, intra, deadline, {}, baseline)
        return build(deadline=deadline)


def simulate_makespan(
    instance: Instance, orders: Orders, intra: str, deadline: Deadline, memo: PhaseMemo, engine: Engine = "auto"
) -> tuple[float, Callable[..., Schedule]]:
    """:func:`simulate`'s makespan, and a function that builds its schedule.

    For searches that time many assignments and keep few: the schedule is
    built only when asked, and ``memo`` (an empty dict to begin with, then
    passed again for the same instance) keeps every chunk's phases from run
    to run in Python (the core keeps its own per instance). ``orders`` are
    trusted (:func:`check_orders` is not run).
    """
    if core_runs(instance, orders, engine, intra)[0]:
        run = core.run(instance, orders, intra, deadline)
        return run.makespan, _core_builder(instance, run)
    with gc_paused():
        return run_python(instance, orders, intra, deadline, memo)
