"""Schedules whose times a float cannot resolve: found, validated, never claimed optimal."""

from __future__ import annotations

import dataclasses

import pytest

from themis_opt.formats.native import load_instance
from themis_opt.resolution import at_risk, checked
from themis_opt.result import Status
from themis_opt.solving import solve
from themis_opt.validator import validate

from .conftest import DATA, four_dims, load

# every value inside the limits, but a makespan of ~1e21 ns (float spacing 131,072 ns) beside 30 us phases
COARSE = DATA / "extreme" / "float_coarse.json"  # not with the others: C and Python simulators round apart there


@pytest.mark.parametrize("method", ["baseline", "themis", "balanced", "cpsat"])
def test_a_schedule_floats_cannot_resolve_is_marked_invalid(method: str) -> None:
    instance = load_instance(COARSE)
    result = solve(instance, method, time_limit=5, workers=1)
    assert result.schedule is not None and validate(instance, result.schedule)  # the validator rejects it
    assert result.status is Status.INVALID and "a float cannot resolve" in result.note


def test_a_schedule_at_risk_without_time_to_validate_is_never_optimal() -> None:
    instance = load_instance(COARSE)
    result = solve(instance, "cpsat", time_limit=5, workers=1)
    claimed = checked(instance, dataclasses.replace(result, status=Status.OPTIMAL, note=""), seconds_left=0.0)
    assert claimed.status is Status.FEASIBLE and "not validated in the time left" in claimed.note


def test_ordinary_schedules_are_not_at_risk() -> None:
    for name in ("worked", "three_dim", "mixed"):
        instance = load(name)
        result = solve(instance, "themis")
        assert result.schedule is not None and at_risk(result.schedule) is None


def test_a_late_iteration_is_valid_and_not_at_risk() -> None:
    # issued at 2,000 s (floats 244 fs apart, well within a millionth of every phase): every method's
    # schedule valid, and the scan sees no span at risk (no validation on the way)
    instance = four_dims(size=64 * 2**20, chunks=16, issue_ns=2e12)
    for method in ("baseline", "themis", "balanced"):
        result = solve(instance, method, time_limit=5)
        assert result.schedule is not None and validate(instance, result.schedule) == []
        assert result.status is not Status.INVALID and at_risk(result.schedule) is None
