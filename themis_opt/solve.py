"""The one entry point: ``solve(instance, method=...) -> Result``."""

from __future__ import annotations

import logging
import math
import os
import time

from themis_opt.bounds import Bounds, compute_bounds, integer_load_bound
from themis_opt.cpsat import default_quantum, solve_cpsat
from themis_opt.errors import InputError
from themis_opt.instance import Instance
from themis_opt.policies import baseline_orders, spread_orders, themis_orders
from themis_opt.result import Result, Status
from themis_opt.schedule import Schedule
from themis_opt.simulator import Intra, simulate

logger = logging.getLogger(__name__)

METHODS = ("baseline", "themis", "balanced", "cpsat")
DEFAULT_INTRA = {"baseline": Intra.FIFO, "themis": Intra.SCF}


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
    if not math.isfinite(time_limit):
        raise InputError("time_limit", f"must be finite, got {time_limit!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError("workers", f"must be an integer >= 1, got {workers!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("seed", f"must be an integer >= 0, got {seed!r}")
    if quantum_ns is not None and (
        isinstance(quantum_ns, bool)
        or not isinstance(quantum_ns, (int, float))
        or not (quantum_ns > 0 and math.isfinite(quantum_ns))
    ):
        raise InputError("quantum_ns", f"must be a finite number > 0, got {quantum_ns!r}")


def _proven(makespan: float, bounds: Bounds, quantum: float) -> bool:
    """Whether ``makespan`` meets the best bound within the time quantum."""
    return makespan <= bounds.best + quantum


def balanced_schedule(instance: Instance, intra: str | None = None) -> tuple[Schedule, Intra]:
    """The balanced policy's schedule and the intra-dimension policy that timed it.

    Order counts come from the integer fill-and-drain bound and, as a second
    candidate, from the plain integer load bound (its assignment often
    interleaves better); each is spread evenly over every class's chunks and
    timed with ``intra``, or with both policies. The shortest schedule wins
    (ties: fill-and-drain counts first, then fifo).
    """
    policies = [Intra(intra)] if intra is not None else [Intra.FIFO, Intra.SCF]
    timed = []
    for fill_drain in (True, False):
        orders = spread_orders(instance, integer_load_bound(instance, fill_drain=fill_drain).counts)
        timed += [(simulate(instance, orders, policy), policy) for policy in policies]
    return min(timed, key=lambda entry: entry[0].makespan)


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
) -> Result:
    """Schedule ``instance`` with one method.

    Parameters
    ----------
    instance
        The instance.
    method
        ``baseline`` (one fixed order), ``themis`` (greedy orders),
        ``balanced`` (order counts of the fill-and-drain bound, spread evenly)
        or ``cpsat`` (exact, from the best of the others as warm start).
    intra
        ``fifo`` or ``scf``: how a free dimension picks the next waiting
        phase. Defaults: fifo for baseline, scf for themis (as published),
        the better of both for balanced; ignored by cpsat.
    time_limit
        CP-SAT's time limit in seconds (cpsat only).
    workers
        CP-SAT's worker threads (cpsat only); default: the cores available.
    seed
        CP-SAT's random seed (cpsat only).
    quantum_ns
        Time quantum CP-SAT's durations are rounded up to, and the tolerance
        within which a makespan meeting a bound counts as optimal; default:
        the warm start's makespan / 100000.
    log
        Stream CP-SAT's log to this package's logger at INFO level.
    bounds
        Bounds already computed for ``instance`` (saves recomputing them).

    Returns
    -------
    Result
        The method's schedule, makespan, status, bounds and runtime.

    Raises
    ------
    InputError
        On an option out of range.
    """
    check_options(method, intra, time_limit, workers, seed, quantum_ns)
    t0 = time.perf_counter()
    if bounds is None:
        bounds = compute_bounds(instance)
    if method == "cpsat":
        return _solve_cpsat(instance, bounds, time_limit, workers, seed, quantum_ns, log, t0)
    if method == "balanced":
        schedule, policy = balanced_schedule(instance, intra)
    else:
        policy = Intra(intra) if intra is not None else DEFAULT_INTRA[method]
        orders = baseline_orders(instance) if method == "baseline" else themis_orders(instance)
        schedule = simulate(instance, orders, policy)
    quantum = quantum_ns if quantum_ns is not None else default_quantum(schedule.makespan)
    status = Status.OPTIMAL if _proven(schedule.makespan, bounds, quantum) else Status.FEASIBLE
    runtime = time.perf_counter() - t0
    return Result(instance.name, method, policy.value, status, schedule.makespan, bounds, runtime, schedule)


def _solve_cpsat(
    instance: Instance,
    bounds: Bounds,
    time_limit: float,
    workers: int | None,
    seed: int,
    quantum_ns: float | None,
    log: bool,
    t0: float,
) -> Result:
    candidates = [
        simulate(instance, baseline_orders(instance), Intra.FIFO),
        simulate(instance, themis_orders(instance), Intra.FIFO),
        simulate(instance, themis_orders(instance), Intra.SCF),
        balanced_schedule(instance)[0],
    ]
    warm = min(candidates, key=lambda s: s.makespan)
    quantum = quantum_ns if quantum_ns is not None else default_quantum(warm.makespan)
    if _proven(warm.makespan, bounds, quantum):
        logger.info("warm start meets the lower bound: CP-SAT not needed")
        return Result(
            instance.name,
            "cpsat",
            None,
            Status.OPTIMAL,
            warm.makespan,
            bounds,
            time.perf_counter() - t0,
            warm,
            trajectory=((time.perf_counter() - t0, warm.makespan),),
        )
    outcome = solve_cpsat(
        instance,
        warm,
        time_limit=time_limit,
        workers=workers if workers is not None else available_workers(),
        seed=seed,
        quantum_ns=quantum,
        log=log,
        t0=t0,
        lower_bound=bounds.best,
    )
    bounds = Bounds(bounds.ideal, bounds.lp, bounds.ip, bounds.fill_drain, outcome.bound)
    schedule: Schedule | None = outcome.schedule
    status = outcome.status
    if status is Status.NO_SOLUTION:
        status = Status.FEASIBLE  # CP-SAT found nothing new, the warm start stands
    elif status in (Status.INFEASIBLE, Status.MODEL_INVALID):
        logger.error("CP-SAT says %s for a model with a valid warm start", status.value)
        schedule = None
    if schedule is not None and status is Status.FEASIBLE and _proven(schedule.makespan, bounds, quantum):
        status = Status.OPTIMAL
    return Result(
        instance.name,
        "cpsat",
        None,
        status,
        schedule.makespan if schedule else None,
        bounds,
        time.perf_counter() - t0,
        schedule,
        outcome.stats,
        outcome.trajectory,
    )
