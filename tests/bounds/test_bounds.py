"""Lower bounds: hand values, ordering, and validity against every schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_opt.bounds import compute_bounds, ideal_bound, integer_load_bound, lp_bound, order_profiles
from themis_opt.bounds.params import BoundsParams
from themis_opt.instance import Collective, Dimension, Instance, Network

from ..conftest import ROOT, heuristic_schedules, make, two_issues

MIB = 2**20


def test_ideal_bound_worked_example(worked: Instance) -> None:
    # 2 S (N - 1) / N / sum B = 2 * 64 MiB * 31/32 / (150 GB/s)
    assert ideal_bound(worked) == pytest.approx(807291.6667, rel=1e-9)


def test_ideal_bound_halves_for_reduce_scatter() -> None:
    dims = [(4, "ring", 100.0), (8, "switch", 50.0)]
    ar = make(dims, "all_reduce", 64 * MIB, 4)
    rs = make(dims, "reduce_scatter", 64 * MIB, 4)
    assert ideal_bound(rs) == pytest.approx(ideal_bound(ar) / 2)


def test_bounds_are_ordered_and_below_every_makespan(instance: Instance) -> None:
    bounds = compute_bounds(instance)
    assert bounds.lp is not None and bounds.ip is not None and bounds.fill_drain is not None
    assert bounds.lp <= bounds.ip * (1 + 1e-9)
    assert bounds.ip <= bounds.fill_drain
    for name, schedule in heuristic_schedules(instance).items():
        for value in bounds.as_dict().values():
            if value is not None:
                assert value <= schedule.makespan, name


def test_integer_bound_counts_add_up(instance: Instance) -> None:
    solution = integer_load_bound(instance, fill_drain=True)
    for cls in instance.chunk_classes:
        assert sum(solution.counts[cls].values()) == len(cls.chunks)
    assert solution.optimal


def test_load_bound_of_a_fixed_assignment_is_the_busiest_dimension() -> None:
    # a single chunk: the LP must pick the order that minimises the busiest dimension
    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)], size=16 * MIB, chunks=1)
    profiles = order_profiles(inst)[inst.chunk_classes[0]]
    expected = min(max(p.busy) for p in profiles.values())
    assert lp_bound(inst) <= expected  # the LP may split the one chunk
    assert integer_load_bound(inst, fill_drain=False).bound == pytest.approx(expected, rel=1e-7)


def test_fill_and_drain_adds_head_and_tail() -> None:
    # one chunk: its makespan is fixed by its order, and fill-and-drain sees all of it
    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)], size=16 * MIB, chunks=1)
    profiles = order_profiles(inst)[inst.chunk_classes[0]]
    best_single = min(sum(p.busy) for p in profiles.values())
    assert integer_load_bound(inst, fill_drain=True).bound == pytest.approx(best_single, rel=1e-7)


@pytest.mark.parametrize("name", ["tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag"])
def test_fill_and_drain_never_exceeds_the_brute_force_optimum(name: str) -> None:
    from ..conftest import brute_force, load

    tiny = load(name)
    solution = integer_load_bound(tiny, fill_drain=True)
    assert solution is not None
    assert solution.bound <= brute_force(tiny) * (1 + 1e-12)


def test_fill_and_drain_bound_is_at_most_its_own_assignment(instance: Instance) -> None:
    # the program's proven bound never exceeds the objective of the counts it returns
    from themis_opt.bounds import fill_drain_value

    solution = integer_load_bound(instance, fill_drain=True)
    assert solution is not None
    assert solution.bound <= fill_drain_value(instance, solution.counts) * (1 + 1e-9)


def test_fill_and_drain_is_stronger_than_the_integer_bound_on_4d() -> None:
    # 4D switches, one all-reduce in 16 chunks: the heads and tails add to the load
    from ..conftest import four_dims

    inst = four_dims()
    plain = integer_load_bound(inst, fill_drain=False)
    fd = integer_load_bound(inst, fill_drain=True)
    assert plain is not None and fd is not None and fd.optimal
    assert fd.bound > plain.bound * (1 + 1e-3)


def test_a_memo_shares_answers_cut_short_or_not() -> None:
    from themis_opt.budget import Deadline

    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)], size=16 * MIB, chunks=3)
    memo: dict = {}  # type: ignore[type-arg]
    first = integer_load_bound(inst, fill_drain=True, deadline=Deadline.after(30.0), memo=memo)
    assert memo[(inst, True)] is first
    assert integer_load_bound(inst, fill_drain=True, memo=memo) is first


@pytest.fixture
def scip_runs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The integer program's runs (SCIP), counted from an empty cache."""
    from collections import OrderedDict

    import themis_opt.bounds.programs as bounds_module

    runs: list[object] = []
    plain = bounds_module._plain_program

    def counted(*args: object) -> object:
        runs.append(args)
        return plain(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(bounds_module, "_plain_program", counted)
    monkeypatch.setattr(bounds_module, "_CACHE", OrderedDict())
    return runs


def test_no_integer_program_when_integer_counts_reach_the_lp(scip_runs: list[object]) -> None:
    # graph_2l2p: the fill-and-drain program's counts cost the LP's value, so that is the integer
    # optimum too and SCIP is not run
    from ..conftest import load

    runs = scip_runs
    skipped = compute_bounds(load("graph_2l2p"))
    assert not runs and skipped.ip == skipped.lp
    assert skipped.lp is not None and skipped.fill_drain is not None and skipped.lp <= skipped.fill_drain


def test_no_integer_program_when_fill_and_drain_is_proven(scip_runs: list[object]) -> None:
    # tiny_ar: fill-and-drain proves its optimum, which the integer program's cannot exceed
    from ..conftest import load

    inst = load("tiny_ar")
    runs = scip_runs
    bounds = compute_bounds(inst)
    assert not runs and bounds.ip == bounds.lp
    plain = integer_load_bound(inst, fill_drain=False)
    assert runs and plain is not None and bounds.fill_drain is not None
    assert plain.bound <= bounds.fill_drain * (1 + 1e-9)


def test_the_searches_take_the_integer_programs_counts_where_they_cost_less(monkeypatch: pytest.MonkeyPatch) -> None:
    # fill-and-drain cut short with poor counts: the call's memo gets SCIP's, and the larger bound stays
    from collections import OrderedDict

    import themis_opt.bounds.programs as bounds_module
    from themis_opt.bounds import LoadSolution, fill_drain_value
    from themis_opt.policies import baseline_order

    inst = make([(4, "switch", 200.0), (4, "switch", 100.0), (4, "switch", 50.0)], size=64 * MIB, chunks=8)
    (cls,) = inst.chunk_classes
    poor = {cls: {order: 0 for order in inst.orders[0]} | {baseline_order(inst, 0): 8}}
    lp = lp_bound(inst)
    assert lp is not None
    monkeypatch.setattr(bounds_module, "_CACHE", OrderedDict())
    monkeypatch.setattr(bounds_module, "_fill_drain_program", lambda *args: LoadSolution(lp, poor, optimal=False))
    memo: dict = {}  # type: ignore[type-arg]
    bounds = compute_bounds(inst, memo=memo)
    plain, fd = memo[(inst, False)], memo[(inst, True)]
    assert fill_drain_value(inst, plain.counts) < fill_drain_value(inst, poor)
    assert fd.counts == plain.counts and fd.bound == max(lp, plain.bound) == bounds.fill_drain
    assert integer_load_bound(inst, fill_drain=True, memo=memo) is fd  # the stages read the memo


@pytest.mark.parametrize("chunks", [3, 4])
def test_counts_within_yields_every_assignment_at_most_the_value_and_no_other(chunks: int) -> None:
    # brute force over every assignment of counts: those whose fill-and-drain value is at most the
    # value all come out, once each, and every one that comes out is within the program's rounding
    import itertools

    from themis_opt.bounds import fill_drain_value
    from themis_opt.search.counts import counts_within

    instance = make(
        [(4, "ring", 100.0), (8, "switch", 50.0), (2, "switch", 25.0)], size=16 * MIB * chunks, chunks=chunks
    )
    cls = instance.chunk_classes[0]
    orders = instance.orders[0]
    every = []
    for combo in itertools.combinations_with_replacement(orders, chunks):
        counts = {cls: {o: combo.count(o) for o in orders}}
        every.append((fill_drain_value(instance, counts), counts))
    best = min(v for v, _ in every)
    value = best * 1.05  # the optimum and a few more
    wanted = [c for v, c in every if v <= value]
    found = list(counts_within(instance, value))
    assert len(wanted) >= 2
    assert all(c in found for c in wanted)
    assert all(found.count(c) == 1 for c in found)
    assert all(fill_drain_value(instance, c) <= value + 1e-3 * len(orders) * chunks * 10 for c in found)
    assert list(counts_within(instance, best * 0.99)) == []  # below the optimum: nothing


def test_load_value_is_the_integer_programs_value_and_at_most_fill_and_drains() -> None:
    from themis_opt.bounds import fill_drain_value, load_value

    inst = two_issues()
    plain = integer_load_bound(inst, fill_drain=False)
    assert plain is not None and plain.optimal
    assert load_value(inst, plain.counts) == pytest.approx(plain.bound, rel=1e-6)
    assert load_value(inst, plain.counts) <= fill_drain_value(inst, plain.counts)


def test_level_counts_is_the_brute_force_optimum_of_its_program() -> None:
    # every pair of assignments: the best sum of the collectives' largest loads, less the credit
    # per order in use, among those within the slack of the start's load value
    import itertools

    from themis_opt.bounds import BOUNDS, load_value
    from themis_opt.search.counts import level_counts

    inst = two_issues()
    profiles = order_profiles(inst)
    start = integer_load_bound(inst, fill_drain=False)
    assert start is not None
    cap = load_value(inst, start.counts) * (1 + BOUNDS.level_slack)

    def objective(counts: dict) -> float:  # type: ignore[type-arg]
        peaks = sum(
            max(
                sum(
                    n * profiles[cls][o].busy[d]
                    for cls in inst.chunk_classes
                    if cls.collective == c
                    for o, n in counts[cls].items()
                )
                for d in range(3)
            )
            for c in range(2)
        )
        return peaks - BOUNDS.level_credit * cap * sum(1 for cls in counts for n in counts[cls].values() if n)

    per_class = []
    for cls in inst.chunk_classes:
        orders = list(profiles[cls])
        combos = itertools.combinations_with_replacement(orders, len(cls.chunks))
        per_class.append([{cls: {o: combo.count(o) for o in orders}} for combo in combos])
    feasible = []
    for first, second in itertools.product(*per_class):
        counts = {**first, **second}
        if load_value(inst, counts) <= cap:
            feasible.append(objective(counts))
    found = level_counts(inst, start)
    assert found is not None
    assert all(sum(found[cls].values()) == len(cls.chunks) for cls in inst.chunk_classes)
    assert load_value(inst, found) <= cap * (1 + 1e-9)
    assert objective(found) == pytest.approx(min(feasible), abs=1.0)  # the program rounds times to 1e-3 ns
    assert objective(found) < objective(start.counts)  # the start is not level here


def test_level_counts_is_none_after_the_deadline() -> None:
    from themis_opt.budget import Deadline
    from themis_opt.search.counts import level_counts

    inst = two_issues()
    start = integer_load_bound(inst, fill_drain=False)
    assert start is not None
    assert level_counts(inst, start, Deadline(0.0)) is None


def test_the_searches_take_the_integer_programs_counts_where_fill_and_drain_found_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fill-and-drain finds no assignment in time: its bound is not computed, and the stages read SCIP's counts
    from collections import OrderedDict

    import themis_opt.bounds.programs as bounds_module

    inst = make([(4, "switch", 200.0), (4, "switch", 100.0), (4, "switch", 50.0)], size=64 * MIB, chunks=8)
    monkeypatch.setattr(bounds_module, "_CACHE", OrderedDict())
    monkeypatch.setattr(bounds_module, "_fill_drain_program", lambda *args: None)
    memo: dict = {}  # type: ignore[type-arg]
    bounds = compute_bounds(inst, memo=memo)
    plain = memo[(inst, False)]
    assert bounds.fill_drain is None and plain is not None and bounds.ip == plain.bound
    found = integer_load_bound(inst, fill_drain=True, memo=memo)
    assert found is not None and found.counts == plain.counts and not found.optimal


@pytest.mark.parametrize("name", ["tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag"])
def test_least_busy_never_exceeds_the_brute_force_optimum(name: str) -> None:
    from themis_opt.bounds import least_busy_bound

    from ..conftest import brute_force, load

    instance = load(name)
    bound = least_busy_bound(instance)
    assert bound is not None and bound <= brute_force(instance) * (1 + 1e-12)


def test_least_busy_is_the_one_chunk_on_its_cheapest_order() -> None:
    # one chunk on one dimension: its two phases back to back are the makespan
    from themis_opt.bounds import least_busy_bound
    from themis_opt.solving import solve

    instance = make([(8, "ring", 100.0)], "all_reduce", MIB, 1)
    bound = least_busy_bound(instance)
    assert bound == pytest.approx(solve(instance, "baseline").makespan, rel=1e-7)


def test_the_default_bound_counts_latency() -> None:
    # 64 chunks of 16 KiB on microsecond hops: the ideal bound is a sliver of the makespan; the
    # solver-free bounds are near the full ones
    from themis_opt.instance import Collective, Dimension, Network
    from themis_opt.solving import solve

    dims = [(2, "ring", 200.0), (8, "fully_connected", 100.0), (2, "switch", 50.0)]
    network = Network(tuple(Dimension(n, topology, rate, 5000.0) for n, topology, rate in dims))
    instance = Instance(network, (Collective("all_reduce", MIB, 64),))
    default = solve(instance, "baseline", bound_set="formulas")
    full = compute_bounds(instance)
    assert default.bounds.lp is None and default.bounds.least_busy is not None
    assert default.bounds.ideal < 0.2 * default.makespan  # type: ignore[operator]
    assert default.lower_bound >= 0.8 * full.best


def test_a_slow_solver_load_is_waited_for_only_until_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # a cold disk made the import of OR-Tools take 6 s: the wait ends at the deadline, the load goes on
    import sys
    import threading
    import time

    import themis_opt.bounds.programs as programs
    from themis_opt.budget import Deadline

    release = threading.Event()
    monkeypatch.setattr(programs, "_LOADING", {})
    monkeypatch.setattr(programs, "_load_solvers", lambda key, modules: release.wait(10))
    monkeypatch.delitem(sys.modules, "ortools.linear_solver.pywraplp", raising=False)
    assert not programs.solvers_loaded(Deadline.after(0.1))  # less than solver_load (0.6 s) left: not started
    assert "programs" not in programs._LOADING
    t0 = time.perf_counter()
    assert not programs.solvers_loaded(Deadline.after(0.7))
    assert time.perf_counter() - t0 < 1.5
    release.set()
    assert programs.solvers_loaded(Deadline.after(5.0))  # the same load, finished


def test_a_failed_solver_load_is_raised_where_the_solvers_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import themis_opt.bounds.programs as programs
    from themis_opt.budget import Deadline

    def broken(key: str, modules: tuple[str, ...]) -> None:
        programs._LOADING[f"{key} error"] = ImportError("no OR-Tools here")

    monkeypatch.setattr(programs, "_LOADING", {})
    monkeypatch.setattr(programs, "_load_solvers", broken)
    monkeypatch.delitem(sys.modules, "ortools.linear_solver.pywraplp", raising=False)
    with pytest.raises(ImportError, match="no OR-Tools here"):
        programs.solvers_loaded(Deadline.after(5.0))
    monkeypatch.delitem(sys.modules, "ortools.sat.python.cp_model", raising=False)
    with pytest.raises(ImportError, match="no OR-Tools here"):
        programs.solvers_loaded(Deadline.after(5.0), cpsat=True)


def test_fill_and_drain_finds_an_assignment_even_when_presolve_spends_its_work_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a work limit presolve uses up: CP-SAT runs again without probing and starts from its
    # complete hint (every chunk on its lightest order), so counts come back, not "not computed"
    from collections import OrderedDict

    import themis_opt.bounds.programs as bounds_module
    from themis_opt.bounds import fill_drain_value

    inst = make([(4, "switch", 200.0), (4, "switch", 100.0), (4, "switch", 50.0)], size=64 * MIB, chunks=8)
    monkeypatch.setattr(bounds_module, "_CACHE", OrderedDict())
    starved = BoundsParams(fill_drain_work=1e-4, fill_drain_conflicts=1)
    found = integer_load_bound(inst, fill_drain=True, params=starved)
    assert found is not None
    (cls,) = inst.chunk_classes
    assert sum(found.counts[cls].values()) == 8
    full = integer_load_bound(inst, fill_drain=True)
    assert full is not None and found.bound <= full.bound * (1 + 1e-9) <= fill_drain_value(inst, found.counts)


@pytest.mark.parametrize(("headroom", "runs_scip"), [(0.0, True), (1.0, False)])
def test_no_integer_program_when_it_could_add_less_than_the_headroom(
    scip_runs: list[object], headroom: float, runs_scip: bool
) -> None:
    # fill-and-drain starved of work: its counts unproven and costing more than the LP, so SCIP runs
    # unless the headroom covers the difference
    inst = make([(4, "switch", 200.0), (4, "switch", 100.0), (4, "switch", 50.0)], size=64 * MIB, chunks=8)
    runs = scip_runs
    params = BoundsParams(fill_drain_work=1e-4, fill_drain_conflicts=1, integer_headroom=headroom)
    bounds = compute_bounds(inst, params=params)
    assert bool(runs) is runs_scip
    assert bounds.ip is not None and bounds.lp is not None and bounds.ip >= bounds.lp * (1 - 1e-9)
    if runs_scip:
        assert bounds.ip > bounds.lp * (1 + 1e-9)  # SCIP raised it
    else:
        assert bounds.ip == bounds.lp


def _waiting(count: int) -> Instance:
    """All-reduces of 16, 32, 64 MiB in 2 chunks, 150 us apart, on 4x4x16 switches at 400/100/50 GB/s:
    the slow wide dimension waits for work the others pass on.
    """
    network = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((4, 400.0), (4, 100.0), (16, 50.0))))
    sizes = (16, 32, 64)
    collectives = tuple(Collective("all_reduce", sizes[i] * MIB, 2, issue_ns=150e3 * i) for i in range(count))
    return Instance(network, collectives)


