"""The one entry point: ``solve(instance, method=...) -> Result``, and the registry of methods."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, assert_never

from themis_opt.bounds import Bounds, Memo, compute_bounds, integer_load_bound, level_counts
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.cost import merging_shortens
from themis_opt.errors import InputError
from themis_opt.instance import ChunkClass, Instance
from themis_opt.methods import METHODS, Intra
from themis_opt.policies import ThemisTracker, baseline_orders, counts_match, spread_orders
from themis_opt.result import Result, Status, is_proven, optimality_tolerance
from themis_opt.schedule import Schedule
from themis_opt.simulator import Orders, Planner, simulate

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.cpsat import CpsatOutcome

logger = logging.getLogger(__name__)

# CP-SAT is not started on instances whose model would be larger than this
MAX_CPSAT_ORDER_LITERALS = 100_000  # chunks x orders per chunk
MAX_CPSAT_PHASES = 20_000
# Of the time left after the searches: CP-SAT with the load program's counts fixed (every chunk's order
# fixed: a sequencing problem), hinted. On the 16-chunk 4x16x4x4 all-reduce of bench/exact_scale.py at
# 10 s, 0.45 proved 2 runs of 3 (the last at 9.6 s), 0.75 all 3 in 6.9-7.8 s.
COUNTS_FIXED_SHARE = 0.75
# and at most this many seconds. 5 s while the stage was unhinted with free orders (sw8x8x8 in
# bench/exact_time.py: it met the bound in 0.6 s and 4.2 s, or not in 26 s); as a hinted sequencing
# problem it proved the 32-chunk 4x4x4x16 all-reduce of bench/exact_scale.py in 60 s calls with 20 s
# (seeds 0 and 1), which every call with 5 s left 0.639% above the bound; sw8x8x8 took 3.0-6.2 s.
COUNTS_FIXED_SECONDS = 20.0
# Above this many phases CP-SAT rarely improves the assignment search's schedule (on 8 all-reduces of
# 16 chunks, 1,024 phases, neither the full model in 270 s nor the counts-fixed one in 40 s found one;
# nor did the sequence search in 5 s), so the assignment search gets most of the time, and the
# sequence search and the counts-fixed stage are skipped. That share: 0.9 instead of 0.75 plus the
# sequence search's 40% of the rest took those 8 collectives from 1.22% and 1.63% above the bound
# to 0.97% and 1.34% (seeds 0 and 1, 60 s, cold processes; seed 2: 0.95%).
SEARCH_FIRST_PHASES = 512
SEARCH_FIRST_SHARE = 0.9
# and above this many order literals (chunks x orders) building a second model costs more than the
# counts-fixed stage can win (6 dimensions, 32 chunks: 23,040 literals, seconds to build)
COUNTS_FIXED_LITERALS = 4_096
# After the assignment search, this share of the time left, and at most this many seconds, go to
# asking CP-SAT whether some optimal counts of the fill-and-drain program admit a schedule at the lower
# bound (each count vector fixed, the makespan capped: answered in 0.2-2.5 s on the 16-chunk 4D
# all-reduces of bench/exact_scale.py, where optimising with the program's counts took 7-17 s to prove
# 0.211% above the bound on 4x4x4x16: those counts admit nothing better, 11 of its 16 optimal
# vectors do; cd bench && python tight_counts.py). With 0.6 the stage proved that one in 2 of 3 runs
# (cd bench && python exact_seeds.py --stage at-bound), with 0.75 in 3 of 3 (3.8-6.7 s).
AT_BOUND_SHARE = 0.75
AT_BOUND_SECONDS = 5.0
# and only up to this many phases: at 32 chunks (256 phases) no question on those all-reduces was
# answered in 15 s, and the stage's 5 s kept the counts-fixed stage from its proof of 4x4x4x16 in 60 s
AT_BOUND_PHASES = 128
# The bounds get a quarter of a searching method's time, and at most this many seconds: on 8 all-reduces
# of 16 chunks (bench/exact_scale.py) SCIP's integer program used all 15 s of a 60 s call without
# raising the LP bound, time the assignment search lacked. Fill-and-drain gets 60% of them and needs up
# to 3.6 s to reach its work limit on those instances (5 s cut it at 3 s on some runs of the 32-chunk
# all-reduces: its counts, and the search that starts from them, then depended on timing). SCIP needs
# about 7 s after it to reach its node limit on the 8 all-reduces: at 8 s it was cut at about 5.5 s, and
# from its counts then the 60 s calls ended 2.45% and 2.24% above the bound (seeds 0 and 1); at 11 s it
# ends at the node limit, and from those counts 1.12%, 1.33% and 1.52% (seeds 0-2; issue 11's tenth pass).
BOUNDS_SECONDS = 11.0
# The sequence search (after the assignment search) gets this share of the time left: on the 16-chunk 4D
# all-reduces of bench/exact_scale.py it meets the bound within 3 s where the fill-and-drain counts are an
# optimum's (4x8x8x4 and 8x4x4x8); it takes time from the counts-fixed stage, which then proved 4x16x4x4 in
# 0 to 2 runs of 3 (1 of 3 without the sequence search; cd bench && python exact_seeds.py --stage sequence)
SEQUENCE_SHARE = 0.4


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


def balanced_schedule(
    instance: Instance, intra: str | None = None, deadline: Deadline | None = None, memo: Memo | None = None
) -> tuple[Schedule, Intra, str]:
    """The balanced policy's schedule, the intra-dimension policy that timed it, and a note.

    Order counts come from the integer fill-and-drain bound and, as a second
    candidate, from the plain integer load bound (its assignment often
    interleaves better); each is spread evenly over every class's chunks and
    timed with ``intra``, or with both policies. The shortest schedule wins
    (ties: fill-and-drain counts first, then fifo). When neither program
    yields counts (too large, or out of time) Themis's orders stand in, and
    the note says so.

    Raises
    ------
    OutOfTime
        If not even one candidate could be timed before ``deadline``.
    """
    deadline = deadline or Deadline()
    policies = [Intra(intra)] if intra is not None else [Intra.FIFO, Intra.SCF]
    candidates: list[Orders | Planner] = []
    for fill_drain in (True, False):
        solution = integer_load_bound(instance, fill_drain=fill_drain, deadline=deadline.share(0.3), memo=memo)
        if solution is not None:
            candidates.append(spread_orders(instance, solution.counts))
    note = ""
    if not candidates:
        note = "balanced: the load programs gave no order counts (too large or out of time); Themis's orders used"
        candidates.append(ThemisTracker(instance).plan)
    timed: list[tuple[Schedule, Intra]] = []
    try:
        for orders in candidates:
            for policy in policies:
                timed.append((simulate(instance, orders, policy, deadline), policy))
    except OutOfTime:
        if not timed:
            raise
        note = "balanced: out of time before every candidate was timed"
    schedule, policy = min(timed, key=lambda entry: entry[0].makespan)
    return schedule, policy, note


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
) -> Result:
    """Schedule ``instance`` with one method.

    Parameters
    ----------
    instance
        The instance.
    method
        A name from :data:`METHODS`: ``baseline`` (one fixed order),
        ``themis`` (greedy orders), ``balanced`` (order counts of the load
        bounds, spread evenly) or ``cpsat`` (exact, from the best of the others
        as warm start).
    intra
        ``fifo`` or ``scf``: how a free dimension picks the next waiting
        phase. Defaults: fifo for baseline, scf for themis (as published),
        the better of both for balanced; ignored by cpsat.
    time_limit
        Seconds the whole call may take, every stage included (bounds,
        policies, warm starts, model building, search).
    workers
        CP-SAT's worker threads, and the assignment searches run at once
        before it, one per seed from ``seed`` on (cpsat only); default: the
        cores available.
    seed
        CP-SAT's random seed and the assignment search's first (cpsat only).
    quantum_ns
        Time quantum CP-SAT's times are rounded down to (cpsat only);
        default: the exact quantum of the instance's times where there is
        one, else the warm start's makespan / 100000.
    log
        Stream CP-SAT's log to this package's logger at INFO level.
    bounds
        Bounds already computed for ``instance``. Without them, baseline and
        themis compute only the ideal bound (no solver); balanced and cpsat
        compute every bound that fits in their share of the time limit.
    warm
        A valid schedule of ``instance`` for cpsat to start from besides the
        heuristics' (e.g. another method's result): cpsat returns nothing worse.

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
    deadline = Deadline(t0 + time_limit)
    spec = METHODS[method]
    memo: Memo = {}  # the load programs' answers, shared by this call's stages
    if bounds is None:
        share = deadline.share(0.25).cap(BOUNDS_SECONDS) if spec.searches else deadline.share(0.5)
        bounds = compute_bounds(instance, share, full=spec.load_bounds, memo=memo)
    if spec.name == "cpsat":
        return _solve_cpsat(instance, bounds, deadline, workers, seed, quantum_ns, log, t0, warm, memo)
    schedule: Schedule | None = None
    note = ""
    policy = Intra(intra) if intra is not None else spec.default_intra
    try:
        match spec.name:
            case "baseline":
                schedule = simulate(instance, baseline_orders(instance), policy or Intra.FIFO, deadline, baseline=True)
            case "themis":
                schedule = simulate(instance, ThemisTracker(instance).plan, policy or Intra.SCF, deadline)
            case "balanced":
                schedule, policy, note = balanced_schedule(instance, intra, deadline, memo)
            case "cpsat":  # pragma: no cover - handled above
                raise AssertionError("cpsat is not a simulated method")
            case _ as unreachable:
                assert_never(unreachable)
    except OutOfTime:
        note = f"{method}: out of time ({time_limit:.3g} s) before the schedule was complete"
    return _result(instance, method, policy, schedule, bounds, t0, note=note)


