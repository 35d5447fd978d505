"""Figures for papers (the optional ``[plot]`` extra, matplotlib).

* :func:`gantt_figure`: one row per dimension (and one for the compute unit),
  each phase a rectangle coloured by its chunk's order, reduce-scatter solid,
  all-gather hatched, all-to-all cross-hatched; idle time is the white between
  them; the makespan and the lower bound are marked.
* :func:`bench_figures`: from bench rows, the speedup over the baseline per
  instance and method (bars), the distribution of gaps to the lower bound per
  method (ECDF), and bandwidth utilisation per method.

Figures are deterministic: SVG ids come from a fixed hash salt, text stays
text, and no date is written, so the same input gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_writer

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from themis_opt.bench import Record
    from themis_opt.result import Result

INSTALL_HINT = 'matplotlib is not installed: pip install -e ".[plot]" (or pip install "themis_opt[plot]")'
MAX_DRAWN_PHASES = 20_000  # beyond this, phases of one dimension, order and operation share one drawn bar set
HATCH = {"reduce_scatter": "", "all_gather": "////", "all_to_all": "xxxx"}
FORMATS = (".svg", ".png", ".pdf")
BENCH_FIGURES = ("speedup", "gaps", "utilization")  # bench_figures' names, the files plot-bench writes


def pyplot() -> Any:
    """Matplotlib's pyplot on the file-only Agg backend (the ``plot`` extra; one line if it is missing)."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("plot", INSTALL_HINT) from None
    matplotlib.use("Agg")
    matplotlib.rcParams.update(
        {"svg.hashsalt": "themis-opt", "svg.fonttype": "none", "font.size": 9, "hatch.linewidth": 0.6}
    )
    import matplotlib.pyplot as plt

    return plt


def _short(name: str, most: int = 48) -> str:
    """An instance's name cut to ``most`` characters for a tick label (its start and end kept)."""
    return name if len(name) <= most else f"{name[: most // 2 - 1]}...{name[-(most // 2 - 2) :]}"


def _caption(rows: Sequence[Record]) -> str:
    """When and how bench rows were measured: dates, version, time limit, seed, instances."""
    dates = sorted({r.measured for r in rows if r.measured})
    when = "date not recorded" if not dates else dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    versions = sorted({r.version for r in rows if r.version})
    limits = sorted({r.time_limit_s for r in rows})
    limit = f"{limits[0]:g} s a method" if len(limits) == 1 else "mixed time limits"
    by = f"themis_opt {', '.join(versions)}" if versions else "themis_opt"
    return f"measured {when} by {by}; {len(rows)} instances, {limit}, seed {rows[0].seed} (themis-opt bench)"


