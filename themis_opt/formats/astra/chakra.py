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
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError, counted
from themis_opt.formats.astra.etfiles import TraceNode, read_trace
from themis_opt.formats.astra.groups import Groups, aligned_dims, move, offset, same_ring_moved, stoi
from themis_opt.formats.astra.v2 import SystemV2, collective
from themis_opt.instance import After, Collective, Compute, Kind, Network


def trace_files(prefix: str | Path, npus: int) -> list[Path]:
    """``PREFIX.0.et`` to ``PREFIX.<npus - 1>.et``, as ASTRA-sim opens them; each must exist."""
    prefix = Path(prefix)
    files = []
    for npu in range(npus):  # one at a time: a network of 2^40 NPUs stops at its first missing trace
        path = prefix.parent / f"{prefix.name}.{npu}.et"
        if not path.is_file():
            found = sorted(prefix.parent.glob(f"{prefix.name}.*.et")) if prefix.parent.is_dir() else []
            have = f"{len(found)} found" if found else "none found"
            raise InputError(str(path), f"no such trace: the network has {npus} NPUs, one trace each ({have})")
        files.append(path)
    return files


def unread_traces(prefix: str | Path, npus: int) -> list[Path]:
    """``PREFIX.<n>.et`` files for NPUs the network does not have (``n >= npus``): ASTRA-sim does not open them."""
    prefix = Path(prefix)
    if not prefix.parent.is_dir():
        return []
    found = []
    for path in prefix.parent.glob(f"{prefix.name}.*.et"):
        npu = path.name[len(prefix.name) + 1 : -len(".et")]
        if npu.isdigit() and int(npu) >= npus:
            found.append((int(npu), path))
    return [path for _, path in sorted(found)]


MAX_TRACE_TASKS = 10_000  # tasks a trace import makes: its ordering and matching passes are not all linear
PEERS = ("comm_src", "comm_dst")  # a send's or receive's other NPU: compared as moved with the NPU


def _shape(nodes: Sequence[TraceNode], where: Path) -> Iterator[tuple[Any, ...]]:
    """Each node as a comparable tuple, its dependencies as positions in the file (groups and the
    NPUs a send or receive names are compared apart).
    """
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
            tuple(a for a in node.attrs if a[0] != "pg_name" and a[0] not in PEERS),
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
    number = stoi(name, f"{where}: pg_name")
    found = groups.get(str(number))
    if found is None:
        raise InputError(
            where, f"communicator group {number} ({name!r}) is not in the group file (ASTRA-sim 2.x aborts)"
        )
    return () if len(found) == npus else found


def _peer(node: TraceNode) -> str | None:
    """The attribute naming the other NPU of a send or a receive."""
    return {"COMM_SEND_NODE": "comm_dst", "COMM_RECV_NODE": "comm_src"}.get(node.type)


@dataclass(frozen=True)
class Traces:
    """Every NPU's trace, the NPUs sorted into classes that run the same graph (pipeline stages).

    Parameters
    ----------
    files
        Each NPU's trace file.
    nodes
        Each NPU's nodes, in file order.
    class_of
        Each NPU's class.
    stage_npus
        Per class, its lowest NPU, which stands for it.
    differences
        Per class after the first, where and how its lowest NPU's trace first differs from NPU 0's.
    """

    files: list[Path]
    nodes: list[list[TraceNode]]
    class_of: list[int]
    stage_npus: list[int]
    differences: list[tuple[str, str]]


