"""The simulator's rules, and its engine in Python: every chunk's dimension order into a timed schedule.

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
* ``tail`` (this project's, not ASTRA-sim's; the searches time candidates
  under it): the waiting phase with the longest tail goes first, the tail
  being the chunk's phases after it plus its collective's tail in the task
  graph (the least time from the collective's end to the makespan, from the
  bounds' heads and tails); ties by arrival, priorities ignored. It is
  Jackson's rule (the longest delivery time first), which meets the
  one-machine bound with heads and tails when phases could be preempted.

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

With the network's ``serial_phase_ends`` (ASTRA-sim 1.0, whose
``proceed_to_next_vnet_baseline`` runs once for each phase that ends, in the
order their final events fire) the phases that end at one instant are
instead handled one at a time: reduce-scatters last (the reduction of their
last step registers their final event after the others'), the others in the
order they started. Each queues its chunk's next phase, then its dimension
(one place freed) starts the head of its queue, then the next phase's
dimension starts its head if it has room. The released collectives' chunks
are queued after them, as above.

Orders are either fixed per chunk (a mapping) or chosen by a planner when a
collective is released (Themis plans then, from the loads so far).

With several pipeline stages every stage has its own dimensions and its own
compute unit: a phase runs on its collective's stage's dimension (the lane
``stage * num_dims + dim``), a compute task on its stage's unit, and the
rules above hold per lane and per unit.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Sequence

from themis_opt.budget import Deadline
from themis_opt.cost import PhaseSpec, merges
from themis_opt.instance import Instance, Op
from themis_opt.orders import Orders, Planner, check_order
from themis_opt.schedule import ChunkSchedule, ComputeSchedule, Phase, Schedule
from themis_opt.sim.model import chunk_plan, collective_tails, task_graph
from themis_opt.sim.queues import SCF_AS_FIFO, queue_policy

PhaseMemo = dict[tuple[int, int, tuple[int, ...]], tuple[PhaseSpec, ...]]


@functools.lru_cache(maxsize=4096)
def later_durations(phases: tuple[PhaseSpec, ...]) -> tuple[float, ...]:
    """Per phase of a chunk's ``phases``, the durations of the phases after it, summed first to last
    (the tail policy's key within a chunk; the compiled core reads the same sums from its tables).
    """
    rests = []
    for p in range(len(phases)):
        rest = 0.0
        for later in phases[p + 1 :]:
            rest += later.duration
        rests.append(rest)
    return tuple(rests)


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


def phase_plan(instance: Instance, orders: Orders) -> list[tuple[PhaseSpec, ...]]:
    """Every chunk's untimed phases, in ``instance.chunk_ids`` order."""
    collectives = instance.collectives
    return [chunk_plan(instance, c, collectives[c].bytes_of(k), tuple(orders[(c, k)])) for c, k in instance.chunk_ids]


def build_schedule(
    instance: Instance,
    orders: Orders,
    plan: Sequence[Sequence[PhaseSpec]],
    starts: Sequence[Sequence[float]],
    compute_starts: Sequence[float],
    deadline: Deadline | None = None,
    durations: Sequence[Sequence[float]] | None = None,
) -> Schedule:
    """The schedule of every chunk's ``plan`` started at ``starts`` (in ``instance.chunk_ids`` order)."""
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


_PHASE_DONE, _COMPUTE_DONE, _RELEASE = 0, 1, 2  # same-instant events in this order


def run_python(
    instance: Instance,
    orders: Orders | Planner,
    intra: str,
    deadline: Deadline,
    memo: PhaseMemo,
    baseline: bool = False,
) -> tuple[float, Callable[..., Schedule]]:
    """One run in Python: the makespan, and a function that builds the schedule.

    ``intra`` names a policy of :data:`~themis_opt.sim.queues.QUEUE_POLICIES`;
    ``orders`` are fixed or a planner (checked as it plans); ``memo`` keeps
    each chunk's phases from run to run of one instance; ``baseline`` cuts
    all-reduces as the baseline does.
    """
    tasks = instance.tasks
    collectives = instance.collectives
    ids = instance.chunk_ids
    num_dims = instance.network.num_dims
    num_lanes = instance.num_lanes
    graph = task_graph(instance)  # the compiled model's task graph, as the core reads it
    is_coll, which = graph["is_coll"].tolist(), graph["which"].tolist()
    task_of_coll, task_of_compute = graph["task_of_coll"].tolist(), graph["task_of_compute"].tolist()
    succ_ptr, succ_task, succ_lag = graph["succ_ptr"].tolist(), graph["succ_task"].tolist(), graph["succ_lag"].tolist()
    pending = graph["pending_in"].tolist()
    earliest = graph["issue"].tolist()
    first_chunk = graph["first_chunk"].tolist()
    left = [coll.chunks for coll in collectives]
    priority = [coll.priority for coll in collectives]
    policy = queue_policy(intra)
    heap_key, reads_tails = policy.key, policy.reads_tails
    tails = collective_tails(instance, deadline) if reads_tails else (0.0,) * len(collectives)
    lane0 = [collectives[c].stage * num_dims for c, _ in ids]  # each chunk's stage's first lane
    compute_stage = [task.stage for task in instance.computes]
    num_stages = instance.num_stages

    plan: list[tuple[PhaseSpec, ...]] = [()] * len(ids)
    rests: list[tuple[float, ...]] = [()] * len(ids)  # tail's: each chunk's later durations
    chosen: dict[tuple[int, int], tuple[int, ...]] = {}
    starts: list[list[float]] = [[] for _ in ids]
    compute_starts = [0.0] * len(instance.computes)
    next_phase = [0] * len(ids)
    fifo: list[list[tuple[float, float, int, int]]] = [[] for _ in range(num_lanes)]  # the heap policies'
    scf: list[ScfQueue] = [ScfQueue() for _ in range(num_lanes)]
    busy = [0] * num_lanes  # phases running on each stage's dimension
    capacity = instance.network.active_chunks
    serial = instance.network.serial_phase_ends
    started = [0] * len(ids)  # when each chunk's running phase started, as a count of the starts before it
    num_started = 0
    compute_busy = [False] * num_stages
    compute_ready: list[list[int]] = [[] for _ in range(num_stages)]
    seq = 0
    events: list[tuple[float, int, int, int]] = [
        (earliest[t], _RELEASE, t, 0) for t in range(len(tasks)) if not pending[t]
    ]
    heapq.heapify(events)
    now = 0.0
    held_by_collective = [False] * len(tasks)  # released by a collective's end (it waited for one)
    waited = [False] * num_stages  # each stage's compute unit has waited for a collective

    def end_task(t: int) -> None:
        for e in range(succ_ptr[t], succ_ptr[t + 1]):
            dependent, lag = succ_task[e], succ_lag[e]
            if now + lag > earliest[dependent]:
                earliest[dependent] = now + lag
                held_by_collective[dependent] = bool(is_coll[t])
            pending[dependent] -= 1
            if not pending[dependent]:
                heapq.heappush(events, (earliest[dependent], _RELEASE, dependent, 0))

    def release(c: int) -> list[int]:
        coll = collectives[c]
        planned = (
            orders(c, now, waited[coll.stage]) if callable(orders) else [orders[(c, k)] for k in range(coll.chunks)]
        )
        chunks = []
        for k, order in enumerate(planned):
            order = tuple(order)
            if callable(orders):
                check_order(instance, c, k, order)
            key = (c, coll.bytes_of(k), order)
            if key not in memo:
                memo[key] = chunk_plan(instance, c, key[1], order, merges(instance, c, baseline))
            i = first_chunk[c] + k
            plan[i] = memo[key]
            if reads_tails:
                rests[i] = later_durations(plan[i])
            chosen[(c, k)] = order
            chunks.append(i)
        return chunks

    def stays(i: int) -> bool:
        """Whether chunk ``i``'s next phase runs on the dimension of the phase it just ended."""
        p = next_phase[i]
        return p > 0 and plan[i][p - 1].dim == plan[i][p].dim

    def enqueue(i: int) -> None:
        """Queue chunk ``i``'s next phase on its lane under the intra-dimension policy."""
        nonlocal seq
        p = next_phase[i]
        spec = plan[i][p]
        c = ids[i][0]
        lane = lane0[i] + spec.dim
        if heap_key is not None:
            later = rests[i][p] if reads_tails else 0.0
            heapq.heappush(
                fifo[lane], (*heap_key(priority[c], later, tails[c], max(spec.bytes_in, spec.bytes_out)), seq, i)
            )
            seq += 1
        elif spec.op in SCF_AS_FIFO:
            scf[lane].insert_before_lower_rank(priority[c], max(spec.bytes_in, spec.bytes_out), i)
        elif p == len(plan[i]) - 2:  # second-to-last: exactly one phase after it
            scf[lane].append(max(spec.bytes_in, spec.bytes_out), i, priority[c])
        else:
            scf[lane].insert_before_ge(max(spec.bytes_in, spec.bytes_out), i, priority[c])

    def end_order(i: int) -> tuple[bool, int]:
        """Where chunk ``i``'s ended phase comes among those ending at one instant (``serial``)."""
        return plan[i][next_phase[i] - 1].op is Op.REDUCE_SCATTER, started[i]

    def start_head(d: int) -> None:  # d: a lane (stage * num_dims + dimension)
        nonlocal num_started
        if busy[d] >= capacity:
            return
        if heap_key is not None:
            if not fifo[d]:
                return
            i = heapq.heappop(fifo[d])[3]
        else:
            if not scf[d]:
                return
            i = scf[d].pop()
        starts[i].append(now)
        started[i] = num_started
        num_started += 1
        busy[d] += 1
        heapq.heappush(events, (now + plan[i][next_phase[i]].duration, _PHASE_DONE, d, i))

    handled = 0
    while events:
        now = events[0][0]
        arrivals: list[int] = []
        freed: list[int] = []
        ended: list[int] = []  # serial: the chunks whose phase ended (the lane is its dimension's)
        while events and events[0][0] == now:
            _, what, a, b = heapq.heappop(events)
            handled += 1
            if not handled & 4095:
                deadline.check("simulator")
            if what == _PHASE_DONE:
                next_phase[b] += 1
                if serial:
                    ended.append(b)
                else:
                    busy[a] -= 1
                    freed.append(a)
                if next_phase[b] < len(plan[b]):
                    if not serial:
                        arrivals.append(b)
                else:
                    c = ids[b][0]
                    left[c] -= 1
                    if not left[c]:
                        end_task(task_of_coll[c])
            elif what == _COMPUTE_DONE:
                compute_busy[compute_stage[a]] = False
                end_task(task_of_compute[a])
            else:
                n = which[a]
                if is_coll[a]:
                    arrivals += release(n)
                else:
                    heapq.heappush(compute_ready[compute_stage[n]], n)
        # serial: one ended phase at a time, reduce-scatters last, else as they started (ASTRA-sim 1.0)
        for i in sorted(ended, key=end_order) if ended else ():
            lane = lane0[i] + plan[i][next_phase[i] - 1].dim
            busy[lane] -= 1
            goes_on = next_phase[i] < len(plan[i])
            if goes_on:
                enqueue(i)
            start_head(lane)  # its dimension takes its next waiting phase
            if goes_on:
                start_head(lane0[i] + plan[i][next_phase[i]].dim)
        # (collective, chunk) order, except that a chunk going on on the dimension it frees goes first:
        # ASTRA-sim queues its next phase there before that dimension picks the next one
        for i in sorted(
            arrivals,
            key=lambda i: (not (next_phase[i] and plan[i][next_phase[i] - 1].dim == plan[i][next_phase[i]].dim), i),
        ):
            enqueue(i)
            start_head(lane0[i] + plan[i][next_phase[i]].dim)  # an idle dimension starts at once
        # an idle dimension has an empty queue (arrivals start theirs at once): only freed ones may start
        for d in sorted(freed):
            start_head(d)
        for stage in range(num_stages):
            if not compute_busy[stage] and compute_ready[stage]:
                j = heapq.heappop(compute_ready[stage])
                waited[stage] = waited[stage] or held_by_collective[task_of_compute[j]]
                compute_starts[j] = now
                compute_busy[stage] = True
                heapq.heappush(events, (now + instance.computes[j].duration_ns, _COMPUTE_DONE, j, 0))
    return now, functools.partial(build_schedule, instance, chosen, plan, starts, compute_starts)
