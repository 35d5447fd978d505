"""The iteration bound: a relaxation of the whole task graph at the granularity of chunk classes.

Two parts, each valid on its own:

* **collective spans**: per collective, the least time from its release to its end when it runs
  alone, over every integer assignment of its chunks to orders (fill-and-drain on the collective
  alone: on every dimension, the least head over the orders in use, their load, the least tail;
  the slowest chunk of an order in use), at least :func:`~themis_opt.sim.model.shortest_durations`.
  With them, heads and tails over the task graph (the longest chains into and out of every task)
  and the critical path;
* **the program**: continuous order counts per chunk class, and per dimension the preemptive
  one-machine bound of its jobs, one per class, order and phase there (a reduce-scatter's phase on
  a dimension and the all-gather's are two jobs, the second released late), each with the head
  and tail its order and its collective's place in the graph give it: for every release threshold
  ``h`` and delivery threshold ``q``, ``makespan >= h + q +`` the work of the jobs released no
  earlier than ``h`` and delivered no earlier than ``q``. There are too many such cuts to write down: they are added as
  the counts violate them (the most violated per dimension, found over the grid of thresholds),
  and the program (GLOP) is solved again. The bound is the Lagrangian value of the cuts' duals,
  computed in floats from them, so that it does not rest on the solver's tolerances; every
  round's is valid (a subset of the cuts), the last is the best.

The compute unit's jobs have no choice: its preemptive bound with the spans' heads and tails is a
constant of the program, as is the critical path.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from themis_opt.bounds.formulas import BOUNDS, SAFETY
from themis_opt.bounds.graph import preemptive_makespan
from themis_opt.bounds.params import BoundsParams
from themis_opt.bounds.ways import Way, class_ways
from themis_opt.budget import Deadline, OutOfTime, run_interruptibly
from themis_opt.instance import ChunkClass, Collective, Compute, Instance
from themis_opt.orders import Counts
from themis_opt.policies import baseline_orders
from themis_opt.sim.model import (
    classes_by_collective,
    heads_and_tails,
    model_of,
    shortest_durations,
)

logger = logging.getLogger(__name__)


def _compositions(n: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to write ``n`` as an ordered sum of ``parts`` whole numbers >= 0."""
    for bars in itertools.combinations(range(n + parts - 1), parts - 1):
        previous = -1
        out = []
        for b in (*bars, n + parts - 1):
            out.append(b - previous - 1)
            previous = b
        yield tuple(out)


def _assignments(sizes: Sequence[int], ways: Sequence[int]) -> int:
    """How many integer assignments of classes of ``sizes`` chunks to their ``ways`` there are."""
    return math.prod(math.comb(n + w - 1, w - 1) for n, w in zip(sizes, ways))


def alone_span(instance: Instance, classes: Sequence[ChunkClass], params: BoundsParams = BOUNDS) -> float | None:
    """The least fill-and-drain value of one collective's ``classes`` run alone from time 0, over
    every integer assignment of their chunks to orders: the largest of, on every dimension, the least
    head of the orders in use plus their load plus the least tail, and the slowest chunk of an order
    in use. ``None`` when there are more than ``params.iteration_assignments`` assignments.

    In every schedule a collective ends at least this long after its release: its chunks' orders are
    one of these assignments, every chunk starts no earlier than the release, a dimension runs the
    phases one after another (``active_chunks`` at once), the first cannot start before some chunk in
    use reaches it and the last is followed by at least the least tail.
    """
    import numpy as np

    per_class = [class_ways(instance, cls, params) for cls in classes]
    if _assignments([len(cls.chunks) for cls in classes], [len(w) for w in per_class]) > params.iteration_assignments:
        return None
    ways = [way for ways in per_class for way in ways]
    choices = [list(_compositions(len(cls.chunks), len(w))) for cls, w in zip(classes, per_class)]
    counts = np.array([[n for part in pick for n in part] for pick in itertools.product(*choices)], dtype=float)
    used = counts > 0  # assignments x ways
    busy = np.array([[b if h is not None else 0.0 for b, h in zip(w.busy, w.head)] for w in ways])
    head = np.array([[math.inf if h is None else h for h in w.head] for w in ways])
    tail = np.array([[math.inf if q is None else q for q in w.tail] for w in ways])
    load = counts @ busy  # assignments x dimensions
    first = np.where(used[:, :, None], head[None], math.inf).min(axis=1)
    last = np.where(used[:, :, None], tail[None], math.inf).min(axis=1)
    edges = np.where(load > 0, first + load + last, 0.0).max(axis=1)
    slowest = np.where(used, np.array([w.duration for w in ways])[None], 0.0).max(axis=1)
    return float(np.maximum(edges, slowest).min())