def _result(
    instance: Instance,
    method: str,
    policy: Intra | None,
    schedule: Schedule | None,
    bounds: Bounds,
    t0: float,
    **extra: object,
) -> Result:
    """The result of a method, its status decided by the bounds and the tolerance alone."""
    if schedule is None:
        status, makespan, tolerance = Status.NO_SOLUTION, None, None
    else:
        makespan = schedule.makespan
        origin = instance.origin_ns
        tolerance = optimality_tolerance(makespan, origin)
        status = Status.OPTIMAL if is_proven(makespan, bounds.best, origin) else Status.FEASIBLE
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
    workers: int | None,
    seed: int,
    quantum_ns: float | None,
    log: bool,
    t0: float,
    given: Schedule | None,
    memo: Memo,
) -> Result:
    """cpsat: the searches and CP-SAT over schedules that split every all-reduce chunk; where the
    baseline's merged all-reduce phase is shorter (:func:`~themis_opt.cost.merging_shortens`), the
    baseline's schedule when it is better, and CP-SAT's own bound dropped (it holds for split ones).
    """
    if not merging_shortens(instance):
        return _solve_cpsat_split(instance, bounds, deadline, workers, seed, quantum_ns, log, t0, given, memo)
    try:
        merged: Schedule | None = simulate(
            instance, baseline_orders(instance), Intra.FIFO, deadline.share(0.25), baseline=True
        )
    except OutOfTime:
        merged = None
    result = _solve_cpsat_split(instance, bounds, deadline, workers, seed, quantum_ns, log, t0, given, memo)
    result = dataclasses.replace(result, bounds=dataclasses.replace(result.bounds, cpsat=None))
    best = result.schedule
    if merged is not None and (best is None or merged.makespan < best.makespan):
        best = merged
    return _result(
        instance,
        "cpsat",
        None,
        best,
        result.bounds,
        t0,
        stats=result.stats,
        trajectory=result.trajectory,
        note=result.note,
    )


