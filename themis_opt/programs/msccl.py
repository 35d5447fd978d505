"""A program as MSCCL-IR XML, as the MSCCL executor (msccl-executor-nccl) parses and runs it.

One ``<algo>``: an all-reduce, reduce-scatter or all-gather over every GPU, in place
(``inplace="1" outofplace="0"``: the call passes one buffer). The buffer is cut in
``nchunksperloop`` = chunks x units pieces. An all-reduce's units are laid out so that every
message is one range (the dimensions in the order the chunk's reduce-scatter visits them, the first
the most significant digit; a dimension whose messages carry several blocks, halving-doubling's,
with its digit bit-reversed): any layout the GPUs share gives the same sums. A reduce-scatter's and
an all-gather's are where MSCCL expects GPU u's block: piece ``u * chunks + c`` is unit ``u`` of
chunk ``c``, so a message is as many steps as it has runs of pieces. Each GPU sends and receives
through thread blocks with one peer each: one ``tb`` per direction, peer and channel, steps in the
program's order (``s`` a send, ``r`` a receive that copies, ``rrc`` one that reduces; a message of
several runs, or of more pieces than a step moves, takes several steps in a row); a step that
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_folder, read_text, write_text
from themis_opt.instance import Kind
from themis_opt.programs.folder import Description, read_description, topological, write_description
from themis_opt.programs.ir import COLUMNS, OpKind, Program

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


COLL = {Kind.ALL_REDUCE: "allreduce", Kind.REDUCE_SCATTER: "reducescatter", Kind.ALL_GATHER: "allgather"}
BUFFER = {Kind.ALL_REDUCE: "i", Kind.REDUCE_SCATTER: "i", Kind.ALL_GATHER: "o"}  # in place: the one it runs in


@dataclass
class _Layout:
    """Where each unit of each chunk lies in the buffer: an all-reduce's ``place[chunk][unit]``, else
    MSCCL's blocks (``place`` is ``None``: unit u of chunk c at ``u * chunks + c``).
    """

    units: int
    chunks: int
    place: list[list[int]] | None
    found: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)

    def steps(self, mask: int) -> int:
        """Steps a message carrying the units ``mask`` takes: one a run of the buffer, each at most a
        step's pieces (an all-reduce's message is one run by construction).
        """
        if self.place is not None:
            return -(-mask.bit_count() // LIMITS["chunks a step moves"])
        if self.chunks > 1:
            return mask.bit_count()
        return len(_runs(list(_bits(mask))))

    def ranges(self, program: Program, op: int) -> list[tuple[int, int]]:
        """A message's steps as (first piece, how many), as many as :meth:`steps` says."""
        chunk, which = int(program.chunk[op]), int(program.units[op])
        runs = self.found.get((chunk, which))
        if runs is None:
            bits = _bits(program.unit_sets[which])
            if self.place is None:
                runs = _runs([u * self.chunks + chunk for u in bits])
            else:
                spots = sorted(self.place[chunk][u] for u in bits)
                if spots[-1] - spots[0] + 1 != len(spots):
                    raise InputError("msccl", f"a message of chunk {chunk} is not one range of the buffer: not written")
                runs = _runs(spots)
            self.found[(chunk, which)] = runs
        return runs


def _bits(mask: int) -> list[int]:
    """The set bits of ``mask``, lowest first."""
    found = []
    while mask:
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found


def _runs(spots: list[int]) -> list[tuple[int, int]]:
    """Ascending pieces as runs (first, how many), each at most a step's pieces."""
    runs: list[tuple[int, int]] = []
    most = LIMITS["chunks a step moves"]
    for spot in spots:
        if runs and runs[-1][0] + runs[-1][1] == spot and runs[-1][1] < most:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((spot, 1))
    return runs


def _layout(program: Program) -> _Layout:
    """The buffer's layout (see the module's docstring)."""
    (coll,) = program.collectives
    dims = list(coll.dims)
    sizes = [program.links[d].size for d in dims]
    units = int(np.prod(sizes))
    chunks = len(coll.chunk_bytes)
    if coll.kind is not Kind.ALL_REDUCE:  # unit u of chunk c is piece c of NPU u's block
        return _Layout(units, chunks, None)
    digits = np.arange(units)[:, None] // np.cumprod([1, *sizes[:-1]])[None, :] % np.array(sizes)[None, :]
    rank0 = program.ops_of(0)
    sends = [i for i in rank0 if program.kind[i] == OpKind.SEND]
    several = {int(program.message_dim[i]) for i in sends if _blocks(program, i, digits, dims) > 1}
    places = []
    for chunk in range(chunks):
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
        places.append((chunk * units + place).tolist())
    return _Layout(units, chunks, places)


