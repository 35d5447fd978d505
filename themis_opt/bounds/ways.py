"""Each chunk class's orders costed for the relaxations (:class:`Way`).

Per dimension a way's busy time, head and tail, and its phases there as jobs of their own: what the
iteration bound's program and the bound over several chunkings are built from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from themis_opt.bounds.formulas import BOUNDS
from themis_opt.bounds.params import BoundsParams
from themis_opt.budget import Deadline
from themis_opt.cost import PhaseSpec, merges
from themis_opt.instance import ChunkClass, Instance
from themis_opt.policies import baseline_order
from themis_opt.sim.model import chunk_plan, class_cost, least_profile, model_of, way_profile


@dataclass(frozen=True)
class Way:
    """One order of a chunk class (or, past ``params.iteration_orders`` orders, every order at once,
    each quantity at its least), costed for one chunk from its collective's release.

    Parameters
    ----------
    busy
        Per dimension, the chunk's least busy time there, ns (over the phases the dimension runs
        at once).
    head
        Per dimension, the least time from the chunk's release to its first phase there
        (``None``: no phase there).
    tail
        Per dimension, the least time from the end of its last phase there to its end.
    duration
        The chunk's least duration.
    phases
        Per dimension, each of its phases there as ``(work, head, tail)``: the program's jobs, so that
        a reduce-scatter and an all-gather on one dimension are two, the second released late
        (``None``: one job, ``busy`` from ``head`` to ``tail``, as where the way runs merged phases).
    """

    busy: tuple[float, ...]
    head: tuple[float | None, ...]
    tail: tuple[float | None, ...]
    duration: float
    phases: tuple[tuple[tuple[float, float, float], ...], ...] | None = None


def class_ways(instance: Instance, cls: ChunkClass, params: BoundsParams = BOUNDS) -> tuple[Way, ...]:
    """Per order of ``cls`` its :class:`Way` (each at its least over the ways the order may run: the
    baseline's merged phases besides the split ones); with more than ``params.iteration_orders``
    orders, one way with every quantity at its least over all of them (its class's
    :class:`~themis_opt.sim.model.ClassCost`). Kept per kind, dimensions and chunk size.
    """
    c = cls.collective
    key = (instance.collectives[c].kind, instance.active_dims[c], cls.chunk_bytes, params.iteration_orders)
    memo = model_of(instance).memo.setdefault("ways", {})
    found: tuple[Way, ...] | None = memo.get(key)
    if found is not None:
        return found
    network = instance.network
    num_dims = network.num_dims
    if instance.order_count(c) > params.iteration_orders:
        cost = class_cost(instance, cls, Deadline())
        assert cost is not None  # no deadline
        found = (Way(cost.busy, cost.head, cost.tail, cost.fastest),)
    else:
        ways = []
        for order in instance.orders[c]:
            runs = [chunk_plan(instance, c, cls.chunk_bytes, order)]
            if order == baseline_order(instance, c) and merges(instance, c, baseline=True):
                runs.append(chunk_plan(instance, c, cls.chunk_bytes, order, merged=True))
            least = least_profile([way_profile(phases, 0.0, num_dims, network.active_chunks) for phases in runs])
            duration = min(sum(p.duration for p in phases) for phases in runs)
            jobs = _phase_jobs(runs[0], num_dims, network.active_chunks) if len(runs) == 1 else None
            ways.append(Way(least.busy, least.head, least.tail, duration, jobs))
        found = tuple(ways)
    memo[key] = found
    return found


def _phase_jobs(
    phases: Sequence[PhaseSpec], num_dims: int, at_once: int
) -> tuple[tuple[tuple[float, float, float], ...], ...]:
    """Per dimension, each of ``phases`` on it as ``(work, head, tail)`` (see :class:`Way`)."""
    total = sum(p.duration for p in phases)
    out: list[list[tuple[float, float, float]]] = [[] for _ in range(num_dims)]
    elapsed = 0.0
    for p in phases:
        out[p.dim].append((p.duration / at_once, elapsed, total - elapsed - p.duration))
        elapsed += p.duration
    return tuple(tuple(jobs) for jobs in out)
