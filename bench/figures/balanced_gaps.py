"""How far balanced lands from the best lower bound, and how long it takes.

    python -m bench.figures.balanced_gaps

The paper suite, and one all-reduce in 64 chunks on each of the five 4D
networks of ``bench.instances`` (the sizes of ``SIZES``). Per instance: the
best lower bound (``compute_bounds`` with 10 s), ``solve(instance,
"balanced")``'s gap to it and wall time, and the same without the short
search (``pipeline.balanced_evaluations = 0``: the policy before it). The
goal: within 1% everywhere, well under a second.
"""

from __future__ import annotations

import dataclasses
import time

from bench.instances import SHAPES, SIZES, all_reduce
from themis_opt.bounds import compute_bounds
from themis_opt.budget import Deadline
from themis_opt.formats.native import load_instance
from themis_opt.instance import Instance
from themis_opt.params import SolveParams
from themis_opt.solving import solve
from themis_opt.suites import suite_folder


def instances() -> list[Instance]:
    paper = [load_instance(p) for p in sorted(suite_folder("paper").glob("*.json"))]
    return paper + [all_reduce(shape, size, 64) for shape, size in zip(SHAPES, SIZES)]


def main() -> None:
    before = SolveParams(pipeline=dataclasses.replace(SolveParams().pipeline, balanced_evaluations=0))
    print("| instance | best bound (ns) | balanced gap | wall (s) | without the short search |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for instance in instances():
        bound = compute_bounds(instance, Deadline.after(10.0)).best
        t0 = time.perf_counter()
        result = solve(instance, "balanced")
        wall = time.perf_counter() - t0
        assert result.makespan is not None
        old = solve(instance, "balanced", params=before).makespan
        assert old is not None
        gap = result.makespan / bound - 1
        worst = max(worst, gap)
        print(
            f"| {instance.name} | {bound:.1f} | {100 * gap:.2f}% | {wall:.2f} | {100 * (old / bound - 1):.2f}% |",
            flush=True,
        )
    print(f"\nworst gap {100 * worst:.2f}%")


if __name__ == "__main__":
    main()
