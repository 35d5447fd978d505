"""Schedules as Chrome trace-event JSON, the timeline format Perfetto and ``chrome://tracing`` open.

One process per NPU the instance stands for (one per pipeline stage), with a
track per dimension and one for the compute unit; a slice per phase, named by its collective and chunk, and per compute
task. Where a dimension runs several chunks at once (``active_chunks``), it
gets one track per lane, each slice on the first lane free at its start, so
that no two slices of a track overlap. Times are in microseconds, as the
format wants (``displayTimeUnit`` asks the viewer to show nanoseconds).
"""

from __future__ import annotations

import heapq
from typing import Any

from themis_opt.instance import Instance
from themis_opt.schedule import Schedule

COMPUTE_TRACK = 1_000_000  # the compute unit's track id, after every dimension's lanes


def _lanes(intervals: list[tuple[float, float, int]]) -> dict[int, int]:
    """Each interval's lane (by its index): the lowest lane free at its start (ends free at once)."""
    free: list[int] = []  # lanes whose last slice has ended, lowest first
    running: list[tuple[float, int]] = []  # (end, lane)
    lanes: dict[int, int] = {}
    used = 0
    for start, end, i in sorted(intervals):
        while running and running[0][0] <= start:
            heapq.heappush(free, heapq.heappop(running)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, used = used, used + 1
        lanes[i] = lane
        heapq.heappush(running, (end, lane))
    return lanes


def _track(dim: int, lane: int) -> int:
    return dim * 1000 + lane


def _named(pid: int, tid: int, name: str, sort_index: int) -> list[dict[str, Any]]:
    """The metadata events that name track ``tid`` of process ``pid`` and place it."""
    return [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}},
        {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": sort_index}},
    ]


def trace_events(schedule: Schedule, instance: Instance | None = None, name: str = "schedule") -> dict[str, Any]:
    """The trace-event document of ``schedule`` (e.g. a result's).

    Parameters
    ----------
    schedule
        The schedule.
    instance
        The instance the schedule is of, for the collectives' ids and kinds,
        the compute tasks' ids and the dimensions' names and sizes; without
        it, they go by their numbers.
    name
        The process's name when there is no instance (the instance's name otherwise).

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ns", ...}``: a metadata
        event naming each track, then one complete (``"X"``) event per phase
        and per compute task, ``ts`` and ``dur`` in microseconds.
    """
    collectives = instance.collectives if instance is not None else None
    dims = instance.network.dimensions if instance is not None else None
    stages = instance.num_stages if instance is not None else 1
    title = instance.name if instance is not None else name
    phases: dict[tuple[int, int], list[tuple[float, float, int]]] = {}  # (stage, dimension) -> its phases
    flat: list[tuple[int, int, Any]] = []
    for chunk in schedule.chunks:
        stage = collectives[chunk.collective].stage if collectives is not None else 0
        for phase in chunk.phases:
            phases.setdefault((stage, phase.dim), []).append((phase.start_ns, phase.end_ns, len(flat)))
            flat.append((chunk.collective, chunk.chunk, phase))
    events: list[dict[str, Any]] = []
    for stage in range(stages):  # a process per pipeline stage, a thread per dimension and the compute unit
        label = title if stages == 1 else f"{title}: stage {stage} (NPU {instance.stage_npu(stage)})"  # type: ignore[union-attr]
        events.append({"name": "process_name", "ph": "M", "pid": stage, "args": {"name": label}})
    slices: list[dict[str, Any]] = []
    for stage, d in sorted(phases):
        lanes = _lanes(phases[(stage, d)])
        label = f"dim {d}"
        if dims is not None:
            label = f"{dims[d].name or label} ({dims[d].topology.value}, {dims[d].size} NPUs)"
        for lane in sorted(set(lanes.values())):
            suffix = f" lane {lane}" if len(set(lanes.values())) > 1 else ""
            events += _named(stage, _track(d, lane), label + suffix, d)
        for i, lane in lanes.items():
            c, k, phase = flat[i]
            coll = collectives[c] if collectives is not None else None
            named = coll.id if coll is not None and coll.id else f"c{c}"
            slices.append(
                {
                    "name": f"{named} chunk {k}",
                    "cat": phase.op.value,
                    "ph": "X",
                    "pid": stage,
                    "tid": _track(d, lane),
                    "ts": phase.start_ns / 1000.0,
                    "dur": (phase.end_ns - phase.start_ns) / 1000.0,
                    "args": {
                        "collective": named,
                        **({"kind": coll.kind.value} if coll is not None else {}),
                        "chunk": k,
                        "op": phase.op.value,
                        "bytes_in": phase.bytes_in,
                        "bytes_out": phase.bytes_out,
                        "start_ns": phase.start_ns,
                        "end_ns": phase.end_ns,
                    },
                }
            )
    computing: set[int] = set()
    for run in schedule.computes:
        task = instance.computes[run.compute] if instance is not None else None
        stage = task.stage if task is not None else 0
        if stage not in computing:
            computing.add(stage)
            events += _named(stage, COMPUTE_TRACK, "compute", -1)
        slices.append(
            {
                "name": (task.id if task is not None else "") or f"compute {run.compute}",
                "cat": "compute",
                "ph": "X",
                "pid": stage,
                "tid": COMPUTE_TRACK,
                "ts": run.start_ns / 1000.0,
                "dur": (run.end_ns - run.start_ns) / 1000.0,
                "args": {"start_ns": run.start_ns, "end_ns": run.end_ns},
            }
        )
    slices.sort(key=lambda e: (e["ts"], e["pid"], e["tid"]))
    return {
        "traceEvents": events + slices,
        "displayTimeUnit": "ns",
        "otherData": {"instance": instance.name if instance else name, "makespan_ns": schedule.makespan},
    }
