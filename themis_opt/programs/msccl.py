"""A program as MSCCL-IR XML, as the MSCCL executor (msccl-executor-nccl) parses and runs it.

One ``<algo>`` all-reduce, in place (``inplace="1" outofplace="0"``: the call must pass one buffer).
The buffer is cut in ``nchunksperloop`` = chunks x units pieces; each chunk's units are laid out so
that every message is one contiguous range (the dimensions in the order the chunk's reduce-scatter
visits them, the first the most significant digit; a dimension whose messages carry several
blocks, halving-doubling's, with its digit bit-reversed). Each GPU sends and receives through
thread blocks with one peer each: one ``tb`` per direction, peer and channel, steps in the
program's order (``s`` a send, ``r`` a receive that copies, ``rrc`` one that reduces); a step that
waits for several others is preceded by ``nop`` steps, one dependency each, as msccl-tools writes
them. Messages between two GPUs are spread over channels in order, the same way on both sides, so
the k-th send on a connection is the k-th receive. The executor's limits are checked and a program
beyond one is refused with the limit named (:data:`LIMITS`); ``max_steps`` follows the executor's
build-time ``MSCCL_MAX_NUM_STEPS``.

The folder holds ``program.xml`` and ``program.json`` (as the ASTRA-sim folder's: the network, the
chunks' bytes, what the checker needs); each step also carries ``themis_phase``, an attribute the
executor does not read.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_folder, read_text, write_text
from themis_opt.instance import Kind
from themis_opt.programs.folder import Description, read_description, topological, write_description
from themis_opt.programs.ir import OpKind, Program

MAX_STEPS = 64  # MSCCL_MAX_NUM_STEPS of the executor's default build: steps a thread block holds
LIMITS = {  # the executor's, and what it does at each (msccl_parser.cc, msccl_struct.h)
    "channels": 32,  # MAXCHANNELS
    "thread blocks a channel sends (or receives) with": 32,  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL
    "thread blocks a GPU depends on": 128,  # depid is an int8
    "chunks a step moves": 71,  # cnt < MSCCL_MAX_COUNT (72): a longer message takes several steps
    "chunks a loop": 32768,  # offsets are int16
    "XML elements a GPU reads": 4096,  # MAX_NODES: algo, every gpu, its tbs and steps
}
XML = "program.xml"
STEP_KEYS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


def _layout(program: Program) -> tuple[list[list[int]], int]:
    """Per chunk, each unit's place among the chunk's ``U`` pieces, and ``U``."""
    (coll,) = program.collectives
    dims = list(coll.dims)
    sizes = [program.links[d].size for d in dims]
    units = int(np.prod(sizes))
    digits = np.arange(units)[:, None] // np.cumprod([1, *sizes[:-1]])[None, :] % np.array(sizes)[None, :]
    rank0 = program.ops_of(0)
    sends = [i for i in rank0 if program.kind[i] == OpKind.SEND]
    several = {int(program.message_dim[i]) for i in sends if _blocks(program, i, digits, dims) > 1}
    places = []
    for chunk in range(len(coll.chunk_bytes)):
        mine = [i for i in sends if program.chunk[i] == chunk and not program.reduce[i]]
        order: list[int] = []
        for i in sorted(mine, key=lambda i: int(program.phase[i])):
            d = int(program.message_dim[i])
            if d not in order:
                order.append(d)
        order += [d for d in dims if d not in order]
        place = np.zeros(units, dtype=np.int64)
        for d in order:  # the first visited the most significant
            j = dims.index(d)
            value = digits[:, j]
            if d in several:
                bits = max(1, (sizes[j] - 1).bit_length())
                value = np.array([int(format(v, f"0{bits}b")[::-1], 2) for v in value])
            place = place * sizes[j] + value
        places.append(place.tolist())
    return places, units


def _blocks(program: Program, op: int, digits: np.ndarray, dims: list[int]) -> int:
    """How many coordinates of its dimension a message's units span."""
    mask = program.unit_sets[int(program.units[op])]
    units = [u for u in range(len(digits)) if mask >> u & 1]
    return len({int(digits[u, dims.index(int(program.message_dim[op]))]) for u in units})


