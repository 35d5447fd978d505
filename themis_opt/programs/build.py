"""A schedule expanded into its program: every NPU's part of every phase, step by step.

Each phase of a chunk on a dimension becomes the dimension's algorithm's exchanges
(:attr:`~themis_opt.algorithms.AlgorithmSpec.exchanges`) among each NPU's peers there. The
dependencies keep the schedule and add no freedom it lacks: a step waits for the step before it
(its sends arrived, its receipts in); a phase's first step waits for its chunk's previous phase and for the phase its
dimension served before it at the same NPU, in the schedule's sequence (with ``active_chunks`` at
once, the last phase of the slot it takes: of those ended by its start, the latest to end);
a collective's first phases wait for its issue time and the tasks it comes after; where the model
shares a dimension's bandwidth among the messages an NPU sends at once (a direct phase on a ring or
switch), they are sent one after another. So the program's longest path is the schedule's
makespan when each message takes what the phase's step takes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from themis_opt.algorithms import Algorithm
from themis_opt.cost.groups import GROUP_STEP_DELAY_NS, group_reduction_ns
from themis_opt.cost.plans import phase_delay_ns
from themis_opt.cost.steps import link_gbps, message_delay_ns
from themis_opt.errors import InputError
from themis_opt.formats.astra.groups import tile_group
from themis_opt.instance import After, Collective, Instance, Kind, Op, Topology
from themis_opt.programs.ir import OPERATION_BYTES, Link, OpKind, Program, ProgramCollective, operations_fitting
from themis_opt.programs.scope import check_programmable, runs_over, send_targets, stage_rows
from themis_opt.programs.timing import pad_bytes
from themis_opt.result import Result
from themis_opt.schedule import Phase, Schedule

logger = logging.getLogger(__name__)


def links_of(instance: Instance) -> tuple[Link, ...]:
    """The network's dimensions as messages are timed on them: one link's bandwidth a message."""
    return tuple(
        Link(d.size, d.topology, link_gbps(d), d.latency_ns, d.physical_size, d.stride)
        for d in instance.network.dimensions
    )


# a step whose operations x what they wait for reach this waits on one join instead (a COMP of 0 ns,
# 1 ns in ASTRA-sim): a direct phase's dependencies stay linear in its NPUs
JOIN_AT = 16


@dataclass(frozen=True)
class _Shape:
    """One phase's operations at every NPU (``R`` NPUs, ``S`` steps of ``T`` transfers), the same for
    every chunk whose phase has this collective, narrowing, dimension and op.
    """

    send: np.ndarray  # (S, T): a send, else a receive
    peer: np.ndarray  # (R, S, T): the other NPU
    unit: np.ndarray  # (R, S, T): the unit set carried (an id)
    count: np.ndarray  # (R, S, T): how many units that is, from each of ``origins`` NPUs
    reduce: np.ndarray  # (S, T): a receive that reduces
    origins: int = 1  # an all-to-all's NPUs whose blocks of those units a message carries


class _Builder:
    """The program's operations as numpy blocks, in the schedule's phase order (each NPU's rows are
    then in an order its dependencies follow).
    """

    def __init__(self, instance: Instance, links: tuple[Link, ...], collectives: tuple[ProgramCollective, ...]) -> None:
        network = instance.network
        self.network, self.links, self.collectives = network, links, collectives
        self.npus = network.num_npus
        sizes = np.array([link.size for link in links])
        self.coords = np.arange(self.npus)[:, None] // np.cumprod(np.r_[1, sizes[:-1]])[None, :] % sizes[None, :]
        self.unit_ids: dict[int, int] = {}
        self.shapes: dict[tuple[int, frozenset[int], int, Op], _Shape] = {}
        self.digits: dict[int, list[list[int]]] = {}
        self.next_id = 0
        self.columns: list[tuple[np.ndarray, ...]] = []
        self.edges: list[tuple[np.ndarray, np.ndarray]] = []
        self.durations: list[tuple[np.ndarray, int]] = []  # computations' rows and their time
        self.gbps = np.array([link.bandwidth_gbps for link in links])
        self.message_delay = np.array([message_delay_ns(network, dim) for dim in network.dimensions])
        self.overhead = np.array([dim.message_overhead_ns for dim in network.dimensions])

    def shape(self, c: int, held: frozenset[int], d: int, op: Op) -> _Shape:
        key = (c, held, d, op)
        found = self.shapes.get(key)
        if found is None:
            found = self.shapes[key] = self._shape(c, held, d, op)
        return found

    def _shape(self, c: int, held: frozenset[int], d: int, op: Op) -> _Shape:
        pc = self.collectives[c]
        # a flattened phase: its algorithm among every NPU; a grouped one: a ring of each group
        n = self.npus if pc.flat else len(pc.groups[0]) if pc.groups else self.links[d].size
        algorithm = Algorithm.RING if pc.groups else self.network.dimensions[d].algorithm_for(pc.kind)
        exchanges = runs_over(algorithm).exchanges
        assert exchanges is not None  # checked by check_programmable
        per_x = [exchanges(n, x, op) for x in range(n)]
        send = np.array([[t.send for t in step] for step in per_x[0]], dtype=bool)
        if any(np.array([[t.send for t in step] for step in steps], dtype=bool).shape != send.shape for steps in per_x):
            raise AssertionError("an algorithm's NPUs take different steps")
        peer_coord = np.array([[[t.peer for t in step] for step in steps] for steps in per_x])
        if pc.groups:  # each NPU's place on its group's ring (0 outside every group: its rows go unused)
            tile = np.zeros(self.npus, dtype=np.int64)
            x = np.zeros(self.npus, dtype=np.int64)
            for g, group in enumerate(pc.groups):
                tile[list(group)], x[list(group)] = g, np.arange(n)
            peer = np.array(pc.groups)[tile[:, None, None], peer_coord[x]]
        else:
            x = np.arange(self.npus) if pc.flat else self.coords[:, d]
            place = 1 if pc.flat else int(np.prod([link.size for link in self.links[:d]]))
            peer = np.arange(self.npus)[:, None, None] + (peer_coord[x] - x[:, None, None]) * place
        alone = pc.flat or bool(pc.groups)  # one phase: every unit one NPU's
        digit = [[1 << v for v in range(n)]] if alone else self._digit_masks(c)
        pinned = [] if alone else [j for j in pc.dims if j in held]
        unit = np.zeros(peer.shape, dtype=np.int64)
        count = np.zeros(peer.shape, dtype=np.int64)
        cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        at = 0 if alone else pc.dims.index(d)
        for r in range(self.npus):
            own = (*(int(self.coords[r, j]) for j in pinned), int(x[r]))
            found = cache.get(own)
            if found is None:
                base = (1 << pc.units(self.links)) - 1
                for j, v in zip(pinned, own):
                    base &= digit[pc.dims.index(j)][v]
                ids, counts = [], []
                for step in per_x[own[-1]]:
                    for t in step:
                        mask = base
                        blocks = 0
                        for b in t.blocks:
                            blocks |= digit[at][b]
                        mask &= blocks
                        ids.append(self.unit_ids.setdefault(mask, len(self.unit_ids)))
                        counts.append(mask.bit_count())
                found = cache[own] = (np.array(ids).reshape(send.shape), np.array(counts).reshape(send.shape))
            unit[r], count[r] = found
        reduce = ~send & (op not in (Op.ALL_GATHER, Op.ALL_TO_ALL))
        if op is Op.ALL_REDUCE:
            reduce[len(send) // 2 :] = False  # an all-reduce phase gathers after it scatters
        # an all-to-all's NPU holds the blocks bound for its coordinates on the dimensions already
        # visited from every NPU that differs from it there, and sends them all on
        origins = int(np.prod([self.links[j].size for j in pinned])) if op is Op.ALL_TO_ALL else 1
        return _Shape(send, peer, unit, count, reduce, origins)

    def _digit_masks(self, c: int) -> list[list[int]]:
        """Per dimension of the collective and coordinate there, the units at that coordinate (a bit mask)."""
        found = self.digits.get(c)
        if found is None:
            dims = self.collectives[c].dims
            shape = [self.links[j].size for j in dims]
            count = int(np.prod(shape))
            digits = np.arange(count)[:, None] // np.cumprod([1, *shape[:-1]])[None, :] % np.array(shape)[None, :]
            found = self.digits[c] = [[_mask(digits[:, j] == v) for v in range(size)] for j, size in enumerate(shape)]
        return found

    def sizes(self, c: int, chunk: int, shape: _Shape) -> np.ndarray:
        """Bytes of each of a shape's messages for ``chunk``: the chunk's bytes shared out over its units."""
        pc = self.collectives[c]
        units = pc.units(self.links)
        total = pc.chunk_bytes[chunk]
        if total % units == 0:
            return shape.count * (total // units) * shape.origins
        masks = list(self.unit_ids)
        used, back = np.unique(shape.unit, return_inverse=True)
        exact = np.array([pc.unit_bytes(chunk, masks[u], units) for u in used.tolist()])
        return exact[back.reshape(shape.unit.shape)] * shape.origins

    def message_dims(self, rows: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """The dimension each message between ``rows`` (R) and ``peers`` (R x M) is timed on: the
        lowest its NPUs differ in.
        """
        dims: np.ndarray = (self.coords[peers] != self.coords[rows][:, None, :]).argmax(axis=2)
        return dims

    def ids(self, count: int) -> np.ndarray:
        start = self.next_id
        self.next_id += count
        return np.arange(start, self.next_id)

    def add(self, ids: np.ndarray, columns: tuple[np.ndarray, ...], waits: np.ndarray | None) -> None:
        """Rows ``ids`` (R x T) with their columns, each waiting for the row's ``waits`` (R x W)."""
        self.columns.append((ids.ravel(), *(np.broadcast_to(col, ids.shape).ravel() for col in columns)))
        if waits is not None and waits.shape[1]:
            owners = np.broadcast_to(ids[:, :, None], (*ids.shape, waits.shape[1]))
            self.edges.append((owners.ravel(), np.broadcast_to(waits[:, None, :], owners.shape).ravel()))

    def one_at_a_time(self, sends: np.ndarray, among: np.ndarray | None = None) -> None:
        """Each NPU's ``sends`` (R x M, in the order they were made) one after another; with ``among``
        (R x M), those of each value apart (a flattened phase's sends, by the dimension they take).
        """
        if among is None:
            self.edges.append((sends[:, 1:].ravel(), sends[:, :-1].ravel()))
            return
        rows = np.broadcast_to(np.arange(len(sends))[:, None], sends.shape).ravel()
        keys, ids = among.ravel(), sends.ravel()
        order = np.lexsort((np.arange(len(ids)), keys, rows))  # by NPU, then value, then made
        same = (rows[order][1:] == rows[order][:-1]) & (keys[order][1:] == keys[order][:-1])
        self.edges.append((ids[order][1:][same], ids[order][:-1][same]))

    def join(self, rows: np.ndarray, waits: np.ndarray | None, duration_ns: int = 0) -> np.ndarray:
        """One COMP of ``duration_ns`` at each NPU of ``rows`` waiting for ``waits`` (R x W): what waits
        for it waits for them all.
        """
        ids = self.ids(len(rows))[:, None]
        none = np.array(-1)
        columns = (rows[:, None], np.array(OpKind.COMP), none, np.array(0), np.array(0))
        self.add(ids, (*columns, none, none, none, none, np.array(False), np.array(0)), waits)
        self.durations.append((ids.ravel(), duration_ns))
        return ids


