"""The cpsat method's stages (themis_opt.pipeline): each stage on its own, the table, switching stages off."""

from __future__ import annotations

import json
import re
import time
import types
from typing import Any

import pytest

from themis_opt.bounds import compute_bounds, fill_drain_value, integer_load_bound
from themis_opt.budget import Deadline
from themis_opt.formats.native import load_instance
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.methods import SolveOptions
from themis_opt.params import PipelineParams, SolveParams, Stage
from themis_opt.pipeline import (
    STAGES,
    Context,
    StageSpec,
    assignment_search,
    at_bound,
    counts_fixed,
    describe,
    refutation,
    run_stages,
    warm_start,
)
from themis_opt.policies import baseline_orders, counts_match, spread_orders, themis_orders
from themis_opt.result import Bounds, Status, is_proven, optimality_tolerance
from themis_opt.schedule import Schedule
from themis_opt.search.counts import level_counts
from themis_opt.sim import simulate
from themis_opt.solving import solve
from themis_opt.validator import validate

from .conftest import DATA, ROOT, four_dims, make, two_issues


def _three_dims(chunks: int) -> Instance:
    dims = zip([4, 8, 4], [200.0, 100.0, 50.0])
    network = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in dims))
    return Instance(network, (Collective("all_reduce", 2**28, chunks),))


def _context(
    instance: Instance,
    best: Schedule | None,
    bounds: Bounds | None = None,
    memo: dict[Any, Any] | None = None,
    params: SolveParams | None = None,
    seconds: float = 20.0,
    kind: type[Context] = Context,
) -> Context:
    memo = memo if memo is not None else {}
    bounds = bounds or compute_bounds(instance, memo=memo)
    deadline = Deadline.after(seconds)
    params = params or SolveParams()
    options = SolveOptions.of("cpsat", time_limit=seconds, workers=1)
    return kind(instance, bounds, deadline, params, options, 1, time.perf_counter(), memo=memo, best=best)


def test_the_table_lists_every_stage_once_in_order() -> None:
    names = [spec.name for spec in STAGES]
    assert names == [
        "warm start",
        "assignment search",
        "at the bound",
        "probe",
        "refutation",
        "sequence search",
        "windows",
        "counts fixed",
        "full model",
    ]
    assert [row["stage"] for row in describe()] == names
    assert [spec.starts for spec in STAGES] == [True] + [False] * 8
    for spec in STAGES:  # every stage's settings are a field of the parameters
        assert spec.settings is None or isinstance(getattr(PipelineParams(), spec.settings), Stage)


def test_the_counts_fixed_stage_starts_from_a_schedule_with_its_counts() -> None:
    # the first hint with the fill-and-drain counts is CP-SAT's start; without one, the spread counts
    instance = make([(4, "switch", 200.0), (4, "switch", 100.0), (4, "switch", 50.0)], size=64 * 2**20, chunks=8)
    memo: dict[Any, Any] = {}
    fd = integer_load_bound(instance, fill_drain=True, memo=memo)
    assert fd is not None
    other = simulate(instance, baseline_orders(instance), "fifo")
    assert not counts_match(instance, other.orders, fd.counts)
    with_counts = simulate(instance, spread_orders(instance, fd.counts), "fifo")
    started: list[Schedule] = []

    class Spy(Context):
        def cpsat(self, start: Schedule, deadline: Deadline, **options: Any) -> Any:
            started.append(start)
            return types.SimpleNamespace(schedule=start, trajectory=(), stats=None)

    ctx = _context(instance, other, memo=memo, kind=Spy)
    ctx.spread = with_counts
    counts_fixed(ctx, ctx.deadline)
    counts_fixed(_context(instance, other, memo=memo, kind=Spy), ctx.deadline)
    assert started[0] is with_counts
    assert counts_match(instance, started[1].orders, fd.counts) and validate(instance, started[1]) == []


