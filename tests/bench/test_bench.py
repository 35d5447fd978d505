"""Benchmark records and the summary arithmetic on a hand-made result set."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from themis_opt.bench import Outcome, Record, append_record, read_records, run_instance, summarize
from themis_opt.errors import InputError

from ..conftest import DATA


def _record(name: str, bound: float, spans: dict[str, float], optimal: tuple[str, ...] = ()) -> Record:
    outcomes = tuple(
        Outcome(m, "optimal" if m in optimal else "feasible", s, 0.1, 100.0 / s, True) for m, s in spans.items()
    )
    return Record(f"{name}.json", name, "4x4", 16, 8, bound, 100.0, outcomes)


def test_summary_arithmetic() -> None:
    records = [
        _record("a", 100.0, {"baseline": 200.0, "themis-scf": 100.0, "cpsat": 100.0}, optimal=("cpsat",)),
        _record("b", 100.0, {"baseline": 100.0, "themis-scf": 125.0, "cpsat": 100.0}),
    ]
    summary = summarize(records, ["baseline", "themis-scf", "cpsat"])
    by = {s.method: s for s in summary.methods}
    # speedups of themis: 2.0 and 0.8 -> geometric mean sqrt(1.6)
    assert by["themis-scf"].geomean_speedup == pytest.approx(math.sqrt(1.6))
    assert by["baseline"].geomean_speedup == pytest.approx(1.0)
    # gaps of themis: 0 and 0.25
    assert by["themis-scf"].mean_gap == pytest.approx(0.125) and by["themis-scf"].max_gap == pytest.approx(0.25)
    assert by["baseline"].mean_gap == pytest.approx(0.5) and by["baseline"].max_gap == pytest.approx(1.0)
    assert by["themis-scf"].mean_utilization == pytest.approx((1.0 + 0.8) / 2)
    assert summary.proven_optimal == 1 and by["cpsat"].optimal == 1
    assert summary.themis_loses == {"themis-scf": 1}


def test_run_instance_validates_and_bounds() -> None:
    record = run_instance(str(DATA / "tiny_ar.json"), ["baseline", "themis-fifo", "balanced", "cpsat"], 5.0, 1, 0)
    assert all(o.valid for o in record.outcomes)
    spans = [o.makespan_ns for o in record.outcomes]
    assert all(s is not None and s >= record.lower_bound_ns for s in spans)
    assert record.outcome("cpsat").makespan_ns == min(spans)  # type: ignore[union-attr]


def test_records_round_trip_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rec = _record("a", 1.0, {"baseline": 2.0})
    append_record(path, rec)
    append_record(path, rec)
    assert read_records(path) == [rec, rec]
    path.write_text("not json\n" + rec.to_json() + "\n")
    with pytest.raises(InputError, match="line 1"):
        read_records(path)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"time_limit_s": "1"}, "time_limit_s"),
        ({"outcomes": [{**_record("a", 1.0, {"baseline": 2.0}).outcomes[0].__dict__, "makespan_ns": "fast"}]},
         "outcomes[0].makespan_ns"),
        ({"outcomes": [{**_record("a", 1.0, {"baseline": 2.0}).outcomes[0].__dict__, "method": "magic"}]},
         "outcomes[0].method"),
        ({"outcomes": []}, "outcomes"),
        ({"seed": True}, "seed"),
    ],
)  # fmt: skip
def test_a_row_of_the_wrong_types_is_refused_with_its_field(change: dict[str, object], where: str) -> None:
    import json

    data = {**json.loads(_record("a", 1.0, {"baseline": 2.0}).to_json()), **change}
    with pytest.raises(InputError) as error:
        Record.from_dict(data)
    assert error.value.path == where


def test_a_row_appended_to_a_file_whose_last_line_has_no_newline_starts_a_line(tmp_path: Path) -> None:
    from themis_opt.bench import prepare_rows_file

    path = tmp_path / "r.jsonl"
    rec = _record("a", 1.0, {"baseline": 2.0})
    path.write_text(rec.to_json())  # no newline: written by hand, or cut by an editor
    assert prepare_rows_file(path, rec.settings()) == [rec]
    append_record(path, rec)
    assert read_records(path) == [rec, rec]


def test_two_runs_on_one_rows_file_at_once_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from themis_opt.bench import rows_lock
    from themis_opt.cli import main

    rows = tmp_path / "rows.jsonl"
    argv = ["bench", str(DATA / "tiny_rs.json"), "--methods", "baseline", "--workers", "1", "--out", str(rows)]
    with rows_lock(rows):  # another run holds it
        assert main(argv) == 2
    assert "rows.jsonl: is being written by another bench run" in capsys.readouterr().err
    assert not rows.exists()  # the holder added nothing: as if neither ran
    assert main(argv) == 0 and len(rows.read_text().splitlines()) == 1
