"""themis_opt against ASTRA-sim 1.0 on ASTRA-sim's own sample inputs.

    python -m bench.figures.astra_check --astra PATH/TO/astra-sim [--binary BIN] [--cache FILE] [--only TEXT] [--jobs N]
                                        [--active-chunks 1,2,3]

``--astra`` is a checkout of ASTRA-sim's ``ASTRA-sim-1.0`` branch with its
analytical backend built (``docs/astra.md`` says how); ``--binary`` defaults
to its ``build/astra_analytical/build/AnalyticalAstra/bin/AnalyticalAstra``.
Every network of ``inputs/network/analytical`` x system of ``inputs/system``
x workload of ``inputs/workload`` runs with the system file's scheduling set
to each of baseline/themis x FIFO/SCF, for 1 and 2 passes, and the runs of
its ``examples/run_*_analytical.sh`` scripts as they are. For each, ASTRA-sim
runs (its time is the line ``all passes finished at time: N``) and
themis_opt imports the same three files (``themis-opt import-astra``) and
solves the instance with the method and intra-dimension policy the system
file asks for. ``--active-chunks`` runs every case once per value of the
system file's ``active-chunks-per-dimension`` (default: as the sample has
it). A run where ASTRA-sim crashes or gives no time must be refused
by the import (exit status 2, one line); a run ASTRA-sim completes must be
reproduced within 1%.

ASTRA-sim's outcomes are kept in ``--cache`` (default
``results/astra_check.json``), so a second run only re-runs themis_opt. The
table goes to standard output in Markdown.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import io
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SCHEDULES = (("baseline", "FIFO"), ("baseline", "SCF"), ("themis", "FIFO"), ("themis", "SCF"))
PASSES = (1, 2)
ASTRA_SECONDS = 900  # a run that takes longer is reported as not finished
TOLERANCE = 0.01


@dataclass(frozen=True)
class Case:
    """One ASTRA-sim run: its three input files and its options."""

    network: Path
    system: Path
    workload: Path
    passes: int
    comm_scale: float
    schedule: tuple[str, str] | None  # (inter, intra) written into the system file; None: as it is
    active: int | None = None  # active-chunks-per-dimension written into the system file; None: as it is

    @property
    def label(self) -> str:
        sched = "as is" if self.schedule is None else f"{self.schedule[0]}+{self.schedule[1]}"
        scale = f", comm x{self.comm_scale:g}" if self.comm_scale != 1 else ""
        active = f", k={self.active}" if self.active is not None else ""
        files = f"{self.network.stem} | {self.system.stem} | {self.workload.stem}"
        return f"{files} | {sched} | {self.passes}{scale}{active}"


def system_text(case: Case) -> str:
    """The system file of ``case``: the sample's, with the inter- and intra-dimension scheduling set."""
    text = case.system.read_text()
    if case.schedule is None and case.active is None:
        return text
    keys = ("inter-dimension-scheduling:", "intra-dimension-scheduling:") if case.schedule is not None else ()
    keys += ("active-chunks-per-dimension:",) if case.active is not None else ()
    lines = [line for line in text.splitlines() if not line.strip().startswith(keys)]
    if case.schedule is not None:
        inter, intra = case.schedule
        lines += [f"inter-dimension-scheduling: {inter}", f"intra-dimension-scheduling: {intra}"]
    if case.active is not None:
        lines.append(f"active-chunks-per-dimension: {case.active}")
    return "\n".join(lines) + "\n"


def key_of(case: Case, binary: Path) -> str:
    digest = hashlib.sha256()
    for part in (
        case.network.read_bytes(),
        system_text(case).encode(),
        case.workload.read_bytes(),
        f"{case.passes} {case.comm_scale} {binary.resolve()}".encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:24]