def _mask(keep: np.ndarray) -> int:
    return int.from_bytes(np.packbits(keep, bitorder="little").tobytes(), "little")


def program_of(instance: Instance, result: Result | Schedule) -> Program:
    """The program of ``result``'s schedule on ``instance`` (see the module's docstring).

    Raises
    ------
    InputError
        The result has no schedule, does not fit the instance, the instance holds what no
        program is written for (:func:`check_programmable`), or the program's operations, at
        :data:`~themis_opt.programs.ir.OPERATION_BYTES` each, pass the memory available (found as it is built).
    """
    from themis_opt.validator import validate

    schedule = result.schedule if isinstance(result, Result) else result
    if schedule is None:
        raise InputError("result", "holds no schedule")
    check_programmable(instance)
    problems = validate(instance, schedule)
    if problems:
        raise InputError("result", f"does not fit the instance: {problems[0]}")
    network = instance.network
    links = links_of(instance)
    members = stage_rows(instance)
    collectives = tuple(_collective(instance, c, members[coll.stage]) for c, coll in enumerate(instance.collectives))
    builder = _Builder(instance, links, collectives)
    widest = max([link.size for link in links] + [builder.npus for pc in collectives if pc.flat])
    stride = 2 * widest + 2  # tags: a phase's steps never reach the next phase's
    # where the model shares a dimension's bandwidth among the messages an NPU sends at once, they
    # go one after another: the congestion-unaware backend would give each the whole bandwidth
    shared = [not network.congestion_unaware and link.topology in (Topology.RING, Topology.SWITCH) for link in links]
    # phases and computations in the schedule's time order: what each waits for is made before it
    events = sorted(
        [
            (p.start_ns, p.end_ns, 0, ch.collective, ch.chunk, i)
            for ch in schedule.chunks
            for i, p in enumerate(ch.phases)
        ]
        + [(cs.start_ns, cs.end_ns, 1, cs.compute, 0, 0) for cs in schedule.computes]
    )
    by_chunk = {(cs.collective, cs.chunk): cs for cs in schedule.chunks}
    most = operations_fitting()
    narrowed: dict[tuple[int, int], frozenset[int]] = {}
    ends = _Ends(instance)
    # each stage's dimensions' phases at once: the last of each
    slots: dict[tuple[int, int], list[tuple[float, np.ndarray] | None]] = {}
    computing: dict[int, np.ndarray] = {}  # each stage's compute unit's last computation
    for serial, (_, _, is_compute, c, k, i) in enumerate(events):
        if is_compute:
            compute = instance.computes[c]
            stage = compute.stage
            before = [computing[stage]] if stage in computing else []
            computing[stage] = ends.computes[c] = builder.join(
                members[stage], ends.of(compute.after, before, stage), round(compute.duration_ns)
            )
            continue
        coll = instance.collectives[c]
        rows = members[coll.stage]
        phase = by_chunk[(c, k)].phases[i]
        if (c, k) not in ends.chunks and c not in ends.released:
            ends.released[c] = _release(builder, coll, ends, rows)
        served = slots.setdefault((coll.stage, phase.dim), [None] * network.active_chunks)
        start = ends.chunks.get((c, k), ends.released[c])
        parts = [start] if start is not None else []
        slot = _slot(served, phase.start_ns)
        previous = served[slot]
        if previous is not None:
            parts.append(previous[1])
        waits: np.ndarray | None = np.concatenate(parts, axis=1) if parts else None
        tag = serial * stride
        if coll.kind is Kind.SEND:
            waits, ends.received[c] = _send(builder, instance, c, rows, waits, tag)
        else:
            gathered = frozenset(collectives[c].dims) if coll.kind is Kind.ALL_GATHER else frozenset()
            held, narrowed[(c, k)] = _held(narrowed.get((c, k), gathered), phase.dim, phase.op)
            shape = builder.shape(c, held, phase.dim, phase.op)
            waits = _phase(builder, (c, k, i, phase), shape, rows, waits, (tag, shared))
        ends.chunks[(c, k)] = waits
        served[slot] = (phase.end_ns, waits)
        if most is not None and builder.next_id > most:
            raise InputError(
                "result",
                f"its program holds over {most:,} operations by phase {serial + 1:,} of {len(events):,}: at "
                f"{OPERATION_BYTES} bytes each, more than the {most * OPERATION_BYTES / 2**30:.1f} GiB of memory "
                "available (fewer chunks or NPUs make a smaller program)",
            )
    stages = tuple(tuple(int(r) for r in rows) for rows in members) if len(members) > 1 else ()
    return _assemble(builder, network.active_chunks, stages)


