"""themis_opt against ASTRA-sim 1.0 on random configurations of its own file formats.

    python -m bench.figures.astra1_random --astra PATH/TO/astra-sim [--count 200] [--seed 0]
                                          [--dimensions 4] [--jobs 2] [--cache FILE] [--work DIR]

Each configuration is a network of ``--dimensions`` dimensions (ring, fully
connected or switch; 2, 4 or 8 NPUs; 12.5 to 250 GB/s; 0 to 700 ns a hop; a
switch last, as 1.0's inter-pod dimension needs), a system file of 1 to 3
active chunks per dimension, 4 to 16 splits and an all-reduce implementation
of ring, direct and halving-doubling entries with a double binary tree last in
half of them, and one all-reduce of 1, 16 or 64 MiB; each runs with the
baseline and with Themis, each with FIFO and SCF. ASTRA-sim runs them as
``bench.figures.astra_check`` runs its samples (same verdicts: a run ASTRA-sim
completes must be reproduced within 1%; a run it cannot complete must be
refused with one line). Its outcomes are cached in ``--cache`` (default
``results/astra1_random.json``); the files are written under ``--work``
(default ``results/astra1_random``). The tallies and the largest differences
per schedule go to standard output in Markdown.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import random
import sys
from pathlib import Path

from bench.figures.astra_check import SCHEDULES, Case, astra_outcomes, key_of, run_ours, verdict

TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
ALGORITHMS = ("ring", "direct", "halvingDoubling")
TYPES = ("T", "N", "P", "PP")


def configuration(rng: random.Random, dims: int) -> tuple[dict[str, object], str, int]:
    """A network file's data, a system file's text (without the two scheduling keys) and a size in bytes."""
    topologies = [rng.choice(TOPOLOGIES) for _ in range(dims - 1)] + ["Switch"]
    units = [rng.choice((2, 4, 8)) for _ in range(dims)]
    links = [n - 1 if t == "FullyConnected" else 2 if t == "Ring" else 1 for t, n in zip(topologies, units)]
    network = {
        "topology-name": "Hierarchical",
        "topologies-per-dim": topologies,
        "dimension-type": list(TYPES[len(TYPES) - dims :]),
        "dimensions-count": dims,
        "units-count": units,
        "links-count": links,
        "link-latency": [rng.choice((0, 100, 500, 700)) for _ in range(dims)],
        "link-bandwidth": [rng.choice((12.5, 25, 50, 100, 200, 250)) for _ in range(dims)],
        "nic-latency": [0] * dims,
        "router-latency": [0] * dims,
        "hbm-latency": [500] * dims,
        "hbm-bandwidth": [370] * dims,
        "hbm-scale": [0] * dims,
    }
    algorithms = [rng.choice(ALGORITHMS) for _ in range(dims)]
    if rng.random() < 0.5:
        algorithms[-1] = "doubleBinaryTree"
    rings = "_".join(["ring"] * dims)
    system = (
        f"scheduling-policy: LIFO\nendpoint-delay: 10\nactive-chunks-per-dimension: {rng.choice((1, 2, 3))}\n"
        f"preferred-dataset-splits: {rng.choice((4, 8, 16))}\nboost-mode: 0\n"
        f"all-reduce-implementation: {'_'.join(algorithms)}\nall-gather-implementation: {rings}\n"
        f"reduce-scatter-implementation: {rings}\nall-to-all-implementation: {'_'.join(['direct'] * dims)}\n"
        "collective-optimization: localBWAware\n"
    )
    return network, system, rng.choice((1, 16, 64)) * 2**20


def cases(work: Path, count: int, seed: int, dims: int) -> list[Case]:
    """``count`` configurations from ``seed``, written under ``work``, each with the four schedules."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        network, system, size = configuration(rng, dims)
        folder = work / f"{seed}-{dims}d-{n:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "network.json").write_text(json.dumps(network, indent=1))
        (folder / "system.txt").write_text(system)
        (folder / "workload.txt").write_text(f"MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {size} 5\n")
        out += [
            Case(folder / "network.json", folder / "system.txt", folder / "workload.txt", 1, 1.0, schedule)
            for schedule in SCHEDULES
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--astra", type=Path, required=True, help="a checkout of ASTRA-sim's ASTRA-sim-1.0 branch")
    parser.add_argument("--binary", type=Path, help="its AnalyticalAstra (default: its build folder's)")
    parser.add_argument("--count", type=int, default=200, help="configurations (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the configurations (default 0)")
    parser.add_argument("--dimensions", type=int, choices=(2, 3, 4), default=4, help="network dimensions (default 4)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--cache", type=Path, default=Path("results/astra1_random.json"), help="ASTRA-sim's outcomes")
    parser.add_argument("--work", type=Path, default=Path("results/astra1_random"), help="the files' folder")
    args = parser.parse_args(argv)
    binary = args.binary or args.astra / "build/astra_analytical/build/AnalyticalAstra/bin/AnalyticalAstra"
    if not binary.exists():
        parser.error(f"no ASTRA-sim binary at {binary} (build it, or give --binary)")
    todo = cases(args.work, args.count, args.seed, args.dimensions)
    cache = astra_outcomes(todo, binary, args.cache, args.jobs)
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        ours_all = list(pool.map(run_ours, todo, chunksize=4))
    rows: dict[str, dict[str, list[float]]] = {}
    for case, ours in zip(todo, ours_all):
        kind, cell = verdict(cache[key_of(case, binary)], ours)
        schedule = "+".join(case.schedule or ("as is",))
        # each run's difference in %, or -1 where there is none (refused, failed)
        diff = abs(float(cell.rstrip("%"))) if kind in ("within 1%", "OFF") else -1.0
        rows.setdefault(schedule, {}).setdefault(kind, []).append(diff)
        if kind not in ("within 1%", "refused", "undefined in ASTRA-sim, refused"):
            print(f"{kind}: {case.system.parent.name} {schedule}: {cell}", file=sys.stderr)
    kinds = sorted({k for row in rows.values() for k in row})
    print("| schedule | " + " | ".join(kinds) + " | within 0.01% | largest difference |")
    print("|---" * (len(kinds) + 3) + "|")
    for schedule, row in sorted(rows.items()):
        diffs = [d for d in row.get("within 1%", []) + row.get("OFF", []) if d >= 0]
        close = sum(1 for d in diffs if d <= 0.01)
        largest = f"{max(diffs):.3f}%" if diffs else ""
        cells = " | ".join(str(len(row.get(k, []))) for k in kinds)
        print(f"| {schedule} | {cells} | {close} | {largest} |")
    bad = {k for row in rows.values() for k in row} - {"within 1%", "refused", "undefined in ASTRA-sim, refused"}
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
