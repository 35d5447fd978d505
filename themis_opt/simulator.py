"""Event-driven simulator: turns every chunk's dimension order into a timed schedule.

Each dimension serves one phase at a time without preemption, and a chunk's
phases run strictly in sequence. The NPU's compute unit runs one compute task
at a time, without preemption; when several are ready, the one listed first
starts. A task is released at the latest of its issue time and each
dependency's end plus lag (a collective ends with its last chunk's last
phase); a released collective's chunks all arrive at their first dimension.

When a dimension is free it serves the next waiting phase chosen by the
intra-dimension policy (ASTRA-sim's ``Sys::insert_stream``):

* ``fifo``: a phase is queued before the first waiting phase of lower
  priority: priority first, then arrival (ties by collective, then chunk).
* ``scf`` (smallest chunk first): a phase is inserted before the first
  waiting phase whose size ``max(bytes_in, bytes_out)`` is equal or larger
  (so among equal sizes the latest arrival goes first), except a chunk's
  second-to-last phase (exactly one phase after it), which joins the tail.
  ASTRA-sim tests ``phases_to_go.size() == 1`` after it has removed the phase
  being queued, so the last phase is inserted by size. Priorities are ignored,
  except that all-to-all and all-reduce phases (a double binary tree's, the
  baseline's merged last dimension) are queued as under fifo.

Same-instant events follow ASTRA-sim's ``notify_stream_added``: at one
instant the phases and compute tasks that end are processed first (their
dimensions become idle, their dependents may be released); then the phases
that became ready are taken one at a time in (collective, chunk) order,
first those whose chunk goes on on the dimension it just freed (ASTRA-sim
queues a chunk's next phase before the dimension it leaves picks again),
each is queued on its dimension and, if that dimension is idle, the dimension
starts the head of its queue at once, before the next one is queued. Last,
every dimension still idle starts the head of its queue, and the compute unit
starts the first ready compute task. Both queues cost O(log Q) an operation,
so a run costs O(P log P) for P phases.

Orders are either fixed per chunk (a mapping) or chosen by a planner when a
collective is released (Themis plans then, from the loads so far).
"""

from __future__ import annotations

import functools
import gc
import heapq
import math
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Literal

from themis_opt import simcore
from themis_opt.budget import Deadline
from themis_opt.cost import PhaseSpec, chunk_phases, merges
from themis_opt.errors import InputError
from themis_opt.instance import Collective, Instance, Kind, Op
from themis_opt.methods import Intra
from themis_opt.orders import Orders, Planner
from themis_opt.params import SearchParams
from themis_opt.policies import ThemisTracker
from themis_opt.schedule import ChunkSchedule, ComputeSchedule, Phase, Schedule


