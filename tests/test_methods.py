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
