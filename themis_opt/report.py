"""Rich renderings for the terminal: result summaries, comparison tables, Gantt charts.

Only the CLI uses this module; the core library never imports rich.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from themis_opt.errors import counted
from themis_opt.instance import Instance
from themis_opt.metrics import iteration_metrics
from themis_opt.result import OPTIMALITY_TOLERANCE, Result, gap
from themis_opt.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt import bench as benchmod
    from themis_opt.chunking import Chunking, ChunkSweep

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
    """A duration in ns with a unit that scales: ns, µs, ms or s."""
    if ns is None:
        return "-"
    size = abs(ns)
    if size >= 1e9:
        return f"{ns / 1e9:.4f} s"
    if size >= 1e6:
        return f"{ns / 1e6:.4f} ms"
    if size >= 1e3:
        return f"{ns / 1e3:.3f} µs"
    return f"{ns:.1f} ns"


def fmt_bytes(size: float) -> str:
    """A size in bytes with a binary unit that scales: B, KiB, MiB, GiB, TiB, PiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024:
            return f"{size:.4g} {unit}"
        size /= 1024
    return f"{size:.4g} PiB"


def fmt_pct(value: float | None) -> str:
    """A ratio as a percentage."""
    return "-" if value is None else f"{100 * value:.2f}%"


def fmt_ratio(value: float | None) -> str:
    """A speedup as ``1.23x``."""
    return "-" if value is None else f"{value:.3f}x"


def describe(instance: Instance) -> str:
    """A one-line description of the network and collectives."""
    dims = "x".join(str(d.size) for d in instance.network.dimensions)
    topo = "/".join(d.topology.value[0].upper() + d.topology.value[1:3] for d in instance.network.dimensions)
    colls = [f"{c.kind.value} {fmt_bytes(c.size_bytes)}/{c.chunks}" for c in instance.collectives]
    if len(colls) > 3:
        colls = [*colls[:2], f"... {len(colls)} collectives"]
    return f"{dims} ({topo}); {', '.join(colls)}"


STAR = (
    f"* optimal: within {100 * OPTIMALITY_TOLERANCE:g}% of the schedule's span above a proven lower bound; "
    "gap = makespan / best lower bound - 1"
)


CP_SAT_ENDS = {
    "OPTIMAL": "its model solved to optimality",
    "FEASIBLE": "stopped with a solution, not at its own bound",
    "INFEASIBLE": "its model (with the incumbent's cutoff) has no better solution",
    "UNKNOWN": "stopped without a solution of its own",
    "MODEL_INVALID": "its model was refused",
}  # CP-SAT's solver status, in words that do not read as the result's status


def certificate(result: Result) -> str:
    """The status and what proves it: ``feasible, within 3.88% of optimal (bound: fill_drain)`` or
    ``optimal (bound: cpsat)``; the status alone without a schedule.
    """
    if result.gap is None:
        return result.status.value
    if result.status.value == "optimal":
        return f"optimal (bound: {result.best_bound})"
    return f"{result.status.value}, within {fmt_pct(result.gap)} of optimal (bound: {result.best_bound})"


