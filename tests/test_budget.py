"""The time budget: every method returns within its limit on instances that used to run for minutes."""

from __future__ import annotations

import dataclasses
import time

import pytest

from themis_opt.bounds import compute_bounds, load_programs_fit
from themis_opt.budget import Deadline, OutOfTime, run_interruptibly
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.result import Status
from themis_opt.solving import solve
from themis_opt.validator import validate

GIB = 2**30


def _ring(sizes: list[int], bandwidths: list[float]) -> Network:
    return Network(tuple(Dimension(n, "ring", b, 500.0) for n, b in zip(sizes, bandwidths)))


HARD = {
    "6d": Instance(_ring([4] * 6, [400, 300, 200, 150, 100, 50]), (Collective("all_reduce", GIB, 32),), "6d"),
    "8d": Instance(_ring([2] * 8, [400, 350, 300, 250, 200, 150, 100, 50]), (Collective("all_reduce", GIB, 4),), "8d"),
    "16coll": Instance(
        _ring([4, 8, 8, 16], [400, 200, 100, 50]),
        tuple(Collective("all_reduce", 64 * 2**20, 16, issue_ns=100_000.0 * i) for i in range(16)),
        "16coll",
    ),
}


@pytest.mark.parametrize("name", sorted(HARD))
@pytest.mark.parametrize("method", ["baseline", "themis", "balanced", "cpsat"])
def test_budgeted_solve_returns_in_time(name: str, method: str) -> None:
    instance = HARD[name]
    limit = 1.5
    t0 = time.perf_counter()
    result = solve(instance, method, time_limit=limit, workers=2)
    wall = time.perf_counter() - t0
    assert wall <= limit * 1.1 + 1.5, f"{method} on {name} took {wall:.1f} s"  # generous: figures go in bench/
    if result.schedule is not None:
        assert validate(instance, result.schedule) == []
        assert result.lower_bound <= result.makespan  # type: ignore[operator]
    else:
        assert result.status is Status.NO_SOLUTION and result.note


def test_eight_dimensions_skip_the_load_programs_and_say_so() -> None:
    instance = HARD["8d"]
    assert not load_programs_fit(instance)  # 8! orders per chunk class
    bounds = compute_bounds(instance)
    assert bounds.lp is None and bounds.ip is None and bounds.fill_drain is None
    result = solve(instance, "cpsat", time_limit=2.5)
    assert result.schedule is not None and "order literals" in result.note
    assert validate(instance, result.schedule) == []


def test_deadline_shares_and_checks() -> None:
    assert Deadline().remaining() == float("inf") and not Deadline().expired()
    past = Deadline(time.perf_counter() - 1)
    assert past.expired() and past.remaining() == 0.0
    with pytest.raises(OutOfTime, match="stage: out of time"):
        past.check("stage")
    later = Deadline.after(10.0)
    assert later.share(0.5).remaining() <= later.remaining() / 2 + 1e-3
    assert 1.0 < later.cap(2.0).remaining() <= 2.0  # the earlier of the two
    assert later.cap(60.0).at == later.at
    assert Deadline().cap(3.0).remaining() <= 3.0  # a cap bounds even an unlimited call


def test_a_bound_out_of_time_is_not_computed() -> None:
    bounds = compute_bounds(HARD["16coll"], Deadline(time.perf_counter() - 1))
    assert bounds.lp is None and bounds.ip is None and bounds.fill_drain is None
    assert bounds.ideal > 0


def test_the_ideal_bound_holds_out_of_time_where_it_is_a_closed_form() -> None:
    # 8x8x8 switches: the ideal bound is bytes over bandwidth, known at once even when the time is up
    instance = Instance(_ring([8, 8, 8], [200, 100, 50]), (Collective("all_reduce", GIB, 64),), "paper")
    result = solve(instance, "themis", time_limit=1e-9, bound_set="formulas")
    assert result.bounds.ideal > 0 and result.bandwidth_utilization == pytest.approx(
        result.bounds.ideal / result.makespan  # type: ignore[operator]
    )
    # an ideal bound not computed (0) gives no utilisation, not 0%
    unknown = result.with_bounds(dataclasses.replace(result.bounds, ideal=0.0), instance.origin_ns)
    assert unknown.bandwidth_utilization is None


def test_simulation_out_of_time_reports_no_solution() -> None:
    big = Instance(_ring([4, 8, 8, 16], [400, 200, 100, 50]), (Collective("all_reduce", GIB, 8192),), "big")
    result = solve(big, "themis", time_limit=0.01)
    assert result.status is Status.NO_SOLUTION and result.schedule is None and result.makespan is None
    assert "out of time" in result.note


def test_run_interruptibly_returns_and_raises() -> None:
    assert run_interruptibly(lambda: 41 + 1, lambda: None) == 42

    def fail() -> int:
        raise ValueError("inner")

    with pytest.raises(ValueError, match="inner"):
        run_interruptibly(fail, lambda: None)


def test_sixteen_dimensions_never_list_their_orders() -> None:
    # 16! orders per chunk: every method must count them, never enumerate them
    network = _ring([2] * 16, [100.0] * 16)
    instance = Instance(network, (Collective("all_reduce", 2**20, 2),), "16d")
    assert instance.order_count(0) == 20_922_789_888_000
    for method in ("baseline", "themis", "balanced", "cpsat"):
        t0 = time.perf_counter()
        result = solve(instance, method, time_limit=1, workers=1)
        assert time.perf_counter() - t0 < 1 * 1.1 + 1.5, method
        assert result.schedule is not None and validate(instance, result.schedule) == [], method
        assert result.lower_bound <= result.makespan  # type: ignore[operator]