def save(figure: Figure, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` (.svg, .png or .pdf) without dates or versions in it."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise InputError(str(path), f"must end in {', '.join(FORMATS)}")
    metadata: dict[str, Any] = {
        ".svg": {"Date": None, "Creator": None},
        ".png": {"Software": None},
        ".pdf": {"CreationDate": None, "Creator": None, "Producer": None},
    }[path.suffix.lower()]
    with atomic_writer(path, "wb") as handle:
        figure.savefig(handle, format=path.suffix.lower()[1:], metadata=metadata)
    pyplot().close(figure)
    return path


def _time_unit(span: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if span >= scale:
            return scale, unit
    return 1.0, "ns"


def gantt_figure(result: Result, dimension_names: Sequence[str] | None = None) -> Figure:
    """The schedule of ``result`` as a Gantt chart (see the module's docstring)."""
    plt = pyplot()
    from matplotlib.patches import Patch, Rectangle

    schedule = result.schedule
    if schedule is None:
        raise InputError("plot", "the result has no schedule to draw")
    num_dims = 1 + max((p.dim for c in schedule.chunks for p in c.phases), default=0)
    names = list(dimension_names or [f"d{d}" for d in range(num_dims)])
    rows = names + (["compute"] if schedule.computes else [])
    scale, unit = _time_unit(max(schedule.makespan, 1e-9))
    orders = sorted({c.order for c in schedule.chunks})
    cmap = plt.get_cmap("tab20")
    colour = {order: cmap(i % 20) for i, order in enumerate(orders)}
    figure, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 1.6), layout="constrained")
    total = sum(len(c.phases) for c in schedule.chunks)
    if total <= MAX_DRAWN_PHASES:
        for chunk in schedule.chunks:
            for p, phase in enumerate(chunk.phases):
                ax.add_patch(
                    Rectangle(
                        (phase.start_ns / scale, phase.dim - 0.4),
                        phase.duration / scale,
                        0.8,
                        facecolor=colour[chunk.order],
                        edgecolor="black",
                        linewidth=0.2,
                        hatch=HATCH[phase.op.value],
                        gid=f"phase-{chunk.collective}-{chunk.chunk}-{p}",
                    )
                )
    else:  # one bar set per (dimension, order, operation): the picture, not every rectangle
        groups: dict[tuple[int, tuple[int, ...], str], list[tuple[float, float]]] = {}
        for chunk in schedule.chunks:
            for phase in chunk.phases:
                key = (phase.dim, chunk.order, phase.op.value)
                groups.setdefault(key, []).append((phase.start_ns / scale, phase.duration / scale))
        for (dim, order, op), spans in sorted(groups.items()):
            ax.broken_barh(spans, (dim - 0.4, 0.8), facecolors=colour[order], hatch=HATCH[op], linewidth=0)
    for entry in schedule.computes:
        ax.add_patch(
            Rectangle(
                (entry.start_ns / scale, num_dims - 0.4),
                (entry.end_ns - entry.start_ns) / scale,
                0.8,
                facecolor="0.6",
                edgecolor="black",
                linewidth=0.2,
                gid=f"compute-{entry.compute}",
            )
        )
    ax.axvline(schedule.makespan / scale, color="black", linestyle="-", linewidth=1.0)
    ax.axvline(result.lower_bound / scale, color="tab:red", linestyle="--", linewidth=1.0)
    ax.set_xlim(0, schedule.makespan / scale * 1.02)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("dimension")
    ax.set_title(
        f"{result.instance}: {result.label}, makespan {schedule.makespan / scale:.4g} {unit}, "
        f"lower bound {result.lower_bound / scale:.4g} {unit}"
    )
    legend = [Patch(facecolor=colour[o], label="(" + ",".join(map(str, o)) + ")") for o in orders[:12]]
    legend += [
        Patch(facecolor="white", edgecolor="black", label="reduce-scatter"),
        Patch(facecolor="white", edgecolor="black", hatch=HATCH["all_gather"], label="all-gather"),
        plt.Line2D([], [], color="black", label="makespan"),
        plt.Line2D([], [], color="tab:red", linestyle="--", label="lower bound"),
    ]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, title="orders")
    drawn: Figure = figure
    return drawn


def bench_figures(records: Sequence[Record], methods: Sequence[str]) -> dict[str, Figure]:
    """``speedup``, ``gaps`` and ``utilization`` figures of bench rows, each captioned with when and how
    the rows were measured.
    """
    plt = pyplot()
    import numpy as np

    rows = [r for r in records if not r.error]
    if not rows:
        raise InputError("plot-bench", "the rows file holds no instance that ran")
    names = [_short(r.instance) for r in rows]
    caption = _caption(rows)
    figures: dict[str, Figure] = {}

    others = [m for m in methods if m != "baseline"]
    figure, ax = plt.subplots(figsize=(min(16.0, 3.5 + 0.6 * len(rows)), 5.5), layout="constrained")
    width = 0.8 / max(1, len(others))
    x = np.arange(len(rows))
    for i, m in enumerate(others):
        values = [r.speedup(m) or 0.0 for r in rows]
        colour = f"C{list(methods).index(m)}"  # one colour per method in every figure
        ax.bar(x + (i - (len(others) - 1) / 2) * width, values, width, label=m, color=colour, gid=f"speedup-{m}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, names, rotation=40, ha="right", fontsize=8)
    ax.tick_params(axis="y", labelsize=9)
    ax.set_ylabel("speedup over the baseline (x)", fontsize=10)
    ax.set_xlabel("instance", fontsize=10)
    ax.set_title("Speedup over the baseline, per instance (higher is faster)", fontsize=11)
    if others:
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:  # a figure that says why it is empty, rather than a warning about its legend
        ax.text(0.5, 0.5, "no method besides the baseline in these rows", ha="center", transform=ax.transAxes)
    figure.supxlabel(caption, fontsize=7, color="dimgray")  # in the layout: never over the axis label
    figures["speedup"] = figure

    figure, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for m in methods:
        gaps = sorted(100 * g for r in rows if (g := r.gap(m)) is not None)
        if gaps:
            ys = [(i + 1) / len(gaps) for i in range(len(gaps))]
            ax.step(
                [0.0, *gaps], [0.0, *ys], where="post", label=m, color=f"C{list(methods).index(m)}", gid=f"ecdf-{m}"
            )
    ax.set_xlabel("gap to the best lower bound (%)", fontsize=10)
    ax.set_ylabel("share of instances within that gap", fontsize=10)
    ax.set_title("How far each method is from the optimum (ECDF)", fontsize=11)
    ax.set_ylim(0, 1.02)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9)
    figure.supxlabel(caption, fontsize=7, color="dimgray")  # in the layout: never over the axis label
    figures["gaps"] = figure

    figure, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for i, m in enumerate(methods):
        utils = [100 * u for r in rows if (o := r.outcome(m)) and (u := o.bandwidth_utilization) is not None]
        if utils:
            ax.bar(i, sum(utils) / len(utils), 0.6, color=f"C{i}", alpha=0.5, edgecolor="black", gid=f"utilization-{m}")
            ax.scatter([i] * len(utils), utils, s=8, color="black", zorder=3)
    ax.set_xticks(range(len(methods)), methods, fontsize=9)
    ax.tick_params(axis="y", labelsize=9)
    ax.set_ylabel("bandwidth utilisation: ideal bound / makespan (%)", fontsize=10)
    ax.set_xlabel("method", fontsize=10)
    ax.set_title("Bandwidth utilisation: mean (bar) and each instance (dots)", fontsize=11)
    ax.set_ylim(0, 105)
    figure.supxlabel(caption, fontsize=7, color="dimgray")  # in the layout: never over the axis label
    figures["utilization"] = figure
    return figures
