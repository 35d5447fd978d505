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
  the orders in use;
* iteration bound (``iteration``): the task graph relaxed at the granularity of chunk classes:
  every collective at its least span alone (over integer order counts), the critical path with
  those spans, and continuous order counts under every dimension's preemptive one-machine bound
  with heads and tails from the graph (cuts added as they are violated; GLOP);
* fluid bound (``fluid``): the load program over time, between issue times:
  a dimension does no more work in an interval than its length, and no chunk
  starts a phase before finishing the one before, counted in shares of
  chunks at every issue time (continuous counts and work).

With several issue times, a dimension's load counts only the collectives
issued at or after each issue time, added to that time.

With several pipeline stages every bound but the critical path and the
compute bound is the largest over the stages of that bound on the stage's
tasks alone (:func:`stage_parts`: each issued at its earliest release in the
whole graph); the critical path runs through the whole graph, sends at their
durations, and the compute bound is taken per stage's compute unit.

A bound over several chunkings of one instance at once (each collective at any of their counts) is
:func:`~themis_opt.bounds.chunkings.every_chunking_bound` (imported when a sweep needs it).

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

from themis_opt.bounds.formulas import (
    BOUNDS,
    SAFETY,
    _compute,
    _costs,
    _ideal,
    _least_busy,
    compute_bound,
    critical_path_bound,
    fill_drain_value,
    ideal_bound,
    least_busy_bound,
    load_programs_fit,
    load_value,
    load_variables,
    order_profiles,
    stage_parts,
)
from themis_opt.bounds.graph import jackson_bound, jackson_value, preemptive_makespan, resource_jobs
from themis_opt.bounds.iteration import (
    alone_span,
    collective_spans,
    exact_span,
    iteration_bound,
    iteration_counts,
    iteration_fits,
)
from themis_opt.bounds.params import BoundsParams
from themis_opt.bounds.programs import (
    LoadSolution,
    Memo,
    _adopt_counts,
    fluid_bound,
    integer_load_bound,
    lp_bound,
)
from themis_opt.bounds.solvers import solvers_loaded
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.errors import InputError
from themis_opt.instance import Instance
from themis_opt.orders import Counts
from themis_opt.result import Bounds
from themis_opt.sim.model import heads_and_tails, per_collective, shortest_durations

__all__ = [
    "BOUNDS",
    "BOUND_SETS",
    "PROGRAMS",
    "Counts",
    "LoadSolution",
    "Memo",
    "alone_span",
    "collective_spans",
    "compute_bound",
    "compute_bounds",
    "critical_path_bound",
    "exact_span",
    "fill_drain_value",
    "fluid_bound",
    "ideal_bound",
    "integer_load_bound",
    "iteration_bound",
    "iteration_counts",
    "iteration_fits",
    "iteration_wanted",
    "jackson_bound",
    "jackson_value",
    "least_busy_bound",
    "load_programs_fit",
    "load_value",
    "load_variables",
    "lp_bound",
    "order_profiles",
    "preemptive_makespan",
    "programs_wanted",
    "reported",
    "resource_jobs",
    "solver_free_bounds",
    "solvers_loaded",
    "stage_parts",
]


BOUND_SETS = ("auto", "formulas", "full")  # what solve's and bench's bound_set (--bounds) take
PROGRAMS = ("lp", "ip", "fill_drain", "fluid")  # the bounds of the load programs


def programs_wanted(instance: Instance, bound_set: str, params: BoundsParams = BOUNDS) -> bool:
    """Whether ``bound_set`` reports the load programs' bounds on ``instance``: ``full`` always,
    ``formulas`` never, ``auto`` on instances of at most ``params.auto_load_variables`` order counts
    (where they take a fraction of a second). The instance decides, never the method.

    Raises
    ------
    InputError
        On a name not in :data:`BOUND_SETS`.
    """
    if bound_set not in BOUND_SETS:
        raise InputError("bounds", f"must be one of {', '.join(BOUND_SETS)}, got {bound_set!r}")
    if bound_set == "auto":
        return load_variables(instance) <= params.auto_load_variables
    return bound_set == "full"


def iteration_wanted(instance: Instance, bound_set: str, params: BoundsParams = BOUNDS) -> bool:
    """Whether ``bound_set`` reports the iteration bound on ``instance``: ``auto`` and ``full`` where
    it fits (:func:`iteration_fits`: it takes a fraction of a second where it does), ``formulas``
    never. The instance decides, never the method.
    """
    programs_wanted(instance, bound_set, params)  # checks the name
    return bound_set != "formulas" and iteration_fits(instance, params)


def reported(bounds: Bounds, programs: bool) -> Bounds:
    """``bounds`` as a result reports them: without the load programs' unless ``programs`` (a method
    that runs them for its own search keeps their answers to itself, so that a schedule's gap does
    not depend on the method that made it).
    """
    return bounds if programs else dataclasses.replace(bounds, lp=None, ip=None, fill_drain=None, fluid=None)


