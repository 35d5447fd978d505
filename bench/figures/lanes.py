"""The sequence search where dimensions run several chunks at once (its lanes), on and off.

    python -m bench.figures.lanes [--limit 20] [--at-once 2,3]

Networks as ASTRA-sim 2.x's congestion-unaware backend runs them, with
``active_chunks`` 2 and 3 (``active-chunks-per-dimension``):

* small: ring 4 x switch 4 (200/50 GB/s, 500 ns a hop), an all-reduce of
  64 MiB in 6 chunks at 0, a reduce-scatter of 32 MiB in 4 at 5 us and an
  all-reduce of 16 MiB in 3 at 20 us (44 phases);
* medium: ring 4 x switch 8 x ring 4 (200/100/50 GB/s), all-reduces of
  256 MiB in 8 chunks at 0 and 64 MiB in 4 at 20 us (72 phases).

Each line: the best heuristic, the assignment search from Themis's and
balanced's orders (3,000 simulations), the sequence search from its schedule
(20,000 candidates, seed 0), and ``cpsat`` (``--limit`` seconds, 2 workers,
seed 0) with the sequence stage on (the default) and off
(``PipelineParams.sequence.enabled = False``); every gap to the best lower
bound of the two cpsat calls.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from bench.instances import first_call
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.params import PipelineParams, SolveParams
from themis_opt.search import improve_assignment, improve_sequences
from themis_opt.solving import solve
from themis_opt.validator import validate

MIB = 2**20


def instance(shape: str, at_once: int) -> Instance:
    if shape == "small":
        dims = (Dimension(4, "ring", 200.0, 500.0), Dimension(4, "switch", 50.0, 500.0))
        collectives = (
            Collective("all_reduce", 64 * MIB, 6),
            Collective("reduce_scatter", 32 * MIB, 4, issue_ns=5e3),
            Collective("all_reduce", 16 * MIB, 3, issue_ns=2e4),
        )
    else:
        dims = (
            Dimension(4, "ring", 200.0, 500.0),
            Dimension(8, "switch", 100.0, 500.0),
            Dimension(4, "ring", 50.0, 500.0),
        )
        collectives = (Collective("all_reduce", 256 * MIB, 8), Collective("all_reduce", 64 * MIB, 4, issue_ns=2e4))
    network = Network(dims, congestion_unaware=True, active_chunks=at_once)
    return Instance(network, collectives, f"{shape}-{at_once}-at-once")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=20.0, help="seconds per solve (default 20)")
    parser.add_argument("--at-once", default="2,3", help="chunks at once per dimension (default 2,3)")
    args = parser.parse_args()
    pipeline = PipelineParams()
    on = SolveParams()
    off = SolveParams(
        pipeline=dataclasses.replace(pipeline, sequence=dataclasses.replace(pipeline.sequence, enabled=False))
    )
    print(
        "| instance | chunks at once | best heuristic | assignment search | + sequence search | cpsat | "
        "cpsat without the sequence stage |"
    )
    print("|---|---|---|---|---|---|---|")
    for shape in ("small", "medium"):
        for k in (int(n) for n in args.at_once.split(",")):
            case = instance(shape, k)
            heuristics = [solve(case, m).schedule for m in ("themis", "balanced")]
            starts = [s for s in heuristics if s is not None]
            assigned = improve_assignment(case, [s.orders for s in starts], evaluations=3000)
            assert assigned is not None
            sequenced = improve_sequences(case, [assigned], seed=0, evaluations=20_000)
            assert sequenced is not None
            results = [
                solve(first_call(case, tag), "cpsat", time_limit=args.limit, workers=2, seed=0, params=params)
                for tag, params in (("on", on), ("off", off))
            ]
            schedules = [*starts, assigned, sequenced, *(r.schedule for r in results)]
            assert all(s is not None and validate(case, s) == [] for s in schedules)
            bound = max(r.lower_bound or 0.0 for r in results)
            best = min(s.makespan for s in starts)
            cells = [best, assigned.makespan, sequenced.makespan, *(r.makespan or math.inf for r in results)]
            gaps = " | ".join(f"{100 * (m / bound - 1):.2f}%" for m in cells)
            print(f"| {case.num_phases} phases, {shape} | {k} | {gaps} |", flush=True)


if __name__ == "__main__":
    main()
