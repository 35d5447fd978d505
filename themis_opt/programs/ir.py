"""The program of a schedule: every NPU's sends, receives and computations, and what each carries.

A :class:`Program` is to the program writers what a compiler's IR is to its back ends: built once
from a schedule (:func:`~themis_opt.programs.program_of`), checked (:func:`~themis_opt.programs.check_program`),
timed (:func:`~themis_opt.programs.time_program`) and written as ASTRA-sim 2.x custom collectives
(:mod:`themis_opt.programs.astra`); a writer reads it back into the same type.

Its operations are columns (one numpy array a field, one row an operation) because a program of a
64-chunk all-reduce on 512 NPUs holds over a million of them. Rank ``r``'s operations are the rows
``rank_start[r]:rank_start[r + 1]``, each depending only on earlier rows of the same rank (the
order is topological, so no rank's dependencies have a cycle).

What an operation carries is a set of *units*: a collective's data cut into one unit per member NPU
(unit ``u`` of a chunk is the part a reduce-scatter leaves on ``members[u]``, the part an all-gather
starts from there). ``unit_sets`` holds the distinct sets as bit masks, and ``units`` indexes it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cached_property
from typing import Any

import numpy as np

from themis_opt.budget import available_memory
from themis_opt.errors import InputError
from themis_opt.instance import Kind, Topology

# the collectives a program is written for
PROGRAM_KINDS = (Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.ALL_TO_ALL, Kind.SEND)
SEND_HOPS = {Topology.SWITCH: 2, Topology.FULLY_CONNECTED: 1}  # a ring's: the shorter way round

# what a command that builds or reads a program holds at its peak per operation (the program, its
# check, its files): a program whose operations would take more than the memory available is refused
# before they do (measured: changelog)
OPERATION_BYTES = 1000


def operations_fitting() -> int | None:
    """How many operations a program may hold in the memory available, at :data:`OPERATION_BYTES`
    each; ``None`` where the memory available is not known.
    """
    memory = available_memory()
    return None if memory is None else memory // OPERATION_BYTES


class OpKind(IntEnum):
    """What one operation of a program does."""

    SEND = 0
    RECV = 1
    COMP = 2


@dataclass(frozen=True)
class Link:
    """One dimension as a program's messages are timed on it (ASTRA-sim 2.x's network file).

    Parameters
    ----------
    size
        NPUs along it.
    topology
        Ring, switch or fully connected (how many hops a message takes).
    bandwidth_gbps
        One message's bandwidth, GB/s (2^30 B): a link's.
    latency_ns
        Latency of one hop, ns.
    physical_size
        NPUs of the network's dimension this one is carved from (``None``: ``size``); the
        dimensions carved from one follow each other, innermost part first, and tile it.
    stride
        Positions on that dimension between neighbours of this one (the sizes of the parts before it).
    """

    size: int
    topology: Topology
    bandwidth_gbps: float
    latency_ns: float
    physical_size: int = None  # type: ignore[assignment]  # resolved below
    stride: int = 1

    def __post_init__(self) -> None:
        if self.size < 1 or self.bandwidth_gbps <= 0 or self.latency_ns < 0:
            raise InputError("program.links", f"a dimension of {self.size} NPUs at {self.bandwidth_gbps} GB/s")
        physical = self.size if self.physical_size is None else self.physical_size
        object.__setattr__(self, "physical_size", physical)
        if self.stride < 1 or physical % (self.size * self.stride):
            raise InputError(
                "program.links", f"a part of {self.size} NPUs, {self.stride} apart, of a dimension of {physical}"
            )

    @property
    def carved(self) -> bool:
        """Whether it is part of a larger dimension of the network."""
        return self.physical_size != self.size

    def hops(self, apart: int) -> int:
        """Hops between two NPUs ``apart`` positions apart on this dimension's network dimension."""
        if self.topology is Topology.RING:
            apart %= self.physical_size
            return min(apart, self.physical_size - apart)
        return SEND_HOPS[self.topology]