def run_astra(case: Case, binary: Path) -> dict[str, object]:
    """ASTRA-sim's outcome: its time in ns, or why there is none."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        system = folder / case.system.name
        system.write_text(system_text(case))
        out = folder / "out"
        out.mkdir()
        began = time.perf_counter()
        try:
            done = subprocess.run(
                [
                    "nice",
                    "-n",
                    "10",
                    str(binary),
                    f"--network-configuration={case.network}",
                    f"--system-configuration={system}",
                    f"--workload-configuration={case.workload}",
                    f"--path={out}/",
                    "--run-name=check",
                    f"--num-passes={case.passes}",
                    "--total-stat-rows=1",
                    "--stat-row=0",
                    f"--comm-scale={case.comm_scale:g}",
                    "--compute-scale=1",
                    "--injection-scale=1",
                    "--num-queues-per-dim=1",
                ],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=ASTRA_SECONDS,
                cwd=folder,
            )
        except subprocess.TimeoutExpired:
            return {"time_ns": None, "outcome": f"did not finish in {ASTRA_SECONDS} s"}
        seconds = time.perf_counter() - began
    found = re.findall(r"all passes finished at time: (\d+)", done.stdout)
    if found and done.returncode == 0:
        return {"time_ns": float(found[-1]), "outcome": "finished", "seconds": round(seconds, 1)}
    last = next((line for line in reversed((done.stdout + done.stderr).splitlines()) if line.strip()), "")
    code = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
    return {"time_ns": None, "outcome": f"{code}: {last.strip()[:160]}", "seconds": round(seconds, 1)}


def run_ours(case: Case) -> dict[str, object]:
    """themis_opt's outcome: the import's exit and one line, and the makespan of the method asked for."""
    from themis_opt.cli import main as themis_opt
    from themis_opt.formats.native import load_instance
    from themis_opt.solving import solve

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        system = folder / case.system.name
        system.write_text(system_text(case))
        instance = folder / "instance.json"
        argv = [
            "import-astra",
            str(case.network),
            str(system),
            "--workload",
            str(case.workload),
            "--passes",
            str(case.passes),
            "--comm-scale",
            f"{case.comm_scale:g}",
            "--out",
            str(instance),
        ]
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = themis_opt(argv)
        if code:
            lines = err.getvalue().strip().splitlines()
            return {"exit": code, "line": lines[-1] if lines else "", "lines": len(lines)}
        inst = load_instance(instance)
        meta = dict(inst.metadata)
        try:
            result = solve(inst, meta["astra_method"], intra=meta["astra_intra"], time_limit=600)
        except Exception as error:  # reported in the table, not a crash of the whole check
            return {"exit": 0, "makespan_ns": None, "error": f"solve failed: {error!r}"}
        return {"exit": 0, "makespan_ns": result.makespan}


def cases(root: Path) -> list[Case]:
    """Every sample pairing with each schedule and pass count, then the example scripts' runs."""
    inputs = root / "inputs"
    networks = sorted((inputs / "network" / "analytical").glob("*.json"))
    systems = sorted((inputs / "system").glob("*.txt"))
    workloads = sorted((inputs / "workload").glob("*.txt"))
    out = [
        Case(n, s, w, p, 1.0, sched)
        for n, s, w, sched, p in itertools.product(networks, systems, workloads, SCHEDULES, PASSES)
    ]
    for script in sorted((root / "examples").glob("run_*_analytical.sh")):
        text = script.read_text()
        found = {
            k: re.search(rf'^{k}="\$\{{SCRIPT_DIR:\?\}}"/\.\./(\S+)"?', text, re.M)
            for k in ("NETWORK", "SYSTEM", "WORKLOAD")
        }
        if not all(found.values()):
            continue
        paths = {k: root / m.group(1).rstrip('"') for k, m in found.items() if m}
        passes = re.search(r"--num-passes=(\d+)", text)
        scale = re.search(r"--comm-scale=([0-9.]+)", text)
        out.append(
            Case(
                paths["NETWORK"],
                paths["SYSTEM"],
                paths["WORKLOAD"],
                int(passes.group(1)) if passes else 1,
                float(scale.group(1)) if scale else 1.0,
                None,
            )
        )
    return out


def verdict(theirs: dict[str, object], ours: dict[str, object]) -> tuple[str, str]:
    """(class, the table's cell) of one comparison."""
    if theirs["time_ns"] is None:
        if ours["exit"] == 2 and ours.get("lines") == 1:
            return "refused", f"exit 2: {ours['line']}"
        return "MISMATCH", f"ASTRA-sim {theirs['outcome']}; import exit {ours['exit']}"
    if ours["exit"] == 2 and ours.get("lines") == 1 and "reads past the list" in str(ours["line"]):
        return "undefined in ASTRA-sim, refused", f"exit 2: {ours['line']}"
    if ours["exit"]:
        return "NOT MODELLED", f"exit {ours['exit']}: {ours.get('line', '')}"
    if ours["makespan_ns"] is None:
        return "FAILED", str(ours.get("error"))
    diff = float(ours["makespan_ns"]) / float(theirs["time_ns"]) - 1  # type: ignore[arg-type]
    return ("within 1%" if abs(diff) <= TOLERANCE else "OFF"), f"{100 * diff:+.2f}%"


