"""Cross-check against ASTRA-sim 1.0: the same case simulated by ASTRA-sim and by themis_opt.

    python bench/astra_check.py --binary PATH/TO/AnalyticalAstra INSTANCE.json [--workload DATA.txt --passes 2]

Needs an ASTRA-sim 1.0 analytical binary built from its ASTRA-sim-1.0 branch
(``build/astra_analytical/build.sh -c``; it needs Boost's program_options).
For each of baseline + FIFO and Themis + SCF, the instance is exported with
``export-astra --version 1`` and run by ASTRA-sim (its MICRO workload, or the
DATA workload given), and the time ASTRA-sim reports ("all passes finished at
time") is compared with themis_opt's makespan for the same case (the
workload's task graph built with ``themis-opt workload`` when one is given).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

from themis_opt.astra import export_astra
from themis_opt.io import load_instance
from themis_opt.solve import solve
from themis_opt.workloads import parse_workload, task_graph


def astra_time(binary: str, folder: Path, workload: Path, passes: int) -> float:
    out = folder / "out"
    out.mkdir(exist_ok=True)
    done = subprocess.run(
        [
            binary,
            f"--network-configuration={folder / 'network.json'}",
            f"--system-configuration={folder / 'system.txt'}",
            f"--workload-configuration={workload}",
            f"--path={out}/",
            "--run-name=check",
            f"--num-passes={passes}",
            "--total-stat-rows=1",
            "--stat-row=0",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"all passes finished at time: (\d+)", done.stdout)
    if not match:
        raise SystemExit(f"ASTRA-sim printed no finishing time:\n{done.stdout[-2000:]}")
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instance", help="an instance with one collective over every dimension (its network is used)")
    parser.add_argument("--binary", required=True, help="ASTRA-sim 1.0's AnalyticalAstra")
    parser.add_argument("--workload", help="an ASTRA-sim 1.0 DATA workload to run instead of the instance's collective")
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    instance = load_instance(args.instance)
    chunks = instance.collectives[0].chunks
    print(f"{args.instance}" + (f", workload {args.workload}, {args.passes} passes" if args.workload else ""))
    print("| method | ASTRA-sim 1.0 (ns) | themis_opt (ns) | difference |")
    print("|---|---|---|---|")
    for method, intra in (("baseline", "fifo"), ("themis", "scf")):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            export_astra(instance, 1, folder, method)
            if args.workload:
                theirs = astra_time(args.binary, folder, Path(args.workload), args.passes)
                graph = task_graph(parse_workload(args.workload), instance.network, passes=args.passes, chunks=chunks)
                ours = solve(graph, method, intra=intra).makespan
            else:
                theirs = astra_time(args.binary, folder, folder / "workload.txt", 1)
                ours = solve(instance, method, intra=intra).makespan
        assert ours is not None
        print(f"| {method} + {intra} | {theirs:.0f} | {ours:.1f} | {100 * (ours / theirs - 1):+.2f}% |", flush=True)


if __name__ == "__main__":
    main()