class ScfQueue:
    """ASTRA-sim's smallest-chunk-first queue as a blocked list.

    The queue is a sequence; :meth:`insert_before_ge` puts an item before the
    first item whose key is >= its own, :meth:`insert_before_lower_rank`
    before the first item of lower rank (priority), :meth:`append` puts it at
    the tail and :meth:`pop` takes the head. The sequence is cut into blocks
    of ``BLOCK`` to ``2 * BLOCK`` items, each with its largest key and least
    rank, so a spot is found by skipping whole blocks and scanning one: a
    few microseconds at any length a simulation reaches, where a literal
    list scans the whole queue (quadratic on long queues) and a balanced
    tree pays more per step than it saves.
    """

    BLOCK = 32

    def __init__(self) -> None:
        self._keys: list[list[float]] = []
        self._ranks: list[list[int]] = []
        self._items: list[list[int]] = []
        self._max: list[float] = []  # per block
        self._rmin: list[int] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def _insert(self, b: int, j: int, key: float, item: int, rank: int) -> None:
        keys, ranks, items = self._keys[b], self._ranks[b], self._items[b]
        keys.insert(j, key)
        ranks.insert(j, rank)
        items.insert(j, item)
        if key > self._max[b]:
            self._max[b] = key
        if rank < self._rmin[b]:
            self._rmin[b] = rank
        self._len += 1
        if len(keys) > 2 * self.BLOCK:  # split in two
            half = self.BLOCK
            self._keys.insert(b + 1, keys[half:])
            self._ranks.insert(b + 1, ranks[half:])
            self._items.insert(b + 1, items[half:])
            del keys[half:], ranks[half:], items[half:]
            self._max[b : b + 1] = [max(keys), max(self._keys[b + 1])]
            self._rmin[b : b + 1] = [min(ranks), min(self._ranks[b + 1])]

    def append(self, key: float, item: int, rank: int = 0) -> None:
        """Put ``item`` at the tail."""
        if not self._keys:
            self._keys.append([])
            self._ranks.append([])
            self._items.append([])
            self._max.append(key)
            self._rmin.append(rank)
        b = len(self._keys) - 1
        self._insert(b, len(self._keys[b]), key, item, rank)

    def insert_before_ge(self, key: float, item: int, rank: int = 0) -> None:
        """Insert ``item`` before the first queued item with key >= ``key``."""
        for b, top in enumerate(self._max):
            if top >= key:
                keys = self._keys[b]
                j = 0
                while keys[j] < key:
                    j += 1
                self._insert(b, j, key, item, rank)
                return
        self.append(key, item, rank)

    def insert_before_lower_rank(self, rank: int, key: float, item: int) -> None:
        """Insert ``item`` before the first queued item with rank < ``rank``."""
        for b, low in enumerate(self._rmin):
            if low < rank:
                ranks = self._ranks[b]
                j = 0
                while ranks[j] >= rank:
                    j += 1
                self._insert(b, j, key, item, rank)
                return
        self.append(key, item, rank)

    def pop(self) -> int:
        """Remove and return the head item."""
        if not self._len:
            raise IndexError("pop from an empty queue")
        keys, ranks, items = self._keys[0], self._ranks[0], self._items[0]
        key, rank, item = keys.pop(0), ranks.pop(0), items.pop(0)
        self._len -= 1
        if not keys:
            del self._keys[0], self._ranks[0], self._items[0], self._max[0], self._rmin[0]
        else:
            if key == self._max[0]:
                self._max[0] = max(keys)
            if rank == self._rmin[0]:
                self._rmin[0] = min(ranks)
        return item


def check_orders(instance: Instance, orders: Orders) -> None:
    """Raise :class:`InputError` unless ``orders`` gives every chunk one of its
    collective's orders (a permutation of its dimensions of size >= 2; the
    ascending one for an all-to-all).
    """
    for c, k in instance.chunk_ids:
        check_order(instance, c, k, orders.get((c, k)))


def check_order(instance: Instance, c: int, k: int, order: Sequence[int] | None) -> None:
    """Raise :class:`InputError` unless ``order`` is one chunk ``(c, k)`` may take (see :func:`check_orders`)."""
    if order is None:
        raise InputError(f"orders[{c}, {k}]", "missing: every chunk needs an order")
    dims = instance.active_dims[c]
    if sorted(order) != list(dims):
        raise InputError(f"orders[{c}, {k}]", f"must be a permutation of {list(dims)}, got {list(order)}")
    if instance.collectives[c].kind is Kind.ALL_TO_ALL and tuple(order) != dims:
        raise InputError(f"orders[{c}, {k}]", f"an all-to-all takes the ascending order {list(dims)}")


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
    plan: Sequence[Sequence[PhaseSpec]],
    starts: Sequence[Sequence[float]],
    compute_starts: Sequence[float],
    deadline: Deadline | None = None,
    durations: Sequence[Sequence[float]] | None = None,
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
    computes = tuple(
        ComputeSchedule(j, start, start + task.duration_ns)
        for j, (task, start) in enumerate(zip(instance.computes, compute_starts))
    )
    return Schedule(tuple(chunks), computes)


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


