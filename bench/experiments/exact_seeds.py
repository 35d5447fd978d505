"""One stage of cpsat, measured: proofs on the 16-chunk 4D all-reduces over several seeds.

    python -m bench.experiments.exact_seeds [--stage sequence|counts-fixed|at-bound] [--seeds 0,1,2] [--limit 10]

The five 16-chunk instances of ``bench.figures.exact_scale``, each solved by
``solve(..., "cpsat", workers=2)`` once per seed, with the stage (the
default) and without it (``enabled = false`` in its
:class:`~themis_opt.params.Stage`): the sequence search, the counts-fixed
stage or the at-bound stage. Each
cell: the gap to the best lower bound and the wall time; ``*`` marks a proven
optimum. CP-SAT with 2 workers is not deterministic: this is a distribution,
not a figure per seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from bench.instances import SHAPES, SIZES, all_reduce
from themis_opt.params import PipelineParams, SolveParams
from themis_opt.solving import solve

# stage -> its field of PipelineParams
STAGES = {"sequence": "sequence", "counts-fixed": "counts_fixed", "at-bound": "at_bound"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=sorted(STAGES), default="sequence")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--limit", type=float, default=10.0)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    field = STAGES[args.stage]
    stage = getattr(PipelineParams(), field)
    off = SolveParams(
        pipeline=dataclasses.replace(PipelineParams(), **{field: dataclasses.replace(stage, enabled=False)})
    )
    print(f"| instance | {args.stage} stage | " + " | ".join(f"seed {s}" for s in seeds) + " | proven |")
    print("|---|---|" + "---|" * len(seeds) + "---|")
    for shape, size in zip(SHAPES, SIZES):
        instance = all_reduce(shape, size, 16)
        for params in (SolveParams(), off):
            cells, proven = [], 0
            for seed in seeds:
                t0 = time.perf_counter()
                result = solve(instance, "cpsat", time_limit=args.limit, workers=2, seed=seed, params=params)
                wall = time.perf_counter() - t0
                star = "*" if result.status == "optimal" else ""
                proven += result.status == "optimal"
                cells.append(f"{100 * (result.gap or 0):.3f}%{star} ({wall:.1f} s)")
            ran = "yes" if params is not off else "no"
            print(f"| {instance.name} | {ran} | " + " | ".join(cells) + f" | {proven}/{len(seeds)} |", flush=True)


if __name__ == "__main__":
    main()
