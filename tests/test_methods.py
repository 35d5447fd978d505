"""The registry of methods: one naming scheme (methods and their -fifo/-scf variants) for solve and bench."""

from __future__ import annotations

import pytest

from themis_opt.errors import InputError
from themis_opt.methods import METHODS, VARIANTS, method_names, resolve_method


def test_every_variant_bench_runs_is_a_name_solve_takes() -> None:
    assert set(VARIANTS) <= set(method_names())
    assert set(METHODS) <= set(method_names())
    assert "cpsat-fifo" not in method_names()  # cpsat sequences the dimensions itself


@pytest.mark.parametrize(
    ("name", "intra", "expected"),
    [
        ("themis", None, ("themis", None)),
        ("themis", "fifo", ("themis", "fifo")),
        ("themis-fifo", None, ("themis", "fifo")),
        ("themis-fifo", "fifo", ("themis", "fifo")),
        ("balanced-scf", None, ("balanced", "scf")),
        ("cpsat", None, ("cpsat", None)),
    ],
)
def test_a_variant_names_its_method_and_policy(name: str, intra: str | None, expected: tuple[str, str | None]) -> None:
    assert resolve_method(name, intra) == expected


@pytest.mark.parametrize(
    ("name", "intra", "message"),
    [
        ("magic", None, "method: must be one of baseline, themis"),
        ("cpsat-scf", None, "method: must be one of"),
        ("themis-lifo", None, "method: must be one of"),
        ("themis-fifo", "scf", "intra: is 'scf' but the method 'themis-fifo' says 'fifo'"),
    ],
)
def test_unknown_or_contradicting_names_are_refused(name: str, intra: str | None, message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve_method(name, intra)


def test_options_are_checked_once_on_construction_and_name_the_variant() -> None:
    import dataclasses

    from themis_opt.methods import SolveOptions

    assert SolveOptions.of("themis", "fifo").variant == "themis-fifo"
    assert SolveOptions.of("themis-fifo") == SolveOptions.of("themis", "fifo")
    options = SolveOptions.of("cpsat", time_limit=5, workers=2, quantum_ns=10.0)
    assert (options.method, options.variant, options.intra, options.quantum_ns) == ("cpsat", "cpsat", None, 10.0)
    with pytest.raises(InputError, match="time_limit: must be a number > 0"):
        dataclasses.replace(options, time_limit=0)  # replacing checks again


@pytest.mark.parametrize(
    ("method", "options", "message"),
    [
        ("cpsat", {"intra": "fifo"}, "intra: applies to one heuristic, not to cpsat"),
        ("themis", {"quantum_ns": 10.0}, "quantum_ns: applies to cpsat only, not to themis"),
        ("themis", {"intra": "lifo"}, "intra: must be fifo, scf, tail, got 'lifo'"),
        ("themis", {"workers": 0}, "workers: must be an integer from 1 to 1024"),
        ("themis", {"seed": -1}, "seed: must be an integer from 0"),
        ("themis", {"time_limit": float("nan")}, "time_limit: must be"),
        ("themis", {"log": "yes"}, "log: must be true or false"),
        ("nope", {}, "method: must be one of"),
    ],
)
def test_bad_options_are_one_line_naming_the_field(method: str, options: dict[str, object], message: str) -> None:
    from themis_opt.methods import SolveOptions

    with pytest.raises(InputError, match=message):
        SolveOptions.of(method, **options)  # type: ignore[arg-type]
