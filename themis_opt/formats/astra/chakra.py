"""Chakra execution traces, ASTRA-sim 2.x's workloads: one protobuf file per NPU, ``PREFIX.<npu>.et``.

They are read and written with MLCommons' own package (``mlc-chakra``, the
``[chakra]`` extra). An instance is one NPU of a symmetric system: NPU 0's
trace is read, and every other NPU's must be the same graph (the same nodes
in the same order with the same attributes and dependencies, up to node ids
and names), up to the communicator group each collective names, which must
be the translate of NPU 0's (:mod:`~themis_opt.formats.astra.groups`); the
first that differs is refused.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_writer, check_size
from themis_opt.formats.astra.groups import Groups, aligned_dims, same_ring, translate
from themis_opt.formats.astra.v2 import SystemV2, collective
from themis_opt.instance import After, Collective, Compute, Instance, Kind, Network

INSTALL_HINT = 'Chakra traces need the chakra extra: pip install -e ".[chakra]" (or pip install mlc-chakra)'


@dataclass(frozen=True)
class TraceNode:
    """One node of a trace, as read.

    Parameters
    ----------
    id
        The node's id in its file.
    name
        Its name (a label only).
    type
        Its node type's name: ``COMP_NODE``, ``COMM_COLL_NODE``...
    data_deps, ctrl_deps
        The ids of the nodes it waits for.
    duration_micros
        The trace's duration field (ASTRA-sim reads it as nanoseconds x 1000).
    attrs
        Its attributes by name, each value as the trace holds it.
    """

    id: int
    name: str
    type: str
    data_deps: tuple[int, ...]
    ctrl_deps: tuple[int, ...]
    duration_micros: int
    attrs: tuple[tuple[str, Any], ...]

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute ``name``, or ``default``."""
        return next((value for key, value in self.attrs if key == name), default)


def _chakra() -> tuple[Any, Any]:
    """mlc-chakra's schema and its file helpers, or the install hint as an input error."""
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError:
        raise InputError("workload", INSTALL_HINT) from None
    return et_def_pb2, protolib


def trace_files(prefix: str | Path, npus: int) -> list[Path]:
    """``PREFIX.0.et`` to ``PREFIX.<npus - 1>.et``, as ASTRA-sim opens them; each must exist."""
    prefix = Path(prefix)
    files = [prefix.parent / f"{prefix.name}.{npu}.et" for npu in range(npus)]
    missing = next((f for f in files if not f.is_file()), None)
    if missing is not None:
        found = sorted(prefix.parent.glob(f"{prefix.name}.*.et")) if prefix.parent.is_dir() else []
        have = f"{len(found)} found" if found else "none found"
        raise InputError(str(missing), f"no such trace: the network has {npus} NPUs, one trace each ({have})")
    return files


def _value(attr: Any) -> Any:
    """An attribute's value, whichever field of its ``oneof`` holds it (lists as tuples)."""
    field = attr.WhichOneof("value")
    if field is None:
        return None
    value = getattr(attr, field)
    if field.endswith("_list"):
        return tuple(value.values)
    return value


def read_trace(path: Path) -> list[TraceNode]:
    """The nodes of one trace file, in file order."""
    schema, protolib = _chakra()
    nodes: list[TraceNode] = []
    check_size(path)  # at most the input limit
    try:
        with protolib.openFileRd(str(path)) as handle:
            metadata = schema.GlobalMetadata()
            if not protolib.decodeMessage(handle, metadata):
                raise InputError(str(path), "is empty: not a Chakra trace")
            node = schema.Node()
            while protolib.decodeMessage(handle, node):
                nodes.append(
                    TraceNode(
                        node.id,
                        node.name,
                        schema.NodeType.Name(node.type),
                        tuple(node.data_deps),
                        tuple(node.ctrl_deps),
                        node.duration_micros,
                        tuple((a.name, _value(a)) for a in node.attr),
                    )
                )
                node = schema.Node()
    except InputError:
        raise
    except OSError as error:
        raise InputError(str(path), f"cannot be read ({error.strerror or error})") from None
    except Exception as error:  # protobuf's DecodeError and struct errors: not a trace
        raise InputError(str(path), f"not a Chakra trace ({type(error).__name__}: {error})") from None
    return nodes


