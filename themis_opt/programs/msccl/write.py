"""A program written as MSCCL-IR XML (see :mod:`themis_opt.programs.msccl`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_folder, write_text
from themis_opt.instance import Kind
from themis_opt.programs.folder import write_description
from themis_opt.programs.ir import OpKind, Program
from themis_opt.programs.msccl.format import BUFFER, COLL, LIMITS, MAX_STEPS, XML
from themis_opt.programs.msccl.scope import group_of


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
        A padded program (:attr:`Program.pad`: an MSCCL step carries data alone), one whose
        reductions may run at once (an ``rrc`` step reads and writes the buffer itself) or one of a
        collective over part of the network (an MSCCL algorithm is its communicator's): write
        :func:`as_msccl` of it, ``time_ns`` that program's time.
    """
    if program.pad.any() or not program.exclusive_reductions or group_of(program) is not None:
        raise ValueError(
            "write_msccl: a padded program, one whose reductions may run at once or one over part of the "
            "network; write as_msccl(program), order_reductions(communicator(program.unpadded()))"
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
