"""The one result type every method returns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from themis_opt.bounds import Bounds, traffic_bytes
from themis_opt.instance import Instance, check_int, check_name, check_number
from themis_opt.schedule import Schedule

OPTIMALITY_TOLERANCE = 1e-4  # relative to the schedule's span: "optimal" = within 0.01% of it


def optimality_tolerance(makespan: float, origin_ns: float) -> float:
    """The slack, in ns, within which ``makespan`` meeting a lower bound counts as optimal.

    It is ``OPTIMALITY_TOLERANCE`` times the schedule's own span (makespan
    minus the earliest issue time ``origin_ns``), never of absolute time, so
    a late issue time cannot hide a gap.
    """
    return OPTIMALITY_TOLERANCE * max(0.0, makespan - origin_ns)


def is_proven(makespan: float, bound: float, origin_ns: float) -> bool:
    """Whether ``makespan`` meets the lower ``bound`` within the optimality tolerance."""
    return makespan - bound <= optimality_tolerance(makespan, origin_ns)


def status_of(makespan: float, bounds: Bounds, origin_ns: float) -> Status:
    """The one definition of optimal: a schedule is optimal when its makespan meets the best
    lower bound known within the optimality tolerance, else feasible.
    """
    return Status.OPTIMAL if is_proven(makespan, bounds.best, origin_ns) else Status.FEASIBLE


def gap(makespan: float | None, bound: float | None) -> float | None:
    """The optimality gap: ``makespan / bound - 1`` (``None`` without both)."""
    if makespan is None or bound is None or bound <= 0:
        return None
    return makespan / bound - 1


class Status(StrEnum):
    """Outcome of a method.

    ``optimal``: the schedule is proven optimal within the optimality
    tolerance (its makespan is within ``OPTIMALITY_TOLERANCE`` of its span
    above a proven lower bound); ``feasible``: a valid schedule, not proven
    optimal; ``no_solution``: none found in time; ``infeasible`` and
    ``model_invalid`` as CP-SAT reports them; ``invalid``: a schedule the
    validator rejects, where a float cannot resolve the instance's times
    (:mod:`themis_opt.resolution`; the note says why).
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    NO_SOLUTION = "no_solution"
    INFEASIBLE = "infeasible"
    MODEL_INVALID = "model_invalid"
    INVALID = "invalid"


@dataclass(frozen=True)
class SolverStats:
    """What CP-SAT reports about its search.

    Parameters
    ----------
    solver_status
        CP-SAT's own status name (``OPTIMAL``, ``FEASIBLE``, ``UNKNOWN``...).
    branches, conflicts
        Search effort.
    solutions
        Improving solutions found by CP-SAT.
    wall_time_s
        CP-SAT's wall time.
    quantum_ns
        The time quantum CP-SAT rounded times down to.
    """

    solver_status: str
    branches: int
    conflicts: int
    solutions: int
    wall_time_s: float
    quantum_ns: float

    def __post_init__(self) -> None:
        check_name("solver_status", self.solver_status)
        for name in ("branches", "conflicts", "solutions"):
            check_int(name, getattr(self, name), 0)
        check_number("wall_time_s", self.wall_time_s)
        check_number("quantum_ns", self.quantum_ns, positive=True)


@dataclass(frozen=True)
class Result:
    """What a method found.

    Parameters
    ----------
    instance
        Name of the instance solved.
    method
        ``baseline``, ``themis``, ``balanced`` or ``cpsat``.
    intra
        The intra-dimension policy that timed the schedule (``None`` for
        ``cpsat``, which sequences the dimensions itself).
    status
        See :class:`Status`.
    makespan
        Makespan of ``schedule`` in ns (``None`` without a schedule).
    bounds
        The lower bounds known for the instance.
    runtime
        Wall-clock seconds the method took, bounds included.
    schedule
        The timed schedule, or ``None``.
    stats
        CP-SAT's statistics, for ``cpsat``.
    trajectory
        For ``cpsat``: (seconds, makespan in ns) of every improving solution.
    tolerance_ns
        The slack within which the makespan meeting the lower bound counts as
        optimal (see :func:`optimality_tolerance`); ``None`` without a schedule.
    note
        Why a stage was skipped or cut short (time budget, size), or ``""``.
    """

    instance: str
    method: str
    intra: str | None
    status: Status
    makespan: float | None
    bounds: Bounds
    runtime: float
    schedule: Schedule | None
    stats: SolverStats | None = None
    trajectory: tuple[tuple[float, float], ...] = field(default=())
    tolerance_ns: float | None = None
    note: str = ""

    def with_bounds(self, bounds: Bounds, origin_ns: float) -> Result:
        """The result with ``bounds`` (valid for its instance) and its status decided anew by them."""
        if self.makespan is None or self.status not in (Status.OPTIMAL, Status.FEASIBLE):
            return replace(self, bounds=bounds)
        return replace(self, bounds=bounds, status=status_of(self.makespan, bounds, origin_ns))

    @property
    def lower_bound(self) -> float:
        """The best known lower bound, ns."""
        return self.bounds.best

    @property
    def gap(self) -> float | None:
        """Optimality gap: makespan / lower bound - 1."""
        return gap(self.makespan, self.lower_bound)

    @property
    def bandwidth_utilization(self) -> float | None:
        """Ideal bound over makespan."""
        if self.makespan is None or self.makespan <= 0:
            return None
        return self.bounds.ideal / self.makespan


@dataclass(frozen=True)
class IterationMetrics:
    """What a training iteration's schedule means to its user (task graphs).

    Parameters
    ----------
    total_ns
        The whole run: the makespan.
    iteration_ns
        The last pass: from its first task's start to the end (the steady
        state); the whole run for a one-pass graph.
    compute_ns
        Time the compute unit is busy over the run.
    exposed_ns
        Time the compute unit waits over the run: total minus compute. The
        communication that compute could not hide.
    utilization
        Total traffic at the summed bandwidth of the dimensions used, over
        the run: the share of the network's capacity the run used.
    """

    total_ns: float
    iteration_ns: float
    compute_ns: float
    exposed_ns: float
    utilization: float


def iteration_metrics(instance: Instance, schedule: Schedule) -> IterationMetrics | None:
    """The :class:`IterationMetrics` of ``schedule`` (``None`` for an instance without compute)."""
    if not instance.computes or schedule.makespan <= 0:
        return None
    total = schedule.makespan
    compute = schedule.compute_busy_ns
    start = 0.0
    first = dict(instance.metadata).get("iteration_start")
    if first and first in instance.task_index:
        task = instance.tasks[instance.task_index[first]]
        j = instance.computes.index(task) if task in instance.computes else -1
        runs = {c.compute: c.start_ns for c in schedule.computes}
        start = runs.get(j, 0.0)
    dims = instance.network.dimensions
    used = {d for c in range(len(instance.collectives)) for d in instance.active_dims[c]}
    rate = sum(dims[d].bytes_per_ns for d in used)
    traffic = sum(traffic_bytes(instance, c) for c in range(len(instance.collectives)))
    return IterationMetrics(total, total - start, compute, total - compute, traffic / rate / total if rate else 0.0)