def _solve_cpsat_split(
    instance: Instance,
    bounds: Bounds,
    deadline: Deadline,
    workers: int | None,
    seed: int,
    quantum_ns: float | None,
    log: bool,
    t0: float,
    given: Schedule | None,
    memo: Memo,
) -> Result:
    began = time.perf_counter()
    warm, note = _warm_start(instance, deadline, memo)
    # the warm start timed and built at least three schedules: a search with less time than that
    # could not time and build one (4,096 chunks at 2 s: 1.2 s of warm start, and the search overran)
    warm_cost = time.perf_counter() - began
    if given is not None and (warm is None or given.makespan < warm.makespan):
        warm = given
    if warm is None:
        return _result(instance, "cpsat", None, None, bounds, t0, note=note)
    trajectory: tuple[tuple[float, float], ...] = ((time.perf_counter() - t0, warm.makespan),)
    workers = workers if workers is not None else available_workers()

    def may_search(best: Schedule) -> bool:
        return not is_proven(best.makespan, bounds.best, instance.origin_ns) and deadline.remaining() > warm_cost

    def run(start: Schedule, **options: Any) -> CpsatOutcome:
        """CP-SAT from ``start`` with this call's options."""
        from themis_opt.cpsat import solve_cpsat  # CP-SAT is imported only when it runs

        return solve_cpsat(
            instance,
            start,
            workers=workers,
            seed=seed,
            quantum_ns=quantum_ns,
            log=log,
            t0=t0,
            lower_bound=bounds.best,
            **options,
        )

    spread = None  # the sequence search's best from the fill-and-drain counts: the counts-fixed stage's hint
    size = sum(coll.chunks * instance.order_count(c) for c, coll in enumerate(instance.collectives))
    exact_fits = size <= MAX_CPSAT_ORDER_LITERALS and instance.num_phases <= MAX_CPSAT_PHASES
    restrictions = exact_fits and instance.num_phases <= SEARCH_FIRST_PHASES and size <= COUNTS_FIXED_LITERALS
    if may_search(warm):
        warm = _arranged(instance, warm, seed, workers, deadline, memo, bounds.best)
        trajectory += ((time.perf_counter() - t0, warm.makespan),)
    if restrictions and instance.num_phases <= AT_BOUND_PHASES and may_search(warm):
        warm = _at_bound(instance, warm, bounds.best, deadline, memo, run)
        trajectory += ((time.perf_counter() - t0, warm.makespan),)
    if may_search(warm):
        warm, spread = _sequenced(instance, warm, seed, workers, deadline, memo, bounds.best)
        trajectory += ((time.perf_counter() - t0, warm.makespan),)
    if is_proven(warm.makespan, bounds.best, instance.origin_ns):
        logger.info("warm start meets the lower bound: CP-SAT not needed")
        return _result(instance, "cpsat", None, warm, bounds, t0, trajectory=trajectory, note=note)
    if not exact_fits:
        from themis_opt.cpsat import improve_by_windows

        note = (
            f"cpsat: the exact model would have {size} order literals and {instance.num_phases} phases "
            f"(limits {MAX_CPSAT_ORDER_LITERALS} and {MAX_CPSAT_PHASES}): large-neighbourhood search from the best "
            "heuristic schedule instead (windows of collectives re-solved by CP-SAT)"
        )
        try:
            best, trajectory = improve_by_windows(
                instance,
                warm,
                deadline=deadline,
                workers=workers,
                seed=seed,
                t0=t0,
            )
        except OutOfTime:
            best = warm
        return _result(instance, "cpsat", None, best, bounds, t0, trajectory=trajectory, note=note)
    fixed = None
    if restrictions:
        fixed = _counts_fixed(instance, [warm, *([spread] if spread else [])], deadline, memo, run)
    if fixed is not None and fixed.schedule.makespan < warm.makespan:
        warm = fixed.schedule
        trajectory += fixed.trajectory[1:]
        if is_proven(warm.makespan, bounds.best, instance.origin_ns):
            logger.info("the counts-fixed search meets the lower bound: the full model is not needed")
            return _result(instance, "cpsat", None, warm, bounds, t0, stats=fixed.stats, trajectory=trajectory)
    try:
        outcome = run(warm, deadline=deadline)
    except OutOfTime:
        note = "cpsat: out of time while building the model: the best heuristic schedule is returned"
        return _result(instance, "cpsat", None, warm, bounds, t0, trajectory=trajectory, note=note)
    bounds = dataclasses.replace(bounds, cpsat=outcome.bound)
    schedule: Schedule | None = outcome.schedule
    if outcome.status in (Status.INFEASIBLE, Status.MODEL_INVALID):
        logger.error("CP-SAT says %s for a model with a valid warm start", outcome.status.value)
        return Result(
            instance.name, "cpsat", None, outcome.status, None, bounds, time.perf_counter() - t0, None, outcome.stats
        )
    return _result(
        instance, "cpsat", None, schedule, bounds, t0, stats=outcome.stats, trajectory=outcome.trajectory, note=note
    )


