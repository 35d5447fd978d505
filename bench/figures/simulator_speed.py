"""The simulator in-process: an earlier commit's, today's Python reference and the compiled core.

    python -m bench.figures.simulator_speed                 # against 99d703f
    python -m bench.figures.simulator_speed --old REV --repeat 5

Three cases, each built by the package that times it (its own zoo, task
graph and suite network, so an earlier commit needs none of today's files):

* ResNet-50, 2 passes x 64 chunks on the training suite's 8x8x8 switches;
* Transformer-1T, 2 passes x 16 chunks on the same network;
* one 1 GiB all-reduce in 1,024 chunks on the same network;
* where the package bundles it, the clusters suite's Llama 3 70B, FSDP over 4 pipeline stages
  and 8 microbatches on HGX H100 (the earlier commit has no pipeline stages: ``-`` there).

Each is timed with ``simulate`` (the schedule built as well) for the
baseline (fifo) and Themis (scf), best of ``--repeat`` runs. The earlier
commit runs in a subprocess from ``git archive`` of ``--old``; today's
Python reference is ``engine="python"``, the core ``engine="core"``. The
table gives the times, the ratios to the earlier commit and to today's
Python, and whether today's two engines give the same schedule (they must).
The makespans of the earlier commit are printed as well: they differ where
the cost model or Themis changed since. Last, the whole command
``themis-opt solve paper-3d-sw8x8x8.json --method themis`` (a fresh process,
imports included) with either version, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs inside either package version: prints one JSON line of {case: {method: [seconds, makespan]}}.
TIMER = r"""
import json, os, sys, time
from themis_opt.instance import Collective, Instance
from themis_opt.policies import ThemisTracker, baseline_orders
try:
    from themis_opt.formats.native import load_instance
    from themis_opt.sim import simulate
    from themis_opt.workloads.astra1 import task_graph
    from themis_opt.workloads.zoo import ZooOptions, model_workload
except ImportError:  # the layout of 99d703f
    from themis_opt.io import load_instance
    from themis_opt.simulator import simulate
    from themis_opt.workloads import task_graph
    from themis_opt.zoo import ZooOptions, model_workload

repeat, engine = int(sys.argv[1]), sys.argv[2]
options = {} if engine == "old" else {"engine": engine}
network = load_instance("themis_opt/suites/training/resnet50-sw8x8x8-falling.json").network
cases = {
    "resnet50 2x64": task_graph(model_workload("resnet50", ZooOptions(batch=4)), network, passes=2, chunks=64),
    "transformer1t 2x16": task_graph(
        model_workload("transformer1t", ZooOptions(batch=1)), network, passes=2, chunks=16
    ),
    "1 GiB / 1024": Instance(network, (Collective("all_reduce", 2**30, 1024),), "allreduce"),
}
staged = "themis_opt/suites/clusters/llama3-70b-fsdp-tp8-ep1-dp32-pp4-mb8-hgx-h100-8x32x4.json"
if os.path.exists(staged):
    cases["llama3-70b fsdp pp4 x 8"] = load_instance(staged)
out = {}
for name, instance in cases.items():
    row = {}
    for method in ("baseline-fifo", "themis-scf"):
        best, makespan = float("inf"), None
        for _ in range(repeat):
            orders = baseline_orders(instance) if method.startswith("baseline") else ThemisTracker(instance).plan
            t0 = time.perf_counter()
            schedule = simulate(instance, orders, method.split("-")[1], **options)
            best = min(best, time.perf_counter() - t0)
            makespan = schedule.makespan
        row[method] = [best, makespan, hash(schedule) if engine != "old" else 0]
    out[name] = row
print(json.dumps(out))
"""


def _time(tree: Path, engine: str, repeat: int) -> dict[str, dict[str, list[float]]]:
    done = subprocess.run(
        [sys.executable, "-c", TIMER, str(repeat), engine],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, dict[str, list[float]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _whole_command(tree: Path, repeat: int) -> float:
    instance = ROOT / "themis_opt" / "suites" / "paper" / "paper-3d-sw8x8x8.json"
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "themis_opt.cli", "solve", str(instance), "--method", "themis"],
            cwd=tree,
            env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            check=True,
        )
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="99d703f", help="the earlier commit (default 99d703f)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per case, the best counts (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "old.tar"
        subprocess.run(["git", "archive", "-o", str(archive), args.old, "themis_opt"], cwd=ROOT, check=True)
        old_tree = Path(tmp) / "old"
        with tarfile.open(archive) as tar:
            tar.extractall(old_tree, filter="data")
        old = _time(old_tree, "old", args.repeat)
        old_command = _whole_command(old_tree, args.repeat)
    command = _whole_command(ROOT, args.repeat)
    python = _time(ROOT, "python", args.repeat)
    core = _time(ROOT, "core", args.repeat)
    print(f"| case | method | {args.old} | Python today | core | vs {args.old} | vs Python | same schedule |")
    print("|---|---|---|---|---|---|---|---|")
    for case, row in core.items():
        for method, (seconds, makespan, digest) in row.items():
            before, now_py = old.get(case, {}).get(method), python[case][method]
            same = "yes" if (digest == now_py[2] and makespan == now_py[1]) else "NO"
            then, ratio = ("-", "-") if before is None else (f"{before[0] * 1e3:.1f} ms", f"{before[0] / seconds:.0f}x")
            print(
                f"| {case} | {method} | {then} | {now_py[0] * 1e3:.1f} ms | {seconds * 1e3:.2f} ms "
                f"| {ratio} | {now_py[0] / seconds:.0f}x | {same} |"
            )
    print("\nmakespans (ns): case, method, earlier commit, today")
    for case, row in core.items():
        for method, (_, makespan, _) in row.items():
            before = old.get(case, {}).get(method)
            print(f"  {case}, {method}: {'-' if before is None else f'{before[1]:.1f}'}, {makespan:.1f}")
    what = "themis-opt solve paper-3d-sw8x8x8.json --method themis"
    print(f"\n{what}: {args.old} {old_command:.3f} s, today {command:.3f} s")


if __name__ == "__main__":
    main()
