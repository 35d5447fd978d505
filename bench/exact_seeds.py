"""One stage of cpsat, measured: proofs on the 16-chunk 4D all-reduces over several seeds.

    cd bench && python exact_seeds.py [--stage sequence|counts-fixed|at-bound] [--seeds 0,1,2] [--limit 10]

The five 16-chunk instances of ``bench/exact_scale.py``, each solved by
``solve(..., "cpsat", workers=2)`` once per seed, with the stage (the
default) and without it (its share set to 0): the sequence search
(``SEQUENCE_SHARE``), the counts-fixed stage (``COUNTS_FIXED_SHARE``) or the
at-bound stage (``AT_BOUND_SHARE``). Each
cell: the gap to the best lower bound and the wall time; ``*`` marks a proven
optimum. CP-SAT with 2 workers is not deterministic: this is a distribution,
not a figure per seed.
"""

from __future__ import annotations

import argparse
import time

from exact_scale import MIB, SHAPES, SIZES, network

from themis_opt import solve as solve_module
from themis_opt.instance import Collective, Instance

# stage -> its share in solve
STAGES = {"sequence": "SEQUENCE_SHARE", "counts-fixed": "COUNTS_FIXED_SHARE", "at-bound": "AT_BOUND_SHARE"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=sorted(STAGES), default="sequence")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--limit", type=float, default=10.0)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    share_name = STAGES[args.stage]
    default = getattr(solve_module, share_name)
    print(f"| instance | {args.stage} stage | " + " | ".join(f"seed {s}" for s in seeds) + " | proven |")
    print("|---|---|" + "---|" * len(seeds) + "---|")
    for shape, size in zip(SHAPES, SIZES):
        name = f"4d-{'x'.join(map(str, shape))}-{size // MIB}MiB-16c"
        instance = Instance(network(shape), (Collective("all_reduce", size, 16),), name)
        for share in (default, 0.0):
            setattr(solve_module, share_name, share)
            cells, proven = [], 0
            for seed in seeds:
                t0 = time.perf_counter()
                result = solve_module.solve(instance, "cpsat", time_limit=args.limit, workers=2, seed=seed)
                wall = time.perf_counter() - t0
                star = "*" if result.status == "optimal" else ""
                proven += result.status == "optimal"
                cells.append(f"{100 * (result.gap or 0):.3f}%{star} ({wall:.1f} s)")
            stage = "yes" if share else "no"
            print(f"| {name} | {stage} | " + " | ".join(cells) + f" | {proven}/{len(seeds)} |", flush=True)
    setattr(solve_module, share_name, default)


if __name__ == "__main__":
    main()
