"""ASTRA-sim input files that run the same case as an instance.

1.0: ``network.json``, ``system.txt`` and a MICRO ``workload.txt`` (one
collective over every dimension, issued at 0, no compute tasks); 2.x:
``network.yml``, ``system.json``, one Chakra trace per NPU
(``workload.<npu>.et``: a compute node per compute task, a collective node
per collective, a send and a receive node per send, the dependencies; the
``[chakra]`` extra writes them) and, with groups, ``comm_groups.json``.
Anything ASTRA-sim cannot express is an error; :func:`fit_astra_2` makes an
instance expressible by 2.x where rounding, cutting and chaining can.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError, counted
from themis_opt.fileio import check_apart, write_text
from themis_opt.formats.astra.chakra import COLLECTIVE_TYPES, TraceNode, write_trace
from themis_opt.formats.astra.files import IMPLEMENTATION_KEYS, TOPOLOGIES, WORKLOAD_TYPES
from themis_opt.formats.astra.groups import move, offset
from themis_opt.formats.astra.v2 import NO_ALL_TO_ALL, SUPPORTED, SystemV2
from themis_opt.instance import (
    COLLECTIVE_KINDS,
    Algorithm,
    AllReducePhases,
    Collective,
    Compute,
    Dimension,
    Instance,
    Kind,
    Network,
    Topology,
)


def _expressible(instance: Instance) -> Collective:
    """The one collective of an instance ASTRA-sim can run as it stands, or an error saying why not."""
    if instance.computes or len(instance.collectives) != 1:
        raise InputError(
            "export-astra",
            "ASTRA-sim runs one collective from a MICRO workload here; this instance has "
            f"{counted(len(instance.collectives), 'collective')} and {counted(len(instance.computes), 'compute task')}",
        )
    coll = instance.collectives[0]
    if coll.issue_ns != 0 or coll.after:
        raise InputError("export-astra", "the collective must be issued at 0 with no dependencies")
    if coll.dimensions is not None and sorted(coll.dimensions) != list(range(instance.network.num_dims)):
        raise InputError("export-astra", "the collective must run over every dimension")
    if coll.kind is Kind.ALL_GATHER and coll.size_bytes % instance.network.num_npus:
        raise InputError("export-astra", "an all-gather's size must split evenly into NPU shards")
    return coll


def _kept_settings(instance: Instance, version: int) -> None:
    """An error for a setting of the instance the files of ``version`` would drop: ASTRA-sim would
    time another case, silently.
    """
    network = instance.network
    delay = network.endpoint_delay_ns
    if delay != int(delay):
        raise InputError("export-astra", f"ASTRA-sim's endpoint-delay is whole cycles (ns), got {delay}")
    if network.phase_delay_ns not in (0.0, delay):  # ASTRA-sim ends each phase with one endpoint delay more
        raise InputError(
            "export-astra",
            f"phase_delay_ns {network.phase_delay_ns:g}: ASTRA-sim's phase delay is its endpoint-delay ({delay:g})",
        )
    if version == 1 and network.reduction_gbps is not None and network.reduction_gbps < FREE_REDUCTIONS_GBPS:
        raise InputError("export-astra", "reduction_gbps: ASTRA-sim 1.0 reduces for free (2.x's local-mem-bw)")
    overhead = next((d for d in network.dimensions if d.message_overhead_ns), None)
    if version == 2 and overhead is not None:
        raise InputError(
            "export-astra",
            f"dimension {overhead.name}: message_overhead_ns {overhead.message_overhead_ns:g}: ASTRA-sim 2.x's "
            "analytical network has link latencies only",
        )


def _cut_as_astra_1(coll: Collective, files: dict[str, str]) -> None:
    """An error unless ASTRA-sim 1.0 cuts the collective of ``files`` as the instance cuts ``coll``
    (read back by themis_opt's importer, which cuts as ASTRA-sim 1.0 does).
    """
    from themis_opt.formats.astra.importer import import_astra

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for file, text in files.items():
            (folder / file).write_text(text, encoding="utf-8")
        again = import_astra(folder / "network.json", folder / "system.txt", workload=folder / "workload.txt")
    cut = next(c for c in again.collectives)
    if (cut.chunks, cut.chunk_bytes, cut.size_bytes) != (coll.chunks, coll.chunk_bytes, coll.size_bytes):
        raise InputError(
            f"export-astra: {coll.id}",
            f"{coll.chunks} chunks of {coll.chunk_bytes} bytes: ASTRA-sim 1.0 cuts it into {cut.chunks} of "
            f"{cut.chunk_bytes}",
        )


def _links(dim: Dimension) -> int:
    """How many links ASTRA-sim 1.0 would give the dimension, if they split its bandwidth exactly."""
    preferred = {Topology.RING: 2, Topology.FULLY_CONNECTED: dim.size - 1, Topology.SWITCH: 1}[dim.topology]
    preferred = max(1, preferred)
    return preferred if (dim.bandwidth_gbps / preferred) * preferred == dim.bandwidth_gbps else 1


def _name_of(algorithm: Algorithm) -> str:
    return algorithm.spec.astra


def _implementation(dims: tuple[Dimension, ...], kind: Kind) -> str:
    """A kind's 1.0 implementation list (a flattened algorithm is the whole list)."""
    first = dims[0].algorithm_for(kind)
    if first.flattened:
        return _name_of(first)
    return "_".join(_name_of(d.algorithm_for(kind)) for d in dims)


FREE_REDUCTIONS_GBPS = 1e9  # local-mem-bw for free reductions: below a GB no message's takes 1 ns
# what 2.x reads, but no halving-doubling all-to-all (2.x exits on one)
V2_SUPPORTED = {
    kind: tuple(a for a in SUPPORTED[kind] if kind is not Kind.ALL_TO_ALL or a not in NO_ALL_TO_ALL)
    for kind in COLLECTIVE_KINDS
}


def _topology_name(topology: Topology) -> str:
    return next(k for k, v in TOPOLOGIES.items() if v is topology)


def _version_2(instance: Instance) -> tuple[dict[str, str], dict[str, list[TraceNode]]]:
    """ASTRA-sim 2.x's network YAML, system JSON, one Chakra trace per NPU (``workload.<npu>.et``) and,
    when a collective runs in a group, the communicator-group file (``comm_groups.json``).
    """
    network = instance.network
    dims = network.dimensions
    per_link = []
    for d in dims:
        links = d.size - 1 if d.topology is Topology.FULLY_CONNECTED else 1
        share = d.bandwidth_gbps / links
        if share * links != d.bandwidth_gbps:
            raise InputError(
                "export-astra",
                f"dimension {d.name}: {d.bandwidth_gbps} GB/s does not split exactly over {links} links",
            )
        per_link.append(share)
    network_yml = (
        f"topology: [ {', '.join(_topology_name(d.topology) for d in dims)} ]\n"
        f"npus_count: [ {', '.join(str(d.size) for d in dims)} ]\n"
        f"bandwidth: [ {', '.join(repr(b) for b in per_link)} ]  # GB/s per link\n"
        f"latency: [ {', '.join(repr(d.latency_ns) for d in dims)} ]  # ns\n"
    )
    _check_algorithms(network)
    splits = _splits(instance)
    system = _system_json(network, splits)
    members = stage_members(instance)
    for task in instance.tasks:
        where = f"export-astra: {task.id}"
        if task.issue_ns:
            raise InputError(where, "an issue time: ASTRA-sim 2.x starts a node when its dependencies end")
        if any(dep.lag_ns for dep in task.after):
            raise InputError(where, "a dependency with a lag: ASTRA-sim 2.x has none")
    _check_one_at_a_time(instance)
    traces, groups = _traces(instance, members)
    files = {"network.yml": network_yml, "system.json": json.dumps(system, indent=2) + "\n"}
    if groups:
        lines = ",\n".join(f'  "{n}": {json.dumps(list(group))}' for group, n in groups.items())
        files[GROUP_FILE] = "{\n" + lines + "\n}\n"
    return files, traces


GROUP_FILE = "comm_groups.json"  # the communicator groups, for 2.x's --comm-group-configuration


def _check_algorithms(network: Network) -> None:
    """An error for an algorithm 2.x's files cannot name, or a flattened one charged as 1.0 charges it."""
    dims = network.dimensions
    for kind in COLLECTIVE_KINDS:
        for d in dims:
            if d.algorithm_for(kind) not in V2_SUPPORTED[kind]:
                raise InputError(
                    "export-astra",
                    f"dimension {d.name}: {d.algorithm_for(kind).value} is not written for ASTRA-sim 2.x",
                )
        if network.flattened(kind) and not network.innermost_charge:
            raise InputError(
                "export-astra",
                f"{dims[0].algorithm_for(kind).value} with messages charged on the outermost dimension (ASTRA-sim "
                "1.0's rule): 2.x charges the innermost (set innermost_charge)",
            )


def _system_json(network: Network, splits: int) -> dict[str, object]:
    """The 2.x system file of ``network`` with ``splits`` chunks a collective."""
    return {
        "scheduling-policy": "LIFO",
        "endpoint-delay": int(network.endpoint_delay_ns),
        "active-chunks-per-dimension": network.active_chunks,
        "preferred-dataset-splits": splits,
        **{key: [_name_of(a) for a in _v2_list(network, kind)] for kind, key in IMPLEMENTATION_KEYS.items()},
        "collective-optimization": "baseline"
        if network.all_reduce_phases is AllReducePhases.PER_DIMENSION
        else "localBWAware",
        # no local memory bandwidth: reductions free (a bandwidth no message's bytes reach 1 ns of)
        "local-mem-bw": network.reduction_gbps if network.reduction_gbps is not None else FREE_REDUCTIONS_GBPS,
    }


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
    network = instance.network
    where = f"export-astra: {coll.id}"
    inside = set(stage)
    if not inside.issuperset(coll.group):
        raise InputError(where, f"group {list(coll.group)} reaches beyond stage {coll.stage}'s NPUs")
    named: dict[int, tuple[int, ...]] = dict.fromkeys(coll.group, coll.group)
    for npu in stage:
        if npu in named:
            continue
        moved = (move(network, coll.group, offset(network, first, npu)) for first in coll.group)
        tile = next((m for m in moved if all(x in inside and x not in named for x in m)), None)
        if tile is None:
            raise InputError(
                where,
                f"group {list(coll.group)} moved to NPU {npu} overlaps another NPU's group: its moves do not split "
                f"stage {coll.stage}'s NPUs into groups (ASTRA-sim 2.x needs every NPU of a group to name it)",
            )
        named.update(dict.fromkeys(tile, tile))
    return {npu: groups.setdefault(tile, len(groups) + 1) for npu, tile in named.items()}


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
            if other.stage == s:
                deps.append(ids[dep.task])
            elif isinstance(other, Collective) and other.kind is Kind.SEND and receiver[other.id] == s:
                deps.append(received[other.id])
                if other.id not in posted:  # the receive, just before the first node that waits for it
                    stages[s].append(_receive(instance, other, received[other.id], tag[other.id], s))
                    posted.add(other.id)
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
            if stage_of[task.group[1]] == s:
                raise InputError(where, f"a send to NPU {task.group[1]}, of its own stage: not a pipeline stage's")
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
    send reaches the stage's NPU.
    """
    network = instance.network
    src, dst = send.group
    rep = instance.stage_npu(stage)
    source = move(network, (src,), offset(network, dst, rep))[0]  # the NPU whose send reaches the stage's NPU
    attrs = (("comm_tag", tag), ("comm_size", send.size_bytes))
    node = TraceNode(number, f"recv.{send.id}", "COMM_RECV_NODE", (), (), 0, attrs)
    return _Node(node, peer=("comm_src", source))


def _within_stage(instance: Instance, coll: Collective, stage: tuple[int, ...]) -> None:
    """An error unless a collective without a group reaches only its stage's NPUs from the stage's NPU
    (2.x runs it over every NPU, on the involved dimensions: those must not cross stages).
    """
    network = instance.network
    where = f"export-astra: {coll.id}"
    if network.flattened(coll.kind):
        raise InputError(where, f"a flattened {coll.kind.value} runs over every NPU, beyond stage {coll.stage}'s")
    c = instance.collectives.index(coll)
    rep = network.coordinates(instance.stage_npu(coll.stage))
    reached = [
        npu
        for npu in range(network.num_npus)
        if all(x == y or d in instance.active_dims[c] for d, (x, y) in enumerate(zip(network.coordinates(npu), rep)))
    ]
    outside = next((npu for npu in reached if npu not in stage), None)
    if outside is not None:
        raise InputError(
            where,
            f"runs over dimensions {list(instance.active_dims[c])}, which reach NPU {outside}, beyond stage "
            f"{coll.stage}'s NPUs (give it a group)",
        )


def _splits(instance: Instance) -> int:
    """The one preferred-dataset-splits that cuts every collective as the instance does."""
    from themis_opt.formats.astra.v2 import collective

    network = instance.network
    colls = [c for c in instance.collectives if c.kind is not Kind.SEND]
    if not colls:
        return 1
    splits = colls[0].chunks
    system = _settings(network, splits)
    for c, coll in enumerate(instance.collectives):
        if coll.kind is Kind.SEND:
            continue
        involved = None if coll.group else tuple(d in instance.active_dims[c] for d in range(network.num_dims))
        again, _ = collective(
            coll.kind, _comm_size(instance, c), involved, network, system, f"export-astra: {coll.id}", group=coll.group
        )
        if (again.chunks, again.chunk_bytes, again.size_bytes) != (coll.chunks, coll.chunk_bytes, coll.size_bytes):
            raise InputError(
                f"export-astra: {coll.id}",
                f"{coll.chunks} chunks of {coll.chunk_bytes} bytes: ASTRA-sim 2.x cuts every collective into "
                f"size // {splits} byte chunks, each full size (--fit cuts them so)",
            )
    return splits


def _settings(network: Network, splits: int) -> SystemV2:
    """What a 2.x system file written for ``network`` with ``splits`` sets, as the import reads it."""
    implementations: dict[Kind, tuple[Algorithm, ...]] = {kind: _v2_list(network, kind) for kind in COLLECTIVE_KINDS}
    return SystemV2(
        splits,
        network.endpoint_delay_ns,
        network.active_chunks,
        network.all_reduce_phases,
        "LIFO",
        implementations,
        None,
        None,
    )


def _v2_list(network: Network, kind: Kind) -> tuple[Algorithm, ...]:
    """A kind's 2.x implementation list: one algorithm per dimension, or a flattened one alone."""
    if network.flattened(kind):
        return (network.dimensions[0].algorithm_for(kind),)
    return tuple(d.algorithm_for(kind) for d in network.dimensions)


def _comm_size(instance: Instance, c: int) -> int:
    """A collective's ``comm_size`` in a trace: its bytes, an all-gather's each NPU's input."""
    coll = instance.collectives[c]
    if coll.kind is not Kind.ALL_GATHER:
        return coll.size_bytes
    network = instance.network
    if coll.group:
        return coll.size_bytes // len(coll.group)
    if network.flattened(coll.kind):
        return coll.size_bytes // network.num_npus
    return coll.size_bytes // math.prod(network.dimensions[d].size for d in instance.active_dims[c])


def _check_one_at_a_time(instance: Instance) -> None:
    """ASTRA-sim 2.x runs one collective or send at a time per NPU: a stage's must be chained by
    dependencies.
    """
    ancestors: dict[str, set[str]] = {}
    for task in instance.tasks:
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


def fit_astra_2(instance: Instance) -> tuple[Instance, list[str]]:
    """The instance made expressible by ASTRA-sim 2.x, and notes saying what changed.

    * every compute time rounded to whole microseconds (2.x replays
      ``duration_micros``; one that rounds to 0 takes 1 ns, as 2.x runs a
      node of 0);
    * every collective cut as 2.x cuts it, with one split count for all (the
      chunk count most of them have): ``size // splits`` bytes a chunk, each
      full size, inflated to the NPU count where smaller (all-gathers aside);
    * every stage's collectives and sends chained in the order 2.x runs them,
      one at a time per NPU (:func:`~themis_opt.formats.astra.chakra.serialised`).

    What :func:`export_astra` refuses for other reasons (issue times, lags, a
    message overhead...) is left as it is.
    """
    from themis_opt.formats.astra.chakra import serialised
    from themis_opt.formats.astra.v2 import collective

    network = instance.network
    counts = Counter(c.chunks for c in instance.collectives if c.kind is not Kind.SEND)
    splits = max(counts, key=lambda k: counts[k]) if counts else 1  # ties: the first met
    system = _settings(network, splits)
    tasks: list[Collective | Compute] = []
    rounded = recut = 0
    for task in instance.tasks:
        if isinstance(task, Compute):
            micros = round(task.duration_ns / 1000.0)
            duration = 1000.0 * micros if micros else 1.0
            rounded += duration != task.duration_ns
            tasks.append(dataclasses.replace(task, duration_ns=duration))
            continue
        if task.kind is Kind.SEND:
            tasks.append(task)
            continue
        c = instance.collectives.index(task)
        involved = None if task.group else tuple(d in instance.active_dims[c] for d in range(network.num_dims))
        cut, _ = collective(
            task.kind,
            _comm_size(instance, c),
            involved,
            network,
            system,
            f"export-astra: {task.id}",
            id=task.id,
            after=task.after,
            group=task.group,
        )
        cut = dataclasses.replace(cut, issue_ns=task.issue_ns, priority=task.priority, stage=task.stage)
        recut += (cut.chunks, cut.chunk_bytes, cut.size_bytes) != (task.chunks, task.chunk_bytes, task.size_bytes)
        tasks.append(cut)
    chained, _ = serialised(tasks, network, instance.stage_npus)
    linked = sum(a.after != b.after for a, b in zip(tasks, chained))
    notes = [
        f"{counted(rounded, 'compute time')} rounded to whole microseconds",
        f"{counted(recut, 'collective')} cut as ASTRA-sim 2.x cuts them (size // {splits} bytes a chunk)",
        f"{counted(linked, 'collective or send', 'collectives or sends')} chained in the order ASTRA-sim 2.x runs "
        "them (one at a time per NPU)",
    ]
    fitted = Instance(network, chained, instance.name, instance.metadata, instance.stage_npus)
    return fitted, notes


def export_astra(
    instance: Instance, version: int, out: str | Path, method: str | None = None, keep: Sequence[str | Path] = ()
) -> list[Path]:
    """Write ASTRA-sim input files for ``instance`` into folder ``out``; returns the files written.

    Files of ``keep`` (the inputs) must not be among them: that is an error,
    before any file is written. Each file is written atomically.

    ``method`` (``baseline`` or ``themis``, default themis) chooses the
    inter-dimension scheduling a 1.0 system file asks for; Themis is written
    with SCF, the baseline with FIFO, as themis_opt's defaults. ASTRA-sim
    2.x always runs the baseline: a method is an error there.

    For 2.x every NPU gets a trace: its pipeline stage's tasks
    (:func:`stage_members` says which NPUs run which stage), each group and
    the other NPU of each send or receive moved to it; a collective in a
    group names its group in ``pg_name``, and the groups go to
    ``comm_groups.json`` (2.x's ``--comm-group-configuration``); a send is a
    ``COMM_SEND_NODE`` and the receiving stage gets its ``COMM_RECV_NODE``,
    which the tasks that wait for the send wait for. An instance 2.x would
    time otherwise (collectives that may run beside each other, compute
    times not whole microseconds, chunks it would not cut) is an error;
    :func:`fit_astra_2` makes one expressible.
    """
    if version == 2 and method is not None:
        raise InputError("method", "ASTRA-sim 2.x always runs the baseline (it reads no scheduling keys)")
    method = method or "themis"
    if method not in ("baseline", "themis"):
        raise InputError("method", f"must be baseline or themis, got {method!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    dims = instance.network.dimensions
    if any(d.carved for d in dims):
        raise InputError("export-astra", "a dimension carved from another is ASTRA-sim's own split: not written")
    if version == 1 and (instance.num_stages > 1 or instance.has_sends):
        raise InputError("export-astra", "pipeline stages and sends are ASTRA-sim 2.x's: write them with --version 2")
    _kept_settings(instance, version)
    delay = int(instance.network.endpoint_delay_ns)
    optimization = "baseline" if instance.network.all_reduce_phases is AllReducePhases.PER_DIMENSION else "localBWAware"
    intra = "SCF" if method == "themis" else "FIFO"
    files: dict[str, str] = {}
    traces: dict[str, list[TraceNode]] = {}
    if version == 1:
        coll = _expressible(instance)
        links = [_links(d) for d in dims]
        network = {
            "topology-name": "Hierarchical",
            "topologies-per-dim": [_topology_name(d.topology) for d in dims],
            "dimension-type": ["N"] * len(dims),
            "dimensions-count": len(dims),
            "units-count": [d.size for d in dims],
            "links-count": links,
            "link-latency": [d.latency_ns for d in dims],
            "link-bandwidth": [d.bandwidth_gbps / k for d, k in zip(dims, links)],
            "nic-latency": [d.message_overhead_ns / 2 for d in dims],  # paid twice per message
            "router-latency": [0] * len(dims),
            "hbm-latency": [500] * len(dims),
            "hbm-bandwidth": [370] * len(dims),
            "hbm-scale": [0] * len(dims),
        }
        files["network.json"] = json.dumps(network, indent=2) + "\n"
        files["system.txt"] = "".join(
            f"{k}: {v}\n"
            for k, v in (
                ("scheduling-policy", "LIFO"),
                ("endpoint-delay", delay),
                ("active-chunks-per-dimension", instance.network.active_chunks),
                ("preferred-dataset-splits", coll.chunks),
                ("boost-mode", 0),
                *((key, _implementation(dims, kind)) for kind, key in IMPLEMENTATION_KEYS.items()),
                ("collective-optimization", optimization),
                ("inter-dimension-scheduling", method),
                ("intra-dimension-scheduling", intra),
            )
        )
        size = coll.size_bytes // instance.network.num_npus if coll.kind is Kind.ALL_GATHER else coll.size_bytes
        # compute times of one cycle: ASTRA-sim 1.0 aborts on an event at the current time (zero cycles)
        files["workload.txt"] = f"MICRO\n1\n{coll.id} -1 1 NONE 0 1 NONE 0 1 {WORKLOAD_TYPES[coll.kind]} {size} 1\n"
        _cut_as_astra_1(coll, files)
    elif version == 2:
        files, traces = _version_2(instance)
    else:
        raise InputError("version", f"must be 1 or 2, got {version!r}")
    check_apart([("--out", out / file) for file in [*files, *traces]], keep)
    written = []
    for file, text in files.items():
        write_text(out / file, text)
        written.append(out / file)
    for file, nodes in traces.items():
        write_trace(out / file, nodes)
        written.append(out / file)
    return written
