"""The one CP-SAT adapter: models, the solver's settings, a run within a deadline, statuses.

Every CP-SAT run of the package goes through :class:`Solver`: the exact model
(:mod:`themis_opt.cpsat.driver`), its windows, the collectives solved alone for the iteration bound,
the fill-and-drain programs and the order-count searches. :class:`SolverSettings` is the one place
CP-SAT's parameters are set; :meth:`Solver.run` runs it in a thread of its own (Ctrl-C and the
deadline stop it at once, with the best found so far) and :func:`status_of` maps its statuses.

It is written on CP-SAT's compiled helper (``cp_model_helper``), not on ``cp_model``'s Python
layer, which imports pandas (most of its half second of import): :class:`Model` is the part of
``cp_model.CpModel`` the load programs use, written as ``cp_model`` writes it on the same helper
(the same calls make the same model proto, solved by the same solver: a test compares the two).
The exact model keeps ``cp_model.CpModel``, which :class:`Solver` solves as well.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model_helper as cmh
from ortools.util.python.sorted_interval_list import Domain

from themis_opt.budget import Deadline, run_interruptibly
from themis_opt.result import Status

logger = logging.getLogger(__name__)

LinearExpr = cmh.LinearExpr
OPTIMAL = cmh.CpSolverStatus.OPTIMAL
FEASIBLE = cmh.CpSolverStatus.FEASIBLE
INFEASIBLE = cmh.CpSolverStatus.INFEASIBLE
MODEL_INVALID = cmh.CpSolverStatus.MODEL_INVALID
UNKNOWN = cmh.CpSolverStatus.UNKNOWN

_STATUS = {
    OPTIMAL: Status.OPTIMAL,
    FEASIBLE: Status.FEASIBLE,
    INFEASIBLE: Status.INFEASIBLE,
    MODEL_INVALID: Status.MODEL_INVALID,
    UNKNOWN: Status.NO_SOLUTION,
}


def status_of(code: Any) -> Status:
    """A CP-SAT status as a :class:`~themis_opt.result.Status` (``unknown``: no solution found)."""
    return _STATUS[code]


def solved(code: Any) -> bool:
    """Whether a run that ended with ``code`` has a solution."""
    return code in (OPTIMAL, FEASIBLE)


class Model(cmh.CpBaseModel):
    """A CP-SAT model: integer and Boolean variables, linear constraints (each may be enforced by
    literals), Boolean ors, hints and a linear objective to minimise.
    """

    def __init__(self) -> None:
        super().__init__(None)

    def new_int_var(self, lb: int, ub: int, name: str) -> Any:
        """An integer variable of domain ``[lb, ub]``."""
        return cmh.IntVar(self.model_proto).with_name(name).with_domain(Domain(lb, ub))

    def new_bool_var(self, name: str) -> Any:
        """A Boolean variable."""
        return self.new_int_var(0, 1, name)

    def add(self, constraint: Any) -> Any:
        """A linear constraint (``expression <= value`` and the like); ``.only_enforce_if`` on the
        result makes it conditional.
        """
        return self._add_bounded_linear_expression(constraint)  # type: ignore[attr-defined]  # not in the stubs

    def add_bool_or(self, literals: Iterable[Any]) -> Any:
        """At least one of ``literals`` is true."""
        bool_or = cmh.BoolArgumentConstraint.bool_or
        return self._add_bool_argument_constraint(bool_or, list(literals))  # type: ignore[attr-defined]

    def add_hint(self, var: Any, value: int | bool) -> None:
        """``var == value`` as a hint to the solver."""
        hint = self.model_proto.solution_hint
        if var.index >= 0:
            hint.vars.append(var.index)
            hint.values.append(int(value))
        else:
            hint.vars.append(-var.index - 1)  # the variable a negated literal stands for
            hint.values.append(int(not value))

    def clear_hints(self) -> None:
        """Remove every hint."""
        self.model_proto.clear_solution_hint()

    def minimize(self, objective: Any) -> None:
        """Minimise the integer linear expression ``objective``."""
        self.model_proto.clear_objective()
        flat = cmh.FlatIntExpr(objective)
        for var in flat.vars:
            self.model_proto.objective.vars.append(var.index)
        self.model_proto.objective.coeffs.extend(flat.coeffs)
        self.model_proto.objective.scaling_factor = 1.0
        self.model_proto.objective.offset = flat.offset


@dataclass(frozen=True)
class SolverSettings:
    """How one CP-SAT run is set up (each caller's values come from its parameters object).

    Parameters
    ----------
    workers, seed
        Worker threads and random seed.
    seconds
        Wall-clock limit; ``None``: what is left of the run's deadline.
    work
        Deterministic-time limit (the same answer on every machine), ``None`` for none.
    conflicts
        Conflict limit, ``None`` for none.
    probing
        Whether presolve probes (on large models probing can spend the whole limit).
    strong_disjunctive
        The stronger propagation of no-overlap constraints.
    first_solution
        Stop at the first solution.
    log
        Stream CP-SAT's search log through this module's logger at INFO.
    """

    workers: int = 1
    seed: int = 0
    seconds: float | None = None
    work: float | None = None
    conflicts: int | None = None
    probing: bool = True
    strong_disjunctive: bool = False
    first_solution: bool = False
    log: bool = False

    def parameters(self, deadline: Deadline) -> Any:
        """CP-SAT's ``SatParameters`` for a run within ``deadline``."""
        p = cmh.SatParameters()
        p.num_workers = self.workers
        p.random_seed = self.seed
        if self.seconds is not None:
            p.max_time_in_seconds = self.seconds
        elif not math.isinf(deadline.at):
            p.max_time_in_seconds = max(0.0, deadline.remaining())
        if self.work is not None:
            p.max_deterministic_time = self.work
        if self.conflicts is not None:
            p.max_number_of_conflicts = self.conflicts
        if not self.probing:
            p.cp_model_probing_level = 0
        if self.strong_disjunctive:
            p.use_strong_propagation_in_disjunctive = True
        if self.first_solution:
            p.stop_after_first_solution = True
        p.catch_sigint_signal = False  # Ctrl-C goes to Python, which stops the search
        if self.log:
            p.log_search_progress = True
            p.log_to_stdout = False  # the callback alone carries it
        return p


class Solver:
    """CP-SAT with :class:`SolverSettings`: :meth:`run` a model, then read the values of
    expressions, the objective's best bound, the status and the search's statistics.
    """

    def __init__(self, settings: SolverSettings) -> None:
        self.settings = settings
        self._response: Any = None
        self._wrapper: Any = None
        self._lock = threading.Lock()
        self._stopped = False  # stopped before its run began: the run does not search

    def run(self, model: cmh.CpBaseModel, deadline: Deadline, callback: Any = None) -> Any:
        """Solve ``model`` (a :class:`Model` or a ``cp_model.CpModel``) within ``deadline`` and
        :attr:`SolverSettings.seconds`, passing each solution to ``callback`` (a
        ``cp_model.CpSolverSolutionCallback``); its status (:data:`OPTIMAL`, :data:`FEASIBLE`,
        :data:`UNKNOWN` ...).

        Raises
        ------
        KeyboardInterrupt
            On Ctrl-C, once CP-SAT has stopped.
        """
        parameters = self.settings.parameters(deadline)
        stop_at = deadline.at
        if self.settings.seconds is not None:
            stop_at = min(stop_at, time.perf_counter() + self.settings.seconds)
        return run_interruptibly(lambda: self._solve(model, parameters, callback), self.stop_search, stop_at)

    def _solve(self, model: cmh.CpBaseModel, parameters: Any, callback: Any) -> Any:
        with self._lock:
            if self._stopped:
                self._response = cmh.CpSolverResponse()  # unknown: no solution, no search
                return self._response.status
            self._wrapper = cmh.SolveWrapper()
        self._wrapper.set_parameters(parameters)
        if callback is not None:
            self._wrapper.add_solution_callback(callback)
        if self.settings.log:
            self._wrapper.add_log_callback(lambda line: logger.info("%s", line))
        self._response = self._wrapper.solve(model.model_proto)
        if callback is not None:
            self._wrapper.clear_solution_callback(callback)
        with self._lock:
            self._wrapper = None
        return self._response.status

    def stop_search(self) -> None:
        """Stop a running :meth:`run` (from another thread) with the best so far; asked before the
        run begins, the run does not search (status unknown).
        """
        with self._lock:
            self._stopped = True
            if self._wrapper is not None:
                self._wrapper.stop_search()

    def value(self, expression: Any) -> int:
        """The value of a linear expression in the solution found."""
        return int(cmh.ResponseHelper.value(self._response, expression))

    @property
    def best_objective_bound(self) -> float:
        """The best lower bound proven on the objective."""
        return float(self._response.best_objective_bound)

    @property
    def num_branches(self) -> int:
        """Search branches explored."""
        return int(self._response.num_branches)

    @property
    def num_conflicts(self) -> int:
        """Conflicts met."""
        return int(self._response.num_conflicts)

    @property
    def wall_time(self) -> float:
        """Seconds the last run took, as CP-SAT counts them."""
        return float(self._response.wall_time)

    @staticmethod
    def status_name(status: Any) -> str:
        """A status's name."""
        return str(status.name)
