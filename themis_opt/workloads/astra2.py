"""ASTRA-sim 2.x's run loop over a workload: one communication at a time per NPU.

ASTRA-sim 2.x issues a trace's nodes as their dependencies end, but each NPU runs one collective or
send at a time, in the order its loop reaches them; :func:`serialised` finds that order (each
collective at its baseline time alone) and chains the tasks in it, so that every method keeps
ASTRA-sim's order. The Chakra reader (:mod:`themis_opt.formats.astra.chakra`) gives the tasks;
the importer and the exporter chain them here.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence

from themis_opt.budget import Deadline
from themis_opt.errors import InputError
from themis_opt.instance import After, Collective, Compute, Instance, Kind, Network
from themis_opt.policies import baseline_orders
from themis_opt.sim import simulate
from themis_opt.sim.queues import Intra


def _run_order(tasks: Sequence[Collective | Compute], alone: dict[str, float], stages: int) -> dict[int, list[str]]:
    """Each stage's collectives and sends in the order 2.x's loop starts them, in time linear in the
    tasks (and their dependencies) up to a log: when a stage's unit (compute, or communication) is
    free, the ready task of lowest id starts; a task is ready once every task it waits for has ended.
    """
    index = {t.id: n for n, t in enumerate(tasks)}
    units = [(stage, unit) for stage in range(stages) for unit in ("compute", "comm")]
    unit_of = [(t.stage, "comm" if isinstance(t, Collective) else "compute") for t in tasks]
    waiting = [len(t.after) for t in tasks]
    followers: list[list[int]] = [[] for _ in tasks]
    for n, t in enumerate(tasks):
        for dep in t.after:
            followers[index[dep.task]].append(n)
    ready: dict[tuple[int, str], list[int]] = {unit: [] for unit in units}
    for n, count in enumerate(waiting):
        if not count:
            heapq.heappush(ready[unit_of[n]], n)
    free = dict.fromkeys(units, 0.0)
    ends: list[tuple[float, int]] = []  # (end, task) of the tasks started
    order: dict[int, list[str]] = {}
    now, done = 0.0, 0

    def release(n: int) -> None:  # an ended task: what waits for it alone becomes ready
        for f in followers[n]:
            waiting[f] -= 1
            if not waiting[f]:
                heapq.heappush(ready[unit_of[f]], f)

    while done < len(tasks):
        while ends and ends[0][0] <= now:
            done += 1
            release(heapq.heappop(ends)[1])
        started = False
        for unit in units:
            if free[unit] <= now and ready[unit]:
                n = heapq.heappop(ready[unit])
                task = tasks[n]
                length = alone[task.id] if isinstance(task, Collective) else task.duration_ns
                free[unit] = now + length
                if isinstance(task, Collective):
                    order.setdefault(task.stage, []).append(task.id)
                started = True
                if length:
                    heapq.heappush(ends, (now + length, n))
                else:  # ended as it started: the units after this one may start what it releases now
                    done += 1
                    release(n)
        if started or done == len(tasks):
            continue
        later = [t for t in (*free.values(), *(end for end, _ in ends)) if t > now]
        if not later:
            raise InputError("workload", "a dependency cycle: ASTRA-sim 2.x never finishes")
        now = min(later)
    return order


def serialised(
    tasks: Sequence[Collective | Compute], network: Network, stage_npus: tuple[int, ...] = ()
) -> tuple[tuple[Collective | Compute, ...], str]:
    """The tasks with each collective or send after the one ASTRA-sim 2.x runs before it on its stage's
    NPU, and a note.

    ASTRA-sim 2.x runs one communication at a time per NPU, collectives and sends together: when it
    is free, the ready one of lowest id starts (compute, one node at a time, the same way). Alone on
    the network a collective takes its baseline time whatever runs beside it (a send its message's),
    so one pass over the tasks in time, every stage at once (``tasks`` in each stage's id order),
    gives each stage's order; they are then chained in it (each after the one before), so every
    method keeps ASTRA-sim's order.
    """
    colls = [t for t in tasks if isinstance(t, Collective)]
    if len(colls) < 2:
        return tuple(tasks), ""
    alone: dict[str, float] = {}
    timed: dict[tuple[object, ...], float] = {}  # collectives of one shape take one time alone
    for c in colls:
        shape = (c.kind, c.size_bytes, c.chunks, c.chunk_bytes, c.dimensions, c.group)
        if shape not in timed:
            solo = Instance(
                network,
                (dataclasses.replace(c, after=(), issue_ns=0.0, stage=0),),
                stage_npus=c.group[:1] if c.kind is Kind.SEND else (),
            )
            timed[shape] = simulate(solo, baseline_orders(solo), Intra.FIFO, Deadline(), baseline=True).makespan
        alone[c.id] = timed[shape]
    order = _run_order(tasks, alone, max(1, len(stage_npus)))
    before = {b: a for ids in order.values() for a, b in zip(ids, ids[1:])}
    chained = tuple(
        dataclasses.replace(t, after=(*t.after, After(before[t.id])))
        if isinstance(t, Collective) and t.id in before and before[t.id] not in {d.task for d in t.after}
        else t
        for t in tasks
    )
    first = order.get(0, [])
    note = (
        "ASTRA-sim 2.x runs one collective or send at a time per NPU: they are chained in the order its baseline "
        f"runs them ({' -> '.join(first[:4])}{' -> ...' if len(first) > 4 else ''}"
        f"{', and so on for every stage' if len(order) > 1 else ''})"
    )
    return chained, note
