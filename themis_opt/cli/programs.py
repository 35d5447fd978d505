"""Programs: ``export-program`` (a result as every NPU's sends and receives, a folder ASTRA-sim 2.x
runs) and ``check-program`` (such a folder proved to compute its collectives, and timed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from themis_opt.cli.options import force_option, int_in, out_option, read_instance
from themis_opt.errors import InputError, counted

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.instance import Instance

COMMANDS = {  # each command of this family and its line in --help
    "export-program": "write a result's schedule as a program ASTRA-sim 2.x runs (per-NPU sends and receives)",
    "check-program": "prove a program folder computes its collectives, and time it as ASTRA-sim 2.x does",
}
FORMATS = ("astra", "msccl")  # what export-program writes


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export-program`` and ``check-program``."""
    p = sub.add_parser("export-program", help=COMMANDS["export-program"])
    p.add_argument("result", help="result JSON file (from solve)")
    p.add_argument("--instance", required=True, help="the instance JSON the result is for")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="astra",
        help="astra: a folder ASTRA-sim 2.x runs as it is (its custom collectives; run.sh holds the command); "
        "msccl: MSCCL-IR XML for the MSCCL executor, one all-reduce, reduce-scatter or all-gather over every "
        "GPU of its communicator (over part of the network: one group's, the same for every group) (default astra)",
    )
    p.add_argument(
        "--max-steps",
        type=int_in(1, 1 << 20),
        default=None,
        help="msccl: steps a thread block may hold, the executor's MSCCL_MAX_NUM_STEPS (default 64, its default "
        "build's; raise it for a runtime built with more)",
    )
    p.add_argument(
        "--collective",
        default=None,
        metavar="ID",
        help="msccl: the collective (its id in the instance) whose algorithm to write, alone: its messages in the "
        "schedule's order, without the computations, issue times and other collectives around it (default: the "
        "instance's one collective)",
    )
    p.add_argument(
        "--unpadded",
        action="store_true",
        help="astra: write each message's data alone; by default each carries the model's delays (endpoint "
        "delay, message overhead, phase delay, reductions), which 2.x's custom path does not charge, as padding "
        "bytes, so that 2.x times the program as the schedule is timed (msccl: always unpadded)",
    )
    out_option(p, "folder to write the program to, whole or not at all: a new or empty one")
    force_option(p)
    p.set_defaults(handler=export_program)

    p = sub.add_parser("check-program", help=COMMANDS["check-program"])
    p.add_argument("folder", help="a folder export-program wrote (either format: program.xml marks MSCCL's)")
    p.set_defaults(handler=check_program)


def export_program(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt export-program``."""
    from themis_opt.fileio import check_new_folder
    from themis_opt.formats.native import check_folder, load_result
    from themis_opt.programs import check_program, program_of
    from themis_opt.programs.astra import write_program
    from themis_opt.programs.msccl import MAX_STEPS, as_msccl, write_msccl
    from themis_opt.report import fmt_time

    if args.max_steps is not None and args.format != "msccl":
        raise InputError("--max-steps", "sets MSCCL's steps a thread block: it applies with --format msccl only")
    if args.unpadded and args.format != "astra":
        raise InputError("--unpadded", "applies with --format astra only: an MSCCL program carries its data alone")
    if args.collective is not None and args.format != "msccl":
        raise InputError("--collective", "applies with --format msccl only: an ASTRA-sim program runs every task")
    check_folder(args.out)
    check_new_folder(args.out, force=args.force, keep=[args.result, args.instance])
    result = load_result(args.result)
    instance = read_instance(args.instance)
    if instance.name != result.instance:
        raise InputError("--instance", f"is {instance.name!r}; the result is for {result.instance!r}")
    collective = _collective(instance, args.collective) if args.format == "msccl" else None
    program = whole = program_of(instance, result)
    if args.format == "msccl":
        program = as_msccl(program, collective)
    elif args.unpadded:
        program = program.unpadded()
    timing = check_program(program)
    extra = {"instance": instance.name, "method": result.label, "schedule_makespan_ns": result.makespan}
    if args.format == "msccl":
        steps = args.max_steps or MAX_STEPS
        files = write_msccl(program, args.out, time_ns=timing.time_ns, max_steps=steps, extra=extra, force=args.force)
    else:
        files = write_program(program, args.out, time_ns=timing.time_ns, extra=extra, force=args.force)
    size = sum(f.stat().st_size for f in files)
    group = f" (of the {whole.npus}: the communicator of one group of the collective's, each runs the same)"
    group = group if program.npus < whole.npus else ""
    console.print(
        f"wrote {counted(len(files), 'file')} ({size / 2**20:.1f} MiB) to {args.out}: "
        f"{counted(program.npus, 'NPU')}{group}, {counted(program.num_ops, 'node')}, checked"
    )
    assert result.makespan is not None and result.schedule is not None  # a result with a schedule has both
    span, what = result.makespan, "the schedule's makespan"
    if collective is not None:
        phases = [p for chunk in result.schedule.chunks if chunk.collective == collective for p in chunk.phases]
        span = max(p.end_ns for p in phases) - min(p.start_ns for p in phases) if phases else 0.0
        what = f"collective {args.collective} alone; its span in the schedule"
    change = f", {(timing.time_ns - span) / span:+.3%}" if span else ""  # a collective of no phase spans 0
    run = f"run it with {args.out}/run.sh" if args.format == "astra" else "in place, one buffer"
    console.print(
        f"program time {fmt_time(timing.time_ns)} as ASTRA-sim 2.x times it ({what} {fmt_time(span)}{change}); {run}"
    )
    return 0


def _collective(instance: Instance, name: str | None) -> int | None:
    """The index of the collective ``--collective`` names; ``None`` for an instance of one collective."""
    ids = [coll.id for coll in instance.collectives]
    shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    if name is None:
        if len(ids) > 1:
            raise InputError(
                "--collective",
                f"the instance holds {len(ids)} collectives ({shown}): name the one to write (an MSCCL algorithm "
                "is one collective call)",
            )
        return None
    if name not in ids:
        raise InputError("--collective", f"no collective {name!r} in the instance (its ids: {shown})")
    return ids.index(name)


def check_program(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt check-program``."""
    from themis_opt.programs import check_program
    from themis_opt.programs.astra import read_program
    from themis_opt.programs.msccl import XML, read_msccl
    from themis_opt.report import fmt_time

    program = read_msccl(args.folder) if (Path(args.folder) / XML).is_file() else read_program(args.folder)
    timing = check_program(program)
    padding = int(program.summary()["padding_bytes"])
    padded = f", its messages padded with {padding:,} bytes of the model's delays" if padding else ""
    console.print(
        f"{args.folder}: {counted(program.npus, 'NPU')}, {counted(len(program.collectives), 'collective')}, "
        f"{counted(program.num_ops, 'node')}: every message matched, no deadlock, each dimension one phase at a "
        f"time, no race, every NPU ends with its collective's result; time {fmt_time(timing.time_ns)} "
        f"({timing.time_ns} ns)"
        f"{padded}"
    )
    return 0
