"""Does every method keep its --time-limit on hard instances? Whole-process wall time per run.

    python -m bench.figures.time_limits                      # limits 2, 5, 10 s; every method and all
    python -m bench.figures.time_limits --limits 2 --methods themis,cpsat

Each run is ``themis-opt solve INSTANCE --method M --time-limit T`` in a fresh
process (interpreter start and imports included). The goal is a wall time of
at most T. The instances are written to a temporary folder:

* 6d: 6 dimensions of 4 NPUs, one 1 GiB all-reduce in 32 chunks;
* 8d: 8 dimensions of 2 NPUs, one all-reduce in 4 chunks (8! orders per chunk);
* 16coll: 16 all-reduces of 16 chunks issued 100 us apart on a 4D network;
* 4096c: one all-reduce in 4096 chunks on a 4D network;
* maxphases: one all-reduce on 4 dimensions with the most chunks allowed (2^20 phases);
* 1e6c: one all-reduce in 1,000,000 chunks (rejected at load: exit 2);
* chain10k: 10,000 all-reduces of 1 MiB in 2 chunks on the 4D network (160,000 phases), each waiting for the one before;
* dense1m: 1,415 tasks, compute tasks and all-reduces of 1 MiB in 4 chunks in turn, each waiting for
  every task before it (1,000,405 dependencies).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from themis_opt.formats.native import instance_to_dict
from themis_opt.instance import MAX_PHASES, After, Collective, Compute, Dimension, Instance, Network

GIB = 2**30


def _net(sizes: list[int], bandwidths: list[float]) -> Network:
    return Network(tuple(Dimension(n, "ring", b, 500.0) for n, b in zip(sizes, bandwidths)))


def instances() -> dict[str, dict[str, object]]:
    four = _net([4, 8, 8, 16], [400, 200, 100, 50])
    docs = {
        "6d": instance_to_dict(
            Instance(_net([4] * 6, [400, 300, 200, 150, 100, 50]), (Collective("all_reduce", GIB, 32),), "6d")
        ),
        "8d": instance_to_dict(
            Instance(_net([2] * 8, [400, 350, 300, 250, 200, 150, 100, 50]), (Collective("all_reduce", GIB, 4),), "8d")
        ),
        "16coll": instance_to_dict(
            Instance(four, tuple(Collective("all_reduce", 64 * 2**20, 16, issue_ns=100_000.0 * i) for i in range(16)))
        ),
        "4096c": instance_to_dict(Instance(four, (Collective("all_reduce", GIB, 4096),), "4096c")),
        "maxphases": instance_to_dict(Instance(four, (Collective("all_reduce", GIB, MAX_PHASES // 8),), "maxphases")),
    }
    chain = tuple(
        Collective("all_reduce", 2**20, 2, id=f"c{i}", after=(After(f"c{i - 1}"),) if i else ()) for i in range(10_000)
    )
    docs["chain10k"] = instance_to_dict(Instance(four, chain, "chain10k"))
    dense: list[Collective | Compute] = []
    for i in range(1415):  # 1415 * 1414 / 2 = 1,000,405 dependencies
        after = tuple(After(f"x{j}") for j in range(i))
        task = (
            Compute(1000.0, id=f"x{i}", after=after)
            if i % 2
            else Collective("all_reduce", 2**20, 4, id=f"x{i}", after=after)
        )
        dense.append(task)
    docs["dense1m"] = instance_to_dict(Instance(four, tuple(dense), "dense1m"))
    over = instance_to_dict(Instance(four, (Collective("all_reduce", GIB, 1),), "1e6c"))
    over["tasks"][0]["chunks"] = 1_000_000  # type: ignore[index]
    docs["1e6c"] = over
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", default="2,5,10")
    parser.add_argument("--methods", default="baseline,themis,balanced,cpsat,all")
    parser.add_argument("--instances", default=None, help="comma-separated subset of the names above")
    args = parser.parse_args()
    limits = [float(x) for x in args.limits.split(",")]
    methods = args.methods.split(",")
    docs = instances()
    names = args.instances.split(",") if args.instances else list(docs)
    exe = str(Path(sys.executable).with_name("themis-opt"))
    print("| instance | method | " + " | ".join(f"limit {t:g} s" for t in limits) + " |")
    print("|---|---|" + "---|" * len(limits))
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(docs[name]))
            for method in methods:
                cells = []
                for limit in limits:
                    t0 = time.perf_counter()
                    done = subprocess.run(
                        [exe, "solve", str(path), "--method", method, "--time-limit", str(limit), "--workers", "2"],
                        capture_output=True,
                        text=True,
                    )
                    wall = time.perf_counter() - t0
                    worst = max(worst, wall - limit)
                    status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
                    cells.append(f"{wall:.2f} s ({status})")
                print(f"| {name} | {method} | " + " | ".join(cells) + " |", flush=True)
    verdict = "every run within its limit" if worst <= 0 else f"worst overrun {worst:.2f} s"
    print(f"\n{verdict}")


if __name__ == "__main__":
    main()
