"""MSCCL-IR XML read back as a program, as the MSCCL executor reads it (see :mod:`themis_opt.programs.msccl`)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from themis_opt.errors import InputError
from themis_opt.fileio import read_text
from themis_opt.instance import Kind
from themis_opt.programs.folder import Description, read_description, topological
from themis_opt.programs.ir import COLUMNS, OpKind, Program
from themis_opt.programs.msccl.format import BUFFER, COLL, LIMITS, MAX_STEPS, STEP_KEYS, XML

BUFFERS = {"i", "o", "s"}  # the executor's buffers (input, output, scratch): it refuses any other name
PROTOCOLS = {"Simple", "LL", "LL128"}  # the executor's: it refuses any other


def read_msccl(folder: str | Path) -> Program:
    """The program of a folder :func:`write_msccl` wrote, as the executor runs it: each step an
    operation, waiting for the step before it in its thread block and for what it and the nops before
    it name; the k-th send on a connection matched to its k-th receive.

    A dependency is on a thread block's step counter as the executor keeps it (a step counts once, and
    so does each nop before it that carries a dependency; ``s`` is not read): it is met by the first
    step at or after that count that signals (``hasdep="1"``), and a wait no step meets is refused
    (the executor would wait for ever).

    Raises
    ------
    InputError
        Unreadable XML, a step the executor would refuse or that does not fit the buffer, a
        dependency no step meets, or a cycle, naming the GPU, thread block and step.
    """
    folder = Path(folder)
    description = read_description(folder)
    links = description.links
    try:
        units = int(description.fields["msccl"]["units"])
        max_steps = int(description.fields["msccl"].get("max_steps", MAX_STEPS))
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InputError(str(folder / "program.json"), "has no msccl.units: not an MSCCL program's folder") from None
    where = folder / XML
    try:
        root = ElementTree.fromstring(read_text(where))
    except ElementTree.ParseError as error:
        raise InputError(str(where), f"not XML: {error}") from None
    kind = description.collectives[0].kind if len(description.collectives) == 1 else None
    if kind not in COLL:
        raise InputError(str(folder / "program.json"), "must describe one all-reduce, reduce-scatter or all-gather")
    if root.tag != "algo" or root.get("coll") != COLL[kind]:
        raise InputError(str(where), f'not an MSCCL {kind.value} (<algo coll="{COLL[kind]}">)')
    layout = (units, len(description.collectives[0].chunk_bytes), kind)
    npus = len(links) and int(np.prod([link.size for link in links]))
    gpus = {int(g.get("id", "-1")): g for g in root.iter("gpu")}
    if sorted(gpus) != list(range(npus)) or units < 1:
        raise InputError(str(where), f"must hold GPUs 0 to {npus - 1}, one <gpu> each")
    _check_algo(root, where, npus, units * layout[1], kind)
    sent: dict[tuple[int, int, int], int] = defaultdict(int)
    received: dict[tuple[int, int, int], int] = defaultdict(int)
    per_rank = []
    for r in range(npus):
        nodes: list[dict[str, Any]] = []
        signals: dict[int, list[tuple[int, int]]] = defaultdict(list)  # per tb: (step count, node) of its signals
        blocks: set[int] = set()
        connections: set[tuple[int, int, int]] = set()  # (direction, peer, channel) a block holds
        for tb in gpus[r].iter("tb"):
            at = f"{where}: gpu {r} tb {tb.get('id')}"
            try:
                tid, send, recv, chan = (int(tb.get(k, "")) for k in ("id", "send", "recv", "chan"))
            except ValueError:
                raise InputError(at, "needs whole-number id, send, recv and chan") from None
            ends = {(0, send, chan)} if send >= 0 else set()
            ends |= {(1, recv, chan)} if recv >= 0 else set()
            if not all(peer == -1 or (0 <= peer < npus and peer != r) for peer in (send, recv)):
                raise InputError(at, f"send and recv must each be -1 or another of the GPUs 0 to {npus - 1}")
            if tid in blocks or ends & connections:
                # the executor refuses a repeated id; two blocks on one connection would share its order
                raise InputError(at, "repeats a thread block's id, or a peer and channel another block holds")
            blocks.add(tid)
            connections |= ends
            previous, count = -1, 0
            waiting: list[tuple[int, int]] = []
            for element in tb.iter("step"):
                step = {k: element.get(k, "") for k in (*STEP_KEYS, "themis_phase")}
                here = f"{at} step {step['s']}"
                try:
                    s, depid, deps, hasdep = (int(step[k]) for k in ("s", "depid", "deps", "hasdep"))
                except ValueError:
                    raise InputError(here, "needs whole-number s, depid, deps and hasdep") from None
                if not 0 <= s < max_steps or hasdep not in (0, 1) or not {step["srcbuf"], step["dstbuf"]} <= BUFFERS:
                    problem = f"s must be 0 to {max_steps - 1}, hasdep 0 or 1 and buffers i, o or s"
                    raise InputError(here, f"{problem}, as the executor takes")
                if depid >= 0:
                    waiting.append((depid, deps))
                if step["type"] == "nop":
                    continue
                if waiting and depid < 0:
                    raise InputError(here, "waits through nops but names no step itself: the executor ignores such XML")
                count += max(len(waiting) - 1, 0)
                node = _node(step, r, (send, recv, chan), layout, here, (sent, received))
                node["id"] = len(nodes)
                node["wait"] = ([previous] if previous >= 0 else [], waiting)
                if hasdep:
                    signals[tid].append((count, node["id"]))
                previous, count, waiting = node["id"], count + 1, []
                nodes.append(node)
        if blocks != set(range(len(blocks))):
            problem = "must number its thread blocks from 0 without a gap, as the executor does"
            raise InputError(f"{where}: gpu {r}", problem)
        for node in nodes:
            local, remote = node.pop("wait")
            for bid, k in remote:
                met = next((n for c, n in signals.get(bid, []) if c >= k), None)
                if met is None:
                    problem = (
                        f'a step waits for tb {bid} step {k}, which no step of that block with hasdep="1" meets '
                        "(the executor would wait for ever)"
                    )
                    raise InputError(f"{where}: gpu {r}", problem)
                local.append(met)
            node["deps"] = local
        order = topological([node["deps"] for node in nodes], f"{where}: gpu {r}")
        per_rank.append([nodes[j] for j in order])
    return _assemble(description, per_rank, units)


def _check_algo(root: ElementTree.Element, where: Path, npus: int, loop: int, kind: Kind) -> None:
    """The ``<algo>`` attributes the pieces' reading rests on, as the executor takes them: the buffer
    cut in ``loop`` pieces (``nchunksperloop``) and each GPU's in-place buffer holding them all,
    ``ngpus`` the program's (else the executor runs another algorithm), in place, a protocol it has.
    """
    buffer = "i_chunks" if BUFFER[kind] == "i" else "o_chunks"
    try:
        loaded = {k: int(root.get(k, "")) for k in ("nchunksperloop", "ngpus", "inplace")}
        held = [int(g.get(buffer, "")) for g in root.iter("gpu")]
    except ValueError:
        raise InputError(str(where), f"needs whole-number nchunksperloop, ngpus, inplace and {buffer}") from None
    expected = {"nchunksperloop": loop, "ngpus": npus, "inplace": 1}
    wrong = [f"{k}={v} (the program's: {expected[k]})" for k, v in loaded.items() if v != expected[k]]
    if wrong or min(held, default=loop) < loop or root.get("proto") not in PROTOCOLS:
        found = ", ".join(wrong) or f"{buffer} below {loop} or proto {root.get('proto')!r}"
        raise InputError(str(where), f"<algo> {found}: the executor would run another program than this one")


def _assemble(description: Description, per_rank: list[list[dict[str, Any]]], units: int) -> Program:
    """A program from each GPU's nodes (each listed after those it waits for)."""
    (coll,) = description.collectives
    masks: dict[int, int] = {}
    rows: list[list[int]] = []
    deps: list[int] = []
    counts: list[int] = []
    starts = [0]
    for nodes in per_rank:
        base = starts[-1]
        position = {node["id"]: base + j for j, node in enumerate(nodes)}
        for node in nodes:
            if node["chunk"] >= len(coll.chunk_bytes):
                raise InputError(
                    "msccl", f"a step moves chunk {node['chunk']}; the program has {len(coll.chunk_bytes)}"
                )
            unit = masks.setdefault(node["mask"], len(masks))
            size = coll.unit_bytes(node["chunk"], node["mask"], units)
            rows.append(
                [
                    node["kind"],
                    node["peer"],
                    size,
                    node["tag"],
                    0,
                    node["chunk"],
                    node["phase"],
                    unit,
                    int(node["reduce"]),
                    0,
                    0,
                ]
            )
            deps.extend(position[d] for d in node["deps"])
            counts.append(len(node["deps"]))
        starts.append(base + len(nodes))
    table = np.array(rows, dtype=np.int64).reshape(len(rows), len(COLUMNS))
    described = (description.links, description.collectives, tuple(masks), description.active_phases, ())
    edges = np.array(deps, dtype=np.int64)
    return Program.from_table(described, np.array(starts), table, np.array(counts), edges, exclusive_reductions=True)


