"""How fast the assignment search times assignments: one simulation, and whole walks.

    python -m bench.figures.search_pace [--evaluations 20000] [--repeat 3]

The instance of the searches' goals on 4x4x4x16 (8 all-reduces of 16 chunks, 1,024
phases). First one makespan-only simulation of the best heuristic's orders, best of
``--repeat`` runs of 2,000: with the orders as a dict
(``simulator.simulate_makespan``, what the search called before) and as an array of
tokens (``simulator.AssignmentTimer``, what it calls now), fifo and scf; then 2,000
moves (one chunk given another order at random) from those orders, timed from the
start and with those orders adopted as the base (``AssignmentTimer.adopt``: each
move resumes from its run), with the share of the events the resumed runs did not
handle again. Then whole
searches of ``--evaluations`` simulations from those orders (no deadline, seed 0):
one worker; two workers timing one walk (``Strategy(shared=True)``: each candidate
sent to the other process through a pipe); two workers walking one walk each (the
default). Each line: simulations, wall time, pace and the best makespan's gap to the
best lower bound.
"""

from __future__ import annotations

import argparse
import random
import time

from bench.instances import eight_collectives
from themis_opt.bounds import compute_bounds
from themis_opt.budget import Deadline
from themis_opt.search import Strategy, improve_assignment
from themis_opt.search.params import SearchParams
from themis_opt.search.timer import AssignmentTimer
from themis_opt.sim import simulate_makespan
from themis_opt.sim.queues import Intra
from themis_opt.solving import solve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=20_000, help="simulations per search (default 20000)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many (default 3)")
    args = parser.parse_args()
    instance = eight_collectives(shape=(4, 4, 4, 16))
    start = solve(instance, "themis").schedule
    assert start is not None
    orders = start.orders
    timer = AssignmentTimer(instance)
    tokens = timer.tokens(orders)
    print(f"| one simulation | {' | '.join(p.value for p in Intra)} |\n|---{'|---' * len(Intra)}|")
    for what, run in (
        ("orders as a dict", lambda intra: simulate_makespan(instance, orders, intra, Deadline(), {})),
        ("orders as tokens", lambda intra: timer.makespan(tokens, intra, Deadline())),
    ):
        cells = []
        for intra in Intra:
            best = float("inf")
            for _ in range(args.repeat):
                began = time.perf_counter()
                for _ in range(2000):
                    run(intra)
                best = min(best, (time.perf_counter() - began) / 2000)
            cells.append(f"{best * 1e6:.0f} us")
        print(f"| {what} | {' | '.join(cells)} |")
    rng = random.Random(0)
    moves = []
    for _ in range(2000):
        move = tokens[:]
        i = rng.randrange(len(move))
        c, k = instance.chunk_ids[i]
        move[i] = timer.token(c, k, rng.sample(instance.active_dims[c], len(instance.active_dims[c])))
        moves.append(move)
    for what, adopted in (("a move, from the start", False), ("a move, resumed from its base", True)):
        cells, saved = [], []
        for intra in Intra:
            moving = AssignmentTimer(instance)
            for c, k, order in timer.made:  # numbered as timer's
                moving.token(c, k, order)
            if adopted:
                moving.adopt(tokens, intra, Deadline())
            best = float("inf")
            for _ in range(args.repeat):
                began = time.perf_counter()
                for move in moves:
                    moving.makespan(move, intra, Deadline())
                best = min(best, (time.perf_counter() - began) / len(moves))
            cells.append(f"{best * 1e6:.0f} us")
            _, _, handled, skipped = moving.counts()
            saved.append(f"{100 * skipped / (handled + skipped):.0f}%")
        print(f"| {what} | {' | '.join(cells)} |")
    print(f"| (events it did not handle again) | {' | '.join(saved)} |")
    bound = compute_bounds(instance).best
    search = SearchParams()
    annealing = Strategy(search.annealing_restart_share, search.annealing_temperature)
    shared = Strategy(search.annealing_restart_share, search.annealing_temperature, shared=True)
    print("\n| search | workers | simulations | wall (s) | pace | gap |\n|---|---|---|---|---|---|")
    for what, workers, strategy in (
        ("one walk", 1, annealing),
        ("one walk timed by both", 2, shared),
        ("one walk each", 2, annealing),
    ):
        began = time.perf_counter()
        found = improve_assignment(instance, [orders], evaluations=args.evaluations, workers=workers, strategy=strategy)
        wall = time.perf_counter() - began
        assert found is not None
        simulations = args.evaluations * (workers if not strategy.shared else 1)
        print(
            f"| {what} | {workers} | {simulations:,} | {wall:.1f} | {simulations / wall:,.0f}/s | "
            f"{100 * (found.makespan / bound - 1):.2f}% |"
        )


if __name__ == "__main__":
    main()
