"""The ASTRA-sim 2.x Chakra traces of an instance: one per NPU, holding its pipeline stage's nodes.

:func:`stage_members` says which NPUs run which stage. Every NPU's trace
holds its stage's compute, collective, send and receive nodes, each group and
the other NPU of each send or receive moved to it; the traces name the
communicator groups they use. What ASTRA-sim 2.x would time otherwise (a
stage waiting for another other than through a send, a stage's collectives
that may run beside each other, compute times not whole microseconds, groups
whose moves do not split a stage's NPUs) is an error.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from themis_opt.errors import InputError
from themis_opt.formats.astra.chakra import COLLECTIVE_TYPES
from themis_opt.formats.astra.etfiles import TraceNode
from themis_opt.formats.astra.groups import move, offset, tile_group
from themis_opt.instance import Collective, Compute, Instance, Kind


def stage_members(instance: Instance) -> list[tuple[int, ...]]:
    """Per pipeline stage, the NPUs that run its tasks, in ascending order (every NPU for one stage).

    The stages split the network along their **stage dimensions**, those in which the NPUs of
    ``stage_npus`` differ: an NPU belongs to the stage whose NPU has its coordinates there (the
    layout of :func:`themis_opt.workloads.llm.llm_task_graph`). So every stage's NPU must have
    coordinate 0 in the other dimensions (it is its stage's lowest NPU, as ASTRA-sim 2.x's traces
    are imported), and the stages must take every combination of coordinates of the stage
    dimensions.

    Raises
    ------
    InputError
        If ``stage_npus`` do not split the network so.
    """
    network = instance.network
    if instance.num_stages == 1:
        return [tuple(range(network.num_npus))]
    places = [network.coordinates(npu) for npu in instance.stage_npus]
    varying = [d for d in range(network.num_dims) if len({p[d] for p in places}) > 1]
    for npu, place in zip(instance.stage_npus, places):
        if any(place[d] for d in range(network.num_dims) if d not in varying):
            raise InputError(
                "export-astra: stage_npus",
                f"NPU {npu} is not its stage's lowest NPU (the stages split the network along dimensions "
                f"{varying}, where their NPUs differ)",
            )
    combinations = math.prod(network.dimensions[d].size for d in varying)
    if combinations != instance.num_stages:
        raise InputError(
            "export-astra: stage_npus",
            f"{instance.num_stages} stages do not take every NPU: dimensions {varying}, where their NPUs differ, "
            f"hold {combinations} combinations (each stage's NPUs: those with its NPU's coordinates there)",
        )
    stage_of = {tuple(p[d] for d in varying): s for s, p in enumerate(places)}
    members: list[list[int]] = [[] for _ in instance.stage_npus]
    for npu in range(network.num_npus):
        place = network.coordinates(npu)
        members[stage_of[tuple(place[d] for d in varying)]].append(npu)
    return [tuple(m) for m in members]


def _tiles(
    instance: Instance, coll: Collective, stage: tuple[int, ...], groups: dict[tuple[int, ...], int]
) -> dict[int, int]:
    """Per NPU of ``stage``, the id (in ``groups``, which gains the new ones) of the group it names for
    ``coll``: the collective's group for its own NPUs, for the others the group moved to them, so that
    the moved groups split the stage's NPUs (every NPU of a group names that group, as 2.x needs).
    """
    where = f"export-astra: {coll.id}"
    if not set(stage).issuperset(coll.group):
        raise InputError(where, f"group {list(coll.group)} reaches beyond stage {coll.stage}'s NPUs")
    try:
        tiles = tile_group(instance.network, coll.group, stage)
    except ValueError as error:
        raise InputError(
            where,
            f"group {list(coll.group)} moved to NPU {error.args[0]} overlaps another NPU's group: its moves do not "
            f"split stage {coll.stage}'s NPUs into groups (ASTRA-sim 2.x needs every NPU of a group to name it)",
        ) from None
    return {npu: groups.setdefault(tile, len(groups) + 1) for tile in tiles for npu in tile}


def _node_ids(instance: Instance) -> dict[str, int]:
    """Each task's node id, the same in every NPU's trace: the number of an id as the import names
    tasks (``n<id>``, with stages ``s<stage>.n<id>``) when every task has one and they ascend in the
    task order within each stage (so the import gives the same ids back), else its position.
    """
    multi = instance.num_stages > 1
    found: dict[str, int] = {}
    last: dict[int, int] = {}
    for task in instance.tasks:
        match = re.fullmatch(rf"s{task.stage}\.n(\d+)" if multi else r"n(\d+)", task.id)
        number = int(match.group(1)) if match else -1
        if number <= last.get(task.stage, -1) or number >= 2**62:
            return {task.id: n for n, task in enumerate(instance.tasks)}
        found[task.id] = last[task.stage] = number
    return found


@dataclass
class _Node:
    """A node of one stage's trace, before it is written for each NPU of the stage."""

    node: TraceNode
    group: dict[int, int] | None = None  # per NPU, the id of its group
    peer: tuple[str, int] | None = None  # a send's or receive's: (its attribute, the other NPU for the stage's NPU)


