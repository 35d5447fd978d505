"""Reading and writing instances and results as JSON (format version 1).

Readers are strict: unknown, missing, duplicated or mistyped fields and
non-finite numbers raise :class:`~themis_opt.errors.InputError` naming the
field path, so a typo never turns silently into a default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from themis_opt.bounds import Bounds
from themis_opt.errors import InputError
from themis_opt.instance import Collective, Dimension, Instance, Network, check_number
from themis_opt.result import Result, SolverStats, Status
from themis_opt.schedule import ChunkSchedule, Phase, Schedule

T = TypeVar("T")

INSTANCE_FORMAT = "themis-opt-instance"
RESULT_FORMAT = "themis-opt-result"
VERSION = 1


def instance_schema() -> dict[str, Any]:
    """The JSON Schema of instance files, as shipped in the package."""
    from importlib import resources

    text = resources.files("themis_opt").joinpath("schema/instance.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


# ---------------------------------------------------------------- reading


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise InputError(key, "appears twice in one object")
        data[key] = value
    return data


def _no_constant(name: str) -> Any:
    raise InputError("", f"{name} is not a number JSON allows")


def parse_json(text: str) -> Any:
    """Parse JSON text strictly (no NaN or Infinity, no duplicate keys)."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise InputError("", f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise InputError("", "not valid JSON: nested too deeply") from None


def read_json(path: str | Path) -> Any:
    """Read and parse a JSON file; errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), "is a directory, not a JSON file") from None
    except UnicodeDecodeError:
        raise InputError(str(path), "not a UTF-8 text file") from None
    except OSError as error:
        raise InputError(str(path), f"cannot be read ({error.strerror})") from None
    try:
        return parse_json(text)
    except InputError as error:
        raise in_file(error, path) from None


def in_file(error: InputError, path: str | Path) -> InputError:
    """``error`` located in file ``path``: ``FILE: field.path``."""
    return InputError(f"{path}: {error.path}" if error.path else str(path), error.problem)


def _read(path: str | Path, build: Callable[[Any], T]) -> T:
    """Parse the JSON file at ``path`` with ``build``; errors name the file."""
    data = read_json(path)
    try:
        return build(data)
    except InputError as error:
        raise in_file(error, path) from None


def _object(value: Any, path: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(path, f"must be an object, got {_kind(value)}")
    for key in value:
        if key not in required and key not in optional:
            allowed = ", ".join(sorted(required | optional))
            raise InputError(_join(path, key), f"unknown field (allowed: {allowed})")
    for key in sorted(required):
        if key not in value:
            raise InputError(_join(path, key), "missing required field")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(path, f"must be a list, got {_kind(value)}")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "an object", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _build(path: str, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """Construct a data class, locating its own validation errors at ``path``."""
    try:
        return factory(*args, **kwargs)
    except InputError as error:
        raise error.within(path) from None


def _header(data: Any, fmt: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if isinstance(data, dict) and "format" in data and data["format"] != fmt:
        raise InputError("format", f"must be {fmt!r}, got {data['format']!r}")
    data = _object(data, "", required | {"format", "version"}, optional)
    if data["version"] != VERSION or isinstance(data["version"], bool):
        raise InputError("version", f"must be {VERSION}, got {data['version']!r}")
    header: dict[str, Any] = data
    return header


def instance_from_dict(data: Any, default_name: str = "instance") -> Instance:
    """Build an :class:`Instance` from parsed JSON (format version 1).

    Parameters
    ----------
    data
        The parsed JSON document.
    default_name
        The instance's name when the document has none.
    """
    data = _header(data, INSTANCE_FORMAT, {"network", "collectives"}, {"name"})
    net = _object(data["network"], "network", {"dimensions"}, {"endpoint_delay_ns"})
    dims = []
    for i, raw in enumerate(_list(net["dimensions"], "network.dimensions")):
        where = f"network.dimensions[{i}]"
        raw = _object(raw, where, {"size", "topology", "bandwidth_gbps", "latency_ns"}, {"name", "algorithm"})
        dims.append(
            _build(
                where,
                Dimension,
                raw["size"],
                raw["topology"],
                raw["bandwidth_gbps"],
                raw["latency_ns"],
                raw.get("algorithm"),
                raw.get("name", f"d{i}"),
            )
        )
    network = _build("network", Network, tuple(dims), net.get("endpoint_delay_ns", 10.0))
    collectives = []
    for i, raw in enumerate(_list(data["collectives"], "collectives")):
        where = f"collectives[{i}]"
        raw = _object(raw, where, {"kind", "size_bytes", "chunks"}, {"issue_ns", "dimensions"})
        dims_field = raw.get("dimensions")
        if dims_field is not None:
            dims_field = tuple(_list(dims_field, f"{where}.dimensions"))
        collectives.append(
            _build(
                where, Collective, raw["kind"], raw["size_bytes"], raw["chunks"], raw.get("issue_ns", 0.0), dims_field
            )
        )
    instance: Instance = _build("", Instance, network, tuple(collectives), data.get("name", default_name))
    return instance


def load_instance(path: str | Path) -> Instance:
    """Read an instance file; its name defaults to the file's stem.

    Raises
    ------
    InputError
        Naming the file and the field path of the first problem.
    """
    return _read(path, lambda data: instance_from_dict(data, Path(path).stem))


def _num(value: float) -> int | float:
    """Integral floats as ints, so files stay as people write them."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def instance_to_dict(instance: Instance) -> dict[str, Any]:
    """The JSON document of ``instance``, every default written out."""
    return {
        "format": INSTANCE_FORMAT,
        "version": VERSION,
        "name": instance.name,
        "network": {
            "endpoint_delay_ns": _num(instance.network.endpoint_delay_ns),
            "dimensions": [
                {
                    "name": dim.name,
                    "size": dim.size,
                    "topology": dim.topology.value,
                    "bandwidth_gbps": _num(dim.bandwidth_gbps),
                    "latency_ns": _num(dim.latency_ns),
                    "algorithm": dim.algorithm.value,
                }
                for dim in instance.network.dimensions
            ],
        },
        "collectives": [
            {
                "kind": coll.kind.value,
                "size_bytes": coll.size_bytes,
                "chunks": coll.chunks,
                "issue_ns": _num(coll.issue_ns),
                **({"dimensions": list(coll.dimensions)} if coll.dimensions is not None else {}),
            }
            for coll in instance.collectives
        ],
    }


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON, creating parent folders; errors name the file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror})") from None


