"""``bench`` (methods over instances, in a table and a rows file) and ``plot-bench`` (the rows' figures)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from rich.console import Console

from themis_opt.cli.options import (
    bounds_option,
    int_in,
    methods_option,
    number_in,
    out_option,
    params_of,
    path,
    solver_options,
)
from themis_opt.errors import InputError, counted
from themis_opt.methods import VARIANTS
from themis_opt.suites import SUITES

CONNECT_TIMEOUT_S = 10.0  # seconds bench waits for a --scheduler to answer


COMMANDS = {  # each command of this family and its line in --help
    "bench": "compare methods over instances in a rich table",
    "plot-bench": 'draw the figures of bench rows (needs pip install -e ".[plot]")',
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` and ``plot-bench``."""
    p = sub.add_parser("bench", help=COMMANDS["bench"])
    p.add_argument("paths", nargs="*", help="instance files or folders of them")
    p.add_argument("--suite", choices=SUITES, default=None, help="a suite bundled with themis_opt (default: none)")
    methods_option(p, "all", f"; all: {', '.join(VARIANTS)}")
    solver_options(p, 5.0, "each method (and the bounds) on each instance")
    bounds_option(p, "full")
    p.add_argument("--jobs", type=int_in(1, 256), default=1, help="instances run in parallel (default 1)")
    out_option(
        p,
        "append each finished instance to this JSON-lines file (never erased; an existing file needs --resume)",
        required=False,
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="add to an existing --out file, skipping the instances already in it (matched by content)",
    )
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="add to an --out file that holds rows of other methods, time limit, seed or parameters",
    )
    p.add_argument(
        "--csv",
        metavar="PATH",
        type=path,
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
        type=number_in(0, 3600),
        default=None,
        help=f"seconds to wait for the --scheduler to answer; only with --scheduler (default {CONNECT_TIMEOUT_S:g})",
    )
    p.set_defaults(handler=bench)

    p = sub.add_parser("plot-bench", help=COMMANDS["plot-bench"])
    p.add_argument("rows", help="JSON-lines file written by bench --out")
    out_option(p, "folder for the speedup, gap and utilisation figures")
    p.add_argument("--format", choices=("svg", "png", "pdf"), default="svg", help="figure format (default svg)")
    p.set_defaults(handler=plot_bench, files=figure_files)


def instance_paths(args: argparse.Namespace) -> list[str]:
    """The instance files ``bench`` runs: ``--suite``'s, or the files and folders given."""
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


def bench(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt bench``: exit status 1 when a schedule fails the validator or an instance fails."""
    from themis_opt import bench as benchmod
    from themis_opt.bench.cluster import ClusterLost, check_scheduler
    from themis_opt.bench.runner import Dask, Local, run_sweep
    from themis_opt.formats.native import check_writable, read_json
    from themis_opt.report import bench_table, summary_table

    methods = benchmod.parse_methods(args.method)
    params = params_of(args)
    paths = instance_paths(args)
    documents = {path: read_json(path) for path in paths}
    # bad input fails before any work starts
    digests = {path: benchmod.instance_digest(benchmod.instance_of(documents[path], path)) for path in paths}
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
    settings = benchmod.settings_of(methods, args.time_limit, args.seed, params, args.bounds)
    # the rows file is held for the whole run: two runs on one file would mix their rows
    with benchmod.rows_lock(args.out) if args.out else contextlib.nullcontext():
        done: list[benchmod.Record] = []
        if args.out:
            done = benchmod.prepare_rows_file(args.out, settings, allow_mixed=args.allow_mixed, resume=args.resume)
        if args.csv:
            check_writable(args.csv)
        kept = {r.digest: r for r in done if r.settings() == settings and not r.error} if args.resume else {}
        todo = [p for p in paths if digests[p] not in kept]
        records: dict[str, benchmod.Record] = {p: kept[digests[p]] for p in paths if digests[p] in kept}
        if args.scheduler is None:
            backend: Local | Dask = Local(args.jobs, args.workers, warn=_warn)
        else:
            timeout = args.connect_timeout if args.connect_timeout is not None else CONNECT_TIMEOUT_S
            backend = Dask(args.scheduler, timeout, args.workers)
        written = 0
        with run_sweep(
            backend, todo, documents, digests, methods, args.time_limit, args.seed, params, args.bounds
        ) as sweep:
            try:
                for path, record in _with_progress(sweep.runs, len(todo)):
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
        jobs = f"{counted(sweep.jobs, 'job')} x {counted(sweep.workers, 'CP-SAT worker')}"
        console.print(f"{counted(len(ordered), 'instance')}, {jobs}")
        invalid = sum(1 for r in ordered for o in r.outcomes if not o.valid)
        failed = sum(1 for r in ordered if r.error)
        if invalid or failed:
            bad = f"{counted(invalid, 'schedule')} failed the validator, {counted(failed, 'instance')} failed"
            sys.stderr.write(f"themis-opt: {bad}\n")
            return 1
        return 0


def _warn(line: str) -> None:
    sys.stderr.write(f"themis-opt: {line}\n")


def _with_progress(runs, total: int):  # type: ignore[no-untyped-def]
    """``runs`` as they come, with a progress bar on standard error."""
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


def figure_files(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The figures ``plot-bench`` writes in its --out folder (for the checks before any work)."""
    from themis_opt.plot import BENCH_FIGURES

    return [("--out", Path(args.out) / f"{name}.{args.format}") for name in BENCH_FIGURES]


def plot_bench(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt plot-bench``."""
    from themis_opt.bench import read_records
    from themis_opt.formats.native import check_folder
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
