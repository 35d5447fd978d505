"""The load programs (LP, integer program, fill-and-drain, level counts) and the fluid bound: brute-force
optima, limits and caching."""

from __future__ import annotations

import pytest

from themis_opt.bounds import compute_bounds, integer_load_bound, lp_bound, order_profiles
from themis_opt.bounds.params import BoundsParams
from themis_opt.instance import Collective, Dimension, Instance, Network

from ..conftest import heuristic_schedules, make, two_issues

MIB = 2**20


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


def test_counts_by_value_gives_every_assignment_once_in_increasing_value() -> None:
    # brute force over the 9 assignments of 8 chunks to 2 orders: each comes out once, with a bound
    # below its own value and every later one's, and the program then proves none is left
    from themis_opt.bounds import fill_drain_value
    from themis_opt.search.counts import counts_by_value

    instance = make([(4, "ring", 100.0), (8, "switch", 25.0)], size=64 * MIB, chunks=8)
    cls = instance.chunk_classes[0]
    found = counts_by_value(instance)
    given = []
    while True:
        try:
            given.append(next(found))
        except StopIteration as end:
            assert end.value is True
            break
    assert len(given) == 9 == len({tuple(c[cls].values()) for _, c in given})
    values = [fill_drain_value(instance, c) for _, c in given]
    assert all(bound <= min(values[i:]) for i, (bound, _) in enumerate(given))
    slack = 1e-3 * 2 * 8 * 10  # the program's rounding: a unit per term
    assert all(a <= b + slack for a, b in zip(values, values[1:]))  # in increasing value


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


def test_issue_cuts_that_cannot_bind_are_left_out_and_the_bounds_stay() -> None:
    from themis_opt.bounds import fill_drain_value, load_value
    from themis_opt.bounds.formulas import program_cuts
    from themis_opt.instance import After, Compute

    # 40 small all-reduces, each released after 1 ms of compute, then one large one: the small ones'
    # cuts are dominated by the next (a few us of load against 1 ms); the last two may bind
    net = Network((Dimension(4, "ring", 100.0, 500.0), Dimension(4, "switch", 50.0, 500.0)))
    tasks: list[Collective | Compute] = []
    for i in range(40):
        tasks.append(Compute(1e6, id=f"x{i}", after=(After(f"x{i - 1}"),) if i else ()))
        tasks.append(Collective("all_reduce", 2**16 if i < 39 else 2**28, 2, id=f"c{i}", after=(After(f"x{i}"),)))
    instance = Instance(net, tuple(tasks))
    every, some = BoundsParams(every_cut_entries=10**9), BoundsParams(every_cut_entries=0)
    assert len(program_cuts(instance, every)) == 40
    kept = program_cuts(instance, some)
    assert len(kept) < 5 and kept[0][0] == program_cuts(instance, every)[0][0]  # the first is always kept
    whole, pruned = lp_bound(instance, params=every), lp_bound(instance, params=some)
    assert whole is not None and pruned == pytest.approx(whole, rel=1e-12)
    plain = integer_load_bound(instance, fill_drain=False, params=every)
    assert plain is not None
    assert load_value(instance, plain.counts) > 0 and fill_drain_value(instance, plain.counts) >= whole


def test_the_fill_and_drain_model_grows_linearly_with_the_orders_and_their_heads_above_its_cap() -> None:
    from themis_opt.bounds.programs import fill_drain_model
    from themis_opt.budget import Deadline

    # 30 all-reduces issued 1 us apart: each order's head on a dimension is a level of its own, and a
    # clause per level listing every order below it is their square (on an iteration of 12,000
    # orders a dimension, 16 s to build); above the cap a chain of Booleans says it instead
    net = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((4, 100.0), (8, 50.0), (2, 25.0))))
    tasks = tuple(Collective("all_reduce", (1 + i % 7) * MIB, 2, issue_ns=1000.0 * i, id=f"c{i}") for i in range(30))
    instance = Instance(net, tasks)
    orders = 30 * 6

    def literals(params: BoundsParams) -> int:
        program = fill_drain_model(instance, None, Deadline(), params=params)
        assert program is not None and len(program.counts) == orders
        return sum(len(c.bool_or.literals) for c in program.model.model_proto.constraints)

    assert literals(BoundsParams()) > 50_000  # the clauses: 55,623
    assert 0 < literals(BoundsParams(fill_drain_clause_literals=1)) <= 6 * orders * net.num_dims


@pytest.mark.parametrize("several", [False, True])
def test_the_chain_and_the_clauses_give_the_same_fill_and_drain_optimum(several: bool) -> None:
    from ..conftest import four_dims

    # where the heads and tails add to the load: the program itself is solved, not its shortcut
    instance = two_issues() if several else four_dims(chunks=4)
    plain = integer_load_bound(instance, fill_drain=False)
    clauses = integer_load_bound(instance, fill_drain=True)
    chain = integer_load_bound(instance, fill_drain=True, params=BoundsParams(fill_drain_clause_literals=1))
    assert plain is not None and clauses is not None and chain is not None and clauses.optimal and chain.optimal
    assert clauses.bound > plain.bound * (1 + 1e-6)
    assert chain.bound == pytest.approx(clauses.bound, rel=1e-12)