def _shape(nodes: Sequence[TraceNode], where: Path) -> Iterator[tuple[Any, ...]]:
    """Each node as a comparable tuple, its dependencies as positions in the file."""
    position = {node.id: n for n, node in enumerate(nodes)}
    if len(position) != len(nodes):
        seen: set[int] = set()
        twice = next(node.id for node in nodes if node.id in seen or seen.add(node.id))  # type: ignore[func-returns-value]
        raise InputError(str(where), f"node id {twice} appears twice")
    for node in nodes:
        for dep in (*node.data_deps, *node.ctrl_deps):
            if dep not in position:
                raise InputError(
                    f"{where}: node {node.id} ({node.name})", f"depends on node {dep}, which is not in the trace"
                )
        yield (
            node.type,
            node.duration_micros,
            tuple(a for a in node.attrs if a[0] != "pg_name"),  # groups are compared apart
            tuple(sorted(position[d] for d in node.data_deps)),
            tuple(sorted(position[d] for d in node.ctrl_deps)),
        )


def group_of(node: TraceNode, groups: Groups | None, npus: int, where: str) -> tuple[int, ...]:
    """The NPUs of the communicator group a node names, in ring order; ``()`` for every NPU (no group,
    ``"0"``, or a group of them all, which ASTRA-sim 2.x runs as the network's own plan).
    """
    name = node.attr("pg_name", "")
    if not isinstance(name, str):
        raise InputError(where, f"pg_name must be a string, got {name!r}")
    if name in ("", "0"):
        return ()
    if groups is None:
        raise InputError(where, f"runs in communicator group {name!r}: give the group file (--comm-groups)")
    found = groups.get(name.strip())
    if found is None:
        raise InputError(where, f"communicator group {name!r} is not in the group file (ASTRA-sim 2.x aborts)")
    return () if len(found) == npus else found


def read_traces(
    prefix: str | Path, npus: int, network: Network | None = None, groups: Groups | None = None
) -> list[TraceNode]:
    """NPU 0's nodes, after checking that every other NPU's trace is the same graph, each group the
    translate of NPU 0's on ``network``.

    Raises
    ------
    InputError
        If a trace is missing or unreadable, or the first NPU whose trace differs from NPU 0's
        (naming its first differing node).
    """
    files = trace_files(prefix, npus)
    first = read_trace(files[0])
    reference = list(_shape(first, files[0]))
    grouped = [n for n, node in enumerate(first) if node.attr("pg_name", "") not in ("", "0")]
    own = {n: group_of(first[n], groups, npus, f"{files[0]}: node {first[n].id} ({first[n].name})") for n in grouped}
    for n, members in own.items():
        if members and 0 not in members:
            where = f"{files[0]}: node {first[n].id} ({first[n].name})"
            raise InputError(where, f"NPU 0 is not in its communicator group {list(members)}")
    for npu, path in enumerate(files[1:], start=1):
        nodes = read_trace(path)
        shape = list(_shape(nodes, path))
        if len(shape) != len(reference):
            raise InputError(
                str(path), f"NPU {npu} has {len(shape)} nodes, NPU 0 has {len(reference)}: not a symmetric system"
            )
        for n, (mine, theirs) in enumerate(zip(shape, reference)):
            where = f"{path}: node {nodes[n].id} ({nodes[n].name})"
            if mine != theirs:
                raise InputError(where, f"NPU {npu} differs from NPU 0's node {first[n].id}: not a symmetric system")
            theirs_group = own.get(n, ())
            mine_group = group_of(nodes[n], groups, npus, where)
            if theirs_group or mine_group:
                assert network is not None, "groups are read on a network"
                if not (theirs_group and mine_group and same_ring(mine_group, translate(network, theirs_group, npu))):
                    raise InputError(
                        where,
                        f"NPU {npu}'s group {list(mine_group) or 'of every NPU'} is not NPU 0's "
                        f"{list(theirs_group) or 'of every NPU'} moved by NPU {npu}'s place: not a symmetric system",
                    )
    return first


def write_trace(path: Path, nodes: Sequence[TraceNode]) -> None:
    """Write ``nodes`` as one trace file (attributes as int64, bool, string or bool lists, as ASTRA-sim reads them)."""
    schema, protolib = _chakra()
    with atomic_writer(path, "wb") as handle:
        protolib.encodeMessage(handle, schema.GlobalMetadata(version="0.0.4"))
        for node in nodes:
            message = schema.Node(
                id=node.id,
                name=node.name,
                type=schema.NodeType.Value(node.type),
                duration_micros=node.duration_micros,
            )
            message.data_deps.extend(node.data_deps)
            message.ctrl_deps.extend(node.ctrl_deps)
            for name, value in node.attrs:
                attr = schema.AttributeProto(name=name)
                if isinstance(value, bool):
                    attr.bool_val = value
                elif isinstance(value, str):
                    attr.string_val = value
                elif isinstance(value, tuple):
                    attr.bool_list.values.extend(bool(v) for v in value)
                else:
                    attr.int64_val = int(value)
                message.attr.append(attr)
            protolib.encodeMessage(handle, message)