def test_the_fluid_bound_sees_a_dimension_wait_and_stays_below_the_optimum() -> None:
    from themis_opt.solving import solve

    instance = _waiting(2)
    bounds = compute_bounds(instance)
    assert bounds.fluid is not None and bounds.fill_drain is not None
    assert bounds.fluid > bounds.fill_drain * 1.1  # the load programs cannot see the wait
    optimum = solve(instance, "cpsat", time_limit=30, workers=1)
    assert optimum.status.value == "optimal" and optimum.makespan is not None
    assert bounds.fluid <= optimum.makespan
    for name, schedule in heuristic_schedules(instance).items():
        assert bounds.fluid <= schedule.makespan, name


def test_a_shorter_fluid_grid_gives_a_weaker_bound() -> None:
    # three issue times, the earliest two on the grid: the last release falls inside an interval
    from themis_opt.bounds import fluid_bound
    from themis_opt.bounds.programs import fluid_points

    instance = _waiting(3)
    floor = compute_bounds(instance).fill_drain
    assert floor is not None
    thin = BoundsParams(fluid_points=2)
    assert fluid_points(instance, floor, thin) == [0.0, 150e3, floor]
    full, thinned = fluid_bound(instance, floor), fluid_bound(instance, floor, params=thin)
    assert full is not None and thinned is not None and floor * (1 - 1e-8) <= thinned <= full * (1 + 1e-9)
    for name, schedule in heuristic_schedules(instance).items():
        assert full <= schedule.makespan, name