def result_summary(instance: Instance, result: Result) -> RenderableType:
    """Method, status, makespan, bounds, utilisation and per-dimension busy share."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("instance", f"{instance.name}: {describe(instance)}")
    policy = f" ({result.intra})" if result.intra and result.intra not in result.label else ""
    head.add_row("method", result.label + policy)
    head.add_row("status", certificate(result))
    head.add_row("makespan", fmt_time(result.makespan))
    head.add_row("lower bound", f"{fmt_time(result.lower_bound)} ({result.best_bound})")
    head.add_row("gap", fmt_pct(result.gap))
    head.add_row("ideal bound", fmt_time(result.bounds.ideal) if result.bounds.ideal > 0 else "not computed")
    head.add_row("bandwidth utilisation", fmt_pct(result.bandwidth_utilization))
    head.add_row("optimal within", fmt_time(result.tolerance_ns))
    metrics = iteration_metrics(instance, result.schedule) if result.schedule is not None else None
    if metrics is not None:
        head.add_row("iteration (last pass)", fmt_time(metrics.iteration_ns))
        head.add_row("compute", fmt_time(metrics.compute_ns))
        head.add_row(
            "exposed communication",
            f"{fmt_time(metrics.exposed_ns)} ({fmt_pct(metrics.exposed_ns / metrics.total_ns)})",
        )
        if metrics.bubble_ns is not None:
            head.add_row(
                "of which pipeline bubble",
                f"{fmt_time(metrics.bubble_ns)} ({fmt_pct(metrics.bubble_ns / metrics.total_ns)}): "
                "waiting for another stage",
            )
        head.add_row("network utilisation", fmt_pct(metrics.utilization))
    head.add_row("runtime", f"{result.runtime:.3f} s")
    if result.note:
        head.add_row("note", result.note)
    parts: list[RenderableType] = [head, bounds_table([result])]
    if result.schedule is not None:
        dims = Table(title="per dimension", title_justify="left")
        for col in ("dim", "size", "topology", "GB/s", "busy", "busy share"):
            dims.add_column(col, justify="right" if col not in ("dim", "topology") else "left")
        # with pipeline stages each stage has its own copy of a dimension: their mean, so busy / makespan = share
        busy = [v / instance.num_stages for v in result.schedule.busy_ns(instance.network.num_dims)]
        share = [v / instance.num_stages for v in result.schedule.busy_share(instance.network.num_dims)]
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
        # CP-SAT's own verdict is on its own model (its last stage): the status above is the result's
        own = CP_SAT_ENDS.get(s.solver_status, f"ended {s.solver_status}")
        parts.append(
            Text(
                f"CP-SAT's search: {own} ({s.solutions} solutions, {s.branches} branches, "
                f"{s.conflicts} conflicts, {s.wall_time_s:.2f} s, quantum {s.quantum_ns:.3f} ns)"
            )
        )
    return Group(*parts)


def bounds_table(results: Sequence[Result]) -> Table:
    """Every lower bound any of ``results`` knows (``not computed`` where none did)."""
    table = Table(title="lower bounds", title_justify="left")
    table.add_column("bound")
    table.add_column("value", justify="right")
    names = results[0].bounds.as_dict()
    for name in names:
        values = [v for r in results if (v := r.bounds.as_dict()[name]) is not None]
        table.add_row(name, fmt_time(max(values)) if values else "not computed")
    return table


def comparison_table(instance: Instance, results: Sequence[Result]) -> RenderableType:
    """Methods side by side (gaps to the best lower bound any of them knows),
    every lower bound, and each method's busy share per dimension.
    """
    best = max(results, key=lambda r: r.lower_bound)
    best_bound = best.lower_bound
    baseline = next((r.makespan for r in results if r.method == "baseline"), None)
    caption = f"best lower bound {fmt_time(best_bound)} (bound: {best.best_bound})\n{STAR}"
    table = Table(title=f"{instance.name}: {describe(instance)}", caption=caption)
    for col in ("method", "makespan", "gap", "speedup", "bw util", "runtime"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in results:
        speedup = baseline / r.makespan if baseline and r.makespan else None
        star = "*" if r.status.value == "optimal" else ""
        table.add_row(
            r.label,
            f"{fmt_time(r.makespan)}{star}",
            fmt_pct(gap(r.makespan, best_bound)),
            fmt_ratio(speedup),
            fmt_pct(r.bandwidth_utilization),
            f"{r.runtime:.3f} s",
        )
    busy = Table(title="busy share per dimension", title_justify="left")
    busy.add_column("method")
    for dim in instance.network.dimensions:
        busy.add_column(dim.name, justify="right")
    for r in results:
        if r.schedule is not None:
            shares = r.schedule.busy_share(instance.network.num_dims)
            busy.add_row(r.label, *(fmt_pct(v / instance.num_stages) for v in shares))
    notes = [Text(f"note: {r.note}") for r in results if r.note]
    return Group(table, bounds_table(results), busy, *notes)


def _where(cut: Chunking) -> str:
    """A chunking as the lines below the table name it: ``8 chunks``, ``1 chunk``, ``chunks of 1 MiB``."""
    return counted(cut.count, "chunk") if cut.count is not None else f"chunks of {cut.label}"


def chunk_table(instance: Instance, sweep: ChunkSweep) -> RenderableType:
    """Each method's makespan at each chunking (its best underlined, ``*`` a proven optimum at that
    chunking), each chunking's lower bound, and each method's best against the bound for every one.
    """
    sizes = any(c.size is not None for c in sweep.choices)
    what = "chunk size" if sizes else "count"
    table = Table(title=f"{instance.name}: {describe(instance)}, every collective cut at each {what}")
    table.add_column("chunk size" if sizes else "chunks", justify="right")
    for method in sweep.methods:
        table.add_column(method, justify="right")
    table.add_column("lower bound", justify="right")
    best = {method: sweep.best(method)[0] for method in sweep.methods}
    for cut, results in zip(sweep.choices, sweep.results):
        cells = []
        for method, r in zip(sweep.methods, results):
            text = f"{fmt_time(r.makespan)}{'*' if r.status.value == 'optimal' else ''}"
            cells.append(Text(text, style="underline" if best[method] == cut else ""))
        table.add_row(cut.label, *cells, fmt_time(results[0].lower_bound))
    lines = [f"bound for every {what}: {fmt_time(sweep.bound)}"]
    for method in sweep.methods:
        cut, result = sweep.best(method)
        at = _where(cut)
        lines.append(
            f"{method}: best at {at}, {fmt_time(result.makespan)}, {fmt_pct(sweep.gap(method))} above that bound"
        )
    mix = sweep.mix
    if mix is None and sweep.mix_by is not None:
        lines.append(f"no mix: not searched by {sweep.mix_by}, no time was left")
    if mix is not None:
        spread = Counter(mix.counts)
        counts = ", ".join(f"{n} at {count}" for count, n in sorted(spread.items()))
        lines.append(
            f"a count for each group of like collectives, searched by {mix.by} ({mix.tried} mixes simulated): "
            f"collectives {counts} chunks; bound for every mix: {fmt_time(mix.bound)}"
        )
        for method in mix.methods:
            r = mix.result(method)
            gap, own = mix.gap(method), r.gap
            against = f", {fmt_pct(gap)} above that bound" if gap is not None else ""
            against += f" ({fmt_pct(own)} above the mix's own)" if own is not None else ""
            proven = "*" if r.status.value == "optimal" else ""
            lines.append(f"{method} at that mix: {fmt_time(r.makespan)}{proven}{against}")
    where, shortest = sweep.found()
    assert shortest.makespan is not None
    at = "the mix" if where is None else _where(where)
    space = f"every {what}" + (" and mix" if mix is not None else "")
    lines.append(
        f"shortest found: {shortest.method} at {at}, {fmt_time(shortest.makespan)}, "
        f"{fmt_pct(shortest.makespan / sweep.every_bound - 1)} above the bound for {space}"
    )
    return Group(table, *(Text(line) for line in lines))


GANTT_MARGIN = 19  # columns of a Gantt row besides its bars: the label (7) and the busy share (12)


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


def bench_table(records: Sequence[benchmod.Record], methods: Sequence[str]) -> RenderableType:
    """One row per (instance, method), instances numbered and listed below.

    Every cell holds one line, so the table fits 80 columns and a pipe; the
    instance names are never shortened: they stand whole in the legend.
    """
    table = Table(title="makespan, gap to the best lower bound, bandwidth utilisation", caption=STAR)
    for col in ("#", "method", "makespan", "gap", "util", "speedup", "time"):
        table.add_column(col, justify="left" if col == "method" else "right", no_wrap=True)
    legend = Table.grid(padding=(0, 1))
    legend.add_column(justify="right", no_wrap=True)
    legend.add_column(overflow="fold")
    for n, r in enumerate(records, start=1):
        entry = Text(f"{r.instance}: ")  # Text, not markup: a name may hold brackets
        if r.error:
            entry.append(f"error: {r.error}", style="red")
        else:
            bound = f" (bound: {r.bound})" if r.bound else ""
            entry.append(f"{r.dims}, {r.chunks} chunks, lower bound {fmt_time(r.lower_bound_ns)}{bound}")
        legend.add_row(f"#{n}", entry)
        shown = [m for m in methods if r.outcome(m) is not None] or ["-"]
        for i, m in enumerate(shown):
            o = r.outcome(m)
            if o is None:
                table.add_row(str(n), "-", "[red]error[/]", "", "", "", "", end_section=True)
                continue
            star = "*" if o.status == "optimal" else ""
            util = fmt_pct(o.bandwidth_utilization) if o.valid else "[red]INVALID[/]"
            table.add_row(
                str(n) if i == 0 else "",
                m,
                f"{fmt_time(o.makespan_ns)}{star}" if o.makespan_ns is not None else o.status,
                fmt_pct(r.gap(m)),
                util,
                fmt_ratio(r.speedup(m)) if m != "baseline" else "",
                f"{o.runtime_s:.2f} s",
                end_section=i == len(shown) - 1,
            )
    parts: list[RenderableType] = [table, Text("instances:"), legend]
    if any(o.iteration_ns is not None for r in records for o in r.outcomes):
        train = Table(title="training iterations: the last pass, and the compute unit's wait over the run")
        for col in ("#", "method", "iteration", "speedup", "exposed comm", "share"):
            train.add_column(col, justify="left" if col == "method" else "right", no_wrap=True)
        for n, r in enumerate(records, start=1):
            base = r.outcome("baseline")
            ran = [o for o in r.outcomes if o.iteration_ns is not None]
            for i, o in enumerate(ran):
                speedup = base.iteration_ns / o.iteration_ns if base and base.iteration_ns and o.iteration_ns else None
                share = o.exposed_ns / o.makespan_ns if o.exposed_ns is not None and o.makespan_ns else None
                train.add_row(
                    str(n) if i == 0 else "",
                    o.method,
                    fmt_time(o.iteration_ns),
                    fmt_ratio(speedup) if o.method != "baseline" else "",
                    fmt_time(o.exposed_ns),
                    fmt_pct(share),
                    end_section=i == len(ran) - 1,
                )
        parts.append(train)
    return Group(*parts)


def summary_table(summary: benchmod.Summary) -> Table:
    """Per method: geometric-mean speedup, mean and max gap, utilisation, optimal counts."""
    table = Table(
        title=f"summary over {summary.instances} instances: {summary.proven_optimal} with a proven optimum",
        caption="speedup: geometric mean over the baseline; loses: slower than the baseline",
    )
    for col in ("method", "speedup", "mean gap", "max gap", "mean util", "optimal", "loses"):
        table.add_column(col, justify="left" if col == "method" else "right", no_wrap=True)
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
