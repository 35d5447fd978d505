"""The exact CP-SAT model: every chunk's order and every dimension's sequence.

Model, in integer time (durations and issue times rounded *down* to a quantum):

* each chunk picks exactly one order (a Boolean per permutation of its
  collective's dimensions);
* each chunk has one interval per (dimension, operation) it runs; its size is
  the duration that the chosen order implies (it depends on which dimensions
  come before), and the chosen order chains the intervals;
* each dimension is a no-overlap resource; no chunk starts before its issue;
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

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from themis_opt.bounds import collective_releases
from themis_opt.budget import Deadline, OutOfTime, run_interruptibly
from themis_opt.cost import PhaseSpec, chunk_phases, phase_plan_of
from themis_opt.errors import InputError, counted
from themis_opt.instance import ChunkClass, Collective, Instance, Op
from themis_opt.orders import Order
from themis_opt.params import CpsatParams
from themis_opt.policies import counts_match
from themis_opt.result import SolverStats, Status, optimality_tolerance
from themis_opt.schedule import ChunkSchedule, Schedule
from themis_opt.simulator import compute_sequence_of, left_shift, retime, sequences_of

logger = logging.getLogger(__name__)

WHOLE = 1e-9  # relative float error within which a time counts as a whole number of quanta (a margin)
BOUND_MARGIN = 1e-8  # CP-SAT's bound is shrunk by this (relative): covers WHOLE along any path (a margin)
CPSAT = CpsatParams()  # the defaults

_STATUS = {
    cp_model.OPTIMAL: Status.OPTIMAL,
    cp_model.FEASIBLE: Status.FEASIBLE,
    cp_model.INFEASIBLE: Status.INFEASIBLE,
    cp_model.MODEL_INVALID: Status.MODEL_INVALID,
    cp_model.UNKNOWN: Status.NO_SOLUTION,
}


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
            values.update(p.duration for p in chunk_phases(instance, cls.collective, cls.chunk_bytes, order))
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


@dataclass(frozen=True)
class CpsatOutcome:
    """What one CP-SAT run found.

    Parameters
    ----------
    status
        CP-SAT's status, mapped; ``no_solution`` when it found nothing (the
        caller still holds the warm start).
    schedule
        The best exactly re-timed schedule of the warm start and of every
        solution CP-SAT reported.
    bound
        CP-SAT's bound, corrected to a bound of the exact problem (``None``
        when it found no solution).
    stats
        CP-SAT's search statistics.
    trajectory
        (seconds since ``t0``, exact makespan) of every improving solution.
    """

    status: Status
    schedule: Schedule
    bound: float | None
    stats: SolverStats
    trajectory: tuple[tuple[float, float], ...]


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
        self.busy = busy or {}  # per dimension, (start, size) in quanta that other work holds (LNS)
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
        return phase_plan_of(self.instance.network, self.instance.collectives[collective].kind, order)

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
        self.intervals: list[list[cp_model.IntervalVar]] = [[] for _ in range(instance.network.num_dims)]
        domains: dict[tuple[int, int], dict[tuple[int, Op], list[int]]] = {}
        for i, (c, k) in enumerate(instance.chunk_ids):
            self.deadline.check("cpsat model")
            key = (c, instance.collectives[c].bytes_of(k))
            if key not in self.plans:  # identical chunks share their phase plans and size domains
                self.plans[key] = {o: chunk_phases(instance, c, key[1], o) for o in instance.orders[c]}
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
                self.intervals[dim].append(m.new_interval_var(start[dim, op], size[dim, op], end[dim, op], f"i{tag}"))
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
        """One phase at a time on each dimension, one compute task at a time."""
        for d, intervals in enumerate(self.intervals):
            held = [
                self.model.new_fixed_size_interval_var(start, size, f"busy{d}_{n}")
                for n, (start, size) in enumerate(self.busy.get(d, ()))
            ]
            if intervals:
                self.model.add_no_overlap(intervals + held)
        if self.compute_intervals:
            self.model.add_no_overlap(self.compute_intervals)

    def _task_constraints(self) -> None:
        """Releases after issue times and dependencies (with lags), collective ends, the makespan."""
        instance, m = self.instance, self.model
        ends = self.task_ends()
        index = instance.task_index
        c = j = 0
        for task in instance.tasks:
            if isinstance(task, Collective):
                at = self.release[c]
                c += 1
            else:
                at = self.compute_start[j]
                j += 1
            m.add(at >= self.floor(task.issue_ns))
            for dep in task.after:
                m.add(at >= ends[index[dep.task]] + self.floor(dep.lag_ns))
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
        num_dims = instance.network.num_dims
        least_head, least_tail = [self.horizon] * num_dims, [self.horizon] * num_dims
        releases = [self.floor(r) for r in collective_releases(instance)]
        for (c, _), plans in self.plans.items():
            for order in plans:
                dur = self.rounded[(c, _, order)]
                total, elapsed, seen = sum(dur), 0, set()
                plan = plans[order]
                for p, ph in enumerate(plan):
                    if ph.dim not in seen:
                        seen.add(ph.dim)
                        least_head[ph.dim] = min(least_head[ph.dim], releases[c] + elapsed)
                    elapsed += dur[p]
                    if all(q.dim != ph.dim for q in plan[p + 1 :]):
                        least_tail[ph.dim] = min(least_tail[ph.dim], total - elapsed)
        for d in range(num_dims):
            if self.intervals[d]:
                sizes = [self.size[i][key] for i in range(len(self.size)) for key in self.size[i] if key[0] == d]
                self.model.add(self.makespan >= least_head[d] + sum(sizes) + least_tail[d])

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
        index = {cid: i for i, cid in enumerate(self.instance.chunk_ids)}
        for cls in self.instance.chunk_classes:
            orders = self.instance.orders[cls.collective]
            if self.symmetric:
                # order indices do not decrease with the chunk index: the counts fix every chunk's order
                taken = [o for o in orders for _ in range(counts[cls].get(o, 0))]
                for k, order in zip(cls.chunks, taken, strict=True):
                    for o, lit in self.lits[index[(cls.collective, k)]].items():
                        self.model.add(lit == int(o == order))
                continue
            for order in orders:
                lits = [self.lits[index[(cls.collective, k)]][order] for k in cls.chunks]
                self.model.add(sum(lits) == counts[cls].get(order, 0))

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
        makespan = 0
        first = [self.horizon] * len(instance.collectives)
        last = [0] * len(instance.collectives)
        for i, (c, k) in enumerate(instance.chunk_ids):
            order = orders[(c, k)]
            for o, lit in self.lits[i].items():
                self.model.add_hint(lit, o == order)
            for p, (dim, op) in enumerate(self.places(c, order)):
                s = round(starts[i][p])
                self.model.add_hint(self.start[i][dim, op], s)
                self.model.add_hint(self.size[i][dim, op], durations[i][p])
                self.model.add_hint(self.end[i][dim, op], s + durations[i][p])
                first[c], last[c] = min(first[c], s), max(last[c], s + durations[i][p])
        for c in range(len(instance.collectives)):
            self.model.add_hint(self.release[c], first[c])
            self.model.add_hint(self.finish[c], last[c])
        for j, task in enumerate(instance.computes):
            s = round(compute_starts[j])
            self.model.add_hint(self.compute_start[j], s)
            last.append(s + self.floor(task.duration_ns))
        self.model.add_hint(self.makespan, max([makespan, *last]))

    def extract(self, value: Callable[[cp_model.IntVar], int]) -> Schedule:
        """The exactly re-timed schedule of the solution ``value`` reads."""
        instance = self.instance
        orders = {}
        entries: dict[int, list[tuple[int, int, int]]] = {}
        for i, (c, k) in enumerate(instance.chunk_ids):
            order = next(o for o, lit in self.lits[i].items() if value(lit))
            orders[(c, k)] = order
            for p, (dim, op) in enumerate(self.places(c, order)):
                entries.setdefault(dim, []).append((value(self.start[i][dim, op]), i, p))
        sequences = {d: [(i, p) for _, i, p in sorted(seq)] for d, seq in entries.items()}
        computes = sorted(range(len(instance.computes)), key=lambda j: (value(self.compute_start[j]), j))
        return retime(instance, orders, sequences, computes)


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


class _Recorder(cp_model.CpSolverSolutionCallback):
    """Keeps the best exactly re-timed solution and the improvement trajectory."""

    def __init__(self, model: CpsatModel, best: Schedule, t0: float, lower_bound: float, origin: float) -> None:
        super().__init__()
        self._model = model
        self._t0 = t0
        self._lower_bound = lower_bound
        self._origin = origin
        self.best = best
        self.solutions = 0
        self.trajectory: list[tuple[float, float]] = [(time.perf_counter() - t0, best.makespan)]

    def on_solution_callback(self) -> None:
        self.solutions += 1
        schedule = self._model.extract(self.value)
        if schedule.makespan < self.best.makespan:
            self.best = schedule
            self.trajectory.append((time.perf_counter() - self._t0, schedule.makespan))
        if self.best.makespan - self._lower_bound <= optimality_tolerance(self.best.makespan, self._origin):
            # it meets a proven lower bound: optimal, nothing left to search for
            self.stop_search()


def solve_cpsat(
    instance: Instance,
    warm: Schedule,
    *,
    deadline: Deadline,
    workers: int,
    seed: int,
    quantum_ns: float | None,
    log: bool,
    t0: float,
    lower_bound: float = 0.0,
    counts: Mapping[ChunkClass, Mapping[Order, int]] | None = None,
    cap: float | None = None,
    params: CpsatParams = CPSAT,
) -> CpsatOutcome:
    """Minimise the makespan with CP-SAT from a complete warm start.

    Parameters
    ----------
    instance
        The instance.
    warm
        A valid schedule; the outcome is never worse.
    deadline
        When the search must be over; building the model counts too.
    workers, seed
        CP-SAT's worker threads and random seed.
    quantum_ns
        Time quantum; ``None`` picks :func:`exact_quantum` where there is one,
        else :func:`default_quantum` of the warm start.
    log
        Stream CP-SAT's search log through this module's logger at INFO.
    t0
        ``time.perf_counter()`` at the start of the method, for the trajectory.
    lower_bound
        A proven lower bound on the exact makespan. It bounds the quantised
        makespan from below too (rounded durations are only longer), and the
        search stops once a solution meets it within the optimality tolerance.
    counts
        Solve a restriction instead: exactly ``counts[cls][order]`` chunks of
        each class take each order (e.g. a load program's optimal counts:
        when that program's bound is tight, some optimal schedule has counts
        optimal in it), each chunk's order fixed in rank order (the symmetry breaking
        leaves no other choice). ``warm`` is hinted when it has these
        counts; otherwise it only bounds the horizon and the search finds its
        own first solution. The outcome's schedule is valid, but its status is never ``optimal`` and
        it has no bound (both would be of the restriction).
    cap
        Look only for a schedule of makespan at most ``cap`` ns, and stop at
        the first: the horizon is ``cap`` in quanta (rounded down, every such
        schedule fits), ``warm`` is not hinted (it is longer) and stays the
        outcome's schedule if none is found. With ``counts``, a quick
        question: do these counts admit a schedule at the lower bound? The
        status is never ``optimal`` and there is no bound (a capped model
        proves nothing about longer schedules).
    params
        The quantum's and the search's tuning numbers.

    Raises
    ------
    OutOfTime
        If the deadline passes while the model is built.
    """
    quantum = quantum_ns
    if quantum is None:
        quantum = exact_quantum(instance, warm.makespan, deadline, params) or default_quantum(warm.makespan, params)
    horizon = math.ceil(warm.makespan / quantum) + 1  # rounded-down durations: the warm start fits
    if cap is not None:
        horizon = min(horizon, math.floor(cap / quantum))
    model = CpsatModel(instance, quantum, horizon, deadline)
    model.model.add(model.makespan >= model.floor(lower_bound))
    if counts is not None:
        model.fix_counts(counts)
    if cap is None and (counts is None or counts_match(instance, warm.orders, counts)):
        model.hint(warm)
    # keep a little of the budget for the last solution's re-timing and the result (big models more)
    large = instance.num_phases > params.probing_phases
    search_time = deadline.remaining() * (params.search_share_large if large else params.search_share) - 0.1
    if search_time <= 0:
        raise OutOfTime("cpsat: no time left to search")
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = search_time
    if large:  # presolve's probing would leave the search nothing, not even the hinted solution
        solver.parameters.cp_model_probing_level = 0
    solver.parameters.num_workers = workers
    # the model is mostly no-overlaps: their stronger propagation proves more (the benchmark page)
    solver.parameters.use_strong_propagation_in_disjunctive = True
    solver.parameters.random_seed = seed
    solver.parameters.stop_after_first_solution = cap is not None
    solver.parameters.catch_sigint_signal = False  # Ctrl-C goes to Python, which stops the search
    if log:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False  # the callback alone carries it
        solver.log_callback = lambda line: logger.info("%s", line)
    origin = instance.origin_ns
    recorder = _Recorder(model, warm, t0, lower_bound, origin)
    stop_at = time.perf_counter() + search_time
    code = run_interruptibly(lambda: solver.solve(model.model, recorder), solver.stop_search, stop_at)
    status = _STATUS[code]
    bound = None
    if counts is not None or cap is not None:  # a restriction's status and bound say nothing of the problem
        status = Status.FEASIBLE if recorder.solutions else Status.NO_SOLUTION
    elif code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # the rounded-down model is a relaxation: its bound in quanta bounds the exact problem
        bound = max(0.0, solver.best_objective_bound * quantum * (1 - BOUND_MARGIN))
    stats = SolverStats(
        solver_status=solver.status_name(code),
        branches=solver.num_branches,
        conflicts=solver.num_conflicts,
        solutions=recorder.solutions,
        wall_time_s=solver.wall_time,
        quantum_ns=quantum,
    )
    logger.debug("cpsat: %s, makespan %.3f ns", stats.solver_status, recorder.best.makespan)
    return CpsatOutcome(status, recorder.best, bound, stats, tuple(recorder.trajectory))


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
    phases_of = [0] * len(instance.collectives)
    for chunk in best.chunks:
        phases_of[chunk.collective] += len(chunk.phases)
    literals = [coll.chunks * instance.order_count(c) for c, coll in enumerate(instance.collectives)]
    if all(n > max_literals for n in literals):
        return best, tuple(trajectory)  # no window is small enough to re-solve
    position = 0
    while deadline.remaining() > 0.5:
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
    sub = Instance(instance.network, tuple(sub_tasks), f"{instance.name}-window")
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
                busy.setdefault(phase.dim, []).append((start, size))
    share = deadline.share(params.window_share)
    horizon += max((start + size for held in busy.values() for start, size in held), default=0)
    try:
        model = CpsatModel(sub, quantum, horizon, share, busy, symmetry=False)
    except OutOfTime:
        return None
    # hint the incumbent, times rounded down like the held intervals: a feasible solution
    placed = {(ch.collective, ch.chunk): ch for ch in incumbent.chunks}
    first = [horizon] * len(chosen)
    last = [0] * len(chosen)
    for i, (c, k) in enumerate(sub.chunk_ids):
        chunk = placed[(chosen[c], k)]
        for o, lit in model.lits[i].items():
            model.model.add_hint(lit, o == chunk.order)
        rounded = model.rounded[(c, sub.collectives[c].bytes_of(k), chunk.order)]
        for place, phase, size in zip(model.places(c, chunk.order), chunk.phases, rounded):
            at = math.floor(phase.start_ns / quantum)
            model.model.add_hint(model.start[i][place], at)
            model.model.add_hint(model.size[i][place], size)
            model.model.add_hint(model.end[i][place], at + size)
            first[c], last[c] = min(first[c], at), max(last[c], at + size)
    for c in range(len(chosen)):
        model.model.add_hint(model.release[c], first[c])
        model.model.add_hint(model.finish[c], last[c])
    model.model.add_hint(model.makespan, max(last))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, share.remaining())
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.catch_sigint_signal = False
    code = run_interruptibly(lambda: solver.solve(model.model), solver.stop_search, share.at)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    orders = dict(incumbent.orders)
    entries: dict[int, list[tuple[float, int, int]]] = {}
    index = {cid: i for i, cid in enumerate(instance.chunk_ids)}
    for chunk in incumbent.chunks:
        if chunk.collective in window:
            continue
        for p, phase in enumerate(chunk.phases):
            entries.setdefault(phase.dim, []).append((phase.start_ns, index[(chunk.collective, chunk.chunk)], p))
    for i, (c, k) in enumerate(sub.chunk_ids):
        order = next(o for o, lit in model.lits[i].items() if solver.value(lit))
        orders[(chosen[c], k)] = order
        for p, (dim, op) in enumerate(model.places(c, order)):
            begin = solver.value(model.start[i][dim, op]) * quantum
            entries.setdefault(dim, []).append((begin, index[(chosen[c], k)], p))
    sequences = {d: [(i, p) for _, i, p in sorted(seq)] for d, seq in entries.items()}
    try:
        return retime(instance, orders, sequences, compute_sequence_of(incumbent))
    except InputError:  # the merged sequences contradict a dependency: no improvement from this window
        return None
