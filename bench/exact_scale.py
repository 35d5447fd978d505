"""Where the exact solver stands at scale (issue 11's targets), measured.

    python bench/exact_scale.py [--workers 2] [--quick]

* 4D networks (4 dimensions of 4 to 16 NPUs, 400/200/100/50 GB/s), one all-reduce of 256 MiB to
  1 GiB in 16 chunks: time to a proof within 10 s (target: optimal in at most 10 s each);
* the same at 32 chunks, 60 s (target: optimal or within 0.1%);
* 8 all-reduces of 16 to 128 MiB issued 150 us apart, 16 chunks each, on a 4D network, 60 s
  (target: within 1% of the best lower bound).

Each line: the heuristics' best gap, cpsat's status and gap, and the wall time of the whole
`solve(..., "cpsat")` call. `--quick` halves every time limit.
"""

from __future__ import annotations

import argparse
import sys
import time

from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.solve import solve

MIB = 2**20
SHAPES = ((4, 4, 4, 16), (4, 8, 8, 4), (8, 4, 4, 8), (16, 4, 4, 4), (4, 16, 4, 4))
SIZES = (256 * MIB, 512 * MIB, 1024 * MIB, 256 * MIB, 1024 * MIB)


def network(shape: tuple[int, ...]) -> Network:
    return Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in zip(shape, (400.0, 200.0, 100.0, 50.0))))


def report(name: str, instance: Instance, limit: float, workers: int) -> None:
    heuristics = min(solve(instance, m).makespan or float("inf") for m in ("baseline", "themis", "balanced"))
    t0 = time.perf_counter()
    result = solve(instance, "cpsat", time_limit=limit, workers=workers, seed=0)
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
    args = parser.parse_args()
    scale = 0.5 if args.quick else 1.0
    print("| instance | limit (s) | best heuristic gap | cpsat status | cpsat gap | wall (s) |")
    print("|---|---|---|---|---|---|")
    for chunks, limit in ((16, 10.0), (32, 60.0)):
        for shape, size in zip(SHAPES, SIZES):
            name = f"4d-{'x'.join(map(str, shape))}-{size // MIB}MiB-{chunks}c"
            instance = Instance(network(shape), (Collective("all_reduce", size, chunks),), name)
            report(name, instance, limit * scale, args.workers)
    many = eight_collectives()
    report(many.name, many, 60.0 * scale, args.workers)


def eight_collectives() -> Instance:
    """8 all-reduces of 16 to 128 MiB, 16 chunks each, issued 150 us apart on 4x8x8x4."""
    sizes = (16, 32, 64, 128, 16, 32, 64, 128)
    return Instance(
        network((4, 8, 8, 4)),
        tuple(Collective("all_reduce", s * MIB, 16, issue_ns=150_000.0 * i) for i, s in enumerate(sizes)),
        "4d-8-collectives",
    )


if __name__ == "__main__":
    main()
