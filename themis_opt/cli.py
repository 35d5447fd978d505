"""The themis-opt command line: one subcommand per job (``themis-opt --help`` lists them).

Bad input (files, JSON, arguments) prints one line ``themis-opt: error: ...``
to standard error and exits with status 2. Modules are imported where a
subcommand needs them, so a command that needs no solver does not load one.
"""

from __future__ import annotations

import argparse
import glob
import logging
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console

from themis_opt.budget import Deadline, die_with_parent
from themis_opt.errors import InputError, counted
from themis_opt.generator import FAMILIES
from themis_opt.methods import VARIANTS, method_names, resolve_method
from themis_opt.suites import SUITES

CONNECT_TIMEOUT_S = 10.0  # seconds bench waits for a --scheduler to answer

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt import bench as benchmod
    from themis_opt.instance import Instance, Network
    from themis_opt.params import SolveParams


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"themis-opt: error: {message}\n")
        raise SystemExit(2)


def _number_in(low: float, high: float) -> type:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not (low < value <= high):
            raise argparse.ArgumentTypeError(f"must be a number > {low:g} and <= {high:g}, got {text}")
        return value

    return parse  # type: ignore[return-value]


def _int_in(low: int, high: int) -> type:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be >= {low} and <= {high}, got {value}")
        return value

    return parse  # type: ignore[return-value]


