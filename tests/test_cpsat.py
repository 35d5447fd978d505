"""The CP-SAT model: the warm-start hint is a complete feasible solution."""

from __future__ import annotations

import math

import pytest
from ortools.sat.python import cp_model

from themis_opt.cpsat import CpsatModel, default_quantum, relabel
from themis_opt.instance import Instance
from themis_opt.policies import themis_orders
from themis_opt.simulator import simulate
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


def test_windows_improve_a_poor_incumbent_and_stay_valid() -> None:
    import time

    from themis_opt.budget import Deadline
    from themis_opt.cpsat import improve_by_windows

    instance = _four_collectives()
    incumbent = simulate(instance, themis_orders(instance), "scf")
    best, trajectory = improve_by_windows(
        instance, incumbent, deadline=Deadline.after(4.0), workers=1, seed=0, t0=time.perf_counter(), max_phases=100
    )
    assert validate(instance, best) == []
    spans = [m for _, m in trajectory]
    assert spans[0] == incumbent.makespan and spans == sorted(spans, reverse=True)
    assert best.makespan == spans[-1] < incumbent.makespan  # Themis leaves room here (re-solved windows find it)


def test_cpsat_searches_windows_when_the_model_is_too_big(monkeypatch: pytest.MonkeyPatch) -> None:
    import themis_opt.solve as solve_module
    from themis_opt.solve import solve

    monkeypatch.setattr(solve_module, "MAX_CPSAT_PHASES", 10)
    instance = _four_collectives()
    result = solve(instance, "cpsat", time_limit=4, workers=1)
    assert "large-neighbourhood search" in result.note
    assert result.schedule is not None and validate(instance, result.schedule) == []
    heuristics = [solve(instance, m).makespan for m in ("baseline", "themis", "balanced")]
    assert result.makespan <= min(heuristics)  # type: ignore[operator, type-var]
    assert result.lower_bound <= result.makespan  # type: ignore[operator]
