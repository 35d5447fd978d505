"""The one result type every method returns."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

from themis_opt.instance import Instance, check_int, check_name, check_number
from themis_opt.schedule import Schedule

OPTIMALITY_TOLERANCE = 1e-4  # relative to the schedule's span: "optimal" = within 0.01% of it


CERTIFICATES = (
    "ideal",
    "critical_path",
    "compute",
    "least_busy",
    "jackson",
    "lp",
    "iteration",
    "ip",
    "fill_drain",
    "fluid",
    "cpsat",
)  # every bound, the cheapest first: of bounds of equal value, the first names a gap's certificate


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on the makespan, each valid on its own, in ns.

    ``None`` marks a bound that was not computed. ``critical_path`` is the
    longest dependency chain with every collective at its shortest possible
    duration; ``compute`` the compute unit's work after its earliest start;
    ``least_busy`` a dimension's least busy time, latency included, every
    chunk on its cheapest order there (no solver); ``fluid`` the load program
    over time (:func:`fluid_bound`); ``cpsat`` CP-SAT's own bound (of a
    relaxation, so valid as it stands); ``jackson`` the preemptive
    one-machine bound of every resource with heads and tails from the task
    graph (:func:`~themis_opt.bounds.jackson_bound`); ``iteration`` the relaxation of the whole
    task graph: every collective's span alone, the critical path with them, and continuous order
    counts under every dimension's preemptive bound with the graph's heads and tails
    (:func:`~themis_opt.bounds.iteration_bound`).
    """

    ideal: float
    lp: float | None = None
    ip: float | None = None
    fill_drain: float | None = None
    fluid: float | None = None
    cpsat: float | None = None
    critical_path: float | None = None
    compute: float | None = None
    least_busy: float | None = None
    jackson: float | None = None
    iteration: float | None = None

    @property
    def best(self) -> float:
        """The largest (tightest) bound."""
        return max(b for b in self.as_dict().values() if b is not None)

    @property
    def best_name(self) -> str:
        """The name of the largest bound: the certificate of a gap. Of bounds of equal value, the
        one that takes the least to compute (the order of :data:`CERTIFICATES`).
        """
        values = self.as_dict()
        best = self.best
        return next(name for name in CERTIFICATES if values[name] == best)

    def as_dict(self) -> dict[str, float | None]:
        """The bounds by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


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
    variant
        The name the method was asked for by (``themis``, ``balanced-fifo``,
        ``themis-scf``), what tables, reports and file names call the result
        (:attr:`label`); ``""``: the method and its policy.
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
    variant: str = ""

    @property
    def label(self) -> str:
        """What the result is called: :attr:`variant`, else the method and the policy that timed it."""
        if self.variant:
            return self.variant
        return self.method if self.intra is None else f"{self.method}-{self.intra}"

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
    def best_bound(self) -> str:
        """The name of the best known lower bound: the gap's certificate (see :attr:`Bounds.best_name`)."""
        return self.bounds.best_name

    @property
    def gap(self) -> float | None:
        """Optimality gap: makespan / lower bound - 1."""
        return gap(self.makespan, self.lower_bound)

    @property
    def bandwidth_utilization(self) -> float | None:
        """Ideal bound over makespan; ``None`` where the ideal bound was not computed (0: out of time)."""
        if self.makespan is None or self.makespan <= 0 or self.bounds.ideal <= 0:
            return None
        return self.bounds.ideal / self.makespan


def result_of(
    instance: Instance,
    method: str,
    policy: str | None,
    schedule: Schedule | None,
    bounds: Bounds,
    t0: float,
    status: Status | None = None,
    **extra: object,
) -> Result:
    """The result of ``method``'s ``schedule`` (timed under ``policy``), begun at ``t0``
    (``time.perf_counter``); its status, unless given (a solver's verdict), is decided by the bounds and
    the optimality tolerance alone. ``extra``: the other fields of :class:`Result` (``note``, ``variant``...).
    """
    tolerance = None
    if schedule is None:
        status, makespan = status or Status.NO_SOLUTION, None
    else:
        makespan = schedule.makespan
        tolerance = optimality_tolerance(makespan, instance.origin_ns)
        status = status_of(makespan, bounds, instance.origin_ns)
    if extra.get("note"):
        logging.getLogger(__name__).info("%s", extra["note"])
    return Result(
        instance.name,
        method,
        policy if policy is not None else None,
        status,
        makespan,
        bounds,
        time.perf_counter() - t0,
        schedule,
        tolerance_ns=tolerance,
        **extra,  # type: ignore[arg-type]
    )


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a search that had found a schedule: :attr:`result` holds the best
    found before it (its note says so), for the caller to keep, as solver users expect.

    Parameters
    ----------
    *results
        What is kept, in the order the methods ran: the results of the methods that finished before
        the stop (:func:`~themis_opt.solving.solve_all`), then the stopped search's best, if it had one.
    """

    def __init__(self, *results: Result) -> None:
        super().__init__("interrupted")
        self.results = results

    @property
    def result(self) -> Result:
        """The last result kept: the stopped search's best, if it had one."""
        return self.results[-1]
