"""The load programs: the LP (GLOP), the integer program (SCIP) and fill-and-drain (CP-SAT), each under
a node or work limit and a share of the caller's time; their answers cached per instance.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from themis_opt.bounds.formulas import (
    BOUNDS,
    SAFETY,
    fill_drain_value,
    load_origin,
    load_programs_fit,
    order_profiles,
    program_cuts,
)
from themis_opt.bounds.params import BoundsParams
from themis_opt.bounds.solvers import solvers_loaded
from themis_opt.budget import Deadline, OutOfTime, run_interruptibly
from themis_opt.cost import PhaseSpec
from themis_opt.instance import ChunkClass, Instance
from themis_opt.orders import Counts
from themis_opt.sim.model import chunk_ways, collective_releases, earliest_releases

logger = logging.getLogger(__name__)


if TYPE_CHECKING:  # pragma: no cover
    from ortools.linear_solver import pywraplp

    from themis_opt.cpsat.solver import SolverSettings


def _load_model(
    instance: Instance,
    backend: str,
    *,
    integer: bool,
    deadline: Deadline | None = None,
    params: BoundsParams = BOUNDS,
) -> tuple[pywraplp.Solver, dict[tuple[ChunkClass, tuple[int, ...]], pywraplp.Variable]]:
    """The load-bound program in microseconds since the earliest issue time
    (well-scaled for the solvers, and the solvers' relative tolerance applies
    to the span, not to absolute time). Building it checks ``deadline`` (raising
    :class:`OutOfTime`): on many dimensions the program alone takes seconds.
    """
    deadline = deadline or Deadline()
    from ortools.linear_solver import pywraplp

    origin = load_origin(instance, deadline)  # the releases, known by the deadline (a million dependencies: a second)
    profiles = order_profiles(instance)
    solver = pywraplp.Solver.CreateSolver(backend)
    if solver is None:  # pragma: no cover - both backends ship with ortools
        raise RuntimeError(f"OR-Tools has no {backend} backend")
    us = 1e-3
    makespan = solver.NumVar(0.0, solver.infinity(), "makespan")
    x = {}
    for i, cls in enumerate(instance.chunk_classes):
        deadline.check("load bound model")
        for j, order in enumerate(profiles[cls]):
            n = len(cls.chunks)
            x[cls, order] = solver.IntVar(0, n, f"x{i}_{j}") if integer else solver.NumVar(0, n, f"x{i}_{j}")
        everyone = solver.Constraint(len(cls.chunks), len(cls.chunks))  # rows set directly: no expression trees
        for order in profiles[cls]:
            everyone.SetCoefficient(x[cls, order], 1.0)
    for t, later in program_cuts(instance, params):
        for d in range(instance.network.num_dims):
            deadline.check("load bound model")
            load = [(x[cls, o], p.busy[d] * us) for cls in later for o, p in profiles[cls].items() if p.busy[d]]
            if load:  # the makespan is at least the cut's time and the load after it
                row = solver.Constraint((t - origin) * us, solver.infinity())
                row.SetCoefficient(makespan, 1.0)
                for var, busy in load:
                    row.SetCoefficient(var, -busy)
    solver.Minimize(makespan)
    return solver, x


def _time_limit_ms(deadline: Deadline) -> int:
    """Milliseconds left before ``deadline``; raise :class:`OutOfTime` if none."""
    ms = int(deadline.remaining() * 1000)
    if ms <= 0:
        raise OutOfTime("load bound: out of time")
    return ms


def lp_bound(instance: Instance, deadline: Deadline | None = None, params: BoundsParams = BOUNDS) -> float | None:
    """The hierarchical load bound with continuous order counts (GLOP).

    ``None`` when the program is too large or not solved before ``deadline``.
    """
    deadline = deadline or Deadline()
    if not load_programs_fit(instance, params) or not solvers_loaded(deadline, params):
        return None
    try:
        solver, _ = _load_model(instance, "GLOP", integer=False, deadline=deadline, params=params)
        if not math.isinf(deadline.at):
            solver.SetTimeLimit(_time_limit_ms(deadline))
        status = run_interruptibly(solver.Solve, solver.InterruptSolve, deadline.at)  # not only GLOP's own limit
    except OutOfTime:
        return None
    if status != solver.OPTIMAL:
        logger.info("the LP load bound was not solved in time (status %s): not computed", status)
        return None
    return load_origin(instance) + float(solver.Objective().Value()) * 1e3 * (1 - SAFETY)


def fluid_points(instance: Instance, floor: float, params: BoundsParams = BOUNDS) -> list[float]:
    """The fluid bound's grid: the earliest ``params.fluid_points`` distinct releases and ``floor``,
    in order; every one is at most every schedule's makespan.

    The earliest, as the bound rises where little work has been released yet and the dimensions
    wait for it (the docs' benchmark page has the measurements).
    """
    releases = sorted(set(collective_releases(instance)))[: params.fluid_points]
    return sorted(set(releases) | {max(floor, releases[-1])})


def fluid_bound(
    instance: Instance, floor: float, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> float | None:
    """The fluid bound: the load program over time, on a grid of issue times (GLOP).

    Between consecutive grid points (the earliest releases, and ``floor``, a
    valid lower bound) every dimension does at most the interval's length of
    work; a collective's phases do nothing before its release; and by every
    grid point, of each class and way of running (order, or the baseline's
    merged phases), the chunks' share done of a phase is at most their share
    done of the phase before it (a chunk starts a phase only once it has
    finished the one before). Counts are continuous, and so is the work: the
    program is a relaxation of every schedule, whose makespan is at least the
    last grid point plus the least time the rest can take. It sees what the
    load programs cannot: a dimension that waits for work the others have not
    yet passed on (on 8 all-reduces of 32 chunks on 4x4x4x16, 0.53% above
    fill-and-drain).

    Parameters
    ----------
    instance
        The instance.
    floor
        A valid lower bound on the makespan: the grid's last point (the higher, the tighter).
    deadline
        When to stop; ``None`` (not computed) if GLOP is not done by then.
    params
        ``fluid_points`` and ``max_fluid_variables``.

    Returns
    -------
    float or None
        The bound in ns; ``None`` when the program is too large or not solved in time.
    """
    deadline = deadline or Deadline()
    try:  # the releases the grid is made of, known by the deadline
        earliest_releases(instance, deadline)
    except OutOfTime:
        return None
    points = fluid_points(instance, floor, params)
    ways: dict[ChunkClass, list[tuple[PhaseSpec, ...]]] = {}
    variables = 0  # at most
    for cls in instance.chunk_classes:  # counted as they are made: a program too large stops here
        if deadline.expired():
            return None
        ways[cls] = list(chunk_ways(instance, cls.collective, cls.chunk_bytes))
        variables += sum(len(way) for way in ways[cls]) * len(points)
        if variables > params.max_fluid_variables:
            return None
    if not solvers_loaded(deadline, params):
        return None
    from ortools.linear_solver import pywraplp

    releases = collective_releases(instance)
    at_once = instance.network.active_chunks
    us = 1e-3  # the program in microseconds: well-scaled for GLOP
    fixed = len(points) - 1  # intervals between the points; one more, of free length, after the last
    solver = pywraplp.Solver.CreateSolver("GLOP")
    rest = solver.NumVar(0.0, solver.infinity(), "rest")
    work: dict[tuple[int, int], list[tuple[Any, float]]] = {}  # (dimension, interval) -> (share done, busy)
    try:
        for cls in instance.chunk_classes:
            deadline.check("fluid bound model")
            n = len(cls.chunks)
            # the interval of the release (a point unless after the grid's last release): nothing is done before it
            first = max(k for k in range(fixed + 1) if points[k] <= releases[cls.collective])
            counts = []
            for way in ways[cls]:
                count = solver.NumVar(0.0, n, "x")
                counts.append(count)
                before: list[Any] | None = None
                for phase in way:
                    # done[k]: the chunks' share of this phase done in interval first + k (the last: free length)
                    done = [solver.NumVar(0.0, n, "w") for _ in range(first, fixed + 1)]
                    total = solver.Constraint(0.0, 0.0)  # every row set directly: no expression trees
                    for share in done:
                        total.SetCoefficient(share, 1.0)
                    total.SetCoefficient(count, -1.0)
                    if before is not None:  # by the end of every interval but the last
                        for k in range(len(done) - 1):
                            ahead = solver.Constraint(-solver.infinity(), 0.0)
                            for j in range(k + 1):
                                ahead.SetCoefficient(done[j], 1.0)
                                ahead.SetCoefficient(before[j], -1.0)
                    busy = phase.duration / at_once * us
                    for k, share in enumerate(done):
                        work.setdefault((phase.dim, first + k), []).append((share, busy))
                    before = done
            everyone = solver.Constraint(n, n)
            for count in counts:
                everyone.SetCoefficient(count, 1.0)
        for (_, k), terms in work.items():
            deadline.check("fluid bound model")
            if k == fixed:  # the load of the free interval is at most its length, ``rest``
                load = solver.Constraint(-solver.infinity(), 0.0)
                load.SetCoefficient(rest, -1.0)
            else:
                load = solver.Constraint(-solver.infinity(), (points[k + 1] - points[k]) * us)
            for share, busy in terms:
                load.SetCoefficient(share, busy)
        solver.Minimize(rest)
        if not math.isinf(deadline.at):
            solver.SetTimeLimit(_time_limit_ms(deadline))
        status = run_interruptibly(solver.Solve, solver.InterruptSolve, deadline.at)
    except OutOfTime:
        return None
    if status != solver.OPTIMAL:
        logger.info("the fluid bound was not solved in time (status %s): not computed", status)
        return None
    return (points[-1] + float(solver.Objective().Value()) / us) * (1 - SAFETY)


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
    counts: Counts
    optimal: bool


_CACHE: OrderedDict[tuple[Instance, bool, BoundsParams], LoadSolution] = OrderedDict()


Memo = dict[tuple[Instance, bool], "LoadSolution | None"]


def integer_load_bound(
    instance: Instance,
    *,
    fill_drain: bool,
    deadline: Deadline | None = None,
    memo: Memo | None = None,
    params: BoundsParams = BOUNDS,
) -> LoadSolution | None:
    """The integer hierarchical load bound (SCIP), optionally with fill and drain (CP-SAT).

    Parameters
    ----------
    instance
        The instance.
    fill_drain
        Add each dimension's least head and tail over the orders in use.
    deadline
        When to stop; the dual bound is valid wherever the solver stops.
    memo
        Answers of one caller's earlier calls, cut short by its deadline or
        not (one ``solve`` call shares them among its stages); this call's
        answer is added. They come before the process's cache: a memo may
        hold better counts (see :func:`compute_bounds`).
    params
        The programs' limits.

    Returns
    -------
    LoadSolution or None
        ``None`` when the program is too large, or no assignment was found
        before ``deadline``.

    Notes
    -----
    SCIP explores at most ``params.node_limit`` branch-and-bound nodes;
    CP-SAT runs one worker for at most ``params.fill_drain_work`` units of
    deterministic time. Such limits, unlike a time limit, keep the answer the
    same on every machine. Answers that they decided (not the deadline) are
    cached per instance and parameters: do not mutate the returned counts.
    """
    deadline = deadline or Deadline()
    if memo is not None and (instance, fill_drain) in memo:  # this caller's own answer first: it may be better
        return memo[(instance, fill_drain)]
    key = (instance, fill_drain, params)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    if not load_programs_fit(instance, params) or not solvers_loaded(deadline, params):
        return None
    if fill_drain:
        # fill-and-drain only adds constraints to the integer program: an integer
        # optimum at hand is its floor, its first assignment, and often its answer
        plain = _CACHE.get((instance, False, params)) or (memo or {}).get((instance, False))
        solution = _fill_drain_program(instance, plain, deadline, params)
    else:
        solution = _plain_program(instance, deadline, params)
    if memo is not None:
        memo[(instance, fill_drain)] = solution
    if solution is not None and not deadline.expired():  # decided by a node or work limit: the same everywhere
        _CACHE[key] = solution
        if len(_CACHE) > 64:
            _CACHE.popitem(last=False)
    return solution


def _plain_program(instance: Instance, deadline: Deadline, params: BoundsParams) -> LoadSolution | None:
    """The integer load program, by SCIP under a node limit (:mod:`themis_opt.bounds.scip`)."""
    from themis_opt.bounds.scip import solve_scip

    try:
        solver, x = _load_model(instance, "SCIP", integer=True, deadline=deadline, params=params)
        # misc/catchctrlc: let Ctrl-C reach Python instead of only stopping SCIP
        settings = f"limits/nodes = {params.node_limit}\nmisc/catchctrlc = FALSE\n"
        answer = solve_scip(
            solver, settings, deadline, grace=params.scip_grace, helper_above=params.scip_helper_variables
        )
    except OutOfTime:
        return None
    if answer is None:
        logger.info("the integer load bound found no assignment in time: not computed")
        return None
    counts: Counts = {}
    for (cls, order), var in x.items():
        counts.setdefault(cls, {})[order] = round(answer.values[var.index()])
    bound = load_origin(instance) + answer.bound * 1e3 * (1 - SAFETY)
    logger.debug("integer load bound: %.3f ns, %s", bound, "optimal" if answer.optimal else "at a limit")
    return LoadSolution(bound, counts, answer.optimal)


@dataclass(frozen=True)
class FillDrainModel:
    """The fill-and-drain program as a CP-SAT model: its order counts, whether each order is in
    use, its makespan (in units from ``origin``) and ``q``, which rounds a time in ns down to units.
    """

    model: Any
    counts: dict[tuple[ChunkClass, tuple[int, ...]], Any]
    used: dict[tuple[ChunkClass, tuple[int, ...]], Any]
    makespan: Any
    origin: float
    unit: float

    def q(self, ns: float) -> int:
        """``ns`` rounded down to whole units."""
        return math.floor(ns / self.unit)

    def read(self, value: Callable[[Any], int]) -> Counts:
        """The counts of a solution, per class and order."""
        counts: Counts = {}
        for (cls, order), var in self.counts.items():
            counts.setdefault(cls, {})[order] = value(var)
        return counts


def fill_drain_model(
    instance: Instance,
    plain: LoadSolution | None,
    deadline: Deadline,
    *,
    heads_tails: bool = True,
    params: BoundsParams = BOUNDS,
) -> FillDrainModel | None:
    """The fill-and-drain program (solved by ``_fill_drain_program``); ``None`` if ``deadline`` passes first.

    Without ``heads_tails``, the integer load program: the issue cuts alone, no heads or tails.
    """
    from themis_opt.cpsat import solver as sat

    try:
        origin = load_origin(instance, deadline)  # the releases, known by the deadline
    except OutOfTime:
        return None
    profiles = order_profiles(instance)
    cuts = program_cuts(instance, params)
    # a unit fine enough to lose nothing that matters, coarse enough for 64-bit sums
    span = max(t - origin for t, _ in cuts) + sum(
        len(cls.chunks) * max(sum(p.busy) for p in profiles[cls].values()) for cls in instance.chunk_classes
    )
    unit = max(params.fill_drain_unit_ns, span / 2**40)

    def q(ns: float) -> int:
        return math.floor(ns / unit)

    m = sat.Model()
    top = q(span) + 1
    makespan = m.new_int_var(0, top, "makespan")
    if plain is not None:
        m.add(makespan >= q(plain.bound - origin))
    x: dict[tuple[ChunkClass, tuple[int, ...]], Any] = {}
    used: dict[tuple[ChunkClass, tuple[int, ...]], Any] = {}
    hint_of: dict[tuple[ChunkClass, tuple[int, ...]], int] = {}
    for cls in instance.chunk_classes:
        if deadline.expired():
            return None
        n = len(cls.chunks)
        # a hint: without a first solution CP-SAT may raise its bound one unit per conflict
        if plain is not None:
            hint = plain.counts[cls]
        else:
            lightest = min(profiles[cls], key=lambda o: (max(profiles[cls][o].busy), o))
            hint = {o: n if o == lightest else 0 for o in profiles[cls]}
        for order in profiles[cls]:
            key = (cls, order)
            hint_of[key] = hint[order]
            x[key] = m.new_int_var(0, n, "x")
            used[key] = m.new_bool_var("u")
            m.add(x[key] >= 1).only_enforce_if(used[key])
            m.add(x[key] == 0).only_enforce_if(~used[key])
            m.add_hint(x[key], hint[order])
            m.add_hint(used[key], hint[order] > 0)
        m.add(sum(x[cls, order] for order in profiles[cls]) == n)
    # each class's load terms per dimension, made once: the cuts repeat them (hundreds of cuts on task graphs)
    dims = range(instance.network.num_dims)
    terms = {}  # per class and dimension: the orders that use it, their count variables and busy times in units
    for cls in instance.chunk_classes:
        for d in dims:
            orders = [o for o, p in profiles[cls].items() if p.busy[d]]
            terms[cls, d] = (orders, [x[cls, o] for o in orders], [q(profiles[cls][o].busy[d]) for o in orders])
    # with heads and tails, the first cut's loads are in the fill-and-drain constraints below
    for t, later in cuts[1:] if heads_tails else cuts:
        for d in dims:
            if deadline.expired():
                return None
            variables = [v for cls in later for v in terms[cls, d][1]]
            if variables:
                coefficients = [c for cls in later for c in terms[cls, d][2]]
                m.add(makespan >= q(t - origin) + sat.LinearExpr.weighted_sum(variables, coefficients))
    # the hint made complete (CP-SAT often did not complete the counts within the work limit):
    # the makespan the hinted counts give, and each dimension's least head and tail in use
    hinted_busy = {  # each class's load per dimension at the hinted counts
        cls: [sum(hint_of[cls, o] * c for o, c in zip(terms[cls, d][0], terms[cls, d][2])) for d in dims]
        for cls in instance.chunk_classes
    }
    ends_hint = [q(plain.bound - origin) if plain is not None else 0]
    for t, later in cuts[1:] if heads_tails else cuts:
        ends_hint.append(q(t - origin) + max(sum(hinted_busy[cls][d] for cls in later) for d in dims))
    for d in range(instance.network.num_dims if heads_tails else 0):
        if deadline.expired():
            return None
        pairs = [(key, profiles[key[0]][key[1]]) for key in x if profiles[key[0]][key[1]].head[d] is not None]
        if not pairs:
            continue
        ends = []
        heads = [q(p.head[d] - origin) for _, p in pairs]  # type: ignore[operator]
        tails = [q(p.tail[d]) for _, p in pairs]  # type: ignore[arg-type]
        least_hint = []
        for values in (heads, tails):
            least = m.new_int_var(min(values), top, "least")
            in_use = [v for (key, _), v in zip(pairs, values) if hint_of[key] > 0]
            value = min(in_use) if in_use else top
            m.add_hint(least, value)
            least_hint.append(value)
            # least >= each level unless an order in use lies below it: a clause per level listing
            # the orders below (CP-SAT's work limit reads them best), or where that is the square of
            # too many orders a chain of Booleans, "some order in use lies below this level"
            group: dict[int, list[int]] = {}  # per level, its orders (their places in pairs)
            for i, v in enumerate(values):
                group.setdefault(v, []).append(i)
            levels = sorted(group)
            clauses = sum(itertools.accumulate(len(group[v]) for v in levels[:-1]))  # their literals
            chain = clauses > params.fill_drain_clause_literals
            below: list[Any] = []  # the orders below the level (places), or the chain's last link
            for previous, level in itertools.pairwise(levels):
                if deadline.expired():
                    return None
                reached = m.new_bool_var("reached")
                m.add(least >= level).only_enforce_if(reached)
                if chain:
                    now = m.new_bool_var("below")
                    m.add_bool_or([now, reached])
                    m.add_bool_or([~now, *(used[pairs[i][0]] for i in group[previous]), *below])
                    m.add_hint(now, value < level)
                    below = [now]
                else:
                    below = sorted([*below, *group[previous]])
                    m.add_bool_or([*(used[pairs[i][0]] for i in below), reached])
                m.add_hint(reached, level <= value)
            ends.append(least)
        busy = [(key, q(p.busy[d])) for key, p in pairs]
        m.add(makespan >= ends[0] + ends[1] + sum(x[key] * b for key, b in busy))
        ends_hint.append(sum(least_hint) + sum(hint_of[key] * b for key, b in busy))
    m.add_hint(makespan, min(top, max(ends_hint)))
    return FillDrainModel(m, x, used, makespan, origin, unit)


def fill_drain_settings(params: BoundsParams, probing: bool = True) -> SolverSettings:
    """CP-SAT as the fill-and-drain programs run it: one worker, a work limit (the same answer everywhere)."""
    from themis_opt.cpsat.solver import SolverSettings

    # deterministic time barely moves while the bound is raised a unit per conflict: conflicts are counted too
    return SolverSettings(work=params.fill_drain_work, conflicts=params.fill_drain_conflicts, probing=probing)


def _fill_drain_program(
    instance: Instance, plain: LoadSolution | None, deadline: Deadline, params: BoundsParams
) -> LoadSolution | None:
    """The fill-and-drain program, by CP-SAT (one worker, a work limit: the same answer everywhere).

    Every time is rounded down to a unit (so the program is a relaxation and
    its bound is valid as it stands); an order is in use exactly when its
    count is positive, and a dimension's head is at least each level ``v``
    of the heads unless some order in use has a head below ``v`` (tails
    alike). Exact Booleans instead of a big-M let CP-SAT prove what SCIP
    left open after thousands of nodes.
    """
    from themis_opt.cpsat import solver as sat

    if plain is not None and plain.optimal and fill_drain_value(instance, plain.counts) <= plain.bound / (1 - SAFETY):
        return plain  # the integer optimum pays no head or tail beyond its load: no program to solve
    program = fill_drain_model(instance, plain, deadline, params=params)
    if program is None:
        return None
    program.model.minimize(program.makespan)
    for probing in (True, False):
        # on large programs presolve's probing can spend the whole work limit: then once more without it
        solver = sat.Solver(fill_drain_settings(params, probing))
        code = solver.run(program.model, deadline)
        if code != sat.UNKNOWN or deadline.expired():
            break
    if not sat.solved(code):
        status = solver.status_name(code)
        logger.info("the fill-and-drain program found no assignment in time (%s): not computed", status)
        return None
    bound = program.origin + solver.best_objective_bound * program.unit * (1 - SAFETY)
    if plain is not None:
        bound = max(bound, plain.bound)
    logger.debug("fill-and-drain bound: %.3f ns, %s", bound, solver.status_name(code))
    return LoadSolution(bound, program.read(solver.value), code == sat.OPTIMAL)


def _adopt_counts(instance: Instance, fd: LoadSolution, plain: LoadSolution, memo: Memo | None) -> LoadSolution:
    """``fd`` with ``plain``'s counts where they cost less in the fill-and-drain
    program (the searches start from these counts), for this caller's ``memo``.

    Fill-and-drain, run first and cut by its work limit, may end with counts
    well above its bound that SCIP's integer program then improves on.
    """
    if fill_drain_value(instance, plain.counts) >= fill_drain_value(instance, fd.counts):
        return fd
    better = LoadSolution(max(fd.bound, plain.bound), plain.counts, optimal=False)
    if memo is not None:
        memo[(instance, True)] = better
    return better