def _at_bound(
    instance: Instance,
    warm: Schedule,
    bound: float,
    deadline: Deadline,
    memo: Memo,
    run: Callable[..., CpsatOutcome],
) -> Schedule:
    """``warm``, or a schedule that meets the lower ``bound``: for the
    fill-and-drain program's counts, then for every other assignment of
    counts that meets its bound (:func:`~themis_opt.bounds.counts_within`),
    CP-SAT with those counts fixed looks for a schedule no longer than the
    bound plus the optimality tolerance, in ``AT_BOUND_SHARE`` of the time
    left and at most ``AT_BOUND_SECONDS``.

    A tight bound is met by some assignment of counts that meets it, but not
    by every one: on the 16-chunk 4x4x4x16 all-reduce of
    ``bench/exact_scale.py`` the program's own counts admit nothing below
    0.211% above it (CP-SAT proves that in 7-17 s, and says in 0.4 s that
    they admit nothing at the bound), while 11 of its 16 optimal assignments
    admit a schedule at it, each found in 1-2.5 s.
    """
    from themis_opt.bounds import counts_within

    if AT_BOUND_SHARE <= 0:  # switched off (bench/exact_seeds.py compares)
        return warm
    share = deadline.share(AT_BOUND_SHARE).cap(AT_BOUND_SECONDS)
    cap = bound + optimality_tolerance(bound, instance.origin_ns)
    first = integer_load_bound(instance, fill_drain=True, deadline=share.share(0.1), memo=memo)
    if first is None:
        return warm
    asked = 0
    try:
        for counts in itertools.chain([first.counts], counts_within(instance, cap, share)):
            if asked and counts == first.counts:
                continue
            asked += 1
            outcome = run(warm, deadline=share, counts=counts, cap=cap)
            if is_proven(outcome.schedule.makespan, bound, instance.origin_ns):
                logger.info("at the bound: counts %d meet it", asked)
                return outcome.schedule
    except OutOfTime:
        pass
    logger.info("at the bound: %d assignments of counts asked, none met it", asked)
    return warm


