"""The benchmark harness: every method on every instance, and the summary.

One :class:`Record` per instance holds what each method measured; records
go to a JSON-lines file one at a time, so an interrupted run keeps what it
finished and ``resume`` skips it. A record names its instance by a digest of
the instance's content (not its path), and says which methods, time limit and
seed produced it, so rows of different runs are never mixed by accident.
Every schedule is checked by the validator and the record says whether it
passed.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from themis_opt.bounds import compute_bounds
from themis_opt.budget import Deadline
from themis_opt.errors import InputError, counted
from themis_opt.fileio import atomic_writer, read_bytes, read_text
from themis_opt.formats.native import (
    check_writable,
    in_file,
    instance_from_dict,
    instance_to_dict,
    parse_json,
    read_json,
)
from themis_opt.instance import Instance
from themis_opt.methods import VARIANTS, method_names
from themis_opt.metrics import iteration_metrics
from themis_opt.params import SolveParams, changes
from themis_opt.result import Status, gap
from themis_opt.solving import solve_all
from themis_opt.validator import validate
from themis_opt.version import __version__

METHODS = VARIANTS  # the bench's runs: methods of the registry, with their intra-dimension variants


Settings = tuple[tuple[str, ...], float, int, str, str]  # methods, time limit, seed, parameters changed, bounds

BENCH_BOUNDS = "full"  # bench's bound set by default: every bound, in the bounds' own time limit


def settings_of(
    methods: Sequence[str], time_limit: float, seed: int, params: SolveParams | None, bound_set: str = BENCH_BOUNDS
) -> Settings:
    """What a row made with these options records of them."""
    return tuple(methods), time_limit, seed, json.dumps(changes(params or SolveParams()), sort_keys=True), bound_set


@dataclass(frozen=True)
class Outcome:
    """What one method measured on one instance."""

    method: str
    status: str
    makespan_ns: float | None
    runtime_s: float
    bandwidth_utilization: float | None
    valid: bool
    note: str = ""
    iteration_ns: float | None = None
    exposed_ns: float | None = None


@dataclass(frozen=True)
class Record:
    """One instance's row: its description, its best lower bound, each method's outcome.

    ``digest`` identifies the instance by content; ``methods``, ``time_limit_s``,
    ``seed`` and ``bounds`` (the bound set) say how the row was made, ``measured``
    (the UTC date) and ``version`` (themis_opt's) when and by what; ``bound``
    names the best lower bound (the gaps' certificate); ``error`` is set (and
    ``outcomes`` empty) when the instance could not be run at all.
    """

    path: str
    instance: str
    dims: str
    npus: int
    chunks: int
    lower_bound_ns: float
    ideal_ns: float
    outcomes: tuple[Outcome, ...]
    digest: str = ""
    methods: tuple[str, ...] = ()
    time_limit_s: float = 0.0
    seed: int = 0
    error: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    bound: str = ""
    bounds: str = BENCH_BOUNDS
    measured: str = ""
    version: str = ""

    def outcome(self, method: str) -> Outcome | None:
        """The outcome of ``method``, if it ran."""
        return next((o for o in self.outcomes if o.method == method), None)

    def gap(self, method: str) -> float | None:
        """``method``'s makespan over the best lower bound, minus 1."""
        o = self.outcome(method)
        return None if o is None else gap(o.makespan_ns, self.lower_bound_ns)

    def speedup(self, method: str) -> float | None:
        """Baseline makespan over ``method``'s."""
        base, o = self.outcome("baseline"), self.outcome(method)
        if base is None or o is None or not base.makespan_ns or not o.makespan_ns:
            return None
        return base.makespan_ns / o.makespan_ns

    def settings(self) -> Settings:
        """(methods, time limit, seed, parameters changed, bound set): what must match for rows to be compared."""
        return self.methods, self.time_limit_s, self.seed, json.dumps(self.params, sort_keys=True), self.bounds

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self))

    @staticmethod
    def from_dict(data: Any) -> Record:
        """Rebuild a record written by :meth:`to_json`."""
        if not isinstance(data, dict):
            raise InputError("", "a record must be a JSON object")
        _check_fields(Record, data, "")
        outcomes = data["outcomes"]
        if not outcomes and not data.get("error"):
            raise InputError("outcomes", "is empty, and the row names no error")
        for k, outcome in enumerate(outcomes):
            if not isinstance(outcome, dict):
                raise InputError(f"outcomes[{k}]", "must be a JSON object")
            _check_fields(Outcome, outcome, f"outcomes[{k}].")
            if outcome["method"] not in method_names():
                raise InputError(f"outcomes[{k}].method", f"unknown method {outcome['method']!r}")
        for method in data.get("methods", ()):
            if method not in method_names():
                raise InputError("methods", f"unknown method {method!r}")
        return Record(
            **{**data, "outcomes": tuple(Outcome(**o) for o in outcomes), "methods": tuple(data.get("methods", ()))}
        )