Engine = Literal["auto", "core", "python"]


def _core_orders(instance: Instance, orders: Orders | Planner, engine: Engine) -> tuple[bool, Orders | None]:
    """Whether the compiled core runs these orders, and the orders it takes (``None``: Themis's planner)."""
    if engine == "python" or not simcore.available():
        if engine == "core":
            raise RuntimeError("the compiled simulator core is not available")
        return False, None
    if not callable(orders):
        return True, orders
    tracker = getattr(orders, "__self__", None)
    if isinstance(tracker, ThemisTracker) and tracker.fresh and simcore.plannable(instance):
        return True, None
    if engine == "core":
        raise RuntimeError("the compiled simulator core plans only with a fresh ThemisTracker")
    return False, None


def _core_builder(instance: Instance, run: simcore.CoreRun) -> Callable[..., Schedule]:
    """The schedule of a run of the core: its chunks are built when first asked for."""

    def build(deadline: Deadline | None = None) -> Schedule:
        computes = tuple(
            ComputeSchedule(j, start, start + task.duration_ns)
            for j, (task, start) in enumerate(zip(instance.computes, run.compute_starts))
        )
        return Schedule.lazy(
            lambda: _build(instance, run.orders(instance), run.plan(), run.phase_starts(), ()).chunks,
            computes,
            run.schedule_makespan,
            run.busy_ns,
            run.collective_ends,
            lambda: run.columns(instance),
            lambda: run.orders(instance),
        )

    return build


def simulate(
    instance: Instance,
    orders: Orders | Planner,
    intra: Intra | str = Intra.FIFO,
    deadline: Deadline | None = None,
    *,
    baseline: bool = False,
    engine: Engine = "auto",
) -> Schedule:
    """Time every task's phases and compute under an intra-dimension policy.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk); or a planner
        ``(collective, release_ns) -> one order per chunk`` called when each
        collective is released (Themis's tracker plans this way).
    intra
        ``fifo`` or ``scf``.
    deadline
        When to give up (checked every few thousand events).
    baseline
        Cut all-reduces into phases as the baseline does (under
        ``local_bw_aware`` its last dimension runs one all-reduce phase).
    engine
        ``auto``: the compiled core (:mod:`themis_opt.simcore`) for fixed
        orders and for a fresh :class:`~themis_opt.policies.ThemisTracker`'s
        ``plan`` (which it leaves untouched), else Python; ``core`` or
        ``python`` to choose (the same schedule either way).

    Returns
    -------
    Schedule
        The timed schedule; dimensions never idle while a phase waits for
        them, nor the compute unit while a compute task is ready.

    Raises
    ------
    OutOfTime
        If ``deadline`` passes first.
    InputError
        If ``orders`` misses a chunk or gives one an order it cannot take.
    """
    deadline = deadline or Deadline()
    in_core, core_orders = _core_orders(instance, orders, engine)
    if not callable(orders) and not in_core:  # the core checks each distinct order as it meets it
        check_orders(instance, orders)
    with _gc_paused():
        if in_core:
            run = simcore.run(instance, core_orders, Intra(intra), deadline, baseline=baseline)
            build = _core_builder(instance, run)
        else:
            _, build = _simulate(instance, orders, Intra(intra), deadline, {}, baseline)
        return build(deadline=deadline)


PhaseMemo = dict[tuple[int, int, tuple[int, ...]], tuple[PhaseSpec, ...]]