def collective_spans(instance: Instance, deadline: Deadline, params: BoundsParams = BOUNDS) -> tuple[float, ...]:
    """Per task, a lower bound on how long it lasts: a compute task's duration; a collective's
    :func:`alone_span`, at least its :func:`~themis_opt.sim.model.shortest_durations` entry (that alone
    where the assignments are too many or ``deadline`` has passed), and for a collective of at most
    ``params.span_phases`` phases, :func:`exact_span`. Computed once per kind, dimensions, size and
    chunking.
    """
    weak = shortest_durations(instance, deadline)
    memo = model_of(instance).memo.setdefault("spans", {})
    out = list(weak)
    c = 0
    for t, task in enumerate(instance.tasks):
        if isinstance(task, Compute):
            continue
        coll = instance.collectives[c]
        key = (coll.kind, instance.active_dims[c], coll.size_bytes, coll.chunks, coll.chunk_bytes, params)
        found = memo.get(key)
        if found is None and not deadline.expired():
            found = alone_span(instance, classes_by_collective(instance)[c], params) or 0.0
            exact = exact_span(instance, c, deadline, params)
            if exact is not None:
                found = max(found, exact)
            if not deadline.expired():  # else CP-SAT may have stopped early: not kept for later calls
                memo[key] = found
        if found is not None:
            out[t] = max(out[t], found)
        c += 1
    return tuple(out)


def exact_span(instance: Instance, collective: int, deadline: Deadline, params: BoundsParams = BOUNDS) -> float | None:
    """A lower bound on how long ``collective`` lasts from its release: CP-SAT's bound on it run
    alone (:func:`~themis_opt.cpsat.alone_bound`, at most ``params.span_work`` deterministic
    seconds), where it has at most ``params.span_phases`` phases and a choice of orders; else ``None``
    (with one order, :func:`alone_span` is as strong on one dimension, and CP-SAT's import alone
    would cost a third of a second).

    In every schedule the collective's chunks start no earlier than its release and share the
    dimensions with other work: alone, from its release, they can only end sooner. Where its chunks
    are few, the integer choice of orders and the pipelining of its phases over the dimensions
    cost more than :func:`alone_span`'s fill and drain tell (4 chunks of an all-gather over a
    rail and a spine: 3.2168 ms, not 3.1462).
    """
    from themis_opt.bounds.solvers import solvers_loaded

    if instance.order_count(collective) < 2 or params.span_work <= 0 or deadline.expired():
        return None
    coll = instance.collectives[collective]
    alone = Instance(
        instance.network,
        (dataclasses.replace(coll, issue_ns=0.0, after=()),),
        f"{instance.name}-alone",
        stage_npus=instance.stage_npus,
    )
    if alone.num_phases > params.span_phases or not solvers_loaded(deadline, params, cpsat=True):
        return None  # too many phases, or CP-SAT's Python layer not loaded in time (its import cannot be cut)
    from themis_opt.cpsat import alone_bound
    from themis_opt.sim import simulate
    from themis_opt.sim.queues import Intra

    try:
        upper = simulate(alone, baseline_orders(alone), Intra.FIFO, deadline)
    except OutOfTime:
        return None
    return alone_bound(alone, upper, deadline=deadline, work=params.span_work)


Job = tuple[int, int, float, float, float]  # (class index, way index, release, work per chunk, delivery)


