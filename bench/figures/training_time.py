"""ResNet-50 over two passes at 64 chunks on a 512-NPU 3D network: how long each method takes.

    python -m bench.figures.training_time [--cpsat-limit 60] [--network instances/paper/paper-3d-sw8x8x8.json]

Builds the task graph with the model zoo (`themis-opt workload resnet50`), then times the
baseline and Themis simulations (goal: under 2 s each) and a CP-SAT run with its time limit,
reporting each makespan, the iteration time (last pass) and CP-SAT's gap to the best lower bound.
"""

from __future__ import annotations

import argparse
import time

from themis_opt.bounds import compute_bounds
from themis_opt.budget import Deadline
from themis_opt.formats.native import load_instance
from themis_opt.metrics import iteration_metrics
from themis_opt.solving import solve
from themis_opt.suites import suite_folder
from themis_opt.workloads.astra1 import task_graph
from themis_opt.workloads.zoo import model_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpsat-limit", type=float, default=60.0)
    parser.add_argument("--network", default=str(suite_folder("paper") / "paper-3d-sw8x8x8.json"))
    args = parser.parse_args()
    network = load_instance(args.network).network
    t0 = time.perf_counter()
    instance = task_graph(model_workload("resnet50"), network, passes=2, chunks=64, name="resnet50-2p")
    print(
        f"task graph: {len(instance.tasks)} tasks, {instance.num_phases} phases, "
        f"built in {time.perf_counter() - t0:.2f} s"
    )
    print("| method | wall time (s) | makespan (ms) | iteration (ms) | status | gap |")
    print("|---|---|---|---|---|---|")
    bounds = compute_bounds(instance, Deadline.after(30))
    for method, limit in (("baseline", 10.0), ("themis", 10.0), ("cpsat", args.cpsat_limit)):
        t0 = time.perf_counter()
        result = solve(instance, method, time_limit=limit, workers=2, bounds=None if method == "cpsat" else bounds)
        wall = time.perf_counter() - t0
        metrics = iteration_metrics(instance, result.schedule) if result.schedule is not None else None
        gap = f"{100 * result.gap:.2f}%" if result.gap is not None else "-"
        span = f"{result.makespan / 1e6:.4f}" if result.makespan else "-"
        iteration = f"{metrics.iteration_ns / 1e6:.4f}" if metrics else "-"
        print(f"| {method} | {wall:.2f} | {span} | {iteration} | {result.status} | {gap} |", flush=True)
        if result.note:
            print(f"  note: {result.note}")


if __name__ == "__main__":
    main()
