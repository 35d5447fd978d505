"""What the searches make of order counts that cost about the same in the load programs, measured.

    python -m bench.experiments.start_counts [--cuts 2,4] [--restarts 800] [--walk 8000] [--seeds 0,1]
                                       [--count 8] [--chunks 16] [--shape 4x8x8x4]

The 8-collective instance of ``bench.figures.exact_scale`` (or its variants). The assignment search starts from SCIP's
integer-program counts spread evenly over the chunks; a ``solve`` call may cut SCIP by its time
share before its node limit. Per source of counts (SCIP cut after each of ``--cuts`` seconds, SCIP at
its node limit, ``bounds.level_counts`` from those): their value in the fill-and-drain program, the
best of ``--restarts`` restarts alone (shuffles of the spread orders, timed with fifo and scf), and,
with ``--walk N``, the whole search of N simulations (2 workers). Restarts and walks have a fixed
number of simulations: each cell depends on its seed and counts alone. Gaps to the best lower bound.
"""

from __future__ import annotations

import argparse
import time

from bench.instances import eight_collectives
from themis_opt.bounds import compute_bounds, fill_drain_value, integer_load_bound
from themis_opt.budget import Deadline
from themis_opt.orders import Counts
from themis_opt.policies import spread_orders
from themis_opt.search import Strategy, improve_assignment
from themis_opt.search.counts import level_counts
from themis_opt.search.params import SearchParams

SEARCH = SearchParams()
ANNEALING = Strategy(SEARCH.annealing_restart_share, SEARCH.annealing_temperature, shared=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", default="2,4", help="seconds after which SCIP is cut, comma-separated")
    parser.add_argument("--restarts", type=int, default=800)
    parser.add_argument("--walk", type=int, default=0, help="simulations of a whole search (0: none)")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--count", type=int, default=8, help="all-reduces (exact_scale.py --variants)")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--shape", default="4x8x8x4")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    shape = tuple(int(n) for n in args.shape.split("x"))
    instance = eight_collectives(chunks=args.chunks, count=args.count, shape=shape)
    sources = []  # the cut runs first: answers decided by the solvers' own limits are cached per process
    for cut in (float(c) for c in args.cuts.split(",") if c):
        solution = integer_load_bound(instance, fill_drain=False, deadline=Deadline(time.perf_counter() + cut))
        if solution is not None:
            sources.append((f"SCIP cut at {cut:g} s", solution.counts))
    solution = integer_load_bound(instance, fill_drain=False)
    assert solution is not None
    sources.append(("SCIP at its node limit", solution.counts))
    level = level_counts(instance, solution)
    assert level is not None
    sources.append(("level counts", level))
    bound = compute_bounds(instance).best
    walk = f" | walk of {args.walk} | mean" if args.walk else ""
    print(f"| counts | in the program | restarts alone ({args.restarts}){walk} |")
    print("|---|---|---|" + ("---|---|" if args.walk else ""))
    restarts_only = Strategy(1.0, 0.0, shared=True)

    def gaps(counts: Counts, evaluations: int, strategy: Strategy) -> list[float]:
        """Per seed, the search's best from ``counts`` spread evenly, above the bound."""
        start = [spread_orders(instance, counts)]
        found = [
            improve_assignment(instance, start, seed=s, evaluations=evaluations, workers=2, strategy=strategy)
            for s in seeds
        ]
        return [100 * (f.makespan / bound - 1) for f in found if f is not None]

    for name, counts in sources:
        value = 100 * (fill_drain_value(instance, counts) / bound - 1)
        cells = [name, f"+{value:.4f}%", " / ".join(f"{g:.2f}%" for g in gaps(counts, args.restarts, restarts_only))]
        if args.walk:
            walks = gaps(counts, args.walk, ANNEALING)
            cells += [" / ".join(f"{g:.2f}%" for g in walks), f"{sum(walks) / len(walks):.2f}%"]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
