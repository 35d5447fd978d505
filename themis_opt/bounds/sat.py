"""CP-SAT for the load programs, without the imports of its Python layer.

``ortools.sat.python.cp_model`` imports pandas, most of its half second of import; the load
programs need only the compiled helper beneath it (``cp_model_helper``, a tenth of that).
:class:`Model` and :class:`Solver` are the part of ``cp_model.CpModel`` and ``cp_model.CpSolver``
that the programs use, written as ``cp_model`` writes it on the same helper: the same calls make
the same model proto, solved by the same solver (a test compares the two). The exact model of
:mod:`themis_opt.cpsat` keeps ``cp_model``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ortools.sat.python import cp_model_helper as cmh
from ortools.util.python.sorted_interval_list import Domain

LinearExpr = cmh.LinearExpr
OPTIMAL = cmh.CpSolverStatus.OPTIMAL
FEASIBLE = cmh.CpSolverStatus.FEASIBLE
UNKNOWN = cmh.CpSolverStatus.UNKNOWN


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


class Solver:
    """CP-SAT on a :class:`Model`: ``parameters`` (``SatParameters``), then :meth:`solve`; after it,
    the values of expressions, the objective's best bound and the status.
    """

    def __init__(self) -> None:
        self.parameters = cmh.SatParameters()
        self._response: Any = None
        self._wrapper: Any = None
        self._lock = threading.Lock()

    def solve(self, model: Model) -> Any:
        """Solve ``model``; its status (``OPTIMAL``, ``FEASIBLE``, ``UNKNOWN`` ...)."""
        with self._lock:
            self._wrapper = cmh.SolveWrapper()
        self._wrapper.set_parameters(self.parameters)
        self._response = self._wrapper.solve(model.model_proto)
        with self._lock:
            self._wrapper = None
        return self._response.status

    def stop_search(self) -> None:
        """Stop a running :meth:`solve` (from another thread) with the best so far."""
        with self._lock:
            if self._wrapper is not None:
                self._wrapper.stop_search()

    def value(self, expression: Any) -> int:
        """The value of a linear expression in the solution found."""
        return int(cmh.ResponseHelper.value(self._response, expression))

    @property
    def best_objective_bound(self) -> float:
        """The best lower bound proven on the objective."""
        return float(self._response.best_objective_bound)

    @staticmethod
    def status_name(status: Any) -> str:
        """A status's name."""
        return str(status.name)