def _traces(
    instance: Instance, members: list[tuple[int, ...]]
) -> tuple[dict[str, list[TraceNode]], dict[tuple[int, ...], int]]:
    """Every NPU's trace (its stage's nodes, the groups and peers moved to it, ``workload.<npu>.et``)
    and the communicator groups the traces name, with their ids.
    """
    network = instance.network
    ids = _node_ids(instance)
    stage_of = {npu: s for s, npus in enumerate(members) for npu in npus}
    by_id = {task.id: task for task in instance.tasks}
    sends = [c for c in instance.collectives if c.kind is Kind.SEND]
    tag = {c.id: n for n, c in enumerate(sends)}
    receiver = {c.id: stage_of[c.group[1]] for c in sends}
    spare = max(ids.values(), default=-1) + 1
    received: dict[str, int] = {}  # a send's receive node's id
    groups: dict[tuple[int, ...], int] = {}
    stages: list[list[_Node]] = [[] for _ in members]
    for send in sends:  # every send has its receive, whatever waits for it
        received[send.id] = spare
        spare += 1
    posted: set[str] = set()
    attrs: tuple[tuple[str, Any], ...]
    for task in instance.tasks:
        s = task.stage
        where = f"export-astra: {task.id}"
        deps = []
        for dep in task.after:
            other = by_id[dep.task]
            # a send to this stage (from another, or within it: a ring's step) is waited for at its receipt
            if isinstance(other, Collective) and other.kind is Kind.SEND and receiver[other.id] == s:
                deps.append(received[other.id])
                if other.id not in posted:  # the receive, just before the first node that waits for it
                    stages[s].append(_receive(instance, other, received[other.id], tag[other.id], s))
                    posted.add(other.id)
            elif other.stage == s:
                deps.append(ids[dep.task])
            else:
                raise InputError(
                    where,
                    f"waits for {dep.task} of stage {other.stage}: a stage waits for another only through a "
                    "send to it (ASTRA-sim 2.x's NPUs share nothing else)",
                )
        deps = list(dict.fromkeys(deps))
        number = ids[task.id]
        if isinstance(task, Compute):
            micros, rest = divmod(task.duration_ns, 1000.0)
            if rest and task.duration_ns != 1.0:
                raise InputError(
                    where,
                    f"{task.duration_ns} ns: ASTRA-sim 2.x replays whole microseconds (or 1 ns; --fit rounds them)",
                )
            stages[s].append(_Node(TraceNode(number, task.id, "COMP_NODE", tuple(deps), (), int(micros), ())))
            continue
        if task.kind is Kind.SEND:
            attrs = (("comm_tag", tag[task.id]), ("comm_size", task.size_bytes))
            node = TraceNode(number, task.id, "COMM_SEND_NODE", tuple(deps), (), 0, attrs)
            stages[s].append(_Node(node, peer=("comm_dst", task.group[1])))
            continue
        c = instance.collectives.index(task)
        code = next(k for k, v in COLLECTIVE_TYPES.items() if v is task.kind)
        attrs = (("comm_type", code), ("comm_size", _comm_size(instance, c)))
        tiles = None
        if task.group:
            tiles = _tiles(instance, task, members[s], groups)
        else:
            involved = tuple(d in instance.active_dims[c] for d in range(network.num_dims))
            attrs += (("involved_dim", involved),)
            if instance.num_stages > 1:
                _within_stage(instance, task, members[s])
        stages[s].append(_Node(TraceNode(number, task.id, "COMM_COLL_NODE", tuple(deps), (), 0, attrs), tiles))
    for send in sends:  # a receive nothing waits for: at the end of its stage's trace
        if send.id not in posted:
            stages[receiver[send.id]].append(
                _receive(instance, send, received[send.id], tag[send.id], receiver[send.id])
            )
    traces: dict[str, list[TraceNode]] = {}
    for s, npus in enumerate(members):
        rep = instance.stage_npu(s)
        for npu in npus:
            shift = offset(network, rep, npu)
            mine = []
            for item in stages[s]:
                node = item.node
                if item.group is not None:
                    node = dataclasses.replace(node, attrs=(*node.attrs, ("pg_name", str(item.group[npu]))))
                if item.peer is not None:
                    key, peer = item.peer
                    mine_peer = move(network, (peer,), shift)[0]
                    own_key = "comm_src" if key == "comm_dst" else "comm_dst"
                    node = dataclasses.replace(node, attrs=((own_key, npu), (key, mine_peer), *node.attrs))
                mine.append(node)
            traces[f"workload.{npu}.et"] = mine
    return traces, groups


