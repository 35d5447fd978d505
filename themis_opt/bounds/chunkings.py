"""A lower bound for every way of cutting the collectives: each collective at any of several chunk
counts, chosen collective by collective.

The bounds of one instance hold at its own chunk counts only: fewer chunks pipeline less (a longer
critical path), more pay more per-phase delays (more load). Over a set of cuts of the same tasks
(each collective's count free among the cuts'), :func:`every_chunking_bound` relaxes them all at
once, on the instance with every collective in one chunk:

* every task at its least span over the cuts (:func:`~themis_opt.bounds.iteration.collective_spans`):
  the critical path, and every task's head and tail over the graph;
* the compute unit's preemptive bound with those heads and tails;
* the iteration bound's program (:func:`~themis_opt.bounds.iteration.program_bound`) over the
  one-chunk classes, an order's share of a collective counted by bytes: each order's head and tail
  on a dimension the least over the cuts' chunks, its work the whole chunk's scaled by ``r``;
* the load LP (continuous order counts, GLOP) of the one-chunk instance with every task released
  at its head (each stage apart), its load scaled by ``r``, where the program does not run
  (several stages, or more count variables than ``params.max_iteration_variables``).

``r`` is the least, over the cuts' chunk classes, orders and dimensions, of a chunk's cost per byte
against the whole collective's: a chunk of ``b`` of ``B`` bytes costs at least ``r b / B`` of the
whole, so any mix's chunks load every dimension at least as their shares of the whole do, scaled.
It is 1 wherever a phase costs a fixed time plus its bytes over a bandwidth, as every phase of the
model does; measured, it keeps the bound valid whatever the costs. Every term holds for every mix of
the cuts' counts, so their largest does.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence

from themis_opt.bounds.formulas import BOUNDS, compute_bound, load_origin, order_profiles, stage_parts
from themis_opt.bounds.iteration import collective_spans, iteration_fits, program_bound
from themis_opt.bounds.params import BoundsParams
from themis_opt.bounds.programs import lp_bound
from themis_opt.bounds.ways import Way, class_ways
from themis_opt.budget import Deadline, OutOfTime
from themis_opt.instance import Collective, Instance, Kind
from themis_opt.sim.model import heads_and_tails


def every_chunking_bound(
    one: Instance, cuts: Sequence[Instance], deadline: Deadline | None = None, params: BoundsParams = BOUNDS
) -> float:
    """A lower bound on every schedule of every instance that cuts each collective of ``one`` as one
    of ``cuts`` does, collective by collective (see the module).

    Parameters
    ----------
    one
        The instance with every collective (sends aside) in one chunk.
    cuts
        The same tasks cut at other counts (sizes and orders as ``one``'s, in the same order).
    deadline
        When to stop; a part that cannot run by then is left out (the bound is valid, weaker).
    params
        The programs' limits.

    Raises
    ------
    ValueError
        If a cut does not hold ``one``'s tasks, or ``one`` cuts a collective in more than one chunk.
    """
    deadline = deadline or Deadline()
    for cut in cuts:
        _check_same_tasks(one, cut)
    if any(c.chunks != 1 for c in one.collectives if c.kind is not Kind.SEND):
        raise ValueError("every chunking bound: `one` must cut every collective in one chunk")
    every = [one, *cuts]
    spans = tuple(min(values) for values in zip(*(collective_spans(cut, deadline, params) for cut in every)))
    heads, _ = heads_and_tails(one, spans, deadline)
    best: float = max(h + s for h, s in zip(heads, spans))
    relaxed = Instance(
        one.network,
        tuple(dataclasses.replace(task, after=(), issue_ns=head) for task, head in zip(one.tasks, heads)),
        f"{one.name}-relaxed",
        one.metadata,
        one.stage_npus,
    )
    best = max(best, compute_bound(relaxed) or 0.0)
    if iteration_fits(one, params):
        with contextlib.suppress(OutOfTime):  # the terms above hold alone
            best = max(best, program_bound(one, spans, _least_ways(one, every, params), deadline, params))
        return best
    ratio = min([1.0, *(_profile_ratio(relaxed, cut) for cut in cuts)])
    try:
        parts = stage_parts(relaxed, deadline) if relaxed.num_stages > 1 else [relaxed]
    except OutOfTime:
        return best
    for n, part in enumerate(parts):
        lp = lp_bound(part, deadline.share(1 / (len(parts) - n)), params)
        if lp is not None and ratio > 0:
            origin = load_origin(part)
            best = max(best, origin + ratio * (lp - origin))
    return best


def _check_same_tasks(one: Instance, cut: Instance) -> None:
    same = len(one.tasks) == len(cut.tasks) and all(
        type(a) is type(b)
        and (
            not isinstance(a, Collective)
            or (a.kind, a.size_bytes, a.group, a.dimensions, a.stage)
            == (b.kind, b.size_bytes, b.group, b.dimensions, b.stage)  # type: ignore[union-attr]
        )
        for a, b in zip(one.tasks, cut.tasks)
    )
    if not same or one.network != cut.network:
        raise ValueError(f"every chunking bound: {cut.name} does not hold {one.name}'s tasks on its network")


def _least_ways(one: Instance, every: Sequence[Instance], params: BoundsParams) -> list[tuple[Way, ...]]:
    """Per chunk class of ``one`` (a whole collective), its ways with each head, tail and duration
    the least over every class of that collective in ``every`` and the work scaled by ``r``.
    """
    found: dict[int, list[tuple[int, tuple[Way, ...]]]] = {}
    for cut in every:
        for cls in cut.chunk_classes:
            found.setdefault(cls.collective, []).append((cls.chunk_bytes, class_ways(cut, cls, params)))
    ratio = 1.0
    least = []
    for cls in one.chunk_classes:
        whole = class_ways(one, cls, params)
        options = found[cls.collective]
        ways = []
        for w, way in enumerate(whole):
            for size, theirs in options:
                for d, busy in enumerate(way.busy):
                    if busy > 0:
                        ratio = min(ratio, (theirs[w].busy[d] / size) / (busy / cls.chunk_bytes))
            theirs_w = [o[w] for _, o in options]
            head = tuple(None if h is None else min(o.head[d] or 0.0 for o in theirs_w) for d, h in enumerate(way.head))
            tail = tuple(None if q is None else min(o.tail[d] or 0.0 for o in theirs_w) for d, q in enumerate(way.tail))
            ways.append(Way(way.busy, head, tail, min(o.duration for o in theirs_w)))
        least.append(tuple(ways))
    ratio = max(0.0, ratio)
    return [tuple(dataclasses.replace(w, busy=tuple(b * ratio for b in w.busy)) for w in ways) for ways in least]


def _profile_ratio(one: Instance, cut: Instance) -> float:
    """The least, over ``cut``'s chunk classes, orders and dimensions, of a chunk's cost per byte
    against the whole collective's in one chunk (``one``'s), as the load LP counts them.
    """
    whole = {cls.collective: profiles for cls, profiles in order_profiles(one).items()}
    sizes = [c.size_bytes for c in one.collectives]
    least = 1.0
    for cls, profiles in order_profiles(cut).items():
        for order, profile in profiles.items():
            for d, busy in enumerate(profile.busy):
                full = whole[cls.collective][order].busy[d]
                if full > 0:
                    least = min(least, (busy / cls.chunk_bytes) / (full / sizes[cls.collective]))
    return least
