"""Result files: the JSON document of a :class:`~themis_opt.result.Result` and its schedule, reading and writing."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import operator
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError
from themis_opt.formats.native.jsonfile import (
    ONE_A_LINE,
    VERSION,
    Lines,
    _build,
    _header,
    _kind,
    _list,
    _num,
    _object,
    _read,
    write_json,
)
from themis_opt.instance import MAX_DIMENSIONS, Instance, Op, check_number
from themis_opt.methods import method_names
from themis_opt.result import Bounds, Result, SolverStats, Status
from themis_opt.schedule import OP_CODES, ChunkSchedule, ComputeSchedule, Phase, Schedule
from themis_opt.sim.queues import QUEUE_POLICIES

RESULT_FORMAT = "themis-opt-result"


def _chunk_lines(schedule: Schedule) -> Lines | None:
    """Each chunk's JSON text (``json.dumps`` of what :func:`schedule_to_dict` holds for it, to the
    byte) rendered straight off a lazy schedule's columns, with no dict per phase (four times
    faster: a million phases a file); ``None`` for a schedule without columns, or of too few chunks
    to be written one a line.
    """
    if schedule.__dict__.get("_columns") is None or "chunks" in schedule.__dict__:
        return None
    orders = schedule.orders
    if len(orders) <= ONE_A_LINE:  # written indented, as json.dumps(..., indent=2) writes them
        return None
    import numpy as np

    columns = schedule.columns()

    def words(values: Any, text: Any) -> list[str]:  # each value's text, rendered once per distinct value
        distinct, inverse = np.unique(values, return_inverse=True)
        texts = [text(v) for v in distinct.tolist()]
        return [texts[i] for i in inverse.tolist()]

    def number(value: float) -> str:
        return json.dumps(_num(value))

    ops = np.array([json.dumps(op.value) for op in OP_CODES], dtype=object)
    times = words(np.concatenate([columns.start_ns, columns.end_ns]), repr)  # json's float text
    rows = zip(
        columns.dim.tolist(),
        ops[columns.op].tolist(),
        times[: len(times) // 2],
        times[len(times) // 2 :],
        words(columns.bytes_in, number),
        words(columns.bytes_out, number),
    )
    texts = [PHASE % row for row in rows]
    # the columns run chunk by chunk, in the orders' (collective, chunk) order: each chunk a slice
    collective, chunk = columns.collective, columns.chunk
    firsts = np.flatnonzero(np.diff(collective, prepend=-1) | np.diff(chunk, prepend=-1))
    ids = np.array(list(orders), dtype=np.int64).reshape(-1, 2)
    if len(firsts) != len(ids) or (ids != np.stack([collective[firsts], chunk[firsts]], axis=1)).any():
        return None  # not as the core writes them: from the phases
    ends = [*firsts[1:].tolist(), len(texts)]
    named = {order: json.dumps(list(order)) for order in set(orders.values())}
    return Lines(
        f'{{"collective": {c}, "chunk": {k}, "order": {named[order]}, "phases": [{", ".join(texts[a:b])}]}}'
        for ((c, k), order), a, b in zip(orders.items(), firsts.tolist(), ends)
    )


PHASE = '{"dim": %d, "op": %s, "start_ns": %s, "end_ns": %s, "bytes_in": %s, "bytes_out": %s}'  # a phase's JSON


def schedule_to_dict(schedule: Schedule, instance: Instance | None = None) -> dict[str, Any]:
    """The JSON form of a schedule (compute tasks named by id when ``instance`` is given)."""
    return _schedule_document(schedule, instance, verbatim=False)


def _schedule_document(schedule: Schedule, instance: Instance | None, verbatim: bool) -> dict[str, Any]:
    """:func:`schedule_to_dict`; with ``verbatim``, a lazy schedule's chunks as their JSON text
    (:func:`_chunk_lines`: what :func:`save_result` writes).
    """
    computes = [
        {
            "compute": c.compute,
            **({"task": instance.computes[c.compute].id} if instance is not None else {}),
            "start_ns": c.start_ns,
            "end_ns": c.end_ns,
        }
        for c in schedule.computes
    ]
    lines = _chunk_lines(schedule) if verbatim else None
    if lines is not None:
        return {"computes": computes, "chunks": lines}
    return {
        "computes": computes,
        "chunks": [
            {
                "collective": chunk.collective,
                "chunk": chunk.chunk,
                "order": list(chunk.order),
                "phases": [
                    {
                        "dim": p.dim,
                        "op": p.op.value,
                        "start_ns": p.start_ns,
                        "end_ns": p.end_ns,
                        "bytes_in": _num(p.bytes_in),
                        "bytes_out": _num(p.bytes_out),
                    }
                    for p in chunk.phases
                ],
            }
            for chunk in schedule.chunks
        ],
    }


def result_to_dict(result: Result) -> dict[str, Any]:
    """The JSON document of ``result`` (format version 1)."""
    return _result_document(result, verbatim=False)


def _result_document(result: Result, verbatim: bool) -> dict[str, Any]:
    """:func:`result_to_dict`, its schedule's chunks as JSON text with ``verbatim``."""
    stats = result.stats
    return {
        "format": RESULT_FORMAT,
        "version": VERSION,
        "instance": result.instance,
        "method": result.method,
        "variant": result.label,
        "intra": result.intra,
        "status": result.status.value,
        "makespan_ns": result.makespan,
        "lower_bound_ns": result.lower_bound,
        "best_bound": result.best_bound,
        "ideal_ns": result.bounds.ideal,
        "bandwidth_utilization": result.bandwidth_utilization,
        "gap": result.gap,
        "runtime_s": result.runtime,
        "bounds_ns": result.bounds.as_dict(),
        "stats": None
        if stats is None
        else {
            "solver_status": stats.solver_status,
            "branches": stats.branches,
            "conflicts": stats.conflicts,
            "solutions": stats.solutions,
            "wall_time_s": stats.wall_time_s,
            "quantum_ns": stats.quantum_ns,
        },
        "trajectory": [{"time_s": t, "makespan_ns": m} for t, m in result.trajectory],
        "tolerance_ns": result.tolerance_ns,
        "note": result.note,
        "schedule": None if result.schedule is None else _schedule_document(result.schedule, None, verbatim),
    }


