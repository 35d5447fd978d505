"""Every subcommand of themis-opt, good and bad input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from themis_opt.budget import available_workers
from themis_opt.cli import main
from themis_opt.formats.native import load_result

from ..conftest import DATA, ROOT, imported_by

WORKED = str(DATA / "worked.json")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_solve_prints_summary_and_writes_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    code, out, _ = run(["solve", WORKED, "--method", "themis", "--output", str(out_file)], capsys)
    assert code == 0
    assert "themis (scf)" in out and "1.1473 ms" in out and "busy share" in out
    result = load_result(out_file)
    assert result.makespan == pytest.approx(1147316.875)
    code, out, _ = run(["validate", WORKED, str(out_file)], capsys)
    assert code == 0 and "valid" in out


def test_solve_all_methods_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "all.json"
    code, out, _ = run(["solve", WORKED, "--method", "all", "--workers", "1", "--output", str(out_file)], capsys)
    assert code == 0
    for label in ("baseline", "themis-scf", "balanced", "cpsat"):
        assert label in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "all.balanced.json",
        "all.baseline.json",
        "all.cpsat.json",
        "all.themis-fifo.json",
        "all.themis-scf.json",
    ]
    for path in tmp_path.iterdir():
        assert run(["validate", WORKED, str(path)], capsys)[0] == 0


def test_validate_reports_violations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--method", "baseline", "--output", str(out_file)], capsys)
    data = json.loads(out_file.read_text())
    data["schedule"]["chunks"][1]["phases"][0]["start_ns"] = 0.0
    data["schedule"]["chunks"][1]["phases"][0]["end_ns"] = 118717.5
    out_file.write_text(json.dumps(data))
    code, out, _ = run(["validate", WORKED, str(out_file)], capsys)
    assert code == 1
    assert "overlaps" in out and "makespan_ns" not in out
    data["makespan_ns"] = 1.0
    out_file.write_text(json.dumps(data))
    code, out, _ = run(["validate", WORKED, str(out_file)], capsys)
    assert code == 1 and "makespan_ns says 1.0" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", "missing.json"], "missing.json: no such file"),
        (["solve", WORKED, "--method", "nope"], "invalid choice"),
        (["solve", WORKED, "--time-limit", "-1"], "--time-limit: must be a number > 0 and <= 1e+06"),
        (["solve", WORKED, "--workers", "0"], "--workers: must be >= 1"),
        (["solve", WORKED, "--seed", "x"], "--seed: must be an integer"),
        (["solve", WORKED, "--quantum-ns", "0"], "--quantum-ns: must be a number > 0"),
        (["solve", WORKED, "--method", "themis-fifo", "--intra", "scf"], "--intra: is 'scf' but the method"),
        (["validate", WORKED, "missing.json"], "missing.json: no such file"),
        (["validate", WORKED, WORKED], "format: must be 'themis-opt-result'"),
        (["generate", "--family", "nope", "--count", "1", "--seed", "0", "--out", "x"], "invalid choice"),
        (["generate", "--family", "homogeneous", "--count", "0", "--seed", "0", "--out", "x"], "--count: must be >= 1"),
        (["bench", "--suite", "huge"], "invalid choice"),
        (["bench", "missing/path.json"], "missing/path.json: no such file or folder"),
        (["bench", WORKED, "--jobs", "0"], "--jobs: must be >= 1"),
        (["bench", WORKED, "--methods", "baseline,magic"], "unknown method 'magic'"),
        (["bench"], "give instance paths or --suite"),
        (["bench", WORKED, "--resume"], "--resume: needs --out"),
        (["show", "missing.json"], "missing.json: no such file"),
        (["solve", WORKED, "--output", str(DATA)], "is a folder, not a file"),
        (["bench", WORKED, "--out", str(DATA / "worked.json" / "x.jsonl")], "cannot be written"),
        (["bench", WORKED, "--csv", str(DATA)], "is a folder, not a file"),
        ([], "the following arguments are required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_instance_file_names_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(Path(WORKED).read_text())
    data["network"]["dimensions"][1]["size"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, _, err = run(["solve", str(bad)], capsys)
    assert code == 2
    assert err == f"themis-opt: error: {bad}: network.dimensions[1].size: must be >= 1, got 0\n"


def test_generate_then_solve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["generate", "--family", "small-exact", "--count", "3", "--seed", "7", "--out", str(tmp_path)], capsys
    )
    assert code == 0 and "wrote 3" in out
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 3
    assert run(["solve", str(files[0]), "--method", "balanced"], capsys)[0] == 0


def test_show_draws_a_gantt_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--method", "themis", "--intra", "fifo", "--output", str(out_file)], capsys)
    code, out, _ = run(["show", str(out_file), "--width", "40"], capsys)
    assert code == 0
    assert "d0" in out and "d1" in out and "% busy" in out and "(0,1)" in out and "(1,0)" in out
    assert "·" in out  # dimension 0 sits idle at some point under themis-fifo


def test_bench_runs_writes_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file, csv_file = tmp_path / "bench.jsonl", tmp_path / "bench.csv"
    paths = [str(DATA / "worked.json"), str(DATA / "tiny_rs.json")]
    argv = ["bench", *paths, "--methods", "baseline,themis-scf,balanced", "--workers", "1", "--out", str(out_file)]
    code, out, _ = run([*argv, "--csv", str(csv_file)], capsys)
    assert code == 0
    assert "worked" in out and "tiny_rs" in out and "summary over 2 instances" in out
    lines = out_file.read_text().splitlines()
    assert len(lines) == 2
    assert len(csv_file.read_text().splitlines()) == 3
    # an interrupted run: keep the first record plus half a line, then resume
    out_file.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    code, out, _ = run([*argv, "--resume"], capsys)
    assert code == 0
    again = out_file.read_text().splitlines()
    assert again[0] == lines[0] and len(again) == 2
    assert json.loads(again[1])["instance"] == json.loads(lines[1])["instance"]


def test_bench_parallel_jobs_warn_when_oversubscribed(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(DATA / "tiny_rs.json"), str(DATA / "tiny_ag.json")]
    argv = ["bench", *paths, "--methods", "baseline,themis-scf", "--jobs", "2", "--workers", str(available_workers())]
    code, out, err = run(argv, capsys)
    assert code == 0
    assert "exceed the" in err and "cores available" in err
    assert "tiny_rs" in out and "tiny_ag" in out


def test_solve_log_streams_the_cpsat_log_to_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # an instance whose heuristics, assignment and sequence searches stay above the bound, so CP-SAT runs
    # (the refutation stage, which would prove it first, off)
    exact = str(ROOT / "instances" / "exact" / "small-exact-s1-008.json")
    params = tmp_path / "params.toml"
    params.write_text("[pipeline.refutation]\nshare = 0.3\nenabled = false\n")
    argv = [
        "solve",
        exact,
        "--method",
        "cpsat",
        "--workers",
        "1",
        "--time-limit",
        "10",
        "--log",
        "--params",
        str(params),
    ]
    code, out, err = run(argv, capsys)
    assert code == 0
    assert "Starting search" in err and "Starting search" not in out
    assert "cpsat" in out


BENCH = ["--methods", "baseline,themis-scf", "--workers", "1"]


def test_bench_out_appends_and_never_erases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "new" / "folder" / "rows.jsonl"  # missing folders are created
    assert run(["bench", WORKED, *BENCH, "--out", str(out_file)], capsys)[0] == 0
    first = out_file.read_text()
    assert run(["bench", str(DATA / "tiny_rs.json"), *BENCH, "--out", str(out_file), "--resume"], capsys)[0] == 0
    text = out_file.read_text()
    assert text.startswith(first) and len(text.splitlines()) == 2


def test_bench_again_with_the_same_out_is_refused_not_duplicated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "rows.jsonl"
    assert run(["bench", WORKED, *BENCH, "--out", str(out_file)], capsys)[0] == 0
    first = out_file.read_text()
    code, _, err = run(["bench", WORKED, *BENCH, "--out", str(out_file)], capsys)
    assert code == 2 and "--resume" in err and err.count("\n") == 1
    assert out_file.read_text() == first
    assert run(["bench", WORKED, *BENCH, "--out", str(out_file), "--resume"], capsys)[0] == 0
    assert out_file.read_text() == first  # resumed: the instance is in it already, nothing added


def test_bench_refuses_a_file_that_is_not_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    precious = tmp_path / "notes.jsonl"
    precious.write_text('{"my": "notes"}')  # one line, no newline: not a cut-short record either
    code, _, err = run(["bench", WORKED, *BENCH, "--out", str(precious)], capsys)
    assert code == 2 and "not a rows file" in err and err.count("\n") == 1
    assert precious.read_text() == '{"my": "notes"}'


def test_bench_resumes_by_content_and_refuses_to_mix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "rows.jsonl"
    assert run(["bench", WORKED, *BENCH, "--out", str(out_file)], capsys)[0] == 0
    moved = tmp_path / "elsewhere.json"
    moved.write_text(Path(WORKED).read_text())
    code, out, err = run(["bench", str(moved), *BENCH, "--out", str(out_file), "--resume"], capsys)
    assert code == 0 and len(out_file.read_text().splitlines()) == 1  # same content: nothing rerun
    assert "worked" in out
    other = ["bench", WORKED, "--methods", "baseline", "--workers", "1", "--out", str(out_file)]
    code, _, err = run([*other, "--resume"], capsys)
    assert code == 2 and "other settings" in err and "--allow-mixed" in err
    assert run([*other, "--resume", "--allow-mixed"], capsys)[0] == 0
    assert len(out_file.read_text().splitlines()) == 2


def test_bench_table_fits_80_columns_with_whole_names(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(DATA / f"{name}.json") for name in ("worked", "three_dim", "tiny_rs")]
    code, out, _ = run(
        ["bench", *paths, "--methods", "baseline,themis-fifo,themis-scf,balanced", "--workers", "1"], capsys
    )
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80  # capsys is not a terminal: rich uses 80 columns
    for name in ("worked", "three_dim", "tiny_rs"):
        assert any(f" {name}: " in line for line in out.splitlines()), name


def test_solve_all_prints_bounds_and_busy_shares(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["solve", WORKED, "--method", "all", "--time-limit", "10", "--workers", "1"], capsys)
    assert code == 0
    assert "lower bounds" in out and "fill_drain" in out and "busy share per dimension" in out
    assert "themis-scf" in out and "cpsat" in out and max(len(line) for line in out.splitlines()) <= 80


def test_the_time_limit_counts_from_when_the_command_started(capsys: pytest.CaptureFixture[str]) -> None:
    # the console script passes the process's start: here the whole limit has gone before main runs
    argv = ["solve", WORKED, "--method", "all", "--time-limit", "5"]

    def lp_row(out: str) -> str:
        return next(line for line in out.splitlines() if line.startswith("│ lp "))

    assert main(argv) == 0
    assert "not computed" not in lp_row(capsys.readouterr().out)
    assert main(argv, started=time.perf_counter() - 5) == 0
    assert "not computed" in lp_row(capsys.readouterr().out)


def test_show_fits_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--output", str(out_file)], capsys)
    code, out, _ = run(["show", str(out_file)], capsys)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80


def test_huge_numbers_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(Path(WORKED).read_text())
    data["collectives"][0]["size_bytes"] = 10**17
    bad = tmp_path / "huge.json"
    bad.write_text(json.dumps(data))
    code, _, err = run(["solve", str(bad), "--method", "all"], capsys)
    assert code == 2 and "collectives[0].size_bytes: must be <=" in err and err.count("\n") == 1


def test_suites_ship_inside_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from themis_opt.suites import SUITES, suite_folder

    monkeypatch.chdir(tmp_path)  # outside the checkout
    for name in SUITES:
        folder = suite_folder(name)
        assert folder.is_dir() and "themis_opt" in folder.parts and any(folder.glob("*.json"))


def validate_file(instance_file: str, result: object) -> list[str]:
    from themis_opt.formats.native import load_instance
    from themis_opt.validator import validate

    return validate(load_instance(instance_file), result.schedule)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("sent", "code", "said", "method", "limit", "network"),
    # limits that leave the searches running long after the signal (cpsat gives its bounds 0.5 s;
    # all runs four methods before cpsat, whose heuristics are quick on the second network): a
    # command that ignored it would run at least 7 s on
    [
        ("SIGINT", 130, "interrupted", "cpsat", "12", "paper-4d-r2-fc8-r8-sw8"),
        ("SIGTERM", 143, "terminated", "all", "20", "paper-4d-r4-fc4-r4-sw16"),
    ],
)
def test_ctrl_c_stops_a_search_at_once_with_one_message(
    tmp_path: Path, sent: str, code: int, said: str, method: str, limit: str, network: str
) -> None:
    import signal
    import subprocess
    import sys
    import time

    from themis_opt.cli.solving import VARIANTS

    hard = str(ROOT / "instances" / "paper" / f"{network}.json")
    params = tmp_path / "params.toml"
    params.write_text("[bounds]\nseconds = 0.5\n")
    kept_in = tmp_path / "out"
    kept_in.mkdir()
    out = kept_in / "r.json"
    # the signal comes once cpsat's searches have begun (its log says so), whatever the machine's pace
    argv = [sys.executable, "-m", "themis_opt.cli", "solve", hard, "--method", method, "--time-limit", limit]
    process = subprocess.Popen(
        [*argv, "--params", str(params), "--out", str(out), "--log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal would start it: a test runner's worker may ignore SIGINT, and a child inherits that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    began = next((line for line in process.stderr if line.startswith("stage assignment search")), None)
    assert began is not None, "the search never began"
    time.sleep(0.3)
    at = time.perf_counter()
    process.send_signal(getattr(signal, sent))
    _, err = process.communicate(timeout=60)
    assert time.perf_counter() - at < 5.0
    assert process.returncode == code and err.endswith(f"\nthemis-opt: {said}\n") and "Traceback" not in err
    if method == "cpsat":
        assert [p.name for p in kept_in.iterdir()] == ["r.json"]  # the best so far, whole; no temporary file
        kept = load_result(out)
        assert kept.schedule is not None and validate_file(hard, kept) == [] and "interrupted" in kept.note
        return
    # every method that finished is kept, and the stopped one's best if it had one, in their order
    names = sorted(p.name for p in kept_in.iterdir())
    ran = [v for v in VARIANTS if f"r.{v}.json" in names]
    assert names == sorted(f"r.{v}.json" for v in ran) and ran == list(VARIANTS[: len(ran)]) and len(ran) >= 3
    for name in names:
        kept = load_result(kept_in / name)
        assert kept.schedule is not None and validate_file(hard, kept) == []


def _parsers() -> dict[str, object]:
    import argparse

    from themis_opt.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_top_level_help_lists_every_command_in_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "``" not in out
    for command in _parsers():
        assert f"\n    {command}" in out


def test_every_option_states_its_default() -> None:
    # flags are off unless given; every other optional argument says what happens without it
    for name, parser in _parsers().items():
        for action in parser._actions:  # type: ignore[attr-defined]
            if not action.option_strings or action.required or action.nargs == 0 or action.dest == "help":
                continue
            if action.container.title == "mutually exclusive" or action.dest in ("all_reduce", "workload"):
                continue
            assert "default" in (action.help or ""), f"{name} {action.option_strings[0]}"


def test_solve_help_shows_out_and_the_default_method(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["solve", "--help"], capsys)
    assert "--out PATH, --output PATH" in out and "(default themis)" in out


def test_method_names_are_the_same_in_solve_and_bench(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    assert run(["solve", WORKED, "--method", "themis-fifo", "--out", str(out_file)], capsys)[0] == 0
    result = load_result(out_file)
    assert (result.method, result.intra) == ("themis", "fifo")
    code, out, _ = run(["bench", WORKED, "--method", "themis-fifo,baseline-scf", "--time-limit", "2"], capsys)
    assert code == 0 and "themis-fifo" in out and "baseline-scf" in out
    code, _, err = run(["solve", WORKED, "--method", "themis-fifo", "--intra", "scf"], capsys)
    assert code == 2 and "intra: is 'scf' but the method 'themis-fifo' says 'fifo'" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", WORKED, "--out", "/proc/x/r.json"],
        ["solve", WORKED, "--out", "/proc/x"],
        ["bench", WORKED, "--out", "/proc/x"],
        ["bench", WORKED, "--csv", "/proc/x"],
        ["generate", "--family", "homogeneous", "--count", "1", "--seed", "0", "--out", "/proc/x"],
        ["export-astra", WORKED, "--out", "/proc/x"],
    ],
)
def test_an_output_that_cannot_be_written_fails_before_any_work(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    t0 = time.perf_counter()
    code, out, err = run([*argv, "--time-limit", "30"] if argv[0] in ("solve", "bench") else argv, capsys)
    assert code == 2 and err.startswith("themis-opt: error: /proc/x") and err.count("\n") == 1, err
    assert "cannot be written" in err and out == "" and time.perf_counter() - t0 < 5


def test_a_missing_output_folder_is_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "new" / "deeper" / "r.json"
    assert run(["solve", WORKED, "--out", str(out_file)], capsys)[0] == 0
    assert load_result(out_file).method == "themis"


def test_a_failed_check_leaves_no_folder_behind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(["solve", WORKED, "--out", str(blocker / "r.json")], capsys)
    assert code == 2 and "is not a folder" in err
    (tmp_path / "ro").mkdir()
    code, _, _ = run(["solve", WORKED, "--method", "magic", "--out", str(tmp_path / "ro" / "a" / "r.json")], capsys)
    assert code == 2 and not (tmp_path / "ro" / "a").exists()


@pytest.mark.parametrize("width", [40, 70, 120])
def test_show_width_is_honoured(width: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--out", str(out_file)], capsys)
    code, out, _ = run(["show", str(out_file), "--width", str(width)], capsys)
    lines = out.splitlines()
    assert code == 0 and max(len(line) for line in lines) <= width
    assert max(len(line) for line in lines if "busy" in line) == width  # the chart takes the whole width


def test_params_file_reaches_solve_and_an_unknown_key_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[search]\nevaluatons = 10\n")
    code, _, err = run(["solve", WORKED, "--method", "cpsat", "--params", str(bad)], capsys)
    assert code == 2 and f"{bad}: search: evaluatons: unknown parameter" in err and err.count("\n") == 1
    code, _, err = run(["bench", WORKED, "--params", str(bad)], capsys)
    assert code == 2 and "evaluatons" in err
    good = tmp_path / "good.toml"
    good.write_text("[search]\nevaluations = 50\n")
    rows = tmp_path / "rows.jsonl"
    argv = ["bench", WORKED, "--method", "cpsat", "--params", str(good), "--time-limit", "5", "--out", str(rows)]
    assert run(argv, capsys)[0] == 0
    assert json.loads(rows.read_text())["params"] == {"search.evaluations": 50}
    code, _, err = run(argv[:4] + argv[6:], capsys)  # the same rows file without the parameters: other settings
    assert code == 2 and "parameters" in err and "other settings" in err


def test_counts_are_singular_or_plural(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["bench", WORKED, "--method", "baseline", "--jobs", "1", "--workers", "1"], capsys)
    assert code == 0 and "1 instance, 1 job x 1 CP-SAT worker" in out


def test_bench_csv_in_a_missing_folder_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_file = tmp_path / "new" / "rows.csv"
    assert run(["bench", WORKED, "--method", "baseline", "--csv", str(csv_file)], capsys)[0] == 0
    assert csv_file.read_text().startswith("instance,")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["solve", "{instance}", "--out", "{instance}"], "--out"),
        (["bench", "{instance}", "--method", "baseline", "--csv", "{instance}"], "--csv"),
        (["bench", "{instance}", "--method", "baseline", "--out", "{tmp}/r.jsonl", "--csv", "{tmp}/r.jsonl"], "--csv"),
        (["bench", "{instance}", "--method", "baseline", "--out", ""], "argument --out"),
        (["bench", "{instance}", "--method", "baseline", "--allow-mixed"], "--allow-mixed"),
        (["bench", "{instance}", "--method", "baseline", "--connect-timeout", "5"], "--connect-timeout"),
        (["bench", "{instance}", "--method", "baseline,,themis"], "--method"),
        (["bench", "{instance}", "--method", "all,baseline"], "--method"),
        (["solve", "{instance}", "--time-limit", "-1"], "argument --time-limit"),
    ],
)
def test_bad_outputs_and_options_fail_at_once_and_lose_nothing(
    argv: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instance = tmp_path / "i.json"
    instance.write_bytes((DATA / "tiny_ar.json").read_bytes())
    code, _, err = run([a.format(instance=instance, tmp=tmp_path) for a in argv], capsys)
    assert code == 2 and err.startswith(f"themis-opt: error: {option}: ") and err.count("\n") == 1
    assert f"{option}: {option}" not in err  # the option is named once
    assert instance.read_bytes() == (DATA / "tiny_ar.json").read_bytes()
    assert not (tmp_path / "r.jsonl").exists()


def test_validate_checks_what_a_result_claims_of_its_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--method", "baseline", "--output", str(out_file)], capsys)
    data = json.loads(out_file.read_text())
    assert run(["validate", WORKED, str(out_file)], capsys)[0] == 0
    claims = {**data, "status": "optimal", "bounds_ns": {"ideal": data["makespan_ns"] / 2}}
    out_file.write_text(json.dumps(claims))
    code, out, _ = run(["validate", WORKED, str(out_file)], capsys)
    assert code == 1 and "status says optimal" in out
    claims = {**data, "bounds_ns": {"ideal": data["makespan_ns"] * 2}}
    out_file.write_text(json.dumps(claims))
    code, out, _ = run(["validate", WORKED, str(out_file)], capsys)
    assert code == 1 and "above the schedule's makespan" in out


def test_a_result_whose_phase_ends_before_it_starts_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--method", "baseline", "--output", str(out_file)], capsys)
    data = json.loads(out_file.read_text())
    phase = data["schedule"]["chunks"][0]["phases"][0]
    phase["start_ns"], phase["end_ns"] = phase["end_ns"], phase["start_ns"]
    out_file.write_text(json.dumps(data))
    code, _, err = run(["show", str(out_file)], capsys)
    assert code == 2 and "schedule.chunks[0].phases[0].end_ns: is before start_ns" in err


def test_plot_refuses_another_instance_s_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    run(["solve", WORKED, "--method", "baseline", "--output", str(out_file)], capsys)
    argv = ["plot", str(out_file), "--instance", str(DATA / "mixed.json"), "--out", str(tmp_path / "g.svg")]
    code, _, err = run(argv, capsys)
    assert code == 2 and err.startswith("themis-opt: error: --instance: ") and not (tmp_path / "g.svg").exists()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from themis_opt import __version__

    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"themis-opt {__version__}"


def test_show_writes_a_trace_perfetto_opens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_file, trace = tmp_path / "r.json", tmp_path / "t.json"
    assert run(["solve", WORKED, "--method", "baseline", "--out", str(result_file)], capsys)[0] == 0
    assert run(["show", str(result_file), "--trace", str(trace), "--instance", WORKED], capsys)[0] == 0
    events = json.loads(trace.read_text())["traceEvents"]
    schedule = load_result(result_file).schedule
    assert schedule is not None
    assert sum(e["ph"] == "X" for e in events) == sum(len(c.phases) for c in schedule.chunks)
    code, _, err = run(["show", str(result_file), "--trace", str(result_file)], capsys)
    assert code == 2 and "input file" in err  # never over the result it reads


def test_labels_are_the_methods_as_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    for method, label in (("baseline", "baseline"), ("balanced-fifo", "balanced-fifo"), ("themis-fifo", "themis-fifo")):
        code, text, _ = run(["solve", WORKED, "--method", method, "--time-limit", "2", "--out", str(out)], capsys)
        assert code == 0 and load_result(out).label == label
        assert f"method                 {label}" in text
    code, text, _ = run(["solve", WORKED, "--method", "all", "--time-limit", "5", "--out", str(out)], capsys)
    written = sorted(p.name for p in tmp_path.glob("r.*.json"))
    assert code == 0 and written == sorted(
        f"r.{v}.json" for v in ("baseline", "themis-fifo", "themis-scf", "balanced", "cpsat")
    )
    for name in written:
        assert load_result(tmp_path / name).label == name[2:-5]


def test_generate_has_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["generate", "--family", "homogeneous", "--count", "2", "--out", str(tmp_path / "g")], capsys)[0] == 0
    first = sorted(p.read_text() for p in (tmp_path / "g").glob("*.json"))
    assert (
        run(
            ["generate", "--family", "homogeneous", "--count", "2", "--seed", "0", "--out", str(tmp_path / "h")], capsys
        )[0]
        == 0
    )
    assert sorted(p.read_text() for p in (tmp_path / "h").glob("*.json")) == first  # the default seed is 0


def _solve_in_a_process(argv: list[str], **options: object) -> tuple[int, str]:
    """``themis-opt ARGV`` in a child process: (exit status, standard error)."""
    import subprocess
    import sys

    process = subprocess.run(
        [sys.executable, "-m", "themis_opt.cli", *argv], stderr=subprocess.PIPE, text=True, timeout=120, **options
    )  # type: ignore[call-overload]
    return process.returncode, process.stderr


def _file_size_limited(limit: int) -> None:  # pragma: no cover - runs in the child
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_solve_all_never_writes_a_method_s_file_over_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instance = tmp_path / "r.baseline.json"
    instance.write_bytes(Path(WORKED).read_bytes())
    code, _, err = run(["solve", str(instance), "--method", "all", "--out", str(tmp_path / "r.json")], capsys)
    assert code == 2 and "--out (baseline's file)" in err and "input file" in err and err.count("\n") == 1
    assert instance.read_bytes() == Path(WORKED).read_bytes() and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("suffix", ["", "/"])
def test_a_folder_given_to_solve_all_is_refused(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "adir"
    if not suffix:
        folder.mkdir()
    argv = ["solve", WORKED, "--method", "all", "--time-limit", "2", "--out", f"{folder}{suffix}"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "--out: is a folder, not a file" in err and err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ([] if suffix else ["adir"])


def test_export_astra_never_writes_over_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    instance = exp / "network.json"
    instance.write_bytes((DATA / "tiny_ar.json").read_bytes())
    code, _, err = run(["export-astra", str(instance), "--out", str(exp)], capsys)
    assert code == 2 and "is a folder that is not empty" in err and err.count("\n") == 1
    code, _, err = run(["export-astra", str(instance), "--out", str(exp), "--force"], capsys)
    assert code == 2 and "an input: --force would replace it" in err and err.count("\n") == 1
    assert instance.read_bytes() == (DATA / "tiny_ar.json").read_bytes() and len(list(exp.iterdir())) == 1


def test_export_astra_writes_a_folder_whole_or_not_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "exp"
    assert run(["export-astra", WORKED, "--out", str(out)], capsys)[0] == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run(["export-astra", WORKED, "--out", str(out), "--method", "baseline"], capsys)[0] == 2  # not empty
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert run(["export-astra", WORKED, "--out", str(out), "--method", "baseline", "--force"], capsys)[0] == 0
    second = {p.name: p.read_bytes() for p in out.iterdir()}
    assert second.keys() == first.keys() and second != first  # replaced whole: the baseline's system file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]  # no temporary folder left


def test_a_refused_rows_file_keeps_its_last_line_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    assert run(["bench", WORKED, *BENCH, "--out", str(rows)], capsys)[0] == 0
    text = rows.read_text() + '{"path": "cut'  # a write that was interrupted
    rows.write_text(text)
    code, _, err = run(["bench", WORKED, "--method", "baseline", "--workers", "1", "--out", str(rows)], capsys)
    assert code == 2 and "other settings" in err and rows.read_text() == text
    code, _, _ = run(["plot-bench", str(rows), "--out", str(tmp_path / "figs")], capsys)
    assert code == 0 and rows.read_text() == text  # a reader changes nothing
    code, _, _ = run(["bench", WORKED, *BENCH, "--out", str(rows), "--resume"], capsys)  # taken: the cut line goes
    assert code == 0 and len(rows.read_text().splitlines()) == 1 and "cut" not in rows.read_text()


def test_a_result_that_cannot_be_written_whole_leaves_the_earlier_one(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert _solve_in_a_process(["solve", WORKED, "--method", "baseline", "--out", str(out)])[0] == 0
    earlier = out.read_bytes()
    argv = ["solve", WORKED, "--method", "themis", "--out", str(out)]
    code, err = _solve_in_a_process(argv, preexec_fn=lambda: _file_size_limited(len(earlier) // 2))
    assert code == 2 and err == f"themis-opt: error: {out}: cannot be written (File too large)\n"
    assert out.read_bytes() == earlier and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_full_output_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/full").exists():  # pragma: no cover - not Linux
        pytest.skip("no /dev/full")
    code, _, err = run(["bench", WORKED, *BENCH, "--csv", "/dev/full"], capsys)
    assert code == 2 and err == "themis-opt: error: /dev/full: cannot be written (No space left on device)\n"
    with open("/dev/full", "w") as full:
        code, err = _solve_in_a_process(["solve", WORKED, "--method", "baseline"], stdout=full)
    assert code == 2 and err == "themis-opt: error: standard output: cannot be written (No space left on device)\n"


def test_a_disk_full_during_bench_keeps_whole_rows_and_resume_completes(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    paths = [WORKED, str(DATA / "tiny_rs.json"), str(DATA / "tiny_ar.json")]
    argv = ["bench", *paths, *BENCH, "--out", str(rows)]
    assert _solve_in_a_process(["bench", WORKED, *BENCH, "--out", str(tmp_path / "one.jsonl")])[0] == 0
    row = (tmp_path / "one.jsonl").stat().st_size
    code, err = _solve_in_a_process(argv, preexec_fn=lambda: _file_size_limited(row + row // 2))
    assert code == 2 and err.count("\n") == 1 and "File too large" in err and "1 new rows kept" in err
    assert len(rows.read_text().splitlines()) == 1 and rows.read_text().endswith("\n")
    assert _solve_in_a_process([*argv, "--resume"])[0] == 0
    names = [json.loads(line)["instance"] for line in rows.read_text().splitlines()]
    assert sorted(names) == ["tiny_ar", "tiny_rs", "worked"]


def test_endless_inputs_are_refused_at_the_limit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/dev/zero").exists():  # pragma: no cover - not Linux
        pytest.skip("no /dev/zero")
    code, _, err = run(["solve", WORKED, "--params", "/dev/zero"], capsys)  # 1 MiB at most, whatever the setting
    assert (
        code == 2
        and err
        == "themis-opt: error: /dev/zero: holds more than 1,048,576 bytes, the input limit "
        "(the environment variable THEMIS_OPT_MAX_INPUT_BYTES sets it)\n"
    )
    monkeypatch.setenv("THEMIS_OPT_MAX_INPUT_BYTES", "1000000")
    for argv in (["solve", "/dev/zero"], ["validate", WORKED, "/dev/zero"], ["plot-bench", "/dev/zero", "--out", "x"]):
        code, _, err = run(argv, capsys)
        assert code == 2 and err.startswith("themis-opt: error: /dev/zero: holds more than 1,000,000 bytes"), argv


def test_a_quantum_too_fine_for_cp_sat_s_integers_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    quick = str(ROOT / "instances" / "quick" / "small-exact-s1-004.json")
    argv = ["solve", quick, "--method", "cpsat", "--quantum-ns", "1e-300", "--time-limit", "5", "--workers", "1"]
    code, _, err = run(argv, capsys)  # this seed reaches CP-SAT's model: no heuristic proves the optimum
    assert (
        code == 2 and err.startswith("themis-opt: error: --quantum-ns: 1e-300 ns is too fine") and err.count("\n") == 1
    )


def test_bench_without_the_baseline_counts_no_losses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["bench", WORKED, "--method", "themis-scf,balanced", "--time-limit", "2"], capsys)
    assert code == 0
    summary = out[out.index("summary over") :]
    row = next(line for line in summary.splitlines() if "themis-scf" in line)
    assert row.rstrip(" │").endswith("-")  # nothing to lose to: not a count of 0


def test_cpsat_s_own_verdict_never_reads_as_the_result_s_status(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["solve", WORKED, "--method", "cpsat", "--time-limit", "5", "--workers", "1"], capsys)
    assert code == 0 and "optimal" in out
    assert "CP-SAT FEASIBLE" not in out and "CP-SAT OPTIMAL" not in out


def test_show_refuses_an_instance_it_would_not_read_or_that_does_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result_file, trace = tmp_path / "r.json", tmp_path / "t.json"
    assert run(["solve", WORKED, "--method", "baseline", "--out", str(result_file)], capsys)[0] == 0
    code, _, err = run(["show", str(result_file), "--instance", "missing.json"], capsys)
    assert code == 2 and "--instance: names the trace's collectives and dimensions: it applies with --trace" in err
    document = json.loads(Path(WORKED).read_text())
    document["network"]["dimensions"] = document["network"]["dimensions"][:1]  # the same name, fewer dimensions
    smaller = tmp_path / "smaller.json"
    smaller.write_text(json.dumps(document))
    code, _, err = run(["show", str(result_file), "--trace", str(trace), "--instance", str(smaller)], capsys)
    assert code == 2 and err.count("\n") == 1 and "--instance: does not fit the result" in err
    assert not trace.exists()


def test_a_result_with_a_phase_past_any_network_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_file = tmp_path / "r.json"
    assert run(["solve", WORKED, "--method", "baseline", "--out", str(result_file)], capsys)[0] == 0
    document = json.loads(result_file.read_text())
    document["schedule"]["chunks"][0]["phases"][0]["dim"] = 10**7  # show would draw a row per dimension
    result_file.write_text(json.dumps(document))
    code, _, err = run(["show", str(result_file)], capsys)
    assert code == 2 and err.count("\n") == 1 and "dim: must be <= 15, got 10000000" in err


def test_a_solve_without_a_graph_or_solvers_starts_without_numpy() -> None:
    # numpy is about a fifth of a cheap command's start: only graphs and the solvers' bounds need it
    code = f"from themis_opt.cli import main\nmain(['solve', {WORKED!r}, '--method', 'themis', '--bounds', 'formulas'])"
    assert not imported_by(code, "numpy")


def test_a_command_freezes_its_instance_while_it_runs_and_not_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import themis_opt.solving

    frozen: list[int] = []
    solve_method = themis_opt.solving.run_method

    def spy(*args: object, **kwargs: object) -> object:
        frozen.append(gc.get_freeze_count())
        return solve_method(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(themis_opt.solving, "run_method", spy)
    assert main(["solve", str(DATA / "worked.json"), "--method", "themis"]) == 0
    assert frozen and frozen[0] > 0  # the instance kept out of the collector's passes while it solved
    assert gc.get_freeze_count() == 0  # and given back after
    assert main(["solve", str(DATA / "missing.json")]) == 2 and gc.get_freeze_count() == 0


def test_out_refused_where_writing_would_not_fit_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from themis_opt.formats.native import save_instance
    from themis_opt.instance import Collective, Dimension, Instance, Network

    # 8,192 chunks on three dimensions (49,152 phases): five results take about 1.7 s to write and report
    network = Network(tuple(Dimension(4, "switch", 100.0, 500.0) for _ in range(3)))
    save_instance(Instance(network, (Collective("all_reduce", 2**30, 8192),), "big"), tmp_path / "big.json")
    argv = ["solve", str(tmp_path / "big.json"), "--method", "all", "--time-limit", "1", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--time-limit: 1 s cannot hold writing 5 results of 49,152 phases" in err
    assert not list(tmp_path.glob("r*"))  # refused before any work: nothing written
    assert main(argv[:-2]) == 0  # without --out it runs (its report fits)
