"""Lower bounds: hand values, ordering, stages, and validity against every schedule."""

from __future__ import annotations

import pytest

from themis_opt.bounds import compute_bounds, ideal_bound, integer_load_bound
from themis_opt.instance import Instance

from ..conftest import heuristic_schedules, make

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
