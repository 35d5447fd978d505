"""Would a per-dimension head-body-tail bound close the 16-chunk proofs? Measured: no.

    python -m bench.experiments.jackson_bound

For each 16-chunk instance of ``bench.figures.exact_scale``: the fill-and-drain
bound against the strongest per-dimension bound we know, the preemptive
one-machine bound (Jackson's) with every phase's own head and tail: for every
dimension d and every pair of levels (h, q) among its phases' heads and tails,

    makespan >= h + q + sum of the durations of d's phases with head >= h and tail >= q,

minimised over the order counts (an integer program, CP-SAT, 2 workers, times
rounded down to 0.001 ns). It is not part of the solver: on every instance it
equals fill-and-drain, so the open gaps need a bound that couples dimensions.
"""

from __future__ import annotations

import math
import time

from ortools.sat.python import cp_model

from bench.instances import MIB, SHAPES, SIZES, network
from themis_opt.bounds import integer_load_bound
from themis_opt.bounds.formulas import load_origin
from themis_opt.cost import chunk_phases
from themis_opt.instance import Collective, Instance
from themis_opt.sim.model import collective_releases

UNIT = 1e-3  # ns


def jackson_bound(instance: Instance, limit: float = 60.0) -> tuple[float, str]:
    """The preemptive per-dimension bound over the order counts, in ns, and CP-SAT's status."""
    releases = collective_releases(instance)
    origin = load_origin(instance)

    def q(ns: float) -> int:
        return math.floor(ns / UNIT)

    m = cp_model.CpModel()
    x = {}
    phases: dict[int, list[tuple[object, int, int, int]]] = {}  # per dimension: (count key, head, duration, tail)
    for cls in instance.chunk_classes:
        n = len(cls.chunks)
        for order in instance.orders[cls.collective]:
            key = (cls, order)
            x[key] = m.new_int_var(0, n, "x")
            plan = chunk_phases(instance, cls.collective, cls.chunk_bytes, order)
            total, elapsed = sum(p.duration for p in plan), 0.0
            for p in plan:
                head = releases[cls.collective] + elapsed - origin
                elapsed += p.duration
                phases.setdefault(p.dim, []).append((key, q(head), q(p.duration), q(total - elapsed)))
        m.add(sum(x[(cls, o)] for o in instance.orders[cls.collective]) == n)
    makespan = m.new_int_var(0, 2**40, "makespan")  # 2^40 units of 0.001 ns: 1.1 s, far above these makespans
    for on_d in phases.values():
        for h in sorted({head for _, head, _, _ in on_d}):
            for t in sorted({tail for _, _, _, tail in on_d}):
                weight: dict[object, int] = {}
                for key, head, duration, tail in on_d:
                    if head >= h and tail >= t:
                        weight[key] = weight.get(key, 0) + duration
                if weight:
                    m.add(makespan >= h + t + sum(w * x[key] for key, w in weight.items()))  # type: ignore[index]
    m.minimize(makespan)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.max_time_in_seconds = limit
    code = solver.solve(m)
    return origin + solver.best_objective_bound * UNIT, solver.status_name(code)


def main() -> None:
    print("| instance | fill-and-drain | Jackson per dimension | status | time |")
    print("|---|---|---|---|---|")
    for shape, size in zip(SHAPES, SIZES):
        name = f"4d-{'x'.join(map(str, shape))}-{size // MIB}MiB-16c"
        instance = Instance(network(shape), (Collective("all_reduce", size, 16),), name)
        fd = integer_load_bound(instance, fill_drain=True)
        t0 = time.perf_counter()
        bound, status = jackson_bound(instance)
        fd_us = f"{fd.bound / 1e3:.3f} us" if fd is not None else "-"
        print(f"| {name} | {fd_us} | {bound / 1e3:.3f} us | {status} | {time.perf_counter() - t0:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
