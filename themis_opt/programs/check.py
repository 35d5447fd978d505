"""A program checked: it runs to its end, keeps each dimension to its phases one at a time, and
leaves every NPU with exactly its collective's result.

The check executes the program symbolically, in an order it can run in: every piece of a chunk an
NPU holds carries the set of NPUs whose data it sums (a bit mask over the group's positions). A
reduce adds disjoint sets (a set met twice is data reduced twice), a copy replaces what was held.
At the end, per NPU and chunk: an all-reduce holds every unit summed over the whole group; a
reduce-scatter its own unit summed so; an all-gather every unit as its owner gave it; an all-to-all
its own unit from every NPU (there a unit is the block bound for that NPU, and a send moves it). Messages must
match one to one (:attr:`~themis_opt.programs.Program.sender`), the program must not deadlock
(:func:`~themis_opt.programs.time_program`), and no two accesses of an NPU to the same units may race
(:mod:`~themis_opt.programs.races`), so that every run computes what the symbolic one did; ASTRA-sim
itself accepts a mismatch and leaves an NPU unfinished without a word, so this check is what makes a
program safe to hand on.
"""

from __future__ import annotations

import heapq

import numpy as np

from themis_opt.errors import InputError, counted
from themis_opt.instance import Kind
from themis_opt.programs.ir import OpKind, Program
from themis_opt.programs.races import Flow, check_races
from themis_opt.programs.timing import Timing, send_ns, time_program

Held = dict[int, int]  # contributors (bit mask of group positions) -> units holding that sum (bit mask)


def check_program(program: Program) -> Timing:
    """Check ``program`` (see the module's docstring) and return its timing.

    Raises
    ------
    InputError
        The first problem found, naming the NPU and node.
    """
    timing = time_program(program)
    _check_dimensions(program, timing)
    flow = _check_data(program, timing.order)
    check_races(program, timing.order, flow)
    return timing


def positions(program: Program, collective: int) -> np.ndarray:
    """Each NPU's position in its group of ``collective``: its coordinates on the collective's dimensions,
    or its place in its communicator group's ring (``-1`` outside every group).
    """
    coll = program.collectives[collective]
    if coll.groups:
        ring = np.full(program.npus, -1, dtype=np.int64)
        for group in coll.groups:
            ring[list(group)] = np.arange(len(group))
        return ring
    dims = coll.dims
    coords = program.coordinates[:, list(dims)]
    sizes = np.array([program.links[d].size for d in dims])
    place: np.ndarray = (coords * np.cumprod(np.r_[1, sizes[:-1]])[None, :]).sum(axis=1)
    return place


def _where(program: Program, op: int) -> str:
    rank = int(program.rank[op])
    return f"program: NPU {rank} node {op - int(program.rank_start[rank])}"


def _check_dimensions(program: Program, timing: Timing) -> None:
    """At every NPU, a dimension serves at most ``active_phases`` phases at once under the timing:
    a phase serves its dimension from its first send's start to its last operation's end (a send to
    another stage serves the sending stage's alone: its receipt waits there as long as it must).
    """
    sends = np.array([c.kind is Kind.SEND for c in program.collectives] or [False])
    colls = np.clip(program.collective, 0, len(sends) - 1)
    messages = np.flatnonzero((program.kind == OpKind.SEND) | ((program.kind == OpKind.RECV) & ~sends[colls]))
    if not len(messages):
        return
    keys = np.stack(
        [
            program.rank[messages],
            program.served_dim[messages],
            program.collective[messages],
            program.chunk[messages],
            program.phase[messages],
        ],
        axis=1,
    )
    order = np.lexsort(keys.T[::-1])
    keys, ops = keys[order], messages[order]
    new = np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)]
    heads = np.flatnonzero(new)
    sends = program.kind[ops] == OpKind.SEND
    begin = np.where(sends, timing.end_ns[ops] - send_ns(program)[ops], np.iinfo(np.int64).max)
    first = np.minimum.reduceat(begin, heads)
    first = np.where(first == np.iinfo(np.int64).max, np.minimum.reduceat(timing.end_ns[ops], heads), first)
    last = np.maximum.reduceat(timing.end_ns[ops], heads)
    rank_dim = keys[heads, :2]
    by_time = np.lexsort((last, first, rank_dim[:, 1], rank_dim[:, 0]))
    lag = program.active_phases
    clashing = _crowded(by_time, rank_dim, first, last, lag)
    if clashing is not None:
        g = clashing
        op = int(ops[heads[g]])
        raise InputError(
            _where(program, op),
            f"starts a phase on dimension {int(rank_dim[g, 1])} at {int(first[g])} ns while "
            f"{counted(lag, 'phase')} before it still {'runs' if lag == 1 else 'run'} there (ASTRA-sim would "
            "time them as free)",
        )


def _crowded(by_time: np.ndarray, rank_dim: np.ndarray, first: np.ndarray, last: np.ndarray, lag: int) -> int | None:
    """The first phase (by start, per NPU and dimension) that starts while ``lag`` others still run there."""
    if lag == 1:  # one at a time: each must start after the one before it ends
        later, earlier = by_time[1:], by_time[:-1]
        same = np.all(rank_dim[later] == rank_dim[earlier], axis=1)
        clash = same & (first[later] < last[earlier])
        if not np.any(clash):
            return None
        return int(later[np.argmax(clash)])
    running: list[int] = []  # the ends of the phases running at one NPU and dimension
    previous = None
    for g in by_time.tolist():
        key = (int(rank_dim[g, 0]), int(rank_dim[g, 1]))
        if key != previous:
            running, previous = [], key
        start = int(first[g])
        while running and running[0] <= start:
            heapq.heappop(running)
        if len(running) >= lag:
            return int(g)
        heapq.heappush(running, int(last[g]))
    return None


