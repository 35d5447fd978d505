"""The methods that time one choice of orders: baseline, Themis and balanced.

Each returns a schedule from the simulator; :mod:`themis_opt.pipeline`
starts its searches from the best of them.
"""

from __future__ import annotations

from themis_opt.bounds import Memo, integer_load_bound
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.instance import Instance
from themis_opt.methods import Intra
from themis_opt.orders import Orders, Planner
from themis_opt.params import DEFAULT, SolveParams
from themis_opt.policies import ThemisTracker, baseline_orders, spread_orders
from themis_opt.schedule import Schedule
from themis_opt.simulator import simulate


def baseline_schedule(instance: Instance, intra: Intra, deadline: Deadline, *, merged: bool = True) -> Schedule:
    """Every chunk on the baseline order; ``merged``: all-reduces cut as the baseline cuts them
    (under ``local_bw_aware``, its last dimension one all-reduce phase).
    """
    return simulate(instance, baseline_orders(instance), intra, deadline, baseline=merged)


def themis_schedule(instance: Instance, intra: Intra, deadline: Deadline) -> Schedule:
    """Themis's orders, planned as each collective is released."""
    return simulate(instance, ThemisTracker(instance).plan, intra, deadline)


def balanced_schedule(
    instance: Instance,
    intra: str | None = None,
    deadline: Deadline | None = None,
    memo: Memo | None = None,
    params: SolveParams | None = None,
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
    params = params or DEFAULT
    share = params.pipeline.balanced_share
    policies = [Intra(intra)] if intra is not None else [Intra.FIFO, Intra.SCF]
    candidates: list[Orders | Planner] = []
    for fill_drain in (True, False):
        solution = integer_load_bound(
            instance, fill_drain=fill_drain, deadline=deadline.share(share), memo=memo, params=params.bounds
        )
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
