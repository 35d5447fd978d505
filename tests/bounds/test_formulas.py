"""The solver-free bounds: below every heuristic on every bundled instance, Jackson's rule and the
preemptive makespan by hand, deadlines, long chains."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bounds.graphs import three_computes
from themis_opt.instance import Collective, Dimension, Instance, Network

from ..conftest import ROOT, heuristic_schedules, two_issues

MIB = 2**20


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


@pytest.mark.parametrize("size", [100, 200])
def test_jackson_is_the_brute_force_optimum_where_every_other_formula_falls_short(size: int) -> None:
    # the compute unit's jobs: x (release 0, tail 0), y and z (release 50, tail = their all-reduce)
    from themis_opt.bounds import solver_free_bounds

    from ..conftest import brute_force

    instance = three_computes(size)
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