BUNDLED = sorted(  # instances/ is a link to the package's suites: each file once
    str(p) for p in (ROOT / "themis_opt" / "suites").glob("*/*.json") if p.name != "optima.json"
)


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED, ids=[Path(p).stem for p in BUNDLED])
def test_the_solver_free_bounds_never_exceed_a_heuristic_on_a_bundled_instance(path: str) -> None:
    from themis_opt import load_instance
    from themis_opt.bounds import solver_free_bounds

    instance = load_instance(path)
    bounds = solver_free_bounds(instance)
    assert bounds.jackson is not None and bounds.least_busy is not None
    # the same sums, shrunk by the same relative 1e-8 (compute is not shrunk)
    assert bounds.jackson >= bounds.least_busy and bounds.jackson >= (bounds.compute or 0.0) * (1 - 2e-8)
    for name, schedule in heuristic_schedules(instance).items():
        for bound, value in bounds.as_dict().items():
            assert value is None or value <= schedule.makespan, (name, bound)


def _three_computes(size: int) -> Instance:
    """x at 0; y and z issued at 50, each followed by an all-reduce of ``size`` bytes on a dimension
    of its own: the compute unit must run y and z before x to start both all-reduces early.
    """
    from themis_opt.instance import After, Compute

    network = Network((Dimension(2, "ring", 1.0, 10.0), Dimension(2, "ring", 1.0, 10.0)))
    return Instance(
        network,
        (
            Compute(100.0, id="x"),
            Compute(100.0, id="y", issue_ns=50.0),
            Compute(100.0, id="z", issue_ns=50.0),
            Collective("all_reduce", size, 1, dimensions=(0,), id="c1", after=(After("y"),)),
            Collective("all_reduce", size, 1, dimensions=(1,), id="c2", after=(After("z"),)),
        ),
    )


