"""The iteration bound: brute-force optima where every formula falls short, the exact suite's optima,
the bundled instances, the clusters suite's cpsat schedules, deadlines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bounds.graphs import three_computes
from themis_opt.bounds import compute_bounds, lp_bound
from themis_opt.bounds.params import BoundsParams
from themis_opt.instance import Collective, Dimension, Instance, Network

from ..conftest import ROOT, heuristic_schedules, imported_by

MIB = 2**20


BUNDLED = sorted(  # instances/ is a link to the package's suites: each file once
    str(p) for p in (ROOT / "themis_opt" / "suites").glob("*/*.json") if p.name != "optima.json"
)


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

    instance = three_computes(100) if name == "three_computes" else load(name)
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
    from themis_opt.bounds import fluid_bound
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


def test_the_iteration_bound_does_not_import_numpys_masked_arrays() -> None:
    # np.unique imports numpy.ma (about 10 ms, most of what a default solve's process adds to numpy)
    instance = ROOT / "instances" / "training" / "resnet50-sw8x8x8-equal.json"
    code = (
        "from themis_opt import load_instance\n"
        "from themis_opt.bounds.iteration import iteration_bound\n"
        f"assert iteration_bound(load_instance({str(instance)!r})) is not None"
    )
    assert not imported_by(code, "numpy.ma")


def _two_all_reduces(issue: float = 0.0, chunks: int = 1) -> Instance:
    """Two all-reduces over a fast ring and a slow one: each order's phases on a ring are a
    reduce-scatter early in the chunk's life and an all-gather late in it."""
    network = Network((Dimension(4, "ring", 4.0, 10.0), Dimension(2, "ring", 2.0, 10.0)))
    return Instance(network, (Collective("all_reduce", 800, chunks), Collective("all_reduce", 800, 1, issue_ns=issue)))


@pytest.mark.parametrize(("issue", "chunks"), [(0.0, 1), (100.0, 1), (300.0, 1), (0.0, 2), (150.0, 2)])
def test_each_phase_is_a_job_of_its_own_and_the_bound_stays_below_the_brute_force_optimum(
    issue: float, chunks: int
) -> None:
    # a way's phases on a dimension as one job (released at the first, delivered after the last)
    # relax the jobs of its phases one by one: never higher, and here lower
    import dataclasses

    from themis_opt.bounds.iteration import collective_spans, program_bound
    from themis_opt.bounds.ways import class_ways
    from themis_opt.budget import Deadline

    from ..conftest import brute_force

    instance = _two_all_reduces(issue, chunks)
    spans = collective_spans(instance, Deadline())
    ways = [class_ways(instance, cls) for cls in instance.chunk_classes]
    assert all(way.phases is not None and max(map(len, way.phases)) == 2 for w in ways for way in w)
    merged = [tuple(dataclasses.replace(way, phases=None) for way in w) for w in ways]
    split = program_bound(instance, spans, ways, Deadline())
    one_job = program_bound(instance, spans, merged, Deadline())
    assert one_job <= split * (1 + 1e-12) and split <= brute_force(instance) * (1 + 1e-12)
    # past iteration_phase_jobs a dimension's jobs are one per class and order again
    few = BoundsParams(iteration_phase_jobs=1)
    assert program_bound(instance, spans, ways, Deadline(), few) == pytest.approx(one_job, rel=1e-12)
    if (issue, chunks) == (0.0, 1):
        assert split > 1.05 * one_job  # 664.1 ns against 621.3 (the optimum: 672.2)


def test_the_iteration_bounds_counts_are_whole_chunks_of_its_last_run_or_none() -> None:
    from themis_opt.bounds import iteration_bound, iteration_counts
    from themis_opt.budget import Deadline

    instance = _two_all_reduces(150.0, 3)
    assert iteration_counts(instance) is None  # not run yet
    assert iteration_bound(instance) is not None
    counts = iteration_counts(instance)
    assert counts is not None and set(counts) == set(instance.chunk_classes)
    for cls, orders in counts.items():
        assert sum(orders.values()) == len(cls.chunks) and all(n > 0 for n in orders.values())
        assert set(orders) <= set(instance.orders[cls.collective])
    # a later run that stops before its first round, or counts a class's orders as one: none
    assert iteration_bound(instance, Deadline.after(0.0)) is None and iteration_counts(instance) is None
    assert iteration_bound(instance) is not None and iteration_counts(instance) == counts
    assert iteration_bound(instance, params=BoundsParams(iteration_orders=1)) is not None
    assert iteration_counts(instance) is None
