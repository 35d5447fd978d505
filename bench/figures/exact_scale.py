"""Where the exact solver stands at scale, measured against its targets.

    python -m bench.figures.exact_scale [--workers 2] [--quick] [--variants]

* 4D networks (4 dimensions of 4 to 16 NPUs, 400/200/100/50 GB/s), one all-reduce of 256 MiB to
  1 GiB in 16 chunks: time to a proof within 10 s (target: optimal in at most 10 s each);
* the same at 32 chunks, 60 s (target: optimal or within 0.1%);
* 8 all-reduces of 16 to 128 MiB issued 150 us apart, 16 chunks each, on a 4D network, 60 s
  (target: within 1% of the best lower bound).

Each line: the heuristics' best gap, cpsat's status and gap, and the wall time of the whole
`solve(..., "cpsat")` call. `--quick` halves every time limit. `--variants` runs only the
collectives issued over time in other sizes of that target: 32 chunks each, 16 all-reduces, and
the 8 on 4x4x4x16.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench.instances import SHAPES, SIZES, all_reduce, eight_collectives, first_call
from themis_opt.instance import Instance
from themis_opt.solving import solve


def report(name: str, instance: Instance, limit: float, workers: int) -> None:
    heuristics = min(solve(instance, m).makespan or float("inf") for m in ("baseline", "themis", "balanced"))
    t0 = time.perf_counter()
    result = solve(first_call(instance, "cpsat"), "cpsat", time_limit=limit, workers=workers, seed=0)
    wall = time.perf_counter() - t0
    bound = result.lower_bound
    # stderr: what the gaps are made of
    print(f"{name}: best heuristic {heuristics:.3f} ns, cpsat {result.makespan} ns, {result.bounds}", file=sys.stderr)
    print(
        f"| {name} | {limit:g} | {100 * (heuristics / bound - 1):.2f}% | {result.status} | "
        f"{100 * (result.gap or 0):.3f}% | {wall:.1f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--variants", action="store_true")
    args = parser.parse_args()
    scale = 0.5 if args.quick else 1.0
    if args.variants:
        print("| instance | limit (s) | best heuristic gap | cpsat status | cpsat gap | wall (s) |")
        print("|---|---|---|---|---|---|")
        for instance in (
            eight_collectives(chunks=32),
            eight_collectives(count=16),
            eight_collectives(shape=(4, 4, 4, 16)),
        ):
            report(instance.name, instance, 60.0 * scale, args.workers)
        return
    print("| instance | limit (s) | best heuristic gap | cpsat status | cpsat gap | wall (s) |")
    print("|---|---|---|---|---|---|")
    for chunks, limit in ((16, 10.0), (32, 60.0)):
        for shape, size in zip(SHAPES, SIZES):
            instance = all_reduce(shape, size, chunks)
            report(instance.name, instance, limit * scale, args.workers)
    many = eight_collectives()
    report(many.name, many, 60.0 * scale, args.workers)


if __name__ == "__main__":
    main()
