"""Lower bounds on the makespan of every valid schedule.

* ideal (bandwidth) bound: every NPU moves a fixed amount of data whatever the
  orders (reduce-scatter over any order sends x (N - 1) / N in total), at no
  more than the sum of its dimensions' bandwidths;
* hierarchical load bound: choose how many chunks of each class take each
  order to minimise the largest per-dimension busy time (``lp``: counts
  continuous, ``ip``: integer);
* fill-and-drain bound (``fill_drain``): the integer load bound strengthened,
  since no dimension can start before some chunk reaches it (its head) nor
  end its last phase later than that chunk's remaining phases allow (its
  tail): makespan >= min head + load + min tail, heads and tails taken over
  the orders in use.

With several issue times, a dimension's load counts only the collectives
issued at or after each issue time, added to that time.

The LP is solved by GLOP and the integer programs by SCIP (both shipped with
OR-Tools, imported only when a program runs); each bound is the solver's dual
bound shrunk by a relative 1e-8 to cover float tolerances. The programs run
under a node limit (the same answer on every machine) and within their share
of the caller's time budget; SCIP's dual bound is valid wherever it stops, and
a program that cannot run in time, or would have more than
``MAX_LOAD_VARIABLES`` order counts (every chunk class times every order of
its dimensions: 8! orders per class on 8 dimensions), is reported as not
computed (``None``).
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from themis_opt.budget import Deadline, OutOfTime, run_interruptibly
from themis_opt.cost import chunk_phases
from themis_opt.instance import ChunkClass, Instance, Kind

logger = logging.getLogger(__name__)

SAFETY = 1e-8  # relative: covers the LP and MIP solvers' float tolerances
NODE_LIMIT = 20000  # integer load bound: small, SCIP proves it within this
FILL_DRAIN_NODE_LIMIT = 2000  # its big-step variant is much harder; its dual bound stays valid
MAX_LOAD_VARIABLES = 20000  # order counts over all chunk classes; beyond, the load programs are skipped

if TYPE_CHECKING:  # pragma: no cover
    from ortools.linear_solver import pywraplp


@dataclass(frozen=True)
class OrderProfile:
    """What one chunk of a class costs each dimension when it takes one order.

    Parameters
    ----------
    busy
        Per dimension, total duration of the chunk's phases on it, ns.
    head
        Per dimension, issue time plus the time the chunk spends before its
        first phase on it (``None`` where it has no phase).
    tail
        Per dimension, time the chunk spends after its last phase on it.
    """

    busy: tuple[float, ...]
    head: tuple[float | None, ...]
    tail: tuple[float | None, ...]


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on the makespan, each valid on its own, in ns.

    ``None`` marks a bound that was not computed. ``cpsat`` is CP-SAT's own
    bound, corrected for its rounded durations.
    """

    ideal: float
    lp: float | None = None
    ip: float | None = None
    fill_drain: float | None = None
    cpsat: float | None = None

    @property
    def best(self) -> float:
        """The largest (tightest) bound."""
        return max(b for b in (self.ideal, self.lp, self.ip, self.fill_drain, self.cpsat) if b is not None)

    def as_dict(self) -> dict[str, float | None]:
        """The bounds by name."""
        return {
            "ideal": self.ideal,
            "lp": self.lp,
            "ip": self.ip,
            "fill_drain": self.fill_drain,
            "cpsat": self.cpsat,
        }


def traffic_bytes(instance: Instance, collective: int) -> float:
    """Bytes one NPU sends for a whole collective, whatever the orders."""
    coll = instance.collectives[collective]
    npus = math.prod(instance.network.dimensions[d].size for d in instance.active_dims[collective])
    one_way = coll.size_bytes * (npus - 1) / npus
    return 2 * one_way if coll.kind is Kind.ALL_REDUCE else one_way