def check_writable(path: str | Path) -> None:
    """Raise :class:`InputError` unless a file can be written at ``path``
    (checked before long work starts, so that no result is lost at the end).
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), "is a folder, not a file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise InputError(str(path), f"cannot be written (no writable folder {folder})")


def save_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` to ``path`` as JSON."""
    write_json(path, instance_to_dict(instance))


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    """The JSON form of a schedule."""
    return {
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
        ]
    }


def result_to_dict(result: Result) -> dict[str, Any]:
    """The JSON document of ``result`` (format version 1)."""
    stats = result.stats
    return {
        "format": RESULT_FORMAT,
        "version": VERSION,
        "instance": result.instance,
        "method": result.method,
        "intra": result.intra,
        "status": result.status.value,
        "makespan_ns": result.makespan,
        "lower_bound_ns": result.lower_bound,
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
        "schedule": None if result.schedule is None else schedule_to_dict(result.schedule),
    }


def save_result(result: Result, path: str | Path) -> None:
    """Write ``result`` to ``path`` as JSON."""
    write_json(path, result_to_dict(result))


def _schedule_from_dict(raw: Any, path: str) -> Schedule:
    raw = _object(raw, path, {"chunks"}, set())
    chunks = []
    for i, entry in enumerate(_list(raw["chunks"], f"{path}.chunks")):
        where = f"{path}.chunks[{i}]"
        entry = _object(entry, where, {"collective", "chunk", "order", "phases"}, set())
        phases = []
        for j, ph in enumerate(_list(entry["phases"], f"{where}.phases")):
            at = f"{where}.phases[{j}]"
            ph = _object(ph, at, {"dim", "op", "start_ns", "end_ns", "bytes_in", "bytes_out"}, set())
            phases.append(
                _build(at, Phase, ph["dim"], ph["op"], ph["start_ns"], ph["end_ns"], ph["bytes_in"], ph["bytes_out"])
            )
        order = tuple(_list(entry["order"], f"{where}.order"))
        chunks.append(_build(where, ChunkSchedule, entry["collective"], entry["chunk"], order, tuple(phases)))
    return Schedule(tuple(chunks))


def _optional_number(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(key, f"must be a number or null, got {_kind(value)}")
    return float(value)


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
        },
    )
    for key in ("instance", "method"):
        if not isinstance(data[key], str):
            raise InputError(key, f"must be a string, got {_kind(data[key])}")
    intra = data.get("intra")
    if intra is not None and not isinstance(intra, str):
        raise InputError("intra", f"must be a string or null, got {_kind(intra)}")
    try:
        status = Status(data["status"])
    except ValueError:
        choices = ", ".join(s.value for s in Status)
        raise InputError("status", f"must be one of {choices}, got {data['status']!r}") from None
    ideal = _optional_number(data, "ideal_ns") or 0.0
    raw_bounds = data.get("bounds_ns")
    if raw_bounds is not None:
        names = {"ideal", "lp", "ip", "fill_drain", "cpsat"}
        raw_bounds = _object(raw_bounds, "bounds_ns", {"ideal"}, names)
        values = {k: _optional_number(raw_bounds, k) for k in names}
        bounds = Bounds(values["ideal"] or 0.0, values["lp"], values["ip"], values["fill_drain"], values["cpsat"])
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
    )


def load_result(path: str | Path) -> Result:
    """Read a result file.

    Raises
    ------
    InputError
        Naming the file and the field path of the first problem.
    """
    return _read(path, result_from_dict)