def _blocks(program: Program, op: int, digits: np.ndarray, dims: list[int]) -> int:
    """How many coordinates of its dimension a message's units span."""
    mask = program.unit_sets[int(program.units[op])]
    units = [u for u in range(len(digits)) if mask >> u & 1]
    return len({int(digits[u, dims.index(int(program.message_dim[op]))]) for u in units})


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
    ValueError
        A padded program (:attr:`Program.pad`: an MSCCL step carries data alone) or one whose
        reductions may run at once (an ``rrc`` step reads and writes the buffer itself): ``time_ns``
        is the time of ``order_reductions(program.unpadded())``
        (:func:`~themis_opt.programs.races.order_reductions`), which to write instead.
    """
    if program.pad.any() or not program.exclusive_reductions:
        raise ValueError(
            "write_msccl: a padded program, or one whose reductions may run at once; write "
            "order_reductions(program.unpadded())"
        )
    if len(program.collectives) != 1:
        raise InputError("msccl", "programs are written for one collective (an MSCCL algo is one collective call)")
    (coll,) = program.collectives
    if coll.kind not in COLL:
        why = (
            "its blocks are relayed through other NPUs, which needs scratch buffers"
            if coll.kind is Kind.ALL_TO_ALL
            else "not a collective"
        )
        raise InputError("msccl", f"{coll.kind.value}: no MSCCL program is written for it ({why})")
    whole = tuple(d for d, link in enumerate(program.links) if link.size > 1)
    if coll.dims != whole:
        raise InputError("msccl", "a collective over part of the network: an MSCCL algo spans every GPU it names")
    if np.any((program.kind == OpKind.COMP) & (program.duration_ns > 0)):
        raise InputError("msccl", "a computation of some time (an issue time): MSCCL has none")
    layout = _layout(program)
    loop = layout.units * len(coll.chunk_bytes)
    _limit("chunks a loop", loop)
    buffers = (
        {"i_chunks": str(loop), "o_chunks": "0"}
        if BUFFER[coll.kind] == "i"
        else {"i_chunks": "0", "o_chunks": str(loop)}
    )
    algo = {
        "name": name,
        "proto": "Simple",
        "nchannels": "0",
        "nchunksperloop": str(loop),
        "ngpus": str(program.npus),
        "coll": COLL[coll.kind],
        "inplace": "1",
        "outofplace": "0",
        "minBytes": "0",
        "maxBytes": "0",
    }
    lines: list[str] = []
    channels = 0
    expanded = _message_deps(program)
    per_set = np.array([layout.steps(mask) for mask in program.unit_sets] or [0], dtype=np.int64)
    pieces = np.where(program.kind != OpKind.COMP, per_set[program.units], 0).tolist()  # steps a message takes

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
        lines.append(_tag("  ", "gpu", {"id": str(r), **buffers, "s_chunks": "0"}, ">"))
        elements = 1 + program.npus + len(keys)
        needed: set[tuple[int, int]] = set()
        steps_of: dict[tuple[int, int, int], list[dict[str, str]]] = {}
        for key in keys:
            rows = []
            for s, (op, dep, piece) in enumerate(blocks[key]):
                target = where[dep] if dep >= 0 else None
                if target is not None:
                    needed.add(target)
                rows.append(_step(program, op, s, target, layout, BUFFER[coll.kind], piece))
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
        write_description(
            out, program, time_ns, {**(extra or {}), "msccl": {"max_steps": max_steps, "units": layout.units}}
        )
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
    layout: _Layout,
    buffer: str,
    piece: int = 0,
) -> dict[str, str]:
    """A step's attributes, in msccl-tools' order (``hasdep`` set once every step is known): the
    ``piece``-th part of operation ``op``'s range, or a nop.
    """
    depid, deps = target if target is not None else (-1, -1)
    if op < 0:
        kind, src, dst, count, phase = "nop", "-1", "-1", 0, -1
    else:
        start, count = layout.ranges(program, op)[piece]
        kind = "s" if program.kind[op] == OpKind.SEND else "rrc" if program.reduce[op] else "r"
        src = str(start) if kind != "r" else "-1"
        dst = str(start) if kind != "s" else "-1"
        phase = int(program.phase[op])
    return {
        "s": str(s),
        "type": kind,
        "srcbuf": buffer,
        "srcoff": src,
        "dstbuf": buffer,
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
                node = _node(step, r, (send, recv, chan), layout, f"{at} step {s}", (sent, received))
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
