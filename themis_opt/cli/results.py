"""Looking at a result: ``show`` (a Gantt chart in the terminal, or a Chrome trace) and ``plot`` (a figure)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from themis_opt.cli.options import int_in, out_option, path, read_instance
from themis_opt.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.instance import Instance
    from themis_opt.result import Result


COMMANDS = {  # each command of this family and its line in --help
    "show": "draw a result's schedule as a per-dimension Gantt chart, or write it as a trace",
    "plot": 'draw a result\'s schedule as a figure (needs pip install -e ".[plot]")',
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``show`` and ``plot``."""
    p = sub.add_parser("show", help=COMMANDS["show"])
    p.add_argument("result", help="result JSON file")
    p.add_argument(
        "--width",
        type=int_in(40, 10_000),
        default=None,
        help="columns the chart takes, labels included (default: the terminal's)",
    )
    p.add_argument(
        "--trace",
        metavar="PATH",
        type=path,
        default=None,
        help="also write the schedule as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and "
        "chrome://tracing open: a track per dimension and one for compute (default: none)",
    )
    p.add_argument(
        "--instance",
        default=None,
        help="the instance JSON, for the trace's collective ids and dimension names (default: the result's "
        "schedule alone: collectives and dimensions by number)",
    )
    p.set_defaults(handler=show)

    p = sub.add_parser("plot", help=COMMANDS["plot"])
    p.add_argument("result", help="result JSON file")
    out_option(p, "figure file: .svg, .png or .pdf")
    p.add_argument("--instance", default=None, help="the instance JSON, to name the dimensions (default: d0, d1...)")
    p.set_defaults(handler=plot)


def show(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt show``."""
    from themis_opt.formats.native import check_writable, load_result, write_json
    from themis_opt.report import GANTT_MARGIN, fmt_time, gantt

    if args.instance and not args.trace:
        raise InputError("--instance", "names the trace's collectives and dimensions: it applies with --trace only")
    if args.trace:
        check_writable(args.trace)
    result = load_result(args.result)
    if result.schedule is None:
        raise InputError(f"{args.result}: schedule", "is null: there is nothing to draw")
    num_dims = 1 + max((p.dim for c in result.schedule.chunks for p in c.phases), default=0)
    if args.trace:
        from themis_opt.formats.trace import trace_events

        instance = _instance_of_result(args, result) if args.instance else None
        write_json(args.trace, trace_events(result.schedule, instance, result.instance))
    if args.width is not None:  # rich wraps every line at the console's width
        console = Console(width=args.width)
    console.print(f"{result.instance}: {result.label}, makespan {fmt_time(result.makespan)}")
    console.print(gantt(result.schedule, num_dims, max(10, console.width - GANTT_MARGIN)))
    if args.trace:
        console.print(f"wrote {args.trace} (open it in ui.perfetto.dev or chrome://tracing)")
    return 0


def _instance_of_result(args: argparse.Namespace, result: Result) -> Instance:
    """``--instance``, refused unless it is the instance the result is for and its schedule fits it."""
    instance = read_instance(args.instance)
    if instance.name != result.instance:
        raise InputError("--instance", f"is {instance.name!r}; the result is for {result.instance!r}")
    assert result.schedule is not None
    chunks, dims = set(instance.chunk_ids), instance.network.num_dims
    for chunk in result.schedule.chunks:  # what the trace and the figure look up in the instance
        where = f"the result's collective {chunk.collective} chunk {chunk.chunk}"
        if (chunk.collective, chunk.chunk) not in chunks:
            raise InputError("--instance", f"does not fit the result: {where} is not in it")
        if any(phase.dim >= dims for phase in chunk.phases):
            raise InputError("--instance", f"does not fit the result: {where} runs on a dimension past its {dims}")
    if any(c.compute >= len(instance.computes) for c in result.schedule.computes):
        raise InputError("--instance", "does not fit the result: a compute task of the result is not in it")
    return instance


def plot(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt plot``."""
    from themis_opt.formats.native import check_writable, load_result
    from themis_opt.plot import FORMATS, gantt_figure, save

    if Path(args.out).suffix.lower() not in FORMATS:
        raise InputError(args.out, f"must end in {', '.join(FORMATS)}")
    check_writable(args.out)
    result = load_result(args.result)
    if result.schedule is None:
        raise InputError(f"{args.result}: schedule", "is null: there is nothing to draw")
    names = None
    if args.instance:
        names = [d.name for d in _instance_of_result(args, result).network.dimensions]
    console.print(f"wrote {save(gantt_figure(result, names), args.out)}")
    return 0
