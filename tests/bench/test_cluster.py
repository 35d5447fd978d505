"""bench on a Dask cluster: the same rows as --jobs 1, no row lost to a killed worker, bad addresses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from themis_opt.bench.cluster import check_scheduler
from themis_opt.cli import main
from themis_opt.errors import InputError

from ..conftest import ROOT

pytest.importorskip("distributed", reason='the dask extra is not installed (pip install -e ".[dask]")')

SUITE = ROOT / "instances" / "quick"
SOME = sorted(str(p) for p in SUITE.glob("*.json"))[::6]  # two instances of the quick suite
QUICK = [*SOME, "--methods", "baseline,themis-scf,balanced"]


def _rows(path: Path) -> dict[str, tuple[float, list[tuple[str, str, float]]]]:
    rows = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        rows[r["digest"]] = (r["lower_bound_ns"], [(o["method"], o["status"], o["makespan_ns"]) for o in r["outcomes"]])
    return rows


@pytest.mark.slow
def test_local_cluster_gives_the_rows_of_one_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a time limit long enough that node limits, not the clock, decide every bound
    one, cluster = tmp_path / "one.jsonl", tmp_path / "cluster.jsonl"
    assert main(["bench", *QUICK, "--time-limit", "60", "--out", str(one)]) == 0
    assert main(["bench", *QUICK, "--time-limit", "60", "--out", str(cluster), "--scheduler", "local:2"]) == 0
    out = capsys.readouterr().out
    assert "2 jobs x 1 CP-SAT worker" in out
    assert _rows(one) == _rows(cluster) and len(_rows(one)) == len(SOME) == 2
    # the table is ordered by instance, not by arrival
    legend = [line.split(":")[0].split()[-1] for line in out.splitlines() if line.lstrip().startswith("#")]
    assert legend[-2:] == [Path(p).stem for p in SOME]


def _worker_processes(pid: int) -> list[int]:
    """LocalCluster's worker processes: children of the bench spawned by multiprocessing."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [
        int(c) for c in children if "spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="replace")
    ]


@pytest.mark.slow
def test_a_killed_worker_loses_no_row(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    four = sorted(str(p) for p in SUITE.glob("*.json"))[:4]
    argv = [sys.executable, "-m", "themis_opt.cli", "bench", *four, "--methods", "baseline,cpsat"]
    argv += ["--time-limit", "0.5", "--scheduler", "local:2", "--out", str(out)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        time.sleep(0.1)
    workers = _worker_processes(process.pid)
    assert workers, "no worker process found"
    os.kill(workers[0], signal.SIGKILL)
    _, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and len({r["digest"] for r in rows}) == 4
    assert all(not r["error"] for r in rows)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("local:0", "local:N needs 1 <= N <= 256"),
        ("local:x", "must be tcp://HOST:PORT or local:N"),
        ("http://host:8786", "must be tcp://HOST:PORT or local:N"),
        ("tcp://host", "must be tcp://HOST:PORT or local:N"),
        ("tcp://host:99999", "must be tcp://HOST:PORT or local:N"),
    ],
)
def test_malformed_scheduler_addresses(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_scheduler(spec)


def test_unreachable_scheduler_is_exit_2_within_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    argv = ["bench", "--suite", "quick", "--method", "baseline", "--scheduler", "tcp://127.0.0.1:9"]
    code = main([*argv, "--connect-timeout", "1"])
    _, err = capsys.readouterr()
    assert code == 2 and "no scheduler answered at tcp://127.0.0.1:9 within 1 s" in err and err.count("\n") == 1
    assert time.perf_counter() - t0 < 10


def test_jobs_and_scheduler_do_not_mix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--suite", "quick", "--jobs", "2", "--scheduler", "local:2"]) == 2
    assert "give --jobs or --scheduler, not both" in capsys.readouterr().err


def _peer(answer: bytes | None) -> tuple[str, object]:
    """A TCP server on a free port that sends ``answer`` to every connection (``None``: stays silent)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            held.append(connection)  # kept open: a silent peer never closes
            if answer is not None:
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}", server


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4, "answered, but not as a Dask scheduler does"),  # 2.82 EiB to Dask
        (None, "no scheduler answered at tcp://127.0.0.1:"),
    ],
)
def test_a_peer_that_is_not_a_scheduler_is_exit_2_within_the_timeout(
    answer: bytes | None, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, server = _peer(answer)
    try:
        t0 = time.perf_counter()
        code = main(["bench", *SOME[:1], "--method", "baseline", "--scheduler", spec, "--connect-timeout", "2"])
        elapsed = time.perf_counter() - t0
    finally:
        server.close()  # type: ignore[attr-defined]
    _, err = capsys.readouterr()
    assert code == 2 and message in err and err.count("\n") == 1
    assert elapsed < 4


@pytest.mark.parametrize("scheduler", [None, "local:2"])
def test_a_sweep_put_to_sleep_and_woken_keeps_every_row_once(tmp_path: Path, scheduler: str | None) -> None:
    """The whole process (and its Dask workers) stopped mid-sweep and continued: every row exactly once."""
    out = tmp_path / "rows.jsonl"
    four = sorted(str(p) for p in SUITE.glob("*.json"))[:4]
    argv = [sys.executable, "-m", "themis_opt.cli", "bench", *four, "--methods", "baseline,cpsat"]
    argv += ["--time-limit", "0.5", "--out", str(out), *(["--scheduler", scheduler] if scheduler else [])]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        time.sleep(0.05)
    sleepers = [process.pid, *_worker_processes(process.pid)]
    for pid in sleepers:  # the machine goes to sleep...
        os.kill(pid, signal.SIGSTOP)
    time.sleep(0.6)
    for pid in sleepers:  # ... and wakes up with every deadline passed
        os.kill(pid, signal.SIGCONT)
    _, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and len({r["digest"] for r in rows}) == 4
    assert all(not r["error"] for r in rows)