def save_result(result: Result, path: str | Path) -> None:
    """Write ``result`` to ``path`` as JSON."""
    write_json(path, _result_document(result, verbatim=True))


PHASE_FIELDS = ("dim", "op", "start_ns", "end_ns", "bytes_in", "bytes_out")  # a phase's fields in a result file
_CHUNK_KEYS, _PHASE_KEYS = frozenset({"collective", "chunk", "order", "phases"}), frozenset(PHASE_FIELDS)
_OPS = {op.value: op for op in Op}


def _checked_at_once(entries: list[Any]) -> list[tuple[Phase, ...]] | None:
    """Each chunk's phases, checked over all of them at once (types, ranges and spans as
    :class:`~themis_opt.schedule.Phase` and :func:`_in_order` check one), or ``None`` where anything
    is not as written; the checks one by one then name the first problem (a million phases read
    in seconds rather than a minute).
    """
    import numpy as np

    if not all(type(e) is dict and e.keys() == _CHUNK_KEYS and type(e["phases"]) is list for e in entries):
        return None
    flat = [ph for e in entries for ph in e["phases"]]
    if not all(type(ph) is dict and ph.keys() == _PHASE_KEYS for ph in flat):
        return None
    rows = list(map(operator.itemgetter(*PHASE_FIELDS), flat))
    dims, ops, *numbers = zip(*rows) if rows else ((),) * len(PHASE_FIELDS)
    if set(map(type, dims)) - {int} or set(ops) - _OPS.keys():
        return None
    if any(set(map(type, column)) - {int, float} for column in numbers):
        return None
    values = np.array(numbers, dtype=np.float64).reshape(len(numbers), -1)
    if len(dims) and (min(dims) < 0 or max(dims) >= MAX_DIMENSIONS):
        return None
    if not (np.isfinite(values).all() and (values >= 0).all() and (values[0] <= values[1]).all()):
        return None
    phases = [
        Phase.trusted(dim, _OPS[op], start, end, b_in, b_out)
        for dim, op, start, end, b_in, b_out in zip(dims, ops, *values.tolist())
    ]
    firsts = list(itertools.accumulate((len(e["phases"]) for e in entries), initial=0))
    return [tuple(phases[a:b]) for a, b in zip(firsts, firsts[1:])]


def _schedule_from_dict(raw: Any, path: str) -> Schedule:
    raw = _object(raw, path, {"chunks"}, {"computes"})
    entries = _list(raw["chunks"], f"{path}.chunks")
    at_once = _checked_at_once(entries)
    chunks = []
    for i, entry in enumerate(entries):
        where = f"{path}.chunks[{i}]"
        entry = _object(entry, where, {"collective", "chunk", "order", "phases"}, set())
        phases = at_once[i] if at_once is not None else _phases(entry, where)
        order = tuple(_list(entry["order"], f"{where}.order"))
        chunks.append(_build(where, ChunkSchedule, entry["collective"], entry["chunk"], order, phases))
    computes = []
    for i, entry in enumerate(_list(raw.get("computes", []), f"{path}.computes")):
        where = f"{path}.computes[{i}]"
        entry = _object(entry, where, {"compute", "start_ns", "end_ns"}, {"task"})
        computes.append(_build(where, ComputeSchedule, entry["compute"], entry["start_ns"], entry["end_ns"]))
        _in_order(computes[-1].start_ns, computes[-1].end_ns, where)
    return Schedule(tuple(chunks), tuple(computes))


