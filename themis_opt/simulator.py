"""Event-driven simulator: turns every chunk's dimension order into a timed schedule.

Each dimension serves one phase at a time without preemption, and a chunk's
phases run strictly in sequence. When a dimension is free it serves the next
waiting phase chosen by the intra-dimension policy:

* ``fifo``: arrival order at the dimension; ties by collective, then chunk.
* ``scf`` (smallest chunk first): ASTRA-sim's queue insertion
  (``Sys::insert_stream``). A phase is inserted before the first waiting
  phase whose size ``max(bytes_in, bytes_out)`` is equal or larger (so among
  equal sizes the latest arrival goes first), except a chunk's second-to-last
  phase (exactly one phase after it), which joins the tail. ASTRA-sim tests
  ``phases_to_go.size() == 1`` after it has removed the phase being queued,
  so the last phase is inserted by size.

Same-instant events follow ASTRA-sim's ``notify_stream_added``: at one
instant the phases that end are processed first (their dimensions become
idle); then the phases that became ready are taken one at a time in
(collective, chunk) order, each is queued on its dimension and, if that
dimension is idle, the dimension starts the head of its queue at once, before
the next one is queued. Last, every dimension still idle starts the head of
its queue. Under fifo this equals queueing everything first; under scf it
does not. Both queues cost O(log Q) an operation, so a run costs O(P log P)
for P phases.
"""

from __future__ import annotations

import gc
import heapq
import random
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum

from themis_opt.budget import Deadline
from themis_opt.cost import PhaseSpec, chunk_phases
from themis_opt.errors import InputError
from themis_opt.instance import Instance
from themis_opt.schedule import ChunkSchedule, Phase, Schedule

Orders = Mapping[tuple[int, int], tuple[int, ...]]


class Intra(StrEnum):
    """Intra-dimension policy: which waiting phase a free dimension serves next."""

    FIFO = "fifo"
    SCF = "scf"


class ScfQueue:
    """ASTRA-sim's smallest-chunk-first queue as an implicit treap.

    The queue is a sequence; :meth:`insert_before_ge` puts an item before the
    first item whose key is >= its own, :meth:`append` puts it at the tail and
    :meth:`pop` takes the head. A treap keyed by position with the maximum key
    of every subtree finds that spot in O(log Q) expected time. Priorities come
    from a seeded generator: they shape the tree, never the sequence.
    """

    def __init__(self) -> None:
        self._rng = random.Random(0)
        self._key: list[float] = []
        self._max: list[float] = []
        self._item: list[int] = []
        self._pri: list[float] = []
        self._left: list[int] = []
        self._right: list[int] = []
        self._root = -1
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def _node(self, key: float, item: int) -> int:
        self._key.append(key)
        self._max.append(key)
        self._item.append(item)
        self._pri.append(self._rng.random())
        self._left.append(-1)
        self._right.append(-1)
        return len(self._key) - 1

    def _pull(self, t: int) -> None:
        best = self._key[t]
        left, right = self._left[t], self._right[t]
        if left >= 0 and self._max[left] > best:
            best = self._max[left]
        if right >= 0 and self._max[right] > best:
            best = self._max[right]
        self._max[t] = best

    def _merge(self, a: int, b: int) -> int:
        if a < 0:
            return b
        if b < 0:
            return a
        if self._pri[a] > self._pri[b]:
            self._right[a] = self._merge(self._right[a], b)
            self._pull(a)
            return a
        self._left[b] = self._merge(a, self._left[b])
        self._pull(b)
        return b

    def _split(self, t: int, key: float) -> tuple[int, int]:
        # (items before the first one with key >= `key`, the rest)
        if t < 0:
            return -1, -1
        left = self._left[t]
        if left >= 0 and self._max[left] >= key:
            a, b = self._split(left, key)
            self._left[t] = b
            self._pull(t)
            return a, t
        if self._key[t] >= key:
            self._left[t] = -1
            self._pull(t)
            return left, t
        a, b = self._split(self._right[t], key)
        self._right[t] = a
        self._pull(t)
        return t, b

    def _pop_front(self, t: int) -> tuple[int, int]:
        left = self._left[t]
        if left < 0:
            return self._right[t], t
        self._left[t], node = self._pop_front(left)
        self._pull(t)
        return t, node

    def insert_before_ge(self, key: float, item: int) -> None:
        """Insert ``item`` before the first queued item with key >= ``key``."""
        before, after = self._split(self._root, key)
        self._root = self._merge(self._merge(before, self._node(key, item)), after)
        self._len += 1

    def append(self, key: float, item: int) -> None:
        """Put ``item`` at the tail."""
        self._root = self._merge(self._root, self._node(key, item))
        self._len += 1

    def pop(self) -> int:
        """Remove and return the head item."""
        if self._root < 0:
            raise IndexError("pop from an empty queue")
        self._root, node = self._pop_front(self._root)
        self._len -= 1
        return self._item[node]


