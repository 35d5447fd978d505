"""Running CP-SAT on the exact model: from a warm start, within a deadline, the outcome re-timed exactly."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.cost import merging_shortens
from themis_opt.cpsat.model import CPSAT, CpsatModel, default_quantum, exact_quantum
from themis_opt.cpsat.params import CpsatParams
from themis_opt.cpsat.solver import Solver, SolverSettings, solved, status_of
from themis_opt.errors import InputError
from themis_opt.instance import ChunkClass, Instance
from themis_opt.orders import Order
from themis_opt.policies import counts_match
from themis_opt.result import SolverStats, Status, optimality_tolerance
from themis_opt.schedule import Schedule

logger = logging.getLogger(__name__)

# The most quanta a horizon may span: CP-SAT's times are int64, and the model adds up to a few
# million of them in one constraint (2^40 x 2^22 < 2^63); a finer quantum overflows (a TypeError).
MAX_QUANTA = 2**40
BOUND_MARGIN = 1e-8  # CP-SAT's bound is shrunk by this (relative): covers WHOLE along any path (a margin)


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
    params
        The quantum's and the search's tuning numbers.

    Raises
    ------
    OutOfTime
        If the deadline passes while the model is built.
    """
    quantum = quantum_for(instance, warm, quantum_ns, deadline, params)
    horizon = math.ceil(warm.makespan / quantum) + 1  # rounded-down durations: the warm start fits
    model = CpsatModel(instance, quantum, horizon, deadline)
    model.model.add(model.makespan >= model.floor(lower_bound))
    if counts is not None:
        model.fix_counts(counts)
    if counts is None or counts_match(instance, warm.orders, counts):
        model.hint(warm)
    # keep a little of the budget for the last solution's re-timing and the result (big models more)
    large = instance.num_phases > params.probing_phases
    left = deadline.remaining()
    search_time = left * (params.search_share_large if large else params.search_share) - 0.1
    if large:  # its overrun is seconds, whatever the limit: a long call's search keeps only those
        search_time = max(search_time, left - params.search_reserve_large)
    if search_time <= 0:
        raise OutOfTime("cpsat: no time left to search")
    solver = Solver(
        SolverSettings(
            workers=workers,
            seed=seed,
            seconds=search_time,
            # presolve's probing would leave the search nothing on a large model, not even the hinted solution
            probing=not large,
            # the model is mostly no-overlaps: their stronger propagation proves more (the benchmark page)
            strong_disjunctive=True,
            log=log,
        )
    )
    origin = instance.origin_ns
    recorder = _Recorder(model, warm, t0, lower_bound, origin)
    code = solver.run(model.model, deadline, recorder)
    status = status_of(code)
    bound = None
    if counts is not None:  # a restriction's status and bound say nothing of the problem
        status = Status.FEASIBLE if recorder.solutions else Status.NO_SOLUTION
    elif solved(code):
        # the rounded-down model is a relaxation: its bound in quanta bounds the exact problem
        bound = max(0.0, solver.best_objective_bound * quantum * (1 - BOUND_MARGIN))
    stats = _stats(solver, code, recorder, quantum)
    logger.debug("cpsat: %s, makespan %.3f ns", stats.solver_status, recorder.best.makespan)
    return CpsatOutcome(status, recorder.best, bound, stats, tuple(recorder.trajectory))


def _stats(solver: Solver, code: Any, recorder: _Recorder, quantum: float) -> SolverStats:
    """A run's statistics, as results report them."""
    return SolverStats(
        solver_status=solver.status_name(code),
        branches=solver.num_branches,
        conflicts=solver.num_conflicts,
        solutions=recorder.solutions,
        wall_time_s=solver.wall_time,
        quantum_ns=quantum,
    )


def quantum_for(
    instance: Instance, warm: Schedule, quantum_ns: float | None, deadline: Deadline, params: CpsatParams = CPSAT
) -> float:
    """The quantum of a model of ``instance`` from ``warm``: ``quantum_ns`` if given, else
    :func:`exact_quantum` where there is one, else :func:`default_quantum` of its makespan.

    Raises
    ------
    InputError
        If the quantum is so fine that ``warm`` spans more than ``MAX_QUANTA``.
    OutOfTime
        If ``deadline`` passes first.
    """
    quantum = quantum_ns
    if quantum is None:
        quantum = exact_quantum(instance, warm.makespan, deadline, params) or default_quantum(warm.makespan, params)
    if warm.makespan / quantum > MAX_QUANTA:  # only a given quantum can be this fine
        raise InputError(
            "quantum_ns",
            f"{quantum:g} ns is too fine for this instance: a schedule of {warm.makespan:g} ns would span more "
            f"than the {MAX_QUANTA:,} quanta CP-SAT's integers hold; give at least {warm.makespan / MAX_QUANTA:.3g}",
        )
    return quantum


def alone_bound(instance: Instance, upper: Schedule, *, deadline: Deadline, work: float) -> float | None:
    """CP-SAT's lower bound on ``instance``'s makespan with one worker and at most ``work`` seconds
    of deterministic time (the same answer on every machine, unless ``deadline`` stops it first: the
    bound is valid either way); ``upper``, a valid schedule, is hinted and sets the horizon.

    ``None`` where the baseline's merged phases are shorter than split ones (the model's bound holds
    for split schedules only), or when the deadline passes before CP-SAT has a solution. For the
    iteration bound, a collective alone (:func:`~themis_opt.bounds.iteration.collective_spans`).
    """
    if merging_shortens(instance):
        return None
    try:
        quantum = exact_quantum(instance, upper.makespan, deadline) or default_quantum(upper.makespan)
        model = CpsatModel(instance, quantum, math.ceil(upper.makespan / quantum) + 1, deadline)
    except OutOfTime:
        return None
    model.hint(upper)
    solver = Solver(SolverSettings(work=work, strong_disjunctive=True))
    if not solved(solver.run(model.model, deadline)):
        return None
    return max(0.0, solver.best_objective_bound * quantum * (1 - BOUND_MARGIN))
