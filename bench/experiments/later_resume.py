"""How much later a move's run could resume than at its collective's release, measured (not built).

    python -m bench.experiments.later_resume [--shape 4x4x4x16] [--chunks 16] [--moves 20000] [--seed 0]

The goals' instance (8 all-reduces issued over time, ``bench.instances.eight_collectives``).
A move's run resumes from the snapshot at its collective's release
(:class:`themis_opt.sim.timers.TableTimer`); everything the changed chunks do before
their orders first differ from the base's is also the base's, so a run could resume
later: at the end of the last phase the orders share. With Themis's schedule as the
base and moves drawn as the search draws them (a swap for 0.6 of them, else an order
of the collective's chunks, 0.8 of the time one Themis or balanced gives, else a random
one), this counts the share of the base's events (releases and phase ends) before each
resume point: what a resumed run skips now, and what resuming where the orders first
differ would skip. Each move is weighed alike; the events after the resume point are
assumed to be as many as the base's (a moved chunk's run differs there).
"""

from __future__ import annotations

import argparse
import bisect
import random

from bench.instances import eight_collectives
from themis_opt.orders import Order
from themis_opt.solving import solve


def _shared(a: Order, b: Order) -> int:
    """How many leading dimensions two orders share."""
    n = 0
    while n < len(a) and a[n] == b[n]:
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4x4x4x16", help="the 4D network (default 4x4x4x16)")
    parser.add_argument("--chunks", type=int, default=16, help="chunks per all-reduce (default 16)")
    parser.add_argument("--moves", type=int, default=20_000, help="moves drawn (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed (default 0)")
    args = parser.parse_args()
    instance = eight_collectives(chunks=args.chunks, shape=tuple(int(n) for n in args.shape.split("x")))
    base = solve(instance, "themis").schedule
    balanced = solve(instance, "balanced").schedule
    assert base is not None and balanced is not None
    orders = base.orders
    chunks = {(c.collective, c.chunk): c for c in base.chunks}
    release = [c.issue_ns for c in instance.collectives]
    events = sorted([p.end_ns for c in base.chunks for p in c.phases] + release)
    classes: dict[int, list[tuple[int, int]]] = {}
    for cid in instance.chunk_ids:
        classes.setdefault(cid[0], []).append(cid)
    known = {c: sorted({orders[cid] for cid in v} | {balanced.orders[cid] for cid in v}) for c, v in classes.items()}

    def diverges(cid: tuple[int, int], order: Order) -> float:
        """When the chunk's run under ``order`` first differs from the base's: its first differing phase's arrival."""
        p = min(_shared(orders[cid], order), len(order) - 1)
        return release[cid[0]] if p == 0 else chunks[cid].phases[p - 1].end_ns

    rng = random.Random(args.seed)
    now = later = 0.0
    moves = 0
    while moves < args.moves:
        c = rng.choice(list(classes))
        a = rng.choice(classes[c])
        if rng.random() < 0.6:
            b = rng.choice(classes[c])
            if orders[a] == orders[b]:
                continue
            changes = [(a, orders[b]), (b, orders[a])]
        else:
            dims = list(instance.active_dims[c])
            order = rng.choice(known[c]) if rng.random() < 0.8 else tuple(rng.sample(dims, len(dims)))
            if order == orders[a]:
                continue
            changes = [(a, order)]
        moves += 1
        now += bisect.bisect_left(events, release[c]) / len(events)
        later += bisect.bisect_left(events, min(diverges(x, o) for x, o in changes)) / len(events)
    print(
        f"{args.shape}, 8 x {args.chunks}: {moves:,} moves; the base's events before the resume point: "
        f"{100 * now / moves:.1f}% at the collective's release, {100 * later / moves:.1f}% where the orders differ"
    )


if __name__ == "__main__":
    main()
