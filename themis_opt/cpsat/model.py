"""The exact CP-SAT model: every chunk's order and every dimension's sequence; its time quantum.

Model, in integer time (durations and issue times rounded *down* to a quantum):

* each chunk picks exactly one order (a Boolean per permutation of its
  collective's dimensions);
* each chunk has one interval per (dimension, operation) it runs; its size is
  the duration that the chosen order implies (it depends on which dimensions
  come before), and the chosen order chains the intervals;
* each dimension is a no-overlap resource (with pipeline stages, each stage's
  dimension, and each stage's compute unit); no chunk starts before its issue;
* redundant: makespan >= least head + total load + least tail per dimension
  (without it the search proves little beyond a handful of chunks);
* symmetry: chunks of one class are interchangeable, so their order indices
  do not decrease with the chunk index, and among equal orders the first
  phases start in chunk order.

The solver's per-dimension sequences are re-timed with the exact durations
(a left shift), so every reported makespan is exact. Rounding *down* makes the
quantised model a relaxation: any exact schedule with starts ``s`` becomes a
feasible quantised one with starts ``floor(s / q)``, since
``floor(a + b) >= floor(a) + floor(b)`` keeps every precedence and every
no-overlap. So CP-SAT's objective bound times the quantum is a lower bound of
the exact problem as it stands, with no correction that grows with the
number of phases.

The quantum is *exact* where it can be (:func:`exact_quantum`): the largest
one that every duration, issue time and lag is a whole multiple of (the cost
model's times are small rationals: 5/2048 ns on the 4D networks of the
benchmarks). Then nothing is rounded and CP-SAT's proof of optimality is a
proof for the exact problem. Otherwise (or when the exact quantum would need
more than ``max_exact_quanta`` of them) it is the warm start's makespan over
``horizon_quanta`` (:class:`~themis_opt.params.CpsatParams`), and the bound is
that of the rounded-down relaxation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import NamedTuple

from ortools.sat.python import cp_model

from themis_opt.budget import Deadline
from themis_opt.cost import PhaseSpec, collective_plan
from themis_opt.cpsat.params import CpsatParams
from themis_opt.instance import ChunkClass, Collective, Instance, Op
from themis_opt.orders import Order, Orders
from themis_opt.schedule import ChunkSchedule, Schedule
from themis_opt.sim import compute_sequence_of, left_shift, retime, sequences_of
from themis_opt.sim.model import chunk_plan

WHOLE = 1e-9  # relative float error within which a time counts as a whole number of quanta (a margin)
CPSAT = CpsatParams()  # the defaults


def default_quantum(upper_bound: float, params: CpsatParams = CPSAT) -> float:
    """The coarse time quantum for a makespan of ``upper_bound`` ns."""
    return max(upper_bound / params.horizon_quanta, 1e-3)


def quanta(ns: float, quantum: float) -> int:
    """``ns`` in whole quanta, rounded down; within a relative 1e-9 of a whole number, that number."""
    x = ns / quantum
    whole = round(x)
    if abs(x - whole) <= WHOLE * max(1.0, abs(x)):
        return max(0, whole)
    return max(0, math.floor(x))


def exact_quantum(
    instance: Instance, upper_bound: float, deadline: Deadline | None = None, params: CpsatParams = CPSAT
) -> float | None:
    """The largest quantum that every duration, issue time and lag is a whole multiple of.

    With it nothing is rounded: CP-SAT's model is the exact problem and its
    proof of optimality is one of the exact makespan. ``None`` when some time
    is not a small rational (denominator above 2^20, e.g. a user's 1/3 ns),
    or when the makespan ``upper_bound`` would span more than
    ``params.max_exact_quanta`` quanta.
    """
    deadline = deadline or Deadline()
    values: set[float] = set()
    for cls in instance.chunk_classes:
        for n, order in enumerate(instance.orders[cls.collective]):
            if not n & 31:
                deadline.check("cpsat quantum")
            values.update(p.duration for p in chunk_plan(instance, cls.collective, cls.chunk_bytes, order))
    for task in instance.tasks:
        values.add(task.issue_ns)
        values.update(dep.lag_ns for dep in task.after)
    values.update(task.duration_ns for task in instance.computes)
    values.discard(0.0)
    if not values:
        return None
    exact = []
    for v in values:
        f = Fraction(v).limit_denominator(2**20)
        if abs(float(f) - v) > 1e-12 * max(1.0, abs(v)):
            return None
        exact.append(f)
    denominator = math.lcm(*(f.denominator for f in exact))
    if denominator > 2**40:
        return None
    quantum = Fraction(math.gcd(*(int(f * denominator) for f in exact)), denominator)
    if upper_bound / quantum > params.max_exact_quanta:
        return None
    return float(quantum)


class Start(NamedTuple):
    """Where a solution starts one phase: its dimension, its start in quanta, its chunk's index
    among the model's chunks and its position in the chunk's order.
    """

    dim: int
    at: int
    chunk: int
    phase: int


class CpsatModel:
    """The CP-SAT model of one instance with one quantum, built in stages as
    PyJobShop builds its OR-Tools model: variables, one method per family of
    constraints, the objective; the hint and the extraction of a schedule sit
    beside the variables they read.

    Times are in quanta, rounded down (see the module's docstring).
    """

    def __init__(
        self,
        instance: Instance,
        quantum: float,
        horizon: int,
        deadline: Deadline | None = None,
        busy: Mapping[int, Sequence[tuple[int, int]]] | None = None,
        symmetry: bool = True,
    ) -> None:
        self.instance = instance
        self.quantum = quantum
        self.horizon = horizon
        self.deadline = deadline or Deadline()
        self.symmetric = symmetry
        self.busy = busy or {}  # per lane (a stage's dimension), (start, size) in quanta that other work holds (LNS)
        self.model = cp_model.CpModel()
        # per chunk class: each order's exact phases and rounded durations
        self.plans: dict[tuple[int, int], dict[Order, tuple[PhaseSpec, ...]]] = {}
        self.rounded: dict[tuple[int, int, Order], list[int]] = {}
        self._variables()
        self._order_constraints()
        self._resource_constraints()
        self._task_constraints()
        self._redundant_constraints()
        if symmetry:  # off where a hint pins chunks to given places (LNS windows)
            self._symmetry_constraints()
        self._objective()

    def places(self, collective: int, order: Order) -> list[tuple[int, Op]]:
        """The (dimension, place) of each phase of a chunk of ``collective`` taking ``order``: its variables' keys."""
        return collective_plan(self.instance, collective, order)

    def floor(self, ns: float) -> int:
        """A time in quanta, rounded down (a relaxation); a whole number of quanta up to a
        relative 1e-9 of float error counts as whole (the bound's margin covers that).
        """
        return quanta(ns, self.quantum)

    # ------------------------------------------------------------ variables

    def _variables(self) -> None:
        instance, m, horizon = self.instance, self.model, self.horizon
        self.makespan = m.new_int_var(0, horizon, "makespan")
        self.lits: list[dict[Order, cp_model.IntVar]] = []
        self.start: list[dict[tuple[int, Op], cp_model.IntVar]] = []
        self.size: list[dict[tuple[int, Op], cp_model.IntVar]] = []
        self.end: list[dict[tuple[int, Op], cp_model.IntVar]] = []
        # per lane: a stage's dimension (stage * num_dims + dim; on one stage, the dimension)
        self.intervals: list[list[cp_model.IntervalVar]] = [[] for _ in range(instance.num_lanes)]
        domains: dict[tuple[int, int], dict[tuple[int, Op], list[int]]] = {}
        for i, (c, k) in enumerate(instance.chunk_ids):
            self.deadline.check("cpsat model")
            key = (c, instance.collectives[c].bytes_of(k))
            if key not in self.plans:  # identical chunks share their phase plans and size domains
                self.plans[key] = {o: chunk_plan(instance, c, key[1], o) for o in instance.orders[c]}
                sizes: dict[tuple[int, Op], set[int]] = {}
                for order, plan in self.plans[key].items():
                    self.rounded[(*key, order)] = [self.floor(p.duration) for p in plan]
                    for place, q in zip(self.places(c, order), self.rounded[(*key, order)]):
                        sizes.setdefault(place, set()).add(q)
                domains[key] = {dim_op: sorted(values) for dim_op, values in sizes.items()}
            plans = self.plans[key]
            self.lits.append({o: m.new_bool_var(f"o{i}_{'_'.join(map(str, o))}") for o in plans})
            start, size, end = {}, {}, {}
            for (dim, op), values in domains[key].items():
                tag = f"{i}_{dim}_{op.value[0]}"
                start[dim, op] = m.new_int_var(0, horizon, f"s{tag}")
                size[dim, op] = m.new_int_var_from_domain(cp_model.Domain.from_values(values), f"d{tag}")
                end[dim, op] = m.new_int_var(0, horizon, f"e{tag}")
                self.intervals[instance.lane(c, dim)].append(
                    m.new_interval_var(start[dim, op], size[dim, op], end[dim, op], f"i{tag}")
                )
            self.start.append(start)
            self.size.append(size)
            self.end.append(end)
        self.release = [m.new_int_var(0, horizon, f"r{c}") for c in range(len(instance.collectives))]
        self.finish = [m.new_int_var(0, horizon, f"f{c}") for c in range(len(instance.collectives))]
        self.compute_start = []
        self.compute_intervals = []
        for j, task in enumerate(instance.computes):
            start_var = m.new_int_var(0, horizon, f"cs{j}")
            self.compute_start.append(start_var)
            size_q = self.floor(task.duration_ns)
            self.compute_intervals.append(m.new_fixed_size_interval_var(start_var, size_q, f"ci{j}"))

    # ---------------------------------------------------------- constraints

    def _order_constraints(self) -> None:
        """Exactly one order per chunk; it fixes the phase sizes and chains the phases."""
        instance, m = self.instance, self.model
        for i, (c, k) in enumerate(instance.chunk_ids):
            key = (c, instance.collectives[c].bytes_of(k))
            m.add_exactly_one(self.lits[i].values())
            for n, order in enumerate(self.plans[key]):
                if not n & 31:
                    self.deadline.check("cpsat model")
                lit, dur = self.lits[i][order], self.rounded[(*key, order)]
                places = self.places(c, order)
                for p, place in enumerate(places):
                    m.add(self.size[i][place] == dur[p]).only_enforce_if(lit)
                    if p > 0:
                        m.add(self.start[i][place] >= self.end[i][places[p - 1]]).only_enforce_if(lit)

    def _resource_constraints(self) -> None:
        """``active_chunks`` phases at a time on each dimension (one: no overlap), one compute task at a time."""
        capacity = self.instance.network.active_chunks
        for d, intervals in enumerate(self.intervals):
            held = [
                self.model.new_fixed_size_interval_var(start, size, f"busy{d}_{n}")
                for n, (start, size) in enumerate(self.busy.get(d, ()))
            ]
            if intervals and capacity == 1:
                self.model.add_no_overlap(intervals + held)
            elif intervals:
                self.model.add_cumulative(intervals + held, [1] * (len(intervals) + len(held)), capacity)
        units: dict[int, list[cp_model.IntervalVar]] = {}  # per stage, its compute unit
        for task, interval in zip(self.instance.computes, self.compute_intervals):
            units.setdefault(task.stage, []).append(interval)
        for intervals in units.values():
            self.model.add_no_overlap(intervals)

    def _task_constraints(self) -> None:
        """Releases after issue times and dependencies (with lags), collective ends, the makespan."""
        instance, m = self.instance, self.model
        ends = self.task_ends()
        c = j = 0
        for task, before in zip(instance.tasks, instance.predecessors):
            if isinstance(task, Collective):
                at = self.release[c]
                c += 1
            else:
                at = self.compute_start[j]
                j += 1
            m.add(at >= self.floor(task.issue_ns))
            for p, dep in zip(before, task.after):
                m.add(at >= ends[p] + self.floor(dep.lag_ns))
        for i, (c, _) in enumerate(instance.chunk_ids):
            for key in self.start[i]:
                m.add(self.start[i][key] >= self.release[c])
                m.add(self.finish[c] >= self.end[i][key])
        for finish in self.finish:
            m.add(self.makespan >= finish)
        for j, task in enumerate(instance.computes):
            m.add(self.makespan >= self.compute_start[j] + self.floor(task.duration_ns))

    def task_ends(self) -> list[cp_model.LinearExprT]:
        """Each task's end as an expression, in ``instance.tasks`` order."""
        ends: list[cp_model.LinearExprT] = []
        c = j = 0
        for task in self.instance.tasks:
            if isinstance(task, Collective):
                ends.append(self.finish[c])
                c += 1
            else:
                ends.append(self.compute_start[j] + self.floor(task.duration_ns))
                j += 1
        return ends

    def _redundant_constraints(self) -> None:
        """Per dimension: makespan >= least head + total load + least tail
        (without it the search proves little beyond a handful of chunks).
        """
        instance = self.instance
        lanes = instance.num_lanes
        least_head, least_tail = [self.horizon] * lanes, [self.horizon] * lanes
        releases = self._releases()
        for (c, _), plans in self.plans.items():
            for order in plans:
                dur = self.rounded[(c, _, order)]
                total, elapsed, seen = sum(dur), 0, set()
                plan = plans[order]
                for p, ph in enumerate(plan):
                    lane = instance.lane(c, ph.dim)
                    if ph.dim not in seen:
                        seen.add(ph.dim)
                        least_head[lane] = min(least_head[lane], releases[c] + elapsed)
                    elapsed += dur[p]
                    if all(q.dim != ph.dim for q in plan[p + 1 :]):
                        least_tail[lane] = min(least_tail[lane], total - elapsed)
        capacity = instance.network.active_chunks
        for d in range(lanes):
            if self.intervals[d]:
                sizes = [
                    self.size[i][key]
                    for i, (c, _) in enumerate(instance.chunk_ids)
                    for key in self.size[i]
                    if instance.lane(c, key[0]) == d
                ]
                self.model.add(capacity * (self.makespan - least_head[d] - least_tail[d]) >= sum(sizes))

    def _releases(self) -> list[int]:
        """Per collective, a lower bound on its release in the model's own time: its issue time and each
        dependency's least release plus least duration plus lag, each rounded down as the model rounds
        it (the exact earliest release rounded down may exceed it: a sum of rounded-down durations can
        be less than the rounded-down sum, so it would cut off solutions of the rounded model).
        """
        instance = self.instance
        least = [0] * len(instance.collectives)
        for (c, nbytes), plans in self.plans.items():
            least[c] = max(least[c], min(sum(self.rounded[(c, nbytes, order)]) for order in plans))
        durations, c = [], 0
        for task in instance.tasks:
            if isinstance(task, Collective):
                durations.append(least[c])
                c += 1
            else:
                durations.append(self.floor(task.duration_ns))
        release = [0] * len(instance.tasks)
        for t in instance.topological_order:
            task = instance.tasks[t]
            release[t] = max(
                [
                    self.floor(task.issue_ns),
                    *(
                        release[p] + durations[p] + self.floor(dep.lag_ns)
                        for p, dep in zip(instance.predecessors[t], task.after)
                    ),
                ]
            )
        return [release[t] for t, task in enumerate(instance.tasks) if isinstance(task, Collective)]

    def _symmetry_constraints(self) -> None:
        """Chunks of one class are interchangeable: order indices do not
        decrease with the chunk index, and among equal orders the first
        phases start in chunk order.
        """
        index = {cid: i for i, cid in enumerate(self.instance.chunk_ids)}
        for cls in self.instance.chunk_classes:
            orders = self.instance.orders[cls.collective]
            for a, b in zip(cls.chunks, cls.chunks[1:]):
                self.deadline.check("cpsat model")
                i, j = index[(cls.collective, a)], index[(cls.collective, b)]
                rank_i = sum(r * self.lits[i][o] for r, o in enumerate(orders))
                rank_j = sum(r * self.lits[j][o] for r, o in enumerate(orders))
                self.model.add(rank_i <= rank_j)
                for order in orders:
                    first = self.places(cls.collective, order)[0]
                    self.model.add(self.start[i][first] <= self.start[j][first]).only_enforce_if(
                        [self.lits[i][order], self.lits[j][order]]
                    )

    def _objective(self) -> None:
        self.model.minimize(self.makespan)

    def fix_counts(self, counts: Mapping[ChunkClass, Mapping[Order, int]]) -> None:
        """Restrict the model: exactly ``counts[cls][order]`` chunks of each class take each order."""
        if self.symmetric:
            for i, order in self._chunk_orders(counts):
                for o, lit in self.lits[i].items():
                    self.model.add(lit == int(o == order))
            return
        index = {cid: i for i, cid in enumerate(self.instance.chunk_ids)}
        for cls in self.instance.chunk_classes:
            for order in self.instance.orders[cls.collective]:
                lits = [self.lits[index[(cls.collective, k)]][order] for k in cls.chunks]
                self.model.add(sum(lits) == counts[cls].get(order, 0))

    def count_literals(self, counts: Mapping[ChunkClass, Mapping[Order, int]]) -> list[cp_model.IntVar]:
        """Literals that, all true, give exactly ``counts[cls][order]`` chunks of each class each
        order (a solve's assumptions; the symmetry breaking is required).
        """
        return [self.lits[i][order] for i, order in self._chunk_orders(counts)]

    def _chunk_orders(self, counts: Mapping[ChunkClass, Mapping[Order, int]]) -> list[tuple[int, Order]]:
        """Each chunk's index and order under ``counts``: with the symmetry breaking, order indices
        do not decrease with the chunk index, so the counts fix every chunk's order.
        """
        assert self.symmetric, "counts fix each chunk's order only under the symmetry breaking"
        index = {cid: i for i, cid in enumerate(self.instance.chunk_ids)}
        pairs = []
        for cls in self.instance.chunk_classes:
            orders = self.instance.orders[cls.collective]
            taken = [o for o in orders for _ in range(counts[cls].get(o, 0))]
            for k, order in zip(cls.chunks, taken, strict=True):
                pairs.append((index[(cls.collective, k)], order))
        return pairs

    # --------------------------------------------------- hint and extraction

    def hint(self, schedule: Schedule) -> None:
        """Hint a complete solution: ``schedule``'s orders and sequences,
        relabelled within each chunk class to obey the symmetry breaking and
        re-timed in quanta.
        """
        instance = self.instance
        schedule = relabel(instance, schedule)
        orders = schedule.orders
        durations = [
            self.rounded[(c, instance.collectives[c].bytes_of(k), orders[(c, k)])] for c, k in instance.chunk_ids
        ]
        starts, compute_starts = left_shift(
            instance,
            orders,
            sequences_of(instance, schedule),
            compute_sequence_of(schedule),
            durations=durations,
            compute_durations=[self.floor(t.duration_ns) for t in instance.computes],
            issues=[self.floor(t.issue_ns) for t in instance.tasks],
            lags=[[self.floor(d.lag_ns) for d in t.after] for t in instance.tasks],
        )
        self.hint_times(orders, [[round(s) for s in chunk] for chunk in starts], [round(s) for s in compute_starts])

    def hint_times(self, orders: Orders, starts: Sequence[Sequence[int]], compute_starts: Sequence[int] = ()) -> None:
        """Hint a complete solution in quanta: each chunk's order and its phases' starts (in the
        order's phase order), each compute task's start; sizes, ends and the makespan follow.
        """
        instance = self.instance
        first = [self.horizon] * len(instance.collectives)
        last = [0] * len(instance.collectives)
        for i, (c, k) in enumerate(instance.chunk_ids):
            order = orders[(c, k)]
            durations = self.rounded[(c, instance.collectives[c].bytes_of(k), order)]
            for o, lit in self.lits[i].items():
                self.model.add_hint(lit, o == order)
            for (dim, op), s, size in zip(self.places(c, order), starts[i], durations):
                self.model.add_hint(self.start[i][dim, op], s)
                self.model.add_hint(self.size[i][dim, op], size)
                self.model.add_hint(self.end[i][dim, op], s + size)
                first[c], last[c] = min(first[c], s), max(last[c], s + size)
        for c in range(len(instance.collectives)):
            self.model.add_hint(self.release[c], first[c])
            self.model.add_hint(self.finish[c], last[c])
        for j, task in enumerate(instance.computes):
            self.model.add_hint(self.compute_start[j], compute_starts[j])
            last.append(compute_starts[j] + self.floor(task.duration_ns))
        self.model.add_hint(self.makespan, max(last, default=0))

    def solution(self, value: Callable[[cp_model.IntVar], int]) -> tuple[dict[tuple[int, int], Order], list[Start]]:
        """The orders of the solution ``value`` reads, and every phase's start in it."""
        orders = {}
        starts: list[Start] = []
        for i, (c, k) in enumerate(self.instance.chunk_ids):
            order = next(o for o, lit in self.lits[i].items() if value(lit))
            orders[(c, k)] = order
            for p, (dim, op) in enumerate(self.places(c, order)):
                starts.append(Start(dim, value(self.start[i][dim, op]), i, p))
        return orders, starts

    def extract(self, value: Callable[[cp_model.IntVar], int]) -> Schedule:
        """The exactly re-timed schedule of the solution ``value`` reads."""
        orders, starts = self.solution(value)
        entries: dict[int, list[tuple[int, int, int]]] = {}
        ids = self.instance.chunk_ids
        for start in starts:
            lane = self.instance.lane(ids[start.chunk][0], start.dim)
            entries.setdefault(lane, []).append((start.at, start.chunk, start.phase))
        sequences = {d: [(i, p) for _, i, p in sorted(seq)] for d, seq in entries.items()}
        computes = sorted(range(len(self.instance.computes)), key=lambda j: (value(self.compute_start[j]), j))
        return retime(self.instance, orders, sequences, computes)


def relabel(instance: Instance, schedule: Schedule) -> Schedule:
    """The same schedule with chunks renumbered within each chunk class so
    that order indices do not decrease and, among equal orders, first phases
    start in chunk order (interchangeable chunks: nothing else changes).
    """
    by_id = {(ch.collective, ch.chunk): ch for ch in schedule.chunks}
    renamed = dict(by_id)
    for cls in instance.chunk_classes:
        rank = {o: r for r, o in enumerate(instance.orders[cls.collective])}
        members = sorted(
            (by_id[(cls.collective, k)] for k in cls.chunks),
            key=lambda ch: (rank[ch.order], ch.phases[0].start_ns, ch.chunk),
        )
        for k, ch in zip(cls.chunks, members):
            renamed[(cls.collective, k)] = ChunkSchedule(cls.collective, k, ch.order, ch.phases)
    return Schedule(tuple(renamed[cid] for cid in instance.chunk_ids), schedule.computes)
