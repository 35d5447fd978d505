"""A program as a folder ASTRA-sim 2.x runs as it is: its custom collectives (the Collective API).

The folder holds ``network.yml``, ``system.json`` (every collective's ``*-implementation-custom``
names the prefix ``program``; ``preferred-dataset-splits`` 1: 2.x stalls or fails otherwise),
``memory.json``, the workload ``workload.<r>.et`` (one collective node a rank: 2.x hands it to the
program whatever its size), the program ``program.<r>.et`` (a rank's sends, receives and
computations, with their dependencies), ``run.sh`` (the command line, run from the folder) and
``program.json``: the program's counts, its time as 2.x's custom path times it (``program_time_ns``)
and what the checker needs that a trace cannot say (each message's collective, chunk, phase and
units, in attributes named ``themis_*`` that 2.x does not read). A message's ``comm_size`` is its
data and its pad (:attr:`~themis_opt.programs.Program.pad`), ``themis_pad`` how many of its bytes pad it.

The whole program is one custom collective: the workload's one node per rank runs it, so several
collectives issued at once keep the schedule's interleaving, which one program per collective
would lose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_folder, read_bytes, write_bytes, write_text
from themis_opt.formats.astra.etcolumns import NODE_TYPES, Columns, decode_trace, encode_trace, read_nodes
from themis_opt.formats.astra.etfiles import attr_value
from themis_opt.instance import Kind, Topology
from themis_opt.programs.folder import read_description, topological, write_description
from themis_opt.programs.ir import COLUMNS, Link, OpKind, Program, physical_dims

PREFIX = "program"  # the custom collectives' files: program.<r>.et
WORKLOAD = "workload"  # the workload's: workload.<r>.et
TYPES = {Kind.ALL_REDUCE: 0, Kind.ALL_GATHER: 2, Kind.ALL_TO_ALL: 6, Kind.REDUCE_SCATTER: 7}  # Chakra's comm_type
CUSTOM_KEYS = (
    "all-reduce-implementation-custom",
    "reduce-scatter-implementation-custom",
    "all-gather-implementation-custom",
    "all-to-all-implementation-custom",
)
TOPOLOGY_NAMES = {Topology.RING: "Ring", Topology.SWITCH: "Switch", Topology.FULLY_CONNECTED: "FullyConnected"}
SEMANTICS = "themis"  # each message's collective, chunk, phase, unit set and whether it reduces (2.x reads it not)
PAD = "themis_pad"  # the bytes of comm_size that pad a message (Program.pad; none where absent)
RUN = """#!/bin/sh
# Runs this program in ASTRA-sim 2.x (congestion-unaware analytical backend); ASTRA_SIM names its binary.
cd "$(dirname "$0")" && exec "${ASTRA_SIM:-AstraSim_Analytical_Congestion_Unaware}" \\
  --workload-configuration=workload --system-configuration=system.json \\
  --network-configuration=network.yml --remote-memory-configuration=memory.json