def _node(
    step: dict[str, str],
    rank: int,
    block: tuple[int, int, int],
    layout: tuple[int, int, Kind],
    at: str,
    books: tuple[dict[tuple[int, int, int], int], dict[tuple[int, int, int], int]],
) -> dict[str, Any]:
    """One send or receive step as a program's node: what it carries read from the buffer's layout
    (an all-reduce's pieces of one chunk stand for its units in any order; a reduce-scatter's or
    all-gather's piece ``u * chunks + c`` is unit ``u`` of chunk ``c``, as MSCCL places NPU u's block).
    """
    send, recv, chan = block
    units, chunks, coll = layout
    kind = step["type"]
    if kind not in ("s", "r", "rrc"):
        raise InputError(at, f"a {kind!r} step: programs hold s, r, rrc and nop")
    if {step["srcbuf"], step["dstbuf"]} != {BUFFER[coll]}:
        raise InputError(
            at,
            f"moves data of buffers {step['srcbuf']!r} and {step['dstbuf']!r}: this in-place "
            f"{coll.value} runs in {BUFFER[coll]!r} alone",
        )
    try:
        offset = int(step["srcoff"] if kind == "s" else step["dstoff"])
        count, phase = int(step["cnt"]), int(step["themis_phase"])
    except ValueError:
        raise InputError(at, "needs whole-number offsets, cnt and themis_phase") from None
    if not 1 <= count <= LIMITS["chunks a step moves"] or offset < 0 or offset + count > units * chunks:
        raise InputError(
            at, f"moves {count} pieces from {offset}: not within the buffer's {units * chunks} in one step"
        )
    spots = range(offset, offset + count)
    if coll is Kind.ALL_REDUCE:
        chunk, mask = offset // units, ((1 << count) - 1) << (offset % units)
    else:
        chunk, mask = offset % chunks, sum(1 << (spot // chunks) for spot in spots)
    if any((spot // units if coll is Kind.ALL_REDUCE else spot % chunks) != chunk for spot in spots):
        raise InputError(at, f"moves pieces {offset} to {offset + count - 1}: not within one of the program's chunks")
    peer = send if kind == "s" else recv
    if peer < 0:
        raise InputError(at, f"a {'send' if kind == 's' else 'receive'} on a thread block without that peer")
    key = (rank, peer, chan) if kind == "s" else (peer, rank, chan)
    book = books[0] if kind == "s" else books[1]
    tag = chan << 20 | book[key]
    book[key] += 1
    return {
        "kind": OpKind.SEND if kind == "s" else OpKind.RECV,
        "peer": peer,
        "tag": tag,
        "chunk": chunk,
        "phase": phase,
        "mask": mask,
        "count": count,
        "reduce": kind == "rrc",
    }