COLLECTIVE_TYPES = {0: Kind.ALL_REDUCE, 2: Kind.ALL_GATHER, 6: Kind.ALL_TO_ALL, 7: Kind.REDUCE_SCATTER}
_COMM_NAMES = {1: "REDUCE", 3: "GATHER", 4: "SCATTER", 5: "BROADCAST", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER"}


def _int(node: TraceNode, name: str, where: str) -> int:
    value = node.attr(name)
    if value is None:
        raise InputError(where, f"has no {name} (ASTRA-sim 2.x throws)")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(where, f"{name} must be a whole number >= 0, got {value!r} (ASTRA-sim 2.x throws)")
    return value


def trace_tasks(
    prefix: Path,
    network: Network,
    system: SystemV2,
    groups: Groups | None = None,
    *,
    as_dimensions: bool = False,
) -> tuple[tuple[Collective | Compute, ...], list[str]]:
    """The tasks of NPU 0's trace as ASTRA-sim 2.x runs them, and notes.

    A collective in a communicator group of ``groups`` smaller than the network runs on one ring
    over its NPUs, as 2.x runs it; with ``as_dimensions``, one whose NPUs are exactly some whole
    dimensions runs over those dimensions instead (the network's own plan, which 2.x does not use
    there: what Themis and the optimum would make of it).

    A compute node takes ``duration_micros`` x 1000 ns (1 ns for 0), or with
    the roofline ``num_ops / min(local-mem-bw x num_ops / tensor_size,
    peak-perf)`` in whole ns; compute runs one node at a time, the lowest id
    first. A node starts when all its data and control dependencies have
    ended. ASTRA-sim 2.x runs one communication at a time per NPU: the
    collectives are chained in the order it runs them (:func:`serialised`).
    """
    nodes = read_traces(prefix, network.num_npus, network, groups)
    if not nodes:
        raise InputError(f"{prefix}.0.et", "holds no node: ASTRA-sim 2.x finds no dependency-free node and stops")
    tasks: list[Collective | Compute] = []
    notes: list[str] = []
    ids = {node.id: f"n{node.id}" for node in nodes}
    for node in sorted(nodes, key=lambda n: n.id):
        where = f"{prefix}.0.et: node {node.id} ({node.name})"
        after = tuple(After(ids[d]) for d in dict.fromkeys((*node.data_deps, *node.ctrl_deps)))
        cpu = node.attr("is_cpu_op", False)
        match node.type:
            case "COMP_NODE":
                if cpu:
                    raise InputError(where, "runs on the CPU (is_cpu_op): a second compute unit is not modelled")
                duration = _compute_ns(node, system, where)
                try:
                    tasks.append(Compute(duration, id=ids[node.id], after=after))
                except InputError as error:  # out of the instance's range: say which node and key made it
                    key = "duration_micros" if system.peak_tflops is None else "num_ops"
                    raise InputError(f"{where}: {key}", f"makes {duration:g} ns: {error.problem}") from None
            case "COMM_COLL_NODE":
                if cpu:
                    raise InputError(where, "a communication node on the CPU: ASTRA-sim 2.x throws")
                group = group_of(node, groups, network.num_npus, where)
                code = _int(node, "comm_type", where)
                if code not in COLLECTIVE_TYPES:
                    name = _COMM_NAMES.get(code, str(code))
                    raise InputError(where, f"a {name} collective is not modelled (ASTRA-sim 2.x: unsupported)")
                involved = node.attr("involved_dim")
                if involved is not None and not (
                    isinstance(involved, tuple) and all(isinstance(v, bool) for v in involved)
                ):
                    raise InputError(where, f"involved_dim must be a list of booleans, got {involved!r}")
                spanned = aligned_dims(network, group) if group and as_dimensions else None
                if spanned is not None:
                    involved, group = tuple(d in spanned for d in range(network.num_dims)), ()
                    notes.append(f"{where}: its group runs over dimensions {list(spanned)}, as asked")
                coll, note = collective(
                    COLLECTIVE_TYPES[code],
                    _int(node, "comm_size", where),
                    involved,
                    network,
                    system,
                    where,
                    id=ids[node.id],
                    after=after,
                    group=group,
                )
                tasks.append(coll)
                notes += [note] if note else []
            case "COMM_SEND_NODE" | "COMM_RECV_NODE":
                raise InputError(where, "point-to-point sends and receives are not modelled")
            case "MEM_LOAD_NODE" | "MEM_STORE_NODE":
                raise InputError(where, "remote memory accesses are not modelled")
            case "METADATA_NODE":
                raise InputError(where, "a metadata node: ASTRA-sim 2.x aborts on it (invalid node type)")
            case _:
                raise InputError(where, f"a {node.type}: ASTRA-sim 2.x skips it and may never issue its children")
    chained, note = serialised(tasks, network)
    return chained, [*notes, *([note] if note else [])]


def _compute_ns(node: TraceNode, system: SystemV2, where: str) -> float:
    """A compute node's time in ns, as ASTRA-sim 2.x replays it or its roofline gives it."""
    if system.peak_tflops is None:
        return float(node.duration_micros * 1000) if node.duration_micros else 1.0
    ops, size = _int(node, "num_ops", where), _int(node, "tensor_size", where)
    if size == 0:
        raise InputError(where, "tensor_size 0: ASTRA-sim 2.x skips the node and may never issue its children")
    assert system.reduction_gbps is not None
    perf = min(system.reduction_gbps * 1e9 * ops / size, system.peak_tflops * 1e12)
    runtime = math.floor(ops / perf * 1e9)
    if runtime == 0:
        raise InputError(where, "the roofline gives 0 ns: ASTRA-sim 2.x aborts on an event at the current time")
    return float(runtime)


def serialised(tasks: Sequence[Collective | Compute], network: Network) -> tuple[tuple[Collective | Compute, ...], str]:
    """The tasks with each collective after the one ASTRA-sim 2.x runs before it, and a note.

    ASTRA-sim 2.x runs one communication at a time per NPU: when it is free,
    the ready collective of lowest id starts (compute, one node at a time, the
    same way). Alone on the network a collective takes its baseline time
    whatever runs beside it, so one pass over the tasks in time gives the
    order; the collectives are then chained in it (each after the one before),
    so every method keeps ASTRA-sim's order.
    """
    from themis_opt.budget import Deadline
    from themis_opt.methods import Intra
    from themis_opt.policies import baseline_orders
    from themis_opt.sim import simulate

    colls = [t for t in tasks if isinstance(t, Collective)]
    if len(colls) < 2:
        return tuple(tasks), ""
    alone = {
        c.id: simulate(alone, baseline_orders(alone), Intra.FIFO, Deadline(), baseline=True).makespan
        for c in colls
        for alone in [Instance(network, (dataclasses.replace(c, after=(), issue_ns=0.0),))]
    }
    ends: dict[str, float] = {}
    free = {"compute": 0.0, "comm": 0.0}
    waiting = list(tasks)  # in id order: the lowest ready id first
    order: list[str] = []
    now = 0.0
    while waiting:
        started = False
        for unit in ("compute", "comm"):
            if free[unit] > now:
                continue
            for task in waiting:
                if (unit == "comm") != isinstance(task, Collective):
                    continue
                if all(d.task in ends and ends[d.task] <= now for d in task.after):
                    length = alone[task.id] if isinstance(task, Collective) else task.duration_ns
                    ends[task.id] = free[unit] = now + length
                    if isinstance(task, Collective):
                        order.append(task.id)
                    waiting.remove(task)
                    started = True
                    break
        if not started:
            later = [t for t in (*free.values(), *ends.values()) if t > now]
            if not later:
                raise InputError("workload", "a dependency cycle: ASTRA-sim 2.x never finishes")
            now = min(later)
    before = {b: a for a, b in zip(order, order[1:])}
    chained = tuple(
        dataclasses.replace(t, after=(*t.after, After(before[t.id])))
        if isinstance(t, Collective) and t.id in before and before[t.id] not in {d.task for d in t.after}
        else t
        for t in tasks
    )
    note = (
        "ASTRA-sim 2.x runs one collective at a time per NPU: they are chained in the order its baseline runs them "
        f"({' -> '.join(order[:4])}{' -> ...' if len(order) > 4 else ''})"
    )
    return chained, note
