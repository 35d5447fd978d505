"""The one entry point: ``solve(instance, method=...) -> Result``, and the registry of methods."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from themis_opt.bounds import Memo, compute_bounds, iteration_wanted, programs_wanted, reported
from themis_opt.budget import Deadline
from themis_opt.errors import InputError
from themis_opt.instance import Instance
from themis_opt.methods import METHODS, VARIANTS, MethodCall, SolveOptions, resolve_method
from themis_opt.params import DEFAULT, SolveParams
from themis_opt.resolution import checked  # a schedule floats cannot resolve is marked invalid
from themis_opt.result import Bounds, Interrupted, Result, result_of
from themis_opt.schedule import Schedule

logger = logging.getLogger(__name__)


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
    bound_set: str = "auto",
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
        A queue policy of :data:`~themis_opt.sim.queues.QUEUE_POLICIES` (``fifo``, ``scf``,
        ``tail``): how a free dimension picks the next waiting phase. Defaults: fifo for
        baseline, scf for themis (as published), the better of fifo and scf for balanced;
        cpsat sequences the dimensions itself and takes none.
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
        Bounds already computed for ``instance`` (the result reports those
        ``bound_set`` names).
    warm
        A valid schedule of ``instance`` for cpsat to start from besides the
        heuristics' (e.g. another method's result): cpsat returns nothing worse.
    params
        Every tuning number (:class:`~themis_opt.params.SolveParams`);
        default: ``SolveParams()``.
    bound_set
        Which bounds the result reports, the same for every method:
        ``formulas`` (those that need no solver: ideal, critical path,
        compute, least busy, Jackson's), ``full`` (those, the iteration
        bound and the load programs' that fit in the bounds' share of the
        time) or ``auto`` (``full`` on instances of at most
        ``bounds.auto_load_variables`` order counts, else ``formulas`` and
        the iteration bound). balanced and cpsat run the load
        programs for their own search whatever it says; the status is
        decided by the bounds reported (and cpsat's own).

    Returns
    -------
    Result
        The method's schedule, makespan, status, bounds and runtime.

    Raises
    ------
    InputError
        On an option out of range.
    """
    options = SolveOptions.of(
        method,
        intra,
        time_limit=time_limit,
        workers=workers,
        seed=seed,
        quantum_ns=quantum_ns,
        log=log,
        bound_set=bound_set,
    )
    return run_method(instance, options, bounds=bounds, warm=warm, params=params)


def run_method(
    instance: Instance,
    options: SolveOptions,
    *,
    bounds: Bounds | None = None,
    warm: Schedule | None = None,
    params: SolveParams | None = None,
) -> Result:
    """:func:`solve` with its options made (:class:`~themis_opt.methods.SolveOptions`, checked once).

    Raises
    ------
    InputError
        On a bound set or a parameters object that is not one.
    """
    if params is None:
        params = DEFAULT
    elif not isinstance(params, SolveParams):
        raise InputError("params", f"must be a SolveParams, got {type(params).__name__}")
    t0 = time.perf_counter()
    deadline = Deadline(t0 + options.time_limit)
    spec = METHODS[options.method]
    programs = programs_wanted(instance, options.bound_set, params.bounds)
    memo: Memo = {}  # the load programs' answers, shared by this call's stages
    if bounds is None:
        settings = params.bounds
        share = (
            deadline.share(settings.share).cap(settings.seconds)
            if spec.searches
            else deadline.share(settings.cheap_share)
        )
        iteration = iteration_wanted(instance, options.bound_set, settings)
        full = spec.load_bounds or programs
        bounds = compute_bounds(instance, share, full=full, iteration=iteration, memo=memo, params=settings)
    call = MethodCall(instance, options, deadline, t0, bounds, programs, memo, params, warm)
    return checked(instance, spec.run(call), options.time_limit - (time.perf_counter() - t0))


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
    bound_set: str = "auto",
) -> list[Result]:
    """Every method of ``methods`` in order, with one set of bounds; cpsat starts from the best
    schedule found before it, so it is never worse than a method listed earlier (where the time is
    up before it starts, that schedule is its answer at once).

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
    bound_set
        Which bounds the results report, as for :func:`solve`.

    Returns
    -------
    list of Result
        One per method, in order; each holds the best bounds any of them
        found, and its status is decided by them.
    """
    calls = [  # every method's options checked before any work
        SolveOptions.of(
            method,
            time_limit=time_limit,
            workers=workers,
            seed=seed,
            quantum_ns=quantum_ns if METHODS[resolve_method(method)[0]].searches else None,
            log=log,
            bound_set=bound_set,
        )
        for method in methods
    ]
    params = params if params is not None else DEFAULT
    started = time.perf_counter()
    deadline = Deadline(started + time_limit)
    programs = programs_wanted(instance, bound_set, params.bounds)
    if bounds is None:
        share = Deadline.after(time_limit) if each else deadline.share(params.bounds.share_all)
        full = programs or any(METHODS[call.method].load_bounds for call in calls)
        iteration = iteration_wanted(instance, bound_set, params.bounds)
        bounds = compute_bounds(instance, share, full=full, iteration=iteration, params=params.bounds)
    results: list[Result] = []
    for call in calls:
        done = [r.schedule for r in results if r.schedule is not None]
        warm = min(done, key=lambda s: s.makespan) if done else None
        if not each and warm is not None and deadline.expired() and call.method == "cpsat":
            # no time for cpsat's stages, whose warm start alone times the heuristics again: the best
            # schedule before it is its answer (what it would return), without them
            t0 = time.perf_counter()
            note = "cpsat: out of time before it started: the best schedule of the methods before it"
            result = result_of(instance, "cpsat", None, warm, reported(bounds, programs), t0, note=note)
            results.append(checked(instance, result, 0.0))
            continue
        limit = time_limit if each else max(1e-3, deadline.remaining())  # a millisecond: time to report
        timed = dataclasses.replace(call, time_limit=limit)
        try:
            results.append(run_method(instance, timed, bounds=bounds, warm=warm, params=params))
        except KeyboardInterrupt as stop:  # the methods that finished are kept with the stopped one's best
            kept = [*results, *(stop.results if isinstance(stop, Interrupted) else ())]
            if not kept:
                raise
            best = max((r.bounds for r in kept), key=lambda b: b.best)
            raise Interrupted(*(r.with_bounds(best, instance.origin_ns) for r in kept)) from stop
    best = max((r.bounds for r in results), key=lambda b: b.best, default=reported(bounds, programs))
    return [r.with_bounds(best, instance.origin_ns) for r in results]