def _check_fields(cls: type, data: dict[str, Any], where: str) -> None:
    """Raise :class:`InputError` unless ``data`` gives every field of dataclass ``cls`` without a
    default, no other key, and each value of its field's type (as JSON gives it: a list for a tuple).
    """
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise InputError(f"{where}{unknown[0]}", "is not a field of a benchmark row")
    for name, f in known.items():
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise InputError(f"{where}{name}", "is missing")
            continue
        if not _fits(data[name], hints[name]):
            shown = repr(data[name])
            raise InputError(f"{where}{name}", f"must be {_described(hints[name])}, got {shown[:40]}")


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's type hint."""
    origin = get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, UnionType):
        return any(_fits(value, arg) for arg in get_args(hint))
    if origin is tuple:  # tuple[X, ...]: a JSON list; the outcomes are checked on their own
        return isinstance(value, list) and (
            get_args(hint)[0] is Outcome or all(_fits(v, get_args(hint)[0]) for v in value)
        )
    if origin is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _described(hint: Any) -> str:
    """A type hint in words."""
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return " or ".join(_described(arg) for arg in get_args(hint))
    if origin is tuple:
        return "a list"
    if origin is dict:
        return "an object"
    words = {float: "a number", int: "an integer", str: "a string", bool: "true or false", type(None): "null"}
    return words.get(hint, getattr(hint, "__name__", str(hint)))


def instance_digest(instance: Instance) -> str:
    """A digest of the instance's content (network and tasks, not its name or metadata)."""
    document = instance_to_dict(instance)
    del document["name"]
    document.pop("metadata", None)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_methods(text: str) -> tuple[str, ...]:
    """A comma-separated list of methods or variants (as :func:`~themis_opt.solving.solve` takes
    them), or ``all``: every variant; checked.
    """
    if text.strip() == "all":
        return METHODS
    methods = tuple(m.strip() for m in text.split(","))
    if not any(methods):
        raise InputError("method", "names no method")
    for m in methods:
        if not m:
            raise InputError("method", f"has an empty name in {text!r}")
        if m == "all":
            raise InputError("method", f"all stands alone: every method, not one in a list ({text!r})")
        if m not in method_names():
            raise InputError("method", f"unknown method {m!r} (choose from {', '.join(method_names())}, or all)")
    if len(set(methods)) != len(methods):
        raise InputError("method", f"names a method twice: {text!r}")
    return methods


def instance_of(document: object, path: str) -> Instance:
    """The instance of an instance file's JSON ``document`` (errors name the file)."""
    try:
        return instance_from_dict(document, Path(path).stem)
    except InputError as error:
        raise in_file(error, path) from None


def run_instance(
    path: str,
    methods: Sequence[str],
    time_limit: float,
    workers: int,
    seed: int,
    params: SolveParams | None = None,
    bound_set: str = BENCH_BOUNDS,
) -> Record:
    """Run ``methods`` on the instance file at ``path`` and validate every schedule."""
    return run_document(read_json(path), path, methods, time_limit, workers, seed, params, bound_set)