def _check_data(program: Program, order: np.ndarray) -> Flow:
    """Execute the program symbolically (see the module's docstring); return what it saw of the data's
    flow (:class:`~themis_opt.programs.races.Flow`, for the check of races).
    """
    colls = program.collectives
    units = [program.group_units(c) for c in range(len(colls))]
    places = [positions(program, c).tolist() for c in range(len(colls))]
    state: dict[tuple[int, int, int], Held] = {}
    in_flight: dict[int, Held] = {}
    flow = Flow()
    kind, rank, coll_of, chunk_of = program.kind, program.rank, program.collective, program.chunk
    unit_sets, unit_of, reduce_of, sender = program.unit_sets, program.units, program.reduce, program.sender
    kinds, ranks, colls_of, chunks = kind.tolist(), rank.tolist(), coll_of.tolist(), chunk_of.tolist()
    units_of, reduces, senders = unit_of.tolist(), reduce_of.tolist(), sender.tolist()
    comp, send = int(OpKind.COMP), int(OpKind.SEND)
    for op in order.tolist():
        what = kinds[op]
        if what == comp:
            continue
        r, c = ranks[op], colls_of[op]
        if colls[c].kind is Kind.SEND:  # a stage's message: matched, no collective's data
            continue
        key = (r, c, chunks[op])
        held = state.get(key)
        if held is None:
            if places[c][r] < 0:
                raise InputError(_where(program, op), f"a message of collective {c} at an NPU outside its groups")
            held = state[key] = _start(colls[c].kind, places[c][r], units[c])
        carried = unit_sets[units_of[op]]
        moves = colls[c].kind is Kind.ALL_TO_ALL  # its blocks leave the sender, from every NPU it holds them of
        if what == send:
            piece = {m: u & carried for m, u in held.items() if u & carried}
            if _union(piece) != carried:
                raise InputError(_where(program, op), "sends data it does not hold")
            if moves:
                _drop(held, carried)
                flow.blocks[op] = piece
            else:
                flow.sent(op, key, _own(piece, places[c][r]))
            in_flight[op] = piece
            continue
        source = senders[op]
        piece = in_flight.pop(source)
        if chunks[source] != key[2] or colls_of[source] != c or unit_sets[units_of[source]] != carried:
            raise InputError(_where(program, op), "receives into other pieces than its send carries")
        if reduces[op]:
            _reduce(held, piece, program, op)
        elif moves:
            flow.blocks[op] = piece
            for m, u in piece.items():
                if held.get(m, 0) & u:
                    raise InputError(_where(program, op), "receives an NPU's block it holds already")
                held[m] = held.get(m, 0) | u
        else:
            flow.received(op, key, _own(piece, places[c][r]))
            _drop(held, carried)
            for m, u in piece.items():
                held[m] = held.get(m, 0) | u
    for c, coll in enumerate(colls):
        if coll.kind is Kind.SEND:
            continue
        whole = (1 << units[c]) - 1
        for r in program.ranks_of(c):
            for k in range(len(coll.chunk_bytes)):
                held = state.get((r, c, k)) or _start(coll.kind, places[c][r], units[c])
                if not _complete(coll.kind, held, places[c][r], whole):
                    raise InputError(
                        f"program: NPU {r}",
                        f"ends chunk {k} of collective {c} ({coll.kind.value}) without its result",
                    )
    return flow


def _start(kind: Kind, place: int, count: int) -> Held:
    """What an NPU at ``place`` of its group holds of a chunk before the collective."""
    own = 1 << place
    return {own: own} if kind is Kind.ALL_GATHER else {own: (1 << count) - 1}


def _own(piece: Held, place: int) -> int:
    """The units of ``piece`` whose data holds the contribution of the NPU at ``place``."""
    own = 0
    for m, u in piece.items():
        if m >> place & 1:
            own |= u
    return own


def _drop(held: Held, units: int) -> None:
    """Forget ``units`` (a bit mask) wherever they are held."""
    for m in [m for m, u in held.items() if u & units]:
        held[m] &= ~units
        if not held[m]:
            del held[m]


def _union(held: Held) -> int:
    total = 0
    for u in held.values():
        total |= u
    return total


def _reduce(held: Held, piece: Held, program: Program, op: int) -> None:
    """Sum a received piece into what is held: each unit must be held, and no NPU's data summed twice."""
    for m, u in piece.items():
        covered = 0
        for hm in [hm for hm, hu in held.items() if hu & u]:
            if hm & m:
                raise InputError(_where(program, op), "reduces an NPU's data into a sum that holds it already")
            hu = held[hm]
            both = hu & u
            covered |= both
            if hu & ~u:
                held[hm] = hu & ~u
            else:
                del held[hm]
            held[hm | m] = held.get(hm | m, 0) | both
        if covered != u:
            raise InputError(_where(program, op), "reduces into data its NPU does not hold")


def _complete(kind: Kind, held: Held, place: int, whole: int) -> bool:
    """Whether ``held`` is the collective's result at the NPU at ``place``."""
    match kind:
        case Kind.ALL_REDUCE:
            return held.get(whole, 0) == whole
        case Kind.REDUCE_SCATTER:
            return bool(held.get(whole, 0) >> place & 1)
        case Kind.ALL_TO_ALL:  # its own unit from every NPU, each as that NPU gave it
            return all(held.get(1 << s, 0) >> place & 1 for s in range(whole.bit_length()))
        case _:
            return sum(u & m for m, u in held.items() if m.bit_count() == 1) == whole
