"""Rich renderings for the terminal: result summaries, comparison tables, Gantt charts.

Only the CLI uses this module; the core library never imports rich.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from themis_opt import bench as benchmod
from themis_opt.instance import Instance
from themis_opt.result import Result
from themis_opt.schedule import Schedule

PALETTE = (
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "red",
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "bright_red",
)


def fmt_time(ns: float | None) -> str:
    """A duration in ns with a readable unit."""
    if ns is None:
        return "-"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.4f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.3f} µs"
    return f"{ns:.1f} ns"


def fmt_pct(value: float | None) -> str:
    """A ratio as a percentage."""
    return "-" if value is None else f"{100 * value:.2f}%"


def fmt_ratio(value: float | None) -> str:
    """A speedup as ``1.23x``."""
    return "-" if value is None else f"{value:.3f}x"


def label(result: Result) -> str:
    """``method`` or ``method-intra`` for heuristics timed by a policy."""
    return result.method if result.intra is None or result.method == "balanced" else f"{result.method}-{result.intra}"


def describe(instance: Instance) -> str:
    """A one-line description of the network and collectives."""
    dims = "x".join(str(d.size) for d in instance.network.dimensions)
    topo = "/".join(d.topology.value[0].upper() + d.topology.value[1:3] for d in instance.network.dimensions)
    colls = ", ".join(f"{c.kind.value} {c.size_bytes / 2**20:g} MiB/{c.chunks}" for c in instance.collectives)
    return f"{dims} ({topo}); {colls}"


def result_summary(instance: Instance, result: Result) -> RenderableType:
    """Method, status, makespan, bounds, utilisation and per-dimension busy share."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("instance", f"{instance.name}: {describe(instance)}")
    head.add_row("method", label(result))
    head.add_row("status", result.status.value)
    head.add_row("makespan", fmt_time(result.makespan))
    head.add_row("lower bound", fmt_time(result.lower_bound))
    head.add_row("gap", fmt_pct(result.gap))
    head.add_row("ideal bound", fmt_time(result.bounds.ideal))
    head.add_row("bandwidth utilisation", fmt_pct(result.bandwidth_utilization))
    head.add_row("runtime", f"{result.runtime:.3f} s")
    bounds = Table(title="lower bounds", title_justify="left")
    bounds.add_column("bound")
    bounds.add_column("value", justify="right")
    for name, value in result.bounds.as_dict().items():
        if value is not None:
            bounds.add_row(name, fmt_time(value))
    parts: list[RenderableType] = [head, bounds]
    if result.schedule is not None:
        dims = Table(title="per dimension", title_justify="left")
        for col in ("dim", "size", "topology", "GB/s", "busy", "busy share"):
            dims.add_column(col, justify="right" if col not in ("dim", "topology") else "left")
        busy = result.schedule.busy_ns(instance.network.num_dims)
        share = result.schedule.busy_share(instance.network.num_dims)
        for d, dim in enumerate(instance.network.dimensions):
            dims.add_row(
                dim.name,
                str(dim.size),
                dim.topology.value,
                f"{dim.bandwidth_gbps:g}",
                fmt_time(busy[d]),
                fmt_pct(share[d]),
            )
        parts.append(dims)
    if result.stats is not None:
        s = result.stats
        parts.append(
            Text(
                f"CP-SAT {s.solver_status}: {s.solutions} solutions, {s.branches} branches, "
                f"{s.conflicts} conflicts, {s.wall_time_s:.2f} s, quantum {s.quantum_ns:.3f} ns"
            )
        )
    return Group(*parts)


def comparison_table(instance: Instance, results: Sequence[Result]) -> Table:
    """Methods side by side, gaps to the best lower bound any of them knows."""
    best_bound = max(r.lower_bound for r in results)
    baseline = next((r.makespan for r in results if r.method == "baseline"), None)
    table = Table(title=f"{instance.name}: {describe(instance)}  (lower bound {fmt_time(best_bound)})")
    for col in ("method", "status", "makespan", "gap", "speedup vs baseline", "bw util", "runtime"):
        table.add_column(col, justify="left" if col in ("method", "status") else "right")
    for r in results:
        gap = r.makespan / best_bound - 1 if r.makespan is not None and best_bound > 0 else None
        speedup = baseline / r.makespan if baseline and r.makespan else None
        table.add_row(
            label(r),
            r.status.value,
            fmt_time(r.makespan),
            fmt_pct(gap),
            fmt_ratio(speedup),
            fmt_pct(r.bandwidth_utilization),
            f"{r.runtime:.3f} s",
        )
    return table


