"""SCIP for the integer load program, from the exported model: the same answer in every process.

``pywraplp`` hands SCIP each row's coefficients in the order of a hash table keyed by memory
addresses, so SCIP's search, and its answer at the node limit, moved from process to process;
from the exported model SCIP sees the model's own order. That route (``SolveWithProto``) holds
the GIL and cannot be interrupted: a program above ``BoundsParams.scip_helper_variables`` is
solved in a helper process, which Ctrl-C and the deadline end at once, where this platform forks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from themis_opt.budget import Deadline, OutOfTime

if TYPE_CHECKING:  # pragma: no cover
    from ortools.linear_solver import pywraplp

# what pywraplp's Solve set for SCIP besides SCIP's defaults (its primal tolerance; no gap limit)
AS_PYWRAPLP = "numerics/feastol = 1e-7\nlimits/gap = 0\n"


@dataclass(frozen=True)
class ScipAnswer:
    """SCIP's answer: whether its solution is proven optimal, the solution (per variable index) and
    its best bound on the objective.
    """

    optimal: bool
    values: tuple[float, ...]
    bound: float


def solve_scip(
    solver: pywraplp.Solver, settings: str, deadline: Deadline, *, grace: float, helper_above: int
) -> ScipAnswer | None:
    """Solve ``solver``'s model (built for SCIP) with SCIP's ``settings`` by ``deadline``.

    Parameters
    ----------
    solver
        The model, built through ``pywraplp``.
    settings
        SCIP's parameters, one ``name = value`` a line.
    deadline
        SCIP's time limit.
    grace
        Seconds for a helper's answer past ``deadline``.
    helper_above
        Solve a model of more variables than this in a helper process (where this platform forks).

    Returns
    -------
    ScipAnswer or None
        ``None`` when SCIP found no solution (or a helper's answer did not come in time).

    Raises
    ------
    OutOfTime
        If ``deadline`` has passed.
    """
    from ortools.linear_solver import linear_solver_pb2 as pb

    if deadline.remaining() <= 0:
        raise OutOfTime("integer load bound: out of time")
    request = pb.MPModelRequest()
    solver.ExportModelToProto(request.model)
    request.solver_type = pb.MPModelRequest.SCIP_MIXED_INTEGER_PROGRAMMING
    request.solver_specific_parameters = settings + AS_PYWRAPLP
    if not math.isinf(deadline.at):
        request.solver_time_limit_seconds = deadline.remaining()
    answer: bytes | None
    if len(request.model.variable) <= helper_above or not _can_fork():
        # small: SCIP ends within tens of ms; else no fork here, and Ctrl-C waits for SCIP's time limit
        answer = _solve(request.SerializeToString())
    else:
        from themis_opt.helpers import fork, result_of, stop

        helper = fork(_solve, (request.SerializeToString(),), {})
        try:
            answer = result_of(helper, deadline, grace)
        finally:
            stop([helper])
    if answer is None:
        return None
    response = pb.MPSolutionResponse.FromString(answer)
    if response.status not in (pb.MPSOLVER_OPTIMAL, pb.MPSOLVER_FEASIBLE):
        return None
    optimal = response.status == pb.MPSOLVER_OPTIMAL
    return ScipAnswer(optimal, tuple(response.variable_value), response.best_objective_bound)


def _can_fork() -> bool:
    from themis_opt.helpers import can_fork  # multiprocessing: imported only for a large program

    return can_fork()


def _solve(request: bytes) -> bytes:
    """SCIP on a serialized request; the serialized response."""
    from ortools.linear_solver import linear_solver_pb2 as pb, pywraplp

    response = pb.MPSolutionResponse()
    pywraplp.Solver.SolveWithProto(pb.MPModelRequest.FromString(request), response)
    return bytes(response.SerializeToString())