def _jobs(
    instance: Instance,
    heads: Sequence[float],
    tails: Sequence[float],
    ways: Sequence[tuple[Way, ...]],
    params: BoundsParams = BOUNDS,
) -> tuple[list[list[Job]], list[list[tuple[float, float]]]]:
    """Per dimension, its jobs and the points its classes surely meet.

    The jobs: one per class, way and phase there (one for all of a way's phases there where its
    :attr:`Way.phases` is ``None``, and on a dimension of more than ``params.iteration_phase_jobs``
    phase jobs): its release (the collective's head plus the way's), its work per chunk and its
    delivery (the way's tail plus the collective's). The points: per class, the least release and
    least delivery of its ways' first jobs there, and of their last; every way of a class has its
    phases on every dimension of its collective, so in every schedule its chunks have a job there
    released and delivered no earlier than each point, whatever the counts.
    """
    ctask = [t for t, task in enumerate(instance.tasks) if isinstance(task, Collective)]
    num_dims = instance.network.num_dims
    phase_jobs = [
        sum(len(way.phases[d]) if way.phases is not None else 1 for w in ways for way in w) for d in range(num_dims)
    ]
    split = [n <= params.iteration_phase_jobs for n in phase_jobs]
    jobs: list[list[Job]] = [[] for _ in range(num_dims)]
    sure: list[list[tuple[float, float]]] = [[] for _ in range(num_dims)]
    inf = math.inf
    for k, cls in enumerate(instance.chunk_classes):
        t = ctask[cls.collective]
        head, tail = heads[t], tails[t]
        for d in range(num_dims):
            on = jobs[d]
            r0 = q0 = r1 = q1 = inf  # the least release and delivery of the first jobs, and of the last
            for w, way in enumerate(ways[k]):
                h, q = way.head[d], way.tail[d]
                if h is None or q is None:
                    continue
                if way.phases is None or not split[d]:
                    on.append((k, w, head + h, way.busy[d], q + tail))  # work 0 too: its class is sure
                    r0, q0 = min(r0, head + h), min(q0, q + tail)
                    r1, q1 = min(r1, head + h), min(q1, q + tail)
                    continue
                phases = way.phases[d]
                on.extend((k, w, head + ph, work, pq + tail) for work, ph, pq in phases)
                r0, q0 = min(r0, head + phases[0][1]), min(q0, phases[0][2] + tail)
                r1, q1 = min(r1, head + phases[-1][1]), min(q1, phases[-1][2] + tail)
            if r0 < inf:
                sure[d].append((r0, q0))
                if (r1, q1) != (r0, q0):
                    sure[d].append((r1, q1))
    return jobs, sure


def _axis(values: Any, most: int) -> Any:
    """The distinct ``values`` (an array) ascending, or ``most`` of them spread evenly from the least
    (the thresholds need not be values: any threshold gives a valid cut, fewer only weaker ones).
    """
    import numpy as np

    axis = np.sort(values)  # np.unique's steps: np.unique itself imports numpy.ma (masked arrays) on first call
    axis = axis[np.concatenate(([True], axis[1:] != axis[:-1]))]
    if len(axis) > most:
        axis = axis[np.linspace(0, len(axis) - 1, most).astype(int)]
    return axis


class _Jobs(NamedTuple):
    """One dimension's jobs as arrays, in :func:`_jobs`'s order: each one's count variable (its index
    in the program's flat list of classes and ways), release, work per chunk and delivery.
    """

    var: Any
    release: Any
    work: Any
    delivery: Any

    @classmethod
    def of(cls, jobs: list[Job], offsets: Sequence[int]) -> _Jobs:
        import numpy as np

        return cls(
            np.array([offsets[k] + w for k, w, _, _, _ in jobs], dtype=np.int64),
            np.array([r for _, _, r, _, _ in jobs], dtype=np.float64),
            np.array([work for _, _, _, work, _ in jobs], dtype=np.float64),
            np.array([q for _, _, _, _, q in jobs], dtype=np.float64),
        )