def simulate_makespan(
    instance: Instance, orders: Orders, intra: Intra, deadline: Deadline, memo: PhaseMemo, engine: Engine = "auto"
) -> tuple[float, Callable[..., Schedule]]:
    """:func:`simulate`'s makespan, and a function that builds its schedule.

    For searches that time many assignments and keep few: the schedule is
    built only when asked, and ``memo`` (an empty dict to begin with, then
    passed again for the same instance) keeps every chunk's phases from run
    to run in Python (the core keeps its own per instance). ``orders`` are
    trusted (:func:`check_orders` is not run).
    """
    if _core_orders(instance, orders, engine)[0]:
        run = simcore.run(instance, orders, intra, deadline)
        return run.makespan, _core_builder(instance, run)
    with _gc_paused():
        return _simulate(instance, orders, intra, deadline, memo)


class AssignmentTimer:
    """Times many assignments of one instance's chunks to orders, for the searches.

    Each chunk's order is a small integer, its *token* (:meth:`token`), and an
    assignment an array of tokens in ``instance.chunk_ids`` order, so a search
    copies and swaps arrays rather than dicts of orders. In the compiled core a
    token is the order's phase table, handed to the core as it stands; in
    Python it stands for the order, and the assignment is simulated as
    :func:`simulate_makespan` does. Tokens are numbered in the order they are
    first asked for, so two timers of one instance asked the same orders in
    the same order agree on them.

    Parameters
    ----------
    instance
        The instance.
    engine
        As :func:`simulate`'s.
    snapshots
        How many snapshots of the base's run (:meth:`adopt`) the compiled core keeps at most
        (``search.snapshots``).
    """

    def __init__(self, instance: Instance, engine: Engine = "auto", snapshots: int = SearchParams().snapshots):
        self.instance = instance
        self.engine: Engine = engine
        self._core = simcore.TableTimer(instance, snapshots) if _core_orders(instance, {}, engine)[0] else None
        self._orders: dict[int, tuple[int, ...]] = {}  # each token's order
        self._known: dict[tuple[int, int, tuple[int, ...]], int] = {}  # (collective, chunk bytes, order) -> token
        self.made: list[tuple[int, int, tuple[int, ...]]] = []  # every (c, k, order) that made a token, in order
        self._memo: PhaseMemo = {}

    def token(self, c: int, k: int, order: Sequence[int] | None) -> int:
        """The token of chunk ``(c, k)`` taking ``order`` (checked as :func:`check_orders` does)."""
        if order is None:
            check_order(self.instance, c, k, order)  # raises: every chunk needs an order
        key = (c, self.instance.collectives[c].bytes_of(k), tuple(order or ()))
        found = self._known.get(key)
        if found is None:
            check_order(self.instance, c, k, order)
            found = self._core.table(c, key[1], key[2]) if self._core is not None else len(self._orders)
            self._known[key] = found
            self._orders[found] = key[2]
            self.made.append((c, k, key[2]))
        return found

    def tokens(self, orders: Orders) -> array[int]:
        """The assignment ``orders`` as tokens."""
        return array("i", [self.token(c, k, orders.get((c, k))) for c, k in self.instance.chunk_ids])

    def orders(self, tokens: Sequence[int]) -> Orders:
        """The orders that ``tokens`` stand for."""
        return {cid: self._orders[x] for cid, x in zip(self.instance.chunk_ids, tokens)}

    def makespan(self, tokens: array[int], intra: Intra, deadline: Deadline, cutoff: float = math.inf) -> float:
        """:func:`simulate_makespan`'s makespan of the assignment ``tokens``; any makespan
        above ``cutoff`` may come back as ``math.inf`` (the compiled core stops as soon as
        it is sure of that: some dimension's work left would end past it).
        """
        if len(tokens) != len(self.instance.chunk_ids):  # the core would read past them
            raise ValueError(f"{len(tokens)} tokens for {len(self.instance.chunk_ids)} chunks")
        if self._core is not None:
            return self._core.makespan(tokens, intra, deadline, cutoff)
        with _gc_paused():
            return _simulate(self.instance, self.orders(tokens), intra, deadline, self._memo)[0]

    def adopt(self, tokens: array[int], intra: Intra, deadline: Deadline) -> None:
        """Make ``tokens`` under ``intra`` the assignment that later makespans are timed
        from: in the compiled core, a run that changes only collectives released after
        some of the base's snapshots resumes from the last of them (the same makespan,
        less work; see :class:`~themis_opt.simcore.TableTimer`). Nothing in Python.

        Raises
        ------
        OutOfTime
            If ``deadline`` passes while ``tokens`` is timed again (when it was not the last run).
        """
        if self._core is not None:
            self._core.adopt(tokens, intra, deadline)

    @property
    def walks_in_core(self) -> bool:
        """Whether :meth:`walk` can run (the compiled core times this instance)."""
        return self._core is not None

    def walk(
        self,
        draws: simcore.MoveDraws,
        rules: simcore.WalkRules,
        state: simcore.WalkState,
        make: Callable[[int, int, list[int]], int],
    ) -> str:
        """A search's moves run in the compiled core (:meth:`simcore.TableTimer.walk`).

        Raises
        ------
        ValueError
            If the core does not time this instance (:attr:`walks_in_core`).
        """
        if self._core is None:
            raise ValueError("a walk in the core needs the compiled core")
        return self._core.walk(draws, rules, state, make)

    def counts(self) -> tuple[int, int, int, int]:
        """The compiled core's runs, runs resumed from the base, events handled and events the
        resumed runs did not handle again (see :meth:`simcore.TableTimer.counts`); zeros in Python.
        """
        return self._core.counts() if self._core is not None else (0, 0, 0, 0)

    def schedule(self, tokens: Sequence[int], intra: Intra, deadline: Deadline | None = None) -> Schedule:
        """The schedule of the assignment ``tokens`` (simulated again)."""
        orders = self.orders(tokens)
        return simulate_makespan(self.instance, orders, intra, deadline or Deadline(), self._memo, self.engine)[1]()