def test_the_counts_fixed_stage_keeps_the_load_programs_counts() -> None:
    # what it finds is valid, shorter than the start, and has fill-and-drain's counts exactly
    instance = _three_dims(8)
    memo: dict[Any, Any] = {}
    fd = integer_load_bound(instance, fill_drain=True, memo=memo)
    assert fd is not None
    warm = simulate(instance, themis_orders(instance), "scf")
    ctx = _context(instance, warm, memo=memo)
    counts_fixed(ctx, ctx.deadline)
    assert ctx.best is not None and validate(instance, ctx.best) == []
    assert ctx.bounds.best <= ctx.best.makespan < warm.makespan  # one worker: the same search every run
    assert counts_match(instance, ctx.best.orders, fd.counts)
    assert ctx.bounds.cpsat is None  # a restriction's bound is no bound


def test_the_at_bound_stage_finds_a_valid_schedule_that_meets_the_bound() -> None:
    instance = _three_dims(8)
    memo: dict[Any, Any] = {}
    bound = compute_bounds(instance, memo=memo).best
    warm = simulate(instance, themis_orders(instance), "scf")
    assert not is_proven(warm.makespan, bound, instance.origin_ns)
    ctx = _context(instance, warm, Bounds(ideal=bound), memo)
    at_bound(ctx, ctx.deadline)
    assert ctx.best is not None and validate(instance, ctx.best) == []
    assert is_proven(ctx.best.makespan, bound, instance.origin_ns)
    # below every schedule's makespan nothing meets the cap: the warm start stays
    ctx = _context(instance, warm, Bounds(ideal=bound * 0.9), memo)
    at_bound(ctx, ctx.deadline)
    assert ctx.best is warm


def test_the_at_bound_stage_asks_the_programs_counts_first_then_each_other_within_the_cap() -> None:
    instance = four_dims()  # 16 chunks on 4x4x4x16: 16 assignments meet the program's bound
    memo: dict[Any, Any] = {}
    bounds = compute_bounds(instance, memo=memo)
    bound = bounds.best
    fd = integer_load_bound(instance, fill_drain=True, memo=memo)
    assert fd is not None
    warm = simulate(instance, themis_orders(instance), "scf")
    asked: list[Any] = []
    cap = bound + optimality_tolerance(bound, instance.origin_ns)

    class Spy(Context):  # meets nothing: every assignment is asked
        def capped(self, at: float, deadline: Deadline, lanes: int) -> Any:
            assert at == cap

            def ask(counts: Any, deadline: Deadline) -> Any:
                asked.append(counts)
                return types.SimpleNamespace(schedule=warm, status=Status.INFEASIBLE)

            return [types.SimpleNamespace(ask=ask, stop=lambda: None, warm=warm)]

    ctx = _context(instance, warm, bounds, memo, kind=Spy)
    at_bound(ctx, ctx.deadline)
    assert ctx.best is warm
    assert len(asked) >= 10 and asked[0] == fd.counts
    assert all(asked.count(counts) == 1 for counts in asked)
    assert all(fill_drain_value(instance, counts) <= cap + 1.0 for counts in asked[1:])


@pytest.mark.parametrize("seconds", [1.0, 1e-3])
def test_the_refutation_stage_raises_the_bound_to_the_optimum_and_no_further(seconds: float) -> None:
    # the exact suite's small-exact-s1-008 (one all-reduce, 4 chunks): its formulas' and programs'
    # best bound is 11.9% below the optimum; refuting every assignment below each cap proves it.
    # Given 1 ms each at first, no assignment is refuted in its time: each comes back with four
    # times as long (before, the first unanswered one ended the stage, the bound not raised)
    name = "small-exact-s1-008"
    exact = ROOT / "themis_opt" / "suites" / "exact"
    instance = load_instance(exact / f"{name}.json")
    optimum = json.loads((exact / "optima.json").read_text())[name]["makespan_ns"]
    memo: dict[Any, Any] = {}
    bounds = compute_bounds(instance, memo=memo)
    warm = simulate(instance, themis_orders(instance), "scf")
    params = SolveParams.from_dict({"pipeline": {"refute_seconds": seconds}})
    ctx = _context(instance, warm, bounds, memo, params)
    refutation(ctx, ctx.deadline)
    assert ctx.bounds.cpsat is not None and bounds.best * 1.1 < ctx.bounds.cpsat <= optimum
    assert ctx.best is not None and validate(instance, ctx.best) == [] and ctx.proven()


