"""Instance files: the JSON document of an :class:`~themis_opt.instance.Instance`, its schema, reading and writing."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError
from themis_opt.formats.native.jsonfile import (
    VERSION,
    _build,
    _header,
    _kind,
    _list,
    _num,
    _object,
    _read,
    write_json,
)
from themis_opt.instance import (
    MAX_COLLECTIVES,
    After,
    AllReducePhases,
    Collective,
    Compute,
    Dimension,
    Instance,
    Network,
    Task,
)

INSTANCE_FORMAT = "themis-opt-instance"


def instance_schema() -> dict[str, Any]:
    """The JSON Schema of instance files, as shipped in the package."""
    from importlib import resources

    text = resources.files("themis_opt").joinpath("schema/instance.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _tasks(value: Any, path: str) -> list[Any]:
    """The list of tasks, its length checked before any is built."""
    tasks = _list(value, path)
    if len(tasks) > MAX_COLLECTIVES:
        raise InputError(path, f"must hold at most {MAX_COLLECTIVES} tasks, got {len(tasks)}")
    return tasks


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
            for i, raw in enumerate(_tasks(data["collectives"], "collectives"))
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
    for i, raw in enumerate(_tasks(data["tasks"], "tasks")):
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
    metadata = _metadata(data)
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


def _metadata(data: dict[str, Any]) -> dict[str, str]:
    """An instance document's metadata: strings by name."""
    metadata = _object(data.get("metadata", {}), "metadata", set(), set(data.get("metadata") or {}))
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise InputError(f"metadata.{key}", f"must be a string, got {_kind(value)}")
    return dict(metadata)


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


@dataclass(frozen=True)
class NetworkFile:
    """What a command that needs only a network reads of an instance file.

    Parameters
    ----------
    network
        The network.
    metadata
        The file's metadata (an ASTRA-sim import's ``astra_splits`` and scheduling policy among it).
    chunks
        Its first collective's chunk count, ``None`` for a file that holds only a network.
    """

    network: Network
    metadata: dict[str, str]
    chunks: int | None


def load_network(path: str | Path) -> NetworkFile:
    """The network of an instance file, which may hold only a network: no ``tasks`` (version 2;
    ``collectives`` in version 1), or an empty list of them. A file with tasks must be a whole instance.

    Raises
    ------
    InputError
        Naming the file and the field path of the first problem.
    """

    def build(data: Any) -> NetworkFile:
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, int) and not isinstance(version, bool) and version in (1, 2):
            tasks = "tasks" if version == 2 else "collectives"
            if data.get(tasks, []) == []:  # no tasks: only a network (a list of the wrong type is not none)
                more = {"name", "metadata", "stage_npus", "tasks"} if version == 2 else {"name", "collectives"}
                data = _header(data, INSTANCE_FORMAT, {"network"}, more)
                return NetworkFile(_network(data["network"]), _metadata(data) if version == 2 else {}, None)
        instance = instance_from_dict(data, Path(path).stem)
        return NetworkFile(instance.network, dict(instance.metadata), instance.collectives[0].chunks)

    return _read(path, build)


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


def save_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` to ``path`` as JSON."""
    write_json(path, instance_to_dict(instance))