def ideal_bound(instance: Instance) -> float:
    """The ideal bandwidth bound.

    For one all-reduce of S bytes over dimensions with N NPUs in all:
    ``2 S (N - 1) / N / sum(B_d)`` (half of it for a reduce-scatter or an
    all-gather). With several collectives, for every issue time t, the traffic
    of the collectives issued at or after t over the bandwidth of the
    dimensions they use, plus t; the largest of these.
    """
    dims = instance.network.dimensions
    best = 0.0
    for t in sorted({coll.issue_ns for coll in instance.collectives}):
        later = [c for c, coll in enumerate(instance.collectives) if coll.issue_ns >= t]
        used = {d for c in later for d in instance.active_dims[c]}
        rate = sum(dims[d].bytes_per_ns for d in used)
        best = max(best, t + sum(traffic_bytes(instance, c) for c in later) / rate)
    return best


def order_profiles(instance: Instance) -> dict[ChunkClass, dict[tuple[int, ...], OrderProfile]]:
    """Per chunk class and order, the :class:`OrderProfile` of one chunk."""
    num_dims = instance.network.num_dims
    profiles: dict[ChunkClass, dict[tuple[int, ...], OrderProfile]] = {}
    for cls in instance.chunk_classes:
        issue = instance.collectives[cls.collective].issue_ns
        per_order = {}
        for order in instance.orders[cls.collective]:
            phases = chunk_phases(instance, cls.collective, cls.chunk_bytes, order)
            total = sum(p.duration for p in phases)
            busy = [0.0] * num_dims
            head: list[float | None] = [None] * num_dims
            tail: list[float | None] = [None] * num_dims
            elapsed = 0.0
            for p in phases:
                busy[p.dim] += p.duration
                if head[p.dim] is None:
                    head[p.dim] = issue + elapsed
                elapsed += p.duration
                tail[p.dim] = total - elapsed
            per_order[order] = OrderProfile(tuple(busy), tuple(head), tuple(tail))
        profiles[cls] = per_order
    return profiles


def _issue_cuts(instance: Instance) -> list[tuple[float, list[ChunkClass]]]:
    """(t, classes issued at or after t) for every distinct issue time t."""
    cuts = []
    for t in sorted({coll.issue_ns for coll in instance.collectives}):
        later = [cls for cls in instance.chunk_classes if instance.collectives[cls.collective].issue_ns >= t]
        cuts.append((t, later))
    return cuts


def load_variables(instance: Instance) -> int:
    """How many order counts the load programs of ``instance`` have."""
    return sum(math.factorial(len(instance.active_dims[cls.collective])) for cls in instance.chunk_classes)


def load_programs_fit(instance: Instance) -> bool:
    """Whether the load programs are small enough to run (see ``MAX_LOAD_VARIABLES``)."""
    return load_variables(instance) <= MAX_LOAD_VARIABLES


def _origin(instance: Instance) -> float:
    """The earliest issue time: the load programs measure time from here."""
    return min(coll.issue_ns for coll in instance.collectives)


def _load_model(
    instance: Instance, backend: str, *, integer: bool, fill_drain: bool, floor_ns: float = 0.0
) -> tuple[pywraplp.Solver, dict[tuple[ChunkClass, tuple[int, ...]], pywraplp.Variable]]:
    """The load-bound program in microseconds since the earliest issue time
    (well-scaled for the solvers, and the solvers' relative tolerance applies
    to the span, not to absolute time); ``floor_ns`` is a known lower bound
    on its optimum, in absolute ns.
    """
    from ortools.linear_solver import pywraplp

    origin = _origin(instance)
    profiles = order_profiles(instance)
    solver = pywraplp.Solver.CreateSolver(backend)
    if solver is None:  # pragma: no cover - both backends ship with ortools
        raise RuntimeError(f"OR-Tools has no {backend} backend")
    us = 1e-3
    makespan = solver.NumVar(max(0.0, floor_ns - origin) * us, solver.infinity(), "makespan")
    x = {}
    for i, cls in enumerate(instance.chunk_classes):
        for j, order in enumerate(profiles[cls]):
            n = len(cls.chunks)
            x[cls, order] = solver.IntVar(0, n, f"x{i}_{j}") if integer else solver.NumVar(0, n, f"x{i}_{j}")
        solver.Add(sum(x[cls, order] for order in profiles[cls]) == len(cls.chunks))
    for t, later in _issue_cuts(instance):
        for d in range(instance.network.num_dims):
            load = [x[cls, o] * (p.busy[d] * us) for cls in later for o, p in profiles[cls].items() if p.busy[d]]
            if load:
                solver.Add(makespan >= (t - origin) * us + sum(load))
    if fill_drain:
        used = {key: solver.BoolVar(f"used{n}") for n, key in enumerate(x)}
        for key, var in x.items():
            solver.Add(var <= len(key[0].chunks) * used[key])
            solver.Add(used[key] <= var)
        for d in range(instance.network.num_dims):
            pairs = [(cls, o, p) for cls in profiles for o, p in profiles[cls].items() if p.head[d] is not None]
            if not pairs:
                continue
            head = _least_in_use(solver, used, [((c, o), (p.head[d] - origin) * us) for c, o, p in pairs], f"h{d}")  # type: ignore[operator]
            tail = _least_in_use(solver, used, [((c, o), p.tail[d] * us) for c, o, p in pairs], f"t{d}")  # type: ignore[operator]
            solver.Add(makespan >= head + tail + sum(x[cls, o] * (p.busy[d] * us) for cls, o, p in pairs))
    solver.Minimize(makespan)
    return solver, x


