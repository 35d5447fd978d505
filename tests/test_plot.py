"""Figures: what is drawn (one rectangle per phase, labels), and the same bytes every time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis_opt.cli import main
from themis_opt.formats.native import load_instance, save_result
from themis_opt.solving import solve

from .conftest import DATA

pytest.importorskip("matplotlib", reason='the plot extra is not installed (pip install -e ".[plot]")')


def test_gantt_holds_one_rectangle_per_phase_and_is_deterministic(tmp_path: Path) -> None:
    instance = load_instance(DATA / "graph_2l2p.json")
    result = solve(instance, "themis")
    assert result.schedule is not None
    save_result(result, tmp_path / "r.json")
    svg = tmp_path / "g.svg"
    assert main(["plot", str(tmp_path / "r.json"), "--out", str(svg), "--instance", str(DATA / "graph_2l2p.json")]) == 0
    text = svg.read_text()
    phases = sum(len(c.phases) for c in result.schedule.chunks)
    assert text.count('id="phase-') == phases
    assert text.count('id="compute-') == len(instance.computes)
    for label in ("time (µs)", "dimension", "compute", "makespan", "lower bound", "reduce-scatter", "all-gather"):
        assert label in text, label
    again = tmp_path / "again.svg"
    assert (
        main(["plot", str(tmp_path / "r.json"), "--out", str(again), "--instance", str(DATA / "graph_2l2p.json")]) == 0
    )
    assert again.read_bytes() == svg.read_bytes()
    png = tmp_path / "g.png"
    assert main(["plot", str(tmp_path / "r.json"), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_bench_draws_the_three_figures(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    paths = [str(DATA / f"{n}.json") for n in ("worked", "tiny_ar", "three_dim")]
    assert (
        main(["bench", *paths, "--methods", "baseline,themis-scf,balanced", "--workers", "1", "--out", str(rows)]) == 0
    )
    out = tmp_path / "figures"
    assert main(["plot-bench", str(rows), "--out", str(out)]) == 0
    speedup, gaps, util = (out / f"{n}.svg" for n in ("speedup", "gaps", "utilization"))
    # bars: one per instance for each method other than the baseline
    assert speedup.read_text().count('id="speedup-themis-scf"') == 3
    assert "speedup over the baseline" in speedup.read_text() and "worked" in speedup.read_text()
    assert all(f'id="ecdf-{m}"' in gaps.read_text() for m in ("baseline", "themis-scf", "balanced"))
    assert "gap to the best lower bound (%)" in gaps.read_text()
    assert "bandwidth utilisation: ideal bound / makespan (%)" in util.read_text()
    first = speedup.read_bytes()
    assert main(["plot-bench", str(rows), "--out", str(out)]) == 0
    assert speedup.read_bytes() == first


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plot", "missing.json", "--out", "x.svg"], "missing.json: no such file"),
        (["plot", str(DATA / "worked.json"), "--out", "x.gif"], "must end in .svg, .png, .pdf"),
        (["plot-bench", "missing.jsonl", "--out", "figs"], "holds no rows"),
    ],
)
def test_plot_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_missing_matplotlib_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    save_result(solve(load_instance(DATA / "worked.json"), "baseline"), tmp_path / "r.json")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["plot", str(tmp_path / "r.json"), "--out", str(tmp_path / "g.svg")]) == 2
    assert 'pip install -e ".[plot]"' in capsys.readouterr().err
    assert json.loads((tmp_path / "r.json").read_text())["method"] == "baseline"


def test_bench_figures_say_when_and_how_they_were_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    assert main(["bench", str(DATA / "worked.json"), "--method", "baseline,themis-scf", "--out", str(rows)]) == 0
    assert main(["plot-bench", str(rows), "--out", str(tmp_path / "f")]) == 0
    import datetime

    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    for name in ("speedup", "gaps", "utilization"):
        text = (tmp_path / "f" / f"{name}.svg").read_text()
        assert f"measured {today}" in text and "1 instances, 5 s a method, seed 0" in text


def test_bench_figures_of_the_baseline_alone_say_so_without_a_warning(tmp_path: Path) -> None:
    import warnings

    rows = tmp_path / "rows.jsonl"
    assert main(["bench", str(DATA / "worked.json"), "--method", "baseline", "--out", str(rows)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "no artists with labels" would fail here
        assert main(["plot-bench", str(rows), "--out", str(tmp_path / "f")]) == 0
    assert "no method besides the baseline" in (tmp_path / "f" / "speedup.svg").read_text()