def check_orders(instance: Instance, orders: Orders) -> None:
    """Raise :class:`InputError` unless ``orders`` gives every chunk a
    permutation of its collective's dimensions of size >= 2.
    """
    for c, k in instance.chunk_ids:
        order = orders.get((c, k))
        if order is None:
            raise InputError(f"orders[{c}, {k}]", "missing: every chunk needs an order")
        if sorted(order) != list(instance.active_dims[c]):
            raise InputError(
                f"orders[{c}, {k}]",
                f"must be a permutation of {list(instance.active_dims[c])}, got {list(order)}",
            )


def phase_plan(instance: Instance, orders: Orders) -> list[tuple[PhaseSpec, ...]]:
    """Every chunk's untimed phases, in ``instance.chunk_ids`` order."""
    memo: dict[tuple[int, int, tuple[int, ...]], tuple[PhaseSpec, ...]] = {}
    plan = []
    for c, k in instance.chunk_ids:
        key = (c, instance.collectives[c].bytes_of(k), tuple(orders[(c, k)]))
        if key not in memo:
            memo[key] = chunk_phases(instance, c, key[1], key[2])
        plan.append(memo[key])
    return plan


def _build(
    instance: Instance,
    orders: Orders,
    plan: list[tuple[PhaseSpec, ...]],
    starts: list[list[float]],
    deadline: Deadline | None = None,
) -> Schedule:
    deadline = deadline or Deadline()
    chunks = []
    trusted = Phase.trusted
    for i, (c, k) in enumerate(instance.chunk_ids):
        if not i & 4095:
            deadline.check("simulator")
        phases = tuple(
            trusted(spec.dim, spec.op, start, start + spec.duration, spec.bytes_in, spec.bytes_out)
            for spec, start in zip(plan[i], starts[i])
        )
        chunks.append(ChunkSchedule(c, k, tuple(orders[(c, k)]), phases))
    return Schedule(tuple(chunks))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: a run allocates millions of objects
    and no cycles, and the collector's passes over them cost a third of the run.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def simulate(
    instance: Instance, orders: Orders, intra: Intra | str = Intra.FIFO, deadline: Deadline | None = None
) -> Schedule:
    """Time every chunk's phases under an intra-dimension policy.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk).
    intra
        ``fifo`` or ``scf``.
    deadline
        When to give up (checked every few thousand events).

    Returns
    -------
    Schedule
        The timed schedule; dimensions never idle while a phase waits for them.

    Raises
    ------
    OutOfTime
        If ``deadline`` passes first.
    """
    with _gc_paused():
        return _simulate(instance, orders, Intra(intra), deadline or Deadline())


def _simulate(instance: Instance, orders: Orders, intra: Intra, deadline: Deadline) -> Schedule:
    events = 0
    check_orders(instance, orders)
    plan = phase_plan(instance, orders)
    ids = instance.chunk_ids
    num_dims = instance.network.num_dims
    starts: list[list[float]] = [[] for _ in ids]
    next_phase = [0] * len(ids)
    fifo: list[deque[int]] = [deque() for _ in range(num_dims)]
    scf: list[ScfQueue] = [ScfQueue() for _ in range(num_dims)]
    busy = [False] * num_dims
    # ready: (time, chunk index) of a chunk whose next phase can start;
    # done: (time, dim, chunk index) of a phase that ends.
    ready = [(instance.collectives[c].issue_ns, i) for i, (c, _) in enumerate(ids)]
    heapq.heapify(ready)
    done: list[tuple[float, int, int]] = []

    def start_head(d: int) -> None:
        queue = fifo[d] if intra is Intra.FIFO else scf[d]
        if busy[d] or not queue:
            return
        i = queue.popleft() if isinstance(queue, deque) else queue.pop()
        starts[i].append(now)
        busy[d] = True
        heapq.heappush(done, (now + plan[i][next_phase[i]].duration, d, i))

    now = 0.0
    while ready or done:
        events += 1
        if not events & 4095:
            deadline.check("simulator")
        now = min(ready[0][0] if ready else float("inf"), done[0][0] if done else float("inf"))
        while done and done[0][0] == now:
            _, d, i = heapq.heappop(done)
            busy[d] = False
            next_phase[i] += 1
            if next_phase[i] < len(plan[i]):
                heapq.heappush(ready, (now, i))
        arrivals = []
        while ready and ready[0][0] == now:
            arrivals.append(heapq.heappop(ready)[1])

        for i in sorted(arrivals):  # chunk index order is (collective, chunk) order
            spec = plan[i][next_phase[i]]
            if intra is Intra.FIFO:
                fifo[spec.dim].append(i)
            elif next_phase[i] == len(plan[i]) - 2:  # second-to-last: exactly one phase after it
                scf[spec.dim].append(max(spec.bytes_in, spec.bytes_out), i)
            else:
                scf[spec.dim].insert_before_ge(max(spec.bytes_in, spec.bytes_out), i)
            start_head(spec.dim)  # an idle dimension starts at once
        for d in range(num_dims):
            start_head(d)
    return _build(instance, orders, plan, starts, deadline)


