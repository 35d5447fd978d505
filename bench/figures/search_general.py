"""The searches on 4D networks they were not tuned on: random shapes, topologies, rates and sizes.

    python -m bench.figures.search_general                         # 12 single all-reduces at 10 s, 6 x 8 at 60 s
    python -m bench.figures.search_general --singles 0 --several 3 --seed 7
    python -m bench.figures.search_general --single-limit 10 --several-limit 60 --workers 2
    python -m bench.figures.search_general --several 0 --params stages.toml   # other stage settings

``bench.figures.search_goals`` measures the five 4D switch networks the
searches' parameters were chosen on (``bench.instances.SHAPES``, 400/200/100/50
GB/s). This draws networks none of that saw: each dimension 2 to 16 NPUs
(at most 1,024 in all), a ring, fully-connected or switch with its default
algorithm, a random bandwidth between 25 and 800 GB/s and a hop latency
between 100 and 1,000 ns. Two kinds of instance per network:

* *single*: one all-reduce of 64 MiB to 1 GiB in 16 chunks, solved by cpsat
  within ``--single-limit`` (the goal: proven optimal within 10 s);
* *several*: 8 all-reduces of 16 to 128 MiB (16 chunks each) issued 100 to
  200 us apart, within ``--several-limit`` (the goal: within 1% of the bound
  in 60 s).

Each line: the network, the best heuristic's gap and cpsat's (to the best
bound of cpsat's call), its status and the wall time of the whole
``solve(..., "cpsat")`` call. Two workers, seed 0 for the solver; ``--seed``
draws other networks.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from bench.instances import first_call
from themis_opt.errors import InputError
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.params import SolveParams
from themis_opt.solving import solve

MIB = 2**20
TOPOLOGIES = ("ring", "fully_connected", "switch")


def random_network(rng: random.Random) -> Network:
    """Four dimensions of 2-16 NPUs (1,024 at most), random topologies, rates and latencies."""
    while True:
        shape = [rng.choice((2, 4, 4, 8, 8, 16)) for _ in range(4)]
        if 16 <= shape[0] * shape[1] * shape[2] * shape[3] <= 1024:
            break
    dimensions = []
    for size in shape:
        topology = rng.choice(TOPOLOGIES if size <= 8 else ("ring", "switch"))
        bandwidth = float(rng.choice((25, 50, 100, 200, 400, 800)))
        dimensions.append(Dimension(size, topology, bandwidth, float(rng.randrange(100, 1001, 100))))
    return Network(tuple(dimensions))


def describe(network: Network) -> str:
    short = {"ring": "R", "fully_connected": "FC", "switch": "SW"}
    return "x".join(f"{short[d.topology]}{d.size}@{d.bandwidth_gbps:g}" for d in network.dimensions)


def single(rng: random.Random, network: Network, index: int) -> Instance:
    size = rng.choice((64, 128, 256, 512, 1024)) * MIB
    return Instance(network, (Collective("all_reduce", size, 16),), f"kept-single-{index}")


def several(rng: random.Random, network: Network, index: int) -> Instance:
    issue = 0.0
    collectives = []
    for _ in range(8):
        collectives.append(Collective("all_reduce", rng.choice((16, 32, 64, 128)) * MIB, 16, issue_ns=issue))
        issue += rng.randrange(100_000, 200_001, 10_000)
    return Instance(network, tuple(collectives), f"kept-several-{index}")


def run(instance: Instance, limit: float, workers: int, params: SolveParams) -> str:
    heuristics = min(solve(instance, m).makespan or float("inf") for m in ("baseline", "themis", "balanced"))
    t0 = time.perf_counter()
    result = solve(first_call(instance, "cpsat"), "cpsat", time_limit=limit, workers=workers, seed=0, params=params)
    wall = time.perf_counter() - t0
    bound = result.lower_bound or 0.0
    gap = result.gap or 0.0
    return (
        f"| {instance.name} | {describe(instance.network)} | {100 * (heuristics / bound - 1):.2f}% | "
        f"{100 * gap:.2f}% | {result.status} | {wall:.1f} |"
    )


def _params(path: str) -> SolveParams:
    """A parameters file (an argparse type: a bad file is one line, exit status 2)."""
    try:
        return SolveParams.from_file(Path(path))
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--singles", type=int, default=12, help="single all-reduces (default 12)")
    parser.add_argument("--several", type=int, default=6, help="instances of 8 all-reduces (default 6)")
    parser.add_argument("--single-limit", type=float, default=10.0, help="seconds each (default 10)")
    parser.add_argument("--several-limit", type=float, default=60.0, help="seconds each (default 60)")
    parser.add_argument("--workers", type=int, default=2, help="(default 2)")
    parser.add_argument("--seed", type=int, default=0, help="draws the networks (default 0)")
    parser.add_argument("--params", type=_params, default=SolveParams(), help="a parameters file, as solve's")
    args = parser.parse_args(argv)
    params = args.params
    rng = random.Random(args.seed)
    print("| instance | network (topology, NPUs @ GB/s) | best heuristic gap | cpsat gap | status | wall (s) |")
    print("|---|---|---|---|---|---|")
    for i in range(args.singles):
        print(run(single(rng, random_network(rng), i), args.single_limit, args.workers, params), flush=True)
    for i in range(args.several):
        print(run(several(rng, random_network(rng), i), args.several_limit, args.workers, params), flush=True)


if __name__ == "__main__":
    main()