def physical_dims(links: tuple[Link, ...]) -> tuple[tuple[int, ...], ...]:
    """The network's own dimensions, each as the links carved from it (one link if not carved).

    Raises
    ------
    InputError
        Carved links that do not tile their dimension: consecutive, innermost part first, each
        part's stride the product of the sizes before it, their sizes' product the dimension's.
    """
    groups: list[list[int]] = []
    held = 1  # of the network dimension the last group is carved from, the NPUs its parts so far span
    for d, link in enumerate(links):
        if held == 1:
            groups.append([])
        first = links[groups[-1][0]] if groups[-1] else link
        expected = (first.physical_size, held, first.topology, first.bandwidth_gbps, first.latency_ns)
        if (link.physical_size, link.stride, link.topology, link.bandwidth_gbps, link.latency_ns) != expected:
            raise InputError(f"program.links[{d}]", "carved parts that do not tile their dimension")
        groups[-1].append(d)
        held = 1 if held * link.size == link.physical_size else held * link.size
    if held != 1:
        raise InputError(f"program.links[{len(links) - 1}]", "carved parts that do not tile their dimension")
    return tuple(tuple(group) for group in groups)


@dataclass(frozen=True)
class ProgramCollective:
    """One collective of a program.

    Parameters
    ----------
    kind
        All-reduce, reduce-scatter, all-gather, all-to-all or send (a pipeline stage's message to
        another stage: one chunk of one unit, ``dims`` the lowest dimension its NPUs differ in).
    dims
        The dimensions it runs over: each NPU's group is the NPUs that differ from it in these alone,
        and unit ``u`` of a chunk belongs to the group's NPU at position ``u`` (its coordinates on
        ``dims``, the first varying fastest).
    chunk_bytes
        Each chunk's bytes (an all-gather's: its output).
    flat
        Run flattened (a ``one_*`` algorithm): one phase over every NPU at once, whose messages go
        between NPUs that may differ in several dimensions; ``dims`` are then every dimension of
        two or more NPUs, so unit ``u`` belongs to NPU ``u``.
    stage
        The pipeline stage whose NPUs run it (:attr:`Program.stages`); a send's: the sending one.
    groups
        Its communicator groups, each NPU's in ring order, when it runs one ring over each group
        (as ASTRA-sim 2.x runs a collective in a group smaller than the network): ``dims`` is then
        the ring's dimension in the schedule, and unit ``u`` belongs to each group's ``u``-th NPU.
    """

    kind: Kind
    dims: tuple[int, ...]
    chunk_bytes: tuple[int, ...]
    flat: bool = False
    stage: int = 0
    groups: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in PROGRAM_KINDS:
            raise InputError("program.collectives", f"no program is written for a {self.kind.value}")
        if not self.dims or list(self.dims) != sorted(set(self.dims)):
            raise InputError("program.collectives", f"dims must be distinct and ascending, got {list(self.dims)}")
        if not self.chunk_bytes or min(self.chunk_bytes) < 1:
            raise InputError("program.collectives", "every chunk must hold bytes")
        sizes = {len(group) for group in self.groups}
        members = [npu for group in self.groups for npu in group]
        if self.groups and (len(sizes) != 1 or min(sizes) < 2 or len(set(members)) != len(members)):
            raise InputError("program.collectives", "groups must be disjoint, of one size of at least 2 NPUs")

    def units(self, links: tuple[Link, ...]) -> int:
        """How many units a chunk is cut in: the NPUs of one of its groups (on ``links``)."""
        return len(self.groups[0]) if self.groups else int(np.prod([links[d].size for d in self.dims]))

    def unit_bytes(self, chunk: int, units: int, count: int) -> int:
        """Bytes of the units (a bit mask) of ``chunk`` cut in ``count`` units, shared out so that they add up."""
        total = self.chunk_bytes[chunk]
        if total % count == 0:
            return units.bit_count() * (total // count)
        size, u = 0, 0
        while units:
            if units & 1:
                size += (u + 1) * total // count - u * total // count
            units >>= 1
            u += 1
        return size


COLUMNS = ("kind", "peer", "size", "tag", "collective", "chunk", "phase", "units", "reduce", "duration_ns", "pad")


@dataclass(frozen=True, eq=False)
class Program:
    """Every NPU's operations, as columns (see the module's docstring).

    Parameters
    ----------
    links
        The network's dimensions, innermost first (NPU ``n``'s coordinate on dimension ``d`` varies
        fastest for ``d = 0``).
    collectives
        The collectives the program runs.
    unit_sets
        The distinct unit sets operations carry, as bit masks.
    rank_start
        Rank ``r``'s operations are rows ``rank_start[r]:rank_start[r + 1]``.
    kind, peer, size, tag
        Per operation: :class:`OpKind`, the other NPU (``-1`` for a computation), bytes, tag.
    collective, chunk, phase, units, reduce
        Per message: its collective, chunk, the phase of the chunk's schedule it belongs to, its unit
        set (an index of ``unit_sets``), and for a receive whether it reduces (else it copies).
    duration_ns
        Per computation, its time (ASTRA-sim costs 0 as 1 ns).
    dep_start, deps
        Operation ``i`` waits for rows ``deps[dep_start[i]:dep_start[i + 1]]``.
    active_phases
        How many phases one dimension serves at once at one NPU (the network's ``active_chunks``).
    stages
        Per pipeline stage, its NPUs, ascending; ``()``: one stage of every NPU.
    pad
        Per message, bytes it carries beyond its data (``None``: none), a receive as many as its
        send: the model's delays of a message (its endpoint delay, message overhead, its phase's
        delay and reductions), which ASTRA-sim 2.x's custom path does not charge, as the time the
        link takes to carry them (:func:`~themis_opt.programs.timing.pad_bytes`).
    exclusive_reductions
        Whether a reducing receive reads and writes the buffer itself, so that two into the same units
        at one NPU must be ordered (MSCCL's ``rrc``); ``False``: reductions commute (ASTRA-sim's,
        which moves no data). See :mod:`~themis_opt.programs.races`.
    """

    links: tuple[Link, ...]
    collectives: tuple[ProgramCollective, ...]
    unit_sets: tuple[int, ...]
    rank_start: np.ndarray
    kind: np.ndarray
    peer: np.ndarray
    size: np.ndarray
    tag: np.ndarray
    collective: np.ndarray
    chunk: np.ndarray
    phase: np.ndarray
    units: np.ndarray
    reduce: np.ndarray
    duration_ns: np.ndarray
    dep_start: np.ndarray
    deps: np.ndarray
    active_phases: int = 1
    stages: tuple[tuple[int, ...], ...] = ()
    pad: np.ndarray = None  # type: ignore[assignment]  # resolved below
    exclusive_reductions: bool = False

    def __post_init__(self) -> None:
        n = len(self.kind)
        if self.pad is None:
            object.__setattr__(self, "pad", np.zeros(n, dtype=np.int64))
        for name in (*COLUMNS, "rank_start", "dep_start", "deps"):
            value = np.asarray(getattr(self, name), dtype=bool if name == "reduce" else np.int64)
            value.setflags(write=False)
            object.__setattr__(self, name, value)
            if name in COLUMNS and len(value) != n:
                raise InputError("program", f"{name} holds {len(value)} rows, kind {n}")
        _check(self, n)

    @classmethod
    def from_table(
        cls,
        described: tuple[Any, ...],
        rank_start: np.ndarray,
        table: np.ndarray,
        dep_counts: np.ndarray,
        deps: np.ndarray,
        exclusive_reductions: bool = False,
    ) -> Program:
        """A program from its rows as one table (columns in :data:`COLUMNS` order) and each row's
        dependency count; ``described`` is (links, collectives, unit sets, active phases, stages).
        """
        links, collectives, unit_sets, active, stages = described
        columns = {name: table[:, j] for j, name in enumerate(COLUMNS)}
        return cls(
            links=links,
            collectives=collectives,
            unit_sets=unit_sets,
            rank_start=rank_start,
            **{name: columns[name] for name in COLUMNS if name != "reduce"},
            reduce=columns["reduce"].astype(bool),
            dep_start=np.r_[0, np.cumsum(dep_counts, dtype=np.int64)],
            deps=deps,
            active_phases=active,
            stages=stages,
            exclusive_reductions=exclusive_reductions,
        )

    @property
    def npus(self) -> int:
        """Number of NPUs."""
        return len(self.rank_start) - 1

    @property
    def num_ops(self) -> int:
        """Number of operations."""
        return len(self.kind)

    @cached_property
    def rank(self) -> np.ndarray:
        """Each operation's NPU."""
        return np.repeat(np.arange(self.npus), np.diff(self.rank_start))

    @cached_property
    def coordinates(self) -> np.ndarray:
        """NPU ``n``'s coordinate on each dimension: ``coordinates[n, d]``."""
        sizes = np.array([link.size for link in self.links])
        coords: np.ndarray = np.arange(self.npus)[:, None] // np.cumprod(np.r_[1, sizes[:-1]])[None, :] % sizes[None, :]
        return coords

    @cached_property
    def message_dim(self) -> np.ndarray:
        """Each message's dimension (the lowest its NPUs differ in, where ASTRA-sim 2.x costs it);
        ``-1`` for a computation.
        """
        dims = np.full(self.num_ops, -1)
        messages = self.kind != OpKind.COMP
        differ = self.coordinates[self.rank[messages]] != self.coordinates[self.peer[messages]]
        dims[messages] = differ.argmax(axis=1)
        return dims

    @cached_property
    def message_apart(self) -> np.ndarray:
        """Each message's positions apart on the network's own dimension that holds its
        :attr:`message_dim` (a ring's hops are counted there); 0 for a computation.
        """
        apart = np.zeros(self.num_ops, dtype=np.int64)
        messages = np.flatnonzero(self.kind != OpKind.COMP)
        if not len(messages):
            return apart
        groups = physical_dims(self.links)
        group_of = np.zeros(len(self.links), dtype=np.int64)
        weight = np.zeros((len(self.links), len(groups)), dtype=np.int64)
        for g, parts in enumerate(groups):
            group_of[list(parts)] = g
            for d in parts:
                weight[d, g] = self.links[d].stride
        place = self.coordinates @ weight  # each NPU's position on each network dimension
        column = group_of[self.message_dim[messages]]
        apart[messages] = np.abs(place[self.rank[messages], column] - place[self.peer[messages], column])
        return apart

    @cached_property
    def served_dim(self) -> np.ndarray:
        """The dimension each message's phase serves: its :attr:`message_dim`, or for a flattened
        collective's dimension 0 and a grouped one's its ring's, the one its phases take in a schedule.
        """
        fixed = np.array([0 if c.flat else c.dims[0] if c.groups else -1 for c in self.collectives] or [-1])
        messages = self.kind != OpKind.COMP
        colls = np.clip(np.where(messages, self.collective, 0), 0, len(fixed) - 1)
        served: np.ndarray = np.where(messages & (fixed[colls] >= 0), fixed[colls], self.message_dim)
        return served

    @cached_property
    def sender(self) -> np.ndarray:
        """Each receive's send (``-1`` for the others): the one with the same NPUs and tag, of the same
        size. ASTRA-sim matches on these in issue order; a program here names each message once, so the
        match does not depend on timing.

        Raises
        ------
        InputError
            A message sent or received twice, a receive without its send or the other way round, or
            a send and its receive of different sizes or pads (ASTRA-sim would hang one NPU without a word).
        """
        sends = np.flatnonzero(self.kind == OpKind.SEND)
        recvs = np.flatnonzero(self.kind == OpKind.RECV)
        send_keys = np.stack([self.rank[sends], self.peer[sends], self.tag[sends]], axis=1)
        recv_keys = np.stack([self.peer[recvs], self.rank[recvs], self.tag[recvs]], axis=1)
        for rows, keys, what in ((sends, send_keys, "sent"), (recvs, recv_keys, "received")):
            order = np.lexsort(keys.T[::-1])
            same = np.all(keys[order][1:] == keys[order][:-1], axis=1)
            if np.any(same):
                op = int(rows[order][1:][np.argmax(same)])
                raise InputError(_where(self, op), f"a message {what} twice (the same NPUs and tag)")
        send_order = np.lexsort(send_keys.T[::-1])
        recv_order = np.lexsort(recv_keys.T[::-1])
        if len(sends) != len(recvs) or np.any(send_keys[send_order] != recv_keys[recv_order]):
            lone = _lone(self, sends, send_keys, recvs, recv_keys)
            raise InputError(
                _where(self, lone), "a message without its match (no receive for a send, or no send for a receive)"
            )
        matched = np.full(self.num_ops, -1, dtype=np.int64)
        matched[recvs[recv_order]] = sends[send_order]
        at = np.maximum(matched, 0)
        unequal = (self.kind == OpKind.RECV) & ((self.size != self.size[at]) | (self.pad != self.pad[at]))
        if np.any(unequal):
            raise InputError(_where(self, int(np.argmax(unequal))), "a receive of another size than its send")
        return matched

    def ranks_of(self, collective: int) -> tuple[int, ...] | range:
        """The NPUs that run ``collective``: its groups', else its stage's."""
        coll = self.collectives[collective]
        if coll.groups:
            return tuple(sorted(npu for group in coll.groups for npu in group))
        return self.stages[coll.stage] if self.stages else range(self.npus)

    def group_units(self, collective: int) -> int:
        """How many units a chunk of ``collective`` is cut in: the NPUs of one of its groups."""
        return self.collectives[collective].units(self.links)

    def ops_of(self, rank: int) -> range:
        """Rank ``rank``'s rows."""
        return range(int(self.rank_start[rank]), int(self.rank_start[rank + 1]))

    def deps_of(self, op: int) -> np.ndarray:
        """The rows operation ``op`` waits for."""
        return self.deps[self.dep_start[op] : self.dep_start[op + 1]]

    def unpadded(self) -> Program:
        """The program with no message padded (:attr:`pad`): its data alone, as a runtime that times its
        own messages (MSCCL's) runs it.
        """
        return replace(self, pad=np.zeros(self.num_ops, dtype=np.int64))

    def summary(self) -> dict[str, Any]:
        """Counts for reports and ``program.json``."""
        return {
            "npus": self.npus,
            "collectives": len(self.collectives),
            "nodes": self.num_ops,
            "messages": int(np.count_nonzero(self.kind == OpKind.SEND)),
            "padding_bytes": int(self.pad[self.kind == OpKind.SEND].sum()),  # the model's delays, as bytes sent
        }


def _check(program: Program, n: int) -> None:
    """The structure every program has, whatever its schedule: a one-line error otherwise."""
    npus = program.npus
    sizes = [link.size for link in program.links]
    if not program.links or int(np.prod(sizes)) != npus:
        raise InputError("program", f"{npus} NPUs on dimensions {sizes}")
    physical_dims(program.links)
    if program.stages and sorted(r for stage in program.stages for r in stage) != list(range(npus)):
        raise InputError("program.stages", f"must take each of the {npus} NPUs once")
    for c, coll in enumerate(program.collectives):
        if not 0 <= coll.stage < max(1, len(program.stages)):
            raise InputError(f"program.collectives[{c}]", f"stage {coll.stage} of {max(1, len(program.stages))}")
        if coll.dims[-1] >= len(sizes):
            raise InputError(
                f"program.collectives[{c}]", f"dimension {coll.dims[-1]} of a {len(sizes)}-dimension network"
            )
        if coll.groups and not 0 <= min(min(g) for g in coll.groups) <= max(max(g) for g in coll.groups) < npus:
            raise InputError(f"program.collectives[{c}]", f"its groups must name NPUs 0 to {npus - 1}")
    starts = program.rank_start
    if starts[0] != 0 or starts[-1] != n or np.any(np.diff(starts) < 0):
        raise InputError("program.rank_start", "must rise from 0 to the number of operations")
    if len(program.dep_start) != n + 1 or program.dep_start[0] != 0 or program.dep_start[-1] != len(program.deps):
        raise InputError("program.dep_start", "must give every operation its dependencies")
    if np.any(np.diff(program.dep_start) < 0):
        raise InputError("program.dep_start", "must not fall")
    kinds = program.kind
    if n and (kinds.min() < 0 or kinds.max() > OpKind.COMP):
        raise InputError("program.kind", "must be 0 (send), 1 (receive) or 2 (computation)")
    messages = kinds != OpKind.COMP
    _first_bad(
        messages & ((program.peer < 0) | (program.peer >= npus) | (program.peer == program.rank)),
        program,
        "sends to or receives from an NPU that is not another of the network's",
    )
    if np.any(messages):
        own, peer = program.coordinates[program.rank[messages]], program.coordinates[program.peer[messages]]
        apart = np.zeros(n, dtype=np.int64)
        apart[messages] = (own != peer).sum(axis=1)
        # a flattened or grouped collective's messages and a send may cross several (2.x costs them on the lowest)
        free = np.array([c.flat or bool(c.groups) or c.kind is Kind.SEND for c in program.collectives] or [False])
        several = messages & (apart != 1)
        several[several] &= ~free[np.clip(program.collective[several], 0, len(free) - 1)]
        _first_bad(several, program, "its NPUs differ in several dimensions (write one hop a dimension)")
    _first_bad(messages & (program.size <= 0), program, "a message of no bytes")
    _first_bad((program.pad < 0) | (~messages & (program.pad != 0)), program, "a pad that is not a message's bytes")
    _first_bad(~messages & (program.duration_ns < 0), program, "a negative duration")
    count = len(program.collectives)
    _first_bad(messages & ((program.collective < 0) | (program.collective >= count)), program, "no such collective")
    _first_bad(messages & ((program.units < 0) | (program.units >= len(program.unit_sets))), program, "no unit set")
    if np.any(messages):
        chunks = np.array([len(c.chunk_bytes) for c in program.collectives])
        colls = np.where(messages, program.collective, 0)
        _first_bad(messages & ((program.chunk < 0) | (program.chunk >= chunks[colls])), program, "no such chunk")
    owner = np.repeat(np.arange(n), np.diff(program.dep_start))
    deps = program.deps
    wrong = (deps < program.rank_start[program.rank[owner]]) | (deps >= owner)
    if np.any(wrong):
        op = int(owner[np.argmax(wrong)])
        raise InputError(_where(program, op), "waits for an operation that is not an earlier one of its NPU")


def _lone(program: Program, sends: np.ndarray, send_keys: np.ndarray, recvs: np.ndarray, recv_keys: np.ndarray) -> int:
    """A message without its match."""
    sent = {tuple(key) for key in send_keys.tolist()}
    received = {tuple(key) for key in recv_keys.tolist()}
    for rows, keys, other in ((sends, send_keys, received), (recvs, recv_keys, sent)):
        for row, key in zip(rows.tolist(), keys.tolist()):
            if tuple(key) not in other:
                return int(row)
    raise AssertionError("unmatched keys without a lone message")


def _where(program: Program, op: int) -> str:
    rank = int(program.rank[op])
    return f"program: NPU {rank} node {op - int(program.rank_start[rank])}"


def _first_bad(bad: np.ndarray, program: Program, problem: str) -> None:
    if np.any(bad):
        raise InputError(_where(program, int(np.argmax(bad))), problem)