def astra_outcomes(todo: list[Case], binary: Path, path: Path, jobs: int) -> dict[str, dict[str, object]]:
    """ASTRA-sim's outcome of every case of ``todo``, by :func:`key_of`: those kept in the cache file
    ``path``, the others run (``jobs`` at once) and kept there as they come.
    """
    cache: dict[str, dict[str, object]] = json.loads(path.read_text()) if path.exists() else {}
    missing = [c for c in todo if key_of(c, binary) not in cache]
    print(f"{len(todo)} runs, {len(missing)} not in {path}", file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for n, (case, outcome) in enumerate(zip(missing, pool.map(lambda c: run_astra(c, binary), missing)), 1):
            cache[key_of(case, binary)] = outcome
            print(f"[{n}/{len(missing)}] {case.label}: {outcome['outcome']} {outcome['time_ns']}", file=sys.stderr)
            if n % 20 == 0 or n == len(missing):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(cache, indent=1, sort_keys=True))
    return cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--astra", type=Path, required=True, help="a checkout of ASTRA-sim's ASTRA-sim-1.0 branch")
    parser.add_argument("--binary", type=Path, help="its AnalyticalAstra (default: its build folder's)")
    parser.add_argument("--cache", type=Path, default=Path("results/astra_check.json"), help="ASTRA-sim's outcomes")
    parser.add_argument("--only", default="", help="run only the cases whose label contains this text")
    parser.add_argument("--jobs", type=int, default=2, help="ASTRA-sim runs at once (default 2)")
    parser.add_argument("--astra-only", action="store_true", help="fill the cache; do not run themis_opt")
    parser.add_argument(
        "--active-chunks", default="", help="comma-separated active-chunks-per-dimension values (default: as is)"
    )
    args = parser.parse_args(argv)
    binary = args.binary or args.astra / "build/astra_analytical/build/AnalyticalAstra/bin/AnalyticalAstra"
    if not binary.exists():
        parser.error(f"no ASTRA-sim binary at {binary} (build it, or give --binary)")
    actives = [int(k) for k in args.active_chunks.split(",") if k] or [None]
    todo = [dataclasses.replace(c, active=k) for c in cases(args.astra) for k in actives if args.only in c.label]
    cache = astra_outcomes(todo, binary, args.cache, args.jobs)
    if args.astra_only:
        return 0
    tally: dict[str, int] = {}
    groups: dict[tuple[str, str], list[tuple[str, float | None]]] = {}
    print("| network | system | workload | schedule | passes | ASTRA-sim 1.0 (ns) | themis_opt | |")
    print("|---|---|---|---|---|---|---|---|")
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        ours_all = list(pool.map(run_ours, todo, chunksize=4))
    for case, ours in zip(todo, ours_all):
        theirs = cache[key_of(case, binary)]
        kind, cell = verdict(theirs, ours)
        tally[kind] = tally.get(kind, 0) + 1
        diff = None
        if kind == "within 1%" or kind == "OFF":
            diff = abs(float(ours["makespan_ns"]) / float(theirs["time_ns"]) - 1)  # type: ignore[arg-type]
        groups.setdefault((case.network.stem, case.system.stem), []).append((kind, diff))
        time_cell = f"{theirs['time_ns']:.0f}" if theirs["time_ns"] is not None else str(theirs["outcome"])[:60]
        ours_cell = f"{ours['makespan_ns']:.0f}" if ours.get("makespan_ns") is not None else ""
        print(f"| {case.label} | {time_cell} | {ours_cell} | {kind}: {cell} |", flush=True)
    print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(tally.items())))
    print("\n| network | system | runs | ASTRA-sim finishes | within 1% | largest difference | refused |")
    print("|---|---|---|---|---|---|---|")
    for (network, system), rows in sorted(groups.items()):
        diffs = [d for _, d in rows if d is not None]
        finished = sum(
            1 for k, _ in rows if k in ("within 1%", "OFF", "NOT MODELLED", "FAILED", "undefined in ASTRA-sim, refused")
        )
        within = sum(1 for k, _ in rows if k == "within 1%")
        refused = sum(1 for k, _ in rows if k in ("refused", "undefined in ASTRA-sim, refused"))
        largest = f"{100 * max(diffs):.2f}%" if diffs else ""
        print(f"| {network} | {system} | {len(rows)} | {finished} | {within} | {largest} | {refused} |")
    return 0 if set(tally) <= {"within 1%", "refused", "undefined in ASTRA-sim, refused"} else 1


if __name__ == "__main__":
    raise SystemExit(main())