def _receive(instance: Instance, send: Collective, number: int, tag: int, stage: int) -> _Node:
    """Stage ``stage``'s receive of ``send``: posted at once, from the NPU of the sending stage whose
    send reaches the stage's NPU (within the stage, a ring's step: the NPU before it).
    """
    network = instance.network
    src, dst = send.group
    rep = instance.stage_npu(stage)
    source = move(network, (src,), offset(network, dst, rep))[0]  # the NPU whose send reaches the stage's NPU
    attrs = (("comm_tag", tag), ("comm_size", send.size_bytes))
    node = TraceNode(number, f"recv.{send.id}", "COMM_RECV_NODE", (), (), 0, attrs)
    return _Node(node, peer=("comm_src", source))


def beyond_stage(instance: Instance, c: int, stage: tuple[int, ...]) -> int | None:
    """The first NPU beyond ``stage``'s NPUs that collective ``c`` (without a group) reaches from its
    stage's NPU over its dimensions (a flattened one: over every NPU); ``None`` if it stays inside.
    """
    network = instance.network
    coll = instance.collectives[c]
    inside = set(stage)
    if network.flattened(coll.kind):
        return next((npu for npu in range(network.num_npus) if npu not in inside), None)
    rep = network.coordinates(instance.stage_npu(coll.stage))
    dims = set(instance.active_dims[c])
    for npu in range(network.num_npus):
        if npu not in inside and all(
            x == y or d in dims for d, (x, y) in enumerate(zip(network.coordinates(npu), rep))
        ):
            return npu
    return None


def _within_stage(instance: Instance, coll: Collective, stage: tuple[int, ...]) -> None:
    """An error unless a collective without a group reaches only its stage's NPUs from the stage's NPU
    (2.x runs it over every NPU, on the involved dimensions: those must not cross stages).
    """
    where = f"export-astra: {coll.id}"
    c = instance.collectives.index(coll)
    outside = beyond_stage(instance, c, stage)
    if outside is not None and instance.network.flattened(coll.kind):
        raise InputError(where, f"a flattened {coll.kind.value} runs over every NPU, beyond stage {coll.stage}'s")
    if outside is not None:
        raise InputError(
            where,
            f"runs over dimensions {list(instance.active_dims[c])}, which reach NPU {outside}, beyond stage "
            f"{coll.stage}'s NPUs (give it a group)",
        )


def _comm_size(instance: Instance, c: int) -> int:
    """A collective's ``comm_size`` in a trace: its bytes, an all-gather's each NPU's input."""
    return instance.collectives[c].size_bytes // gathered_over(instance, c)


def gathered_over(instance: Instance, c: int) -> int:
    """The NPUs collective ``c`` gathers over if it is an all-gather (its size over its ``comm_size``),
    else 1.
    """
    coll = instance.collectives[c]
    if coll.kind is not Kind.ALL_GATHER:
        return 1
    network = instance.network
    if coll.group:
        return len(coll.group)
    if network.flattened(coll.kind):
        return network.num_npus
    return math.prod(network.dimensions[d].size for d in instance.active_dims[c])


def _check_one_at_a_time(instance: Instance) -> None:
    """ASTRA-sim 2.x runs one collective or send at a time per NPU: a stage's must be chained by
    dependencies.
    """
    ancestors: dict[str, set[str]] = {}
    for index in instance.topological_order:  # a task after those it waits for, wherever they are listed
        task = instance.tasks[index]
        seen: set[str] = set()
        for dep in task.after:
            seen |= {dep.task, *ancestors.get(dep.task, set())}
        ancestors[task.id] = seen
    for stage in range(instance.num_stages):
        ids = [c.id for c in instance.collectives if c.stage == stage]
        for i, a in enumerate(ids):
            b = next((b for b in ids[i + 1 :] if a not in ancestors[b] and b not in ancestors[a]), None)
            if b is not None:
                raise InputError(
                    f"export-astra: {b}",
                    f"may run beside {a}: ASTRA-sim 2.x runs one collective or send at a time, so it would time "
                    "another case (--fit chains them in the order it runs them)",
                )
