"""The load programs' CP-SAT layer: the same models and answers as ``cp_model``'s, without its imports."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from ortools.sat.python import cp_model

from themis_opt.budget import Deadline
from themis_opt.cpsat import solver as sat

from ..conftest import ROOT


def _build(model: Any, linear_expr: Any) -> tuple[Any, list[Any]]:
    """A small model with every call the load programs make, on either API."""
    x = [model.new_int_var(0, 6, f"x{i}") for i in range(3)]
    used = [model.new_bool_var(f"u{i}") for i in range(3)]
    for v, u in zip(x, used):
        model.add(v >= 1).only_enforce_if(u)
        model.add(v == 0).only_enforce_if(~u)
        model.add_hint(v, 2)
    model.add_hint(used[1], True)
    model.add(sum(x) == 6)
    model.add(x[0] != 2)
    model.add_bool_or([used[1], ~used[2]])
    makespan = model.new_int_var(0, 100, "makespan")
    model.add(makespan >= 3 + linear_expr.weighted_sum(x, [5, 3, 2]))
    model.add(makespan >= 4 * x[1] + 2 * x[2])
    model.add_hint(~used[0], False)
    model.minimize(makespan - sum(used))
    return makespan, x


def test_the_light_model_writes_cp_models_proto_and_solves_to_the_same_answer() -> None:
    ours, theirs = sat.Model(), cp_model.CpModel()
    mine, xs = _build(ours, sat.LinearExpr)
    reference, ys = _build(theirs, cp_model.LinearExpr)
    assert str(ours.model_proto) == str(theirs.proto)

    solver, other = sat.Solver(sat.SolverSettings()), cp_model.CpSolver()
    other.parameters.num_workers = 1
    other.parameters.random_seed = 0
    assert solver.run(ours, Deadline()) == sat.OPTIMAL
    assert other.solve(theirs) == cp_model.OPTIMAL
    assert solver.value(mine) == other.value(reference) and solver.best_objective_bound == other.best_objective_bound
    assert [solver.value(x) for x in xs] == [other.value(y) for y in ys]
    assert solver.status_name(sat.OPTIMAL) == "OPTIMAL"

    ours.clear_hints()
    theirs.clear_hints()
    assert str(ours.model_proto) == str(theirs.proto)


def test_the_load_programs_run_without_cp_models_python_layer() -> None:
    # cp_model imports pandas: half a second of every command that reports a load program's bound
    instance = ROOT / "instances" / "quick" / "mixed-topology-s2-001.json"
    code = (
        "import sys\n"
        "from themis_opt import load_instance\n"
        "from themis_opt.bounds import compute_bounds\n"
        f"bounds = compute_bounds(load_instance({str(instance)!r}))\n"
        "assert bounds.fill_drain is not None and bounds.ip is not None and bounds.lp is not None, bounds\n"
        "print(sorted(m for m in ('pandas', 'ortools.sat.python.cp_model') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
