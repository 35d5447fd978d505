"""Bounds that see the task graph: every resource (each dimension, the compute unit) as one machine
whose jobs carry a head and a tail from the graph, relaxed to preemption (Jackson's preemptive
schedule), in O(n log n).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

from themis_opt.bounds.formulas import SAFETY, _costs
from themis_opt.budget import Deadline
from themis_opt.instance import Compute, Instance
from themis_opt.sim.model import ClassCost, heads_and_tails, per_collective, shortest_durations

Job = tuple[float, float, float]  # (release, work, tail), ns


def preemptive_makespan(jobs: Iterable[Job]) -> float:
    """The least ``max(end + tail)`` of the jobs on one machine that may interrupt any job at any time
    (each job starts no earlier than its release; work in ns of the machine's time).

    Jackson's preemptive schedule attains it: at every moment run the released job with the largest
    tail, interrupting the running one when a job with a larger tail is released. O(n log n): a job
    is interrupted only at a release. ``0.0`` without jobs.
    """
    pending = sorted(jobs)
    ready: list[tuple[float, float]] = []  # (-tail, work left)
    best = 0.0
    now = 0.0
    i = 0
    while i < len(pending) or ready:
        if not ready:
            now = max(now, pending[i][0])
        while i < len(pending) and pending[i][0] <= now:
            _, work, tail = pending[i]
            heapq.heappush(ready, (-tail, work))
            i += 1
        negative, work = heapq.heappop(ready)
        following = pending[i][0] if i < len(pending) else float("inf")
        if now + work <= following:
            now += work
            best = max(best, now - negative)
        else:  # interrupted by the next release: the rest waits with its tail
            heapq.heappush(ready, (negative, work - (following - now)))
            now = following
    return best


def resource_jobs(
    instance: Instance,
    heads: tuple[float, ...],
    tails: tuple[float, ...],
    costs: Sequence[ClassCost],
) -> list[list[Job]]:
    """Per resource (each dimension in order, then the compute unit), its jobs with heads and tails
    from the task graph (per task ``heads`` and ``tails``, see :func:`~themis_opt.sim.model.heads_and_tails`; per chunk
    class its least ``costs``).

    A chunk class is one job on each dimension it crosses: its chunks' least work there (over the
    phases run at once), released at its collective's head plus its least time before its first
    phase there, with its least time after its last phase there plus its collective's tail. A
    compute task is one job on the compute unit: its head, duration and tail. Every quantity is at
    its least over the orders, each on its own (no order need attain them all), so every schedule
    runs each resource's jobs within them.
    """
    released, delivered = per_collective(instance, heads), per_collective(instance, tails)
    num_dims = instance.network.num_dims
    jobs: list[list[Job]] = [[] for _ in range(num_dims)]
    for cls, cost in zip(instance.chunk_classes, costs):
        c = cls.collective
        for d in range(num_dims):
            head, tail = cost.head[d], cost.tail[d]
            if head is not None and tail is not None:
                jobs[d].append((released[c] + head, len(cls.chunks) * cost.busy[d], tail + delivered[c]))
    jobs.append(
        [(heads[t], task.duration_ns, tails[t]) for t, task in enumerate(instance.tasks) if isinstance(task, Compute)]
    )
    return jobs


def jackson_value(jobs: Sequence[Sequence[Job]]) -> float:
    """The largest :func:`preemptive_makespan` over the resources' ``jobs``, shrunk by a relative 1e-8
    (float sums).
    """
    return max(preemptive_makespan(on) for on in jobs) * (1 - SAFETY)


def jackson_bound(instance: Instance, deadline: Deadline | None = None) -> float:
    """The preemptive one-machine bound with heads and tails from the task graph: the largest, over
    the resources, of :func:`preemptive_makespan` of its :func:`resource_jobs`. Past ``deadline``
    the quantities not yet known count as 0 (valid, weaker).
    """
    deadline = deadline or Deadline()
    shortest = shortest_durations(instance, deadline)
    heads, tails = heads_and_tails(instance, shortest, deadline)
    return jackson_value(resource_jobs(instance, heads, tails, _costs(instance, deadline)))
