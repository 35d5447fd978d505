"""The CP-SAT model: the warm-start hint is a complete feasible solution."""

from __future__ import annotations

import math

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
