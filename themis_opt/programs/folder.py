"""What every program folder holds beside its program files: ``program.json``.

It states the program's counts and ``program_time_ns`` for a reader, and for the checker what the
program files of a runtime cannot say: the network (each dimension as messages are timed on it),
the collectives and their chunks' bytes, the unit sets messages carry, and how many phases a
dimension serves at once. Both writers (:mod:`~themis_opt.programs.astra`,
:mod:`~themis_opt.programs.msccl`) write it and both readers read it here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError
from themis_opt.fileio import read_text
from themis_opt.instance import Kind, Topology
from themis_opt.instance.core import topological as ordered
from themis_opt.programs.ir import OPERATION_BYTES, Link, Program, ProgramCollective, operations_fitting

FORMAT = "themis-opt-program"
VERSION = 2  # 2: a message's comm_size holds its pad (themis_pad) besides its data
READS = (1, 2)  # version 1's messages carry their data alone
DESCRIPTION = "program.json"


def describe(program: Program, time_ns: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``program.json``'s fields for ``program`` timed at ``time_ns`` (``extra``: more of them); the
    collectives' communicator groups once each (``groupings``, each collective naming its by index).
    """
    groupings = list(dict.fromkeys(c.groups for c in program.collectives if c.groups))
    return {
        "format": FORMAT,
        "version": VERSION,
        **program.summary(),
        "program_time_ns": time_ns,
        **(extra or {}),
        "links": [
            {
                "size": link.size,
                "topology": link.topology.value,
                "bandwidth_gbps": link.bandwidth_gbps,
                "latency_ns": link.latency_ns,
                **({"physical_size": link.physical_size, "stride": link.stride} if link.carved else {}),
            }
            for link in program.links
        ],
        "programs": [
            {
                "kind": c.kind.value,
                "dims": list(c.dims),
                "chunk_bytes": list(c.chunk_bytes),
                **({"flat": True} if c.flat else {}),
                **({"stage": c.stage} if c.stage else {}),
                **({"grouping": groupings.index(c.groups)} if c.groups else {}),
            }
            for c in program.collectives
        ],
        "active_phases": program.active_phases,
        **({"stages": [list(stage) for stage in program.stages]} if program.stages else {}),
        **({"groupings": [[list(g) for g in groups] for groups in groupings]} if groupings else {}),
        "unit_sets": [format(mask, "x") for mask in program.unit_sets],
    }


def write_description(out: Path, program: Program, time_ns: int, extra: dict[str, Any] | None = None) -> None:
    """Write ``program.json`` into the folder ``out``."""
    from themis_opt.fileio import write_text

    write_text(out / DESCRIPTION, json.dumps(describe(program, time_ns, extra), indent=1) + "\n")


@dataclass(frozen=True)
class Description:
    """A ``program.json`` as read: the fields a program is rebuilt from, and the whole file."""

    links: tuple[Link, ...]
    collectives: tuple[ProgramCollective, ...]
    unit_sets: tuple[int, ...]
    npus: int
    active_phases: int
    fields: dict[str, Any]
    stages: tuple[tuple[int, ...], ...] = ()


def read_description(folder: Path) -> Description:
    """The folder's ``program.json``.

    Raises
    ------
    InputError
        The folder or file is missing, not JSON, not this format or version, or lacks a field.
    """
    if not folder.is_dir():
        raise InputError(str(folder), "is not a folder")
    where = folder / DESCRIPTION
    try:
        meta = json.loads(read_text(where))
    except json.JSONDecodeError as error:
        raise InputError(str(where), f"not JSON: {error.msg} at line {error.lineno}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(str(where), f"not a {FORMAT} file")
    if meta.get("version") not in READS:
        raise InputError(
            str(where), f"version {meta.get('version')!r}: this themis-opt reads versions {', '.join(map(str, READS))}"
        )
    try:
        links = tuple(
            Link(
                int(x["size"]),
                Topology(x["topology"]),
                float(x["bandwidth_gbps"]),
                float(x["latency_ns"]),
                int(x.get("physical_size", x["size"])),
                int(x.get("stride", 1)),
            )
            for x in meta["links"]
        )
        groupings = [tuple(tuple(int(r) for r in g) for g in groups) for groups in meta.get("groupings", [])]
        collectives = tuple(
            ProgramCollective(
                Kind(x["kind"]),
                tuple(int(d) for d in x["dims"]),
                tuple(int(b) for b in x["chunk_bytes"]),
                _flag(x.get("flat", False)),
                int(x.get("stage", 0)),
                groupings[int(x["grouping"])] if "grouping" in x else (),
            )
            for x in meta["programs"]
        )
        unit_sets = tuple(int(text, 16) for text in meta["unit_sets"])
        stages = tuple(tuple(int(r) for r in stage) for stage in meta.get("stages", []))
        npus, active = int(meta["npus"]), int(meta["active_phases"])
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise InputError(str(where), f"not a program's description ({error})") from None
    nodes, most = meta.get("nodes"), operations_fitting()
    if isinstance(nodes, int) and most is not None and nodes > most:  # read, it would exhaust the memory
        raise InputError(
            str(where),
            f"states {nodes:,} nodes: at {OPERATION_BYTES} bytes each, more than the "
            f"{most * OPERATION_BYTES / 2**30:.1f} GiB of memory available",
        )
    return Description(links, collectives, unit_sets, npus, active, meta, stages)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"flat must be true or false, got {value!r}")
    return value


def topological(waits: list[list[int]], where: str, names: list[int] | None = None) -> Sequence[int]:
    """Positions of nodes in an order each comes after those it waits for (``waits``: positions).

    Raises
    ------
    InputError
        At ``where``, naming a node of a cycle (by ``names``, default its position).
    """
    order = ordered(waits)
    if len(order) < len(waits):
        placed = set(order)
        stuck = min(j for j in range(len(waits)) if j not in placed)
        name = names[stuck] if names is not None else stuck
        raise InputError(f"{where} node {name}", "its dependencies form a cycle (the program would deadlock)")
    return order