@pytest.mark.parametrize("size", [100, 200])
def test_jackson_is_the_brute_force_optimum_where_every_other_formula_falls_short(size: int) -> None:
    # the compute unit's jobs: x (release 0, tail 0), y and z (release 50, tail = their all-reduce)
    from themis_opt.bounds import solver_free_bounds

    from ..conftest import brute_force

    instance = _three_computes(size)
    bounds = solver_free_bounds(instance)
    optimum = brute_force(instance)
    assert bounds.jackson == pytest.approx(optimum, rel=1e-7) and bounds.jackson <= optimum
    others = [v for name, v in bounds.as_dict().items() if v is not None and name != "jackson"]
    assert max(others) < 0.9 * optimum
    assert bounds.best_name == "jackson"


def test_the_preemptive_makespan_by_hand() -> None:
    from themis_opt.bounds import preemptive_makespan

    # x runs 0-50, y and z (larger tails) take over at 50 until 250, then 100 of tail: 350
    assert preemptive_makespan([(0.0, 100.0, 0.0), (50.0, 100.0, 100.0), (50.0, 100.0, 100.0)]) == 350.0
    assert preemptive_makespan([(10.0, 5.0, 1.0)]) == 16.0
    assert preemptive_makespan([]) == 0.0


@pytest.mark.parametrize("name", ["tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag"])
def test_jackson_never_exceeds_the_brute_force_optimum(name: str) -> None:
    from themis_opt.bounds import jackson_bound

    from ..conftest import brute_force, load

    instance = load(name)
    assert jackson_bound(instance) <= brute_force(instance) * (1 + 1e-12)


