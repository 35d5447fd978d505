"""The assignment search's annealing on 8 collectives, measured: temperature, and one walk or one per worker.

    python -m bench.experiments.annealing [--evaluations 8000] [--seeds 0,1,2] [--temperatures 0.0015,0.003]
                                    [--walks shared,each] [--level] [--shape 4x8x8x4] [--chunks 16]

The 8-collective instance of ``bench.figures.exact_scale`` (1,024 phases; ``--shape`` and
``--chunks`` for its variants), the assignment search alone
(``search.improve_assignment``, 2 workers) from the starts cpsat gave it before the level
counts: the best heuristic's orders and the fill-and-drain counts spread
evenly; ``--level`` adds the third it has since, the level counts
(``search.counts.level_counts``) spread evenly. ``shared``: one walk of ``--evaluations`` simulations
timed by both workers; ``each``: one walk of half as many per worker. No
deadline (the heuristics get 600 s, more than they take): every cell is
decided by its seed alone and is the same on every run. Each cell: the gap to the best lower bound, and the wall time.
"""

from __future__ import annotations

import argparse
import time

from bench.instances import eight_collectives
from themis_opt.bounds import Memo, compute_bounds, integer_load_bound
from themis_opt.policies import spread_orders
from themis_opt.search import Strategy, improve_assignment
from themis_opt.search.counts import level_counts
from themis_opt.search.params import SearchParams
from themis_opt.solving import solve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=8000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--temperatures", default=f"{SearchParams().annealing_temperature},0.003")
    parser.add_argument("--walks", default="shared,each")
    parser.add_argument("--level", action="store_true", help="start from the level counts too")
    parser.add_argument("--shape", default="4x8x8x4")
    parser.add_argument("--chunks", type=int, default=16)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    instance = eight_collectives(chunks=args.chunks, shape=tuple(int(n) for n in args.shape.split("x")))
    # a generous limit: at the default 10 s balanced's load programs are cut short, and its schedule varies
    heuristics = [solve(instance, m, time_limit=600).schedule for m in ("baseline", "themis", "balanced")]
    warm = min((s for s in heuristics if s is not None), key=lambda s: s.makespan)
    # with --level as in solve since then: the bounds leave the searches' counts in the call's memo
    # (SCIP's, where fill-and-drain's cost more); before, the searches started from fill-and-drain's
    memo: Memo | None = {} if args.level else None
    bound = compute_bounds(instance, memo=memo).best
    counts = integer_load_bound(instance, fill_drain=True, memo=memo)
    assert counts is not None
    starts = [warm.orders, spread_orders(instance, counts.counts)]
    if args.level:
        level = level_counts(instance, counts)
        assert level is not None
        starts.append(spread_orders(instance, level))
    print(f"| walks | temperature | {' | '.join(f'seed {s}' for s in seeds)} | mean |")
    print("|---|---|" + "---|" * (len(seeds) + 1))
    for walks in args.walks.split(","):
        shared = walks == "shared"
        evaluations = args.evaluations if shared else args.evaluations // 2
        for temperature in (float(t) for t in args.temperatures.split(",")):
            strategy = Strategy(SearchParams().annealing_restart_share, temperature, shared)
            gaps, cells = [], []
            for seed in seeds:
                t0 = time.perf_counter()
                found = improve_assignment(
                    instance, starts, seed=seed, evaluations=evaluations, workers=2, strategy=strategy
                )
                assert found is not None
                gaps.append(100 * (found.makespan / bound - 1))
                cells.append(f"{gaps[-1]:.2f}% ({time.perf_counter() - t0:.0f} s)")
            mean = sum(gaps) / len(gaps)
            print(f"| {walks} | {100 * temperature:g}% | {' | '.join(cells)} | {mean:.2f}% |", flush=True)


if __name__ == "__main__":
    main()