"""


def write_program(
    program: Program, folder: str | Path, *, time_ns: int, extra: dict[str, Any] | None = None, force: bool = False
) -> list[Path]:
    """Write ``program`` as a folder ASTRA-sim 2.x runs (see the module's docstring), whole or not at all.

    ``time_ns`` is the program's time (:func:`~themis_opt.programs.time_program`); ``extra`` adds
    fields to ``program.json`` (the schedule's makespan, its method); ``force`` replaces an existing
    folder whole once the new one is written. Returns the files written.
    """
    folder = Path(folder)
    # the workload's one node names a collective (any: 2.x hands it to the program whatever it is)
    first = next((c for c in program.collectives if c.kind in TYPES), None)
    with atomic_folder(folder, force=force) as out:
        write_text(out / "network.yml", _network_yml(program.links))
        system = {
            "scheduling-policy": "FIFO",
            "endpoint-delay": 0,
            "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 1,
            **{key: [PREFIX] for key in CUSTOM_KEYS},
        }
        write_text(out / "system.json", json.dumps(system, indent=2) + "\n")
        write_text(out / "memory.json", json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}, indent=2) + "\n")
        write_text(out / "run.sh", RUN)
        (out / "run.sh").chmod(0o755)
        kind = first.kind if first is not None else Kind.ALL_REDUCE
        size = first.chunk_bytes[0] * len(first.chunk_bytes) if first is not None else 1
        none = np.zeros(0, dtype=np.int64)
        workload = encode_trace(
            Columns(
                np.array([NODE_TYPES["COMM_COLL_NODE"]]),
                np.zeros(2, dtype=np.int64),
                none,
                {"comm_type": np.array([TYPES[kind]]), "comm_size": np.array([size])},
                {},
                np.zeros(1, dtype=np.int64),
            )
        )
        for r in range(program.npus):
            write_bytes(out / f"{WORKLOAD}.{r}.et", workload)
            write_bytes(out / f"{PREFIX}.{r}.et", _trace(program, r))
        write_description(out, program, time_ns, extra)
    return sorted(folder.iterdir())


def _network_yml(carved: tuple[Link, ...]) -> str:
    """The network's own dimensions (the program's carved ones joined again)."""
    links = [carved[parts[0]] for parts in physical_dims(carved)]
    return (
        f"topology: [ {', '.join(TOPOLOGY_NAMES[link.topology] for link in links)} ]\n"
        f"npus_count: [ {', '.join(str(link.physical_size) for link in links)} ]\n"
        f"bandwidth: [ {', '.join(repr(link.bandwidth_gbps) for link in links)} ]  # GB/s per link\n"
        f"latency: [ {', '.join(repr(link.latency_ns) for link in links)} ]  # ns\n"
    )


def _trace(program: Program, rank: int) -> bytes:
    """Rank ``rank``'s trace: node ids are its rows' positions; an NPU without one computes for 0 ns
    (2.x refuses an empty trace).
    """
    rows = program.ops_of(rank)
    if not len(rows):
        none = np.zeros(0, dtype=np.int64)
        return encode_trace(
            Columns(
                np.array([NODE_TYPES["COMP_NODE"]]),
                np.zeros(2, dtype=np.int64),
                none,
                {},
                {},
                np.zeros(1, dtype=np.int64),
            )
        )
    part = slice(rows.start, rows.stop)
    kind = program.kind[part]
    send, recv = kind == OpKind.SEND, kind == OpKind.RECV
    message = send | recv
    starts = program.dep_start[rows.start : rows.stop + 1]
    semantics = np.stack(
        [
            program.collective[part],
            program.chunk[part],
            program.phase[part],
            program.units[part],
            program.reduce[part].astype(np.int64),
        ],
        axis=1,
    )
    semantics[~message] = -1
    # whole microseconds; 1 ns is a node of 0, which 2.x runs in 1 ns (export-astra --fit's shortest compute)
    durations = program.duration_ns[part]
    if np.any((durations % 1000 != 0) & (durations != 1)):
        raise InputError(
            f"program: NPU {rank}", "a computation of a fraction of a microsecond: ASTRA-sim 2.x times whole ones"
        )
    columns = Columns(
        type=np.select(
            [send, recv], [NODE_TYPES["COMM_SEND_NODE"], NODE_TYPES["COMM_RECV_NODE"]], NODE_TYPES["COMP_NODE"]
        ),
        dep_start=starts - starts[0],
        deps=program.deps[starts[0] : starts[-1]] - rows.start,
        attrs={
            "comm_dst": np.where(send, program.peer[part], -1),
            "comm_src": np.where(recv, program.peer[part], -1),
            "comm_size": np.where(message, program.size[part] + program.pad[part], -1),
            "comm_tag": np.where(message, program.tag[part], -1),
            PAD: np.where(program.pad[part] > 0, program.pad[part], -1),
        },
        lists={SEMANTICS: semantics},
        durations=durations // 1000,
    )
    return encode_trace(columns)


def read_program(folder: str | Path) -> Program:
    """The program of a folder :func:`write_program` wrote (or one written like it).

    Raises
    ------
    InputError
        A missing or unreadable file, a missing rank, a node without what a program needs, or
        dependencies that form a cycle at a rank, naming the file and node.
    """
    folder = Path(folder)
    description = read_description(folder)
    links, collectives, unit_sets = description.links, description.collectives, description.unit_sets
    npus, active = description.npus, description.active_phases
    tables: list[np.ndarray] = []
    dep_parts: list[np.ndarray] = []
    count_parts: list[np.ndarray] = []
    rank_start = [0]
    for r in range(npus):
        path = folder / f"{PREFIX}.{r}.et"
        if not path.is_file():
            raise InputError(str(path), f"missing: the program has {npus} NPUs")
        data = read_bytes(path)
        fast = decode_trace(data, str(path), ATTRS, {SEMANTICS: 5})
        base = rank_start[-1]
        if fast is not None and fast.type.size and _as_written(fast, data):
            tables.append(_fast_rows(fast))
            dep_parts.append(fast.deps + base)
            count_parts.append(np.diff(fast.dep_start))
            rank_start.append(base + len(fast.type))
            continue
        nodes = _in_order(read_nodes(path, data), str(path))
        local = {node.id: j for j, node in enumerate(nodes)}
        rows, waited, counts = [], [], []
        for node in nodes:
            rows.append(_row(node, f"{path} node {node.id}"))
            waits = [base + local[d] for d in (*node.data_deps, *node.ctrl_deps)]
            waited.extend(waits)
            counts.append(len(waits))
        tables.append(np.array(rows, dtype=np.int64).reshape(len(rows), len(COLUMNS)))
        dep_parts.append(np.array(waited, dtype=np.int64))
        count_parts.append(np.array(counts, dtype=np.int64))
        rank_start.append(base + len(nodes))
    dep_counts = np.concatenate(count_parts) if count_parts else np.zeros(0, dtype=np.int64)
    table = np.concatenate(tables) if tables else np.zeros((0, len(COLUMNS)), dtype=np.int64)
    deps = np.concatenate(dep_parts) if dep_parts else np.zeros(0, dtype=np.int64)
    described = (links, collectives, unit_sets, active, description.stages)
    return Program.from_table(described, np.array(rank_start), table, dep_counts, deps)


ATTRS = ("comm_dst", "comm_src", "comm_size", "comm_tag", PAD)


def _as_written(columns: Columns, data: bytes) -> bool:
    """Whether ``columns`` read from ``data`` is what encoding them writes: then the fast read is right."""
    return encode_trace(columns) == data


def _fast_rows(columns: Columns) -> np.ndarray:
    """A trace read at once as a program's rows (see :func:`_row`)."""
    kind = np.select(
        [columns.type == NODE_TYPES["COMM_SEND_NODE"], columns.type == NODE_TYPES["COMM_RECV_NODE"]],
        [int(OpKind.SEND), int(OpKind.RECV)],
        int(OpKind.COMP),
    )
    peer = np.where(kind == OpKind.SEND, columns.attrs["comm_dst"], columns.attrs["comm_src"])
    meaning = columns.lists[SEMANTICS]
    pad = np.maximum(columns.attrs[PAD], 0)
    table = np.column_stack(
        [
            kind,
            peer,
            columns.attrs["comm_size"] - pad,
            columns.attrs["comm_tag"],
            meaning[:, :4],
            meaning[:, 4],
            columns.durations * 1000,
            pad,
        ]
    )
    comp = kind == OpKind.COMP
    table[comp, 1:9] = [-1, 0, 0, -1, -1, -1, -1, 0]
    table[comp, 10] = 0
    return table


def _in_order(nodes: Any, where: str) -> list[Any]:
    """The nodes, each after what it waits for (a cycle, or a wait for no node, is an error)."""
    position = {node.id: j for j, node in enumerate(nodes)}
    if len(position) != len(nodes):
        raise InputError(where, "two nodes have the same id")
    waits: list[list[int]] = []
    for node in nodes:
        mine = []
        for d in (*node.data_deps, *node.ctrl_deps):
            if d not in position:
                raise InputError(f"{where} node {node.id}", f"waits for node {d}, which is not in the file")
            mine.append(position[d])
        waits.append(mine)
    return [nodes[j] for j in topological(waits, where, [node.id for node in nodes])]


def _row(node: Any, where: str) -> list[int]:
    """One node as a program's row: kind, peer, size, tag, collective, chunk, phase, units, reduce,
    duration, pad.
    """
    if node.type == NODE_TYPES["COMP_NODE"]:
        return [OpKind.COMP, -1, 0, 0, -1, -1, -1, -1, 0, node.duration_micros * 1000, 0]
    if node.type not in (NODE_TYPES["COMM_SEND_NODE"], NODE_TYPES["COMM_RECV_NODE"]):
        raise InputError(where, f"a node of type {node.type}: a program holds sends, receives and computations")
    send = node.type == NODE_TYPES["COMM_SEND_NODE"]
    found = {
        a.name: attr_value(a) for a in node.attr if a.WhichOneof("value") in ("int64_val", "int32_val", "int64_list")
    }
    values = []
    for name in ("comm_dst" if send else "comm_src", "comm_size", "comm_tag"):
        value = found.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputError(where, f"has no whole-number {name}")
        values.append(value)
    meaning = found.get(SEMANTICS)
    if not isinstance(meaning, tuple) or len(meaning) != 5:
        raise InputError(
            where,
            f"has no {SEMANTICS} list of 5 integers (collective, chunk, phase, units, reduce): not themis-opt's",
        )
    pad = found.get(PAD, 0)
    if not isinstance(pad, int) or isinstance(pad, bool) or not 0 <= pad < values[1]:
        raise InputError(where, f"a {PAD} of {pad!r}: the whole bytes of comm_size ({values[1]}) that pad its data")
    values[1] -= pad
    return [OpKind.SEND if send else OpKind.RECV, *values, *meaning[:4], int(bool(meaning[4])), 0, pad]