def _collective(instance: Instance, c: int, rows: np.ndarray) -> ProgramCollective:
    """Collective ``c`` as its program states it: a flattened one over every dimension, one in a
    communicator group over each move of the group that splits its stage's NPUs (``rows``), a send
    over the lowest dimension its two NPUs differ in (its one unit the whole message).
    """
    network = instance.network
    coll = instance.collectives[c]
    if coll.kind is Kind.SEND:
        src, dst = (network.coordinates(npu) for npu in coll.group)
        lowest = next(d for d, (x, y) in enumerate(zip(src, dst)) if x != y)
        return ProgramCollective(coll.kind, (lowest,), (coll.size_bytes,), stage=coll.stage)
    chunks = tuple(coll.bytes_of(k) for k in range(coll.chunks))
    if coll.group:  # one ring over each move of its group that splits its stage's NPUs
        groups = tuple(tile_group(network, coll.group, tuple(int(r) for r in rows)))
        return ProgramCollective(coll.kind, instance.active_dims[c], chunks, stage=coll.stage, groups=groups)
    flat = network.flattened(coll.kind)
    every = tuple(d for d, dim in enumerate(network.dimensions) if dim.size > 1)
    dims = every if flat else instance.active_dims[c]
    return ProgramCollective(coll.kind, dims, chunks, flat=flat, stage=coll.stage)


