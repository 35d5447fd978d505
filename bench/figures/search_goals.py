"""The searches' goals: collectives issued over time on five 4D networks, within 1% of the bound in 60 s.

    python -m bench.figures.search_goals                      # 8 x 16 chunks on each of the 5 shapes
    python -m bench.figures.search_goals --count 16 --chunks 32 --limit 60
    python -m bench.figures.search_goals --evaluations-per-pair 200 --min-evaluations 48000

Each instance: ``count`` all-reduces of 16, 32, 64, 128, 16, ... MiB, ``chunks``
chunks each, issued 150 us apart, on one of the five 4D switch networks of
``bench.instances.SHAPES`` (400/200/100/50 GB/s). Each line: the best
heuristic's gap and cpsat's (to the best lower bound cpsat's call found),
its status, the wall time of the whole ``solve(..., "cpsat")`` call, and the
assignment and sequence searches' simulations and pace (from their log
lines). Two workers, seed 0 (``--workers``, ``--seed``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import time

from bench.instances import SHAPES, eight_collectives, first_call
from themis_opt.params import SolveParams
from themis_opt.search.params import SearchParams
from themis_opt.solving import solve


class _Rates(logging.Handler):
    """Keeps the searches' "N ... timed in T s" lines."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if " timed" in message:
            self.lines.append(message)


def _pace(lines: list[str], what: str) -> str:
    found = [re.search(r"([\d,]+) \w+ timed(?: in ([\d.]+) s)?", line) for line in lines if line.startswith(what)]
    runs = [(int(m.group(1).replace(",", "")), float(m.group(2) or 0)) for m in found if m]
    if not runs:
        return "-"
    count, seconds = sum(r[0] for r in runs), sum(r[1] for r in runs)
    return f"{count:,} ({count / seconds:,.0f}/s)" if seconds else f"{count:,}"


def _shapes(text: str) -> list[tuple[int, ...]]:
    """``4x4x4x16,4x8x8x4`` as shapes (an argparse type: a bad value is one line, exit status 2)."""
    try:
        shapes = [tuple(int(n) for n in shape.split("x")) for shape in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected shapes like 4x4x4x16,4x8x8x4") from None
    if any(len(shape) != 4 or min(shape) < 2 for shape in shapes):
        raise argparse.ArgumentTypeError(f"{text!r}: each shape is four dimensions of at least 2 NPUs")
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=8, help="collectives (default 8)")
    parser.add_argument("--chunks", type=int, default=16, help="chunks each (default 16)")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per instance (default 60)")
    parser.add_argument("--workers", type=int, default=2, help="(default 2)")
    parser.add_argument(
        "--shapes",
        type=_shapes,
        default=SHAPES,
        help="4D networks, e.g. 4x4x4x16,4x8x8x4 (default: the five of bench.instances.SHAPES)",
    )
    parser.add_argument("--seed", type=int, default=0, help="(default 0)")
    parser.add_argument("--evaluations-per-pair", type=int, default=None, help="(default: the parameters')")
    parser.add_argument("--min-evaluations", type=int, default=None, help="(default: the parameters')")
    args = parser.parse_args()
    search = SearchParams()
    if args.evaluations_per_pair is not None:
        search = dataclasses.replace(search, evaluations_per_pair=args.evaluations_per_pair)
    if args.min_evaluations is not None:
        search = dataclasses.replace(search, min_evaluations=args.min_evaluations)
    params = SolveParams(search=search)
    rates = _Rates()
    for name in ("themis_opt.search.assignment", "themis_opt.search.sequence"):
        logging.getLogger(name).addHandler(rates)
        logging.getLogger(name).setLevel(logging.INFO)
    print("| network | best heuristic gap | cpsat gap | status | wall (s) | assignment search | sequence search |")
    print("|---|---|---|---|---|---|---|")
    shapes = args.shapes
    within = 0
    for shape in shapes:
        instance = eight_collectives(chunks=args.chunks, count=args.count, shape=shape)
        heuristics = min(solve(instance, m).makespan or float("inf") for m in ("baseline", "themis", "balanced"))
        rates.lines.clear()
        t0 = time.perf_counter()
        cold = first_call(instance, "cpsat")
        result = solve(cold, "cpsat", time_limit=args.limit, workers=args.workers, seed=args.seed, params=params)
        wall = time.perf_counter() - t0
        bound = result.lower_bound
        gap = result.gap or 0.0
        within += gap <= 0.01
        print(
            f"| {'x'.join(map(str, shape))} | {100 * (heuristics / bound - 1):.2f}% | {100 * gap:.2f}% | "
            f"{result.status} | {wall:.1f} | {_pace(rates.lines, 'assignment')} | {_pace(rates.lines, 'sequence')} |",
            flush=True,
        )
    print(f"\n{within} of {len(shapes)} networks within 1% of the best bound")


if __name__ == "__main__":
    main()