def _counts_fixed(
    instance: Instance, hints: list[Schedule], deadline: Deadline, memo: Memo, run: Callable[..., CpsatOutcome]
) -> CpsatOutcome | None:
    """CP-SAT (``run``: :func:`~themis_opt.cpsat.solve_cpsat` with the call's
    options) on the restriction to the fill-and-drain program's order counts,
    in ``COUNTS_FIXED_SHARE`` of the time left and at most
    ``COUNTS_FIXED_SECONDS``; ``None`` when there are no counts or no time.

    When that program's bound is tight, some optimal schedule has counts
    optimal in it (any schedule's counts cost at most its makespan in the
    program), often its own (:func:`_at_bound` asks the others), and
    with the orders' numbers fixed CP-SAT only sequences (the symmetry
    breaking then fixes every chunk's order): on the 4D instances of
    ``bench/exact_scale.py`` it often meets the bound in seconds where the
    full model, hinted with the best heuristic, did not. It starts from the
    first of ``hints`` with those counts (the best schedule so far, then the
    sequence search's from the spread counts), else from the spread counts.
    """
    if COUNTS_FIXED_SHARE <= 0:  # switched off (bench/exact_seeds.py compares)
        return None
    share = deadline.share(COUNTS_FIXED_SHARE).cap(COUNTS_FIXED_SECONDS)
    counts = integer_load_bound(instance, fill_drain=True, deadline=share.share(0.1), memo=memo)
    if counts is None:
        return None
    try:
        # a hint with these counts: from nothing, CP-SAT found no first solution in 3 s on 4x8x8x4
        hint = next((h for h in hints if counts_match(instance, h.orders, counts.counts)), None)
        return run(hint or _spread(instance, counts.counts, share), deadline=share, counts=counts.counts)
    except OutOfTime:
        return None


def _spread(
    instance: Instance, counts: Mapping[ChunkClass, Mapping[tuple[int, ...], int]], deadline: Deadline
) -> Schedule:
    """The load program's ``counts`` spread evenly over the chunks, timed with fifo and scf: the shorter."""
    spread = spread_orders(instance, counts)
    return min((simulate(instance, spread, p, deadline) for p in Intra), key=lambda s: s.makespan)


