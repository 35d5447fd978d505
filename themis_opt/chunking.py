"""The chunk count as a lever: one instance solved at several chunk counts, with a bound for every choice.

How many chunks a collective is cut into (ASTRA-sim's ``preferred-dataset-splits``, NCCL's chunk
size) is set by hand, and it can move an iteration more than any dimension order does: fewer
chunks pipeline less over the dimensions, more pay more latency. :func:`sweep_chunks` cuts every
collective of an instance into each count in turn, solves each with the methods asked for, and
keeps the smallest of the counts' lower bounds: no schedule at any of those counts beats it, so a
gap against it certifies the choice of count as well as the schedule.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from themis_opt.budget import Deadline
from themis_opt.errors import InputError
from themis_opt.instance import Collective, Instance, Kind
from themis_opt.params import SolveParams
from themis_opt.result import Result

logger = logging.getLogger(__name__)

MAX_COUNTS = 32  # chunk counts a sweep takes: each is a whole solve


def rechunked(instance: Instance, chunks: int) -> Instance:
    """``instance`` with every collective (sends aside) cut into ``chunks`` chunks of ``size // chunks``
    bytes, the last taking the rest (fewer where a collective has fewer bytes); named ``NAME-cN``.
    """
    if chunks < 1:
        raise InputError("chunks", f"must be >= 1, got {chunks}")
    tasks = tuple(
        dataclasses.replace(t, chunks=min(chunks, t.size_bytes), chunk_bytes=None)  # type: ignore[arg-type]
        if isinstance(t, Collective) and t.kind is not Kind.SEND
        else t
        for t in instance.tasks
    )
    return Instance(instance.network, tasks, f"{instance.name}-c{chunks}", instance.metadata, instance.stage_npus)


@dataclass(frozen=True)
class ChunkSweep:
    """One instance solved at several chunk counts.

    Parameters
    ----------
    counts
        The chunk counts, in the order solved.
    methods
        The methods, in the order each count ran them.
    results
        Per count, one result per method (each against that count's bounds).
    """

    counts: tuple[int, ...]
    methods: tuple[str, ...]
    results: tuple[tuple[Result, ...], ...]

    def __post_init__(self) -> None:
        if len(self.results) != len(self.counts) or any(len(r) != len(self.methods) for r in self.results):
            raise ValueError("a sweep needs one result per count and method")

    @property
    def bound(self) -> float:
        """A lower bound on every schedule at every count of the sweep: the smallest count's bound."""
        return min(results[0].lower_bound for results in self.results)

    def best(self, method: str) -> tuple[int, Result]:
        """The count at which ``method`` found its shortest makespan, and that result."""
        column = self.methods.index(method)
        found = [
            (r[column].makespan, n, r[column]) for n, r in enumerate(self.results) if r[column].makespan is not None
        ]
        if not found:
            raise ValueError(f"{method} found no schedule at any count")
        _, n, result = min(found, key=lambda item: (item[0], item[1]))
        return self.counts[n], result

    def gap(self, method: str) -> float:
        """``method``'s best makespan over every count against :attr:`bound`, as a fraction."""
        _, result = self.best(method)
        assert result.makespan is not None
        return result.makespan / self.bound - 1


def sweep_chunks(
    instance: Instance,
    counts: Sequence[int],
    methods: Sequence[str] = ("baseline", "themis", "cpsat"),
    *,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    params: SolveParams | None = None,
) -> ChunkSweep:
    """Solve ``instance`` cut into each of ``counts`` with every method of ``methods``.

    ``time_limit`` bounds the whole sweep: each count gets an equal share of what is left (the
    bounds and methods of one count share theirs as :func:`~themis_opt.solving.solve_all` shares a
    limit); ``workers``, ``seed`` and ``params`` as for :func:`~themis_opt.solving.solve`.

    Raises
    ------
    InputError
        No count, a count below 1, a count given twice, or more than :data:`MAX_COUNTS` of them.
    """
    from themis_opt.solving import solve_all

    counts = tuple(counts)
    if not counts:
        raise InputError("counts", "must hold at least one chunk count")
    if len(counts) > MAX_COUNTS:
        raise InputError("counts", f"must hold at most {MAX_COUNTS} chunk counts, got {len(counts)}")
    if len(set(counts)) != len(counts):
        raise InputError("counts", f"holds a chunk count twice: {list(counts)}")
    deadline = Deadline(time.perf_counter() + time_limit)
    instances = [rechunked(instance, count) for count in counts]  # every count checked before any work
    results = []
    for n, cut in enumerate(instances):
        share = max(0.0, deadline.remaining()) / (len(counts) - n)
        logger.info("chunks: %d chunks a collective, %.2f s", counts[n], share)
        found = solve_all(cut, methods, time_limit=share, workers=workers, seed=seed, params=params)
        results.append(tuple(found))
    return ChunkSweep(counts, tuple(methods), tuple(results))