_PHASE_DONE, _COMPUTE_DONE, _RELEASE = 0, 1, 2  # same-instant events in this order


def _simulate(
    instance: Instance,
    orders: Orders | Planner,
    intra: Intra,
    deadline: Deadline,
    memo: PhaseMemo,
    baseline: bool = False,
) -> tuple[float, Callable[..., Schedule]]:
    tasks = instance.tasks
    collectives = instance.collectives
    ids = instance.chunk_ids
    num_dims = instance.network.num_dims
    index = instance.task_index
    # task -> (is collective, collective or compute index)
    kind_of: list[tuple[bool, int]] = []
    counts = [0, 0]
    for task in tasks:
        is_coll = isinstance(task, Collective)
        kind_of.append((is_coll, counts[0] if is_coll else counts[1]))
        counts[0 if is_coll else 1] += 1
    task_of_coll = [t for t, (is_coll, _) in enumerate(kind_of) if is_coll]
    task_of_compute = [t for t, (is_coll, _) in enumerate(kind_of) if not is_coll]
    successors: list[list[tuple[int, float]]] = [[] for _ in tasks]
    pending = [len(task.after) for task in tasks]
    earliest = [task.issue_ns for task in tasks]
    for t, task in enumerate(tasks):
        for dep in task.after:
            successors[index[dep.task]].append((t, dep.lag_ns))
    first_chunk = [0] * len(collectives)
    for c in range(1, len(collectives)):
        first_chunk[c] = first_chunk[c - 1] + collectives[c - 1].chunks
    left = [coll.chunks for coll in collectives]
    priority = [coll.priority for coll in collectives]

    plan: list[tuple[PhaseSpec, ...]] = [()] * len(ids)
    chosen: dict[tuple[int, int], tuple[int, ...]] = {}
    starts: list[list[float]] = [[] for _ in ids]
    compute_starts = [0.0] * len(instance.computes)
    next_phase = [0] * len(ids)
    fifo: list[list[tuple[int, int, int]]] = [[] for _ in range(num_dims)]
    scf: list[ScfQueue] = [ScfQueue() for _ in range(num_dims)]
    busy = [0] * num_dims  # phases running on each dimension
    capacity = instance.network.active_chunks
    compute_busy = False
    compute_ready: list[int] = []
    seq = 0
    events: list[tuple[float, int, int, int]] = [
        (earliest[t], _RELEASE, t, 0) for t in range(len(tasks)) if not pending[t]
    ]
    heapq.heapify(events)
    now = 0.0
    held_by_collective = [False] * len(tasks)  # released by a collective's end (it waited for one)
    waited = False  # the compute unit has waited for a collective

    def end_task(t: int) -> None:
        for dependent, lag in successors[t]:
            if now + lag > earliest[dependent]:
                earliest[dependent] = now + lag
                held_by_collective[dependent] = kind_of[t][0]
            pending[dependent] -= 1
            if not pending[dependent]:
                heapq.heappush(events, (earliest[dependent], _RELEASE, dependent, 0))

    def release(c: int) -> list[int]:
        coll = collectives[c]
        planned = orders(c, now, waited) if callable(orders) else [orders[(c, k)] for k in range(coll.chunks)]
        chunks = []
        for k, order in enumerate(planned):
            order = tuple(order)
            if callable(orders):
                check_order(instance, c, k, order)
            key = (c, coll.bytes_of(k), order)
            if key not in memo:
                memo[key] = chunk_phases(instance, c, key[1], order, merges(instance, c, baseline))
            i = first_chunk[c] + k
            plan[i] = memo[key]
            chosen[(c, k)] = order
            chunks.append(i)
        return chunks

    def stays(i: int) -> bool:
        """Whether chunk ``i``'s next phase runs on the dimension of the phase it just ended."""
        p = next_phase[i]
        return p > 0 and plan[i][p - 1].dim == plan[i][p].dim

    def start_head(d: int) -> None:
        if busy[d] >= capacity:
            return
        if intra is Intra.FIFO:
            if not fifo[d]:
                return
            i = heapq.heappop(fifo[d])[2]
        else:
            if not scf[d]:
                return
            i = scf[d].pop()
        starts[i].append(now)
        busy[d] += 1
        heapq.heappush(events, (now + plan[i][next_phase[i]].duration, _PHASE_DONE, d, i))

    handled = 0
    while events:
        now = events[0][0]
        arrivals: list[int] = []
        freed: list[int] = []
        while events and events[0][0] == now:
            _, what, a, b = heapq.heappop(events)
            handled += 1
            if not handled & 4095:
                deadline.check("simulator")
            if what == _PHASE_DONE:
                busy[a] -= 1
                freed.append(a)
                next_phase[b] += 1
                if next_phase[b] < len(plan[b]):
                    arrivals.append(b)
                else:
                    c = ids[b][0]
                    left[c] -= 1
                    if not left[c]:
                        end_task(task_of_coll[c])
            elif what == _COMPUTE_DONE:
                compute_busy = False
                end_task(task_of_compute[a])
            else:
                is_coll, n = kind_of[a]
                if is_coll:
                    arrivals += release(n)
                else:
                    heapq.heappush(compute_ready, n)
        # (collective, chunk) order, except that a chunk going on on the dimension it frees goes first:
        # ASTRA-sim queues its next phase there before that dimension picks the next one
        for i in sorted(
            arrivals,
            key=lambda i: (not (next_phase[i] and plan[i][next_phase[i] - 1].dim == plan[i][next_phase[i]].dim), i),
        ):
            p = next_phase[i]
            spec = plan[i][p]
            c = ids[i][0]
            if intra is Intra.FIFO:
                heapq.heappush(fifo[spec.dim], (-priority[c], seq, i))
                seq += 1
            elif spec.op in (Op.ALL_TO_ALL, Op.ALL_REDUCE):
                scf[spec.dim].insert_before_lower_rank(priority[c], max(spec.bytes_in, spec.bytes_out), i)
            elif p == len(plan[i]) - 2:  # second-to-last: exactly one phase after it
                scf[spec.dim].append(max(spec.bytes_in, spec.bytes_out), i, priority[c])
            else:
                scf[spec.dim].insert_before_ge(max(spec.bytes_in, spec.bytes_out), i, priority[c])
            start_head(spec.dim)  # an idle dimension starts at once
        # an idle dimension has an empty queue (arrivals start theirs at once): only freed ones may start
        for d in sorted(freed):
            start_head(d)
        if not compute_busy and compute_ready:
            j = heapq.heappop(compute_ready)
            waited = waited or held_by_collective[task_of_compute[j]]
            compute_starts[j] = now
            compute_busy = True
            heapq.heappush(events, (now + instance.computes[j].duration_ns, _COMPUTE_DONE, j, 0))
    return now, functools.partial(_build, instance, chosen, plan, starts, compute_starts)


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