def read_classes(prefix: str | Path, npus: int, network: Network, groups: Groups | None = None) -> Traces:
    """Every NPU's trace, sorted into classes: NPUs whose graphs are the same (the same nodes in the same
    order with the same attributes and dependencies, up to node ids and names) form one class, whose lowest
    NPU stands for it. Every NPU of a class must be its lowest NPU moved on the network: each group the same
    ring moved (a translate), each send's and receive's other NPU moved as the NPU is.

    Raises
    ------
    InputError
        If a trace is missing or unreadable, or the first NPU of a class that is not such a move of its
        lowest NPU (naming its node).
    """
    files = trace_files(prefix, npus)
    nodes = [read_trace(path) for path in files]
    shapes = [list(_shape(mine, path)) for mine, path in zip(nodes, files)]
    stage_npus: list[int] = []
    class_of: list[int] = []
    differences: list[tuple[str, str]] = []
    own: dict[int, dict[int, tuple[int, ...]]] = {}  # per class's lowest NPU: its groups by node position
    for npu in range(npus):
        where = functools.partial(_where, files[npu], nodes[npu])
        mine = {
            n: group_of(node, groups, npus, where(n))
            for n, node in enumerate(nodes[npu])
            if node.attr("pg_name", "") not in ("", "0")
        }
        k = next((k for k, rep in enumerate(stage_npus) if shapes[rep] == shapes[npu]), None)
        if k is None:  # a new class, this NPU its lowest
            for n, members in mine.items():
                if members and npu not in members:
                    raise InputError(where(n), f"NPU {npu} is not in its communicator group {list(members)}")
            if stage_npus:
                differences.append(_difference(nodes, shapes, files, npu))
            class_of.append(len(stage_npus))
            stage_npus.append(npu)
            own[npu] = mine
            continue
        rep = stage_npus[k]
        class_of.append(k)
        shift = offset(network, rep, npu)
        for n, node in enumerate(nodes[npu]):
            theirs_group, mine_group = own[rep].get(n, ()), mine.get(n, ())
            if (theirs_group or mine_group) and not (
                theirs_group and mine_group and npu in mine_group and same_ring_moved(network, mine_group, theirs_group)
            ):
                raise InputError(
                    where(n),
                    f"NPU {npu}'s group {list(mine_group) or 'of every NPU'} is not NPU {rep}'s "
                    f"{list(theirs_group) or 'of every NPU'}, nor that ring moved: not a symmetric system",
                )
            peer = _peer(node)
            if peer is not None:
                theirs_peer, mine_peer = nodes[rep][n].attr(peer), node.attr(peer)
                expected = move(network, (theirs_peer,), shift)[0] if isinstance(theirs_peer, int) else None
                if expected is not None and mine_peer != expected:
                    raise InputError(
                        where(n),
                        f"NPU {npu}'s {peer} is {mine_peer}, not {expected} (NPU {rep}'s {theirs_peer} moved as "
                        f"NPU {npu} is): not a symmetric system",
                    )
    return Traces(files, nodes, class_of, stage_npus, differences)


def _where(path: Path, nodes: list[TraceNode], n: int) -> str:
    """Node ``n`` of a trace, as errors name it."""
    return f"{path}: node {nodes[n].id} ({nodes[n].name})"