def solver_free_bounds(instance: Instance, deadline: Deadline | None = None) -> Bounds:
    """The bounds that need no solver (ideal, critical path, compute, least busy, Jackson's), in
    O(n log n) after one pass over the task graph; where ``deadline`` passes first, the quantities
    not yet known count as 0 (every bound valid, only weaker).
    """
    deadline = deadline or Deadline()
    if instance.num_stages > 1:
        try:
            parts = stage_parts(instance, deadline)
        except OutOfTime:  # the whole graph's own bounds only: valid, weaker
            return _over_stages(instance, [])
        return _over_stages(
            instance, [solver_free_bounds(part, deadline.share(1 / (len(parts) - n))) for n, part in enumerate(parts)]
        )
    shortest = shortest_durations(instance, deadline)
    heads, tails = heads_and_tails(instance, shortest, deadline)
    releases = per_collective(instance, heads)
    costs = _costs(instance, deadline)
    return Bounds(
        ideal=_ideal(instance, releases, deadline),
        critical_path=max(h + s for h, s in zip(heads, shortest)),
        compute=_compute(instance, heads),
        least_busy=_least_busy(instance, releases, costs),
        jackson=jackson_value(resource_jobs(instance, heads, tails, costs)),
    )


def compute_bounds(
    instance: Instance,
    deadline: Deadline | None = None,
    *,
    full: bool = True,
    iteration: bool | None = None,
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
        ``False`` computes only the bounds that need no solver (ideal,
        critical path, compute, least busy: milliseconds).
    iteration
        Whether to compute the iteration bound (default: as ``full``), first, in
        ``params.iteration_share`` of the time (at most ``params.iteration_seconds``).
    memo
        Passed on to :func:`integer_load_bound`.
    params
        The programs' shares of the time and their limits.
    """
    deadline = deadline or Deadline()
    iteration = full if iteration is None else iteration
    if instance.num_stages > 1:
        return _stage_bounds(instance, deadline, full, iteration, memo, params)
    cheap = solver_free_bounds(instance, deadline)
    if iteration and iteration_fits(instance, params):
        # first: on a task graph it is the bound that sees the graph and the orders at once
        share = deadline.share(params.iteration_share).cap(params.iteration_seconds)
        cheap = dataclasses.replace(cheap, iteration=iteration_bound(instance, share, params))
    if not full or not load_programs_fit(instance, params):
        return cheap
    if not solvers_loaded(deadline, params):  # loaded first: the programs' shares are of the time then left
        return cheap
    lp = lp_bound(instance, deadline.share(params.lp_share), params)
    # fill-and-drain first: CP-SAT proves it in a fraction of the time SCIP needs for the weaker integer bound
    fd = integer_load_bound(
        instance, fill_drain=True, deadline=deadline.share(params.fill_drain_share), memo=memo, params=params
    )
    # then the fluid bound, on the best bound so far (the higher its grid reaches, the tighter), before
    # SCIP, which may take all the time left for less (on 16 all-reduces of 32 chunks it left none)
    floor = dataclasses.replace(cheap, lp=lp, fill_drain=fd.bound if fd is not None else None).best
    fluid = fluid_bound(instance, floor, deadline.share(params.fluid_share), params)
    if lp is not None and fd is not None and fill_drain_value(instance, fd.counts) * (1 - SAFETY) <= lp * (1 + SAFETY):
        # integer counts at the LP's value even with fill and drain: the integer program's optimum is
        # the LP's (to within SAFETY, both ways: the LP's own float noise must not send SCIP off for
        # seconds), so SCIP has nothing to add
        ip: float | None = lp
    elif fd is not None and fd.optimal:
        # the fill-and-drain program adds constraints to the integer program: its proven optimum
        # is at least the integer optimum, so SCIP could raise no bound (on 8 all-reduces of 32
        # chunks it took 10 s of a 60 s solve for nothing)
        ip = lp
    elif lp is not None and fd is not None and load_value(instance, fd.counts) * (1 - params.integer_headroom) <= lp:
        # SCIP's bound would lie between the LP's and these counts' load value: not worth its seconds
        ip = lp
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
    return dataclasses.replace(cheap, lp=lp, ip=ip, fill_drain=fill_drain, fluid=fluid)


def _stage_bounds(
    instance: Instance, deadline: Deadline, full: bool, iteration: bool, memo: Memo | None, params: BoundsParams
) -> Bounds:
    """The bounds of an instance of several pipeline stages, from its stages' parts (each an equal
    share of the time left): see :func:`_over_stages`.
    """
    try:
        parts = stage_parts(instance, deadline)
    except OutOfTime:  # the whole graph's own bounds only: valid, weaker
        return _over_stages(instance, [])
    return _over_stages(
        instance,
        [
            compute_bounds(
                part, deadline.share(1 / (len(parts) - n)), full=full, iteration=iteration, memo=memo, params=params
            )
            for n, part in enumerate(parts)
        ],
    )


def _over_stages(instance: Instance, found: list[Bounds]) -> Bounds:
    """Each load bound the largest over the stages' parts' ``found`` (a bound of a part is one of the
    instance: :func:`stage_parts`), the critical path and the compute bound of the whole.
    """

    def largest(field: str) -> float | None:
        values = [getattr(b, field) for b in found if getattr(b, field) is not None]
        return max(values) if values else None

    return Bounds(
        ideal=largest("ideal") or 0.0,
        lp=largest("lp"),
        ip=largest("ip"),
        fill_drain=largest("fill_drain"),
        fluid=largest("fluid"),
        critical_path=critical_path_bound(instance),
        compute=compute_bound(instance),
        least_busy=largest("least_busy"),
        jackson=largest("jackson"),
        iteration=largest("iteration"),
    )