def _least_in_use(
    solver: pywraplp.Solver,
    used: dict[tuple[ChunkClass, tuple[int, ...]], pywraplp.Variable],
    values: list[tuple[tuple[ChunkClass, tuple[int, ...]], float]],
    tag: str,
) -> pywraplp.LinearExpr:
    """An expression that is at least the least value among the orders in use.

    With the distinct values v_1 < ... < v_m, it is v_1 + sum_j (v_j - v_{j-1}) w_j
    where w_j >= 1 - n_j and n_j counts the orders in use with a value below
    v_j: a step is paid exactly when every order below it is unused. The
    counts are chained (n_j = n_{j-1} + orders in use at v_{j-1}), so the
    program grows with orders + levels, not their product.
    """
    at_level: dict[float, list[pywraplp.Variable]] = {}
    for key, v in values:
        at_level.setdefault(v, []).append(used[key])
    levels = sorted(at_level)
    steps = []
    below: pywraplp.LinearExpr = 0
    for j in range(1, len(levels)):
        count = solver.NumVar(0.0, solver.infinity(), f"{tag}_n{j}")
        solver.Add(count == below + solver.Sum(at_level[levels[j - 1]]))
        step = solver.NumVar(0.0, 1.0, f"{tag}_{j}")
        solver.Add(step >= 1 - count)
        steps.append((levels[j] - levels[j - 1]) * step)
        below = count
    return levels[0] + solver.Sum(steps)


def _time_limit_ms(deadline: Deadline) -> int:
    """Milliseconds left before ``deadline``; raise :class:`OutOfTime` if none."""
    ms = int(deadline.remaining() * 1000)
    if ms <= 0:
        raise OutOfTime("load bound: out of time")
    return ms


def lp_bound(instance: Instance, deadline: Deadline | None = None) -> float | None:
    """The hierarchical load bound with continuous order counts (GLOP).

    ``None`` when the program is too large or not solved before ``deadline``.
    """
    deadline = deadline or Deadline()
    if not load_programs_fit(instance):
        return None
    try:
        solver, _ = _load_model(instance, "GLOP", integer=False, fill_drain=False)
        if not math.isinf(deadline.at):
            solver.SetTimeLimit(_time_limit_ms(deadline))
        status = run_interruptibly(solver.Solve, solver.InterruptSolve)
    except OutOfTime:
        return None
    if status != solver.OPTIMAL:
        logger.info("the LP load bound was not solved in time (status %s): not computed", status)
        return None
    return _origin(instance) + float(solver.Objective().Value()) * 1e3 * (1 - SAFETY)


@dataclass(frozen=True)
class LoadSolution:
    """An integer load bound and the order counts of the best assignment found.

    Parameters
    ----------
    bound
        The bound in ns (the solver's proven dual bound).
    counts
        Per chunk class, how many chunks take each order.
    optimal
        Whether the solver proved the assignment optimal.
    """

    bound: float
    counts: dict[ChunkClass, dict[tuple[int, ...], int]]
    optimal: bool


