"""Large-neighbourhood search: windows of collectives re-solved by CP-SAT, the rest held where it is."""

from __future__ import annotations

import logging
import math
import time

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.cpsat.model import CPSAT, CpsatModel, default_quantum
from themis_opt.cpsat.params import CpsatParams
from themis_opt.cpsat.solver import Solver, SolverSettings, solved
from themis_opt.errors import InputError, counted
from themis_opt.instance import Instance
from themis_opt.schedule import Schedule
from themis_opt.sim import compute_sequence_of, retime

logger = logging.getLogger(__name__)


def improve_by_windows(
    instance: Instance,
    incumbent: Schedule,
    *,
    deadline: Deadline,
    workers: int,
    seed: int,
    t0: float,
    params: CpsatParams = CPSAT,
) -> tuple[Schedule, tuple[tuple[float, float], ...]]:
    """Large-neighbourhood search: free a window of collectives, keep the rest, re-solve the window.

    The collectives are taken in the order the incumbent starts them; each
    window is a run of consecutive ones with at most ``params.window_phases`` phases.
    Everything outside it stays where the incumbent put it (its phases hold
    their dimensions, its ends release the window's tasks); CP-SAT chooses the
    window's orders and sequences to finish it as early as it can; the merged
    sequences are re-timed exactly by a left shift and kept if the makespan
    improves. Windows rotate until the deadline; a collective with more than
    ``params.window_literals`` order literals (chunks times orders) is never freed.
    Returns the best schedule and
    the trajectory of improvements (seconds since ``t0``, makespan).
    """
    import random

    rng = random.Random(seed)
    max_phases, max_literals = params.window_phases, params.window_literals
    best = incumbent
    trajectory = [(time.perf_counter() - t0, best.makespan)]
    if deadline.remaining() <= params.window_min_seconds:
        return best, tuple(trajectory)  # too little time even to build the incumbent's phases
    phases_of = [0] * len(instance.collectives)
    for chunk in best.chunks:
        phases_of[chunk.collective] += len(chunk.phases)
    literals = [coll.chunks * instance.order_count(c) for c, coll in enumerate(instance.collectives)]
    if all(n > max_literals for n in literals):
        return best, tuple(trajectory)  # no window is small enough to re-solve
    position = 0
    while deadline.remaining() > params.window_min_seconds:
        first = [math.inf] * len(instance.collectives)
        for chunk in best.chunks:
            if chunk.phases:
                first[chunk.collective] = min(first[chunk.collective], chunk.phases[0].start_ns)
        by_start = sorted(range(len(instance.collectives)), key=lambda c: (first[c], c))
        window: list[int] = []
        total = size = 0
        for c in by_start[position % len(by_start) :] + by_start[: position % len(by_start)]:
            if literals[c] > max_literals:
                continue  # too many orders to re-solve: it stays as the incumbent has it
            if window and (total + phases_of[c] > max_phases or size + literals[c] > max_literals):
                break
            window.append(c)
            total += phases_of[c]
            size += literals[c]
        position += max(1, len(window) // 2)  # overlapping windows
        candidate = _solve_window(instance, best, set(window), deadline, workers, rng.randrange(2**31), params)
        if candidate is not None and candidate.makespan < best.makespan * (1 - 1e-12):
            best = candidate
            trajectory.append((time.perf_counter() - t0, best.makespan))
            logger.info("lns: window of %s: makespan %.3f ns", counted(len(window), "collective"), best.makespan)
    return best, tuple(trajectory)


def _solve_window(
    instance: Instance,
    incumbent: Schedule,
    window: set[int],
    deadline: Deadline,
    workers: int,
    seed: int,
    params: CpsatParams,
) -> Schedule | None:
    """Re-solve the collectives in ``window`` with everything else fixed; the merged schedule, re-timed."""
    import dataclasses

    ends = incumbent.collective_ends(len(instance.collectives))
    task_end: dict[str, float] = {}
    for c, coll in enumerate(instance.collectives):
        task_end[coll.id] = ends[c]
    for entry in incumbent.computes:
        task_end[instance.computes[entry.compute].id] = entry.end_ns
    in_window = {instance.collectives[c].id for c in window}
    chosen = sorted(window)
    sub_tasks = []
    for c in chosen:
        coll = instance.collectives[c]
        outside = [task_end[d.task] + d.lag_ns for d in coll.after if d.task not in in_window]
        inside = tuple(d for d in coll.after if d.task in in_window)
        sub_tasks.append(dataclasses.replace(coll, issue_ns=max([coll.issue_ns, *outside]), after=inside))
    sub = Instance(instance.network, tuple(sub_tasks), f"{instance.name}-window", stage_npus=instance.stage_npus)
    quantum = default_quantum(incumbent.makespan, params)
    horizon = math.ceil(incumbent.makespan / quantum) + 2
    busy: dict[int, list[tuple[int, int]]] = {}
    for chunk in incumbent.chunks:
        if chunk.collective in window:
            continue
        for phase in chunk.phases:
            # both ends rounded down: held intervals never overlap each other; the exact re-timing
            # below repairs what the rounding lets the window squeeze in
            start = math.floor(phase.start_ns / quantum)
            size = math.floor(phase.end_ns / quantum) - start
            if size > 0:
                busy.setdefault(instance.lane(chunk.collective, phase.dim), []).append((start, size))
    share = deadline.share(params.window_share)
    horizon += max((start + size for held in busy.values() for start, size in held), default=0)
    try:
        model = CpsatModel(sub, quantum, horizon, share, busy, symmetry=False)
    except OutOfTime:
        return None
    # hint the incumbent, times rounded down like the held intervals: a feasible solution
    by_id = {(ch.collective, ch.chunk): ch for ch in incumbent.chunks}
    placed = [by_id[(chosen[c], k)] for c, k in sub.chunk_ids]
    model.hint_times(
        {cid: chunk.order for cid, chunk in zip(sub.chunk_ids, placed)},
        [[math.floor(phase.start_ns / quantum) for phase in chunk.phases] for chunk in placed],
    )
    solver = Solver(SolverSettings(workers=workers, seed=seed, seconds=max(0.05, share.remaining())))
    if not solved(solver.run(model.model, share)):
        return None
    orders = dict(incumbent.orders)
    entries: dict[int, list[tuple[float, int, int]]] = {}
    index = {cid: i for i, cid in enumerate(instance.chunk_ids)}
    for chunk in incumbent.chunks:
        if chunk.collective in window:
            continue
        for p, phase in enumerate(chunk.phases):
            lane = instance.lane(chunk.collective, phase.dim)
            entries.setdefault(lane, []).append((phase.start_ns, index[(chunk.collective, chunk.chunk)], p))
    found, starts = model.solution(solver.value)
    for (c, k), order in found.items():
        orders[(chosen[c], k)] = order
    for begin in starts:
        c, k = sub.chunk_ids[begin.chunk]
        lane = instance.lane(chosen[c], begin.dim)
        entries.setdefault(lane, []).append((begin.at * quantum, index[(chosen[c], k)], begin.phase))
    sequences = {d: [(i, p) for _, i, p in sorted(seq)] for d, seq in entries.items()}
    try:
        return retime(instance, orders, sequences, compute_sequence_of(incumbent))
    except InputError:  # the merged sequences contradict a dependency: no improvement from this window
        return None