def _arranged(
    instance: Instance, warm: Schedule, seed: int, workers: int, deadline: Deadline, memo: Memo, target: float
) -> Schedule:
    """``warm`` or better: the assignment search from its orders, from the
    fill-and-drain counts spread evenly and, with several collectives, from
    the counts that level each collective's load over the dimensions
    (:func:`~themis_opt.bounds.level_counts`), in a quarter of the time left
    (``SEARCH_FIRST_SHARE`` above ``SEARCH_FIRST_PHASES`` phases), one seed
    per worker; it stops once it meets the lower bound ``target``.
    """
    from themis_opt.localsearch import improve_assignment

    share = deadline.share(0.25 if instance.num_phases <= SEARCH_FIRST_PHASES else SEARCH_FIRST_SHARE)
    starts: list[Orders] = [warm.orders]
    counts = integer_load_bound(instance, fill_drain=True, deadline=share.share(0.1), memo=memo)
    if counts is not None:
        starts.append(spread_orders(instance, counts.counts))
        # with one collective, leveling its load is the program's own objective: nothing to add
        level = level_counts(instance, counts, share.share(0.1)) if len(instance.collectives) > 1 else None
        if level is not None:
            starts.append(spread_orders(instance, level))
    found = improve_assignment(instance, starts, seed=seed, deadline=share, target=target, workers=workers)
    return found if found is not None and found.makespan < warm.makespan else warm


def _sequenced(
    instance: Instance, warm: Schedule, seed: int, workers: int, deadline: Deadline, memo: Memo, target: float
) -> tuple[Schedule, Schedule | None]:
    """``warm`` or better, and the best schedule found from the fill-and-drain
    counts (``None`` if none): the sequence search from those counts spread
    evenly (:func:`_spread`) and from ``warm``, in ``SEQUENCE_SHARE`` of the
    time left, one search per worker; it stops once it meets the lower bound
    ``target``. Skipped above ``SEARCH_FIRST_PHASES`` phases.
    """
    from themis_opt.localsearch import improve_sequences_per_start, sequences_searchable

    if instance.num_phases > SEARCH_FIRST_PHASES:  # it found nothing there: the assignment search has the time
        return warm, None
    if SEQUENCE_SHARE <= 0 or not sequences_searchable(instance):  # switched off (bench/exact_seeds.py compares)
        return warm, None
    share = deadline.share(SEQUENCE_SHARE)
    starts = [warm]
    counts = integer_load_bound(instance, fill_drain=True, deadline=share.share(0.1), memo=memo)
    try:
        if counts is not None:
            starts.insert(0, _spread(instance, counts.counts, share))
    except OutOfTime:
        pass
    found = improve_sequences_per_start(instance, starts, seed=seed, deadline=share, target=target, workers=workers)
    best = min((s for s in found if s is not None), key=lambda s: s.makespan, default=warm)
    from_spread = found[0] if len(starts) == 2 else None  # the spread start went first
    return (best if best.makespan < warm.makespan else warm), from_spread


def _warm_start(instance: Instance, deadline: Deadline, memo: Memo | None = None) -> tuple[Schedule | None, str]:
    """The best of the heuristics that finish in time, and a note if any did not.

    The baseline may take all the time left (without it there is nothing to
    search from); each further candidate gets a share of what is left then.
    """
    makers: tuple[Callable[[Deadline], Schedule], ...] = (
        lambda d: simulate(instance, baseline_orders(instance), Intra.FIFO, d),
        lambda d: simulate(instance, ThemisTracker(instance).plan, Intra.FIFO, d),
        lambda d: simulate(instance, ThemisTracker(instance).plan, Intra.SCF, d),
        lambda d: balanced_schedule(instance, deadline=d, memo=memo)[0],
    )
    candidates: list[Schedule] = []
    for n, make in enumerate(makers):
        try:
            candidates.append(make(deadline if n == 0 else deadline.share(0.25)))
        except OutOfTime:
            note = "cpsat: out of time before every warm start was timed"
            return (min(candidates, key=lambda s: s.makespan) if candidates else None), note
    return min(candidates, key=lambda s: s.makespan), ""