def _most_violated(
    jobs: _Jobs, sure: list[tuple[float, float]], x: Any, many: int, grid: int
) -> list[tuple[float, float, float]]:
    """Thresholds ``(h, q)`` with large ``h + q +`` the work (at counts ``x``, per count variable) of
    the jobs released no earlier than ``h`` and delivered no earlier than ``q``, with that value,
    among the thresholds some class surely meets (``sure``: the set is never empty, whatever the
    counts): for each of the ``many`` release thresholds of the largest values (ties: the lower
    first), its best delivery threshold; at most ``grid`` thresholds of each kind.
    """
    import numpy as np

    counts = x[jobs.var]
    active = counts > 0
    if not active.any() or not sure:
        return []
    release, delivery = jobs.release[active], jobs.delivery[active]
    work = jobs.work[active] * counts[active]
    sure_release = np.array([s[0] for s in sure])
    sure_delivery = np.array([s[1] for s in sure])
    hs = _axis(np.concatenate([release, sure_release]), grid)
    qs = _axis(np.concatenate([delivery, sure_delivery]), grid)

    def cell(axis: Any, values: Any) -> Any:  # the largest threshold at or below each value
        return np.searchsorted(axis, values, side="right") - 1

    height, width = len(hs), len(qs)
    # the grid stored upside down and right to left: the suffix sums below are then two cumulative
    # sums in place, in the order (and so to the bit) of summing from the top right corner
    flat = (height - 1 - cell(hs, release)) * width + (width - 1 - cell(qs, delivery))
    table = np.bincount(flat, weights=work, minlength=height * width).reshape(height, width)
    # a class surely met at (h, q): some sure point in a row at or above h has its column at or right of q
    right = np.full(height, -1)
    np.maximum.at(right, cell(hs, sure_release), cell(qs, sure_delivery))
    met = np.arange(width)[None, :] <= np.maximum.accumulate(right[::-1])[::-1][:, None]
    # the work over every cell at or above and right of each, plus its thresholds
    for i in range(1, height):  # down the columns row by row: numpy's cumsum there strides, ten times slower
        np.add(table[i], table[i - 1], out=table[i])
    np.cumsum(table, axis=1, out=table)
    value = table[::-1, ::-1]
    value += hs[:, None]
    value += qs[None, :]
    value[~met] = -np.inf
    columns = value.argmax(axis=1)
    rows = value[np.arange(len(hs)), columns]
    top = [int(i) for i in np.argsort(-rows, kind="stable")[:many] if math.isfinite(rows[i])]  # ties: any CPU alike
    return [(float(hs[i]), float(qs[columns[i]]), float(rows[i])) for i in top]


