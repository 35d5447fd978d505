"""ASTRA-sim 2.x's run loop over a workload: one communication at a time per NPU.

ASTRA-sim 2.x issues a trace's nodes as their dependencies end, but each NPU runs one collective or
send at a time, in the order its loop reaches them; :func:`serialised` finds that order (each
collective at its baseline time alone) and chains the tasks in it, so that every method keeps
ASTRA-sim's order. The Chakra reader (:mod:`themis_opt.formats.astra.chakra`) gives the tasks;
the importer and the exporter chain them here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from themis_opt.budget import Deadline
from themis_opt.errors import InputError
from themis_opt.instance import After, Collective, Compute, Instance, Kind, Network
from themis_opt.policies import baseline_orders
from themis_opt.sim import simulate
from themis_opt.sim.queues import Intra


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
    alone = {}
    for c in colls:
        solo = Instance(
            network,
            (dataclasses.replace(c, after=(), issue_ns=0.0, stage=0),),
            stage_npus=c.group[:1] if c.kind is Kind.SEND else (),
        )
        alone[c.id] = simulate(solo, baseline_orders(solo), Intra.FIFO, Deadline(), baseline=True).makespan
    ends: dict[str, float] = {}
    units = [(stage, unit) for stage in range(max(1, len(stage_npus))) for unit in ("compute", "comm")]
    free = dict.fromkeys(units, 0.0)
    waiting = list(tasks)  # in id order: the lowest ready id first
    order: dict[int, list[str]] = {}
    now = 0.0
    while waiting:
        started = False
        for stage, unit in units:
            if free[(stage, unit)] > now:
                continue
            for task in waiting:
                if task.stage != stage or (unit == "comm") != isinstance(task, Collective):
                    continue
                if all(d.task in ends and ends[d.task] <= now for d in task.after):
                    length = alone[task.id] if isinstance(task, Collective) else task.duration_ns
                    ends[task.id] = free[(stage, unit)] = now + length
                    if isinstance(task, Collective):
                        order.setdefault(stage, []).append(task.id)
                    waiting.remove(task)
                    started = True
                    break
        if not started:
            later = [t for t in (*free.values(), *ends.values()) if t > now]
            if not later:
                raise InputError("workload", "a dependency cycle: ASTRA-sim 2.x never finishes")
            now = min(later)
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