def run_document(
    document: Any,
    path: str,
    methods: Sequence[str],
    time_limit: float,
    workers: int,
    seed: int,
    params: SolveParams | None = None,
    bound_set: str = BENCH_BOUNDS,
) -> Record:
    """Run ``methods`` on an instance given as its JSON document (what a remote worker receives).

    The bounds get their own ``time_limit``, then every method gets
    ``time_limit`` for its whole run (:func:`~themis_opt.solving.solve_all`
    with ``each``); the row reports the bounds of ``bound_set`` (see
    :func:`~themis_opt.solving.solve`).
    """
    instance = instance_of(document, path)
    params = params if params is not None else SolveParams()
    results = solve_all(
        instance,
        methods,
        time_limit=time_limit,
        each=True,
        workers=workers,
        seed=seed,
        params=params,
        bound_set=bound_set,
    )
    best = results[0].bounds if results else compute_bounds(instance, Deadline.after(time_limit))
    outcomes = []
    for m, r in zip(methods, results):
        valid = r.schedule is not None and not validate(instance, r.schedule)
        status = r.status.value
        metrics = iteration_metrics(instance, r.schedule) if r.schedule is not None else None
        outcomes.append(
            Outcome(
                m,
                status,
                r.makespan,
                r.runtime,
                r.bandwidth_utilization,
                valid,
                r.note,
                metrics.iteration_ns if metrics else None,
                metrics.exposed_ns if metrics else None,
            )
        )
    return Record(
        path=path,
        instance=instance.name,
        dims="x".join(str(d.size) for d in instance.network.dimensions),
        npus=instance.network.num_npus,
        chunks=instance.num_chunks,
        lower_bound_ns=best.best,
        ideal_ns=best.ideal,
        outcomes=tuple(outcomes),
        digest=instance_digest(instance),
        methods=tuple(methods),
        time_limit_s=time_limit,
        seed=seed,
        params=changes(params),
        bound=best.best_name,
        bounds=bound_set,
        measured=datetime.datetime.now(datetime.UTC).date().isoformat(),
        version=__version__,
    )


