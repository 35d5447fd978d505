"""The bundled exact suite: today's solver still proves the recorded optima."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis_opt.formats.native import load_instance
from themis_opt.result import Status
from themis_opt.solving import solve
from themis_opt.validator import validate

EXACT = Path(__file__).resolve().parent.parent / "instances" / "exact"
OPTIMA = json.loads((EXACT / "optima.json").read_text())


def test_every_exact_instance_has_an_optimum() -> None:
    names = {p.stem for p in EXACT.glob("*.json") if p.name != "optima.json"}
    assert names == set(OPTIMA)


@pytest.mark.parametrize("name", sorted(OPTIMA))
def test_optimum_is_found_again(name: str) -> None:
    instance = load_instance(EXACT / f"{name}.json")
    record = OPTIMA[name]
    result = solve(instance, "cpsat", workers=1, seed=0, time_limit=30)
    assert result.status is Status.OPTIMAL
    assert result.schedule is not None and validate(instance, result.schedule) == []
    # optimal up to the time quantum: one quantum per phase on a path, plus one
    quantum = (result.stats.quantum_ns if result.stats else None) or result.makespan / 1e5  # type: ignore[operator]
    tolerance = (record["num_phases"] + 1) * quantum
    assert result.makespan == pytest.approx(record["makespan_ns"], abs=tolerance)
    assert result.lower_bound <= result.makespan