def test_past_the_deadline_the_solver_free_bounds_are_weaker_never_wrong() -> None:
    from themis_opt.bounds import solver_free_bounds
    from themis_opt.budget import Deadline

    instance = two_issues()
    expired = solver_free_bounds(Instance(instance.network, instance.tasks), Deadline.after(0.0))
    full = solver_free_bounds(instance)
    for name, value in expired.as_dict().items():
        assert value is None or value <= (full.as_dict()[name] or 0.0) * (1 + 1e-12), name


def test_the_solver_free_bounds_see_through_a_long_chain_in_linear_time() -> None:
    # 3,000 chained all-reduces: every bound from one pass (a quadratic sum took seconds)
    import time

    from themis_opt.bounds import solver_free_bounds
    from themis_opt.instance import After

    network = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((4, 100.0), (8, 50.0))))
    tasks = tuple(
        Collective("all_reduce", MIB, 2, id=f"c{i}", after=(After(f"c{i - 1}"),) if i else ()) for i in range(3000)
    )
    instance = Instance(network, tasks)
    started = time.perf_counter()
    bounds = solver_free_bounds(instance)
    assert time.perf_counter() - started < 2.0
    one = solver_free_bounds(Instance(network, tasks[:1]))
    assert bounds.critical_path == pytest.approx(3000 * one.critical_path, rel=1e-9)  # type: ignore[operator]


