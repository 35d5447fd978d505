"""How long the load programs take, and what they prove, on the 4D all-reduces of exact_scale.py.

    python -m bench.figures.load_programs

For each instance (16 and 32 chunks): the integer load program (SCIP, node-limited), the
fill-and-drain program (CP-SAT, one worker, work-limited) on its own, and whether each proved
its optimum. Every call starts from empty caches; wall times on this machine.
"""

from __future__ import annotations

import time

from bench.instances import MIB, SHAPES, SIZES, all_reduce, network
from themis_opt.bounds import programs as bounds
from themis_opt.budget import Deadline
from themis_opt.instance import Collective, Instance


def main() -> None:
    print("| instance | ip (SCIP) | time | proven | fill-and-drain (CP-SAT) | time | proven |")
    print("|---|---|---|---|---|---|---|")
    bounds.lp_bound(Instance(network(SHAPES[0]), (Collective("all_reduce", MIB, 2),)))  # imports outside the timings
    bounds._fill_drain_program(
        Instance(network(SHAPES[0]), (Collective("all_reduce", MIB, 2),)), None, Deadline(), bounds.BOUNDS
    )
    for chunks in (16, 32):
        for shape, size in zip(SHAPES, SIZES):
            instance = all_reduce(shape, size, chunks)
            name = instance.name
            t0 = time.perf_counter()
            ip = bounds._plain_program(instance, Deadline(), bounds.BOUNDS)
            t1 = time.perf_counter()
            fd = bounds._fill_drain_program(instance, None, Deadline(), bounds.BOUNDS)
            t2 = time.perf_counter()
            assert ip is not None and fd is not None
            print(
                f"| {name} | {ip.bound / 1e3:.3f} us | {t1 - t0:.2f} s | {ip.optimal} | "
                f"{fd.bound / 1e3:.3f} us | {t2 - t1:.2f} s | {fd.optimal} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
