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
OR-Tools), in microseconds; each bound is the solver's dual bound shrunk by a
relative 1e-8 to cover float tolerances.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

from ortools.linear_solver import pywraplp

from themis_opt.cost import chunk_phases
from themis_opt.instance import ChunkClass, Instance, Kind

logger = logging.getLogger(__name__)

SAFETY = 1e-8  # relative: covers the LP and MIP solvers' float tolerances
NODE_LIMIT = 20000  # integer load bound: small, SCIP proves it within this
FILL_DRAIN_NODE_LIMIT = 2000  # its big-step variant is much harder; its dual bound stays valid


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


def _load_model(
    instance: Instance, backend: str, *, integer: bool, fill_drain: bool, floor_ns: float = 0.0
) -> tuple[pywraplp.Solver, dict[tuple[ChunkClass, tuple[int, ...]], pywraplp.Variable]]:
    """The load-bound program in microseconds (well-scaled for the solvers);
    ``floor_ns`` is a known lower bound on its optimum.
    """
    profiles = order_profiles(instance)
    solver = pywraplp.Solver.CreateSolver(backend)
    if solver is None:  # pragma: no cover - both backends ship with ortools
        raise RuntimeError(f"OR-Tools has no {backend} backend")
    us = 1e-3
    makespan = solver.NumVar(floor_ns * us, solver.infinity(), "makespan")
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
                solver.Add(makespan >= t * us + sum(load))
    if fill_drain:
        used = {key: solver.BoolVar(f"used{n}") for n, key in enumerate(x)}
        for key, var in x.items():
            solver.Add(var <= len(key[0].chunks) * used[key])
            solver.Add(used[key] <= var)
        for d in range(instance.network.num_dims):
            pairs = [(cls, o, p) for cls in profiles for o, p in profiles[cls].items() if p.head[d] is not None]
            if not pairs:
                continue
            head = _least_in_use(solver, used, [((c, o), p.head[d] * us) for c, o, p in pairs], f"h{d}")  # type: ignore[operator]
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
    where w_j >= 1 - (orders in use with a value below v_j): a step is paid
    exactly when every order below it is unused.
    """
    levels = sorted({v for _, v in values})
    expr = levels[0]
    for j in range(1, len(levels)):
        step = solver.NumVar(0.0, 1.0, f"{tag}_{j}")
        below = [used[key] for key, v in values if v < levels[j]]
        solver.Add(step >= 1 - sum(below))
        expr = expr + (levels[j] - levels[j - 1]) * step
    return expr


def lp_bound(instance: Instance) -> float:
    """The hierarchical load bound with continuous order counts (GLOP)."""
    solver, _ = _load_model(instance, "GLOP", integer=False, fill_drain=False)
    status = solver.Solve()
    if status != pywraplp.Solver.OPTIMAL:
        raise RuntimeError(f"the LP load bound did not solve to optimality (status {status})")
    return float(solver.Objective().Value()) * 1e3 * (1 - SAFETY)


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


@functools.lru_cache(maxsize=64)
def integer_load_bound(instance: Instance, *, fill_drain: bool, node_limit: int | None = None) -> LoadSolution:
    """The integer hierarchical load bound, optionally with fill and drain (SCIP).

    Parameters
    ----------
    instance
        The instance.
    fill_drain
        Add each dimension's least head and tail over the orders in use.
    node_limit
        Branch-and-bound nodes SCIP may explore (default: 20000, or 2000 with
        fill and drain); a node limit, unlike a time limit, keeps the answer
        the same on every machine. The dual bound is valid whether or not the
        limit is hit.

    Notes
    -----
    Cached per instance (the solve is deterministic): do not mutate the
    returned counts.
    """
    # fill-and-drain only adds constraints to the integer program: its optimum
    # starts from the integer bound, which lets SCIP prune from the first node
    floor = integer_load_bound(instance, fill_drain=False).bound if fill_drain else 0.0
    if node_limit is None:
        node_limit = FILL_DRAIN_NODE_LIMIT if fill_drain else NODE_LIMIT
    solver, x = _load_model(instance, "SCIP", integer=True, fill_drain=fill_drain, floor_ns=floor)
    solver.SetSolverSpecificParametersAsString(f"limits/nodes = {node_limit}\n")
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(params.RELATIVE_MIP_GAP, 0.0)
    status = solver.Solve(params)
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        raise RuntimeError(f"the integer load bound found no assignment (status {status})")
    counts: dict[ChunkClass, dict[tuple[int, ...], int]] = {}
    for (cls, order), var in x.items():
        counts.setdefault(cls, {})[order] = round(var.solution_value())
    bound = solver.Objective().BestBound() * 1e3 * (1 - SAFETY)
    logger.debug("integer load bound (fill_drain=%s): %.3f ns, status %s", fill_drain, bound, status)
    return LoadSolution(bound, counts, status == pywraplp.Solver.OPTIMAL)


def compute_bounds(instance: Instance) -> Bounds:
    """The ideal, LP, integer and fill-and-drain bounds of ``instance``."""
    ip = integer_load_bound(instance, fill_drain=False).bound
    fill_drain = max(ip, integer_load_bound(instance, fill_drain=True).bound)
    return Bounds(ideal=ideal_bound(instance), lp=lp_bound(instance), ip=ip, fill_drain=fill_drain)
