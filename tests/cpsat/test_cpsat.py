"""The CP-SAT model: the warm-start hint is a complete feasible solution."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ortools.sat.python import cp_model

from themis_opt.cpsat import CpsatModel, default_quantum, relabel
from themis_opt.cpsat.params import CpsatParams
from themis_opt.instance import Instance
from themis_opt.policies import baseline_orders, counts_match, themis_orders
from themis_opt.schedule import Schedule
from themis_opt.sim import simulate
from themis_opt.validator import validate


def test_hint_is_feasible_and_extracts_back(instance: Instance) -> None:
    warm = simulate(instance, themis_orders(instance), "scf")
    quantum = default_quantum(warm.makespan)
    model = CpsatModel(instance, quantum, math.ceil(warm.makespan / quantum) + instance.num_phases + 2)
    model.hint(warm)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20
    status = solver.solve(model.model)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    schedule = model.extract(solver.value)
    assert validate(instance, schedule) == []
    # same orders and sequences as the warm start, re-timed exactly: no longer than it
    assert schedule.makespan <= warm.makespan * (1 + 1e-12)
    # durations rounded down: the quantised model is a relaxation, its makespan never above the exact one
    assert solver.objective_value * quantum <= schedule.makespan + 1e-6


def test_relabel_keeps_the_schedule(instance: Instance) -> None:
    warm = simulate(instance, themis_orders(instance), "fifo")
    renamed = relabel(instance, warm)
    assert validate(instance, renamed) == []
    assert renamed.makespan == warm.makespan
    assert sorted(c.order for c in renamed.chunks) == sorted(c.order for c in warm.chunks)


def _four_collectives() -> Instance:
    from themis_opt.instance import Collective, Dimension, Network

    network = Network(tuple(Dimension(n, "ring", b, 500.0) for n, b in zip([4, 8, 8], [400.0, 200.0, 100.0])))
    return Instance(network, tuple(Collective("all_reduce", 16 * 2**20, 8, issue_ns=50_000.0 * i) for i in range(4)))


def _windows(seconds: float, params: CpsatParams) -> tuple[Instance, Schedule, Schedule, list[float]]:
    """Themis's schedule of the four collectives, improved by windows for ``seconds``: the
    instance, the incumbent, the best and the trajectory's makespans.
    """
    import time

    from themis_opt.budget import Deadline
    from themis_opt.cpsat import improve_by_windows

    instance = _four_collectives()
    incumbent = simulate(instance, themis_orders(instance), "scf")
    best, trajectory = improve_by_windows(
        instance, incumbent, deadline=Deadline.after(seconds), workers=1, seed=0, t0=time.perf_counter(), params=params
    )
    return instance, incumbent, best, [m for _, m in trajectory]


def test_windows_improve_a_poor_incumbent_and_stay_valid() -> None:
    instance, incumbent, best, spans = _windows(2.0, CpsatParams(window_phases=100))
    assert validate(instance, best) == []
    assert spans[0] == incumbent.makespan and spans == sorted(spans, reverse=True)
    assert best.makespan == spans[-1] < incumbent.makespan  # Themis leaves room here (re-solved windows find it)


def test_windows_with_too_little_time_return_the_incumbent_unbuilt() -> None:
    _, incumbent, best, spans = _windows(1.0, CpsatParams(window_phases=100, window_min_seconds=5.0))
    assert best is incumbent and spans == [incumbent.makespan]
    assert "chunks" not in vars(incumbent)  # a lazy schedule of the core: its phases were never built


def test_cpsat_searches_windows_when_the_model_is_too_big() -> None:
    from themis_opt.cpsat.params import CpsatParams
    from themis_opt.params import SolveParams
    from themis_opt.solving import solve

    instance = _four_collectives()
    small = SolveParams(cpsat=CpsatParams(max_phases=10))
    result = solve(instance, "cpsat", time_limit=2.5, workers=1, params=small)
    assert "large-neighbourhood search" in result.note
    assert result.schedule is not None and validate(instance, result.schedule) == []
    heuristics = [solve(instance, m).makespan for m in ("baseline", "themis", "balanced")]
    assert result.makespan <= min(heuristics)  # type: ignore[operator, type-var]
    assert result.lower_bound <= result.makespan  # type: ignore[operator]


def test_exact_quantum_makes_every_time_whole() -> None:
    from fractions import Fraction

    from themis_opt.cost import chunk_phases
    from themis_opt.cpsat import exact_quantum, quanta

    from ..conftest import four_dims

    instance = four_dims(issue_ns=1000.0)
    quantum = exact_quantum(instance, 1e6)
    assert quantum is not None
    for order in instance.orders[0]:
        for phase in chunk_phases(instance, 0, instance.collectives[0].chunk_bytes, order):
            # a whole number of quanta, and quanta() returns exactly that number
            whole = Fraction(phase.duration) / Fraction(quantum)
            assert whole.denominator == 1
            assert quanta(phase.duration, quantum) == whole.numerator
    # the largest such quantum: twice it leaves some time fractional
    assert any(
        (Fraction(p.duration) / Fraction(2 * quantum)).denominator != 1
        for order in instance.orders[0]
        for p in chunk_phases(instance, 0, instance.collectives[0].chunk_bytes, order)
    )
    # too many quanta for the makespan: none
    assert exact_quantum(instance, 1e6 * 2**40) is None


def test_quanta_rounds_down_unless_whole() -> None:
    from themis_opt.cpsat import quanta

    assert quanta(10.0, 0.1) == 100  # 10 / 0.1 is 99.99999999999999 in floats: whole up to float error
    assert quanta(10.05, 0.1) == 100
    assert quanta(9.99, 0.1) == 99
    assert quanta(0.0, 0.1) == 0


@pytest.mark.parametrize("name", ["tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag"])
def test_exact_quantum_cpsat_proves_the_brute_force_optimum(name: str) -> None:
    # nothing rounded: the proven optimum is the brute-force one, and so is the bound
    from themis_opt.solving import solve

    from ..conftest import brute_force, load

    tiny = load(name)
    optimum = brute_force(tiny)
    result = solve(tiny, "cpsat", time_limit=30, workers=2, seed=0)
    assert result.status == "optimal"
    assert result.makespan == pytest.approx(optimum, rel=1e-9)
    assert result.lower_bound <= optimum * (1 + 1e-12)
    assert validate(tiny, result.schedule) == []


@pytest.mark.parametrize("symmetry", [True, False])
def test_fixed_counts_fix_each_chunks_order_under_the_symmetry_breaking(symmetry: bool) -> None:
    # with order indices non-decreasing in the chunk index the counts leave one choice: fixed outright
    from themis_opt.instance import Collective, Dimension, Network

    network = Network(
        (Dimension(4, "ring", 100.0, 500.0), Dimension(2, "switch", 50.0, 500.0), Dimension(2, "ring", 25.0, 500.0))
    )
    instance = Instance(network, (Collective("all_reduce", 2**22, 4),))
    (cls,) = instance.chunk_classes
    first, last = instance.orders[0][0], instance.orders[0][-1]
    counts = {cls: {last: 1, first: 3}}
    warm = simulate(instance, dict.fromkeys(instance.chunk_ids, last), "fifo")
    quantum = default_quantum(warm.makespan)
    model = CpsatModel(instance, quantum, 2 * math.ceil(warm.makespan / quantum) + 1, symmetry=symmetry)
    model.fix_counts(counts)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(model.model) == cp_model.OPTIMAL
    schedule = model.extract(solver.value)
    assert validate(instance, schedule) == [] and counts_match(instance, schedule.orders, counts)
    if symmetry:  # rank order: the first order on chunks 0 to 2, the last on chunk 3
        assert [schedule.orders[(0, k)] for k in range(4)] == [first, first, first, last]


def test_fixed_counts_restrict_the_orders_and_claim_nothing(tiny: Instance) -> None:
    # the restriction's solutions have exactly the counts asked for; its status and bound are not the problem's
    order = tiny.orders[0][-1]  # every chunk on the last order (not the baseline's where there are two)
    counts = {cls: {order: len(cls.chunks)} for cls in tiny.chunk_classes}
    one_order = simulate(tiny, dict.fromkeys(tiny.chunk_ids, order), "fifo")
    quantum = default_quantum(one_order.makespan)
    model = CpsatModel(tiny, quantum, math.ceil(one_order.makespan / quantum) + 1)
    model.fix_counts(counts)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20
    assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    schedule = model.extract(solver.value)
    assert validate(tiny, schedule) == []
    assert set(schedule.orders.values()) == {order}

    warm = simulate(tiny, themis_orders(tiny), "scf")
    outcome = _solve_cpsat(tiny, warm, 10, counts=counts)
    assert outcome.bound is None
    assert outcome.status in ("feasible", "no_solution")
    assert validate(tiny, outcome.schedule) == []
    assert outcome.schedule.makespan <= warm.makespan
    if outcome.schedule.makespan < warm.makespan:  # found by the restriction
        assert set(outcome.schedule.orders.values()) == {order}


@pytest.mark.parametrize("name", ["tiny_ar", "tiny_3d"])  # tiny_rs: every heuristic is optimal
def test_a_capped_model_answers_each_assignment_below_and_at_the_optimum(name: str) -> None:
    # one model cut at a cap, asked assignments as assumptions: the optimal schedule's counts admit
    # a valid schedule at the optimum, none below it, and every other assignment gets an answer
    import itertools

    from themis_opt.budget import Deadline
    from themis_opt.cpsat import CappedModel
    from themis_opt.result import Status

    from ..conftest import brute_force, load

    instance = load(name)
    optimum = brute_force(instance)
    warm = simulate(instance, baseline_orders(instance), "fifo")
    if warm.makespan <= optimum * (1 + 1e-6):
        warm = simulate(instance, themis_orders(instance), "fifo")
    options = dict(lower_bound=0.0, workers=1, seed=0, deadline=Deadline.after(20))
    at = CappedModel(instance, warm, optimum * (1 + 1e-9), **options)  # type: ignore[arg-type]
    below = CappedModel(instance, warm, optimum * (1 - 1e-6), **options)  # type: ignore[arg-type]
    cls = instance.chunk_classes[0]
    orders = instance.orders[0]
    answers = []
    for combo in itertools.combinations_with_replacement(orders, len(cls.chunks)):
        counts = {cls: {o: combo.count(o) for o in orders}}
        refuted = below.ask(counts, Deadline.after(20))
        assert refuted.status is Status.INFEASIBLE and refuted.schedule is warm and refuted.bound is None
        outcome = at.ask(counts, Deadline.after(20))
        if outcome.status is Status.FEASIBLE:
            assert validate(instance, outcome.schedule) == []
            assert outcome.schedule.makespan == pytest.approx(optimum, rel=1e-9)
        answers.append(outcome.status)
    assert Status.FEASIBLE in answers and set(answers) <= {Status.FEASIBLE, Status.INFEASIBLE}
    with pytest.raises(ValueError, match="not below"):
        CappedModel(instance, warm, warm.makespan, **options)  # type: ignore[arg-type]


def test_the_model_gives_each_stage_its_own_dimensions_and_compute_unit() -> None:
    from ..conftest import load, pipelined

    for instance in (load("two_stages"), pipelined()):
        warm = simulate(instance, themis_orders(instance), "scf")
        quantum = default_quantum(warm.makespan)
        model = CpsatModel(instance, quantum, math.ceil(warm.makespan / quantum) + instance.num_phases + 2)
        assert len(model.intervals) == instance.num_lanes
        model.hint(warm)
        solver = cp_model.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.num_workers = 1
        assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        schedule = model.extract(solver.value)
        assert validate(instance, schedule) == [] and schedule.makespan <= warm.makespan * (1 + 1e-12)
        assert solver.objective_value * quantum <= schedule.makespan + 1e-6


def test_a_large_model_searches_its_share_or_all_but_its_reserve() -> None:
    # over probing_phases phases the search gets 40% of the time left or all but the reserve, the more
    from ..conftest import four_dims

    instance = four_dims()  # 16 chunks on 4 dimensions: not proven within a second
    warm = simulate(instance, themis_orders(instance), "scf")
    walls = []
    for reserve in (10.0, 0.2):
        large = CpsatParams(probing_phases=10, search_reserve_large=reserve)
        outcome = _solve_cpsat(instance, warm, 1.2, params=large)
        assert outcome.status != "optimal" and validate(instance, outcome.schedule) == []
        walls.append(outcome.stats.wall_time_s)
    assert walls[0] < 0.6 < walls[1]  # 0.38 s (the share), then about 0.8 s (1.2 s less the model and 0.2 s)


def _solve_cpsat(instance: Instance, warm: Schedule, seconds: float, **options: Any) -> Any:
    """:func:`~themis_opt.cpsat.solve_cpsat` with one worker, seed 0, within ``seconds``."""
    import time

    from themis_opt.budget import Deadline
    from themis_opt.cpsat import solve_cpsat

    return solve_cpsat(
        instance,
        warm,
        deadline=Deadline.after(seconds),
        workers=1,
        seed=0,
        quantum_ns=None,
        log=False,
        t0=time.perf_counter(),
        **options,
    )
