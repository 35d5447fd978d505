"""Order counts for the searches to start from, found by the load programs' models: every assignment
whose fill-and-drain value meets a bound, every assignment in increasing value, and counts that
level each collective's load.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator

from themis_opt.bounds.formulas import BOUNDS, SAFETY, load_programs_fit, load_value, order_profiles
from themis_opt.bounds.params import BoundsParams
from themis_opt.bounds.programs import FillDrainModel, LoadSolution, fill_drain_model, fill_drain_settings
from themis_opt.budget import Deadline
from themis_opt.instance import Instance
from themis_opt.orders import Counts

logger = logging.getLogger(__name__)


def counts_within(
    instance: Instance, value: float, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> Iterator[Counts]:
    """Order counts whose fill-and-drain value is at most ``value`` ns, one after another, each new.

    Every assignment that meets ``value`` exactly satisfies the program with
    its times rounded down, so, where the program is not stopped by its work
    limit or ``deadline``, every such assignment comes out (with, rarely,
    some whose exact value exceeds ``value`` by the rounding). Each is found
    by CP-SAT under the fill-and-drain program's limits, the ones before it
    excluded; the sequence ends when none is left or one is not found in
    time. A tight program may have several optimal assignments of which
    only some admit a schedule at its bound (16 and 11 on a 16-chunk
    4x4x4x16 all-reduce: see the docs' benchmark page).
    """
    from themis_opt.cpsat import solver as sat

    deadline = deadline or Deadline()
    program = _program(instance, deadline, params)
    if program is None:
        return
    m = program.model
    m.add(program.makespan <= program.q(value - program.origin))
    while not deadline.expired():
        solver = sat.Solver(fill_drain_settings(params))
        if not sat.solved(solver.run(m, deadline)):
            return
        found = program.read(solver.value)
        yield found
        _exclude(program, found)


def counts_by_value(
    instance: Instance, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> Generator[tuple[float, Counts], None, bool]:
    """Order counts in increasing fill-and-drain value, each with a lower bound, ns, on the value of
    every assignment not given before it (itself included): the program minimised again and again,
    each answer excluded from the next solve, under the program's limits (an answer the work limit
    stopped may come early; its bound still holds). Returns ``True`` once the program proves no
    assignment is left, ``False`` when it stops without one (its limits, ``deadline``).
    """
    from themis_opt.cpsat import solver as sat

    deadline = deadline or Deadline()
    program = _program(instance, deadline, params)
    if program is None:
        return False
    m = program.model
    m.minimize(program.makespan)
    while not deadline.expired():
        solver = sat.Solver(fill_drain_settings(params))
        code = solver.run(m, deadline)
        if code == sat.INFEASIBLE:
            return True
        if not sat.solved(code):
            return False
        found = program.read(solver.value)
        yield program.origin + solver.best_objective_bound * program.unit * (1 - SAFETY), found
        _exclude(program, found)
    return False


def _program(instance: Instance, deadline: Deadline, params: BoundsParams) -> FillDrainModel | None:
    """The fill-and-drain program with its hints cleared, for an enumeration, or ``None`` where it
    does not fit or is not built by ``deadline``.
    """
    if not load_programs_fit(instance, params):
        return None
    program = fill_drain_model(instance, None, deadline, params=params)
    if program is not None:
        program.model.clear_hints()
    return program


def _exclude(program: FillDrainModel, counts: Counts) -> None:
    """Add to ``program`` that its next answer differs from ``counts`` in some count."""
    m = program.model
    differs = []
    for (cls, order), var in program.counts.items():
        flag = m.new_bool_var("differs")
        m.add(var != counts[cls][order]).only_enforce_if(flag)
        differs.append(flag)
    m.add_bool_or(differs)


def level_counts(
    instance: Instance, start: LoadSolution, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> Counts | None:
    """Order counts about as good as ``start``'s in the load program, with each collective's
    work spread evenly over the dimensions, for the searches to start from.

    Among the assignments whose integer load program value
    (:func:`load_value`) is at most ``start``'s times ``1 + params.level_slack``,
    CP-SAT (under the fill-and-drain program's limits, with no hint: hinted
    with ``start`` it stayed there) minimises the sum over collectives of the
    collective's largest load on one dimension, less ``params.level_credit`` times
    that value per order in use. The programs balance the loads from each
    issue time to the end; these counts also balance what each collective
    brings at its issue time, over many orders, which leaves the dimensions
    fewer idle stretches (the docs' benchmark page has the measurements).
    ``None`` if no assignment is found within the limits or before ``deadline``.
    """
    from themis_opt.cpsat import solver as sat

    deadline = deadline or Deadline()
    if not load_programs_fit(instance, params):
        return None
    # the cuts alone: with the heads' and tails' Booleans CP-SAT found no assignment within the work limit
    program = fill_drain_model(instance, start, deadline, heads_tails=False, params=params)
    if program is None:
        return None
    m = program.model
    m.clear_hints()
    cap = load_value(instance, start.counts) * (1 + params.level_slack)
    m.add(program.makespan <= program.q(cap - program.origin))
    profiles = order_profiles(instance)
    peaks = []
    for c in range(len(instance.collectives)):
        if deadline.expired():
            return None
        keys = [(cls, o) for cls, o in program.counts if cls.collective == c]
        peak = m.new_int_var(0, program.q(cap - program.origin) * len(keys), "peak")
        for d in range(instance.network.num_dims):
            m.add(peak >= sum(program.counts[cls, o] * program.q(profiles[cls][o].busy[d]) for cls, o in keys))
        peaks.append(peak)
    credit = program.q(params.level_credit * (cap - program.origin))
    m.minimize(sum(peaks) - credit * sum(program.used.values()))
    solver = sat.Solver(fill_drain_settings(params))
    if not sat.solved(solver.run(m, deadline)):
        return None
    return program.read(solver.value)