def _phase(
    builder: _Builder,
    at: tuple[int, int, int, Phase],
    shape: _Shape,
    rows: np.ndarray,
    waits: np.ndarray | None,
    tagged: tuple[int, list[bool]],
) -> np.ndarray:
    """One phase's steps (collective, chunk, index and the phase ``at``) at each NPU of ``rows``,
    the first waiting for ``waits``, tagged from ``tagged[0]``; what the phase ends with at each.
    """
    c, k, i, phase = at
    d = phase.dim
    tag, shared = tagged
    pc = builder.collectives[c]
    size = builder.sizes(c, k, shape)[rows]
    peer, unit = shape.peer[rows], shape.unit[rows]
    algorithm = builder.network.dimensions[d].algorithm_for(pc.kind)
    ringed = bool(pc.groups) or (algorithm.spec.unflattened or algorithm) is Algorithm.RING
    # the phase's own delays, on its first step (a group's ring has its own: see _delays)
    once = 0.0 if pc.groups else phase_delay_ns(builder.network, d, phase.op, phase.bytes_in, algorithm)
    unwaited: list[np.ndarray] = []  # a ring's sends no later step waits for
    for s in range(len(shape.send)):
        t_count = shape.send.shape[1]
        if waits is not None and waits.shape[1] * t_count >= JOIN_AT and waits.shape[1] > 1:
            waits = builder.join(rows, waits)
        ids = builder.ids(len(rows) * t_count).reshape(len(rows), t_count)
        kind = np.where(shape.send[s], int(OpKind.SEND), int(OpKind.RECV))[None, :]
        sends = shape.send[s]
        dims = builder.message_dims(rows, peer[:, s, sends])
        delay = _delays(builder, pc, phase.op, s, dims, size[:, s, sends]) + (once if s == 0 else 0.0)
        pad = np.zeros(ids.shape, dtype=np.int64)
        columns = (
            rows[:, None],
            kind,
            peer[:, s],
            size[:, s],
            np.array(tag + s),
            np.array(c),
            np.array(k),
            np.array(i),
            unit[:, s],
            shape.reduce[s][None, :],
            pad,
        )
        if pc.flat and np.count_nonzero(sends) > 1:  # each dimension's sends in turn where it is shared
            alone = -1 - np.arange(dims.shape[1])[None, :]
            among = np.where(np.array(shared)[dims], dims, alone)
            builder.one_at_a_time(ids[:, sends], among)
            # a chain of sends pays its step's delay once: a share of it each (sends of one NPU and key)
            keys = np.arange(len(rows))[:, None] * (among.max() - among.min() + 1) + (among - among.min())
            _, chain, length = np.unique(keys, return_inverse=True, return_counts=True)
            delay = delay / length[chain.reshape(keys.shape)]
        elif shared[d] and np.count_nonzero(sends) > 1:
            builder.one_at_a_time(ids[:, sends])
            delay = delay / np.count_nonzero(sends)
        pad[:, sends] = pad_bytes(delay, builder.gbps[dims])
        builder.add(ids, columns, waits)
        # its sends arrived and its receipts in (a rounding apart, either may be last); a ring's next
        # step waits for its receipt alone, as ASTRA-sim's ring forwards what it receives (a ring carved
        # from a larger one has a longer link closing it, which only the NPU behind it waits for)
        if ringed and s + 1 < len(shape.send):
            waits = ids[:, ~sends]
            unwaited.append(ids[:, sends])
        else:
            waits = ids
    assert waits is not None
    # what comes after the phase also waits for the ring's earlier sends: they read the units it may
    # write next (the sends before on each link arrive first, so the time is the same)
    return np.concatenate([*unwaited, waits], axis=1) if unwaited else waits


