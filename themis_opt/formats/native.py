"""Reading and writing instances and results as JSON (format version 2; version 1 files still load).

Readers are strict: unknown, missing, duplicated or mistyped fields and
non-finite numbers raise :class:`~themis_opt.errors.InputError` naming the
field path, so a typo never turns silently into a default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from themis_opt.errors import InputError, too_many_digits
from themis_opt.fileio import read_text, write_text
from themis_opt.instance import (
    After,
    AllReducePhases,
    Collective,
    Compute,
    Dimension,
    Instance,
    Network,
    Task,
    check_number,
)
from themis_opt.methods import Intra, method_names
from themis_opt.result import Bounds, Result, SolverStats, Status
from themis_opt.schedule import ChunkSchedule, ComputeSchedule, Phase, Schedule

T = TypeVar("T")

INSTANCE_FORMAT = "themis-opt-instance"
RESULT_FORMAT = "themis-opt-result"
VERSION = 2
VERSIONS = (1, 2)  # what the readers accept; writers write VERSION


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
        what = error.msg.removesuffix(" at")  # json's "Unterminated string starting at"
        raise InputError("", f"not valid JSON: {what} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise InputError("", "not valid JSON: nested too deeply") from None
    except InputError:
        raise
    except ValueError as error:  # an integer of more digits than Python converts
        raise InputError("", f"not valid JSON: {too_many_digits(error)}") from None


def read_json(path: str | Path) -> Any:
    """Read and parse a JSON file; errors name the file."""
    path = Path(path)
    text = read_text(path)  # at most the input limit: an endless file is refused, not read until memory runs out
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
    if isinstance(data, dict) and "version" in data and (data["version"] not in VERSIONS or _is_bool(data["version"])):
        raise InputError("version", f"must be 1 or 2, got {data['version']!r}")
    data = _object(data, "", required | {"format", "version"}, optional)
    header: dict[str, Any] = data
    return header


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def instance_from_dict(data: Any, default_name: str = "instance") -> Instance:
    """Build an :class:`Instance` from parsed JSON (format version 1 or 2).

    Parameters
    ----------
    data
        The parsed JSON document.
    default_name
        The instance's name when the document has none.
    """
    if isinstance(data, dict) and data.get("version") == 1 and not isinstance(data.get("version"), bool):
        data = _header(data, INSTANCE_FORMAT, {"network", "collectives"}, {"name"})
        collectives = [
            _collective(raw, f"collectives[{i}]", version=1)
            for i, raw in enumerate(_list(data["collectives"], "collectives"))
        ]
        network = _network(data["network"])
        try:
            return Instance(network, tuple(collectives), data.get("name", default_name))
        except InputError as error:  # version 1 names a collective by its place in "collectives"
            path = re.sub(r"^tasks\[(\d+)\] \(c\d+\)", r"collectives[\1]", error.path)
            raise InputError(re.sub(r"^tasks\b", "collectives", path), error.problem) from None
    data = _header(data, INSTANCE_FORMAT, {"network", "tasks"}, {"name", "metadata", "stage_npus"})
    network = _network(data["network"])
    tasks: list[Task] = []
    for i, raw in enumerate(_list(data["tasks"], "tasks")):
        where = f"tasks[{i}]"
        if not isinstance(raw, dict):
            raise InputError(where, f"must be an object, got {_kind(raw)}")
        if raw.get("kind") == "compute":
            raw = _object(raw, where, {"id", "kind", "duration_ns"}, {"issue_ns", "after", "stage"})
            where = f"{where} ({raw['id']})" if isinstance(raw["id"], str) else where
            tasks.append(
                _build(
                    where,
                    Compute,
                    raw["duration_ns"],
                    raw["id"],
                    raw.get("issue_ns", 0.0),
                    _after(raw.get("after", []), f"{where}.after"),
                    raw.get("stage", 0),
                )
            )
        else:
            tasks.append(_collective(raw, where, version=2))
    metadata = _object(data.get("metadata", {}), "metadata", set(), set(data.get("metadata") or {}))
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise InputError(f"metadata.{key}", f"must be a string, got {_kind(value)}")
    instance: Instance = _build(
        "",
        Instance,
        network,
        tuple(tasks),
        data.get("name", default_name),
        tuple(sorted(metadata.items())),
        tuple(_list(data.get("stage_npus", []), "stage_npus")),
    )
    return instance


def _network(raw: Any) -> Network:
    net = _object(
        raw,
        "network",
        {"dimensions"},
        {
            "endpoint_delay_ns",
            "congestion_unaware",
            "all_reduce_phases",
            "phase_delay_ns",
            "integer_messages",
            "integer_message_sums",
            "reduction_gbps",
            "active_chunks",
            "innermost_charge",
            "serial_phase_ends",
        },
    )
    dims = []
    for i, raw_dim in enumerate(_list(net["dimensions"], "network.dimensions")):
        where = f"network.dimensions[{i}]"
        raw_dim = _object(
            raw_dim,
            where,
            {"size", "topology", "bandwidth_gbps", "latency_ns"},
            {
                "name",
                "algorithm",
                "all_to_all_algorithm",
                "reduce_scatter_algorithm",
                "all_gather_algorithm",
                "message_overhead_ns",
                "physical_size",
                "stride",
            },
        )
        dims.append(
            _build(
                where,
                Dimension,
                raw_dim["size"],
                raw_dim["topology"],
                raw_dim["bandwidth_gbps"],
                raw_dim["latency_ns"],
                raw_dim.get("algorithm"),
                raw_dim.get("name", f"d{i}"),
                raw_dim.get("all_to_all_algorithm"),
                raw_dim.get("reduce_scatter_algorithm"),
                raw_dim.get("all_gather_algorithm"),
                raw_dim.get("message_overhead_ns", 0.0),
                raw_dim.get("physical_size"),
                raw_dim.get("stride", 1),
            )
        )
    network: Network = _build(
        "network",
        Network,
        tuple(dims),
        net.get("endpoint_delay_ns", 10.0),
        net.get("congestion_unaware", False),
        net.get("all_reduce_phases", "split"),
        net.get("phase_delay_ns", 0.0),
        net.get("integer_messages", False),
        net.get("integer_message_sums", False),
        net.get("reduction_gbps"),
        net.get("active_chunks", 1),
        net.get("innermost_charge", False),
        net.get("serial_phase_ends", False),
    )
    return network


def _collective(raw: Any, where: str, *, version: int) -> Collective:
    if version == 1:
        raw = _object(raw, where, {"kind", "size_bytes", "chunks"}, {"issue_ns", "dimensions"})
        if raw.get("kind") == "all_to_all":
            raise InputError(f"{where}.kind", "all_to_all needs format version 2")
    else:
        raw = _object(
            raw,
            where,
            {"id", "kind", "size_bytes", "chunks"},
            {"issue_ns", "dimensions", "priority", "after", "chunk_bytes", "group", "stage"},
        )
        if isinstance(raw["id"], str):
            where = f"{where} ({raw['id']})"
    dims_field = raw.get("dimensions")
    if dims_field is not None:
        dims_field = tuple(_list(dims_field, f"{where}.dimensions"))
    collective: Collective = _build(
        where,
        Collective,
        raw["kind"],
        raw["size_bytes"],
        raw["chunks"],
        raw.get("issue_ns", 0.0),
        dims_field,
        raw.get("id", ""),
        raw.get("priority", 0),
        _after(raw.get("after", []), f"{where}.after"),
        raw.get("chunk_bytes"),
        tuple(_list(raw.get("group", []), f"{where}.group")),
        raw.get("stage", 0),
    )
    return collective


@functools.lru_cache(maxsize=1 << 16)
def _plain_after(task: str) -> After:
    """The dependency on ``task`` without a lag: one object for every task waiting for it (immutable)."""
    return After(task)


def _after(raw: Any, where: str) -> tuple[After, ...]:
    entries = _list(raw, where)
    if all(type(entry) is str for entry in entries):  # the common form, fast: a million in a second
        return tuple(map(_plain_after, entries))
    deps = []
    for k, entry in enumerate(entries):
        at = f"{where}[{k}]"
        if isinstance(entry, str):
            deps.append(After(entry))
            continue
        entry = _object(entry, at, {"task"}, {"lag_ns"})
        if not isinstance(entry["task"], str):
            raise InputError(f"{at}.task", f"must be a task id (a string), got {_kind(entry['task'])}")
        deps.append(_build(at, After, entry["task"], entry.get("lag_ns", 0.0)))
    return tuple(deps)


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
    """The JSON document of ``instance`` (format version 2): every field written out, except
    the ones of ASTRA-sim's finer model (per-kind algorithms, message overheads, carved dimensions, congestion, how
    all-reduces are cut, explicit chunk sizes), which appear where they differ from their defaults.
    """
    tasks: list[dict[str, Any]] = []
    for task in instance.tasks:
        after = [dep.task if dep.lag_ns == 0 else {"task": dep.task, "lag_ns": _num(dep.lag_ns)} for dep in task.after]
        if isinstance(task, Compute):
            tasks.append(
                {
                    "id": task.id,
                    "kind": "compute",
                    "duration_ns": _num(task.duration_ns),
                    "issue_ns": _num(task.issue_ns),
                    "after": after,
                    **({"stage": task.stage} if task.stage else {}),
                }
            )
            continue
        tasks.append(
            {
                "id": task.id,
                "kind": task.kind.value,
                "size_bytes": task.size_bytes,
                "chunks": task.chunks,
                "issue_ns": _num(task.issue_ns),
                **({"dimensions": list(task.dimensions)} if task.dimensions is not None else {}),
                "priority": task.priority,
                "after": after,
                **({"chunk_bytes": task.chunk_bytes} if task.chunk_bytes != task.size_bytes // task.chunks else {}),
                **({"group": list(task.group)} if task.group else {}),
                **({"stage": task.stage} if task.stage else {}),
            }
        )
    network = instance.network
    return {
        "format": INSTANCE_FORMAT,
        "version": VERSION,
        "name": instance.name,
        "network": {
            "endpoint_delay_ns": _num(network.endpoint_delay_ns),
            **({"congestion_unaware": True} if network.congestion_unaware else {}),
            **({"phase_delay_ns": _num(network.phase_delay_ns)} if network.phase_delay_ns else {}),
            **({"integer_messages": True} if network.integer_messages else {}),
            **({"integer_message_sums": True} if network.integer_message_sums else {}),
            **({"active_chunks": network.active_chunks} if network.active_chunks != 1 else {}),
            **({"innermost_charge": True} if network.innermost_charge else {}),
            **({"serial_phase_ends": True} if network.serial_phase_ends else {}),
            **({"reduction_gbps": _num(network.reduction_gbps)} if network.reduction_gbps is not None else {}),
            **(
                {"all_reduce_phases": network.all_reduce_phases.value}
                if network.all_reduce_phases is not AllReducePhases.SPLIT
                else {}
            ),
            "dimensions": [_dimension_to_dict(dim) for dim in network.dimensions],
        },
        "tasks": tasks,
        **({"stage_npus": list(instance.stage_npus)} if instance.stage_npus else {}),
        **({"metadata": dict(instance.metadata)} if instance.metadata else {}),
    }


def _dimension_to_dict(dim: Dimension) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": dim.name,
        "size": dim.size,
        "topology": dim.topology.value,
        "bandwidth_gbps": _num(dim.bandwidth_gbps),
        "latency_ns": _num(dim.latency_ns),
        "algorithm": dim.algorithm.value,
        "all_to_all_algorithm": dim.all_to_all_algorithm.value,
    }
    if dim.reduce_scatter_algorithm is not dim.algorithm:
        out["reduce_scatter_algorithm"] = dim.reduce_scatter_algorithm.value
    if dim.all_gather_algorithm is not dim.algorithm:
        out["all_gather_algorithm"] = dim.all_gather_algorithm.value
    if dim.message_overhead_ns:
        out["message_overhead_ns"] = _num(dim.message_overhead_ns)
    if dim.carved:
        out["physical_size"] = dim.physical_size
    if dim.stride != 1:
        out["stride"] = dim.stride
    return out


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically, creating parent folders; errors name the file.

    A long list of objects (a schedule's chunks) has one object a line: the
    standard library's C encoder writes those, five times faster than its
    indenting Python one on a schedule of 40,000 phases.
    """
    write_text(path, _indented(data) + "\n")  # atomic: a failed write leaves the earlier file whole