def stop_pool(pool: Any) -> None:
    """Stop a process pool now: cancel what has not started, kill what runs."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)


def failed_record(path: str, digest: str, settings: Settings, error: str) -> Record:
    """The row of an instance that could not be run: the error, no outcomes."""
    methods, time_limit, seed, params, bound_set = settings
    return Record(
        path,
        Path(path).stem,
        "",
        0,
        0,
        0.0,
        0.0,
        (),
        digest,
        methods,
        time_limit,
        seed,
        error,
        json.loads(params),
        bounds=bound_set,
    )


def read_records(path: str | Path) -> list[Record]:
    """Records already in a JSON-lines file.

    A last line that is cut short (not valid JSON, no newline, after at least
    one good record: a write that was interrupted) is dropped; anything else
    that is not a record is an error. The file is left as it is (a run that
    takes it cuts that line: :func:`prepare_rows_file`).
    """
    path = Path(path)
    if not path.exists():
        return []
    text = read_text(path)
    lines = text.split("\n")
    records: list[Record] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = parse_json(line)
        except InputError as error:
            if number == len(lines) and not text.endswith("\n") and records:
                break
            raise in_file(InputError(f"line {number}", f"not a rows file: {error.problem}"), path) from None
        try:
            records.append(Record.from_dict(data))
        except InputError as error:
            where = f"line {number}" + (f", {error.path}" if error.path else "")
            raise in_file(InputError(where, f"not a rows file: {error.problem}"), path) from None
    return records


def prepare_rows_file(
    path: str | Path, settings: Settings, *, allow_mixed: bool = False, resume: bool = True
) -> list[Record]:
    """Check a rows file before any work starts and return the rows it holds.

    A missing file is fine (its missing folders are created); an existing one
    must be a rows file, and is only ever appended to. Rows made with other
    methods, time limit or seed are refused unless ``allow_mixed``; rows of
    these settings unless ``resume`` (running again would add them a second
    time).

    Raises
    ------
    InputError
        If the path is a folder, cannot be written, is not a rows file, holds
        rows of these settings and ``resume`` is not set, or rows of other
        settings and ``allow_mixed`` is not set.
    """
    path = Path(path)
    check_writable(path)
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror})") from None
        return []
    records = read_records(path)
    other = next((r for r in records if r.settings() != settings), None)
    if other is not None and not allow_mixed:
        methods, limit, seed, params, bound_set = other.settings()
        changed = "" if params == "{}" else f", parameters {params}"
        raise InputError(
            str(path),
            f"holds rows made with other settings (methods {','.join(methods) or '?'}, time limit {limit:g} s, "
            f"seed {seed}, bounds {bound_set}{changed}); use another --out file, or --allow-mixed to add to it anyway",
        )
    same = sum(1 for r in records if r.settings() == settings)
    if same and not resume:  # running again would add the same rows a second time
        raise InputError(
            str(path),
            f"holds {counted(same, 'row')} of these settings already: use --resume to add to it (the instances "
            "in it are skipped), or another --out file",
        )
    _end_with_newline(path)  # only once the file is taken: a refused run leaves it as it was
    return records


def _end_with_newline(path: Path) -> None:
    """A rows file whose last row has no newline (written by hand, or cut by an editor) gets one,
    so that the next row appended starts a line of its own; a last line cut short (an interrupted
    write, which :func:`read_records` dropped) is cut off.
    """
    data = read_bytes(path)
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
        cut = False
    except ValueError:
        cut = True
    try:
        with open(path, "rb+") as handle:
            if cut:
                handle.truncate(start)
            else:
                handle.seek(0, os.SEEK_END)
                handle.write(b"\n")
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None


def append_record(path: str | Path, record: Record) -> None:
    """Append one record as a line, written through at once.

    Raises
    ------
    InputError
        If the line cannot be written whole (a full disk): the file is cut
        back to the rows it held, so that it never ends in part of a row.
    """
    line = (record.to_json() + "\n").encode("utf-8")
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    try:
        size = os.fstat(descriptor).st_size
        written = 0
        try:
            while written < len(line):  # a write may land in part
                written += os.write(descriptor, line[written:])
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, size)
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    finally:
        os.close(descriptor)


def write_csv(path: str | Path, records: Iterable[Record], methods: Sequence[str]) -> None:
    """The records as CSV, one row per instance."""
    header = ["instance", "path", "dims", "npus", "chunks", "lower_bound_ns", "ideal_ns"]
    for m in methods:
        header += [
            f"{m}_status",
            f"{m}_makespan_ns",
            f"{m}_gap",
            f"{m}_speedup",
            f"{m}_bw_util",
            f"{m}_runtime_s",
            f"{m}_valid",
        ]
    with atomic_writer(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for r in records:
            row: list[Any] = [r.instance, r.path, r.dims, r.npus, r.chunks, r.lower_bound_ns, r.ideal_ns]
            for m in methods:
                o = r.outcome(m)
                row += (
                    [o.status, o.makespan_ns, r.gap(m), r.speedup(m), o.bandwidth_utilization, o.runtime_s, o.valid]
                    if o
                    else [""] * 7
                )
            writer.writerow(row)


@dataclass(frozen=True)
class MethodSummary:
    """Aggregates of one method over a set of records."""

    method: str
    instances: int
    geomean_speedup: float | None
    mean_gap: float | None
    max_gap: float | None
    mean_utilization: float | None
    optimal: int
    invalid: int


@dataclass(frozen=True)
class Summary:
    """The benchmark's summary."""

    methods: tuple[MethodSummary, ...]
    instances: int
    proven_optimal: int
    themis_loses: dict[str, int]


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(records: Sequence[Record], methods: Sequence[str]) -> Summary:
    """Geometric-mean speedup over baseline, mean and max gap, optimal counts.

    ``proven_optimal`` counts instances where some method's schedule is proven
    optimal; ``themis_loses`` counts, per themis variant, instances where it is
    slower than the baseline.
    """
    per_method = []
    for m in methods:
        ran = [r for r in records if r.outcome(m) is not None]
        outs = [o for r in ran if (o := r.outcome(m)) is not None]
        speedups = [s for r in ran if (s := r.speedup(m)) is not None]
        gaps = [g for r in ran if (g := r.gap(m)) is not None]
        utils = [o.bandwidth_utilization for o in outs if o.bandwidth_utilization is not None]
        per_method.append(
            MethodSummary(
                method=m,
                instances=len(ran),
                geomean_speedup=_geomean(speedups),
                mean_gap=sum(gaps) / len(gaps) if gaps else None,
                max_gap=max(gaps) if gaps else None,
                mean_utilization=sum(utils) / len(utils) if utils else None,
                optimal=sum(1 for o in outs if o.status == Status.OPTIMAL.value),
                invalid=sum(1 for o in outs if not o.valid),
            )
        )
    proven = sum(1 for r in records if any(o.status == Status.OPTIMAL.value for o in r.outcomes))
    loses = {}
    for m in methods:  # without the baseline in the run there is nothing to lose to: none counted
        if m.startswith("themis") and "baseline" in methods:
            loses[m] = sum(1 for r in records if (s := r.speedup(m)) is not None and s < 1 - 1e-12)
    return Summary(tuple(per_method), len(records), proven, loses)
