"""Races: two operations of an NPU on the same units of a chunk, one of them writing them, that no
dependency orders.

The check's symbolic run proves what one order of the program computes; where two accesses race,
another run (a thread block ahead of another) may compute something else. So every two accesses that
conflict must be ordered by the program's dependencies: an NPU's own, or a chain through messages
(a receive comes after its send). A send reads the units it carries (an all-to-all's moves them: a
write); a receive writes them, and a reducing one reads them first. Where the program's reductions
commute (ASTRA-sim moves no data, and a runtime may sum what arrives in any order), two reducing
receives do not conflict; where each reads and writes the buffer itself (MSCCL's ``rrc`` step:
:attr:`~themis_opt.programs.Program.exclusive_reductions`), they must be ordered too, which
:func:`order_reductions` does.

A send and a later receive that copies into the same units (a reduce-scatter's send, then the
all-gather's result) are mostly ordered only through other NPUs, along the whole collective, where a
search would cost a pass over the program for each pair. The data orders them instead: where the
copy brings back the NPU's own contribution to those units and that send is the only one that took
it away, the copy's data cannot exist before the send ran (every other access being ordered, the
data moves only along dependencies and messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from themis_opt.errors import InputError
from themis_opt.instance import Kind
from themis_opt.programs.ir import OpKind, Program

NONE, READ, WRITE, REDUCE = -1, 0, 1, 2  # how an operation touches the units it carries
NAMES = {READ: "reads", WRITE: "writes", REDUCE: "reduces into"}


@dataclass
class Flow:
    """What the symbolic run saw of the data's flow (:func:`~themis_opt.programs.check_program` fills it).

    Parameters
    ----------
    blocks
        Per all-to-all message, the blocks it carries as {origin (a one-bit mask): units}: there a
        unit is where a block goes, and blocks from different NPUs to one unit are different data.
    own
        Per send and copying receive (not an all-to-all's), the units whose data holds its NPU's own
        contribution.
    resent
        Per copying receive, the units whose own contribution more than one send of its NPU had taken
        away before it ran.
    taken
        Per (NPU, collective, chunk), the units whose own contribution a send, and more than one send,
        took away so far in the run (what :meth:`received` reads).
    """

    blocks: dict[int, dict[int, int]] = field(default_factory=dict)
    own: dict[int, int] = field(default_factory=dict)
    resent: dict[int, int] = field(default_factory=dict)
    taken: dict[tuple[int, int, int], tuple[int, int]] = field(default_factory=dict)

    def sent(self, op: int, key: tuple[int, int, int], own: int) -> None:
        """Send ``op`` at (NPU, collective, chunk) ``key`` took away the own contribution to ``own``."""
        self.own[op] = own
        once, twice = self.taken.get(key, (0, 0))
        self.taken[key] = (once | own, twice | (once & own))

    def received(self, op: int, key: tuple[int, int, int], own: int) -> None:
        """Receive ``op`` at ``key`` copied in data holding the own contribution to ``own``."""
        self.own[op] = own
        self.resent[op] = self.taken.get(key, (0, 0))[1]


def accesses(program: Program) -> np.ndarray:
    """Per operation, how it touches its units: :data:`READ`, :data:`WRITE`, :data:`REDUCE` or
    :data:`NONE` (a computation, a pipeline stage's message: no collective's data).
    """
    kinds = [c.kind for c in program.collectives]
    moves = np.array([k is Kind.ALL_TO_ALL for k in kinds] or [False])
    data = np.array([k is not Kind.SEND for k in kinds] or [False])
    colls = np.clip(program.collective, 0, len(kinds) - 1)
    send, recv = program.kind == OpKind.SEND, program.kind == OpKind.RECV
    found = np.where(recv, np.where(program.reduce, REDUCE, WRITE), np.where(moves[colls], WRITE, READ))
    result: np.ndarray = np.where((send | recv) & data[colls], found, NONE)
    return result


def check_races(program: Program, order: np.ndarray, flow: Flow | None = None) -> None:
    """Raise where two accesses of an NPU conflict (see the module's docstring) and no dependency orders
    them; ``order`` is an order the program runs in (every operation after those it waits for), and
    ``flow`` what the symbolic run in that order saw (without it, each pair is searched).

    Raises
    ------
    InputError
        The first race found, naming the NPU, both nodes and what each does.
    ValueError
        An all-to-all without ``flow`` (:func:`~themis_opt.programs.check_program` passes it).
    """
    if flow is None:
        if any(c.kind is Kind.ALL_TO_ALL for c in program.collectives):
            raise ValueError("check_races: an all-to-all's blocks are the symbolic run's; call check_program")
        flow = Flow()
    position = np.empty(program.num_ops, dtype=np.int64)
    position[order] = np.arange(len(order))
    access = accesses(program)
    commuting = {READ} if program.exclusive_reductions else {READ, REDUCE}
    reach = _Reach(program, position, access)
    unit_sets, units = program.unit_sets, program.units.tolist()
    colls, chunks, kinds = program.collective.tolist(), program.chunk.tolist(), access.tolist()
    blocks, own = flow.blocks, flow.own
    conflicts = {
        k: [c for c in (READ, WRITE, REDUCE) if not (c == k and k in commuting)] for k in (READ, WRITE, REDUCE)
    }
    for r in range(program.npus):
        ops = np.arange(program.rank_start[r], program.rank_start[r + 1])  # np.array(range(0)) is of floats
        ops = ops[access[ops] != NONE]
        lo = reach.enter(r)
        # per (collective, chunk), its accesses so far as bits of rows, one set per class
        earlier: dict[tuple[int, int], list[int]] = {}
        for b in ops[np.argsort(position[ops], kind="stable")].tolist():
            key = (colls[b], chunks[b])
            so_far = earlier.setdefault(key, [0, 0, 0])
            # of the earlier accesses to the chunk that conflict with b's class, those b's own rows do
            # not order before it (few: a phase's messages at once)
            unordered = 0
            for cls in conflicts[kinds[b]]:
                unordered |= so_far[cls]
            unordered &= ~reach.ancestors[b - lo]
            so_far[kinds[b]] |= 1 << (b - lo)
            while unordered:
                low = unordered & -unordered
                unordered ^= low
                a = lo + low.bit_length() - 1
                if a in blocks or b in blocks:  # all-to-all: the same block (origin and units) or none
                    mine = blocks.get(b, {})
                    clash = any(held & mine.get(origin, 0) for origin, held in blocks.get(a, {}).items())
                else:
                    clash = bool(unit_sets[units[a]] & unit_sets[units[b]])
                if not clash:
                    continue
                if kinds[a] == READ and kinds[b] == WRITE and a in own and b in own:
                    overlap = unit_sets[units[a]] & unit_sets[units[b]]
                    mine = overlap & own[a] & own[b] & ~flow.resent[b]
                    if mine == overlap:  # the copy brings back what that send alone took away
                        continue
                if not reach.through_messages(a, b):
                    reach.race(a, b)


def order_reductions(program: Program) -> Program:
    """``program`` with each NPU's reducing receives into the same units of a chunk made to wait for one
    another in the order of its rows (each for the last one before it that nothing orders it after),
    and :attr:`~themis_opt.programs.Program.exclusive_reductions` set: as a runtime whose reductions
    read and write the buffer themselves (MSCCL's) must run them.
    """
    access = accesses(program).tolist()
    starts, deps = program.dep_start.tolist(), program.deps.tolist()
    unit_sets, units = program.unit_sets, program.units.tolist()
    colls, chunks = program.collective.tolist(), program.chunk.tolist()
    new_deps: list[int] = []
    counts: list[int] = []
    for r in range(program.npus):
        lo = int(program.rank_start[r])
        ancestors: list[int] = []
        earlier: dict[tuple[int, int], list[int]] = {}  # per (collective, chunk), its reductions so far
        for op in program.ops_of(r):
            mine = deps[starts[op] : starts[op + 1]]
            if access[op] == REDUCE:
                seen = _waits_for(ancestors, mine, lo)
                key = (colls[op], chunks[op])
                for a in reversed(earlier.get(key, [])):
                    if unit_sets[units[a]] & unit_sets[units[op]] and not seen >> (a - lo) & 1:
                        mine = [*mine, a]
                        seen |= _waits_for(ancestors, [a], lo)
                earlier.setdefault(key, []).append(op)
            ancestors.append(_waits_for(ancestors, mine, lo))
            new_deps.extend(mine)
            counts.append(len(mine))
    return replace(
        program,
        dep_start=np.r_[0, np.cumsum(counts, dtype=np.int64)],
        deps=np.array(new_deps, dtype=np.int64),
        exclusive_reductions=True,
    )


def _waits_for(ancestors: list[int], deps: list[int], lo: int) -> int:
    """The rows of an NPU (bits from its first row ``lo``) an operation waiting for ``deps`` comes after,
    given theirs (``ancestors``, per row so far).
    """
    seen = 0
    for d in deps:
        seen |= ancestors[d - lo] | 1 << (d - lo)
    return seen


class _Reach:
    """Whether an access of an NPU comes before another in every run: the NPU's rows' ancestors as
    bits (one NPU at a time), else a search back through dependencies and messages.
    """

    def __init__(self, program: Program, position: np.ndarray, access: np.ndarray) -> None:
        self.program = program
        self.position = position.tolist()
        self.starts, self.deps = program.dep_start.tolist(), program.deps.tolist()
        self.kinds, self.senders = program.kind.tolist(), program.sender.tolist()
        self.access = access
        self.lo = 0
        self.ancestors: list[int] = []

    def enter(self, rank: int) -> int:
        """Work out the ancestors of ``rank``'s rows among them (each waits only for earlier rows of its
        NPU); return its first row.
        """
        self.lo = lo = int(self.program.rank_start[rank])
        ancestors: list[int] = []
        for op in self.program.ops_of(rank):
            ancestors.append(_waits_for(ancestors, self.deps[self.starts[op] : self.starts[op + 1]], lo))
        self.ancestors = ancestors
        return lo

    def through_messages(self, a: int, b: int) -> bool:
        """Whether a chain of dependencies and messages leads from ``a`` to ``b``: back from ``b``, never
        past ``a``'s place in the order (nothing there leads to ``a``).
        """
        floor = self.position[a]
        stack, seen = [b], {b}
        while stack:
            x = stack.pop()
            found = self.deps[self.starts[x] : self.starts[x + 1]]
            if self.kinds[x] == OpKind.RECV:
                found = [*found, self.senders[x]]
            for y in found:
                if y == a:
                    return True
                if y not in seen and self.position[y] > floor:
                    seen.add(y)
                    stack.append(y)
        return False

    def race(self, a: int, b: int) -> None:
        """Raise the race of ``a`` and ``b``, in one line."""
        program, access = self.program, self.access
        rank = int(program.rank[b])
        base = int(program.rank_start[rank])
        raise InputError(
            f"program: NPU {rank} node {b - base}",
            f"{NAMES[int(access[b])]} units of chunk {int(program.chunk[b])} of collective "
            f"{int(program.collective[b])} that node {a - base} {NAMES[int(access[a])]}, and no dependency "
            "orders the two (a race: another run may compute something else)",
        )