def test_bounds_of_stages_are_each_stages_own_and_below_every_makespan() -> None:
    from themis_opt.bounds import critical_path_bound, solver_free_bounds, stage_parts
    from themis_opt.budget import Deadline
    from themis_opt.policies import baseline_orders
    from themis_opt.sim import simulate

    from ..conftest import load, pipelined

    for fresh in (lambda: load("two_stages"), pipelined):
        instance = fresh()
        bounds = compute_bounds(instance)
        assert integer_load_bound(instance, fill_drain=True) is None  # the programs run per stage
        parts = stage_parts(instance)
        assert [p.stage_npus for p in parts] == [(n,) for n in instance.stage_npus]
        assert bounds.fill_drain == max(compute_bounds(p).fill_drain for p in parts)  # type: ignore[type-var]
        assert bounds.critical_path == critical_path_bound(instance)
        assert bounds.ideal == max(ideal_bound(p) for p in parts) == ideal_bound(instance)
        makespans = [s.makespan for s in heuristic_schedules(instance).values()]
        makespans.append(simulate(instance, baseline_orders(instance), "fifo", baseline=True).makespan)
        for value in bounds.as_dict().values():
            assert value is None or value <= min(makespans)
        # out of time before the stages are split: the whole graph's own bounds, valid and weaker
        late = solver_free_bounds(fresh(), Deadline.after(0))  # a new instance: its stages not split yet
        assert late.critical_path == bounds.critical_path and late.least_busy is None and late.jackson is None
        assert all(value is None or value <= min(makespans) for value in late.as_dict().values())
        # the solver-free bounds alone go by the stages' parts too: one compute unit per stage
        cheap = solver_free_bounds(instance)
        assert cheap.jackson == max(solver_free_bounds(p).jackson for p in parts)  # type: ignore[type-var]
        for value in cheap.as_dict().values():
            assert value is None or value <= min(makespans)
    # stage 0's all-reduce waits for the pipeline to come back: its load bound proves the hand-worked 90165
    assert compute_bounds(load("two_stages")).best == pytest.approx(90165.0, rel=1e-7)


# ------------------------------------------------------------------ the iteration bound


def _chain() -> Instance:
    """A compute task, an all-reduce of 2 chunks over two rings waiting for it, a compute task after."""
    from themis_opt.instance import After, Compute

    network = Network((Dimension(2, "ring", 1.0, 10.0), Dimension(4, "ring", 2.0, 10.0)))
    return Instance(
        network,
        (
            Compute(100.0, id="a"),
            Collective("all_reduce", 400, 2, id="c", after=(After("a"),)),
            Compute(50.0, id="b", after=(After("c"),)),
        ),
    )


