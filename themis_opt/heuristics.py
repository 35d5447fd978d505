"""The methods that time one choice of orders: baseline, Themis and balanced.

Each returns a schedule from the simulator; :mod:`themis_opt.pipeline`
starts its searches from the best of them.
"""

from __future__ import annotations

from collections.abc import Callable

from themis_opt.bounds import Memo, integer_load_bound, reported, stage_parts
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.instance import ChunkClass, Instance
from themis_opt.methods import METHODS, MethodCall
from themis_opt.orders import Counts, Orders, Planner
from themis_opt.params import DEFAULT, SolveParams
from themis_opt.policies import ThemisTracker, baseline_orders, spread_orders
from themis_opt.result import Interrupted, Result, result_of
from themis_opt.schedule import Schedule
from themis_opt.sim import simulate
from themis_opt.sim.queues import Intra


def baseline_schedule(instance: Instance, intra: str, deadline: Deadline, *, merged: bool = True) -> Schedule:
    """Every chunk on the baseline order; ``merged``: all-reduces cut as the baseline cuts them
    (under ``local_bw_aware``, its last dimension one all-reduce phase).
    """
    return simulate(instance, baseline_orders(instance), intra, deadline, baseline=merged)


def themis_schedule(instance: Instance, intra: str, deadline: Deadline) -> Schedule:
    """Themis's orders, planned as each collective is released."""
    return simulate(instance, ThemisTracker(instance).plan, intra, deadline)


def balanced_schedule(
    instance: Instance,
    intra: str | None = None,
    deadline: Deadline | None = None,
    memo: Memo | None = None,
    params: SolveParams | None = None,
    target: float | None = None,
) -> tuple[Schedule, Intra, str]:
    """The balanced policy's schedule, the intra-dimension policy that timed it, and a note.

    Order counts come from the integer fill-and-drain bound and, as a second
    candidate, from the plain integer load bound (its assignment often
    interleaves better); each is spread evenly over every class's chunks and
    timed with ``intra``, or with fifo and scf. The shortest schedule wins
    (ties: fill-and-drain counts first, then fifo). When neither program
    yields counts (too large, or out of time) Themis's orders and the
    baseline's (every chunk on the baseline order, its phases not merged)
    stand in, the shorter wins (ties: Themis's), and the note says so.
    Last, a short assignment search keeps what it finds if that is shorter
    under ``intra``: a walk from the winner's orders
    (``pipeline.balanced_evaluations`` simulations, fewer on a small or a
    large instance, seed 0: restarts, then annealing), then
    ``pipeline.balanced_walks - 1`` more from the best orders so far and
    every other candidate's (see :func:`_short_search`); it stops at
    ``target``, a proven lower bound.

    Raises
    ------
    OutOfTime
        If not even one candidate could be timed before ``deadline``.
    """
    deadline = deadline or Deadline()
    params = params or DEFAULT
    share = params.pipeline.balanced_share
    policies = [Intra(intra)] if intra is not None else [Intra.FIFO, Intra.SCF]
    candidates: list[Orders | Planner] = []
    for fill_drain in (True, False):
        counts = load_counts(instance, fill_drain, deadline.share(share), memo, params)
        if counts is not None:
            candidates.append(spread_orders(instance, counts))
    note = ""
    if not candidates:  # both stand in: Themis's orders can be twice the baseline's (4D tori on the clusters suite)
        note = (
            "balanced: the load programs gave no order counts (too large or out of time); "
            "the better of Themis's and the baseline's orders used"
        )
        candidates += [ThemisTracker(instance).plan, baseline_orders(instance)]
    timed: list[tuple[Schedule, Intra]] = []
    try:
        for orders in candidates:
            for policy in policies:
                timed.append((simulate(instance, orders, policy, deadline), policy))
    except OutOfTime:
        if not timed:
            raise
        late = "out of time before every candidate was timed"
        note = f"{note}; {late}" if note else f"balanced: {late}"  # the stand-ins' note is kept
    schedule, policy = min(timed, key=lambda entry: entry[0].makespan)
    others = [entry[0] for entry in timed if entry[0] is not schedule]
    try:
        found = _short_search(instance, schedule, others, policies, deadline, params, target)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the best candidate is the answer
        late = "interrupted: the best candidate before the assignment search"
        raise _Stopped((schedule, policy, f"{note}; {late}" if note else f"balanced: {late}")) from stop
    if found is not None and found[0].makespan < schedule.makespan:
        schedule, policy = found
    return schedule, policy, note


def load_counts(
    instance: Instance, fill_drain: bool, deadline: Deadline, memo: Memo | None, params: SolveParams
) -> Counts | None:
    """The order counts of the integer load program (``fill_drain``: strengthened), ``None`` where it
    gives none; with pipeline stages, each stage's program on its tasks alone (an equal share of the
    time each), its counts put together.
    """
    if instance.num_stages == 1:
        solution = integer_load_bound(
            instance, fill_drain=fill_drain, deadline=deadline, memo=memo, params=params.bounds
        )
        return solution.counts if solution is not None else None
    index = {coll.id: c for c, coll in enumerate(instance.collectives)}
    counts: Counts = {}
    try:
        parts = stage_parts(instance, deadline)
    except OutOfTime:
        return None
    for n, part in enumerate(parts):
        share = deadline.share(1 / (len(parts) - n))
        solution = integer_load_bound(part, fill_drain=fill_drain, deadline=share, memo=memo, params=params.bounds)
        if solution is None:
            return None
        for cls, per in solution.counts.items():
            whole = index[part.collectives[cls.collective].id]
            counts[ChunkClass(whole, cls.chunk_bytes, cls.chunks)] = dict(per)
    return counts


