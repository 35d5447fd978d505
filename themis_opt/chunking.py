"""The chunk count as a lever: one instance solved at several chunk counts or sizes, with a bound for every
choice.

How many chunks a collective is cut into (ASTRA-sim's ``preferred-dataset-splits``, NCCL's chunk
size) is set by hand, and it can move an iteration more than any dimension order does: fewer
chunks pipeline less over the dimensions, more pay more latency. :func:`sweep_chunks` cuts every
collective of an instance as each :class:`Chunking` says in turn (a count for every collective,
or a chunk size, which gives each collective its own count), solves each with the methods asked
for, and keeps the smallest of their lower bounds: no schedule at any of those choices beats it,
so a gap against it certifies the choice as well as the schedule.
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

MAX_COUNTS = 32  # chunkings a sweep takes: each is a whole solve


@dataclass(frozen=True)
class Chunking:
    """How a sweep cuts every collective: into ``count`` chunks, or into chunks of ``size`` bytes
    (NCCL's lever: each collective gets ``ceil(its bytes / size)`` chunks); exactly one is given.
    """

    count: int | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if (self.count is None) == (self.size is None):
            raise InputError("chunking", "give a chunk count or a chunk size, not both or neither")
        for name, value in (("counts", self.count), ("sizes", self.size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(name, f"must be >= 1, got {value!r}")

    @property
    def label(self) -> str:
        """``4`` (chunks a collective) or ``4 MiB`` (a chunk's bytes)."""
        if self.count is not None:
            return str(self.count)
        assert self.size is not None
        for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if self.size % scale == 0:
                return f"{self.size // scale} {unit}"
        return f"{self.size} B"

    def chunks(self, size_bytes: int) -> int:
        """Chunks of a collective of ``size_bytes``: at least one, at most a chunk a byte."""
        if self.count is not None:
            return min(self.count, size_bytes)
        assert self.size is not None
        return max(1, min(-(-size_bytes // self.size), size_bytes))


def rechunked(instance: Instance, chunks: int | Chunking) -> Instance:
    """``instance`` with every collective (sends aside) cut as ``chunks`` says (a count: ``chunks``
    chunks of ``size // chunks`` bytes, the last taking the rest, fewer where a collective has fewer
    bytes); named ``NAME-cN`` (a count) or ``NAME-sBYTES`` (a size).
    """
    cut = chunks if isinstance(chunks, Chunking) else Chunking(count=chunks)
    tasks = tuple(
        dataclasses.replace(t, chunks=cut.chunks(t.size_bytes), chunk_bytes=None)  # type: ignore[arg-type]
        if isinstance(t, Collective) and t.kind is not Kind.SEND
        else t
        for t in instance.tasks
    )
    suffix = f"c{cut.count}" if cut.count is not None else f"s{cut.size}"
    return Instance(instance.network, tasks, f"{instance.name}-{suffix}", instance.metadata, instance.stage_npus)


@dataclass(frozen=True)
class ChunkSweep:
    """One instance solved at several chunk counts.

    Parameters
    ----------
    choices
        The chunkings, in the order solved.
    methods
        The methods, in the order each chunking ran them.
    results
        Per chunking, one result per method (each against that chunking's bounds).
    """

    choices: tuple[Chunking, ...]
    methods: tuple[str, ...]
    results: tuple[tuple[Result, ...], ...]

    def __post_init__(self) -> None:
        if len(self.results) != len(self.choices) or any(len(r) != len(self.methods) for r in self.results):
            raise ValueError("a sweep needs one result per chunking and method")

    @property
    def bound(self) -> float:
        """A lower bound on every schedule at every chunking of the sweep: the smallest of their bounds."""
        return min(results[0].lower_bound for results in self.results)

    def best(self, method: str) -> tuple[Chunking, Result]:
        """The chunking at which ``method`` found its shortest makespan, and that result."""
        column = self.methods.index(method)
        found = [
            (r[column].makespan, n, r[column]) for n, r in enumerate(self.results) if r[column].makespan is not None
        ]
        if not found:
            raise ValueError(f"{method} found no schedule at any count")
        _, n, result = min(found, key=lambda item: (item[0], item[1]))
        return self.choices[n], result

    def gap(self, method: str) -> float:
        """``method``'s best makespan over every chunking against :attr:`bound`, as a fraction."""
        _, result = self.best(method)
        assert result.makespan is not None
        return result.makespan / self.bound - 1


def sweep_chunks(
    instance: Instance,
    choices: Sequence[int | Chunking],
    methods: Sequence[str] = ("baseline", "themis", "cpsat"),
    *,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    params: SolveParams | None = None,
) -> ChunkSweep:
    """Solve ``instance`` cut as each of ``choices`` says (a number: a chunk count) with every method
    of ``methods``.

    ``time_limit`` bounds the whole sweep: each chunking gets an equal share of what is left (the
    bounds and methods of one share theirs as :func:`~themis_opt.solving.solve_all` shares a
    limit); ``workers``, ``seed`` and ``params`` as for :func:`~themis_opt.solving.solve`.

    Raises
    ------
    InputError
        No chunking, a count or size below 1, one given twice, or more than :data:`MAX_COUNTS`.
    """
    from themis_opt.solving import solve_all

    cuts = tuple(c if isinstance(c, Chunking) else Chunking(count=c) for c in choices)
    if not cuts:
        raise InputError("counts", "must hold at least one chunk count or size")
    if len(cuts) > MAX_COUNTS:
        raise InputError("counts", f"must hold at most {MAX_COUNTS} chunk counts or sizes, got {len(cuts)}")
    if len(set(cuts)) != len(cuts):
        raise InputError("counts", f"holds a chunking twice: {[c.label for c in cuts]}")
    deadline = Deadline(time.perf_counter() + time_limit)
    instances = [rechunked(instance, cut) for cut in cuts]  # every chunking checked before any work
    results = []
    for n, cut in enumerate(instances):
        share = max(0.0, deadline.remaining()) / (len(cuts) - n)
        logger.info("chunks: %s, %.2f s", cuts[n].label, share)
        found = solve_all(cut, methods, time_limit=share, workers=workers, seed=seed, params=params)
        results.append(tuple(found))
    return ChunkSweep(cuts, tuple(methods), tuple(results))