def _indented(value: Any, depth: int = 0) -> str:
    """``json.dumps(value, indent=2)``, but a list of more than 8 objects gets one object a line."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(k))}: {_indented(v, depth + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        if len(value) > 8 and all(isinstance(v, dict) for v in value):
            return "[\n" + ",\n".join(inner + json.dumps(v) for v in value) + f"\n{pad}]"
        if any(isinstance(v, (dict, list)) for v in value):
            return "[\n" + ",\n".join(inner + _indented(v, depth + 1) for v in value) + f"\n{pad}]"
    return json.dumps(value, indent=2 if isinstance(value, (dict, list)) else None)


def check_writable(path: str | Path) -> None:
    """Raise :class:`InputError` unless a file can be written at ``path``, its missing folders
    created (checked before long work starts, so that no result is lost at the end). The check
    writes: it makes the missing folders and the file, then removes what it made.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), "is a folder, not a file")
    if path.exists():
        try:
            open(path, "ab").close()  # appending nothing changes nothing
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
        return
    with _made_folders(path.parent, str(path)):
        try:
            open(path, "xb").close()
            path.unlink()
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None


def check_folder(path: str | Path) -> None:
    """Raise :class:`InputError` unless files can be written in the folder ``path`` (made if
    missing); checked, like :func:`check_writable`, by writing and removing what it made.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(str(path), "exists and is not a folder")
    with _made_folders(path, str(path)):
        try:
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as error:
            raise InputError(str(path), f"cannot be written in ({error.strerror or error})") from None


@contextlib.contextmanager
def _made_folders(folder: Path, where: str) -> Iterator[None]:
    """Make ``folder``'s missing folders for the body, and remove them after it."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(where, f"cannot be written ({folder} is not a folder)")
    made: list[Path] = []
    try:
        for new in reversed(missing):
            try:
                new.mkdir()
            except OSError as error:
                raise InputError(where, f"cannot be written (cannot make {new}: {error.strerror or error})") from None
            made.append(new)
        yield
    finally:
        for new in reversed(made):
            with contextlib.suppress(OSError):
                new.rmdir()


