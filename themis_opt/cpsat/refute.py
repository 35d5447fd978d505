"""Questions to the exact model with its horizon cut at a cap: does an assignment of order counts
admit a schedule that ends by the cap? The model is built once per cap and each assignment is
asked as the solve's assumptions (about twice as fast as a model built for each: the
refutation stage asks tens of them a round).
"""

from __future__ import annotations

import math

from themis_opt.budget import Deadline
from themis_opt.cpsat.driver import CpsatOutcome, _Recorder, _stats, quantum_for
from themis_opt.cpsat.model import CPSAT, CpsatModel
from themis_opt.cpsat.params import CpsatParams
from themis_opt.cpsat.solver import INFEASIBLE, Solver, SolverSettings
from themis_opt.instance import Instance
from themis_opt.orders import Counts
from themis_opt.result import Status
from themis_opt.schedule import Schedule


class CappedModel:
    """The exact model of ``instance`` with every schedule ending by ``cap`` ns (times rounded down,
    so every such schedule is one of the model's), asked one assignment at a time.

    Parameters
    ----------
    instance
        The instance (its model with the symmetry breaking).
    warm
        A valid schedule longer than ``cap``: its makespan sets the quantum.
    cap
        The makespan a schedule must not exceed.
    lower_bound
        A proven lower bound on the makespan.
    workers, seed
        CP-SAT's worker threads and random seed.
    deadline
        When the model must be built.
    quantum_ns
        Time quantum; ``None`` picks it as :func:`~themis_opt.cpsat.solve_cpsat` does.
    params
        The quantum's tuning numbers.

    Raises
    ------
    InputError
        If ``quantum_ns`` is too fine for CP-SAT's integers.
    OutOfTime
        If ``deadline`` passes while the model is built.
    """

    def __init__(
        self,
        instance: Instance,
        warm: Schedule,
        cap: float,
        *,
        lower_bound: float,
        workers: int,
        seed: int,
        deadline: Deadline,
        quantum_ns: float | None = None,
        params: CpsatParams = CPSAT,
    ) -> None:
        if cap >= warm.makespan:
            raise ValueError(f"cap {cap} ns is not below the warm start's makespan {warm.makespan} ns")
        quantum = quantum_for(instance, warm, quantum_ns, deadline, params)
        self.model = CpsatModel(instance, quantum, math.floor(cap / quantum), deadline)
        self.model.model.add(self.model.makespan >= self.model.floor(lower_bound))
        self.warm = warm
        self.lower_bound = lower_bound
        self.workers = workers
        self.seed = seed
        self.share = params.search_share

    def ask(self, counts: Counts, deadline: Deadline) -> CpsatOutcome:
        """Whether ``counts`` admit a schedule that ends by the cap: status ``infeasible`` (proven
        none), ``feasible`` (the first found, re-timed exactly, is the outcome's schedule) or
        ``no_solution`` (no answer by ``deadline``; the warm start is the outcome's schedule).
        """
        cp = self.model.model
        cp.clear_assumptions()
        cp.add_assumptions(self.model.count_literals(counts))
        seconds = max(1e-3, deadline.remaining() * self.share)  # the rest: re-timing a schedule found
        solver = Solver(
            SolverSettings(
                workers=self.workers,
                seed=self.seed,
                seconds=seconds,
                strong_disjunctive=True,
                first_solution=True,
            )
        )
        origin = self.model.instance.origin_ns
        recorder = _Recorder(self.model, self.warm, 0.0, self.lower_bound, origin)
        code = solver.run(cp, deadline, recorder)
        if code == INFEASIBLE:
            status = Status.INFEASIBLE
        else:
            status = Status.FEASIBLE if recorder.solutions else Status.NO_SOLUTION
        stats = _stats(solver, code, recorder, self.model.quantum)
        return CpsatOutcome(status, recorder.best, None, stats, tuple(recorder.trajectory))