def _path(text: str) -> str:
    """A path argument: not empty (an empty one would name the current folder, or nothing)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _solver_options(parser: argparse.ArgumentParser, time_limit: float, what: str) -> None:
    parser.add_argument(
        "--time-limit",
        type=_number_in(0, 1e6),
        default=time_limit,
        help=f"seconds {what} may take, every stage included (default {time_limit:g})",
    )
    parser.add_argument(
        "--workers",
        type=_int_in(1, 1024),
        default=None,
        help="CP-SAT worker threads, and local searches at once (default: the cores available)",
    )
    parser.add_argument("--seed", type=_int_in(0, 2**31 - 1), default=0, help="random seed of the searches (default 0)")
    parser.add_argument(
        "--params",
        metavar="FILE",
        default=None,
        help="tuning parameters from a TOML file; an unknown key is an error (default: the built-in ones)",
    )


def _out(parser: argparse.ArgumentParser, what: str, *aliases: str, required: bool = True) -> None:
    """``--out``: every command writes there; missing folders are created."""
    parser.add_argument(
        "--out",
        *aliases,
        dest="out",
        metavar="PATH",
        type=_path,
        required=required,
        default=None,
        help=f"{what}; missing folders are created, and the path is checked before any work starts"
        + ("" if required else " (default: nothing written)"),
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``themis-opt``."""
    parser = _Parser(
        prog="themis-opt",
        description="Schedule collectives on multi-dimensional networks: ASTRA-sim's baseline and Themis, "
        "balanced orders and CP-SAT, with lower bounds.",
        epilog="Run 'themis-opt COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND", title="commands"
    )
    names = ", ".join(method_names())

    p = sub.add_parser("solve", help="schedule one instance with one method, or all of them")
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
        choices=("fifo", "scf"),
        default=None,
        help="intra-dimension policy (default: scf for themis, fifo for baseline, the better for balanced)",
    )
    _out(
        p,
        "write the result JSON here (with --method all: one file per method: OUT.METHOD.json)",
        "--output",
        required=False,
    )
    p.add_argument(
        "--bounds",
        action="store_true",
        help="compute every lower bound also for baseline and themis (default: the bounds that need no solver)",
    )
    _solver_options(p, 10.0, "the whole command")
    p.add_argument(
        "--quantum-ns",
        type=_number_in(0, 1e15),
        default=None,
        help="CP-SAT time quantum in ns (default: exact where times allow, else warm-start makespan / 100000)",
    )
    p.add_argument("--log", action="store_true", help="stream the searches' log to standard error (default off)")

    p = sub.add_parser("validate", help="check a result's schedule against its instance")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("result", help="result JSON file")

    p = sub.add_parser("generate", help="write random instances of a family")
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--count", type=_int_in(1, 100_000), required=True)
    p.add_argument("--seed", type=_int_in(0, 2**31 - 1), required=True)
    _out(p, "folder to write the files to")

    p = sub.add_parser("bench", help="compare methods over instances in a rich table")
    p.add_argument("paths", nargs="*", help="instance files or folders of them")
    p.add_argument("--suite", choices=SUITES, default=None, help="a suite bundled with themis_opt (default: none)")
    p.add_argument(
        "--method",
        "--methods",
        dest="method",
        default="all",
        metavar="METHODS",
        help=f"comma-separated, from {names}; all: {', '.join(VARIANTS)} (default all)",
    )
    _solver_options(p, 5.0, "each method (and the bounds) on each instance")
    p.add_argument("--jobs", type=_int_in(1, 256), default=1, help="instances run in parallel (default 1)")
    _out(p, "append each finished instance to this JSON-lines file (never erased)", required=False)
    p.add_argument("--resume", action="store_true", help="skip instances already in --out (matched by content)")
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="add to an --out file that holds rows of other methods, time limit, seed or parameters",
    )
    p.add_argument(
        "--csv",
        metavar="PATH",
        type=_path,
        default=None,
        help="also write this run's rows to this CSV file; missing folders are created, and the path is checked "
        "before any work starts (default: none)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        help="run on a Dask cluster: tcp://HOST:PORT, or local:N for N single-threaded local workers "
        '(needs pip install -e ".[dask]"; default: local processes, see --jobs)',
    )
    p.add_argument(
        "--connect-timeout",
        type=_number_in(0, 3600),
        default=None,
        help=f"seconds to wait for the --scheduler to answer; only with --scheduler (default {CONNECT_TIMEOUT_S:g})",
    )

    p = sub.add_parser("workload", help="make a training-iteration task graph from a zoo model or a workload file")
    p.add_argument(
        "model",
        help="a zoo model (resnet50, resnet152, gnmt, dlrm, transformer1t; LLMs: gpt3-175b, llama3-8b, "
        "llama3-70b, llama3-405b, mixtral-8x7b) or an ASTRA-sim 1.0 file",
    )
    p.add_argument("--network", required=True, help="an instance file of any version: its network is used")
    p.add_argument(
        "--passes",
        type=_int_in(1, 100),
        default=None,
        help="training passes (default 2; LLMs 1)",
    )
    p.add_argument(
        "--chunks",
        type=_int_in(1, 4096),
        default=None,
        help="chunks per collective (default: the network instance's preferred-dataset-splits or chunk count)",
    )
    p.add_argument(
        "--policy",
        choices=("LIFO", "FIFO"),
        default=None,
        help="collective priorities (default: the network instance's scheduling-policy, else LIFO; LLMs: none)",
    )
    p.add_argument(
        "--batch",
        type=_int_in(1, 1_000_000),
        default=None,
        help="zoo: samples per NPU (default: the model's; LLMs: sequences per data-parallel rank, 1)",
    )
    p.add_argument(
        "--precision",
        choices=("bf16", "fp16", "fp32"),
        default=None,
        help="zoo: gradient element size (default fp16; LLMs bf16)",
    )
    p.add_argument(
        "--peak-tflops",
        type=_number_in(0, 1e9),
        default=None,
        help="zoo: the NPU's peak (default 100; LLMs 989, an H100 SXM's dense bf16)",
    )
    p.add_argument(
        "--efficiency",
        "--mfu",
        dest="efficiency",
        type=_number_in(0, 1),
        default=None,
        help="zoo: share of the peak reached, the model FLOPs utilisation (default 0.5; LLMs 0.4)",
    )
    p.add_argument(
        "--model-parallel",
        type=_int_in(1, 2**20),
        default=None,
        help="zoo: Transformer-1T's model-parallel group (default 8)",
    )
    for group, default in (("tp", "1"), ("ep", "1"), ("dp", "the NPUs left")):
        p.add_argument(
            f"--{group}",
            type=_int_in(1, 2**20),
            default=None,
            help=f"LLMs: the {dict(tp='tensor', ep='expert', dp='data')[group]}-parallel group (default {default})",
        )
    p.add_argument(
        "--data-parallel",
        choices=("ddp", "fsdp"),
        default=None,
        help="LLMs: gradient all-reduces in 25 MiB buckets, or sharded all-gathers and reduce-scatters (default ddp)",
    )
    p.add_argument("--seq", type=_int_in(1, 2**24), default=None, help="LLMs: tokens a sequence (default: the model's)")
    p.add_argument("--name", default=None, help="the instance's name (default: the model's)")
    _out(p, "instance JSON file to write")

    p = sub.add_parser("import-astra", help="make an instance from ASTRA-sim network, system and workload files")
    p.add_argument("network", help="ASTRA-sim 1.0 network .json or 2.x network .yml")
    p.add_argument("system", help="ASTRA-sim system file (1.0 key: value text, or 2.x JSON)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--all-reduce",
        metavar="SIZE",
        help="one all-reduce of SIZE bytes per NPU: 64MiB and 1GiB are 2^20 and 2^30 bytes, 1GB is 10^9",
    )
    what.add_argument(
        "--workload",
        metavar="FILE",
        help="an ASTRA-sim 1.0 workload file (any parallelism), or the prefix of 2.x Chakra traces, "
        'PREFIX.0.et... (needs pip install -e ".[chakra]")',
    )
    p.add_argument("--passes", type=_int_in(1, 1000), default=1, help="ASTRA-sim's --num-passes (default 1)")
    for scale, what_ in (("comm", "collective sizes"), ("compute", "compute times"), ("injection", "endpoint-delay")):
        p.add_argument(
            f"--{scale}-scale",
            type=_number_in(0, 1e9),
            default=1.0,
            help=f"ASTRA-sim's --{scale}-scale: {what_} times this, truncated as ASTRA-sim does (default 1)",
        )
    p.add_argument(
        "--ignore-unknown",
        action="store_true",
        help="skip keys ASTRA-sim does not read (default: an unknown key is an error)",
    )
    p.add_argument("--name", default=None, help="the instance's name (default: the network file's stem)")
    _out(p, "instance JSON file to write")

    p = sub.add_parser("export-astra", help="write ASTRA-sim files that run the same case")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("--version", type=int, choices=(1, 2), default=1, help="ASTRA-sim 1.0 or 2.x files (default 1)")
    p.add_argument(
        "--method",
        choices=("baseline", "themis"),
        default=None,
        help="scheduling a 1.0 system file asks for (default themis; 2.x always runs the baseline)",
    )
    _out(p, "folder to write the files to")

    p = sub.add_parser("plot", help='draw a result\'s schedule as a figure (needs pip install -e ".[plot]")')
    p.add_argument("result", help="result JSON file")
    _out(p, "figure file: .svg, .png or .pdf")
    p.add_argument("--instance", default=None, help="the instance JSON, to name the dimensions (default: d0, d1...)")

    p = sub.add_parser("plot-bench", help='draw the figures of bench rows (needs pip install -e ".[plot]")')
    p.add_argument("rows", help="JSON-lines file written by bench --out")
    _out(p, "folder for the speedup, gap and utilisation figures")
    p.add_argument("--format", choices=("svg", "png", "pdf"), default="svg", help="figure format (default svg)")

    p = sub.add_parser("show", help="draw a result's schedule as a per-dimension Gantt chart")
    p.add_argument("result", help="result JSON file")
    p.add_argument(
        "--width",
        type=_int_in(40, 10_000),
        default=None,
        help="columns the chart takes, labels included (default: the terminal's)",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, started: float | None = None) -> int:
    """Run ``themis-opt``; returns the exit status (0 ok, 1 invalid schedule, 2 bad input, 130 interrupted).

    ``--time-limit`` counts from ``started`` (a ``time.perf_counter()``
    reading; default now): loading and printing are stages too.
    """
    started = time.perf_counter() if started is None else started
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = started
    console = Console()
    handlers = {
        "solve": _solve,
        "validate": _validate,
        "generate": _generate,
        "bench": _bench,
        "workload": _workload,
        "import-astra": _import_astra,
        "export-astra": _export_astra,
        "plot": _plot,
        "plot-bench": _plot_bench,
        "show": _show,
    }
    try:
        _outputs_apart(args)
        code = handlers[args.command](args, console)
        sys.stdout.flush()  # an output the OS refuses fails here, inside the one-line handling below
        return code
    except InputError as error:
        sys.stderr.write(f"themis-opt: error: {error}\n")
        return 2
    except OSError as error:  # standard output refused (a full disk, a closed pipe): one line, no traceback
        where = error.filename or "standard output"
        sys.stderr.write(f"themis-opt: error: {where}: cannot be written ({error.strerror or error})\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("themis-opt: interrupted\n")
        return 130


_INPUTS = ("instance", "result", "paths", "network", "system", "workload", "model", "rows", "params")
_FILE_OUTPUTS = ("solve", "workload", "import-astra", "plot", "bench")  # --out is a file; the others' a folder


def _outputs_apart(args: argparse.Namespace) -> None:
    """Every file a command will write, the derived ones included, checked before any work starts:
    an output that is an input file, or another output, would overwrite it; a command that writes
    a file refuses a folder (one that writes a folder writes inside it).
    """
    from themis_opt.fileio import check_apart, check_file_output

    outputs: list[tuple[str, Path]] = []
    for name in ("out", "csv"):
        value = getattr(args, name, None)
        if value and (name == "csv" or args.command in _FILE_OUTPUTS):
            check_file_output(f"--{name}", value)
    if args.command == "solve" and args.out:
        every = args.method == "all"  # one file per method, named after --out
        outputs += [(f"--out ({m}'s file)" if every else "--out", path) for m, path in _solve_outputs(args).items()]
    elif args.command == "plot-bench":
        from themis_opt.plot import BENCH_FIGURES

        outputs += [("--out", Path(args.out) / f"{name}.{args.format}") for name in BENCH_FIGURES]
    elif args.command in _FILE_OUTPUTS:
        outputs += [(f"--{name}", Path(getattr(args, name))) for name in ("out", "csv") if getattr(args, name, None)]
    inputs: list[str | Path] = []
    for name in _INPUTS:
        value = getattr(args, name, None)
        inputs += value if isinstance(value, list) else [value] if isinstance(value, str) else []
    for path in list(inputs):  # a folder of instances (bench), a prefix of Chakra traces (import-astra)
        if Path(path).is_dir():
            inputs += sorted(Path(path).glob("*.json"))
        else:
            inputs += sorted(Path(path).parent.glob(f"{glob.escape(Path(path).name)}.*.et"))
    if getattr(args, "suite", None):
        from themis_opt.suites import suite_folder

        inputs += sorted(suite_folder(args.suite).glob("*.json"))
    check_apart(outputs, inputs)


def _solve(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.io import check_writable, load_instance

    params = _params(args)
    searches = args.method in ("all", "cpsat")
    if args.intra is not None and searches:
        raise InputError("--intra", f"applies to one method, not to --method {args.method} (cpsat sequences itself)")
    if args.quantum_ns is not None and not searches:
        raise InputError("--quantum-ns", f"applies to cpsat only, not to --method {args.method}")
    try:
        if args.method != "all":
            resolve_method(args.method, args.intra)
    except InputError as error:
        raise InputError("--intra" if error.path == "intra" else "--method", error.problem) from None
    instance = load_instance(args.instance)
    for path in _solve_outputs(args).values():
        check_writable(path)
    if not args.log:
        return _run_solve(args, console, instance, params)
    package = logging.getLogger("themis_opt")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = package.level
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        return _run_solve(args, console, instance, params)
    finally:  # main() may be called again in the same process
        package.removeHandler(handler)
        package.setLevel(level)


def _params(args: argparse.Namespace) -> SolveParams | None:
    """The ``--params`` file's parameters, or ``None`` for the defaults."""
    if args.params is None:
        return None
    from themis_opt.params import SolveParams

    return SolveParams.from_file(args.params)


def _solve_outputs(args: argparse.Namespace) -> dict[str, Path]:
    """Where ``solve`` writes each method's result: ``--out``, or one file per method with all."""
    if args.out is None:
        return {}
    out = Path(args.out)
    if args.method != "all":
        return {args.method: out}
    return {v: out.with_name(f"{out.stem}.{v}{out.suffix or '.json'}") for v in VARIANTS}


def _run_solve(args: argparse.Namespace, console: Console, instance: Instance, params: SolveParams | None) -> int:
    from themis_opt.bounds import compute_bounds, solvers_loaded
    from themis_opt.io import save_result
    from themis_opt.params import SolveParams
    from themis_opt.report import comparison_table, result_summary
    from themis_opt.solving import solve, solve_all

    settings = params or SolveParams()
    reserve = min(settings.pipeline.exit_reserve, settings.pipeline.exit_reserve_share * args.time_limit)
    deadline = Deadline(args.started + args.time_limit - reserve)
    if args.method in ("all", "cpsat") or args.bounds:
        solvers_loaded(deadline, settings.bounds)  # before the stages share out the time that is left
    options = {"workers": args.workers, "seed": args.seed, "quantum_ns": args.quantum_ns, "log": args.log}
    outputs = _solve_outputs(args)
    if args.method != "all":
        share = deadline.share(settings.bounds.cheap_share)
        bounds = compute_bounds(instance, share, params=settings.bounds) if args.bounds else None
        result = solve(
            instance, args.method, intra=args.intra, time_limit=_left(deadline), bounds=bounds, params=params, **options
        )
        console.print(result_summary(instance, result))
        if outputs:
            save_result(result, outputs[args.method])
        return 0
    results = solve_all(instance, VARIANTS, time_limit=_left(deadline), params=params, **options)
    console.print(comparison_table(instance, results))
    for variant, result in zip(VARIANTS, results):
        if variant in outputs:
            save_result(result, outputs[variant])
    return 0


def _left(deadline: Deadline) -> float:
    """Seconds left before ``deadline`` for the next stage (at least a millisecond, so it can report)."""
    return max(1e-3, deadline.remaining())


def _validate(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.io import load_instance, load_result
    from themis_opt.report import fmt_time
    from themis_opt.result import Status, is_proven, optimality_tolerance
    from themis_opt.validator import validate

    instance = load_instance(args.instance)
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


def _generate(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.generator import generate
    from themis_opt.io import check_folder, save_instance

    out = Path(args.out)
    check_folder(out)
    for instance in generate(args.family, args.count, args.seed):
        save_instance(instance, out / f"{instance.name}.json")
    console.print(f"wrote {counted(args.count, args.family + ' instance')} to {out}")
    return 0


def _instance_paths(args: argparse.Namespace) -> list[str]:
    from themis_opt.suites import suite_folder

    if args.suite and args.paths:
        raise InputError("--suite", "give either --suite or instance paths, not both")
    sources = [suite_folder(args.suite)] if args.suite else [Path(p) for p in args.paths]
    if not sources:
        raise InputError("bench", "give instance paths or --suite")
    paths: list[str] = []
    for source in sources:
        if source.is_dir():
            found = sorted(p for p in source.glob("*.json") if p.name != "optima.json")
            if not found:
                raise InputError(str(source), "holds no instance (.json) files")
            paths += [str(p) for p in found]
        elif source.is_file():
            paths.append(str(source))
        else:
            raise InputError(str(source), "no such file or folder")
    return paths


def _bench(args: argparse.Namespace, console: Console) -> int:
    from themis_opt import bench as benchmod
    from themis_opt.cluster import ClusterLost, check_scheduler
    from themis_opt.io import check_writable, read_json
    from themis_opt.report import bench_table, summary_table

    methods = benchmod.parse_methods(args.method)
    params = _params(args)
    paths = _instance_paths(args)
    documents = {path: read_json(path) for path in paths}
    # bad input fails before any work starts
    digests = {path: benchmod.instance_digest(_instance_of(documents[path], path)) for path in paths}
    if args.resume and not args.out:
        raise InputError("--resume", "needs --out, the file to resume from")
    if args.allow_mixed and not args.out:
        raise InputError("--allow-mixed", "applies to an --out file, and none is given")
    if args.connect_timeout is not None and args.scheduler is None:
        raise InputError("--connect-timeout", "applies to a --scheduler, and none is given")
    if args.scheduler is not None and args.jobs != 1:
        raise InputError("--jobs", "runs local processes: give --jobs or --scheduler, not both")
    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    settings = benchmod.settings_of(methods, args.time_limit, args.seed, params)
    done: list[benchmod.Record] = []
    if args.out:
        done = benchmod.prepare_rows_file(args.out, settings, allow_mixed=args.allow_mixed)
    if args.csv:
        check_writable(args.csv)
    kept = {r.digest: r for r in done if r.settings() == settings and not r.error} if args.resume else {}
    todo = [p for p in paths if digests[p] not in kept]
    records: dict[str, benchmod.Record] = {p: kept[digests[p]] for p in paths if digests[p] in kept}
    written = 0
    with _bench_backend(args, todo, methods, params, documents, digests) as (runs, jobs, workers):
        try:
            for path, record in runs:
                records[path] = record
                if args.out:
                    try:
                        benchmod.append_record(args.out, record)
                    except InputError as error:  # a full disk: the file holds whole rows, --resume runs the rest
                        sys.stderr.write(
                            f"themis-opt: error: {error}; {written} new rows kept (--resume runs the rest)\n"
                        )
                        return 2
                    written += 1
        except KeyboardInterrupt:
            where = f": {written} new rows kept in {args.out}" if args.out else ""
            sys.stderr.write(f"themis-opt: interrupted{where}\n")
            return 130
        except ClusterLost as error:
            where = f"; {written} new rows kept in {args.out}" if args.out else ""
            sys.stderr.write(f"themis-opt: error: lost the scheduler {args.scheduler} ({error}){where}\n")
            return 1
    ordered = [records[p] for p in paths if p in records]
    if args.csv:
        benchmod.write_csv(args.csv, ordered, methods)
    console.print(bench_table(ordered, methods))
    console.print(summary_table(benchmod.summarize(ordered, methods)))
    console.print(f"{counted(len(ordered), 'instance')}, {counted(jobs, 'job')} x {counted(workers, 'CP-SAT worker')}")
    invalid = sum(1 for r in ordered for o in r.outcomes if not o.valid)
    failed = sum(1 for r in ordered if r.error)
    if invalid or failed:
        sys.stderr.write(
            f"themis-opt: {counted(invalid, 'schedule')} failed the validator, {counted(failed, 'instance')} failed\n"
        )
        return 1
    return 0


def _instance_of(document: object, path: str) -> Instance:
    from themis_opt.io import in_file, instance_from_dict

    try:
        return instance_from_dict(document, Path(path).stem)
    except InputError as error:
        raise in_file(error, path) from None


@contextmanager
def _bench_backend(
    args: argparse.Namespace,
    todo: list[str],
    methods: tuple[str, ...],
    params: SolveParams | None,
    documents: dict[str, object],
    digests: dict[str, str],
) -> Iterator[tuple[Iterator[tuple[str, benchmod.Record]], int, int]]:
    """(finished (path, record) pairs, jobs, CP-SAT workers per job) on the chosen backend."""
    from themis_opt.solving import available_workers

    if args.scheduler is None:
        workers = args.workers if args.workers is not None else max(1, available_workers() // args.jobs)
        if args.jobs * workers > available_workers():
            sys.stderr.write(
                f"themis-opt: warning: {counted(args.jobs, 'job')} x {counted(workers, 'worker')} exceed the "
                f"{available_workers()} cores available: timings will suffer\n"
            )
        runs = _run_local(todo, methods, params, args, workers, digests)
        yield _with_progress(runs, len(todo)), args.jobs, workers
        return
    from themis_opt.cluster import connect, run_on_cluster, worker_threads

    timeout = args.connect_timeout if args.connect_timeout is not None else CONNECT_TIMEOUT_S
    with connect(args.scheduler, timeout) as client:
        jobs, threads = worker_threads(client)
        workers = args.workers if args.workers is not None else threads
        items = [(path, documents[path], digests[path]) for path in todo]
        runs = run_on_cluster(client, items, methods, args.time_limit, workers, args.seed, params)
        yield _with_progress(runs, len(todo)), jobs, workers


def _with_progress(runs: Iterator[tuple[str, benchmod.Record]], total: int) -> Iterator[tuple[str, benchmod.Record]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # else it leaves an empty line before any message on standard error
    )
    with progress:
        task = progress.add_task("bench", total=total)
        for path, record in runs:
            progress.update(task, advance=1, description=record.instance)
            yield path, record


def _run_local(
    todo: list[str],
    methods: tuple[str, ...],
    params: SolveParams | None,
    args: argparse.Namespace,
    workers: int,
    digests: dict[str, str],
) -> Iterator[tuple[str, benchmod.Record]]:
    """Yield (path, record) as instances finish, in this process or in ``--jobs`` processes."""
    from themis_opt import bench as benchmod

    settings = benchmod.settings_of(methods, args.time_limit, args.seed, params)
    run = (methods, args.time_limit, workers, args.seed, params)

    def failed(path: str, error: BaseException) -> benchmod.Record:
        return benchmod.failed_record(path, digests[path], settings, str(error))

    if args.jobs == 1:
        for path in todo:
            try:
                record = benchmod.run_instance(path, *run)
            except InputError as error:
                record = failed(path, error)
            yield path, record
        return
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(max_workers=args.jobs, initializer=die_with_parent)
    try:
        pending: dict[Future[benchmod.Record], str] = {}
        queue = list(todo)
        while queue or pending:
            while queue and len(pending) < args.jobs:
                path = queue.pop(0)
                future = pool.submit(benchmod.run_instance, path, *run)
                pending[future] = path
            finished_now, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished_now:
                path = pending.pop(future)
                try:
                    record = future.result()
                except Exception as error:  # a worker's failure is reported in its row
                    record = failed(path, error)
                yield path, record
    except BaseException:  # Ctrl-C, or the caller stopped: no worker may outlive the bench
        benchmod.stop_pool(pool)
        raise
    pool.shutdown(wait=True)


_LLM_ONLY = ("tp", "ep", "dp", "data_parallel", "seq")
_ZOO_ONLY = ("model_parallel", "policy")
_ZOO_SIZES = ("batch", "precision", "peak_tflops", "efficiency", "model_parallel")  # not a workload file's


def _workload(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.io import check_writable, in_file, load_instance, save_instance
    from themis_opt.llm import LLMS
    from themis_opt.workloads import Cut, parse_workload, task_graph
    from themis_opt.zoo import MODEL_PARALLEL, MODELS, ZooOptions, model_workload

    check_writable(args.out)
    source = load_instance(args.network)
    network = source.network
    meta = dict(source.metadata)
    chunks = args.chunks if args.chunks is not None else int(meta.get("astra_splits", source.collectives[0].chunks))
    if args.model in LLMS:
        return _llm_workload(args, console, network, chunks)
    for name in _LLM_ONLY:
        if getattr(args, name) is not None:
            raise InputError(f"--{name.replace('_', '-')}", f"is for the LLMs ({', '.join(LLMS)}), not {args.model}")
    policy = args.policy or meta.get("astra_scheduling_policy", "LIFO")
    passes = args.passes if args.passes is not None else 2
    given = [name for name in _ZOO_SIZES if getattr(args, name) is not None]
    if args.model not in MODELS and given:  # a workload file gives its own times and sizes
        option = f"--{given[0].replace('_', '-')}"
        raise InputError(option, f"is for the zoo models and LLMs, not a workload file ({args.model})")
    if args.model in MODELS and args.model_parallel is not None and args.model not in MODEL_PARALLEL:
        raise InputError("--model-parallel", f"is for {', '.join(sorted(MODEL_PARALLEL))}, not {args.model}")
    if args.model in MODELS:
        options = ZooOptions(
            **({"batch": args.batch} if args.batch is not None else {}),
            bytes_per_element=4 if args.precision == "fp32" else 2,
            peak_tflops=args.peak_tflops if args.peak_tflops is not None else 100.0,
            efficiency=args.efficiency if args.efficiency is not None else 0.5,
            model_parallel=args.model_parallel if args.model_parallel is not None else 8,
        )
        workload = model_workload(args.model, options)
    elif Path(args.model).is_file():
        workload = parse_workload(args.model)
    else:
        raise InputError(args.model, f"is neither a zoo model ({', '.join([*MODELS, *LLMS])}) nor a workload file")
    cut = Cut(chunks, astra="astra_splits" in meta and args.model not in MODELS, policy=policy)
    try:
        instance = task_graph(workload, network, passes=passes, cut=cut, name=args.name)
    except InputError as error:  # the file's values, or the option that set them, made it
        if error.path == "model_parallel_NPU_group" and args.model_parallel is not None:
            raise InputError("--model-parallel", error.problem) from None
        raise error if args.model in MODELS else in_file(error, args.model) from None
    save_instance(instance, args.out)
    console.print(
        f"wrote {args.out}: {workload.parallelism}, {counted(len(workload.layers), 'layer')} x "
        f"{counted(passes, 'pass', 'passes')}: {counted(len(instance.computes), 'compute task')}, "
        f"{counted(len(instance.collectives), 'collective')}, {counted(instance.num_phases, 'phase')}"
    )
    for note in workload.notes:
        console.print(f"note: {note}")
    return 0


def _llm_workload(args: argparse.Namespace, console: Console, network: Network, chunks: int) -> int:
    from themis_opt.io import save_instance
    from themis_opt.llm import LLMS, Layout, llm_task_graph

    for name in _ZOO_ONLY:
        if getattr(args, name) is not None:
            raise InputError(f"--{name.replace('_', '-')}", f"is not for the LLMs ({args.model})")
    tp, ep = args.tp or 1, args.ep or 1
    dp = args.dp if args.dp is not None else max(1, network.num_npus // (tp * ep))
    layout = Layout(
        tp=tp,
        ep=ep,
        dp=dp,
        data_parallel=args.data_parallel or "ddp",
        batch=args.batch or 1,
        sequence=args.seq,
        bytes_per_element=4 if args.precision == "fp32" else 2,
        peak_tflops=args.peak_tflops if args.peak_tflops is not None else 989.0,
        mfu=args.efficiency if args.efficiency is not None else 0.4,
        passes=args.passes if args.passes is not None else 1,
        chunks=chunks,
    )
    instance = llm_task_graph(LLMS[args.model], network, layout, name=args.name)
    save_instance(instance, args.out)
    meta = dict(instance.metadata)
    console.print(
        f"wrote {args.out}: {args.model} ({int(meta['parameters']):,} parameters), {meta['layout']}, "
        f"{counted(layout.passes, 'pass', 'passes')}: {counted(len(instance.computes), 'compute task')}, "
        f"{counted(len(instance.collectives), 'collective')}, {counted(instance.num_phases, 'phase')}"
    )
    return 0


def _import_astra(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.astra import import_astra, parse_size
    from themis_opt.io import check_writable, save_instance

    check_writable(args.out)
    size = parse_size(args.all_reduce) if args.all_reduce is not None else None
    instance = import_astra(
        args.network,
        args.system,
        all_reduce_bytes=size,
        workload=args.workload,
        passes=args.passes,
        comm_scale=args.comm_scale,
        compute_scale=args.compute_scale,
        injection_scale=args.injection_scale,
        ignore_unknown=args.ignore_unknown,
        name=args.name,
    )
    save_instance(instance, args.out)
    meta = dict(instance.metadata)
    console.print(
        f"wrote {args.out}: {counted(len(instance.network.dimensions), 'dimension')}, "
        f"{counted(instance.network.num_npus, 'NPU')}, {counted(len(instance.collectives), 'collective')}; "
        f"the system file asks for {meta['astra_method']} with {meta['astra_intra']}"
    )
    for note in filter(None, meta.get("astra_notes", "").split("; ")):
        console.print(f"note: {note}")
    return 0


def _export_astra(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.astra import export_astra
    from themis_opt.io import check_folder, load_instance

    check_folder(args.out)
    files = export_astra(load_instance(args.instance), args.version, args.out, args.method, keep=[args.instance])
    names = [f.name for f in files]
    shown = ", ".join(names) if len(names) <= 5 else f"{', '.join(names[:3])} ... {names[-1]}"
    console.print(f"wrote {counted(len(files), 'file')} to {args.out}: {shown}")
    return 0


def _plot(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.io import check_writable, load_instance, load_result
    from themis_opt.plot import FORMATS, gantt_figure, save

    if Path(args.out).suffix.lower() not in FORMATS:
        raise InputError(args.out, f"must end in {', '.join(FORMATS)}")
    check_writable(args.out)
    result = load_result(args.result)
    if result.schedule is None:
        raise InputError(f"{args.result}: schedule", "is null: there is nothing to draw")
    names = None
    if args.instance:
        instance = load_instance(args.instance)
        if instance.name != result.instance:
            raise InputError("--instance", f"is {instance.name!r}; the result is for {result.instance!r}")
        names = [d.name for d in instance.network.dimensions]
    console.print(f"wrote {save(gantt_figure(result, names), args.out)}")
    return 0


def _plot_bench(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.bench import read_records
    from themis_opt.io import check_folder
    from themis_opt.plot import bench_figures, save

    out = Path(args.out)
    check_folder(out)
    records = read_records(args.rows)
    if not records:
        raise InputError(args.rows, "holds no rows (or does not exist)")
    methods: list[str] = []
    for r in records:
        methods += [m for m in r.methods or tuple(o.method for o in r.outcomes) if m not in methods]
    for name, figure in bench_figures(records, methods).items():
        console.print(f"wrote {save(figure, out / f'{name}.{args.format}')}")
    return 0


def _show(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.io import load_result
    from themis_opt.report import GANTT_MARGIN, fmt_time, gantt

    result = load_result(args.result)
    if result.schedule is None:
        raise InputError(f"{args.result}: schedule", "is null: there is nothing to draw")
    num_dims = 1 + max((p.dim for c in result.schedule.chunks for p in c.phases), default=0)
    if args.width is not None:  # rich wraps every line at the console's width
        console = Console(width=args.width)
    console.print(
        f"{result.instance}: {result.method}"
        f"{'-' + result.intra if result.intra else ''}, makespan {fmt_time(result.makespan)}"
    )
    console.print(gantt(result.schedule, num_dims, max(10, console.width - GANTT_MARGIN)))
    return 0


def _process_age() -> float:
    """Seconds since this process started (Python's own start-up is part of the command), 0 if unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            return max(0.0, float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        return 0.0


def entry() -> NoReturn:  # pragma: no cover - the console script; tests call main()
    """The ``themis-opt`` console script: :func:`main`, then exit with its status.

    The process ends without running native destructors: they took a tenth
    of a second and more after CP-SAT (time a ``--time-limit`` promises), and
    a CP-SAT search stopped from another thread can abort the interpreter's
    teardown. Everything worth keeping (rows, output files) is closed already.
    """
    code = main(started=time.perf_counter() - _process_age())
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