def save_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` to ``path`` as JSON."""
    write_json(path, instance_to_dict(instance))


def schedule_to_dict(schedule: Schedule, instance: Instance | None = None) -> dict[str, Any]:
    """The JSON form of a schedule (compute tasks named by id when ``instance`` is given)."""
    computes = [
        {
            "compute": c.compute,
            **({"task": instance.computes[c.compute].id} if instance is not None else {}),
            "start_ns": c.start_ns,
            "end_ns": c.end_ns,
        }
        for c in schedule.computes
    ]
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
        "schedule": None if result.schedule is None else schedule_to_dict(result.schedule),
    }


def save_result(result: Result, path: str | Path) -> None:
    """Write ``result`` to ``path`` as JSON."""
    write_json(path, result_to_dict(result))


def _schedule_from_dict(raw: Any, path: str) -> Schedule:
    raw = _object(raw, path, {"chunks"}, {"computes"})
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
            _in_order(phases[-1].start_ns, phases[-1].end_ns, at)
        order = tuple(_list(entry["order"], f"{where}.order"))
        chunks.append(_build(where, ChunkSchedule, entry["collective"], entry["chunk"], order, tuple(phases)))
    computes = []
    for i, entry in enumerate(_list(raw.get("computes", []), f"{path}.computes")):
        where = f"{path}.computes[{i}]"
        entry = _object(entry, where, {"compute", "start_ns", "end_ns"}, {"task"})
        computes.append(_build(where, ComputeSchedule, entry["compute"], entry["start_ns"], entry["end_ns"]))
        _in_order(computes[-1].start_ns, computes[-1].end_ns, where)
    return Schedule(tuple(chunks), tuple(computes))


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
    if intra is not None and intra not in [p.value for p in Intra]:
        raise InputError("intra", f"must be {' or '.join(p.value for p in Intra)} or null, got {intra!r}")
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
