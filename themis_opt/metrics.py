"""What a training iteration's schedule means to its user: iteration time, exposed communication, utilisation."""

from __future__ import annotations

from dataclasses import dataclass

from themis_opt.instance import Instance, Kind
from themis_opt.schedule import Schedule
from themis_opt.sim.model import traffic_bytes


@dataclass(frozen=True)
class IterationMetrics:
    """What a training iteration's schedule means to its user (task graphs).

    Parameters
    ----------
    total_ns
        The whole run: the makespan.
    iteration_ns
        The last pass: from its first task's start to the end (the steady
        state); the whole run for a one-pass graph.
    compute_ns
        Time the compute unit is busy over the run.
    exposed_ns
        Time the compute unit waits over the run: total minus compute. The
        communication that compute could not hide.
    utilization
        Total traffic at the summed bandwidth of the dimensions used, over
        the run: the share of the network's capacity the run used.
    bubble_ns
        With pipeline stages, the part of ``exposed_ns`` the reported stage
        (the one that ends last) waits for another stage: idle time before a
        compute whose last input to arrive is a stage-to-stage send (the
        pipeline bubble, with the transfer itself); ``None`` without stages.
    """

    total_ns: float
    iteration_ns: float
    compute_ns: float
    exposed_ns: float
    utilization: float
    bubble_ns: float | None = None


def iteration_metrics(instance: Instance, schedule: Schedule) -> IterationMetrics | None:
    """The :class:`IterationMetrics` of ``schedule`` (``None`` for an instance without compute)."""
    if not instance.computes or schedule.makespan <= 0:
        return None
    total = schedule.makespan
    compute = schedule.compute_busy_ns
    bubble = None
    if instance.num_stages > 1:  # the stage that ends last: its own compute (what ASTRA-sim 2.x reports for its NPUs)
        stage = _last_stage(instance, schedule)
        compute = sum(c.end_ns - c.start_ns for c in schedule.computes if instance.computes[c.compute].stage == stage)
        bubble = _bubble(instance, schedule, stage)
    start = 0.0
    first = dict(instance.metadata).get("iteration_start")
    if first and first in instance.task_index:
        task = instance.tasks[instance.task_index[first]]
        j = instance.computes.index(task) if task in instance.computes else -1
        runs = {c.compute: c.start_ns for c in schedule.computes}
        start = runs.get(j, 0.0)
    dims = instance.network.dimensions
    used = {d for c in range(len(instance.collectives)) for d in instance.active_dims[c]}
    rate = sum(dims[d].bytes_per_ns for d in used)
    traffic = sum(traffic_bytes(instance, c) for c in range(len(instance.collectives)))
    rate *= instance.num_stages  # every stage's NPU moves its own traffic
    utilization = traffic / rate / total if rate else 0.0
    return IterationMetrics(total, total - start, compute, total - compute, utilization, bubble)


def _last_stage(instance: Instance, schedule: Schedule) -> int:
    """The pipeline stage whose last task ends last (the first of them on a tie)."""
    ends = [0.0] * instance.num_stages
    for entry in schedule.computes:
        stage = instance.computes[entry.compute].stage
        ends[stage] = max(ends[stage], entry.end_ns)
    # each collective's end, not its chunks': a schedule of the compiled core knows them unbuilt
    for coll, end in zip(instance.collectives, schedule.collective_ends(len(instance.collectives))):
        ends[coll.stage] = max(ends[coll.stage], end)
    return max(range(instance.num_stages), key=lambda s: (ends[s], -s))


def _bubble(instance: Instance, schedule: Schedule, stage: int) -> float:
    """Idle time of ``stage``'s compute before each of its computes whose latest input is a send."""
    collective_end = schedule.collective_ends(len(instance.collectives))
    compute_end = {c.compute: c.end_ns for c in schedule.computes}
    index = {c.id: ("collective", i) for i, c in enumerate(instance.collectives)}
    index.update({c.id: ("compute", i) for i, c in enumerate(instance.computes)})
    runs = sorted((c.start_ns, c.compute) for c in schedule.computes if instance.computes[c.compute].stage == stage)
    bubble, free = 0.0, 0.0
    for start, j in runs:
        latest, sent = -1.0, False
        for after in instance.computes[j].after:
            kind, i = index[after.task]
            end = (collective_end[i] if kind == "collective" else compute_end[i]) + after.lag_ns
            if end > latest:
                latest, sent = end, kind == "collective" and instance.collectives[i].kind is Kind.SEND
        if sent and start > free:
            bubble += start - free
        free = max(free, compute_end[j])
    return bubble
