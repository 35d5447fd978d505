"""The one entry point: ``solve(instance, method=...) -> Result``, and the registry of methods."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from typing import assert_never

from themis_opt.bounds import Bounds, Memo, compute_bounds
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.errors import InputError
from themis_opt.heuristics import balanced_schedule, baseline_schedule, themis_schedule
from themis_opt.instance import Instance
from themis_opt.methods import METHODS, VARIANTS, Intra, resolve_method
from themis_opt.params import DEFAULT, SolveParams
from themis_opt.result import Result, Status, optimality_tolerance, status_of
from themis_opt.schedule import Schedule

logger = logging.getLogger(__name__)


def available_workers() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def check_options(
    method: str,
    intra: str | None,
    time_limit: float,
    workers: int | None,
    seed: int,
    quantum_ns: float | None,
) -> None:
    """Raise :class:`InputError` on an option out of range."""
    if method not in METHODS:
        raise InputError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    if intra is not None and intra not in {i.value for i in Intra}:
        raise InputError("intra", f"must be fifo or scf, got {intra!r}")
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise InputError("time_limit", f"must be a number > 0, got {time_limit!r}")
    if not math.isfinite(time_limit) or time_limit > 1e6:
        raise InputError("time_limit", f"must be at most 1e6 seconds, got {time_limit!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024):
        raise InputError("workers", f"must be an integer from 1 to 1024, got {workers!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise InputError("seed", f"must be an integer from 0 to 2^31 - 1, got {seed!r}")
    if quantum_ns is not None and (
        isinstance(quantum_ns, bool)
        or not isinstance(quantum_ns, (int, float))
        or not (quantum_ns > 0 and math.isfinite(quantum_ns))
    ):
        raise InputError("quantum_ns", f"must be a finite number > 0, got {quantum_ns!r}")


def solve(
    instance: Instance,
    method: str = "themis",
    *,
    intra: str | None = None,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    quantum_ns: float | None = None,
    log: bool = False,
    bounds: Bounds | None = None,
    warm: Schedule | None = None,
    params: SolveParams | None = None,
) -> Result:
    """Schedule ``instance`` with one method.

    Parameters
    ----------
    instance
        The instance.
    method
        A name from :data:`~themis_opt.methods.METHODS`: ``baseline`` (one
        fixed order), ``themis`` (greedy orders), ``balanced`` (order counts
        of the load bounds, spread evenly) or ``cpsat`` (the searches and
        CP-SAT of :mod:`themis_opt.pipeline`, from the best of the others);
        or a variant such as ``themis-fifo`` (the method with that ``intra``).
    intra
        ``fifo`` or ``scf``: how a free dimension picks the next waiting
        phase. Defaults: fifo for baseline, scf for themis (as published),
        the better of both for balanced; ignored by cpsat.
    time_limit
        Seconds the whole call may take, every stage included (bounds,
        policies, warm starts, model building, search).
    workers
        CP-SAT's worker threads, and the local searches run at once before
        it, one per seed from ``seed`` on (cpsat only); default: the cores
        available.
    seed
        CP-SAT's random seed and the local searches' first (cpsat only).
    quantum_ns
        Time quantum CP-SAT's times are rounded down to (cpsat only);
        default: the exact quantum of the instance's times where there is
        one, else the warm start's makespan / 100000.
    log
        Stream CP-SAT's log to this package's logger at INFO level.
    bounds
        Bounds already computed for ``instance``. Without them, baseline and
        themis compute only the bounds that need no solver (ideal, critical
        path, compute, least busy); balanced and cpsat
        compute every bound that fits in their share of the time limit.
    warm
        A valid schedule of ``instance`` for cpsat to start from besides the
        heuristics' (e.g. another method's result): cpsat returns nothing worse.
    params
        Every tuning number (:class:`~themis_opt.params.SolveParams`);
        default: ``SolveParams()``.

    Returns
    -------
    Result
        The method's schedule, makespan, status, bounds and runtime.

    Raises
    ------
    InputError
        On an option out of range.
    """
    method, intra = resolve_method(method, intra)
    check_options(method, intra, time_limit, workers, seed, quantum_ns)
    from themis_opt.resolution import checked  # a schedule floats cannot resolve is marked invalid

    t0 = time.perf_counter()
    result = _solve(instance, method, intra, time_limit, workers, seed, quantum_ns, log, bounds, warm, params)
    return checked(instance, result, time_limit - (time.perf_counter() - t0))


def _solve(
    instance: Instance,
    method: str,
    intra: str | None,
    time_limit: float,
    workers: int | None,
    seed: int,
    quantum_ns: float | None,
    log: bool,
    bounds: Bounds | None,
    warm: Schedule | None,
    params: SolveParams | None,
) -> Result:
    """:func:`solve`, its options checked."""
    if params is None:
        params = DEFAULT
    elif not isinstance(params, SolveParams):
        raise InputError("params", f"must be a SolveParams, got {type(params).__name__}")
    t0 = time.perf_counter()
    deadline = Deadline(t0 + time_limit)
    spec = METHODS[method]
    memo: Memo = {}  # the load programs' answers, shared by this call's stages
    if bounds is None:
        settings = params.bounds
        share = (
            deadline.share(settings.share).cap(settings.seconds)
            if spec.searches
            else deadline.share(settings.cheap_share)
        )
        bounds = compute_bounds(instance, share, full=spec.load_bounds, memo=memo, params=settings)
    if spec.searches:
        return _solve_cpsat(instance, bounds, deadline, params, workers, seed, quantum_ns, log, t0, warm, memo)
    schedule: Schedule | None = None
    note = ""
    policy = Intra(intra) if intra is not None else spec.default_intra
    try:
        match spec.name:
            case "baseline":
                schedule = baseline_schedule(instance, policy or Intra.FIFO, deadline)
            case "themis":
                schedule = themis_schedule(instance, policy or Intra.SCF, deadline)
            case "balanced":
                schedule, policy, note = balanced_schedule(instance, intra, deadline, memo, params, bounds.best)
            case "cpsat":  # pragma: no cover - handled above
                raise AssertionError("cpsat searches")
            case _ as unreachable:
                assert_never(unreachable)
    except OutOfTime:
        note = f"{method}: out of time ({time_limit:.3g} s) before the schedule was complete"
    return make_result(instance, method, policy, schedule, bounds, t0, note=note)


def solve_all(
    instance: Instance,
    methods: Sequence[str] = VARIANTS,
    *,
    time_limit: float = 10.0,
    each: bool = False,
    workers: int | None = None,
    seed: int = 0,
    quantum_ns: float | None = None,
    log: bool = False,
    bounds: Bounds | None = None,
    params: SolveParams | None = None,
) -> list[Result]:
    """Every method of ``methods`` in order, with one set of bounds; cpsat starts from the best
    schedule found before it, so it is never worse than a method listed earlier.

    Parameters
    ----------
    instance
        The instance.
    methods
        Method names or variants (see :func:`resolve_method`); default: every
        variant bench compares.
    time_limit
        Seconds for the whole call (the bounds get ``bounds.share_all`` of
        it, each method the time then left), or with ``each`` for the bounds
        and for every method on its own.
    each
        Give the bounds and every method ``time_limit`` each (bench's rule: a
        method's result does not depend on the methods before it).
    workers, seed, quantum_ns, log, params
        As for :func:`solve`.
    bounds
        Bounds already computed for ``instance``.

    Returns
    -------
    list of Result
        One per method, in order; each holds the best bounds any of them
        found, and its status is decided by them.
    """
    for method in methods:
        check_options(resolve_method(method)[0], None, time_limit, workers, seed, quantum_ns)
    params = params if params is not None else DEFAULT
    started = time.perf_counter()
    deadline = Deadline(started + time_limit)
    if bounds is None:
        share = Deadline.after(time_limit) if each else deadline.share(params.bounds.share_all)
        bounds = compute_bounds(instance, share, params=params.bounds)
    options = {"workers": workers, "seed": seed, "quantum_ns": quantum_ns, "log": log, "params": params}
    results: list[Result] = []
    for method in methods:
        done = [r.schedule for r in results if r.schedule is not None]
        warm = min(done, key=lambda s: s.makespan) if done else None
        limit = time_limit if each else max(1e-3, deadline.remaining())  # a millisecond: time to report
        results.append(solve(instance, method, time_limit=limit, bounds=bounds, warm=warm, **options))  # type: ignore[arg-type]
    best = max((r.bounds for r in results), key=lambda b: b.best, default=bounds)
    return [r.with_bounds(best, instance.origin_ns) for r in results]


def make_result(
    instance: Instance,
    method: str,
    policy: Intra | None,
    schedule: Schedule | None,
    bounds: Bounds,
    t0: float,
    status: Status | None = None,
    **extra: object,
) -> Result:
    """The result of a method; its status, unless given (a solver's verdict), is decided by the
    bounds and the optimality tolerance alone.
    """
    tolerance = None
    if schedule is None:
        status, makespan = status or Status.NO_SOLUTION, None
    else:
        makespan = schedule.makespan
        tolerance = optimality_tolerance(makespan, instance.origin_ns)
        status = status_of(makespan, bounds, instance.origin_ns)
    if extra.get("note"):
        logger.info("%s", extra["note"])
    return Result(
        instance.name,
        method,
        policy.value if policy is not None else None,
        status,
        makespan,
        bounds,
        time.perf_counter() - t0,
        schedule,
        tolerance_ns=tolerance,
        **extra,  # type: ignore[arg-type]
    )


def _solve_cpsat(
    instance: Instance,
    bounds: Bounds,
    deadline: Deadline,
    params: SolveParams,
    workers: int | None,
    seed: int,
    quantum_ns: float | None,
    log: bool,
    t0: float,
    given: Schedule | None,
    memo: Memo,
) -> Result:
    """cpsat: the stages of :data:`~themis_opt.pipeline.STAGES`, in order."""
    from themis_opt.pipeline import Context, run_stages

    ctx = Context(
        instance,
        bounds,
        deadline,
        params,
        workers if workers is not None else available_workers(),
        seed,
        quantum_ns,
        log,
        t0,
        memo=memo,
        given=given,
    )
    run_stages(ctx)
    trajectory = tuple(ctx.trajectory) if ctx.best is not None else ()
    return make_result(
        instance,
        "cpsat",
        None,
        ctx.best,
        ctx.bounds,
        t0,
        ctx.status,
        stats=ctx.stats,
        trajectory=trajectory,
        note=ctx.note,
    )