def compute_sequence_of(schedule: Schedule) -> list[int]:
    """The compute tasks of ``schedule`` in the order the compute unit runs them."""
    return [c.compute for c in sorted(schedule.computes, key=lambda c: (c.start_ns, c.end_ns, c.compute))]


def left_shift(
    instance: Instance,
    orders: Orders,
    sequences: Mapping[int, Sequence[tuple[int, int]]],
    compute_sequence: Sequence[int] = (),
    *,
    durations: Sequence[Sequence[float]] | None = None,
    compute_durations: Sequence[float] | None = None,
    issues: Sequence[float] | None = None,
    lags: Sequence[Sequence[float]] | None = None,
) -> tuple[list[list[float]], list[float]]:
    """Earliest start of every phase and compute task given fixed orders and sequences.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk).
    sequences
        Per dimension, the phases it serves in that order, each as
        (chunk index in ``instance.chunk_ids``, phase position in the chunk).
    compute_sequence
        The compute tasks (indices) in the order the compute unit runs them.
    durations, compute_durations, issues, lags
        Per chunk the duration of each phase, per compute task its duration,
        per task its issue time and the lag of each of its dependencies, all
        in one unit; ``None`` takes the instance's (pass rounded values to
        plan in integer time).

    Returns
    -------
    tuple
        Per chunk (in ``instance.chunk_ids`` order) each phase's start, and
        each compute task's start.

    Raises
    ------
    InputError
        If the sequences miss or repeat a phase or a compute task, or
        contradict the chunk orders or the dependencies.
    """
    check_orders(instance, orders)
    plan = phase_plan(instance, orders)
    tasks = instance.tasks
    dur = durations if durations is not None else [[s.duration for s in p] for p in plan]
    cdur = compute_durations if compute_durations is not None else [t.duration_ns for t in instance.computes]
    issue = issues if issues is not None else [t.issue_ns for t in tasks]
    lag = lags if lags is not None else [[d.lag_ns for d in t.after] for t in tasks]
    ids = instance.chunk_ids
    # nodes: phases, then compute tasks, then one release and one end per task
    offset = [0] * (len(ids) + 1)
    for i, chunk_plan in enumerate(plan):
        offset[i + 1] = offset[i] + len(chunk_plan)
    phases = offset[-1]
    computes = len(instance.computes)
    release0, end0 = phases + computes, phases + computes + len(tasks)
    size = end0 + len(tasks)
    succ: list[list[tuple[int, float]]] = [[] for _ in range(size)]
    base = [0.0] * size
    length = [0.0] * size
    task_of_coll = [t for t, task in enumerate(tasks) if isinstance(task, Collective)]
    task_of_compute = [t for t, task in enumerate(tasks) if not isinstance(task, Collective)]
    seen_phase = [False] * phases
    capacity = instance.network.active_chunks
    lane_of: dict[int, int] = {}  # with several phases at once: a phase node's dimension
    for d, seq in sequences.items():
        for pos, (i, p) in enumerate(seq):
            if not (0 <= i < len(ids) and 0 <= p < len(plan[i])) or plan[i][p].dim != d:
                raise InputError(f"sequences[{d}][{pos}]", f"no phase ({i}, {p}) runs on dimension {d}")
            if seen_phase[offset[i] + p]:
                raise InputError(f"sequences[{d}][{pos}]", f"phase ({i}, {p}) is sequenced twice")
            seen_phase[offset[i] + p] = True
            if capacity > 1:
                lane_of[offset[i] + p] = d
            if pos:
                j, q = seq[pos - 1]
                # one at a time: after the one before ends; several: no earlier than it starts (below:
                # and once fewer than ``capacity`` of the ones before are still running)
                gap = 0.0 if capacity == 1 else -math.inf
                succ[offset[j] + q].append((offset[i] + p, gap))
    if not all(seen_phase):
        raise InputError("sequences", f"must sequence all {phases} phases, got {sum(seen_phase)}")
    if sorted(compute_sequence) != list(range(computes)):
        raise InputError("compute_sequence", f"must list every compute task once, got {list(compute_sequence)}")
    for a, b in zip(compute_sequence, compute_sequence[1:]):
        succ[phases + a].append((phases + b, 0.0))
    for i, (c, _) in enumerate(ids):
        for p in range(len(plan[i])):
            length[offset[i] + p] = dur[i][p]
            if p:
                succ[offset[i] + p - 1].append((offset[i] + p, 0.0))
        succ[release0 + task_of_coll[c]].append((offset[i], 0.0))
        succ[offset[i + 1] - 1].append((end0 + task_of_coll[c], 0.0))
    for j in range(computes):
        length[phases + j] = cdur[j]
        succ[release0 + task_of_compute[j]].append((phases + j, 0.0))
        succ[phases + j].append((end0 + task_of_compute[j], 0.0))
    for t, task in enumerate(tasks):
        base[release0 + t] = issue[t]
        for k, dep in enumerate(task.after):
            succ[end0 + instance.task_index[dep.task]].append((release0 + t, lag[t][k]))
    indegree = [0] * size
    for edges in succ:
        for v, _ in edges:
            indegree[v] += 1
    start = list(base)
    stack = [v for v in range(size) if not indegree[v]]
    done = 0
    running: dict[int, list[float]] = {d: [] for d in sequences}  # the latest ends on each dimension
    while stack:
        u = stack.pop()
        done += 1
        if u in lane_of:  # every phase before it on its dimension is placed: wait for a free place
            ends = running[lane_of[u]]  # the ``capacity`` latest ends so far, least first
            if len(ends) == capacity:
                start[u] = max(start[u], ends[0])
                heapq.heappushpop(ends, start[u] + length[u])
            else:
                heapq.heappush(ends, start[u] + length[u])
        end = start[u] + length[u]
        for v, extra in succ[u]:
            if extra == -math.inf:  # start after start
                if start[u] > start[v]:
                    start[v] = start[u]
            elif end + extra > start[v]:
                start[v] = end + extra
            indegree[v] -= 1
            if not indegree[v]:
                stack.append(v)
    if done != size:
        raise InputError("sequences", "contradict the chunk orders or the dependencies (a cycle of precedences)")
    phase_starts = [[start[offset[i] + p] for p in range(len(plan[i]))] for i in range(len(ids))]
    return phase_starts, [start[phases + j] for j in range(computes)]


def retime(
    instance: Instance,
    orders: Orders,
    sequences: Mapping[int, Sequence[tuple[int, int]]],
    compute_sequence: Sequence[int] = (),
) -> Schedule:
    """The left-shifted schedule of fixed orders and sequences, with the cost
    model's durations (see :func:`left_shift`).
    """
    starts, compute_starts = left_shift(instance, orders, sequences, compute_sequence)
    return _build(instance, orders, phase_plan(instance, orders), starts, compute_starts)