def _difference(nodes: list[list[TraceNode]], shapes: list[list[Any]], files: list[Path], npu: int) -> tuple[str, str]:
    """Where and how NPU ``npu``'s trace first differs from NPU 0's."""
    if len(shapes[npu]) != len(shapes[0]):
        return str(files[npu]), f"NPU {npu} has {len(shapes[npu])} nodes, NPU 0 has {len(shapes[0])}"
    n = next(n for n, (a, b) in enumerate(zip(shapes[npu], shapes[0])) if a != b)
    node = nodes[npu][n]
    return f"{files[npu]}: node {node.id} ({node.name})", f"NPU {npu} differs from NPU 0's node {nodes[0][n].id}"


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
) -> tuple[tuple[Collective | Compute, ...], list[str], tuple[int, ...]]:
    """The tasks of the traces as ASTRA-sim 2.x runs them, notes, and the NPU standing for each
    pipeline stage (``()`` for one).

    NPUs that run the same graph form a class (:func:`read_classes`); with one class the tasks are
    NPU 0's, with several each class is a pipeline stage of its lowest NPU's tasks (ids
    ``s<stage>.n<node>``). A collective in a communicator group of ``groups`` smaller than the network
    runs on one ring over its NPUs, as 2.x runs it; with ``as_dimensions``, one whose NPUs are exactly
    some whole dimensions runs over those dimensions instead (the network's own plan, which 2.x does
    not use there: what Themis and the optimum would make of it). With stages, a collective runs
    within its stage.

    A send is a collective of kind send from its stage's NPU (one message, costed as 2.x costs it); a
    receive is no task: matched with its send by (source, destination, tag, size), in node order, it
    ends when both the send has arrived and its own dependencies have ended, so the nodes that wait
    for it wait for those. A compute node takes ``duration_micros`` x 1000 ns (1 ns for 0), or with
    the roofline ``num_ops / min(local-mem-bw x num_ops / tensor_size, peak-perf)`` in whole ns;
    compute runs one node at a time, the lowest id first. A node starts when all its data and
    control dependencies have ended. ASTRA-sim 2.x runs one communication at a time per NPU,
    collectives and sends alike: the caller chains them in the order it runs them
    (:func:`themis_opt.workloads.astra2.serialised`); the tasks come back unchained.
    """
    traces = read_classes(prefix, network.num_npus, network, groups)
    reps = traces.stage_npus
    multi = len(reps) > 1
    for rep in reps:
        if not traces.nodes[rep]:
            raise InputError(
                str(traces.files[rep]), "holds no node: ASTRA-sim 2.x finds no dependency-free node and stops"
            )
    tasks_at_most = sum(node.type != "COMM_RECV_NODE" for rep in reps for node in traces.nodes[rep])
    if tasks_at_most > MAX_TRACE_TASKS:  # before the passes over the nodes, some not linear in them
        raise InputError(
            str(traces.files[reps[0]]),
            f"{tasks_at_most} nodes that would be tasks: an imported trace makes at most {MAX_TRACE_TASKS} tasks",
        )
    matched = _match(traces, network.num_npus)
    position = [{node.id: n for n, node in enumerate(traces.nodes[rep])} for rep in reps]

    def task_id(k: int, node_id: int) -> str:
        return f"s{k}.n{node_id}" if multi else f"n{node_id}"

    expanded: dict[tuple[int, int], tuple[str, ...]] = {}

    def waits_for(k: int, node: TraceNode) -> tuple[str, ...]:
        """The tasks a node of stage ``k`` waits for: a receive stands for its own and its send."""
        found: list[str] = []
        for dep in dict.fromkeys((*node.data_deps, *node.ctrl_deps)):
            other = traces.nodes[reps[k]][position[k][dep]]
            if other.type != "COMM_RECV_NODE":
                found.append(task_id(k, dep))
                continue
            if (k, dep) not in expanded:
                npu, at = matched[(reps[k], position[k][dep])]
                sender = traces.class_of[npu]
                send = traces.nodes[reps[sender]][at]
                expanded[(k, dep)] = (*waits_for(k, other), task_id(sender, send.id))
            found += expanded[(k, dep)]
        return tuple(dict.fromkeys(found))

    tasks: list[Collective | Compute] = []
    notes: list[str] = []
    re_expressed: dict[tuple[str, tuple[int, ...]], list[int]] = {}  # (file, dimensions) -> node ids
    for k, rep in enumerate(reps):
        for node in sorted(traces.nodes[rep], key=lambda n: n.id):
            where = f"{traces.files[rep]}: node {node.id} ({node.name})"
            after = tuple(After(t) for t in waits_for(k, node))
            cpu = node.attr("is_cpu_op", False)
            match node.type:
                case "COMP_NODE":
                    if cpu:
                        raise InputError(where, "runs on the CPU (is_cpu_op): a second compute unit is not modelled")
                    duration = _compute_ns(node, system, where)
                    try:
                        tasks.append(Compute(duration, task_id(k, node.id), after=after, stage=k))
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
                        re_expressed.setdefault((str(traces.files[rep]), tuple(spanned)), []).append(node.id)
                    coll, note = collective(
                        COLLECTIVE_TYPES[code],
                        _int(node, "comm_size", where),
                        involved,
                        network,
                        system,
                        where,
                        id=task_id(k, node.id),
                        after=after,
                        group=group,
                    )
                    if multi:
                        _within_class(traces, k, coll, network, where)
                    tasks.append(dataclasses.replace(coll, stage=k))
                    notes += [note] if note else []
                case "COMM_SEND_NODE":
                    if cpu:
                        raise InputError(where, "a communication node on the CPU: ASTRA-sim 2.x throws")
                    size = _int(node, "comm_size", where)
                    if size == 0:
                        raise InputError(where, "a send of 0 bytes is not modelled")
                    dst = _int(node, "comm_dst", where)
                    tasks.append(
                        Collective(Kind.SEND, size, 1, id=task_id(k, node.id), after=after, group=(rep, dst), stage=k)
                    )
                case "COMM_RECV_NODE":
                    continue  # a dependency of the nodes that wait for it
                case "MEM_LOAD_NODE" | "MEM_STORE_NODE":
                    raise InputError(where, "remote memory accesses are not modelled")
                case "METADATA_NODE":
                    raise InputError(where, "a metadata node: ASTRA-sim 2.x aborts on it (invalid node type)")
                case _:
                    raise InputError(where, f"a {node.type}: ASTRA-sim 2.x skips it and may never issue its children")
    if as_dimensions and not re_expressed:
        raise InputError("groups", "dimensions changes nothing here: no collective's group is whole dimensions")
    for (file, spanned), ids in re_expressed.items():
        shown = ", ".join(map(str, ids[:4])) + (", ..." if len(ids) > 4 else "")
        notes.append(
            f"{file}: the groups of {counted(len(ids), 'collective')} run over dimensions {list(spanned)} "
            f"(--groups dimensions: nodes {shown})"
        )
    unread = unread_traces(prefix, network.num_npus)
    if unread:
        shown = ", ".join(p.name for p in unread[:3]) + (", ..." if len(unread) > 3 else "")
        notes.append(
            f"{counted(len(unread), 'trace')} past the network's {network.num_npus} NPUs not read ({shown}): "
            "ASTRA-sim 2.x opens one per NPU"
        )
    stage_npus = tuple(reps) if multi else ()
    if multi:
        notes.append(
            f"{len(reps)} pipeline stages, NPUs {', '.join(map(str, reps))} standing for them "
            f"(classes of {', '.join(str(traces.class_of.count(k)) for k in range(len(reps)))} NPUs)"
        )
    return tuple(tasks), notes, stage_npus