def _range(program: Program, op: int, places: list[list[int]], units: int) -> tuple[int, int]:
    """A message's first piece in the buffer and how many: refused unless contiguous."""
    chunk = int(program.chunk[op])
    mask = program.unit_sets[int(program.units[op])]
    spots = sorted(places[chunk][u] for u in range(units) if mask >> u & 1)
    if spots[-1] - spots[0] + 1 != len(spots):
        raise InputError("msccl", f"a message of chunk {chunk} is not one range of the buffer: not written")
    return chunk * units + spots[0], len(spots)


def write_msccl(
    program: Program,
    folder: str | Path,
    *,
    time_ns: int,
    name: str = "themis_opt",
    max_steps: int = MAX_STEPS,
    extra: dict[str, Any] | None = None,
    force: bool = False,
) -> list[Path]:
    """Write ``program`` as MSCCL-IR XML (see the module's docstring) in a folder, whole or not at all.

    Raises
    ------
    InputError
        A program MSCCL cannot run (not one all-reduce, a computation of some time) or one over an
        executor's limit, naming it.
    """
    if len(program.collectives) != 1 or program.collectives[0].kind is not Kind.ALL_REDUCE:
        raise InputError("msccl", "programs are written for one all-reduce (an MSCCL algo is one collective)")
    if np.any((program.kind == OpKind.COMP) & (program.duration_ns > 0)):
        raise InputError("msccl", "a computation of some time (an issue time): MSCCL has none")
    places, units = _layout(program)
    loop = units * len(program.collectives[0].chunk_bytes)
    _limit("chunks a loop", loop)
    algo = {
        "name": name,
        "proto": "Simple",
        "nchannels": "0",
        "nchunksperloop": str(loop),
        "ngpus": str(program.npus),
        "coll": "allreduce",
        "inplace": "1",
        "outofplace": "0",
        "minBytes": "0",
        "maxBytes": "0",
    }
    lines: list[str] = []
    channels = 0
    expanded = _message_deps(program)
    pieces = [0] * program.num_ops  # steps a message takes: at most 71 pieces a step
    for op in np.flatnonzero(program.kind != OpKind.COMP).tolist():
        pieces[op] = -(-program.unit_sets[int(program.units[op])].bit_count() // LIMITS["chunks a step moves"])

    tbs = _layout_blocks(program, expanded, pieces, max_steps)
    for r in range(program.npus):
        blocks = tbs[r]
        keys = sorted(blocks)  # (send peer, recv peer, channel), as msccl-tools numbers them
        number = {key: n for n, key in enumerate(keys)}
        _limit("thread blocks a GPU depends on", len(keys))
        where: dict[int, tuple[int, int]] = {}
        for key in keys:
            for s, entry in enumerate(blocks[key]):
                if entry[0] >= 0:
                    where[entry[0]] = (number[key], s)  # its last piece: what waits for it waits for all
        for chan in {key[2] for key in keys}:
            for side in (0, 1):
                _limit(
                    "thread blocks a channel sends (or receives) with",
                    sum(1 for k in keys if k[2] == chan and k[side] >= 0),
                )
        lines.append(_tag("  ", "gpu", {"id": str(r), "i_chunks": str(loop), "o_chunks": "0", "s_chunks": "0"}, ">"))
        elements = 1 + program.npus + len(keys)
        needed: set[tuple[int, int]] = set()
        steps_of: dict[tuple[int, int, int], list[dict[str, str]]] = {}
        for key in keys:
            rows = []
            for s, (op, dep, piece) in enumerate(blocks[key]):
                target = where[dep] if dep >= 0 else None
                if target is not None:
                    needed.add(target)
                rows.append(_step(program, op, s, target, places, units, piece))
            steps_of[key] = rows
        for key in keys:
            tb = {"id": str(number[key]), "send": str(key[0]), "recv": str(key[1]), "chan": str(key[2])}
            lines.append(_tag("    ", "tb", tb, ">"))
            for s, attrs in enumerate(steps_of[key]):
                attrs["hasdep"] = "1" if (number[key], s) in needed else "0"
                lines.append(_tag("      ", "step", attrs, "/>"))
                elements += 1
            lines.append("    </tb>")
            channels = max(channels, key[2] + 1)
        lines.append("  </gpu>")
        _limit("XML elements a GPU reads", elements)
    _limit("channels", channels)
    algo["nchannels"] = str(channels)
    text = "\n".join([_tag("", "algo", algo, ">"), *lines, "</algo>", ""])
    with atomic_folder(folder, force=force) as out:
        write_text(out / XML, text)
        write_description(out, program, time_ns, {**(extra or {}), "msccl": {"max_steps": max_steps, "units": units}})
    return sorted(Path(folder).iterdir())


def _tag(indent: str, name: str, attrs: dict[str, str], end: str) -> str:
    """One element's opening line as the executor's reader takes it: one line, double quotes, one
    space between attributes, none before the end (the values are numbers and plain names).
    """
    return indent + "<" + " ".join([name, *(f'{k}="{v}"' for k, v in attrs.items())]) + end


def _layout_blocks(
    program: Program, deps: list[list[int]], pieces: list[int], max_steps: int
) -> list[dict[tuple[int, int, int], list[tuple[int, int, int]]]]:
    """Every GPU's thread blocks, with as many messages a channel as keep each within ``max_steps``.

    Each message's steps are first estimated (its pieces, and a nop for each dependency on another
    connection but one) to find the most messages a channel by bisection in numpy and to refuse at
    once what no layout meets; the layout is then made, with one message fewer a channel while a
    block still overflows (a dependency on the same connection but another channel is a nop more).
    """
    messages = np.flatnonzero(program.kind != OpKind.COMP)
    keys = np.stack([program.rank[messages], program.peer[messages], program.kind[messages]], axis=1)
    connections, which = np.unique(keys, axis=0, return_inverse=True)
    which = which.ravel()
    position = np.zeros(len(messages), dtype=np.int64)
    order = np.argsort(which, kind="stable")  # each connection's messages in row order
    starts = np.searchsorted(which[order], np.arange(len(connections)))
    position[order] = np.arange(len(messages)) - starts[which[order]]
    connection_of = np.full(program.num_ops, -1, dtype=np.int64)
    connection_of[messages] = which
    steps = np.array([pieces[op] for op in messages.tolist()], dtype=np.int64)
    for j, op in enumerate(messages.tolist()):
        others = sum(1 for d in deps[op] if connection_of[d] != which[j])
        steps[j] += max(0, others - 1)

    def estimate(per_channel: int) -> tuple[int, int, int]:
        block = which * (int(position.max(initial=0)) // per_channel + 1) + position // per_channel
        _, index = np.unique(block, return_inverse=True)
        sums = np.bincount(index.ravel(), weights=steps)
        rank_of_block = np.zeros(len(sums), dtype=np.int64)
        rank_of_block[index.ravel()] = connections[which, 0]
        per_rank = np.bincount(rank_of_block, minlength=program.npus)
        elements = np.bincount(program.rank[messages], weights=steps, minlength=program.npus) + per_rank
        return int(sums.max(initial=0)), int(per_rank.max(initial=0)), int(elements.max(initial=0))

    low, high, best = 1, max_steps, 0
    while low <= high:
        middle = (low + high) // 2
        if estimate(middle)[0] <= max_steps:
            best, low = middle, middle + 1
        else:
            high = middle - 1
    if not best:
        raise InputError("msccl", f"a thread block needs over {max_steps} steps (--max-steps raises it)")
    _, blocks, elements = estimate(best)
    _limit("thread blocks a GPU depends on", blocks)
    _limit("XML elements a GPU reads", elements + 1 + program.npus)
    for per_channel in range(best, 0, -1):
        found = [_thread_blocks(program, r, deps, per_channel, pieces) for r in range(program.npus)]
        if max((len(s) for b in found for s in b.values()), default=0) <= max_steps:
            return found
    raise InputError("msccl", f"a thread block needs over {max_steps} steps (--max-steps raises it)")


def _limit(what: str, value: int) -> None:
    if value > LIMITS[what]:
        raise InputError("msccl", f"{value} {what}: the MSCCL executor takes at most {LIMITS[what]}")


def _message_deps(program: Program) -> list[list[int]]:
    """Each operation's dependencies on messages, joins (computations of 0 ns) looked through."""
    deps: list[list[int]] = []
    comp = program.kind == OpKind.COMP
    for op in range(program.num_ops):
        found: list[int] = []
        for d in program.deps_of(op).tolist():
            found.extend(deps[d] if comp[d] else [d])
        deps.append(sorted(set(found)))
    return deps


def _thread_blocks(
    program: Program, rank: int, deps: list[list[int]], per_channel: int, pieces: list[int]
) -> dict[tuple[int, int, int], list[tuple[int, int, int]]]:
    """Rank ``rank``'s thread blocks: (send peer, recv peer, channel) -> its steps as (operation or -1 for
    a nop, the operation it waits for or -1, which piece of the operation); the k-th message to or from
    a peer on channel k // per_channel, a message of more pieces than a step moves in several steps.
    """
    blocks: dict[tuple[int, int, int], list[tuple[int, int, int]]] = defaultdict(list)
    count: dict[tuple[int, int], int] = defaultdict(int)
    tb_of: dict[int, tuple[int, int, int]] = {}
    for op in program.ops_of(rank):
        kind = program.kind[op]
        if kind == OpKind.COMP:
            continue
        peer = int(program.peer[op])
        send = kind == OpKind.SEND
        n = count[(peer, int(send))]
        count[(peer, int(send))] += 1
        key = (peer, -1, n // per_channel) if send else (-1, peer, n // per_channel)
        tb_of[op] = key
        others = [d for d in deps[op] if tb_of.get(d) != key]
        for d in others[:-1]:
            blocks[key].append((-1, d, 0))
        blocks[key].append((op, others[-1] if others else -1, 0))
        blocks[key] += [(op, -1, piece) for piece in range(1, pieces[op])]  # after the first, in order
    return blocks


def _step(
    program: Program,
    op: int,
    s: int,
    target: tuple[int, int] | None,
    places: list[list[int]],
    units: int,
    piece: int = 0,
) -> dict[str, str]:
    """A step's attributes, in msccl-tools' order (``hasdep`` set once every step is known): the
    ``piece``-th part of operation ``op``'s range, or a nop.
    """
    depid, deps = target if target is not None else (-1, -1)
    if op < 0:
        kind, src, dst, count, phase = "nop", "-1", "-1", 0, -1
    else:
        first, whole = _range(program, op, places, units)
        most = LIMITS["chunks a step moves"]
        start, count = first + piece * most, min(most, whole - piece * most)
        kind = "s" if program.kind[op] == OpKind.SEND else "rrc" if program.reduce[op] else "r"
        src = str(start) if kind != "r" else "-1"
        dst = str(start) if kind != "s" else "-1"
        phase = int(program.phase[op])
    return {
        "s": str(s),
        "type": kind,
        "srcbuf": "i",
        "srcoff": src,
        "dstbuf": "i" if kind in ("r", "rrc") else "o",
        "dstoff": dst,
        "cnt": str(count),
        "depid": str(depid),
        "deps": str(deps),
        "hasdep": "0",
        "themis_phase": str(phase),
    }


def read_msccl(folder: str | Path) -> Program:
    """The program of a folder :func:`write_msccl` wrote: each step an operation (a nop's dependency
    moved onto the step it precedes), each waiting for the step before it in its thread block too;
    the k-th send on a connection matched to its k-th receive.

    Raises
    ------
    InputError
        Unreadable XML, a step the executor would refuse or that does not fit the buffer, a
        dependency on no step, or a cycle, naming the GPU, thread block and step.
    """
    folder = Path(folder)
    description = read_description(folder)
    links = description.links
    try:
        units = int(description.fields["msccl"]["units"])
    except (KeyError, TypeError, ValueError):
        raise InputError(str(folder / "program.json"), "has no msccl.units: not an MSCCL program's folder") from None
    where = folder / XML
    try:
        root = ElementTree.fromstring(read_text(where))
    except ElementTree.ParseError as error:
        raise InputError(str(where), f"not XML: {error}") from None
    if root.tag != "algo" or root.get("coll") != "allreduce":
        raise InputError(str(where), 'not an MSCCL all-reduce (<algo coll="allreduce">)')
    npus = len(links) and int(np.prod([link.size for link in links]))
    gpus = {int(g.get("id", "-1")): g for g in root.iter("gpu")}
    if sorted(gpus) != list(range(npus)) or units < 1:
        raise InputError(str(where), f"must hold GPUs 0 to {npus - 1}, one <gpu> each")
    sent: dict[tuple[int, int, int], int] = defaultdict(int)
    received: dict[tuple[int, int, int], int] = defaultdict(int)
    per_rank = []
    for r in range(npus):
        nodes: list[dict[str, Any]] = []
        index: dict[tuple[int, int], int] = {}
        for tb in gpus[r].iter("tb"):
            at = f"{where}: gpu {r} tb {tb.get('id')}"
            try:
                tid, send, recv, chan = (int(tb.get(k, "")) for k in ("id", "send", "recv", "chan"))
            except ValueError:
                raise InputError(at, "needs whole-number id, send, recv and chan") from None
            previous = -1
            waiting: list[tuple[int, int]] = []
            for element in tb.iter("step"):
                try:
                    step = {k: element.get(k, "") for k in (*STEP_KEYS, "themis_phase")}
                    s, depid, deps = int(step["s"]), int(step["depid"]), int(step["deps"])
                except ValueError:
                    raise InputError(f"{at} step {element.get('s')}", "needs whole-number s, depid and deps") from None
                if depid >= 0:
                    waiting.append((depid, deps))
                if step["type"] == "nop":
                    continue
                node = _node(step, r, send, recv, chan, units, f"{at} step {s}", sent, received)
                node["id"] = len(nodes)
                node["wait"] = ([previous] if previous >= 0 else [], waiting)
                index[(tid, s)] = node["id"]
                previous = node["id"]
                waiting = []
                nodes.append(node)
        for node in nodes:
            local, remote = node.pop("wait")
            for target in remote:
                if target not in index:
                    problem = f"a step waits for tb {target[0]} step {target[1]}, which is no send or receive"
                    raise InputError(f"{where}: gpu {r}", problem)
                local.append(index[target])
            node["deps"] = local
        order = topological([node["deps"] for node in nodes], f"{where}: gpu {r}")
        per_rank.append([nodes[j] for j in order])
    return _assemble(description, per_rank, units)


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
                ]
            )
            deps.extend(position[d] for d in node["deps"])
            counts.append(len(node["deps"]))
        starts.append(base + len(nodes))
    table = np.array(rows, dtype=np.int64).reshape(len(rows), 10)
    described = (description.links, description.collectives, tuple(masks), description.active_phases)
    return Program.from_table(described, np.array(starts), table, np.array(counts), np.array(deps, dtype=np.int64))


def _node(
    step: dict[str, str],
    rank: int,
    send: int,
    recv: int,
    chan: int,
    units: int,
    at: str,
    sent: dict[tuple[int, int, int], int],
    received: dict[tuple[int, int, int], int],
) -> dict[str, Any]:
    """One send or receive step as a program's node."""
    kind = step["type"]
    if kind not in ("s", "r", "rrc"):
        raise InputError(at, f"a {kind!r} step: programs hold s, r, rrc and nop")
    try:
        offset = int(step["srcoff"] if kind == "s" else step["dstoff"])
        count, phase = int(step["cnt"]), int(step["themis_phase"])
    except ValueError:
        raise InputError(at, "needs whole-number offsets, cnt and themis_phase") from None
    if count < 1 or offset < 0 or offset // units != (offset + count - 1) // units:
        raise InputError(at, f"moves chunks {offset} to {offset + count - 1}: not within one of the program's chunks")
    peer = send if kind == "s" else recv
    if peer < 0:
        raise InputError(at, f"a {'send' if kind == 's' else 'receive'} on a thread block without that peer")
    key = (rank, peer, chan) if kind == "s" else (peer, rank, chan)
    book = sent if kind == "s" else received
    tag = chan << 20 | book[key]
    book[key] += 1
    first = offset % units
    mask = ((1 << count) - 1) << first
    return {
        "kind": OpKind.SEND if kind == "s" else OpKind.RECV,
        "peer": peer,
        "tag": tag,
        "chunk": offset // units,
        "phase": phase,
        "mask": mask,
        "count": count,
        "reduce": kind == "rrc",
    }
