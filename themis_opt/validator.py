"""Independent validator: checks a schedule against every rule of the model.

It recomputes each phase from the chunk's order with the cost model, so it
trusts nothing that the method producing the schedule computed. Rules:

1. every chunk of every collective appears exactly once, and nothing else;
2. a chunk's order is a permutation of its collective's dimensions (size >= 2);
3. its phases are the ones that order implies (dimension, operation, bytes in
   and out) with the cost model's durations;
4. its phases run in sequence, the first not before the collective's issue;
5. no two phases on one dimension overlap.

Times are compared with a tolerance for float rounding only.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from themis_opt.cost import chunk_phases
from themis_opt.instance import Instance
from themis_opt.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

REL_TOL = 1e-9
ABS_TOL_NS = 1e-6


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL_NS)


def _before(a: float, b: float) -> bool:
    """``a <= b`` up to float rounding."""
    return a <= b or _close(a, b)


def validate(instance: Instance, schedule: Schedule) -> list[str]:
    """Every violation of the model in ``schedule``, one sentence each.

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
    violations: list[str] = []
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
        specs = chunk_phases(instance, chunk.collective, coll.bytes_of(chunk.chunk), chunk.order)
        if len(chunk.phases) != len(specs):
            violations.append(f"{where}: has {len(chunk.phases)} phases, its order needs {len(specs)}")
            continue
        for p, (phase, spec) in enumerate(zip(chunk.phases, specs)):
            at = f"{where} phase {p}"
            if phase.dim != spec.dim or phase.op != spec.op:
                violations.append(
                    f"{at}: is {phase.op.value} on dim {phase.dim}, its order needs {spec.op.value} on dim {spec.dim}"
                )
                continue
            if not (_close(phase.bytes_in, spec.bytes_in) and _close(phase.bytes_out, spec.bytes_out)):
                violations.append(
                    f"{at}: moves {phase.bytes_in:g} -> {phase.bytes_out:g} bytes, "
                    f"expected {spec.bytes_in:g} -> {spec.bytes_out:g}"
                )
            if not _close(phase.duration, spec.duration):
                violations.append(f"{at}: lasts {phase.duration:.6f} ns, the cost model says {spec.duration:.6f} ns")
            if p == 0 and not _before(coll.issue_ns, phase.start_ns):
                violations.append(
                    f"{at}: starts at {phase.start_ns:.6f} ns, before the issue at {coll.issue_ns:.6f} ns"
                )
            if p > 0 and not _before(chunk.phases[p - 1].end_ns, phase.start_ns):
                violations.append(
                    f"{at}: starts at {phase.start_ns:.6f} ns, before phase {p - 1} ends "
                    f"at {chunk.phases[p - 1].end_ns:.6f} ns"
                )
    for cid in sorted(expected - seen):
        violations.append(f"collective {cid[0]} chunk {cid[1]}: missing from the schedule")
    for d, entries in sorted(schedule.by_dimension().items()):
        if d >= instance.network.num_dims:
            continue  # already reported as a phase on the wrong dimension
        for (prev, pc, pk), (cur, cc, ck) in zip(entries, entries[1:]):
            if not _before(prev.end_ns, cur.start_ns):
                violations.append(
                    f"dim {d}: collective {pc} chunk {pk} ({prev.start_ns:.6f}-{prev.end_ns:.6f} ns) overlaps "
                    f"collective {cc} chunk {ck} ({cur.start_ns:.6f}-{cur.end_ns:.6f} ns)"
                )
    return violations


def precedence_graph(instance: Instance, schedule: Schedule) -> nx.DiGraph:
    """The schedule's precedence graph.

    Nodes are phases ``(collective, chunk, position)`` plus ``"source"`` and
    ``"sink"``; edges join consecutive phases of a chunk and consecutive phases
    on a dimension, each weighted by the duration of its tail phase. Edges
    from the source carry the collective's issue time.
    """
    import networkx as nx  # only the graph tools need it: validate() stays light

    graph = nx.DiGraph()
    graph.add_node("source")
    graph.add_node("sink")
    per_dim: dict[int, list[tuple[float, float, tuple[int, int, int]]]] = {}
    for chunk in schedule.chunks:
        issue = instance.collectives[chunk.collective].issue_ns
        nodes = [(chunk.collective, chunk.chunk, p) for p in range(len(chunk.phases))]
        for node, phase in zip(nodes, chunk.phases):
            graph.add_node(node, duration=phase.duration)
            per_dim.setdefault(phase.dim, []).append((phase.start_ns, phase.end_ns, node))
        if nodes:
            graph.add_edge("source", nodes[0], weight=issue)
            graph.add_edge(nodes[-1], "sink", weight=chunk.phases[-1].duration)
        for (a, phase), b in zip(zip(nodes, chunk.phases), nodes[1:]):
            graph.add_edge(a, b, weight=phase.duration)
    for entries in per_dim.values():
        entries.sort()
        for (start, end, a), (_, _, b) in zip(entries, entries[1:]):
            graph.add_edge(a, b, weight=end - start)
    return graph


def critical_path(instance: Instance, schedule: Schedule) -> tuple[float, list[tuple[int, int, int]]]:
    """Length and phases of the longest path through the precedence graph.

    For a schedule in which no phase waits needlessly (every phase starts as
    soon as its chunk predecessor, its dimension predecessor and its issue
    time allow), the length equals the makespan; a larger makespan shows
    needless idle time.

    Returns
    -------
    tuple
        The length in ns and the phases on the path as (collective, chunk,
        position).

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