def _phases(entry: dict[str, Any], where: str) -> tuple[Phase, ...]:
    """A chunk's phases, checked one by one (the first problem named where it is)."""
    phases = []
    for j, ph in enumerate(_list(entry["phases"], f"{where}.phases")):
        at = f"{where}.phases[{j}]"
        ph = _object(ph, at, set(PHASE_FIELDS), set())
        phases.append(_build(at, Phase, *(ph[field] for field in PHASE_FIELDS)))
        _in_order(phases[-1].start_ns, phases[-1].end_ns, at)
    return tuple(phases)


def _in_order(start: Any, end: Any, where: str) -> None:
    """An error unless a span's start and end are numbers, the start not after the end."""
    for key, value in (("start_ns", start), ("end_ns", end)):
        check_number(f"{where}.{key}", value, minimum=-math.inf)
    if start > end:
        raise InputError(f"{where}.end_ns", f"is before start_ns ({end} < {start})")


def _optional_number(data: dict[str, Any], key: str) -> float | None:
    """A result's time or bound: a number >= 0, or null."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(key, f"must be a number or null, got {_kind(value)}")
    return check_number(key, value)


def result_from_dict(data: Any) -> Result:
    """Build a :class:`Result` from parsed JSON (format version 1)."""
    data = _header(
        data,
        RESULT_FORMAT,
        {"instance", "method", "status", "makespan_ns", "schedule"},
        {
            "intra",
            "lower_bound_ns",
            "ideal_ns",
            "bandwidth_utilization",
            "gap",
            "runtime_s",
            "bounds_ns",
            "stats",
            "trajectory",
            "tolerance_ns",
            "note",
            "variant",
            "best_bound",
        },
    )
    for key in ("instance", "method"):
        if not isinstance(data[key], str):
            raise InputError(key, f"must be a string, got {_kind(data[key])}")
    if data["method"] not in method_names():
        raise InputError("method", f"must be one of {', '.join(method_names())}, got {data['method']!r}")
    variant = data.get("variant", "")
    if variant != "" and variant not in method_names():
        raise InputError("variant", f"must be one of {', '.join(method_names())}, got {variant!r}")
    intra = data.get("intra")
    if intra is not None and intra not in QUEUE_POLICIES:
        raise InputError("intra", f"must be {' or '.join(QUEUE_POLICIES)} or null, got {intra!r}")
    try:
        status = Status(data["status"])
    except ValueError:
        choices = ", ".join(s.value for s in Status)
        raise InputError("status", f"must be one of {choices}, got {data['status']!r}") from None
    ideal = _optional_number(data, "ideal_ns") or 0.0
    raw_bounds = data.get("bounds_ns")
    if raw_bounds is not None:
        names = {f.name for f in dataclasses.fields(Bounds)}
        raw_bounds = _object(raw_bounds, "bounds_ns", {"ideal"}, names)
        values = {k: _optional_number(raw_bounds, k) for k in names}
        bounds = Bounds(**{**values, "ideal": values["ideal"] or 0.0})  # type: ignore[arg-type]
    else:
        lower = _optional_number(data, "lower_bound_ns")
        bounds = Bounds(ideal, cpsat=lower)
    schedule = None if data["schedule"] is None else _schedule_from_dict(data["schedule"], "schedule")
    stats = None
    if data.get("stats") is not None:
        keys = {"solver_status", "branches", "conflicts", "solutions", "wall_time_s", "quantum_ns"}
        raw = _object(data["stats"], "stats", keys, set())
        stats = _build("stats", SolverStats, **raw)
    trajectory = []
    for i, point in enumerate(_list(data.get("trajectory", []), "trajectory")):
        point = _object(point, f"trajectory[{i}]", {"time_s", "makespan_ns"}, set())
        at = f"trajectory[{i}]"
        trajectory.append(
            (check_number(f"{at}.time_s", point["time_s"]), check_number(f"{at}.makespan_ns", point["makespan_ns"]))
        )
    note = data.get("note", "")
    if not isinstance(note, str):
        raise InputError("note", f"must be a string, got {_kind(note)}")
    return Result(
        data["instance"],
        data["method"],
        intra,
        status,
        _optional_number(data, "makespan_ns"),
        bounds,
        _optional_number(data, "runtime_s") or 0.0,
        schedule,
        stats,
        tuple(trajectory),
        _optional_number(data, "tolerance_ns"),
        note,
        variant,
    )


def load_result(path: str | Path) -> Result:
    """Read a result file.

    Raises
    ------
    InputError
        Naming the file and the field path of the first problem.
    """
    return _read(path, result_from_dict)