@pytest.mark.parametrize("growth", [0.0, 1.0])
def test_the_refutation_caps_go_twice_as_far_only_after_a_quick_round(
    growth: float, caplog: pytest.LogCaptureFixture
) -> None:
    # small-exact-s1-008 again, steps of 3%: every round takes under all of the time left (growth
    # 1: each cap twice as far above the last) and none under none of it (growth 0: each 3% above)
    instance = load_instance(ROOT / "themis_opt" / "suites" / "exact" / "small-exact-s1-008.json")
    memo: dict[Any, Any] = {}
    bounds = compute_bounds(instance, memo=memo)
    warm = simulate(instance, themis_orders(instance), "scf")
    params = SolveParams.from_dict({"pipeline": {"refute_step": 0.03, "refute_growth": growth}})
    ctx = _context(instance, warm, bounds, memo, params)
    with caplog.at_level("INFO", logger="themis_opt.pipeline.stages"):
        refutation(ctx, ctx.deadline)
    caps = [float(m) for m in re.findall(r"refutation: cap ([0-9.e+]+) ns", caplog.text)]
    reached = [float(m) for m in re.findall(r"no schedule ends by ([0-9.e+]+) ns", caplog.text)]
    assert ctx.proven() and len(caps) >= 3 and reached[:2] == caps[:2]  # the first two rounds reach their caps
    steps = [caps[1] / caps[0] - 1, caps[2] / caps[1] - 1]
    assert steps == pytest.approx([0.06, 0.12] if growth else [0.03, 0.03], rel=1e-3)


def test_an_assignment_refuted_at_a_cap_is_not_asked_again_at_a_lower_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # small-exact-s1-008, steps of 3%: rounds find shorter schedules and go on below them, at lower
    # caps; an assignment refuted at a cap admits no schedule by any lower one, so it is not asked again
    from themis_opt.cpsat import CappedModel
    from themis_opt.search import counts as search_counts
    from themis_opt.search.counts import counts_by_value

    asked: list[tuple[float, Any, Status]] = []  # (cap, assignment, answer)
    build, ask = CappedModel.__init__, CappedModel.ask

    def spy_build(self: Any, instance: Instance, warm: Schedule, cap: float, **options: Any) -> None:
        build(self, instance, warm, cap, **options)
        self.spied_cap = cap

    def spy_ask(self: Any, counts: Any, deadline: Deadline) -> Any:
        outcome = ask(self, counts, deadline)
        key = tuple((cls, tuple(sorted(orders.items()))) for cls, orders in counts.items())
        asked.append((self.spied_cap, key, outcome.status))
        return outcome

    programs: list[list[Any]] = []  # per fill-and-drain program started, the assignments it gave

    def spy_counts(*args: Any, **kwargs: Any) -> Any:
        given: list[Any] = []
        programs.append(given)
        found = counts_by_value(*args, **kwargs)
        while True:
            try:
                value, counts = next(found)
            except StopIteration as end:
                return end.value
            given.append(counts)
            yield value, counts

    monkeypatch.setattr(CappedModel, "__init__", spy_build)
    monkeypatch.setattr(CappedModel, "ask", spy_ask)
    monkeypatch.setattr(search_counts, "counts_by_value", spy_counts)
    instance = load_instance(ROOT / "themis_opt" / "suites" / "exact" / "small-exact-s1-008.json")
    memo: dict[Any, Any] = {}
    bounds = compute_bounds(instance, memo=memo)
    warm = simulate(instance, themis_orders(instance), "scf")
    params = SolveParams.from_dict({"pipeline": {"refute_step": 0.03, "refute_growth": 1.0}})
    ctx = _context(instance, warm, bounds, memo, params)
    with caplog.at_level("INFO", logger="themis_opt.pipeline.stages"):
        refutation(ctx, ctx.deadline)
    assert ctx.proven() and validate(instance, ctx.best) == []
    known = [int(m) for m in re.findall(r"refuted \((\d+) known\)", caplog.text)]
    assert sum(known) >= 1  # the case arises here
    for n, (cap, key, _) in enumerate(asked):
        assert not any(k == key and status is Status.INFEASIBLE and c >= cap for c, k, status in asked[:n])
    # one program for every round, each assignment drawn from it once
    assert len(programs) == 1 and len(programs[0]) >= 5
    assert len({id(counts) for counts in programs[0]}) == len(programs[0])