def gantt(schedule: Schedule, num_dims: int, width: int = 100, names: Sequence[str] | None = None) -> RenderableType:
    """Per-dimension Gantt chart: one row per dimension, chunks coloured by
    order, ``·`` where the dimension sits idle.
    """
    makespan = schedule.makespan
    orders = sorted({c.order for c in schedule.chunks})
    colour = {order: PALETTE[i % len(PALETTE)] for i, order in enumerate(orders)}
    rows = []
    for d in range(num_dims):
        cells: list[tuple[str, str]] = [("·", "grey50")] * width
        busy = 0.0
        for chunk in schedule.chunks:
            for phase in chunk.phases:
                if phase.dim != d or makespan <= 0:
                    continue
                busy += phase.duration
                first = int(phase.start_ns / makespan * width)
                last = max(first + 1, round(phase.end_ns / makespan * width))
                glyph = "█" if phase.op.value == "reduce_scatter" else "▓"
                for x in range(first, min(last, width)):
                    cells[x] = (glyph, colour[chunk.order])
        line = Text(f"{(names[d] if names else f'd{d}'):>6} ")
        for glyph, style in cells:
            line.append(glyph, style=style)
        line.append(f" {100 * busy / makespan if makespan > 0 else 0:5.1f}% busy")
        rows.append(line)
    legend = Text("orders: ")
    for order in orders:
        legend.append(f"({','.join(map(str, order))}) ", style=colour[order])
    legend.append("  █ reduce-scatter  ▓ all-gather  · idle", style="grey50")
    axis = Text(f"{'':>6} 0{'':{max(width - len(fmt_time(makespan)) - 1, 1)}}{fmt_time(makespan)}")
    return Group(*rows, axis, legend)


def bench_table(records: Sequence[benchmod.Record], methods: Sequence[str]) -> Table:
    """One row per instance: bound, each method's makespan, gaps, speedups, utilisation."""
    table = Table(title="makespan (gap to the best lower bound) · bandwidth utilisation", show_lines=False)
    table.add_column("instance")
    table.add_column("dims", justify="right")
    table.add_column("chunks", justify="right")
    table.add_column("lower bound", justify="right")
    for m in methods:
        table.add_column(m, justify="right")
    for m in ("themis-scf", "cpsat"):
        if m in methods and "baseline" in methods:
            table.add_column(f"{m} speedup", justify="right")
    for r in records:
        cells = [r.instance, r.dims, str(r.chunks), fmt_time(r.lower_bound_ns)]
        for m in methods:
            o = r.outcome(m)
            if o is None:
                cells.append("-")
                continue
            mark = "" if o.valid else " [red]INVALID[/]"
            star = "*" if o.status == "optimal" else ""
            cells.append(
                f"{fmt_time(o.makespan_ns)}{star} ({fmt_pct(r.gap(m))})\nutil {fmt_pct(o.bandwidth_utilization)}{mark}"
            )
        for m in ("themis-scf", "cpsat"):
            if m in methods and "baseline" in methods:
                cells.append(fmt_ratio(r.speedup(m)))
        table.add_row(*cells)
    table.caption = "* proven optimal (CP-SAT proof, or makespan meets the lower bound)"
    return table


def summary_table(summary: benchmod.Summary) -> Table:
    """Per method: geometric-mean speedup, mean and max gap, utilisation, optimal counts."""
    table = Table(title=f"summary over {summary.instances} instances: {summary.proven_optimal} with a proven optimum")
    for col in (
        "method",
        "geomean speedup vs baseline",
        "mean gap",
        "max gap",
        "mean bw util",
        "optimal",
        "loses to baseline",
    ):
        table.add_column(col, justify="left" if col == "method" else "right")
    for s in summary.methods:
        loses = summary.themis_loses.get(s.method)
        table.add_row(
            s.method,
            fmt_ratio(s.geomean_speedup),
            fmt_pct(s.mean_gap),
            fmt_pct(s.max_gap),
            fmt_pct(s.mean_utilization),
            f"{s.optimal}/{s.instances}",
            "-" if loses is None else str(loses),
        )
    return table
