"""Would a bound over two dimensions (Johnson-type) close 4x4x4x16 at 16 chunks? Measured: no.

    python -m bench.experiments.relaxations [--instance 0] [--limit 20]

The exact model (``themis_opt.cpsat``) with the one-phase-at-a-time rule kept
on a subset of the dimensions only: every chunk still takes one order, its
phases still run one after another with their exact durations, but the other
dimensions run any number of phases at once. The model keeps the exact
model's per-dimension cuts and adds makespan >= fill-and-drain, both valid
for the exact problem, so its optimum is a lower bound of the exact optimum
and at least that of the pure relaxation: every bound built from the kept
dimensions alone (a two-machine flow-shop bound of Johnson's type, edge
finding on a pair) is at most it. Where its best objective equals
fill-and-drain, no such bound can do better. Each line: the subset kept, CP-SAT's status,
its bound and best objective (in us, with the exact quantum, 2 workers,
seed 0), and how far each is above the fill-and-drain bound.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

from ortools.sat.python import cp_model

from bench.instances import SHAPES, SIZES, network
from themis_opt.bounds import compute_bounds
from themis_opt.cpsat import CpsatModel, default_quantum, exact_quantum
from themis_opt.instance import Collective, Instance
from themis_opt.solving import solve


class Relaxed(CpsatModel):
    """The exact model with no-overlap only on the dimensions in ``keep``."""

    keep: tuple[int, ...] = ()

    def _resource_constraints(self) -> None:
        for d, intervals in enumerate(self.intervals):
            if d in self.keep and intervals:
                self.model.add_no_overlap(intervals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", type=int, default=0, help="index into exact_scale's shapes (0: 4x4x4x16)")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per subset")
    parser.add_argument("--triples", action="store_true", help="also keep three dimensions")
    args = parser.parse_args()
    shape, size = SHAPES[args.instance], SIZES[args.instance]
    instance = Instance(network(shape), (Collective("all_reduce", size, args.chunks),), "relaxations")
    fd = compute_bounds(instance).best
    upper = solve(instance, "balanced").makespan
    assert upper is not None
    quantum = exact_quantum(instance, upper) or default_quantum(upper)
    print(f"{'x'.join(map(str, shape))}, {size >> 20} MiB, {args.chunks} chunks: fill-and-drain {fd / 1e3:.3f} us")
    print("| dimensions kept | status | bound (us) | above fd | best (us) | above fd | wall (s) |")
    print("|---|---|---|---|---|---|---|")
    dims = range(len(shape))
    for r in (1, 2, 3) if args.triples else (1, 2):
        for keep in itertools.combinations(dims, r):
            Relaxed.keep = keep
            t0 = time.perf_counter()
            model = Relaxed(instance, quantum, math.ceil(upper / quantum) + 1)
            model.model.add(model.makespan >= math.floor(fd / quantum))
            solver = cp_model.CpSolver()
            solver.parameters.max_time_in_seconds = args.limit
            solver.parameters.num_workers = 2
            solver.parameters.random_seed = 0
            code = solver.solve(model.model)
            bound, best = solver.best_objective_bound * quantum, solver.objective_value * quantum
            # the fd cut is rounded down to the quantum: a hair below fd prints as 0.000%
            above = [round(100 * (v / fd - 1), 3) + 0.0 for v in (bound, best)]
            print(
                f"| {','.join(map(str, keep))} | {solver.status_name(code)} | {bound / 1e3:.3f} | "
                f"{above[0]:.3f}% | {best / 1e3:.3f} | {above[1]:.3f}% | "
                f"{time.perf_counter() - t0:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