def test_a_cpsat_bound_above_the_best_schedule_is_logged_and_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    instance = load_instance(DATA / "tiny_3d.json")
    warm = simulate(instance, themis_orders(instance), "scf")
    ctx = _context(instance, warm)
    ctx.keep_cpsat_bound(warm.makespan * 0.999)
    assert ctx.bounds.cpsat == warm.makespan * 0.999
    with caplog.at_level("ERROR", logger="themis_opt.pipeline.context"):
        ctx.keep_cpsat_bound(warm.makespan * 1.001)
    assert ctx.bounds.cpsat == warm.makespan * 0.999 and "above a valid schedule" in caplog.text


def _spy_on_starts(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The starts of every assignment search run from now on, in a list that fills as they run."""
    from themis_opt import search as localsearch

    started: list[list[Any]] = []
    real = localsearch.improve_assignment

    def spy(instance: Instance, starts: list[Any], **options: Any) -> Any:
        started.append(list(starts))
        return real(instance, starts, **options)

    monkeypatch.setattr(localsearch, "improve_assignment", spy)
    return started


@pytest.mark.parametrize("several", [True, False])
def test_the_assignment_search_starts_from_level_counts_with_several_collectives(
    several: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # starts: the best schedule's orders, the program's counts spread and, with several collectives,
    # the level counts spread (the search's schedule is valid either way)
    instance = two_issues(several)
    memo: dict[Any, Any] = {}
    counts = integer_load_bound(instance, fill_drain=True, memo=memo)
    assert counts is not None
    started = _spy_on_starts(monkeypatch)
    warm = simulate(instance, baseline_orders(instance), "fifo")
    ctx = _context(instance, warm, Bounds(ideal=0.0), memo, seconds=10)
    assignment_search(ctx, ctx.deadline)
    assert ctx.best is not None and validate(instance, ctx.best) == [] and ctx.best.makespan <= warm.makespan
    expected = [warm.orders, spread_orders(instance, counts.counts)]
    if several:
        level = level_counts(instance, counts)
        assert level is not None and level != counts.counts
        expected.append(spread_orders(instance, level))
    assert started == [expected]


def test_no_search_stage_starts_with_less_time_than_the_warm_start_took() -> None:
    # the warm start timed several schedules: a search with less time left could not time and build one
    ran: list[str] = []

    def slow(ctx: Context, budget: Deadline) -> None:
        time.sleep(0.8)
        warm_start(ctx, budget)

    def record(name: str) -> Any:
        return lambda ctx, budget: ran.append(name)

    searches = ("assignment search", "at the bound", "probe", "refutation", "sequence search")
    stages = (
        StageSpec("warm start", None, lambda ctx: True, slow, starts=True),
        *(StageSpec(s.name, s.settings, s.runs, record(s.name)) for s in STAGES if s.name in searches),
    )
    instance = make([(4, "switch", 200.0), (4, "switch", 100.0), (4, "switch", 50.0)], size=64 * 2**20, chunks=4)
    bounds = compute_bounds(instance)
    run_stages(_context(instance, None, bounds, seconds=1.5), stages)
    assert ran == []
    run_stages(_context(instance, None, bounds, seconds=20), stages)
    assert ran == ["assignment search", "at the bound", "refutation", "sequence search"]  # the probe is off by default


def test_a_model_too_large_with_no_time_to_load_cp_sat_returns_the_best_heuristic_schedule(
    tmp_path: Any,
) -> None:
    # a fresh process has not loaded OR-Tools, and 0.3 s is less than loading it needs
    # (bounds.solver_load): the window search cannot start, and the call still ends with a schedule
    import json
    import subprocess
    import sys

    from themis_opt.formats.native import save_instance

    eight = Network(tuple(Dimension(2, "ring", b, 500.0) for b in (400, 350, 300, 250, 200, 150, 100, 50)))
    instance = Instance(eight, (Collective("all_reduce", 2**30, 4),), "8d")  # 8! orders: no exact model
    save_instance(instance, tmp_path / "8d.json")
    argv = [sys.executable, "-m", "themis_opt.cli", "solve", str(tmp_path / "8d.json"), "--method", "cpsat"]
    argv += ["--time-limit", "0.3", "--out", str(tmp_path / "result.json")]
    process = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, process.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "feasible" and "out of time before CP-SAT was loaded" in result["note"]
    from themis_opt.formats.native import load_result

    schedule = load_result(tmp_path / "result.json").schedule
    assert schedule is not None and validate(instance, schedule) == []


def test_a_warm_start_with_merged_all_reduce_phases_is_kept_apart_from_the_split_stages() -> None:
    # an ASTRA-sim 2.x trace's groups as dimensions: the baseline (merged last phases) is the best heuristic
    instance = load_instance(DATA / "merged_baseline.json")
    baseline = solve(instance, "baseline")
    assert len(baseline.schedule.columns().dim) < instance.num_phases  # merged
    result = solve(instance, "cpsat", warm=baseline.schedule, time_limit=1.5, workers=1, seed=0)
    assert validate(instance, result.schedule) == []
    assert result.makespan <= baseline.makespan


def test_the_probe_proves_the_best_before_the_searches_when_switched_on(caplog: pytest.LogCaptureFixture) -> None:
    # two all-reduces whose exact model CP-SAT proves in a fraction of a second, which the searches
    # before it do not: with the probe on, the call ends there, optimal; off, at the last stage
    import logging

    instance = two_issues()
    probe = SolveParams(pipeline=PipelineParams(probe=Stage(0.5, cap=5.0, max_literals=4_096)))
    for params, last in ((probe, "stage probe"), (SolveParams(), "stage full model")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="themis_opt.pipeline"):
            result = solve(instance, "cpsat", time_limit=10, workers=1, params=params)
        stages = [r.getMessage().split(":")[0] for r in caplog.records if r.getMessage().startswith("stage ")]
        assert result.status.value == "optimal" and result.schedule is not None
        assert validate(instance, result.schedule) == [] and stages[-1] == last


def test_the_assignment_search_starts_from_the_iteration_bounds_counts_where_it_ran(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from themis_opt.bounds import iteration_counts

    instance = two_issues(True)
    started = _spy_on_starts(monkeypatch)
    warm = simulate(instance, baseline_orders(instance), "fifo")
    ctx = _context(instance, warm, seconds=10)  # the default bounds: the iteration bound runs
    counts = iteration_counts(instance)
    assert ctx.bounds.iteration is not None and counts is not None
    with caplog.at_level("INFO", logger="themis_opt.pipeline.stages"):
        assignment_search(ctx, ctx.deadline)
    assert ctx.best is not None and validate(instance, ctx.best) == []
    assert started[0][-1] == spread_orders(instance, counts) and "the iteration bound's orders" in caplog.text
    # bounds without it (the formulas alone): the counts of an earlier call are not a start
    ctx = _context(instance, warm, Bounds(ideal=0.0), seconds=10)
    assignment_search(ctx, ctx.deadline)
    assert len(started) == 2 and started[1] == started[0][:-1]
