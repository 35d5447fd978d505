"""Independent validator: checks a schedule against every rule of the model.

It recomputes each phase from the chunk's order with the cost model, so it
trusts nothing that the method producing the schedule computed. Rules:

1. every chunk of every collective appears exactly once, and nothing else;
2. a chunk's order is a permutation of its collective's dimensions (size >= 2);
3. its phases are the ones that order implies (dimension, operation, bytes in
   and out) with the cost model's durations (under ``local_bw_aware``, the
   baseline order may also run its last dimension as one all-reduce phase);
4. its phases run in sequence, the first not before the collective's issue;
5. no two phases on one dimension overlap (with pipeline stages: on one
   stage's dimension, each stage having its own);
6. every compute task runs exactly once for its duration, one at a time
   (per stage: each stage has its own compute unit);
7. no task starts (a collective: any chunk's first phase) before its issue
   time, nor before each task it waits for has ended plus the lag (a
   collective ends with its last chunk's last phase), ends read from the
   schedule itself; an all-to-all keeps the ascending order.

Times are compared with a tolerance for float rounding only: a relative
:data:`REL_TOL` and an absolute :data:`ABS_TOL_NS`; a span's length (its end
minus its start), where a float resolves its end more coarsely than that (an
iteration of thousands of seconds: 61 fs apart at 346 s), also within
:data:`SPACINGS` float spacings at its end, as long as those are at most
:data:`RESOLVED` of its length (a 30 us phase ending at 1e21 ns, where floats
are 131 us apart, is not resolved: rejected).
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import TYPE_CHECKING, Any

from themis_opt.cost import PhaseSpec, merges
from themis_opt.errors import counted
from themis_opt.instance import Compute, Instance, Kind
from themis_opt.policies import baseline_order
from themis_opt.schedule import OP_CODES, ComputeSchedule, Phase, Schedule
from themis_opt.sim.model import chunk_plan

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

REL_TOL = 1e-9
ABS_TOL_NS = 1e-6
SPACINGS = 4  # a length is two rounded times apart, each made of sums: a few spacings off
RESOLVED = 1e-6  # of a length at most: coarser spacings leave it unresolved, and the schedule is rejected


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL_NS)


def _before(a: float, b: float) -> bool:
    """``a <= b`` up to float rounding."""
    return a <= b or _close(a, b)


def _lasts_ok(start: float, end: float, expected: float) -> bool:
    """Whether the span from ``start`` to ``end`` lasts ``expected`` ns up to float rounding (see the module)."""
    length = end - start
    if _close(length, expected):
        return True
    slack = SPACINGS * math.ulp(end)
    return slack <= RESOLVED * expected and abs(length - expected) <= slack


def validate(instance: Instance, schedule: Schedule) -> list[str]:
    """Every violation of the model in ``schedule``, one sentence each.

    The rules are checked on the schedule's numpy columns, every phase at once (no Python object per
    phase), and the violations found there named in the order a pass phase by phase names them;
    only a schedule these checks do not cover (chunks out of (collective, chunk) order, missing or
    twice, an order or a phase count not its collective's, a phase on another dimension or of
    another operation, more than one phase at once on a dimension) is checked phase by phase. Both
    apply the same rules, tolerances and sentences.

    Parameters
    ----------
    instance
        The instance the schedule claims to solve.
    schedule
        The schedule to check.

    Returns
    -------
    list of str
        Empty when the schedule is valid.
    """
    found = _violations_at_once(instance, schedule)
    return found if found is not None else _violations(instance, schedule)


def _close_at_once(a: Any, b: Any) -> Any:
    """:func:`_close` of numpy arrays, element by element (``math.isclose``'s formula)."""
    import numpy as np

    return np.abs(a - b) <= np.maximum(REL_TOL * np.maximum(np.abs(a), np.abs(b)), ABS_TOL_NS)


def _before_at_once(a: Any, b: Any) -> Any:
    """:func:`_before` of numpy arrays, element by element."""
    return (a <= b) | _close_at_once(a, b)


def _lasts_ok_at_once(start: Any, end: Any, expected: Any) -> Any:
    """:func:`_lasts_ok` of numpy arrays, element by element."""
    import numpy as np

    length = end - start
    slack = SPACINGS * np.spacing(np.abs(end))
    return _close_at_once(length, expected) | ((slack <= RESOLVED * expected) & (np.abs(length - expected) <= slack))


def _violations_at_once(instance: Instance, schedule: Schedule) -> list[str] | None:
    """:func:`_violations` of ``schedule``, found on its numpy columns; ``None`` where these checks
    do not apply (see :func:`validate`: then :func:`_violations` decides).
    """
    import numpy as np

    if instance.network.active_chunks > 1:
        return None
    columns = schedule.columns()
    starts, ends = columns.start_ns, columns.end_ns
    n, ids = len(starts), instance.chunk_ids
    if not n or not (np.isfinite(starts).all() and np.isfinite(ends).all()):
        return None
    # every chunk once, in (collective, chunk) order, its phases together
    new = np.ones(n, dtype=bool)
    new[1:] = (columns.collective[1:] != columns.collective[:-1]) | (columns.chunk[1:] != columns.chunk[:-1])
    first = np.flatnonzero(new)
    if len(first) != len(ids):
        return None
    if not (
        np.array_equal(columns.collective[first], [c for c, _ in ids])
        and np.array_equal(columns.chunk[first], [k for _, k in ids])
    ):
        return None
    count = np.diff(np.append(first, n))
    orders = schedule.orders
    if len(orders) != len(ids):
        return None
    # each chunk's phases as its order needs them: one table per distinct plan
    table: dict[tuple[int, float, tuple[int, ...]], int] = {}  # (collective, chunk bytes, order) -> its table
    merged: dict[tuple[int, float, tuple[int, ...]], int] = {}  # the same, as the baseline merges it
    plans: list[tuple[PhaseSpec, ...]] = []
    table_of = np.empty(len(ids), dtype=np.int64)
    for i, ((c, k), m) in enumerate(zip(ids, count.tolist())):
        order = orders.get((c, k))
        if order is None:
            return None
        coll = instance.collectives[c]
        nbytes = coll.bytes_of(k)
        key = (c, nbytes, order)
        found = table.get(key)
        if found is None:
            dims = instance.active_dims[c]
            if sorted(order) != list(dims) or (coll.kind is Kind.ALL_TO_ALL and tuple(order) != dims):
                return None
            found = table[key] = len(plans)
            plans.append(chunk_plan(instance, c, nbytes, tuple(order)))
        specs = plans[found]
        if m == len(specs) - 1 and tuple(order) == baseline_order(instance, c) and merges(instance, c, baseline=True):
            found = merged.get(key)
            if found is None:
                found = merged[key] = len(plans)
                plans.append(chunk_plan(instance, c, nbytes, tuple(order), merged=True))
            specs = plans[found]
        if m != len(specs):
            return None
        table_of[i] = found
    phases = [p for specs in plans for p in specs]
    ptr = np.array([0, *itertools.accumulate(len(specs) for specs in plans)], dtype=np.int64)
    index = np.repeat(ptr[table_of] - first, count) + np.arange(n)
    if not (
        np.array_equal(columns.dim, np.array([p.dim for p in phases], dtype=np.int64)[index])
        and np.array_equal(columns.op, np.array([OP_CODES.index(p.op) for p in phases], dtype=np.int8)[index])
    ):
        return None
    expected_in = np.array([p.bytes_in for p in phases], dtype=np.float64)[index]
    expected_out = np.array([p.bytes_out for p in phases], dtype=np.float64)[index]
    duration = np.array([p.duration for p in phases], dtype=np.float64)[index]
    bytes_bad = ~(_close_at_once(columns.bytes_in, expected_in) & _close_at_once(columns.bytes_out, expected_out))
    lasts_bad = ~_lasts_ok_at_once(starts, ends, duration)
    # a chunk's phases one after another, the first once its collective is released
    release = _releases(instance, schedule)
    released = np.array([release[instance.task_index[coll.id]] for coll in instance.collectives])
    later = ~new
    early_bad = np.zeros(n, dtype=bool)
    early_bad[first] = ~_before_at_once(released[columns.collective[first]], starts[first])
    after_bad = np.zeros(n, dtype=bool)
    after_bad[1:] = later[1:] & ~_before_at_once(ends[:-1], starts[1:])
    # one phase at a time on each lane (a stage's dimension), by start, end, collective and chunk
    stage = np.array([coll.stage for coll in instance.collectives], dtype=np.int64)
    num_dims = instance.network.num_dims
    lane = stage[columns.collective] * num_dims + columns.dim
    ranked = np.lexsort((columns.chunk, columns.collective, ends, starts, lane))
    same = lane[ranked][1:] == lane[ranked][:-1]
    overlaps = np.flatnonzero(same & ~_before_at_once(ends[ranked][:-1], starts[ranked][1:]))
    violations: list[str] = []
    position = np.arange(n) - np.repeat(first, count)  # each phase's place in its chunk
    for i in np.flatnonzero(bytes_bad | lasts_bad | early_bad | after_bad).tolist():
        c, k, p = int(columns.collective[i]), int(columns.chunk[i]), int(position[i])
        at = f"collective {c} chunk {k} phase {p}"
        start, end = float(starts[i]), float(ends[i])
        if bytes_bad[i]:
            got = float(columns.bytes_in[i]), float(columns.bytes_out[i])
            violations.append(_moves(at, got, (float(expected_in[i]), float(expected_out[i]))))
        if lasts_bad[i]:
            violations.append(_lasts(at, end - start, float(duration[i])))
        if early_bad[i]:
            violations.append(_early(at, start, instance.collectives[c].id, float(released[c])))
        if after_bad[i]:
            violations.append(_after(at, start, p, float(ends[i - 1])))
    for j in overlaps.tolist():
        a, b = int(ranked[j]), int(ranked[j + 1])
        d, s = int(columns.dim[a]), int(stage[columns.collective[a]])
        name = f"stage {s} dim {d}" if instance.num_stages > 1 else f"dim {d}"
        first_run = (int(columns.collective[a]), int(columns.chunk[a]), float(starts[a]), float(ends[a]))
        second_run = (int(columns.collective[b]), int(columns.chunk[b]), float(starts[b]), float(ends[b]))
        violations.append(_overlap(name, first_run, second_run))
    return violations + _compute_violations(instance, schedule, release)


def _moves(at: str, got: tuple[float, float], expected: tuple[float, float]) -> str:
    return f"{at}: moves {got[0]:g} -> {got[1]:g} bytes, expected {expected[0]:g} -> {expected[1]:g}"


def _lasts(at: str, duration: float, expected: float) -> str:
    return f"{at}: lasts {duration:.6f} ns, the cost model says {expected:.6f} ns"


def _early(at: str, start: float, task: str, released: float) -> str:
    return (
        f"{at}: starts at {start:.6f} ns, before {task} is released "
        f"at {released:.6f} ns (issue time, or a dependency's end plus lag)"
    )


def _after(at: str, start: float, p: int, end: float) -> str:
    return f"{at}: starts at {start:.6f} ns, before phase {p - 1} ends at {end:.6f} ns"


def _overlap(name: str, first: tuple[int, int, float, float], second: tuple[int, int, float, float]) -> str:
    (pc, pk, ps, pe), (cc, ck, cs, ce) = first, second
    return (
        f"{name}: collective {pc} chunk {pk} ({ps:.6f}-{pe:.6f} ns) overlaps "
        f"collective {cc} chunk {ck} ({cs:.6f}-{ce:.6f} ns)"
    )


def _violations(instance: Instance, schedule: Schedule) -> list[str]:
    """:func:`validate`, phase by phase: every violation named."""
    violations: list[str] = []
    release = _releases(instance, schedule)
    expected = set(instance.chunk_ids)
    seen: set[tuple[int, int]] = set()
    for chunk in schedule.chunks:
        cid = (chunk.collective, chunk.chunk)
        where = f"collective {chunk.collective} chunk {chunk.chunk}"
        if cid not in expected:
            violations.append(f"{where}: no such chunk in the instance")
            continue
        if cid in seen:
            violations.append(f"{where}: scheduled more than once")
            continue
        seen.add(cid)
        dims = instance.active_dims[chunk.collective]
        if sorted(chunk.order) != list(dims):
            violations.append(f"{where}: order {list(chunk.order)} is not a permutation of {list(dims)}")
            continue
        coll = instance.collectives[chunk.collective]
        if coll.kind is Kind.ALL_TO_ALL and tuple(chunk.order) != dims:
            violations.append(f"{where}: an all-to-all takes the ascending order {list(dims)}, not {list(chunk.order)}")
            continue
        specs = chunk_plan(instance, chunk.collective, coll.bytes_of(chunk.chunk), tuple(chunk.order))
        if (
            len(chunk.phases) == len(specs) - 1
            and tuple(chunk.order) == baseline_order(instance, chunk.collective)
            and merges(instance, chunk.collective, baseline=True)
        ):
            specs = chunk_plan(instance, chunk.collective, coll.bytes_of(chunk.chunk), tuple(chunk.order), merged=True)
        if len(chunk.phases) != len(specs):
            violations.append(f"{where}: has {counted(len(chunk.phases), 'phase')}, its order needs {len(specs)}")
            continue
        for p, (phase, spec) in enumerate(zip(chunk.phases, specs)):
            at = f"{where} phase {p}"
            if phase.dim != spec.dim or phase.op != spec.op:
                violations.append(
                    f"{at}: is {phase.op.value} on dim {phase.dim}, its order needs {spec.op.value} on dim {spec.dim}"
                )
                continue
            if not (_close(phase.bytes_in, spec.bytes_in) and _close(phase.bytes_out, spec.bytes_out)):
                violations.append(_moves(at, (phase.bytes_in, phase.bytes_out), (spec.bytes_in, spec.bytes_out)))
            if not _lasts_ok(phase.start_ns, phase.end_ns, spec.duration):
                violations.append(_lasts(at, phase.duration, spec.duration))
            released = release[instance.task_index[coll.id]]
            if p == 0 and not _before(released, phase.start_ns):
                violations.append(_early(at, phase.start_ns, coll.id, released))
            if p > 0 and not _before(chunk.phases[p - 1].end_ns, phase.start_ns):
                violations.append(_after(at, phase.start_ns, p, chunk.phases[p - 1].end_ns))
    for cid in sorted(expected - seen):
        violations.append(f"collective {cid[0]} chunk {cid[1]}: missing from the schedule")
    for (stage, d), entries in sorted(_by_lane(instance, schedule).items()):
        if d >= instance.network.num_dims:
            continue  # already reported as a phase on the wrong dimension
        name = f"stage {stage} dim {d}" if instance.num_stages > 1 else f"dim {d}"
        capacity = instance.network.active_chunks
        if capacity > 1:
            violations += _crowded(name, entries, capacity)
            continue
        for (prev, pc, pk), (cur, cc, ck) in zip(entries, entries[1:]):
            if not _before(prev.end_ns, cur.start_ns):
                violations.append(
                    _overlap(name, (pc, pk, prev.start_ns, prev.end_ns), (cc, ck, cur.start_ns, cur.end_ns))
                )
    violations += _compute_violations(instance, schedule, release)
    return violations


def _by_lane(instance: Instance, schedule: Schedule) -> dict[tuple[int, int], list[tuple[Phase, int, int]]]:
    """Per (stage, dimension), its phases as (phase, collective, chunk) by start time; a phase runs on its
    collective's stage (one of no collective of the instance: stage 0, reported apart).
    """
    if instance.num_stages == 1:
        return {(0, d): entries for d, entries in schedule.by_dimension().items()}
    stages = [coll.stage for coll in instance.collectives]
    lanes: dict[tuple[int, int], list[tuple[Phase, int, int]]] = {}
    for chunk in schedule.chunks:
        stage = stages[chunk.collective] if chunk.collective < len(stages) else 0
        for phase in chunk.phases:
            lanes.setdefault((stage, phase.dim), []).append((phase, chunk.collective, chunk.chunk))
    for entries in lanes.values():
        entries.sort(key=lambda e: (e[0].start_ns, e[0].end_ns, e[1], e[2]))
    return lanes


def _task_ends(instance: Instance, schedule: Schedule) -> list[float]:
    """Each task's end as the schedule has it (a collective: its last phase)."""
    coll_end = schedule.collective_ends(len(instance.collectives))
    compute_end = [0.0] * len(instance.computes)
    for c in schedule.computes:
        if c.compute < len(compute_end):
            compute_end[c.compute] = max(compute_end[c.compute], c.end_ns)
    ends, ci, cj = [], 0, 0
    for task in instance.tasks:
        if isinstance(task, Compute):
            ends.append(compute_end[cj])
            cj += 1
        else:
            ends.append(coll_end[ci])
            ci += 1
    return ends


def _releases(instance: Instance, schedule: Schedule) -> list[float]:
    """Each task's release given the schedule's ends: issue time, dependencies' ends plus lags."""
    ends = _task_ends(instance, schedule)
    return [
        max([task.issue_ns, *(ends[instance.task_index[d.task]] + d.lag_ns for d in task.after)])
        for task in instance.tasks
    ]


def _crowded(name: str, entries: list[tuple[Phase, int, int]], capacity: int) -> list[str]:
    """More than ``capacity`` phases at once on the dimension ``name`` (``entries`` by start)."""
    ends: list[float] = []  # the running phases' ends, least first
    for phase, c, k in entries:
        while ends and _before(ends[0], phase.start_ns):
            heapq.heappop(ends)
        heapq.heappush(ends, phase.end_ns)
        if len(ends) > capacity:
            return [
                f"{name}: collective {c} chunk {k} starts at {phase.start_ns:.6f} ns while {capacity} other "
                f"phases run there (at most {capacity} at once)"
            ]
    return []


def _compute_violations(instance: Instance, schedule: Schedule, release: list[float]) -> list[str]:
    violations = []
    seen: set[int] = set()
    for entry in schedule.computes:
        if not 0 <= entry.compute < len(instance.computes):
            violations.append(f"compute {entry.compute}: no such compute task in the instance")
            continue
        task = instance.computes[entry.compute]
        where = f"compute {entry.compute} ({task.id})"
        if entry.compute in seen:
            violations.append(f"{where}: scheduled more than once")
            continue
        seen.add(entry.compute)
        if not _lasts_ok(entry.start_ns, entry.end_ns, task.duration_ns):
            violations.append(f"{where}: lasts {entry.end_ns - entry.start_ns:.6f} ns, not {task.duration_ns:.6f} ns")
        released = release[instance.task_index[task.id]]
        if not _before(released, entry.start_ns):
            violations.append(
                f"{where}: starts at {entry.start_ns:.6f} ns, before it is released at {released:.6f} ns "
                "(issue time, or a dependency's end plus lag)"
            )
    for j in sorted(set(range(len(instance.computes))) - seen):
        violations.append(f"compute {j} ({instance.computes[j].id}): missing from the schedule")
    units: dict[int, list[ComputeSchedule]] = {}
    for entry in schedule.computes:
        if 0 <= entry.compute < len(instance.computes):
            units.setdefault(instance.computes[entry.compute].stage, []).append(entry)
    for stage, entries in sorted(units.items()):
        unit = f"stage {stage} compute unit" if instance.num_stages > 1 else "compute unit"
        runs = sorted(entries, key=lambda c: (c.start_ns, c.end_ns))
        for prev, cur in zip(runs, runs[1:]):
            if not _before(prev.end_ns, cur.start_ns):
                violations.append(
                    f"{unit}: compute {prev.compute} ({prev.start_ns:.6f}-{prev.end_ns:.6f} ns) overlaps "
                    f"compute {cur.compute} ({cur.start_ns:.6f}-{cur.end_ns:.6f} ns)"
                )
    return violations


def precedence_graph(instance: Instance, schedule: Schedule) -> nx.DiGraph:
    """The schedule's precedence graph.

    Nodes are phases ``(collective, chunk, position)``, compute tasks
    ``("compute", j)``, ``"source"`` and ``"sink"``; edges join consecutive
    phases of a chunk, consecutive phases on a dimension, consecutive compute
    tasks (per stage), and a task's end (a collective: each chunk's last phase) to the
    start of each task that waits for it; each edge weighs the duration of its
    tail node (plus the dependency's lag). Edges from the source carry the
    task's issue time.
    """
    import networkx as nx  # only the graph tools need it: validate() stays light

    graph = nx.DiGraph()
    graph.add_node("source")
    graph.add_node("sink")
    heads: dict[str, list[tuple[object, float]]] = {}  # task id -> (first node, its issue)
    tails: dict[str, list[tuple[object, float]]] = {}  # task id -> (last node, its duration)
    per_dim: dict[int, list[tuple[float, float, tuple[int, int, int]]]] = {}  # per lane (a stage's dimension)
    for chunk in schedule.chunks:
        coll = instance.collectives[chunk.collective]
        nodes = [(chunk.collective, chunk.chunk, p) for p in range(len(chunk.phases))]
        for node, phase in zip(nodes, chunk.phases):
            graph.add_node(node, duration=phase.duration)
            per_dim.setdefault(instance.lane(chunk.collective, phase.dim), []).append(
                (phase.start_ns, phase.end_ns, node)
            )
        if nodes:
            heads.setdefault(coll.id, []).append((nodes[0], coll.issue_ns))
            tails.setdefault(coll.id, []).append((nodes[-1], chunk.phases[-1].duration))
        for (a, phase), b in zip(zip(nodes, chunk.phases), nodes[1:]):
            graph.add_edge(a, b, weight=phase.duration)
    runs = sorted(schedule.computes, key=lambda c: (c.start_ns, c.end_ns))
    for entry in runs:
        compute = instance.computes[entry.compute]
        unit = ("compute", entry.compute)
        graph.add_node(unit, duration=entry.end_ns - entry.start_ns)
        heads.setdefault(compute.id, []).append((unit, compute.issue_ns))
        tails.setdefault(compute.id, []).append((unit, entry.end_ns - entry.start_ns))
    last: dict[int, ComputeSchedule] = {}  # per stage, its compute unit's run before
    for cur in runs:
        stage = instance.computes[cur.compute].stage
        prev = last.get(stage)
        if prev is not None:
            graph.add_edge(("compute", prev.compute), ("compute", cur.compute), weight=prev.end_ns - prev.start_ns)
        last[stage] = cur
    for task in instance.tasks:
        for head, issue in heads.get(task.id, []):
            graph.add_edge("source", head, weight=issue)
        for tail, duration in tails.get(task.id, []):
            graph.add_edge(tail, "sink", weight=duration)
        for dep in task.after:
            for tail, duration in tails.get(dep.task, []):
                for head, _ in heads.get(task.id, []):
                    weight = duration + dep.lag_ns
                    if not graph.has_edge(tail, head) or graph.edges[tail, head]["weight"] < weight:
                        graph.add_edge(tail, head, weight=weight)
    for entries in per_dim.values():
        entries.sort()
        for (start, end, a), (_, _, b) in zip(entries, entries[1:]):
            if not graph.has_edge(a, b) or graph.edges[a, b]["weight"] < end - start:
                graph.add_edge(a, b, weight=end - start)
    return graph


def critical_path(instance: Instance, schedule: Schedule) -> tuple[float, list[object]]:
    """Length and phases of the longest path through the precedence graph.

    For a schedule in which no phase waits needlessly (every phase starts as
    soon as its chunk predecessor, its dimension predecessor and its issue
    time allow), the length equals the makespan; a larger makespan shows
    needless idle time.

    Returns
    -------
    tuple
        The length in ns and the nodes on the path: phases as (collective,
        chunk, position), compute tasks as ("compute", index).

    Raises
    ------
    ValueError
        If the precedences form a cycle (an invalid schedule).
    """
    import networkx as nx

    graph = precedence_graph(instance, schedule)
    if not nx.is_directed_acyclic_graph(graph):
        raise ValueError("the schedule's precedences form a cycle")
    path = nx.dag_longest_path(graph, weight="weight")
    length = sum(graph.edges[a, b]["weight"] for a, b in zip(path, path[1:]))
    return length, [node for node in path if node not in ("source", "sink")]