@pytest.mark.parametrize("name", ["tiny_rs", "tiny_ar", "tiny_ag", "chain"])
def test_the_iteration_bound_is_the_brute_force_optimum_where_every_formula_falls_short(name: str) -> None:
    # one collective: its span alone over the integer counts (tiny_rs, tiny_ar), or the cuts over the
    # continuous counts (tiny_ag, where it is above the span); a chain: the critical path with the span
    from themis_opt.bounds import iteration_bound, solver_free_bounds

    from ..conftest import brute_force, load

    instance = _chain() if name == "chain" else load(name)
    optimum = brute_force(instance)
    bound = iteration_bound(instance)
    assert bound is not None and bound <= optimum and bound == pytest.approx(optimum, rel=1e-7)
    assert solver_free_bounds(instance).best < 0.95 * optimum


@pytest.mark.parametrize("name", ["tiny_3d", "three_computes"])
def test_the_iteration_bound_never_exceeds_the_brute_force_optimum(name: str) -> None:
    from themis_opt.bounds import iteration_bound, solver_free_bounds

    from ..conftest import brute_force, load

    instance = _three_computes(100) if name == "three_computes" else load(name)
    bound = iteration_bound(instance)
    assert bound is not None and bound <= brute_force(instance) * (1 + 1e-12)
    assert bound >= solver_free_bounds(instance).critical_path * (1 - 2e-8)  # type: ignore[operator]


def test_a_collective_span_alone_is_the_brute_force_optimum_and_at_least_its_shortest_duration() -> None:
    from themis_opt.bounds import alone_span, collective_spans
    from themis_opt.budget import Deadline
    from themis_opt.sim.model import shortest_durations

    from ..conftest import brute_force, load

    for name in ("tiny_rs", "tiny_ar"):
        instance = load(name)
        classes = [cls for cls in instance.chunk_classes if cls.collective == 0]
        assert alone_span(instance, classes) == pytest.approx(brute_force(instance), rel=1e-12)
    instance = _chain()
    spans, shortest = collective_spans(instance, Deadline()), shortest_durations(instance)
    assert all(s >= w for s, w in zip(spans, shortest)) and spans[1] > shortest[1]
    # too many assignments to enumerate: not known, and without CP-SAT's solve alone the span is the
    # shortest duration
    few = BoundsParams(iteration_assignments=1, span_phases=0)
    assert alone_span(instance, list(instance.chunk_classes), few) is None
    assert collective_spans(Instance(instance.network, instance.tasks), Deadline(), few) == shortest


def _rail_and_spine(chunks: int = 3) -> Instance:
    """An all-gather of few chunks over a fast wide switch and a slow narrow one: each chunk's
    orders load one or the other, and the integer split of so few chunks with their pipelining
    costs more than fill and drain tell.
    """
    network = Network((Dimension(8, "switch", 50.0, 500.0), Dimension(2, "switch", 25.0, 500.0)))
    return Instance(network, (Collective("all_gather", 2**20 * chunks, chunks),))


def test_a_collective_solved_alone_by_cpsat_is_its_brute_force_optimum_where_fill_and_drain_falls_short() -> None:
    from themis_opt.bounds import alone_span, collective_spans, exact_span, iteration_bound
    from themis_opt.budget import Deadline

    from ..conftest import brute_force

    instance = _rail_and_spine()
    optimum = brute_force(instance)
    exact = exact_span(instance, 0, Deadline())
    span = alone_span(instance, list(instance.chunk_classes))
    assert span is not None and span < 0.9 * optimum
    assert exact is not None and exact <= optimum and exact == pytest.approx(optimum, rel=1e-7)
    assert collective_spans(instance, Deadline())[0] == exact
    bound = iteration_bound(instance)
    assert bound is not None and bound <= optimum and bound == pytest.approx(optimum, rel=1e-7)
    # more phases than span_phases, no work, or no time: not solved, and the span is fill and drain's
    for params in (BoundsParams(span_phases=5), BoundsParams(span_work=0.0)):
        assert exact_span(instance, 0, Deadline(), params) is None
        assert collective_spans(Instance(instance.network, instance.tasks), Deadline(), params)[0] == span
    assert exact_span(instance, 0, Deadline.after(0.0)) is None


def test_the_iteration_bound_is_never_above_the_exact_suites_optima() -> None:
    import json

    from themis_opt import load_instance
    from themis_opt.bounds import iteration_bound

    folder = ROOT / "themis_opt" / "suites" / "exact"
    optima = json.loads((folder / "optima.json").read_text())
    for name, known in optima.items():
        bound = iteration_bound(load_instance(folder / f"{name}.json"))
        assert bound is not None and bound <= known["makespan_ns"], name


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED, ids=[Path(p).stem for p in BUNDLED])
def test_the_iteration_bound_never_exceeds_a_heuristic_on_a_bundled_instance(path: str) -> None:
    from themis_opt import load_instance
    from themis_opt.bounds import iteration_bound, iteration_fits, solver_free_bounds

    instance = load_instance(path)
    bound = iteration_bound(instance)
    assert (bound is not None) == iteration_fits(instance)
    if bound is None:
        return
    # never below the critical path (the spans are at least the shortest durations) nor the compute bound
    cheap = solver_free_bounds(instance)
    assert bound >= max(cheap.critical_path or 0.0, cheap.compute or 0.0) * (1 - 2e-8)
    for name, schedule in heuristic_schedules(instance).items():
        assert bound <= schedule.makespan, name


