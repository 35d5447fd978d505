"""Time to proven optimality of the CP-SAT method.

    python -m bench.figures.exact_time [--workers 2] [--time-limit 60] [--seed 0]

3-dimension switch networks of 4x4x4 and 8x8x8 NPUs at 200/100/50 GB/s,
500 ns latency, one 1 GiB all-reduce in 16 chunks. Reports, per network,
the heuristics' makespans, the lower bound, the CP-SAT makespan and status,
and the wall-clock time of `solve(..., "cpsat")` (bounds, warm start,
search and re-timing included) for each of `--repeat` seeds. The figures are
measured on this machine.
"""

from __future__ import annotations

import argparse
import platform
import time

from bench.instances import first_call
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.solving import solve
from themis_opt.validator import validate


def instance(n: int, chunks: int = 16) -> Instance:
    dims = tuple(Dimension(n, "switch", b, 500.0) for b in (200.0, 100.0, 50.0))
    return Instance(Network(dims), (Collective("all_reduce", 2**30, chunks),), f"sw{n}x{n}x{n}-{chunks}c")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="CP-SAT runs per network (seeds seed..seed+repeat-1)")
    args = parser.parse_args()
    print(
        f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, "
        f"workers={args.workers}, seed={args.seed}"
    )
    print("| network | baseline | themis-scf | balanced | lower bound | cpsat | status | time to proof (s), per run |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (4, 8):
        inst = instance(n)
        spans = {m: solve(inst, m).makespan for m in ("baseline", "themis", "balanced")}
        times = []
        for seed in range(args.seed, args.seed + args.repeat):
            start = time.perf_counter()
            cold = first_call(inst, f"cpsat seed {seed}")
            result = solve(cold, "cpsat", workers=args.workers, seed=seed, time_limit=args.time_limit)
            times.append(time.perf_counter() - start)
            assert result.schedule is not None and validate(inst, result.schedule) == []
            assert result.status.value == "optimal", f"{inst.name} seed {seed}: {result.status.value}"
        us = 1e-3
        print(
            f"| {inst.name} | {spans['baseline'] * us:.1f} µs | {spans['themis'] * us:.1f} µs | "
            f"{spans['balanced'] * us:.1f} µs | {result.lower_bound * us:.1f} µs | {result.makespan * us:.1f} µs | "
            f"{result.status.value} | {', '.join(f'{t:.2f}' for t in times)} |"
        )


if __name__ == "__main__":
    main()
