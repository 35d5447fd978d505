"""The whole in-process ``solve`` call, default bounds included, against an earlier commit.

    python -m bench.figures.bound_speed                      # against 99d703f, best of 3
    python -m bench.figures.bound_speed --old REV --repeat 5 --dense-tasks 3000

Each case is timed in a subprocess of its own (its peak memory is that
process's), by the package it runs in (each version builds its own instance,
so an earlier commit needs none of today's files):

* ``resnet50``: ResNet-50, 2 passes x 64 chunks, on the paper's 8x8x8 switch
  network (41,472 phases);
* ``allreduce1g``: one all-reduce of 1 GiB in 1,024 chunks on that network;
* ``transformer1t``: Transformer-1T, 2 passes x 16 chunks, on that network
  (1,545 tasks, 770 collectives);
* ``chain10k``: 10,000 all-reduces of 1 MiB in 4 chunks on that network, each
  waiting for the one before;
* ``dense``: ``--dense-tasks`` tasks (default 1,415: 1,000,405 dependencies;
  3,000 gives 4,498,500), compute tasks and all-reduces in turn, each waiting
  for every task before it;
* ``mixed-topology``: the quick suite's ``mixed-topology-s2-001`` (small: the
  load programs now run there by default, for every method).

For ``baseline`` and ``themis``, ``solve(instance, method, time_limit=10)``
(the default bounds) on a fresh instance each time, best of ``--repeat``; the
instance's construction is not timed. Each instance has a name of its own, so
that no answer an earlier call cached (the load programs', per equal instance)
shortens a later one: every call is timed as a process's first. The earlier
commit is checked out with ``git worktree add`` into a temporary folder (its C
core built there when it has one) and removed after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs inside either package version: prints one JSON line {method: [best seconds, makespan, gap, peak KiB]}.
TIMER = r"""
import dataclasses, json, resource, sys, time
import themis_opt
from themis_opt.instance import After, Collective, Compute, Instance
try:
    from themis_opt.workloads.astra1 import task_graph
    from themis_opt.workloads.zoo import model_workload
except ImportError:  # before the workloads package
    from themis_opt.workloads import task_graph
    from themis_opt.zoo import model_workload

case, repeat, dense_tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
network = themis_opt.load_instance("themis_opt/suites/paper/paper-3d-sw8x8x8.json").network
MIB = 2**20


def build():
    if case == "transformer1t":
        return task_graph(model_workload("transformer1t"), network, passes=2, chunks=16)
    if case == "resnet50":
        return task_graph(model_workload("resnet50"), network, passes=2, chunks=64)
    if case == "allreduce1g":
        return Instance(network, (Collective("all_reduce", 2**30, 1024),), "allreduce1g")
    if case == "chain10k":
        return Instance(network, tuple(
            Collective("all_reduce", MIB, 4, id=f"c{i}", after=(After(f"c{i - 1}"),) if i else ())
            for i in range(10_000)
        ), "chain10k")
    if case == "dense":
        tasks = []
        for i in range(dense_tasks):
            after = tuple(After(f"x{j}") for j in range(i))
            tasks.append(Compute(1000.0, id=f"x{i}", after=after) if i % 2 else
                         Collective("all_reduce", MIB, 4, id=f"x{i}", after=after))
        return Instance(network, tuple(tasks), "dense")
    return themis_opt.load_instance("themis_opt/suites/quick/mixed-topology-s2-001.json")


out = {}
for method in ("baseline", "themis"):
    best, result = float("inf"), None
    for i in range(repeat):
        # a name of its own: an equal instance would find the answers of an earlier call in a cache
        instance = dataclasses.replace(build(), name=f"{case}-{method}-{i}")
        t0 = time.perf_counter()
        result = themis_opt.solve(instance, method=method, time_limit=10)
        best = min(best, time.perf_counter() - t0)
    out[method] = [best, result.makespan, result.gap, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]
print(json.dumps(out))
"""

CASES = ("resnet50", "allreduce1g", "transformer1t", "chain10k", "dense", "mixed-topology")


def _time(tree: Path, case: str, repeat: int, dense_tasks: int) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, "-c", TIMER, case, str(repeat), str(dense_tasks)],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"{tree}: {case} failed:\n{done.stderr[-2000:]}")
    data: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def _old_tree(rev: str, folder: Path) -> Path:
    tree = folder / "old"
    add = ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev]
    subprocess.run(add, check=True, capture_output=True)
    if (tree / "setup.py").exists():
        build = [sys.executable, "setup.py", "build_ext", "--inplace"]
        subprocess.run(build, cwd=tree, check=True, capture_output=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="99d703f", help="the earlier commit (default 99d703f)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dense-tasks", type=int, default=1415)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    cases = args.cases.split(",")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}; {platform.machine()}, {platform.python_version()}, {platform.node() or 'this machine'}")
    print(
        f"command: python -m bench.figures.bound_speed --old {args.old} --repeat {args.repeat} "
        f"--dense-tasks {args.dense_tasks} --cases {args.cases}\n"
    )
    print("| case | method | old (s) | now (s) | speed-up | old gap | now gap | old peak | now peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        tree = _old_tree(args.old, Path(tmp))
        try:
            for case in cases:
                old = _time(tree, case, args.repeat, args.dense_tasks)
                now = _time(ROOT, case, args.repeat, args.dense_tasks)
                for method in ("baseline", "themis"):
                    (t_old, _, g_old, m_old), (t_now, _, g_now, m_now) = old[method], now[method]
                    gaps = [f"{100 * g:.2f}%" if g is not None else "-" for g in (g_old, g_now)]
                    print(
                        f"| {case} | {method} | {t_old:.3f} | {t_now:.3f} | {t_old / t_now:.1f}x | {gaps[0]} | "
                        f"{gaps[1]} | {m_old / 1024:.0f} MiB | {m_now / 1024:.0f} MiB |",
                        flush=True,
                    )
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


if __name__ == "__main__":
    main()
