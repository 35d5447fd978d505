"""The benchmark harness: every method on every instance, and the summary.

One :class:`Record` per instance holds what each method measured; records
go to a JSON-lines file one at a time, so an interrupted run keeps what it
finished and ``resume`` skips it. Every schedule is checked by the validator
and the record says whether it passed.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from themis_opt.bounds import compute_bounds
from themis_opt.errors import InputError
from themis_opt.io import in_file, load_instance, parse_json
from themis_opt.result import Result, Status
from themis_opt.solve import solve
from themis_opt.validator import validate

METHODS = ("baseline", "themis-fifo", "themis-scf", "balanced", "cpsat")
SUITES = ("quick", "paper", "exact")


@dataclass(frozen=True)
class Outcome:
    """What one method measured on one instance."""

    method: str
    status: str
    makespan_ns: float | None
    runtime_s: float
    bandwidth_utilization: float | None
    valid: bool


@dataclass(frozen=True)
class Record:
    """One instance's row: its description, its best lower bound, each method's outcome."""

    path: str
    instance: str
    dims: str
    npus: int
    chunks: int
    lower_bound_ns: float
    ideal_ns: float
    outcomes: tuple[Outcome, ...]

    def outcome(self, method: str) -> Outcome | None:
        """The outcome of ``method``, if it ran."""
        return next((o for o in self.outcomes if o.method == method), None)

    def gap(self, method: str) -> float | None:
        """``method``'s makespan over the best lower bound, minus 1."""
        o = self.outcome(method)
        if o is None or o.makespan_ns is None or self.lower_bound_ns <= 0:
            return None
        return o.makespan_ns / self.lower_bound_ns - 1

    def speedup(self, method: str) -> float | None:
        """Baseline makespan over ``method``'s."""
        base, o = self.outcome("baseline"), self.outcome(method)
        if base is None or o is None or not base.makespan_ns or not o.makespan_ns:
            return None
        return base.makespan_ns / o.makespan_ns

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self))

    @staticmethod
    def from_dict(data: Any) -> Record:
        """Rebuild a record written by :meth:`to_json`."""
        if not isinstance(data, dict):
            raise InputError("", "a record must be a JSON object")
        try:
            outcomes = tuple(Outcome(**o) for o in data["outcomes"])
            return Record(**{**data, "outcomes": outcomes})
        except (KeyError, TypeError) as error:
            raise InputError("", f"not a benchmark record ({error})") from None


def parse_methods(text: str) -> tuple[str, ...]:
    """A comma-separated list of bench methods, checked."""
    methods = tuple(m.strip() for m in text.split(",") if m.strip())
    if not methods:
        raise InputError("--methods", "names no method")
    for m in methods:
        if m not in METHODS:
            raise InputError("--methods", f"unknown method {m!r} (choose from {', '.join(METHODS)})")
    return methods


def _run_method(instance: Any, method: str, bounds: Any, time_limit: float, workers: int, seed: int) -> Result:
    name, _, intra = method.partition("-")
    return solve(instance, name, intra=intra or None, time_limit=time_limit, workers=workers, seed=seed, bounds=bounds)


def run_instance(path: str, methods: Sequence[str], time_limit: float, workers: int, seed: int) -> Record:
    """Run ``methods`` on the instance at ``path`` and validate every schedule."""
    instance = load_instance(path)
    bounds = compute_bounds(instance)
    results = [_run_method(instance, m, bounds, time_limit, workers, seed) for m in methods]
    best = max([bounds.best, *(r.lower_bound for r in results)])
    outcomes = tuple(
        Outcome(
            method=m,
            status=r.status.value,
            makespan_ns=r.makespan,
            runtime_s=r.runtime,
            bandwidth_utilization=r.bandwidth_utilization,
            valid=r.schedule is not None and not validate(instance, r.schedule),
        )
        for m, r in zip(methods, results)
    )
    # A heuristic meeting the best bound is proven optimal too.
    outcomes = tuple(
        Outcome(o.method, Status.OPTIMAL.value, o.makespan_ns, o.runtime_s, o.bandwidth_utilization, o.valid)
        if o.makespan_ns is not None and o.makespan_ns <= best * (1 + 1e-5) and o.valid
        else o
        for o in outcomes
    )
    return Record(
        path=path,
        instance=instance.name,
        dims="x".join(str(d.size) for d in instance.network.dimensions),
        npus=instance.network.num_npus,
        chunks=instance.num_chunks,
        lower_bound_ns=best,
        ideal_ns=bounds.ideal,
        outcomes=outcomes,
    )


def read_records(path: str | Path) -> list[Record]:
    """Records already in a JSON-lines file; a truncated last line (an
    interrupted write) is dropped and cut from the file.
    """
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(str(path), f"cannot be read ({error})") from None
    lines = text.split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(Record.from_dict(parse_json(line)))
        except InputError as error:
            if number == len(lines) and not text.endswith("\n"):
                good = text[: len(text) - len(line)]
                path.write_text(good, encoding="utf-8")
                break
            raise in_file(InputError(f"line {number}", error.problem), path) from None
    return records


def append_record(path: str | Path, record: Record) -> None:
    """Append one record as a line, flushed at once."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(record.to_json() + "\n")
        handle.flush()


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
    try:
        handle = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115 - the with below closes it
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror})") from None
    with handle:
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
    for m in methods:
        if m.startswith("themis"):
            loses[m] = sum(1 for r in records if (s := r.speedup(m)) is not None and s < 1 - 1e-12)
    return Summary(tuple(per_method), len(records), proven, loses)
