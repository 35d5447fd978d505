"""``solve`` (one instance, one method or all) and ``validate`` (a result against its instance)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from themis_opt.budget import Deadline
from themis_opt.cli.options import (
    bounds_option,
    methods_option,
    number_in,
    out_option,
    params_of,
    read_instance,
    solver_options,
)
from themis_opt.errors import InputError
from themis_opt.methods import VARIANTS, method_names
from themis_opt.sim.queues import QUEUE_POLICIES

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.instance import Instance
    from themis_opt.methods import SolveOptions
    from themis_opt.params import SolveParams


COMMANDS = {  # each command of this family and its line in --help
    "solve": "schedule one instance with one method, or all of them",
    "validate": "check a result's schedule against its instance",
    "chunks": "solve an instance at several chunk counts: the count each method does best at, one bound for all",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``solve`` and ``validate``."""
    names = ", ".join(method_names())
    p = sub.add_parser("solve", help=COMMANDS["solve"])
    p.add_argument("instance", help="instance JSON file")
    p.add_argument(
        "--method",
        choices=(*method_names(), "all"),
        default="themis",
        metavar="METHOD",
        help=f"{names}; or all: {', '.join(VARIANTS)} in turn, cpsat from the best of the others (default themis)",
    )
    p.add_argument(
        "--intra",
        choices=tuple(QUEUE_POLICIES),
        default=None,
        help=(
            "intra-dimension policy: "
            + "; ".join(f"{p.name}, {p.summary}" for p in QUEUE_POLICIES.values())
            + " (default: scf for themis, fifo for baseline, the better of fifo and scf for balanced)"
        ),
    )
    out_option(
        p,
        "write the result JSON here (with --method all: one file per method: OUT.METHOD.json)",
        "--output",
        required=False,
    )
    bounds_option(p, "auto")
    solver_options(p, 10.0, "the whole command")
    p.add_argument(
        "--quantum-ns",
        type=number_in(0, 1e15),
        default=None,
        help="CP-SAT time quantum in ns (default: exact where times allow, else warm-start makespan / 100000)",
    )
    p.add_argument("--log", action="store_true", help="stream the searches' log to standard error (default off)")
    p.set_defaults(handler=solve, files=files)

    p = sub.add_parser("validate", help=COMMANDS["validate"])
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("result", help="result JSON file")
    p.set_defaults(handler=validate)

    p = sub.add_parser("chunks", help=COMMANDS["chunks"])
    p.add_argument("instance", help="instance JSON file")
    cut = p.add_mutually_exclusive_group()
    cut.add_argument(
        "--counts",
        default=None,
        metavar="C1,C2,...",
        help=f"chunk counts to cut every collective into, comma-separated (default {DEFAULT_COUNTS})",
    )
    cut.add_argument(
        "--sizes",
        default=None,
        metavar="S1,S2,...",
        help="chunk sizes instead (NCCL's lever), comma-separated, like 1MiB,4MiB: each collective cut into "
        "ceil(its bytes / size) chunks (default: --counts)",
    )
    methods_option(p, "baseline,themis,cpsat")
    p.add_argument(
        "--mix",
        default=None,
        metavar="METHOD",
        help="then give each group of like collectives its own count from those swept, searched by this "
        "method's simulations (one of --method's, not cpsat), solve that mix with every method and bound "
        "every mix (default: off)",
    )
    out_option(p, "write the instance cut where the shortest schedule was found (any method and cut)", required=False)
    solver_options(p, 30.0, "the whole sweep (an equal share a count or size, two for --mix)")
    p.set_defaults(handler=chunks, fields={"chunks": "counts", "counts": "counts", "sizes": "sizes", "mix": "mix"})


DEFAULT_COUNTS = "1,2,4,8,16,32,64"  # chunk counts `chunks` sweeps: powers of two to a count past the files'