def _delays(builder: _Builder, pc: ProgramCollective, op: Op, s: int, dims: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The model's delays of each send of a phase's step ``s`` beyond its hops' latency and its bytes
    (``dims``: each send's dimension, ``size``: its bytes; R x M), its phase's own delay aside
    (:func:`~themis_opt.cost.plans.phase_delay_ns`): what its pad carries.
    """
    if not pc.groups:  # the endpoint delay and the dimension's message overhead
        delay: np.ndarray = builder.message_delay[dims]
        return delay
    # a group's ring (cost.groups): a delay a step and one more before the first; a reduced receipt's reduction
    delay = GROUP_STEP_DELAY_NS * (2 if s == 0 else 1) + builder.overhead[dims]
    if s < len(pc.groups[0]) - 1 and op in (Op.REDUCE_SCATTER, Op.ALL_REDUCE):
        values, back = np.unique(size, return_inverse=True)
        reductions = np.array([group_reduction_ns(builder.network, float(v)) for v in values])
        delay = delay + reductions[back.reshape(size.shape)]
    return delay


def _send(
    builder: _Builder,
    instance: Instance,
    c: int,
    rows: np.ndarray,
    waits: np.ndarray | None,
    tag: int,
) -> tuple[np.ndarray, np.ndarray]:
    """A send's message from each NPU of its stage (``rows``) to its partner of the receiving stage
    (its own, for a ring's step), after ``waits``; the receipts are posted at once (as ASTRA-sim
    2.x's traces post them). The sends and the receipts, each in its stage's NPUs' order.
    """
    coll = instance.collectives[c]
    targets = send_targets(instance, coll, rows)
    unit = builder.unit_ids.setdefault(1, len(builder.unit_ids))
    common = (np.array(coll.size_bytes), np.array(tag), np.array(c), np.array(0), np.array(0), np.array(unit))
    sent = builder.ids(len(rows))[:, None]
    dims = builder.message_dims(rows, targets[:, None])
    pad = pad_bytes(builder.overhead[dims], builder.gbps[dims])  # a send's only delay (cost.groups.send_ns)
    builder.add(sent, (rows[:, None], np.array(OpKind.SEND), targets[:, None], *common, np.array(False), pad), waits)
    order = np.argsort(targets)
    received = builder.ids(len(rows))[:, None]
    receipts = (
        targets[order][:, None],
        np.array(OpKind.RECV),
        rows[order][:, None],
        *common,
        np.array(False),
        np.array(0),  # as its send's: see _assemble
    )
    builder.add(received, receipts, None)
    return sent, received


def _slot(served: list[tuple[float, np.ndarray] | None], start: float) -> int:
    """The slot of a dimension a phase starting at ``start`` takes: a free one, else the one whose
    phase ended latest by then (else the one ending first: the schedule has none running over).
    """
    if None in served:
        return served.index(None)
    ends = [slot[0] for slot in served if slot is not None]
    done = [n for n, end in enumerate(ends) if end <= start]
    if done:
        return max(done, key=lambda n: ends[n])
    return min(range(len(ends)), key=lambda n: ends[n])


class _Ends:
    """What each task ends with at every NPU of its stage (R x W rows), for what waits for it."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.chunks: dict[tuple[int, int], np.ndarray] = {}  # a chunk's last phase's receipts (a send's sends)
        self.received: dict[int, np.ndarray] = {}  # a send's receipts, at the receiving stage's NPUs
        self.computes: dict[int, np.ndarray] = {}  # a computation's row
        self.released: dict[int, np.ndarray | None] = {}  # what a collective's first phases wait for
        self.where = {id(task): n for n, task in enumerate(instance.collectives)}
        self.where_compute = {id(task): n for n, task in enumerate(instance.computes)}
        stage_of = {int(npu): s for s, npus in enumerate(stage_rows(instance)) for npu in npus}
        self.rings = {  # the sends within a stage (ring steps): what waits for one waits for its receipt
            c
            for c, coll in enumerate(instance.collectives)
            if coll.kind is Kind.SEND and stage_of[coll.group[1]] == coll.stage
        }

    def of(self, after: tuple[After, ...], more: list[np.ndarray], stage: int) -> np.ndarray | None:
        """The rows that the tasks of ``after`` end with at stage ``stage``'s NPUs (a send of another
        stage: its receipts), and ``more``, side by side (``None``: none).
        """
        index, tasks = self.instance.task_index, self.instance.tasks
        parts = list(more)
        for dep in after:
            task = tasks[index[dep.task]]
            if isinstance(task, Collective):
                c = self.where[id(task)]
                if task.kind is Kind.SEND and (task.stage != stage or c in self.rings):
                    parts.append(self.received[c])  # a send to this stage (check_programmable): its receipts
                    continue
                found = [self.chunks.get((c, k)) for k in range(task.chunks)]
                if any(end is None for end in found):  # a collective without phases ends at its release
                    found = [self.released.get(c)]
                parts += [end for end in found if end is not None]
            else:
                parts.append(self.computes[self.where_compute[id(task)]])
        return np.concatenate(parts, axis=1) if parts else None


def _release(builder: _Builder, coll: Collective, ends: _Ends, rows: np.ndarray) -> np.ndarray | None:
    """What a collective's first phases wait for at each NPU of its stage (``rows``): a computation of
    its issue time, and a join of the tasks it comes after (1 ns in ASTRA-sim); ``None``: nothing.
    """
    issue = builder.join(rows, None, round(coll.issue_ns)) if coll.issue_ns else None
    if not coll.after:
        return issue
    return builder.join(rows, ends.of(coll.after, [issue] if issue is not None else [], coll.stage))


def _held(fixed: frozenset[int], d: int, op: Op) -> tuple[frozenset[int], frozenset[int]]:
    """The dimensions an NPU's data is narrowed to its own coordinate on, when a phase's blocks are
    cut (the blocks then differ on ``d``) and after the phase.
    """
    match op:
        case Op.REDUCE_SCATTER | Op.ALL_TO_ALL:
            return fixed - {d}, fixed | {d}
        case Op.ALL_GATHER:
            return fixed - {d}, fixed - {d}
        case _:
            return fixed - {d}, fixed


def _assemble(builder: _Builder, active: int, stages: tuple[tuple[int, ...], ...]) -> Program:
    # a block: its ids, the rank, then the columns of add() (the durations are kept apart); the
    # blocks are let go column by column as they are joined, so that a large program is not held twice
    per_column: list[tuple[np.ndarray, ...] | None] = list(zip(*builder.columns, strict=True))
    builder.columns.clear()

    def column(j: int) -> np.ndarray:
        blocks = per_column[j] if per_column else None
        if blocks is None:
            return np.zeros(0, dtype=np.int64)
        per_column[j] = None
        return np.concatenate(blocks)

    ids, rank = column(0), column(1)
    order = np.lexsort((ids, rank))  # rank-major, each rank's rows in the order they were made
    where = np.empty(len(ids), dtype=np.int64)
    where[ids[order]] = np.arange(len(ids))
    if builder.edges:
        owner = where[np.concatenate([e[0] for e in builder.edges])]
        dep = where[np.concatenate([e[1] for e in builder.edges])]
    else:
        owner = dep = np.zeros(0, dtype=np.int64)
    builder.edges.clear()
    by_owner = np.argsort(owner, kind="stable")
    durations = np.zeros(len(ids), dtype=np.int64)
    for rows, duration in builder.durations:
        durations[rows] = duration  # ids are positions before the sort
    counts = np.bincount(owner, minlength=len(ids))
    sorted_rank = rank[order]
    rank_start = np.searchsorted(sorted_rank, np.arange(builder.npus + 1))
    logger.info("program: %d operations on %d NPUs", len(ids), builder.npus)
    del rank, ids, owner
    kind, peer, size, tag, coll, chunk, phase, unit, reduce, pad = [column(j)[order] for j in range(2, 12)]
    # a receive carries its send's pad: matched on (sender, receiver, tag), each message named once
    sends, recvs = np.flatnonzero(kind == OpKind.SEND), np.flatnonzero(kind == OpKind.RECV)
    by_sender = np.lexsort((tag[sends], peer[sends], sorted_rank[sends]))
    by_receiver = np.lexsort((tag[recvs], sorted_rank[recvs], peer[recvs]))
    if len(sends) == len(recvs):  # else Program names the message without its match
        pad[recvs[by_receiver]] = pad[sends[by_sender]]
    return Program(
        links=builder.links,
        collectives=builder.collectives,
        unit_sets=tuple(builder.unit_ids),
        rank_start=rank_start,
        kind=kind,
        peer=peer,
        size=size,
        tag=tag,
        collective=coll,
        chunk=chunk,
        phase=phase,
        units=unit,
        reduce=reduce.astype(bool),
        duration_ns=durations[order],
        dep_start=np.r_[0, np.cumsum(counts)],
        deps=dep[by_owner],
        active_phases=active,
        stages=stages,
        pad=pad,
    )