def iteration_bound(
    instance: Instance, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> float | None:
    """The iteration bound (see the module): ``None`` when it does not fit
    (``params.max_iteration_variables``), OR-Tools cannot be loaded or ``deadline`` passes before a
    first value is known.
    """
    deadline = deadline or Deadline()
    model_of(instance).memo.pop("iteration_counts", None)  # this call's counts, or none
    if not iteration_fits(instance, params):
        return None
    from themis_opt.bounds.solvers import solvers_loaded

    if not solvers_loaded(deadline, params):
        return None
    try:
        return _solve(instance, deadline, params)
    except OutOfTime:
        return None


def iteration_fits(instance: Instance, params: BoundsParams = BOUNDS) -> bool:
    """Whether the iteration bound runs on ``instance``: one stage (several run it on each stage's part),
    at most ``params.max_iteration_variables`` count variables.
    """
    return instance.num_stages == 1 and _variables(instance, params) <= params.max_iteration_variables


def _variables(instance: Instance, params: BoundsParams) -> int:
    """The program's count variables: per class, its orders (one past ``params.iteration_orders``)."""
    return sum(
        1 if (n := instance.order_count(cls.collective)) > params.iteration_orders else n
        for cls in instance.chunk_classes
    )


def _solve(instance: Instance, deadline: Deadline, params: BoundsParams) -> float:
    spans = collective_spans(instance, deadline, params)
    deadline.check("iteration bound")
    ways = [class_ways(instance, cls, params) for cls in instance.chunk_classes]
    return program_bound(instance, spans, ways, deadline, params)


def program_bound(
    instance: Instance,
    spans: Sequence[float],
    ways: Sequence[tuple[Way, ...]],
    deadline: Deadline,
    params: BoundsParams = BOUNDS,
) -> float:
    """The iteration bound's critical path, compute bound and program (see the module) from given
    per-task ``spans`` and per-class ``ways``: valid wherever each span is at most the task's
    duration in every schedule and the ways' jobs relax every schedule's (each class's shares of
    its ways met, each job released and delivered no later and working no more than the schedule's;
    :mod:`~themis_opt.bounds.chunkings` relaxes several chunkings at once so).

    Raises
    ------
    OutOfTime
        If ``deadline`` passes before the first value (every later round's is valid).
    """
    import numpy as np
    from ortools.linear_solver import pywraplp

    spans = tuple(spans)
    heads, tails = heads_and_tails(instance, spans, deadline)
    deadline.check("iteration bound")
    floor = max(h + s for h, s in zip(heads, spans))  # the critical path with the spans
    computes = [
        (heads[t], task.duration_ns, tails[t]) for t, task in enumerate(instance.tasks) if isinstance(task, Compute)
    ]
    floor = max(floor, preemptive_makespan(computes))
    classes = instance.chunk_classes
    jobs, sure = _jobs(instance, heads, tails, ways, params)
    offsets = list(itertools.accumulate((len(w) for w in ways), initial=0))
    arrays = [_Jobs.of(on, offsets) for on in jobs]
    deadline.check("iteration bound")
    scale = 1e-6  # ms: well-scaled for GLOP
    solver = pywraplp.Solver.CreateSolver("GLOP")
    makespan = solver.NumVar(0.0, solver.infinity(), "makespan")  # the floor apart: else the rounds stall on it
    x: list[Any] = []  # per class and way, in that order (the flat index of _Jobs.var)
    # rows are written coefficient by coefficient: the expression API costs ten times as much
    for k, cls in enumerate(classes):
        row = solver.Constraint(len(cls.chunks), len(cls.chunks))
        for w in range(len(ways[k])):
            x.append(solver.NumVar(0.0, len(cls.chunks), f"x{k}_{w}"))
            row.SetCoefficient(x[-1], 1.0)
    solver.Objective().SetCoefficient(makespan, 1.0)
    solver.Objective().SetMinimization()
    cuts: list[_Cut] = []
    loads: dict[int, Any] = {}  # per dimension, a variable for its whole load, once a cut needs it
    best = floor
    values: Any = None  # the last round's counts
    seen: set[tuple[int, float, float]] = set()
    level, still = 0.0, 0  # the program's value, and rounds since it last rose
    try:
        for rounds in range(params.iteration_rounds):
            if not math.isinf(deadline.at):
                solver.SetTimeLimit(max(1, int(deadline.remaining() * 1000)))
            status = run_interruptibly(solver.Solve, solver.InterruptSolve, deadline.at)
            if status != solver.OPTIMAL:
                break
            if cuts:
                best = max(best, _lagrangian(instance, offsets, cuts))
            current = makespan.solution_value() / scale
            still = still + 1 if current <= level * (1 + params.iteration_tolerance) else 0
            level = max(level, current)
            if still > params.iteration_patience:
                break
            values = np.array([var.solution_value() for var in x])
            added = 0
            for d, on in enumerate(arrays):
                deadline.check("iteration bound")
                for h, q, value in _most_violated(on, sure[d], values, params.iteration_cuts, params.iteration_grid):
                    if value <= current * (1 + params.iteration_tolerance) or (d, h, q) in seen:
                        continue
                    seen.add((d, h, q))
                    within = (on.release >= h) & (on.delivery >= q)
                    row = solver.Constraint((h + q) * scale, solver.infinity())
                    cut = _Cut(h + q, *_summed(on.var[within], on.work[within]), row)
                    row.SetCoefficient(makespan, 1.0)  # makespan >= h + q + work
                    if 2 * int(within.sum()) > len(within):  # the dimension's load less the jobs left out
                        if d not in loads:
                            loads[d] = solver.NumVar(0.0, solver.infinity(), f"load{d}")
                            total = solver.Constraint(0.0, 0.0)  # load = every job's work
                            total.SetCoefficient(loads[d], 1.0)
                            every, work = _summed(on.var, on.work)
                            for i, c in zip(every.tolist(), (-(work * scale)).tolist()):
                                total.SetCoefficient(x[i], c)
                        row.SetCoefficient(loads[d], -1.0)
                        terms, sign = _summed(on.var[~within], on.work[~within]), 1.0
                    else:
                        terms, sign = (cut.var, cut.work), -1.0
                    for i, c in zip(terms[0].tolist(), (sign * (terms[1] * scale)).tolist()):
                        row.SetCoefficient(x[i], c)
                    cuts.append(cut)
                    added += 1
            logger.debug(
                "iteration bound: round %d, program %.9g ns, bound %.9g ns, %d cuts", rounds, current, best, added
            )
            if not added:
                break
    except OutOfTime:  # every round's bound is valid: the best so far stands
        pass
    if values is not None:
        model_of(instance).memo["iteration_counts"] = (tuple(ways), values)
    return best * (1 - SAFETY)


def iteration_counts(instance: Instance) -> Counts | None:
    """The order counts of the iteration bound's program at its last round, the last time it ran
    on ``instance``, each class's rounded to whole chunks (largest remainders, ties to the earlier
    order): counts that balance the dimensions where the task graph and the issue times load them,
    for the searches to start from. ``None`` where it has not run, stopped before its first round
    or counted some class's orders as one (``iteration_orders``).
    """
    import numpy as np

    kept = model_of(instance).memo.get("iteration_counts")
    if kept is None:
        return None
    ways, values = kept  # rounded here, when asked: most calls of the bound never are
    counts: Counts = {}
    at = 0
    for cls, own in zip(instance.chunk_classes, ways):
        if len(own) != instance.order_count(cls.collective):  # its orders counted as one (never listed)
            return None
        shares = values[at : at + len(own)]
        at += len(own)
        whole = np.floor(shares + 1e-9).astype(int)
        left = len(cls.chunks) - int(whole.sum())
        if left > 0:
            whole[np.argsort(whole - shares, kind="stable")[:left]] += 1
        elif left < 0:  # the float sum just above the class's chunks
            whole[np.argsort(shares - whole, kind="stable")[:-left]] -= 1
        if whole.min() < 0 or int(whole.sum()) != len(cls.chunks):  # GLOP's counts far off: none
            return None
        counts[cls] = {order: int(n) for order, n in zip(instance.orders[cls.collective], whole) if n > 0}
    return counts


def _summed(var: Any, work: Any) -> tuple[Any, Any]:
    """The distinct count variables of ``var`` ascending and each one's ``work`` summed (a way may have
    several jobs on one dimension; a row holds each variable once).
    """
    import numpy as np

    if not len(var):
        return var, work
    at = np.argsort(var, kind="stable")  # np.unique's steps (it imports numpy.ma on first call)
    var, work = var[at], work[at]
    starts = np.flatnonzero(np.concatenate(([True], var[1:] != var[:-1])))
    return var[starts], np.add.reduceat(work, starts)


class _Cut(NamedTuple):
    """A cut of the program: ``makespan >= constant + work . x[var]``, and its row."""

    constant: float
    var: Any
    work: Any
    row: Any


def _lagrangian(instance: Instance, offsets: Sequence[int], cuts: list[_Cut]) -> float:
    """The Lagrangian value of the cuts' duals: for multipliers ``l >= 0`` summing to 1, every count
    vector's makespan is at least ``sum l (constant + coefficients . x)``, whose least over the counts
    is each class's chunks on the way of least weighted coefficient. Valid for any such ``l``; the
    program's duals make it the program's value (up to its tolerances), in floats computed here.
    """
    import numpy as np

    duals = [max(0.0, float(cut.row.dual_value())) for cut in cuts]
    total = sum(duals)
    if total <= 0:
        return 0.0
    weights = [y / total for y in duals]
    value = sum(wt * cut.constant for wt, cut in zip(weights, cuts))
    per_way = np.zeros(offsets[-1])
    for wt, cut in zip(weights, cuts):
        if wt:  # a way's coefficients summed cut by cut, in order (each way once a cut)
            per_way[cut.var] += wt * cut.work
    for k, cls in enumerate(instance.chunk_classes):
        value += len(cls.chunks) * float(per_way[offsets[k] : offsets[k + 1]].min())
    return value
