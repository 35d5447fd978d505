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

The LP is solved by GLOP, the integer program by SCIP and fill-and-drain by
CP-SAT (all shipped with OR-Tools, imported only when a program runs); each
bound is the solver's dual bound shrunk by a relative 1e-8 to cover float
tolerances (fill-and-drain also rounds every time down, which only weakens
it). The programs run under a node or work limit (the same answer on every
machine) and within their share of the caller's time budget; a dual bound is
valid wherever the solver stops, and a program that cannot run in time, or
would have more than
``max_load_variables`` order counts (every chunk class times every order of
its dimensions: 8! orders per class on 8 dimensions), is reported as not
computed (``None``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never

from themis_opt.budget import Deadline, OutOfTime, run_interruptibly
from themis_opt.cost import (
    PhaseSpec,
    chunk_phases,
    group_size,
    merges,
    performed,
    phase_duration,
    phase_plan_of,
    wire_time,
)
from themis_opt.instance import Algorithm, AllReducePhases, ChunkClass, Collective, Compute, Instance, Kind, Op
from themis_opt.orders import Counts
from themis_opt.params import BoundsParams
from themis_opt.policies import baseline_order

logger = logging.getLogger(__name__)

SAFETY = 1e-8  # relative: covers the LP and MIP solvers' float tolerances (a margin, not a tuning number)
BOUNDS = BoundsParams()  # the defaults

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

    ``None`` marks a bound that was not computed. ``critical_path`` is the
    longest dependency chain with every collective at its shortest possible
    duration; ``compute`` the compute unit's work after its earliest start;
    ``cpsat`` CP-SAT's own bound (of a relaxation, so valid as it stands).
    """

    ideal: float
    lp: float | None = None
    ip: float | None = None
    fill_drain: float | None = None
    cpsat: float | None = None
    critical_path: float | None = None
    compute: float | None = None

    @property
    def best(self) -> float:
        """The largest (tightest) bound."""
        return max(b for b in self.as_dict().values() if b is not None)

    def as_dict(self) -> dict[str, float | None]:
        """The bounds by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def traffic_bytes(instance: Instance, collective: int) -> float:
    """What one NPU moves for a whole collective, whatever the orders, in bytes
    at the bandwidths of the dimensions that carry it.

    Where every algorithm of the collective moves its bytes at the
    dimension's bandwidth, that is the data it sends: x (N - 1) / N for a
    reduce-scatter over N NPUs, whatever the order. Elsewhere (a fully
    connected dimension under a ring, a double binary tree, messages that do
    not share a port) it is the least, over the orders, of each phase's
    :func:`~themis_opt.cost.wire_time` times its dimension's bandwidth.
    """
    coll = instance.collectives[collective]
    if coll.kind is Kind.ALL_TO_ALL:  # one fixed order, the size kept: each dimension's share is fixed
        phases = chunk_phases(instance, collective, float(coll.size_bytes), instance.active_dims[collective])
        return sum(_weighted(instance, collective, p) for p in phases)
    if _moves_at_bandwidth(instance, collective):
        npus = math.prod(instance.network.dimensions[d].size for d in instance.active_dims[collective])
        one_way = coll.size_bytes * (npus - 1) / npus
        return 2 * one_way if coll.kind is Kind.ALL_REDUCE else one_way
    return sum(
        len(cls.chunks) * _least_weighted(instance, cls)
        for cls in instance.chunk_classes
        if cls.collective == collective
    )


def _weighted(instance: Instance, collective: int, phase: PhaseSpec) -> float:
    """A phase's wire time times its dimension's bandwidth: the bytes it moves at that bandwidth."""
    dim = instance.network.dimensions[phase.dim]
    algorithm = dim.algorithm_for(instance.collectives[collective].kind)
    return wire_time(instance.network, phase.dim, phase.op, phase.bytes_in, algorithm) * dim.bytes_per_ns


def _moves_at_bandwidth(instance: Instance, collective: int) -> bool:
    """Whether every phase of ``collective`` moves the bytes it sends at its dimension's bandwidth."""
    network = instance.network
    kind = instance.collectives[collective].kind
    if network.all_reduce_phases is AllReducePhases.PER_DIMENSION and kind is Kind.ALL_REDUCE:
        return False
    for d in instance.active_dims[collective]:
        dim = network.dimensions[d]
        algorithm = dim.algorithm_for(kind)
        if algorithm.flattened or algorithm is Algorithm.DOUBLE_BINARY_TREE or dim.carved:
            return False
        for op, sent in ((Op.REDUCE_SCATTER, (dim.size - 1) / dim.size), (Op.ALL_GATHER, dim.size - 1.0)):
            if not math.isclose(wire_time(network, d, op, 1.0, algorithm) * dim.bytes_per_ns, sent, rel_tol=1e-12):
                return False
    return True


def _least_weighted(instance: Instance, cls: ChunkClass) -> float:
    """The least bandwidth-weighted traffic of one chunk of ``cls``: over its orders (and the
    baseline's merged phases), or, with more than 720 orders, every phase at its least.
    """
    c = cls.collective
    if instance.order_count(c) <= 720:
        return min(sum(_weighted(instance, c, p) for p in phases) for phases in _variants(instance, c, cls.chunk_bytes))
    return sum(_weighted(instance, c, p) for p in _smallest_phases(instance, cls))


def _variants(instance: Instance, collective: int, chunk_bytes: int) -> Iterator[tuple[PhaseSpec, ...]]:
    """Every way a chunk may run: each order, and the baseline's order merged where the baseline merges."""
    for order in instance.orders[collective]:
        yield chunk_phases(instance, collective, chunk_bytes, order)
        if order == baseline_order(instance, collective) and merges(instance, collective, baseline=True):
            yield chunk_phases(instance, collective, chunk_bytes, order, merged=True)


def _smallest_phases(instance: Instance, cls: ChunkClass) -> list[PhaseSpec]:
    """One phase per place of a chunk of ``cls``, each at the least input any order gives it
    (a reduce-scatter after all other dimensions, an all-gather on the shard).
    """
    c = cls.collective
    network = instance.network
    kind = instance.collectives[c].kind
    dims = instance.active_dims[c]
    npus = math.prod(group_size(network, kind, d) for d in dims)
    phases = []
    for d, place in phase_plan_of(network, kind, dims):
        algorithm = network.dimensions[d].algorithm_for(kind)
        op = performed(place, algorithm)
        n = group_size(network, kind, d)
        match place:
            case Op.REDUCE_SCATTER:
                smallest = cls.chunk_bytes * n / npus
            case Op.ALL_GATHER | Op.ALL_REDUCE:
                smallest = cls.chunk_bytes / npus
            case Op.ALL_TO_ALL:
                smallest = float(cls.chunk_bytes)
            case _ as unreachable:
                assert_never(unreachable)
        phases.append(PhaseSpec(d, op, smallest, smallest, phase_duration(network, d, op, smallest, algorithm)))
    return phases


def shortest_durations(instance: Instance) -> tuple[float, ...]:
    """Per task, a lower bound on how long it lasts: a compute task's duration;
    for a collective, its slowest chunk class taking that class's fastest order.
    """
    fastest: dict[int, float] = {}
    for cls in instance.chunk_classes:
        fastest[cls.collective] = max(fastest.get(cls.collective, 0.0), _fastest_chunk(instance, cls))
    out = []
    c = 0
    for task in instance.tasks:
        if isinstance(task, Compute):
            out.append(task.duration_ns)
        else:
            out.append(fastest[c])
            c += 1
    return tuple(out)


def _fastest_chunk(instance: Instance, cls: ChunkClass) -> float:
    """A lower bound on how long one chunk of ``cls`` takes: its fastest order,
    or, with more than 720 orders to try, every phase at its smallest possible
    input (a reduce-scatter after all other dimensions, an all-gather on the shard).
    """
    c = cls.collective
    if instance.order_count(c) <= 720:
        return min(sum(p.duration for p in phases) for phases in _variants(instance, c, cls.chunk_bytes))
    return sum(p.duration for p in _smallest_phases(instance, cls))


@functools.lru_cache(maxsize=64)
def earliest_releases(instance: Instance) -> tuple[float, ...]:
    """Per task, a lower bound on its release: its issue time, and each
    dependency's earliest release plus shortest duration plus lag.
    """
    shortest = shortest_durations(instance)
    index = instance.task_index
    release = [task.issue_ns for task in instance.tasks]
    for t in _topological(instance):
        for dep in instance.tasks[t].after:
            p = index[dep.task]
            release[t] = max(release[t], release[p] + shortest[p] + dep.lag_ns)
    return tuple(release)


def _topological(instance: Instance) -> list[int]:
    """The tasks, each after the tasks it waits for."""
    index = instance.task_index
    waiting = [len(task.after) for task in instance.tasks]
    users: list[list[int]] = [[] for _ in instance.tasks]
    for t, task in enumerate(instance.tasks):
        for dep in task.after:
            users[index[dep.task]].append(t)
    ready = [t for t, n in enumerate(waiting) if not n]
    out = []
    while ready:
        t = ready.pop()
        out.append(t)
        for u in users[t]:
            waiting[u] -= 1
            if not waiting[u]:
                ready.append(u)
    return out


def collective_releases(instance: Instance) -> tuple[float, ...]:
    """Per collective, the lower bound on its release (its issue time without dependencies)."""
    release = earliest_releases(instance)
    return tuple(release[t] for t, task in enumerate(instance.tasks) if isinstance(task, Collective))


def critical_path_bound(instance: Instance) -> float:
    """The longest dependency chain, every collective at its shortest duration."""
    shortest = shortest_durations(instance)
    return max(r + d for r, d in zip(earliest_releases(instance), shortest))


def compute_bound(instance: Instance) -> float | None:
    """For every earliest release t of a compute task: t plus the work of the
    compute tasks released no earlier (the compute unit runs one at a time);
    ``None`` without compute tasks.
    """
    release = earliest_releases(instance)
    work = [(release[t], task.duration_ns) for t, task in enumerate(instance.tasks) if isinstance(task, Compute)]
    if not work:
        return None
    return max(t + sum(d for r, d in work if r >= t) for t in {r for r, _ in work})


def ideal_bound(instance: Instance) -> float:
    """The ideal bandwidth bound.

    For one all-reduce of S bytes over dimensions with N NPUs in all:
    ``2 S (N - 1) / N / sum(B_d)`` (half of it for a reduce-scatter or an
    all-gather). With several collectives, for every release time t (a lower
    bound on when each collective may start), the traffic of the collectives
    released at or after t over the bandwidth of the dimensions they use,
    plus t; the largest of these.
    """
    dims = instance.network.dimensions
    releases = collective_releases(instance)
    best = 0.0
    for t in sorted(set(releases)):
        later = [c for c, r in enumerate(releases) if r >= t]
        used = {d for c in later for d in instance.active_dims[c]}
        rate = sum(dims[d].bytes_per_ns for d in used)
        best = max(best, t + sum(traffic_bytes(instance, c) for c in later) / rate)
    return best


@functools.lru_cache(maxsize=16)
def order_profiles(instance: Instance) -> dict[ChunkClass, dict[tuple[int, ...], OrderProfile]]:
    """Per chunk class and order, the :class:`OrderProfile` of one chunk
    (heads counted from the collective's earliest release).
    """
    releases = collective_releases(instance)
    num_dims = instance.network.num_dims
    profiles: dict[ChunkClass, dict[tuple[int, ...], OrderProfile]] = {}
    for cls in instance.chunk_classes:
        issue = releases[cls.collective]
        per_order = {}
        for order in instance.orders[cls.collective]:
            ways = [chunk_phases(instance, cls.collective, cls.chunk_bytes, order)]
            if order == baseline_order(instance, cls.collective) and merges(instance, cls.collective, baseline=True):
                # the baseline's way to run that order: its least costs count too
                ways.append(chunk_phases(instance, cls.collective, cls.chunk_bytes, order, merged=True))
            per_order[order] = _least_profile([_profile(phases, issue, num_dims) for phases in ways])
        profiles[cls] = per_order
    return profiles


def _profile(phases: tuple[PhaseSpec, ...], issue: float, num_dims: int) -> OrderProfile:
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
    return OrderProfile(tuple(busy), tuple(head), tuple(tail))


def _least_profile(profiles: list[OrderProfile]) -> OrderProfile:
    """Each entry at its least over ``profiles`` (of one order's ways to run): below every one of them."""
    if len(profiles) == 1:
        return profiles[0]

    def least(values: tuple[float | None, ...]) -> float | None:
        present = [v for v in values if v is not None]
        return min(present) if present else None

    return OrderProfile(
        tuple(min(b) for b in zip(*(p.busy for p in profiles))),
        tuple(least(h) for h in zip(*(p.head for p in profiles))),
        tuple(least(t) for t in zip(*(p.tail for p in profiles))),
    )


def _issue_cuts(instance: Instance) -> list[tuple[float, list[ChunkClass]]]:
    """(t, classes released at or after t) for every distinct earliest release t."""
    releases = collective_releases(instance)
    cuts = []
    for t in sorted(set(releases)):
        later = [cls for cls in instance.chunk_classes if releases[cls.collective] >= t]
        cuts.append((t, later))
    return cuts


def load_variables(instance: Instance) -> int:
    """How many order counts the load programs of ``instance`` have."""
    return sum(instance.order_count(cls.collective) for cls in instance.chunk_classes)


def load_programs_fit(instance: Instance, params: BoundsParams = BOUNDS) -> bool:
    """Whether the load programs are small enough to run (see ``params.max_load_variables``)."""
    return load_variables(instance) <= params.max_load_variables


def _origin(instance: Instance) -> float:
    """The earliest release of a collective: the load programs measure time from here."""
    return min(collective_releases(instance))


def _load_model(
    instance: Instance,
    backend: str,
    *,
    integer: bool,
    deadline: Deadline | None = None,
) -> tuple[pywraplp.Solver, dict[tuple[ChunkClass, tuple[int, ...]], pywraplp.Variable]]:
    """The load-bound program in microseconds since the earliest issue time
    (well-scaled for the solvers, and the solvers' relative tolerance applies
    to the span, not to absolute time). Building it checks ``deadline`` (raising
    :class:`OutOfTime`): on many dimensions the program alone takes seconds.
    """
    deadline = deadline or Deadline()
    from ortools.linear_solver import pywraplp

    origin = _origin(instance)
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
        solver.Add(sum(x[cls, order] for order in profiles[cls]) == len(cls.chunks))
    for t, later in _issue_cuts(instance):
        for d in range(instance.network.num_dims):
            deadline.check("load bound model")
            load = [x[cls, o] * (p.busy[d] * us) for cls in later for o, p in profiles[cls].items() if p.busy[d]]
            if load:
                solver.Add(makespan >= (t - origin) * us + sum(load))
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
    if not load_programs_fit(instance, params):
        return None
    try:
        solver, _ = _load_model(instance, "GLOP", integer=False, deadline=deadline)
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
    if not load_programs_fit(instance, params):
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
    """The integer load program, by SCIP under a node limit."""
    try:
        solver, x = _load_model(instance, "SCIP", integer=True, deadline=deadline)
        # misc/catchctrlc: let Ctrl-C reach Python instead of only stopping SCIP
        limits = f"limits/nodes = {params.node_limit}\nmisc/catchctrlc = FALSE\n"
        solver.SetSolverSpecificParametersAsString(limits)
        if not math.isinf(deadline.at):
            solver.SetTimeLimit(_time_limit_ms(deadline))
        mip = _mip_parameters()
        status = run_interruptibly(lambda: solver.Solve(mip), solver.InterruptSolve)
    except OutOfTime:
        return None
    if status not in (solver.OPTIMAL, solver.FEASIBLE):
        logger.info("the integer load bound found no assignment in time (status %s): not computed", status)
        return None
    counts: Counts = {}
    for (cls, order), var in x.items():
        counts.setdefault(cls, {})[order] = round(var.solution_value())
    bound = _origin(instance) + solver.Objective().BestBound() * 1e3 * (1 - SAFETY)
    logger.debug("integer load bound: %.3f ns, status %s", bound, status)
    return LoadSolution(bound, counts, status == solver.OPTIMAL)


@dataclass(frozen=True)
class _FillDrainModel:
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
        return math.floor(ns / self.unit)

    def read(self, value: Callable[[Any], int]) -> Counts:
        """The counts of a solution, per class and order."""
        counts: Counts = {}
        for (cls, order), var in self.counts.items():
            counts.setdefault(cls, {})[order] = value(var)
        return counts


def _fill_drain_model(
    instance: Instance,
    plain: LoadSolution | None,
    deadline: Deadline,
    *,
    heads_tails: bool = True,
    params: BoundsParams = BOUNDS,
) -> _FillDrainModel | None:
    """The fill-and-drain program (see :func:`_fill_drain_program`); ``None`` if ``deadline`` passes first.

    Without ``heads_tails``, the integer load program: the issue cuts alone, no heads or tails.
    """
    from ortools.sat.python import cp_model

    origin = _origin(instance)
    profiles = order_profiles(instance)
    cuts = _issue_cuts(instance)
    # a unit fine enough to lose nothing that matters, coarse enough for 64-bit sums
    span = max(t - origin for t, _ in cuts) + sum(
        len(cls.chunks) * max(sum(p.busy) for p in profiles[cls].values()) for cls in instance.chunk_classes
    )
    unit = max(params.fill_drain_unit_ns, span / 2**40)

    def q(ns: float) -> int:
        return math.floor(ns / unit)

    m = cp_model.CpModel()
    top = q(span) + 1
    makespan = m.new_int_var(0, top, "makespan")
    if plain is not None:
        m.add(makespan >= q(plain.bound - origin))
    x: dict[tuple[ChunkClass, tuple[int, ...]], cp_model.IntVar] = {}
    used: dict[tuple[ChunkClass, tuple[int, ...]], cp_model.IntVar] = {}
    for cls in instance.chunk_classes:
        if deadline.expired():
            return None
        n = len(cls.chunks)
        # a complete hint: without a first solution CP-SAT may raise its bound one unit per conflict
        if plain is not None:
            hint = plain.counts[cls]
        else:
            lightest = min(profiles[cls], key=lambda o: (max(profiles[cls][o].busy), o))
            hint = {o: n if o == lightest else 0 for o in profiles[cls]}
        for order in profiles[cls]:
            key = (cls, order)
            x[key] = m.new_int_var(0, n, "x")
            used[key] = m.new_bool_var("u")
            m.add(x[key] >= 1).only_enforce_if(used[key])
            m.add(x[key] == 0).only_enforce_if(~used[key])
            m.add_hint(x[key], hint[order])
            m.add_hint(used[key], hint[order] > 0)
        m.add(sum(x[cls, order] for order in profiles[cls]) == n)
    # with heads and tails, the first cut's loads are in the fill-and-drain constraints below
    for t, later in cuts[1:] if heads_tails else cuts:
        for d in range(instance.network.num_dims):
            if deadline.expired():
                return None
            load = [x[cls, o] * q(p.busy[d]) for cls in later for o, p in profiles[cls].items() if p.busy[d]]
            if load:
                m.add(makespan >= q(t - origin) + sum(load))
    for d in range(instance.network.num_dims if heads_tails else 0):
        if deadline.expired():
            return None
        pairs = [(key, profiles[key[0]][key[1]]) for key in x if profiles[key[0]][key[1]].head[d] is not None]
        if not pairs:
            continue
        ends = []
        heads = [q(p.head[d] - origin) for _, p in pairs]  # type: ignore[operator]
        tails = [q(p.tail[d]) for _, p in pairs]  # type: ignore[arg-type]
        for values in (heads, tails):
            least = m.new_int_var(min(values), top, "least")
            for level in sorted(set(values))[1:]:
                reached = m.new_bool_var("reached")
                m.add(least >= level).only_enforce_if(reached)
                m.add_bool_or([used[key] for (key, _), v in zip(pairs, values) if v < level] + [reached])
            ends.append(least)
        m.add(makespan >= ends[0] + ends[1] + sum(x[key] * q(p.busy[d]) for key, p in pairs))
    return _FillDrainModel(m, x, used, makespan, origin, unit)


def _fill_drain_solver(deadline: Deadline, params: BoundsParams) -> Any:
    """CP-SAT as the fill-and-drain programs run it: one worker, a work limit (the same answer everywhere)."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = params.fill_drain_work
    # deterministic time barely moves while the bound is raised a unit per conflict: conflicts are counted too
    solver.parameters.max_number_of_conflicts = params.fill_drain_conflicts
    solver.parameters.catch_sigint_signal = False
    if not math.isinf(deadline.at):
        solver.parameters.max_time_in_seconds = max(0.0, deadline.remaining())
    return solver


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
    from ortools.sat.python import cp_model

    if plain is not None and plain.optimal and fill_drain_value(instance, plain.counts) <= plain.bound / (1 - SAFETY):
        return plain  # the integer optimum pays no head or tail beyond its load: no program to solve
    program = _fill_drain_model(instance, plain, deadline, params=params)
    if program is None:
        return None
    program.model.minimize(program.makespan)
    solver = _fill_drain_solver(deadline, params)
    code = run_interruptibly(lambda: solver.solve(program.model), solver.stop_search, deadline.at)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        status = solver.status_name(code)
        logger.info("the fill-and-drain program found no assignment in time (%s): not computed", status)
        return None
    bound = program.origin + solver.best_objective_bound * program.unit * (1 - SAFETY)
    if plain is not None:
        bound = max(bound, plain.bound)
    logger.debug("fill-and-drain bound: %.3f ns, %s", bound, solver.status_name(code))
    return LoadSolution(bound, program.read(solver.value), code == cp_model.OPTIMAL)


def counts_within(
    instance: Instance, value: float, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> Iterator[Counts]:
    """Order counts whose fill-and-drain value is at most ``value`` ns, one after another, each new.

    Every assignment that meets ``value`` exactly satisfies the program with
    its times rounded down, so, where the program is not stopped by its work
    limit or ``deadline``, every such assignment comes out (with, rarely,
    some whose exact value exceeds ``value`` by the rounding). Each is found
    by CP-SAT under the fill-and-drain program's limits, the ones before it
    excluded; the sequence ends when none is left or one is not found in
    time. A tight program may have several optimal assignments of which
    only some admit a schedule at its bound (16 and 11 on a 16-chunk
    4x4x4x16 all-reduce: see the docs' benchmark page).
    """
    from ortools.sat.python import cp_model

    deadline = deadline or Deadline()
    if not load_programs_fit(instance, params):
        return
    program = _fill_drain_model(instance, None, deadline, params=params)
    if program is None:
        return
    m = program.model
    m.clear_hints()
    m.add(program.makespan <= program.q(value - program.origin))
    while not deadline.expired():
        solver = _fill_drain_solver(deadline, params)
        code = run_interruptibly(functools.partial(solver.solve, m), solver.stop_search, deadline.at)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return
        found = program.read(solver.value)
        yield found
        differs = []  # the next one differs in some count
        for (cls, order), var in program.counts.items():
            flag = m.new_bool_var("differs")
            m.add(var != found[cls][order]).only_enforce_if(flag)
            differs.append(flag)
        m.add_bool_or(differs)


def level_counts(
    instance: Instance, start: LoadSolution, deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> Counts | None:
    """Order counts about as good as ``start``'s in the load program, with each collective's
    work spread evenly over the dimensions, for the searches to start from.

    Among the assignments whose integer load program value
    (:func:`load_value`) is at most ``start``'s times ``1 + params.level_slack``,
    CP-SAT (under the fill-and-drain program's limits, with no hint: hinted
    with ``start`` it stayed there) minimises the sum over collectives of the
    collective's largest load on one dimension, less ``params.level_credit`` times
    that value per order in use. The programs balance the loads from each
    issue time to the end; these counts also balance what each collective
    brings at its issue time, over many orders, which leaves the dimensions
    fewer idle stretches (the docs' benchmark page has the measurements).
    ``None`` if no assignment is found within the limits or before ``deadline``.
    """
    from ortools.sat.python import cp_model

    deadline = deadline or Deadline()
    if not load_programs_fit(instance, params):
        return None
    # the cuts alone: with the heads' and tails' Booleans CP-SAT found no assignment within the work limit
    program = _fill_drain_model(instance, start, deadline, heads_tails=False, params=params)
    if program is None:
        return None
    m = program.model
    m.clear_hints()
    cap = load_value(instance, start.counts) * (1 + params.level_slack)
    m.add(program.makespan <= program.q(cap - program.origin))
    profiles = order_profiles(instance)
    peaks = []
    for c in range(len(instance.collectives)):
        if deadline.expired():
            return None
        keys = [(cls, o) for cls, o in program.counts if cls.collective == c]
        peak = m.new_int_var(0, program.q(cap - program.origin) * len(keys), "peak")
        for d in range(instance.network.num_dims):
            m.add(peak >= sum(program.counts[cls, o] * program.q(profiles[cls][o].busy[d]) for cls, o in keys))
        peaks.append(peak)
    credit = program.q(params.level_credit * (cap - program.origin))
    m.minimize(sum(peaks) - credit * sum(program.used.values()))
    solver = _fill_drain_solver(deadline, params)
    code = run_interruptibly(functools.partial(solver.solve, m), solver.stop_search, deadline.at)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return program.read(solver.value)


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


def load_value(instance: Instance, counts: Counts) -> float:
    """The integer load program's objective for the order ``counts``, in ns: over every issue
    time and dimension, the time plus the load of the collectives issued then or later.
    """
    profiles = order_profiles(instance)
    best = 0.0
    for t, later in _issue_cuts(instance):
        for d in range(instance.network.num_dims):
            load = sum(n * profiles[cls][o].busy[d] for cls in later for o, n in counts[cls].items() if n)
            best = max(best, t + load)
    return best


def fill_drain_value(instance: Instance, counts: Counts) -> float:
    """The fill-and-drain program's objective for the order ``counts``, in ns (no rounding)."""
    profiles = order_profiles(instance)
    used = [(cls, o, p) for cls in profiles for o, p in profiles[cls].items() if counts[cls].get(o, 0) > 0]
    best = load_value(instance, counts)
    for d in range(instance.network.num_dims):
        on_d = [(cls, o, p) for cls, o, p in used if p.head[d] is not None]
        if on_d:
            head = min(p.head[d] for _, _, p in on_d)  # type: ignore[type-var]
            tail = min(p.tail[d] for _, _, p in on_d)  # type: ignore[type-var]
            best = max(best, head + tail + sum(counts[cls][o] * p.busy[d] for cls, o, p in on_d))  # type: ignore[operator]
    return best


def _mip_parameters() -> Any:
    from ortools.linear_solver import pywraplp

    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(params.RELATIVE_MIP_GAP, 0.0)
    return params


def compute_bounds(
    instance: Instance,
    deadline: Deadline | None = None,
    *,
    full: bool = True,
    memo: Memo | None = None,
    params: BoundsParams = BOUNDS,
) -> Bounds:
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
    memo
        Passed on to :func:`integer_load_bound`.
    params
        The programs' shares of the time and their limits.
    """
    deadline = deadline or Deadline()
    cheap = Bounds(
        ideal=ideal_bound(instance),
        critical_path=critical_path_bound(instance) if instance.is_task_graph else None,
        compute=compute_bound(instance),
    )
    if not full or not load_programs_fit(instance, params):
        return cheap
    lp = lp_bound(instance, deadline.share(params.lp_share), params)
    # fill-and-drain first: CP-SAT proves it in a fraction of the time SCIP needs for the weaker integer bound
    fd = integer_load_bound(
        instance, fill_drain=True, deadline=deadline.share(params.fill_drain_share), memo=memo, params=params
    )
    if lp is not None and fd is not None and fill_drain_value(instance, fd.counts) * (1 - SAFETY) <= lp:
        # integer counts at the LP's value even with fill and drain: the integer program's optimum is
        # the LP's (to within SAFETY), so SCIP has nothing to add
        ip: float | None = lp
    else:
        plain = integer_load_bound(instance, fill_drain=False, deadline=deadline, memo=memo, params=params)
        ip = plain.bound if plain is not None else None
        if fd is not None and plain is not None:
            fd = _adopt_counts(instance, fd, plain, memo)
        elif plain is not None and memo is not None:
            # fill-and-drain found no assignment in time: the searches start from SCIP's counts,
            # its bound stays not computed
            memo[(instance, True)] = LoadSolution(plain.bound, plain.counts, optimal=False)
    fill_drain = max(ip or 0.0, fd.bound) if fd is not None else None
    return dataclasses.replace(cheap, lp=lp, ip=ip, fill_drain=fill_drain)
