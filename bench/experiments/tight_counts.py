"""Is the fill-and-drain bound of the 16-chunk 4x4x4x16 all-reduce tight, and which counts reach it?

    python -m bench.experiments.tight_counts [--limit 150] [--seed 0] [--fixed 20]

1. A long cpsat call (``--limit`` seconds, 2 workers): where it ends, and when it met the bound.
2. Both order-count vectors, the fill-and-drain program's (the one the counts-fixed stage fixes)
   and that of the call's best schedule: per dimension, the least head, the load and the least
   tail (the program's terms; their sum is the dimension's bound), and the preemptive
   one-machine (Jackson) bound of each dimension for those counts.
3. CP-SAT with each vector fixed (the counts-fixed restriction, ``--fixed`` seconds, seeds 0-2,
   from the vector spread evenly and timed with fifo and scf): how far above the bound it ends.

Measured so before the at-bound stage existed (its questions come from this result): two
count vectors with the same load on every dimension, of which only the call's admits a schedule at
the bound. Since the at-bound stage the long call meets the bound within seconds, with whichever
of the program's optimal assignments admits it first.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from bench.instances import SHAPES, SIZES, network
from themis_opt.bounds import compute_bounds, integer_load_bound, order_profiles
from themis_opt.budget import Deadline
from themis_opt.cost import chunk_phases
from themis_opt.cpsat import solve_cpsat
from themis_opt.instance import ChunkClass, Collective, Instance
from themis_opt.pipeline import spread
from themis_opt.result import is_proven
from themis_opt.solving import solve

SHAPE = (4, 4, 4, 16)


def terms(instance: Instance, cls: ChunkClass, counts: dict[tuple[int, ...], int]) -> list[tuple[float, ...]]:
    """Per dimension: least head, load, least tail over the orders in use, and their sum (ns)."""
    profiles = order_profiles(instance)[cls]
    used = [p for o, p in profiles.items() if counts.get(o, 0) > 0]
    rows = []
    for d in range(instance.network.num_dims):
        head = min(p.head[d] for p in used if p.head[d] is not None)  # type: ignore[type-var]
        tail = min(p.tail[d] for p in used if p.tail[d] is not None)  # type: ignore[type-var]
        load = sum(counts[o] * p.busy[d] for o, p in profiles.items() if counts.get(o, 0) > 0)
        rows.append((head, load, tail, head + load + tail))  # type: ignore[operator]
    return rows


def jackson(instance: Instance, cls: ChunkClass, counts: dict[tuple[int, ...], int], d: int) -> float:
    """The preemptive one-machine bound of dimension ``d`` for these counts (ns): the largest
    h + q + (durations of d's phases with head >= h and tail >= q) over the heads h and tails q.
    """
    jobs = []  # (head, tail, duration) of every phase on d
    for order, n in counts.items():
        phases = chunk_phases(instance, cls.collective, cls.chunk_bytes, order)
        total, elapsed = sum(p.duration for p in phases), 0.0
        for p in phases:
            if p.dim == d:
                jobs += [(elapsed, total - elapsed - p.duration, p.duration)] * n
            elapsed += p.duration
    heads, tails = sorted({j[0] for j in jobs}), sorted({j[1] for j in jobs})
    return max((h + q + sum(p for r, t, p in jobs if r >= h and t >= q) for h in heads for q in tails), default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=float, default=150.0, help="seconds of the long cpsat call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixed", type=float, default=20.0, help="seconds of each counts-fixed run")
    args = parser.parse_args()
    size = SIZES[SHAPES.index(SHAPE)]
    instance = Instance(network(SHAPE), (Collective("all_reduce", size, 16),), "4d-4x4x4x16-256MiB-16c")
    cls = instance.chunk_classes[0]
    memo: dict = {}
    bound = compute_bounds(instance, Deadline.after(8), full=True, memo=memo).best
    program = integer_load_bound(instance, fill_drain=True, memo=memo)
    assert program is not None
    t0 = time.perf_counter()
    result = solve(instance, "cpsat", time_limit=args.limit, workers=2, seed=args.seed)
    assert result.schedule is not None
    met = next((t for t, m in result.trajectory if is_proven(m, bound, instance.origin_ns)), None)
    print(f"## {instance.name}: fill-and-drain bound {bound / 1e3:.3f} us\n")
    print(f"cpsat, {args.limit:g} s, seed {args.seed}: {result.makespan / 1e3:.3f} us, {result.status.value}, ", end="")
    print(f"{time.perf_counter() - t0:.1f} s" + (f"; met the bound at {met:.1f} s" if met is not None else ""))
    vectors = {
        "fill-and-drain program": dict(program.counts[cls]),
        "cpsat's best schedule": dict(Counter(result.schedule.orders.values())),
    }
    print("\n| counts | orders in use | dimension: head + load + tail = bound (us) | Jackson per dimension (us) |")
    print("|---|---|---|---|")
    for name, counts in vectors.items():
        used = ", ".join(f"{''.join(map(str, o))}x{n}" for o, n in sorted(counts.items()) if n)
        dims = "; ".join(
            f"{d}: {h / 1e3:.3f} + {ld / 1e3:.3f} + {t / 1e3:.3f} = {s / 1e3:.3f}"
            for d, (h, ld, t, s) in enumerate(terms(instance, cls, counts))
        )
        bounds = ", ".join(f"{jackson(instance, cls, counts, d) / 1e3:.3f}" for d in range(instance.network.num_dims))
        print(f"| {name} | {used} | {dims} | {bounds} |")
    print(f"\n| counts fixed | seed | above the bound after {args.fixed:g} s | wall (s) |\n|---|---|---|---|")
    for name, counts in vectors.items():
        full = {cls: {o: counts.get(o, 0) for o in program.counts[cls]}}
        for seed in range(3):
            t = time.perf_counter()
            start = spread(instance, full, Deadline())
            outcome = solve_cpsat(
                instance,
                start,
                deadline=Deadline.after(args.fixed),
                workers=2,
                seed=seed,
                quantum_ns=None,
                log=False,
                t0=t,
                lower_bound=bound,
                counts=full,
            )
            above = 100 * (outcome.schedule.makespan / bound - 1)
            print(f"| {name} | {seed} | {above:.3f}% | {time.perf_counter() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
