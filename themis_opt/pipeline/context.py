"""What the stages of one cpsat call share (:class:`Context`)."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from themis_opt.bounds import LoadSolution, Memo, integer_load_bound, solvers_loaded
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.instance import Instance
from themis_opt.methods import SolveOptions
from themis_opt.params import SolveParams
from themis_opt.result import (
    Bounds,
    SolverStats,
    Status,
    is_proven,
    optimality_tolerance,
)
from themis_opt.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.cpsat import CappedModel, CpsatOutcome

logger = logging.getLogger(__name__)


@dataclass
class Context:
    """What the stages of one cpsat call share: the instance, its bounds, the time, the best
    schedule so far and how it came about, and the load programs' answers (computed once).
    """

    instance: Instance
    bounds: Bounds
    deadline: Deadline
    params: SolveParams
    options: SolveOptions
    workers: int  # the options' workers, or the cores available
    t0: float
    memo: Memo = field(default_factory=dict)
    given: Schedule | None = None  # the caller's schedule, a warm start besides the heuristics'
    best: Schedule | None = None
    trajectory: list[tuple[float, float]] = field(default_factory=list)
    warm_cost: float = 0.0  # seconds the warm start took: a search with less time could not time one schedule
    spread: Schedule | None = None  # the sequence search's best from the program's counts: a hint
    merged: Schedule | None = None  # the baseline's merged schedule, where it may be shorter
    stats: SolverStats | None = None
    note: str = ""
    status: Status | None = None  # set when CP-SAT says the model is infeasible or invalid
    done: bool = False  # a stage that ends the method ran

    @property
    def literals(self) -> int:
        """Order literals of the exact model: chunks times orders."""
        return sum(coll.chunks * self.instance.order_count(c) for c, coll in enumerate(self.instance.collectives))

    @property
    def exact_fits(self) -> bool:
        """Whether the exact model is small enough to build."""
        cpsat = self.params.cpsat
        return self.literals <= cpsat.max_order_literals and self.instance.num_phases <= cpsat.max_phases

    def proven(self) -> bool:
        """Whether the best schedule meets the lower bound (within the optimality tolerance)."""
        return self.best is not None and is_proven(self.best.makespan, self.bounds.best, self.instance.origin_ns)

    def may_search(self) -> bool:
        """Whether a search may start: not proven, and more time left than the warm start took."""
        return not self.proven() and self.deadline.remaining() > self.warm_cost

    def keep_cpsat_bound(self, bound: float | None) -> None:
        """Keep CP-SAT's ``bound`` of the exact model, if higher than the one kept (``None``: none found).
        A bound above the best schedule beyond the optimality tolerance is a defect: logged, not kept.
        """
        if bound is None:
            return
        if self.best is not None and bound > self.best.makespan + optimality_tolerance(
            self.best.makespan, self.instance.origin_ns
        ):
            logger.error(
                "a CP-SAT bound of %.9g ns is above a valid schedule of %.9g ns: not kept", bound, self.best.makespan
            )
            return
        self.bounds = dataclasses.replace(self.bounds, cpsat=max(self.bounds.cpsat or 0.0, bound))

    def adopt(self, outcome: CpsatOutcome) -> None:
        """Keep a CP-SAT run's schedule, trajectory and statistics if it beat the best."""
        assert self.best is not None
        if outcome.schedule.makespan < self.best.makespan:
            self.best = outcome.schedule
            self.trajectory.extend(outcome.trajectory[1:])
            self.stats = outcome.stats

    def offer(self, schedule: Schedule | None) -> None:
        """Keep ``schedule`` if it is shorter than the best; the trajectory notes where the best stands."""
        if schedule is not None and (self.best is None or schedule.makespan < self.best.makespan):
            self.best = schedule
        if self.best is not None:
            self.trajectory.append((time.perf_counter() - self.t0, self.best.makespan))

    def counts(self, budget: Deadline) -> LoadSolution | None:
        """The fill-and-drain program's order counts, from the memo or computed in part of ``budget``."""
        return integer_load_bound(
            self.instance,
            fill_drain=True,
            deadline=budget.share(self.params.pipeline.counts_share),
            memo=self.memo,
            params=self.params.bounds,
        )

    def search_options(self) -> dict[str, Any]:
        """What every local search of this call is given besides its starts and deadline."""
        return {
            "seed": self.options.seed,
            "target": self.bounds.best,
            "workers": self.workers,
            "params": self.params.search,
        }

    def capped(self, cap: float, deadline: Deadline, lanes: int) -> list[CappedModel]:
        """The exact model cut at ``cap`` (below the best makespan), once per lane (at most one per
        worker), to ask assignments several at once; this call's workers shared among them.
        """
        if not solvers_loaded(deadline, self.params.bounds, cpsat=True):
            raise OutOfTime("cpsat: out of time before CP-SAT was loaded")
        from themis_opt.cpsat import CappedModel  # CP-SAT is imported only when it runs

        assert self.best is not None
        lanes = max(1, min(lanes, self.workers))
        return [
            CappedModel(
                self.instance,
                self.best,
                cap,
                lower_bound=self.bounds.best,
                workers=self.workers // lanes,
                seed=self.options.seed,
                deadline=deadline,
                quantum_ns=self.options.quantum_ns,
                params=self.params.cpsat,
            )
            for _ in range(lanes)
        ]

    def cpsat(self, start: Schedule, deadline: Deadline, **options: Any) -> CpsatOutcome:
        """CP-SAT from ``start`` with this call's options (see :func:`~themis_opt.cpsat.solve_cpsat`)."""
        if not solvers_loaded(deadline, self.params.bounds, cpsat=True):
            raise OutOfTime("cpsat: out of time before CP-SAT was loaded")
        from themis_opt.cpsat import solve_cpsat  # CP-SAT is imported only when it runs

        return solve_cpsat(
            self.instance,
            start,
            deadline=deadline,
            workers=self.workers,
            seed=self.options.seed,
            quantum_ns=self.options.quantum_ns,
            log=self.options.log,
            t0=self.t0,
            lower_bound=self.bounds.best,
            params=self.params.cpsat,
            **options,
        )
