"""What a training iteration's schedule means to its user: iteration time, exposed communication, utilisation."""

from __future__ import annotations

from dataclasses import dataclass

from themis_opt.instance import Instance
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
    """

    total_ns: float
    iteration_ns: float
    compute_ns: float
    exposed_ns: float
    utilization: float


def iteration_metrics(instance: Instance, schedule: Schedule) -> IterationMetrics | None:
    """The :class:`IterationMetrics` of ``schedule`` (``None`` for an instance without compute)."""
    if not instance.computes or schedule.makespan <= 0:
        return None
    total = schedule.makespan
    compute = schedule.compute_busy_ns
    if instance.num_stages > 1:  # the stage that ends last: its own compute (what ASTRA-sim 2.x reports for its NPUs)
        compute = _last_stage_compute(instance, schedule)
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
    return IterationMetrics(total, total - start, compute, total - compute, traffic / rate / total if rate else 0.0)


def _last_stage_compute(instance: Instance, schedule: Schedule) -> float:
    """The compute time of the pipeline stage whose last task ends last."""
    ends = [0.0] * instance.num_stages
    compute = [0.0] * instance.num_stages
    for entry in schedule.computes:
        stage = instance.computes[entry.compute].stage
        ends[stage] = max(ends[stage], entry.end_ns)
        compute[stage] += entry.end_ns - entry.start_ns
    for chunk in schedule.chunks:
        stage = instance.collectives[chunk.collective].stage
        ends[stage] = max(ends[stage], chunk.end_ns)
    return compute[max(range(instance.num_stages), key=lambda s: (ends[s], -s))]