def solve(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt solve``."""
    from themis_opt.formats.native import check_writable

    params = params_of(args)
    if args.method == "all" and args.intra is not None:
        raise InputError("--intra", "applies to one method, not to --method all (each method has its own)")
    options = None if args.method == "all" else _options(args, args.method, args.intra, args.time_limit)
    instance = read_instance(args.instance)
    for path in outputs(args).values():
        check_writable(path)
    if not args.log:
        return _run(args, console, instance, params, options)
    package = logging.getLogger("themis_opt")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = package.level
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        return _run(args, console, instance, params, options)
    finally:  # main() may be called again in the same process
        package.removeHandler(handler)
        package.setLevel(level)


def outputs(args: argparse.Namespace) -> dict[str, Path]:
    """Where ``solve`` writes each method's result: ``--out``, or one file per method with all."""
    if args.out is None:
        return {}
    out = Path(args.out)
    if args.method != "all":
        return {args.method: out}
    return {v: out.with_name(f"{out.stem}.{v}{out.suffix or '.json'}") for v in VARIANTS}


def files(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Each file ``solve`` writes, with the option that names it (for the checks before any work)."""
    every = args.method == "all"  # one file per method, named after --out
    return [(f"--out ({m}'s file)" if every else "--out", path) for m, path in outputs(args).items()]


def _options(args: argparse.Namespace, method: str, intra: str | None, time_limit: float) -> SolveOptions:
    """The options of ``solve`` or ``bench``'s call of ``method`` (checked here, before any work)."""
    from themis_opt.methods import SolveOptions

    return SolveOptions.of(
        method,
        intra,
        time_limit=time_limit,
        workers=args.workers,
        seed=args.seed,
        quantum_ns=args.quantum_ns,
        log=args.log,
        bound_set=args.bounds,
    )


def _run(
    args: argparse.Namespace,
    console: Console,
    instance: Instance,
    params: SolveParams | None,
    options: SolveOptions | None,
) -> int:
    from themis_opt.bounds import programs_wanted, solvers_loaded
    from themis_opt.formats.native import save_result
    from themis_opt.params import SolveParams
    from themis_opt.report import comparison_table, result_summary
    from themis_opt.result import Interrupted
    from themis_opt.solving import run_method, solve_all

    settings = params or SolveParams()
    written = outputs(args)
    pipeline = settings.pipeline
    # results written and reported within the limit
    writing = len(written) * instance.num_phases * pipeline.write_seconds_per_phase
    reporting = (len(VARIANTS) if options is None else 1) * instance.num_phases * pipeline.report_seconds_per_phase
    if written and writing + reporting > pipeline.write_share * args.time_limit:  # the limit could not be kept
        files = f"{len(written)} result{'s' if len(written) > 1 else ''}"
        raise InputError(
            "--time-limit",
            f"{args.time_limit:g} s cannot hold writing {files} of {instance.num_phases:,} phases "
            f"(about {writing + reporting:.1f} s with the report): raise it, or write one method's result",
        )
    reserve = min(pipeline.exit_reserve, pipeline.exit_reserve_share * args.time_limit)
    reserve += min(writing + reporting, pipeline.write_share * args.time_limit)
    deadline = Deadline(args.started + args.time_limit - reserve)
    exact = args.method in ("all", "cpsat")
    if exact or programs_wanted(instance, args.bounds, settings.bounds):
        solvers_loaded(deadline, settings.bounds, cpsat=exact)  # before the stages share out the time that is left
    if options is not None:
        try:
            result = run_method(instance, dataclasses.replace(options, time_limit=deadline.left()), params=params)
        except Interrupted as stop:  # the best schedule so far is kept, then the command stops as interrupted
            console.print(result_summary(instance, stop.result))
            if written:
                save_result(stop.result, written[args.method])
            raise
        console.print(result_summary(instance, result))
        if written:
            save_result(result, written[args.method])
        return 0
    try:
        results = solve_all(
            instance,
            VARIANTS,
            time_limit=deadline.left(),
            workers=args.workers,
            seed=args.seed,
            quantum_ns=args.quantum_ns,
            log=args.log,
            params=params,
            bound_set=args.bounds,
        )
    except Interrupted as stop:  # the methods run so far are kept, in their order
        console.print(comparison_table(instance, stop.results))
        for variant, result in zip(VARIANTS, stop.results):
            if variant in written:
                save_result(result, written[variant])
        raise
    console.print(comparison_table(instance, results))
    for variant, result in zip(VARIANTS, results):
        if variant in written:
            save_result(result, written[variant])
    return 0


def chunks(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt chunks``."""
    from themis_opt.bench.harness import parse_methods
    from themis_opt.chunking import Chunking, check_mix_method, sweep_chunks
    from themis_opt.formats.astra.files import parse_size
    from themis_opt.formats.native import check_writable, save_instance
    from themis_opt.params import SolveParams
    from themis_opt.report import chunk_table, fmt_time

    counts: list[Chunking] = []
    if args.sizes is not None:
        counts = [Chunking(size=parse_size(text, "--sizes")) for text in args.sizes.split(",")]
    else:
        for text in (args.counts or DEFAULT_COUNTS).split(","):
            try:
                count = int(text)
            except ValueError:
                raise InputError("--counts", f"must be whole numbers, comma-separated, got {text!r}") from None
            counts.append(Chunking(count=count))
    methods = parse_methods(args.method)
    if args.mix is not None:
        check_mix_method(args.mix, methods)
    if args.out is not None:
        check_writable(args.out)
    params = params_of(args)
    instance = read_instance(args.instance)
    deadline = Deadline(args.started + args.time_limit)
    pipeline = (params or SolveParams()).pipeline
    # each count's solve (and the mix's search and solve) may end as late as a command's: an exit
    # reserve for each, and one to print
    solves = len(counts) + (2 if args.mix is not None else 0)
    reserve = min(pipeline.exit_reserve * (1 + solves), pipeline.exit_reserve_share * args.time_limit)
    sweep = sweep_chunks(
        instance,
        counts,
        methods,
        time_limit=Deadline(deadline.at - reserve).left(),
        workers=args.workers,
        seed=args.seed,
        params=params,
        mix=args.mix,
    )
    console.print(chunk_table(instance, sweep))
    if args.out is not None:
        cut, result = sweep.shortest(instance)
        save_instance(cut, args.out)
        console.print(f"wrote {args.out}: {cut.name}, where {result.label} found {fmt_time(result.makespan)}")
    return 0


def validate(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt validate``: exit status 1 when the schedule breaks a rule or the result claims too much."""
    from themis_opt.formats.native import load_result
    from themis_opt.report import fmt_time
    from themis_opt.result import Status, is_proven, optimality_tolerance
    from themis_opt.validator import validate

    instance = read_instance(args.instance)
    result = load_result(args.result)
    if result.schedule is None:
        raise InputError(f"{args.result}: schedule", "is null: there is no schedule to validate")
    violations = validate(instance, result.schedule)
    if result.instance != instance.name:
        violations.insert(0, f"result is for instance {result.instance!r}, not {instance.name!r}")
    claimed = result.makespan
    if claimed is not None and not math.isclose(claimed, result.schedule.makespan, rel_tol=1e-9, abs_tol=1e-6):
        violations.append(f"makespan_ns says {claimed}, the schedule ends at {result.schedule.makespan}")
    span, bound = result.schedule.makespan, result.lower_bound
    if bound > span + optimality_tolerance(span, instance.origin_ns):
        violations.append(f"the lower bound says {bound}, above the schedule's makespan {span}")
    if result.status is Status.OPTIMAL and not is_proven(span, bound, instance.origin_ns):
        violations.append(f"status says optimal, but the makespan {span} is above the lower bound {bound}")
    if violations:
        for line in violations:
            print(line)
        return 1
    console.print(f"valid: {len(result.schedule.chunks)} chunks, makespan {fmt_time(result.schedule.makespan)}")
    return 0
