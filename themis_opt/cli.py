"""The ``themis-opt`` command line: solve, validate, generate, bench, show.

Bad input (files, JSON, arguments) prints one line ``themis-opt: error: ...``
to standard error and exits with status 2.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from themis_opt import bench as benchmod
from themis_opt.errors import InputError
from themis_opt.generator import FAMILIES, generate
from themis_opt.instance import Instance
from themis_opt.io import check_writable, load_instance, load_result, save_instance, save_result
from themis_opt.report import bench_table, comparison_table, fmt_time, gantt, result_summary, summary_table
from themis_opt.result import Result
from themis_opt.solve import available_workers, solve
from themis_opt.validator import validate

ALL_RUNS = (("baseline", "fifo"), ("themis", "fifo"), ("themis", "scf"), ("balanced", None), ("cpsat", None))


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"themis-opt: error: {message}\n")
        raise SystemExit(2)


def _positive_float(name: str) -> type:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: must be a number, got {text!r}") from None
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{name}: must be a finite number > 0, got {text}")
        return value

    return parse  # type: ignore[return-value]


def _int_at_least(name: str, minimum: int) -> type:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name}: must be >= {minimum}, got {value}")
        return value

    return parse  # type: ignore[return-value]


def _solver_options(parser: argparse.ArgumentParser, time_limit: float) -> None:
    parser.add_argument(
        "--time-limit",
        type=_positive_float("--time-limit"),
        default=time_limit,
        help=f"CP-SAT time limit per instance, seconds (default {time_limit:g})",
    )
    parser.add_argument(
        "--workers",
        type=_int_at_least("--workers", 1),
        default=None,
        help="CP-SAT worker threads (default: the cores available)",
    )
    parser.add_argument("--seed", type=_int_at_least("--seed", 0), default=0, help="CP-SAT random seed (default 0)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``themis-opt``."""
    parser = _Parser(prog="themis-opt", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("solve", help="schedule one instance with one method, or all of them")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("--method", choices=("baseline", "themis", "balanced", "cpsat", "all"), default="themis")
    p.add_argument(
        "--intra",
        choices=("fifo", "scf"),
        default=None,
        help="intra-dimension policy (default: scf for themis, fifo for baseline, best for balanced)",
    )
    p.add_argument("--output", help="write the result JSON here (with --method all: one file per method)")
    _solver_options(p, 10.0)
    p.add_argument(
        "--quantum-ns",
        type=_positive_float("--quantum-ns"),
        default=None,
        help="CP-SAT time quantum in ns (default: warm-start makespan / 100000)",
    )
    p.add_argument("--log", action="store_true", help="stream the CP-SAT search log to standard error")

    p = sub.add_parser("validate", help="check a result's schedule against its instance")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("result", help="result JSON file")

    p = sub.add_parser("generate", help="write random instances of a family")
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--count", type=_int_at_least("--count", 1), required=True)
    p.add_argument("--seed", type=_int_at_least("--seed", 0), required=True)
    p.add_argument("--out", required=True, help="folder to write the files to")

    p = sub.add_parser("bench", help="compare methods over instances in a rich table")
    p.add_argument("paths", nargs="*", help="instance files or folders of them")
    p.add_argument("--suite", choices=benchmod.SUITES, help="a bundled suite under instances/")
    p.add_argument(
        "--methods",
        default=",".join(benchmod.METHODS),
        help=f"comma-separated, from {', '.join(benchmod.METHODS)} (default: all)",
    )
    _solver_options(p, 5.0)
    p.add_argument("--jobs", type=_int_at_least("--jobs", 1), default=1, help="instances run in parallel")
    p.add_argument("--out", help="append each finished instance to this JSON-lines file")
    p.add_argument("--resume", action="store_true", help="skip instances already in --out")
    p.add_argument("--csv", help="also write the rows to this CSV file")

    p = sub.add_parser("show", help="draw a result's schedule as a per-dimension Gantt chart")
    p.add_argument("result", help="result JSON file")
    p.add_argument("--width", type=_int_at_least("--width", 10), default=100, help="chart width in columns")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``themis-opt``; returns the exit status (0 ok, 1 invalid schedule, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # wide tables read better wrapped by a narrow terminal than cut to 80 columns
    console = Console(width=max(Console().width, 140 if args.command == "bench" else 100))
    try:
        if args.command == "solve":
            return _solve(args, console)
        if args.command == "validate":
            return _validate(args, console)
        if args.command == "generate":
            return _generate(args, console)
        if args.command == "bench":
            return _bench(args, console)
        return _show(args, console)
    except InputError as error:
        sys.stderr.write(f"themis-opt: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("themis-opt: interrupted\n")
        return 130


def _solve(args: argparse.Namespace, console: Console) -> int:
    instance = load_instance(args.instance)
    if args.output:
        check_writable(args.output)
    if not args.log:
        return _run_solve(args, console, instance)
    package = logging.getLogger("themis_opt")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = package.level
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        return _run_solve(args, console, instance)
    finally:  # main() may be called again in the same process
        package.removeHandler(handler)
        package.setLevel(level)


def _run_solve(args: argparse.Namespace, console: Console, instance: Instance) -> int:
    options = {
        "time_limit": args.time_limit,
        "workers": args.workers,
        "seed": args.seed,
        "quantum_ns": args.quantum_ns,
        "log": args.log,
    }
    if args.method != "all":
        result = solve(instance, args.method, intra=args.intra, **options)
        console.print(result_summary(instance, result))
        if args.output:
            save_result(result, args.output)
        return 0
    results: list[Result] = []
    bounds = None
    for method, intra in ALL_RUNS:
        result = solve(instance, method, intra=intra, bounds=bounds, **options)
        bounds = result.bounds if method != "cpsat" else bounds
        results.append(result)
    console.print(comparison_table(instance, results))
    if args.output:
        out = Path(args.output)
        for result in results:
            tag = (
                result.method
                if result.intra is None or result.method == "balanced"
                else (f"{result.method}-{result.intra}")
            )
            save_result(result, out.with_name(f"{out.stem}.{tag}{out.suffix or '.json'}"))
    return 0


def _validate(args: argparse.Namespace, console: Console) -> int:
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
    if violations:
        for line in violations:
            print(line)
        return 1
    console.print(f"valid: {len(result.schedule.chunks)} chunks, makespan {fmt_time(result.schedule.makespan)}")
    return 0


def _generate(args: argparse.Namespace, console: Console) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    for instance in generate(args.family, args.count, args.seed):
        save_instance(instance, out / f"{instance.name}.json")
    console.print(f"wrote {args.count} {args.family} instances to {out}")
    return 0


def _suite_folder(name: str) -> Path:
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        folder = root / "instances" / name
        if folder.is_dir():
            return folder
    raise InputError("--suite", f"folder instances/{name} not found (run from the project's root)")


def _instance_paths(args: argparse.Namespace) -> list[str]:
    if args.suite and args.paths:
        raise InputError("--suite", "give either --suite or instance paths, not both")
    sources = [_suite_folder(args.suite)] if args.suite else [Path(p) for p in args.paths]
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
    methods = benchmod.parse_methods(args.methods)
    paths = _instance_paths(args)
    for path in paths:
        load_instance(path)  # bad input fails before any work starts
    if args.resume and not args.out:
        raise InputError("--resume", "needs --out, the file to resume from")
    for target in (args.out, args.csv):
        if target:
            check_writable(target)
    workers = args.workers if args.workers is not None else max(1, available_workers() // args.jobs)
    if args.jobs * workers > available_workers():
        sys.stderr.write(
            f"themis-opt: warning: {args.jobs} jobs x {workers} workers exceed the "
            f"{available_workers()} cores available: timings will suffer\n"
        )
    done: list[benchmod.Record] = benchmod.read_records(args.out) if args.out and args.resume else []
    if args.out and not args.resume and Path(args.out).exists():
        Path(args.out).unlink()
    finished = {r.path for r in done}
    todo = [p for p in paths if p not in finished]
    records = {r.path: r for r in done if r.path in paths}
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with progress:
        task = progress.add_task("bench", total=len(todo))
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            pending: dict[Future[benchmod.Record], str] = {}
            queue = list(todo)
            while queue or pending:
                while queue and len(pending) < args.jobs:
                    path = queue.pop(0)
                    future = pool.submit(benchmod.run_instance, path, methods, args.time_limit, workers, args.seed)
                    pending[future] = path
                finished_now, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished_now:
                    path = pending.pop(future)
                    record = future.result()
                    records[path] = record
                    if args.out:
                        benchmod.append_record(args.out, record)
                    progress.update(task, advance=1, description=record.instance)
    ordered = [records[p] for p in paths if p in records]
    if args.csv:
        benchmod.write_csv(args.csv, ordered, methods)
    console.print(bench_table(ordered, methods))
    console.print(summary_table(benchmod.summarize(ordered, methods)))
    invalid = sum(1 for r in ordered for o in r.outcomes if not o.valid)
    if invalid:
        sys.stderr.write(f"themis-opt: {invalid} schedules failed the validator\n")
        return 1
    return 0


def _show(args: argparse.Namespace, console: Console) -> int:
    result = load_result(args.result)
    if result.schedule is None:
        raise InputError(f"{args.result}: schedule", "is null: there is nothing to draw")
    num_dims = 1 + max((p.dim for c in result.schedule.chunks for p in c.phases), default=0)
    console.print(
        f"{result.instance}: {result.method}"
        f"{'-' + result.intra if result.intra else ''}, makespan {fmt_time(result.makespan)}"
    )
    console.print(gantt(result.schedule, num_dims, args.width))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