def _within_class(traces: Traces, k: int, coll: Collective, network: Network, where: str) -> None:
    """An error unless a collective of class ``k`` reaches only NPUs of its class from the class's lowest
    NPU: its group's, or those that differ from it only in the dimensions it involves (a flattened
    one: every NPU).
    """
    rep = traces.stage_npus[k]
    if coll.group:
        reached: tuple[int, ...] = coll.group
        others = f"group {list(coll.group)}"
    else:
        flat = network.flattened(coll.kind)
        dims = () if flat else (coll.dimensions or ())
        home = network.coordinates(rep)
        reached = tuple(
            npu
            for npu in range(network.num_npus)
            if flat or all(x == y or d in dims for d, (x, y) in enumerate(zip(network.coordinates(npu), home)))
        )
        others = "every NPU" if flat else f"dimensions {list(dims)}"
    if any(traces.class_of[m] != k for m in reached):
        at, problem = traces.differences[0]
        raise InputError(
            at,
            f"{problem}: not a symmetric system, nor pipeline stages ({where} runs a collective over {others}, "
            f"beyond NPU {rep}'s stage)",
        )


def _match(traces: Traces, npus: int) -> dict[tuple[int, int], tuple[int, int]]:
    """Per receive (NPU, node position), the send it gets (NPU, node position): matched as ASTRA-sim 2.x
    matches them, by (source, destination, tag, size), the k-th receive with the k-th send (in node order).

    Raises
    ------
    InputError
        Naming the file and node of the first send or receive (lowest NPU, then node id) without its match.
    """
    sends: dict[tuple[int, int, int, int], list[tuple[int, int]]] = {}
    receives: dict[tuple[int, int, int, int], list[tuple[int, int]]] = {}
    for npu, nodes in enumerate(traces.nodes):
        for n, node in sorted(enumerate(nodes), key=lambda e: e[1].id):
            peer = _peer(node)
            if peer is None:
                continue
            where = f"{traces.files[npu]}: node {node.id} ({node.name})"
            other = _int(node, peer, where)
            if not 0 <= other < npus or other == npu:
                raise InputError(where, f"{peer} {other}: not another NPU of the network's {npus}")
            src, dst = (npu, other) if node.type == "COMM_SEND_NODE" else (other, npu)
            key = (src, dst, _int(node, "comm_tag", where), _int(node, "comm_size", where))
            (sends if node.type == "COMM_SEND_NODE" else receives).setdefault(key, []).append((npu, n))
    matched: dict[tuple[int, int], tuple[int, int]] = {}
    unmatched: list[tuple[int, int, str]] = []
    for key in sends.keys() | receives.keys():
        out, into = sends.get(key, []), receives.get(key, [])
        matched.update(zip(into, out))
        src, dst, tag, size = key
        for npu, n in out[len(into) :]:
            unmatched.append((npu, traces.nodes[npu][n].id, f"a send to NPU {dst} (tag {tag}, {size} bytes)"))
        for npu, n in into[len(out) :]:
            unmatched.append((npu, traces.nodes[npu][n].id, f"a receive from NPU {src} (tag {tag}, {size} bytes)"))
    if unmatched:
        npu, node_id, what = min(unmatched)
        node = next(node for node in traces.nodes[npu] if node.id == node_id)
        raise InputError(
            f"{traces.files[npu]}: node {node.id} ({node.name})",
            f"{what} that nothing matches: ASTRA-sim 2.x never finishes it",
        )
    return matched


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