def _short_search(
    instance: Instance,
    start: Schedule,
    others: list[Schedule],
    policies: list[Intra],
    deadline: Deadline,
    params: SolveParams,
    target: float | None,
) -> tuple[Schedule, Intra] | None:
    """Balanced's short assignment search from ``start``: the best orders it finds timed under
    ``policies``, and the policy; ``None`` if it timed nothing shorter than ``start``.

    The first walk starts from ``start``'s orders alone, at ``pipeline.balanced_temperature``,
    seeded 0. Each later walk ``n`` of ``pipeline.balanced_walks`` (seeded ``n``, at
    ``pipeline.balanced_reheat_temperature``) starts from the best orders so far and from the
    orders of ``others``, the candidates that lost as they stood: a walk can end where no
    move of one chunk helps, and a losing candidate can hold orders the winner's walk never
    draws (on small-exact-s1-005 the winner puts every chunk on one order, so its swaps change
    nothing; the fill-and-drain counts' spread leads to the bound). A later walk only adds
    candidates, so the search never ends worse than its first walk.
    """
    from themis_opt.result import is_proven
    from themis_opt.search.assignment import Strategy, default_evaluations, improve_assignment

    settings = params.pipeline
    evaluations = min(
        settings.balanced_evaluations,
        settings.balanced_phases // max(1, instance.num_phases),
        default_evaluations(instance, params.search),
    )
    if not evaluations or deadline.expired():
        return None
    origin = instance.origin_ns
    if target is not None and is_proven(start.makespan, target, origin):
        return None
    lead = start  # the shortest schedule the walks timed, under either policy: the next walk's start
    kept: tuple[Schedule, Intra] | None = None  # the shortest under ``policies``
    for walk in range(settings.balanced_walks):
        if deadline.expired() or (target is not None and is_proven(lead.makespan, target, origin)):
            break
        starts: list[Orders]
        if walk == 0:
            starts, temperature = [start.orders], settings.balanced_temperature
        else:
            starts, temperature = _distinct([lead, *others]), settings.balanced_reheat_temperature
        try:
            found = improve_assignment(
                instance,
                starts,
                seed=walk,
                evaluations=evaluations,
                target=target,
                deadline=deadline.share(settings.balanced_search_share),
                workers=1,
                strategy=Strategy(settings.balanced_restart_share, temperature),
                policies=tuple(dict.fromkeys([Intra.FIFO, Intra.SCF, *policies])),  # ASTRA-sim's, and tail if asked
                params=params.search,
            )
            if found is None:
                break
            if found.makespan < lead.makespan:
                lead = found
            # the search times fifo and scf (tail too if asked): keep what ``policies`` give (balanced-fifo, ...)
            timed = min(
                ((simulate(instance, found.orders, p, deadline), p) for p in policies), key=lambda e: e[0].makespan
            )
        except OutOfTime:
            break
        if kept is None or timed[0].makespan < kept[0].makespan:
            kept = timed
    return kept


def _distinct(schedules: list[Schedule]) -> list[Orders]:
    """The orders of ``schedules``, each assignment once, in their order."""
    distinct: list[Orders] = []
    for schedule in schedules:
        orders = schedule.orders
        if orders not in distinct:
            distinct.append(orders)
    return distinct


class _Stopped(KeyboardInterrupt):
    """A search stopped by Ctrl-C or SIGTERM, with the schedule, policy and note it had found."""

    def __init__(self, found: tuple[Schedule, Intra, str]) -> None:
        super().__init__("interrupted")
        self.found = found


def _result(call: MethodCall, method: str, make: Callable[[], tuple[Schedule, str, str]]) -> Result:
    """``make``'s schedule as the result of ``method``, or none with a note if it ran out of time;
    stopped by Ctrl-C or SIGTERM with a schedule, that schedule, raised as :class:`Interrupted`.
    """
    schedule: Schedule | None
    policy: str | None
    stopped: _Stopped | None = None
    try:
        schedule, policy, note = make()
    except OutOfTime:
        limit = call.options.time_limit
        schedule, note = None, f"{method}: out of time ({limit:.3g} s) before the schedule was complete"
        policy = call.options.intra or METHODS[method].default_intra
    except _Stopped as stop:
        (schedule, policy, note), stopped = stop.found, stop
    result = result_of(
        call.instance,
        method,
        str(policy) if policy is not None else None,
        schedule,
        reported(call.bounds, call.report_programs),
        call.t0,
        note=note,
        variant=call.options.variant,
    )
    if stopped is not None:
        raise Interrupted(result) from stopped
    return result


def run_baseline(call: MethodCall) -> Result:
    """The baseline method: every chunk on one fixed order (fifo unless asked otherwise)."""
    policy = call.options.intra or Intra.FIFO
    return _result(call, "baseline", lambda: (baseline_schedule(call.instance, policy, call.deadline), policy, ""))


def run_themis(call: MethodCall) -> Result:
    """Themis: its greedy orders, planned as each collective is released (scf unless asked otherwise)."""
    policy = call.options.intra or Intra.SCF
    return _result(call, "themis", lambda: (themis_schedule(call.instance, policy, call.deadline), policy, ""))


def run_balanced(call: MethodCall) -> Result:
    """balanced: order counts of the load bounds spread evenly (:func:`balanced_schedule`)."""

    def make() -> tuple[Schedule, str, str]:
        intra = call.options.intra
        return balanced_schedule(call.instance, intra, call.deadline, call.memo, call.params, call.bounds.best)

    return _result(call, "balanced", make)
