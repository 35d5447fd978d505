"""Why Themis is slower than the baseline on an LLM iteration: each dimension's load over time.

    python -m bench.figures.themis_llm [--instance FILE] [--out FIGURE.svg] [--bins 200]

Runs the baseline and Themis (fifo; ASTRA-sim's planner, a planner that starts every collective
from fresh loads, and one whose all-gathers take the baseline's descending order) on the instance
(default: the clusters suite's Llama 3 70B with FSDP on the 4D TPU torus), prints each method's
makespan, each dimension's busy time and which orders the chunks of each kind of collective took,
and draws, per method, the share of each bin of time each dimension is busy (the plot extra).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from themis_opt.budget import Deadline
from themis_opt.formats.native import load_instance
from themis_opt.instance import Instance, Kind
from themis_opt.plot import pyplot, save
from themis_opt.policies import ThemisTracker, baseline_orders
from themis_opt.schedule import Schedule
from themis_opt.sim import simulate
from themis_opt.sim.queues import Intra
from themis_opt.suites import suite_folder

DEFAULT = suite_folder("clusters") / "llama3-70b-fsdp-tp16-ep1-dp16-tpu-v4-4x4x4x4.json"


class FreshThemis(ThemisTracker):
    """Themis's greedy with every collective planned from fresh loads (no sharing across collectives)."""

    def plan(self, c: int, release_ns: float, waited: bool = False) -> list[tuple[int, ...]]:
        self._entries = [[d, 0.0] for d in range(self.instance.network.num_dims)]
        self._reset_at = release_ns
        return self._plan(c)


class GathersDescending(ThemisTracker):
    """Themis's greedy, but every all-gather takes the descending order (the baseline's)."""

    def plan(self, c: int, release_ns: float, waited: bool = False) -> list[tuple[int, ...]]:
        orders = super().plan(c, release_ns, waited)
        if self.instance.collectives[c].kind is Kind.ALL_GATHER:
            return [tuple(reversed(self.instance.active_dims[c]))] * len(orders)
        return orders


def schedules(instance: Instance) -> dict[str, Schedule]:
    """The baseline's, Themis's (as ASTRA-sim plans) and Themis's from fresh loads, all under fifo."""
    return {
        "baseline": simulate(instance, baseline_orders(instance), Intra.FIFO, Deadline(), baseline=True),
        "themis (ASTRA-sim's planner)": simulate(instance, ThemisTracker(instance).plan, Intra.FIFO, Deadline()),
        # in Python: the compiled core plans only as ASTRA-sim does
        "themis, fresh loads per collective": simulate(
            instance, FreshThemis(instance).plan, Intra.FIFO, Deadline(), engine="python"
        ),
        "themis, all-gathers descending": simulate(
            instance, GathersDescending(instance).plan, Intra.FIFO, Deadline(), engine="python"
        ),
    }


def busy_over_time(schedule: Schedule, num_dims: int, bins: int) -> list[list[float]]:
    """Per dimension, the share of each of ``bins`` equal spans of the makespan it is busy."""
    width = schedule.makespan / bins
    shares = [[0.0] * bins for _ in range(num_dims)]
    for chunk in schedule.chunks:
        for p in chunk.phases:
            first, last = int(p.start_ns // width), min(bins - 1, int(p.end_ns // width))
            for b in range(first, last + 1):
                overlap = min(p.end_ns, (b + 1) * width) - max(p.start_ns, b * width)
                shares[p.dim][b] += max(0.0, overlap) / width
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", type=Path, default=DEFAULT)
    parser.add_argument("--out", type=Path, default=None, help="the figure (default: none)")
    parser.add_argument("--bins", type=int, default=200)
    args = parser.parse_args()
    instance = load_instance(args.instance)
    dims = instance.network.dimensions
    found = schedules(instance)
    print(
        f"{instance.name}: "
        + ", ".join(f"d{d} {x.topology.value} {x.bandwidth_gbps:g} GB/s" for d, x in enumerate(dims))
    )
    for name, schedule in found.items():
        busy = ", ".join(f"d{d} {b / 1e6:.1f} ms" for d, b in enumerate(schedule.busy_ns(len(dims))))
        print(f"\n{name}: makespan {schedule.makespan / 1e6:.1f} ms; busy {busy}")
        orders: Counter[tuple[str, tuple[int, ...]]] = Counter()
        for chunk in schedule.chunks:
            orders[(instance.collectives[chunk.collective].kind.value, chunk.order)] += 1
        for (kind, order), count in sorted(orders.items()):
            print(f"  {kind:15s} order {order}: {count} chunks")
    if args.out is None:
        return
    plt = pyplot()
    figure, axes = plt.subplots(len(found), 1, figsize=(8, 2.2 * len(found)), sharex=True, layout="constrained")
    longest = max(s.makespan for s in found.values()) / 1e6
    for ax, (name, schedule) in zip(axes, found.items()):
        shares = busy_over_time(schedule, len(dims), args.bins)
        times = [(b + 0.5) * schedule.makespan / args.bins / 1e6 for b in range(args.bins)]
        for d, row in enumerate(shares):
            ax.plot(times, [100 * min(1.0, s) for s in row], label=f"d{d} ({dims[d].topology.value}, "
                    f"{dims[d].bandwidth_gbps:g} GB/s)", linewidth=1.0)  # fmt: skip
        ax.set_title(f"{name}: {schedule.makespan / 1e6:.1f} ms", fontsize=10)
        ax.set_ylabel("busy (%)", fontsize=9)
        ax.set_ylim(0, 105)
        ax.set_xlim(0, longest)
        ax.tick_params(labelsize=9)
    axes[-1].set_xlabel("time (ms)", fontsize=9)
    axes[0].legend(fontsize=8, loc="upper right")
    print(f"\nwrote {save(figure, args.out)}")


if __name__ == "__main__":
    main()