def test_the_bound_sets_decide_the_iteration_bound_whatever_the_method() -> None:
    from themis_opt import solve

    instance = _chain()
    for method in ("baseline", "cpsat"):
        assert solve(instance, method, time_limit=5, bound_set="formulas").bounds.iteration is None
        for bound_set in ("auto", "full"):
            result = solve(instance, method, time_limit=5, bound_set=bound_set)
            assert result.bounds.iteration is not None and result.best_bound == "iteration", (method, bound_set)
            assert result.makespan is not None and result.bounds.iteration <= result.makespan


def test_past_the_deadline_the_iteration_bound_is_not_computed_or_weaker() -> None:
    from themis_opt.bounds import iteration_bound
    from themis_opt.budget import Deadline

    from ..conftest import load

    instance = load("tiny_ar")
    assert iteration_bound(instance, Deadline.after(0.0)) is None
    full = iteration_bound(instance)
    one = iteration_bound(Instance(instance.network, instance.tasks), params=BoundsParams(iteration_rounds=1))
    assert full is not None and one is not None and one <= full * (1 + 1e-12)
    too_large = BoundsParams(max_iteration_variables=1)
    assert iteration_bound(instance, params=too_large) is None
    assert compute_bounds(instance, params=too_large).iteration is None


CPSAT_CLUSTERS = {  # cpsat's makespans (ns) of `themis-opt solve FILE --method cpsat`, 20-60 s, 2026-12-04
    "gpt3-175b-fsdp-tp16-ep1-dp4-tpu-v4-4x4x4": 574011932.8492112,
    "llama3-70b-fsdp-tp16-ep1-dp16-tpu-v4-4x4x4x4": 384410392.93969244,
    "llama3-70b-fsdp-tp8-ep1-dp128-hgx-h100-8x32x4": 917946243.9238758,
    "llama3-8b-ddp-tp4-ep1-dp64-tpu-v4-4x4x4x4": 119792018.69538024,
    "llama3-8b-ddp-tp8-ep1-dp128-hgx-h100-8x32x4": 142776763.60883668,
    "llama3-8b-fsdp-tp4-ep1-dp16-tpu-v4-4x4x4": 136062082.29531005,
    "llama3-8b-fsdp-tp8-cp4-ep1-dp32-hgx-h100-8x32x4": 104265937.30283105,  # 5 s, 2026-12-06
    "mixtral-8x7b-fsdp-tp1-ep8-dp128-hgx-h100-8x32x4": 495506259.3878858,
    "mixtral-8x7b-fsdp-tp4-ep4-dp4-tpu-v4-4x4x4": 210751115.930129,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CPSAT_CLUSTERS))
def test_the_iteration_bound_is_below_cpsats_schedules_of_the_clusters_suite(name: str) -> None:
    # the best schedules known of the iterations it was built for: within 5% of them, never above
    from themis_opt import load_instance
    from themis_opt.bounds import iteration_bound

    instance = load_instance(ROOT / "instances" / "clusters" / f"{name}.json")
    bound = iteration_bound(instance)
    assert bound is not None and 0.95 * CPSAT_CLUSTERS[name] < bound <= CPSAT_CLUSTERS[name]


def test_earliest_releases_by_a_deadline_are_complete_or_refused() -> None:
    # the load programs are built from them: on a million dependencies they take a second, so the
    # programs ask for them by their deadline, and releases cut short (issue times) are never used
    from themis_opt.bounds import fluid_bound, lp_bound
    from themis_opt.budget import Deadline, OutOfTime
    from themis_opt.sim.model import earliest_releases

    instance = _chain()
    with pytest.raises(OutOfTime):
        earliest_releases(instance, Deadline.after(0))
    assert lp_bound(instance, Deadline.after(0)) is None and fluid_bound(instance, 1.0, Deadline.after(0)) is None
    releases = earliest_releases(instance)
    assert releases[1] > instance.tasks[1].issue_ns  # the all-reduce waits for the compute task
    assert earliest_releases(_chain(), Deadline.after(60)) == releases
    assert earliest_releases(instance, Deadline.after(0)) == releases  # known: no deadline needed
