"""SolveParams: validated on construction, loaded from TOML, every number with a reason, stages switched off."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from themis_opt.bounds.params import BoundsParams
from themis_opt.errors import InputError
from themis_opt.params import PipelineParams, SolveParams, Stage, changes, parameter_table
from themis_opt.search.params import SearchParams
from themis_opt.solving import solve
from themis_opt.validator import validate

from .conftest import load


def test_every_parameter_has_a_reason_and_the_defaults_are_valid() -> None:
    rows = parameter_table()
    assert len(rows) > 40
    for name, _, why in rows:
        assert why and len(why) < 110, name  # one line each
    assert changes(SolveParams()) == {}


def test_parameters_are_frozen() -> None:
    params = SolveParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.search = SearchParams()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: BoundsParams(share=1.5), "share: must be from 0 to 1, got 1.5"),
        (lambda: SearchParams(min_evaluations=2.5), "min_evaluations: must be an integer"),
        (lambda: SearchParams(evaluations=0), "evaluations: must be >= 1"),
        (lambda: Stage(0.0), "share: must be a number > 0"),
        (lambda: Stage(0.5, max_phases=2.5), "max_phases: must be an integer"),
        (lambda: Stage(0.5, enabled="no"), "enabled: must be true or false"),  # type: ignore[arg-type]
        (lambda: SearchParams(walk_policies="tail"), "walk_policies: must be a nonempty list of fifo, scf, tail"),
        (lambda: SearchParams(walk_policies=()), "walk_policies: must be a nonempty list"),
        (lambda: SearchParams(walk_policies=("tail", "lifo")), "walk_policies: .* got 'lifo' in it"),
    ],
)
def test_a_number_out_of_range_is_refused_on_construction(build: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        build()  # type: ignore[operator]


def test_a_toml_file_sets_nested_values(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[search]\nevaluations = 500\nwalk_policies = ["scf"]\n\n[pipeline.at_bound]\nenabled = false\ncap = 2.0\n'
    )
    params = SolveParams.from_file(path)
    assert params.search.evaluations == 500
    assert params.search.walk_policies == ("scf",)  # a TOML list, kept as a tuple
    assert params.pipeline.at_bound == Stage(0.75, cap=2.0, max_phases=128, max_literals=4096, enabled=False)
    assert changes(params) == {
        "search.evaluations": 500,
        "search.walk_policies": ("scf",),
        "pipeline.at_bound.cap": 2.0,
        "pipeline.at_bound.enabled": False,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[search]\nevaluation = 5\n", "search: evaluation: unknown parameter"),
        ("[serch]\n", "serch: unknown parameter"),
        ("[pipeline.at_bound]\nshare = 2\n", "pipeline: at_bound: share: must be at most 1"),
        ("search = 3\n", "search: must be a table"),
        ("[search\n", "not valid TOML"),
    ],
)
def test_a_bad_file_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as error:
        SolveParams.from_file(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_switched_off_stages_do_not_run_and_the_answer_is_still_valid(caplog: pytest.LogCaptureFixture) -> None:
    instance = load("three_dim")
    plain = SolveParams(pipeline=PipelineParams(balanced_evaluations=0))  # balanced's own search finds the optimum
    with caplog.at_level("INFO", logger="themis_opt.pipeline"):
        solve(instance, "cpsat", time_limit=10, workers=1, params=plain)
    assert "stage assignment search" in caplog.text  # the warm start is not optimal here
    caplog.clear()
    off = Stage(0.5, enabled=False)
    stages = {"assignment": off, "at_bound": off, "sequence": off, "counts_fixed": off, "refutation": off}
    params = SolveParams(pipeline=PipelineParams(balanced_evaluations=0, **stages))
    with caplog.at_level("INFO", logger="themis_opt.pipeline"):
        result = solve(instance, "cpsat", time_limit=10, workers=1, params=params)
    assert "stage warm start" in caplog.text and "stage full model" in caplog.text
    assert "stage assignment search" not in caplog.text and "stage sequence search" not in caplog.text
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.lower_bound <= result.makespan  # type: ignore[operator]


def test_a_deterministic_stop_gives_the_same_schedule_every_time() -> None:
    instance = load("three_dim")
    params = SolveParams(search=SearchParams(evaluations=200))
    runs = [solve(instance, "cpsat", time_limit=30, workers=1, params=params).schedule for _ in range(2)]
    assert runs[0] is not None and runs[0] == runs[1]


def test_solve_refuses_what_is_not_parameters() -> None:
    with pytest.raises(InputError, match="params: must be a SolveParams"):
        solve(load("tiny_ar"), "themis", params={"search": {}})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "problem"),
    [("[search]\nevaluations = " + "9" * 5000 + "\n", "digits"), ("x = " + "[" * 5000 + "]" * 5000 + "\n", "deeply")],
)
def test_a_toml_file_python_cannot_read_is_one_error(text: str, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=f"not valid TOML .*{problem}"):
        SolveParams.from_file(path)