_CACHE: OrderedDict[tuple[Instance, bool], LoadSolution] = OrderedDict()


def integer_load_bound(
    instance: Instance, *, fill_drain: bool, deadline: Deadline | None = None
) -> LoadSolution | None:
    """The integer hierarchical load bound, optionally with fill and drain (SCIP).

    Parameters
    ----------
    instance
        The instance.
    fill_drain
        Add each dimension's least head and tail over the orders in use.
    deadline
        When to stop; SCIP's dual bound is valid wherever it stops.

    Returns
    -------
    LoadSolution or None
        ``None`` when the program is too large, or SCIP found no assignment
        before ``deadline``.

    Notes
    -----
    SCIP explores at most 20000 branch-and-bound nodes (2000 with fill and
    drain): a node limit, unlike a time limit, keeps the answer the same on
    every machine. Answers that the node limit decided (not the deadline)
    are cached per instance: do not mutate the returned counts.
    """
    deadline = deadline or Deadline()
    key = (instance, fill_drain)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    if not load_programs_fit(instance):
        return None
    floor = 0.0
    if fill_drain:
        # fill-and-drain only adds constraints to the integer program: its optimum
        # starts from the integer bound, which lets SCIP prune from the first node
        plain = integer_load_bound(instance, fill_drain=False, deadline=deadline.share(0.5))
        floor = plain.bound if plain is not None else 0.0
    try:
        solver, x = _load_model(instance, "SCIP", integer=True, fill_drain=fill_drain, floor_ns=floor)
        node_limit = FILL_DRAIN_NODE_LIMIT if fill_drain else NODE_LIMIT
        # misc/catchctrlc: let Ctrl-C reach Python instead of only stopping SCIP
        solver.SetSolverSpecificParametersAsString(f"limits/nodes = {node_limit}\nmisc/catchctrlc = FALSE\n")
        if not math.isinf(deadline.at):
            solver.SetTimeLimit(_time_limit_ms(deadline))
        params = _mip_parameters()
        status = run_interruptibly(lambda: solver.Solve(params), solver.InterruptSolve)
    except OutOfTime:
        return None
    if status not in (solver.OPTIMAL, solver.FEASIBLE):
        logger.info("the integer load bound found no assignment in time (status %s): not computed", status)
        return None
    counts: dict[ChunkClass, dict[tuple[int, ...], int]] = {}
    for (cls, order), var in x.items():
        counts.setdefault(cls, {})[order] = round(var.solution_value())
    bound = max(floor, _origin(instance) + solver.Objective().BestBound() * 1e3 * (1 - SAFETY))
    logger.debug("integer load bound (fill_drain=%s): %.3f ns, status %s", fill_drain, bound, status)
    solution = LoadSolution(bound, counts, status == solver.OPTIMAL)
    if not deadline.expired():  # decided by the node limit: the same on every machine
        _CACHE[key] = solution
        if len(_CACHE) > 64:
            _CACHE.popitem(last=False)
    return solution


def _mip_parameters() -> Any:
    from ortools.linear_solver import pywraplp

    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(params.RELATIVE_MIP_GAP, 0.0)
    return params


def compute_bounds(instance: Instance, deadline: Deadline | None = None, *, full: bool = True) -> Bounds:
    """The bounds of ``instance`` that fit in the time until ``deadline``.

    Parameters
    ----------
    instance
        The instance.
    deadline
        When to stop; a program cut short keeps its valid dual bound, one
        that cannot run is ``None``.
    full
        ``False`` computes only the ideal bound (no solver, microseconds).
    """
    deadline = deadline or Deadline()
    ideal = ideal_bound(instance)
    if not full or not load_programs_fit(instance):
        return Bounds(ideal=ideal)
    lp = lp_bound(instance, deadline.share(0.2))
    plain = integer_load_bound(instance, fill_drain=False, deadline=deadline.share(0.4))
    ip = plain.bound if plain is not None else None
    fd = integer_load_bound(instance, fill_drain=True, deadline=deadline)
    fill_drain = max(ip or 0.0, fd.bound) if fd is not None else None
    return Bounds(ideal=ideal, lp=lp, ip=ip, fill_drain=fill_drain)