def sequences_of(instance: Instance, schedule: Schedule) -> dict[int, list[tuple[int, int]]]:
    """Per dimension, the phases of ``schedule`` by start time, as
    (chunk index in ``instance.chunk_ids``, phase position in the chunk).
    """
    index = {cid: i for i, cid in enumerate(instance.chunk_ids)}
    entries: dict[int, list[tuple[float, float, int, int]]] = {}
    for chunk in schedule.chunks:
        i = index[(chunk.collective, chunk.chunk)]
        for p, phase in enumerate(chunk.phases):
            entries.setdefault(phase.dim, []).append((phase.start_ns, phase.end_ns, i, p))
    return {d: [(i, p) for _, _, i, p in sorted(seq)] for d, seq in entries.items()}


def left_shift(
    instance: Instance,
    orders: Orders,
    sequences: Mapping[int, Sequence[tuple[int, int]]],
    durations: Sequence[Sequence[float]] | None = None,
    issues: Sequence[float] | None = None,
) -> list[list[float]]:
    """Earliest start of every phase given fixed orders and per-dimension sequences.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk).
    sequences
        Per dimension, the phases it serves in that order, each as
        (chunk index in ``instance.chunk_ids``, phase position in the chunk).
    durations
        Per chunk, the duration of each phase; ``None`` uses the cost model
        (pass rounded durations to plan in integer time).
    issues
        Per collective, its issue time in the same unit as ``durations``;
        ``None`` uses the instance's issue times.

    Returns
    -------
    list of list of float
        Per chunk (in ``instance.chunk_ids`` order), each phase's start.

    Raises
    ------
    InputError
        If the sequences miss or repeat a phase or contradict the chunk orders.
    """
    check_orders(instance, orders)
    plan = phase_plan(instance, orders)
    dur = durations if durations is not None else [[s.duration for s in p] for p in plan]
    issue = issues if issues is not None else [coll.issue_ns for coll in instance.collectives]
    ids = instance.chunk_ids
    position: dict[tuple[int, int], tuple[int, int]] = {}
    for d, seq in sequences.items():
        for pos, (i, p) in enumerate(seq):
            if not (0 <= i < len(ids) and 0 <= p < len(plan[i])) or plan[i][p].dim != d:
                raise InputError(f"sequences[{d}][{pos}]", f"no phase ({i}, {p}) runs on dimension {d}")
            if (i, p) in position:
                raise InputError(f"sequences[{d}][{pos}]", f"phase ({i}, {p}) is sequenced twice")
            position[(i, p)] = (d, pos)
    total = sum(len(p) for p in plan)
    if len(position) != total:
        raise InputError("sequences", f"must sequence all {total} phases, got {len(position)}")
    # Kahn's algorithm over chunk edges and dimension edges.
    indegree = {node: (node[1] > 0) + (position[node][1] > 0) for node in position}
    stack = [node for node, deg in indegree.items() if deg == 0]
    starts = [[0.0] * len(p) for p in plan]
    ends = [[0.0] * len(p) for p in plan]
    seen = 0
    while stack:
        i, p = stack.pop()
        seen += 1
        d, pos = position[(i, p)]
        earliest = issue[ids[i][0]] if p == 0 else ends[i][p - 1]
        if pos > 0:
            j, q = sequences[d][pos - 1]
            earliest = max(earliest, ends[j][q])
        starts[i][p] = earliest
        ends[i][p] = earliest + dur[i][p]
        successors = [(i, p + 1)] if p + 1 < len(plan[i]) else []
        if pos + 1 < len(sequences[d]):
            j, q = sequences[d][pos + 1]
            successors.append((j, q))
        for node in successors:
            indegree[node] -= 1
            if indegree[node] == 0:
                stack.append(node)
    if seen != total:
        raise InputError("sequences", "contradict the chunk orders (a cycle of precedences)")
    return starts


def retime(instance: Instance, orders: Orders, sequences: Mapping[int, Sequence[tuple[int, int]]]) -> Schedule:
    """The left-shifted schedule of fixed orders and per-dimension sequences,
    with the cost model's durations (see :func:`left_shift`).
    """
    starts = left_shift(instance, orders, sequences)
    return _build(instance, orders, phase_plan(instance, orders), starts)
