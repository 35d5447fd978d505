"""The chunk count as a lever: one instance solved at several chunk counts or sizes, with a bound for every
choice.

How many chunks a collective is cut into (ASTRA-sim's ``preferred-dataset-splits``, NCCL's chunk
size) is set by hand, and it can move an iteration more than any dimension order does: fewer
chunks pipeline less over the dimensions, more pay more latency. :func:`sweep_chunks` cuts every
collective of an instance as each :class:`Chunking` says in turn (a count for every collective,
or a chunk size, which gives each collective its own count), solves each with the methods asked
for, and keeps the smallest of their lower bounds: no schedule at any of those choices beats it,
so a gap against it certifies the choice as well as the schedule.

:func:`search_mix` goes further: each group of like collectives (same kind, size, group and
dimensions: a model's layers share a few) gets its own count, chosen by a local search that
simulates one method, and :func:`~themis_opt.bounds.chunkings.every_chunking_bound` bounds every
such mix of the sweep's counts at once.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from themis_opt.budget import Deadline
from themis_opt.errors import InputError
from themis_opt.instance import Collective, Instance, Kind, Task
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
    mix
        The mix of counts a search found, collective by collective (``None``: not searched).
    mix_by
        The method asked to search a mix (``None``: none asked); with no :attr:`mix`, no time was
        left for it after the chunkings.
    """

    choices: tuple[Chunking, ...]
    methods: tuple[str, ...]
    results: tuple[tuple[Result, ...], ...]
    mix: ChunkMix | None = None
    mix_by: str | None = None

    def __post_init__(self) -> None:
        if len(self.results) != len(self.choices) or any(len(r) != len(self.methods) for r in self.results):
            raise ValueError("a sweep needs one result per chunking and method")

    @property
    def bound(self) -> float:
        """A lower bound on every schedule at every chunking of the sweep: the smallest of their bounds,
        or the mix's bound (it holds at every mix, so at every chunking too) where higher.
        """
        least = min(results[0].lower_bound for results in self.results)
        return max(least, self.mix.bound) if self.mix is not None else least

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

    @property
    def every_bound(self) -> float:
        """A lower bound on every schedule the sweep chose among: at every chunking, and where a mix
        was searched, at every mix too (its :attr:`ChunkMix.bound`, which holds at every chunking).
        """
        return self.mix.bound if self.mix is not None else self.bound

    def found(self) -> tuple[Chunking | None, Result]:
        """The shortest schedule found (any method, at any chunking or at the mix; a tie goes to the
        first chunking swept, the mix last): where (``None``: at the mix), and its result.
        """
        found: list[tuple[float, int, Result]] = [
            (r.makespan, n, r) for n, results in enumerate(self.results) for r in results if r.makespan is not None
        ]
        if self.mix is not None:
            found += [(r.makespan, len(self.choices), r) for r in self.mix.results if r.makespan is not None]
        if not found:
            raise ValueError("the sweep found no schedule")
        _, n, result = min(found, key=lambda item: (item[0], item[1]))
        return (self.choices[n] if n < len(self.choices) else None), result

    def shortest(self, instance: Instance) -> tuple[Instance, Result]:
        """``instance`` cut as the shortest schedule found says (see :meth:`found`), and that
        schedule's result.
        """
        where, result = self.found()
        if where is None:
            assert self.mix is not None
            return mixed(instance, self.mix.counts), result
        return rechunked(instance, where), result


def sweep_chunks(
    instance: Instance,
    choices: Sequence[int | Chunking],
    methods: Sequence[str] = ("baseline", "themis", "cpsat"),
    *,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    params: SolveParams | None = None,
    mix: str | None = None,
) -> ChunkSweep:
    """Solve ``instance`` cut as each of ``choices`` says (a number: a chunk count) with every method
    of ``methods``; with ``mix``, then search a count for each group of like collectives (see
    :func:`search_mix`) with that method, from the chunking it did best at.

    ``time_limit`` bounds the whole sweep: each chunking gets an equal share of what is left (the
    bounds and methods of one share theirs as :func:`~themis_opt.solving.solve_all` shares a
    limit), and the mix two (its search, then its solve and bound); ``workers``, ``seed`` and
    ``params`` as for :func:`~themis_opt.solving.solve`.

    Raises
    ------
    InputError
        No chunking, a count or size below 1, one given twice, or more than :data:`MAX_COUNTS`; a
        ``mix`` method not in ``methods`` or one that runs CP-SAT.
    """
    from themis_opt.solving import solve_all

    cuts = _checked(choices)
    if mix is not None:
        check_mix_method(mix, methods)
    deadline = Deadline(time.perf_counter() + time_limit)
    instances = [rechunked(instance, cut) for cut in cuts]  # every chunking checked before any work
    shares = len(cuts) + (2 if mix is not None else 0)
    results = []
    slowest = share = 0.0  # the longest a chunking's solve took, and the share the last one was given
    for n, cut in enumerate(instances):
        share = deadline.share(1 / (shares - n)).left()
        logger.info("chunks: %s, %.2f s", cuts[n].label, share)
        began = time.perf_counter()
        found = solve_all(cut, methods, time_limit=share, workers=workers, seed=seed, params=params)
        slowest = max(slowest, time.perf_counter() - began)
        results.append(tuple(found))
    sweep = ChunkSweep(cuts, tuple(methods), tuple(results), mix_by=mix)
    if mix is None:
        return sweep
    # The mix was planned two shares; solves that ran a little past theirs leave it a little less.
    # It is skipped only where the counts ate more than one of its shares and less is left than
    # two of their solves took (a search and the mix's solve would not end in time).
    if deadline.remaining() < min(share, 2 * slowest):
        logger.info("chunk mix: not searched, %.2f s left where a solve took %.2f s", deadline.remaining(), slowest)
        return sweep
    start = sweep.best(mix)[0]
    found_mix = search_mix(
        instance,
        cuts,
        methods,
        by=mix,
        start=start,
        time_limit=deadline.left(),
        workers=workers,
        seed=seed,
        params=params,
    )
    return dataclasses.replace(sweep, mix=found_mix)


def _checked(choices: Sequence[int | Chunking]) -> tuple[Chunking, ...]:
    cuts = tuple(c if isinstance(c, Chunking) else Chunking(count=c) for c in choices)
    if not cuts:
        raise InputError("counts", "must hold at least one chunk count or size")
    if len(cuts) > MAX_COUNTS:
        raise InputError("counts", f"must hold at most {MAX_COUNTS} chunk counts or sizes, got {len(cuts)}")
    if len(set(cuts)) != len(cuts):
        raise InputError("counts", f"holds a chunking twice: {[c.label for c in cuts]}")
    return cuts


def check_mix_method(by: str, methods: Sequence[str]) -> None:
    """Refuse a method to search mixes by that is not among ``methods`` or runs CP-SAT.

    Raises
    ------
    InputError
        Naming ``mix``.
    """
    from themis_opt.methods import METHODS, resolve_method

    if by not in methods:
        raise InputError("mix", f"must be one of the methods run ({', '.join(methods)}), got {by!r}")
    name, _ = resolve_method(by)
    if METHODS[name].searches:
        simulated = ", ".join(m for m in methods if not METHODS[resolve_method(m)[0]].searches)
        raise InputError("mix", f"must be a method that simulates ({simulated or 'none run'}), got {by!r}")


def mixed(instance: Instance, counts: Sequence[int]) -> Instance:
    """``instance`` with its ``c``-th collective cut into ``counts[c]`` chunks (sends aside: one
    message each), fewer where it has fewer bytes; named ``NAME-mix``.

    Raises
    ------
    InputError
        If ``counts`` does not give every collective a count of at least 1.
    """
    if len(counts) != len(instance.collectives) or any(isinstance(n, bool) or n < 1 for n in counts):
        raise InputError("counts", f"must give each of the {len(instance.collectives)} collectives a count >= 1")
    tasks: list[Task] = []
    n = 0
    for t in instance.tasks:
        if isinstance(t, Collective):
            if t.kind is not Kind.SEND:
                t = dataclasses.replace(t, chunks=min(counts[n], t.size_bytes), chunk_bytes=None)  # type: ignore[arg-type]
            n += 1
        tasks.append(t)
    return Instance(instance.network, tuple(tasks), f"{instance.name}-mix", instance.metadata, instance.stage_npus)


@dataclass(frozen=True)
class ChunkMix:
    """A count for each collective, found by :func:`search_mix`.

    Parameters
    ----------
    counts
        Per collective, its chunk count (a send's is 1: it is one message).
    by
        The method whose makespan the search lowered.
    methods
        The methods that solved the mix, in order.
    results
        Their results on the mix (each against the mix's own bounds).
    bound
        A lower bound on every schedule at every mix of the search's chunkings
        (:func:`~themis_opt.bounds.chunkings.every_chunking_bound`).
    tried
        How many mixes the search simulated.
    """

    counts: tuple[int, ...]
    by: str
    methods: tuple[str, ...]
    results: tuple[Result, ...]
    bound: float
    tried: int

    def result(self, method: str) -> Result:
        """``method``'s result on the mix."""
        return self.results[self.methods.index(method)]

    def gap(self, method: str) -> float | None:
        """``method``'s makespan on the mix against :attr:`bound`, as a fraction."""
        makespan = self.result(method).makespan
        return None if makespan is None or self.bound <= 0 else makespan / self.bound - 1


def like_groups(instance: Instance) -> list[tuple[int, ...]]:
    """The collectives (sends aside) in groups of like ones (kind, size, group, dimensions and stage
    alike), the groups with the most bytes first (ties in order of their first collective).
    """
    groups: dict[tuple[object, ...], list[int]] = {}
    for n, c in enumerate(instance.collectives):
        if c.kind is not Kind.SEND:
            groups.setdefault((c.kind, c.size_bytes, c.group, c.dimensions, c.stage), []).append(n)
    sizes = [c.size_bytes for c in instance.collectives]
    return sorted((tuple(g) for g in groups.values()), key=lambda g: (-sizes[g[0]] * len(g), g[0]))


def search_mix(
    instance: Instance,
    choices: Sequence[int | Chunking],
    methods: Sequence[str] = ("themis",),
    *,
    by: str = "themis",
    start: int | Chunking | None = None,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    params: SolveParams | None = None,
) -> ChunkMix:
    """A count for each group of like collectives (:func:`like_groups`), each among the counts
    ``choices`` give it, that lowers ``by``'s makespan; then solved by ``methods`` and bounded for
    every mix.

    From every collective cut as ``start`` says (default: the best of ``choices`` for ``by``), the
    search takes the groups in turn, most bytes first, and moves a group to each of its other
    counts, keeping a move that shortens the makespan; passes over the groups until one keeps none.
    Deterministic: the moves' order is fixed and ``by`` simulates.

    ``time_limit`` bounds the whole call: the search gets half, the bound for every mix a quarter
    of what is left, and the solve of the mix found the rest (:func:`~themis_opt.solving.solve_all`'s
    rules).

    Raises
    ------
    InputError
        Bad ``choices`` (as for :func:`sweep_chunks`); ``by`` not in ``methods``, or one that runs
        CP-SAT.
    """
    from themis_opt.bounds.chunkings import every_chunking_bound
    from themis_opt.solving import solve, solve_all

    cuts = _checked(choices)
    check_mix_method(by, methods)
    deadline = Deadline(time.perf_counter() + time_limit)
    search = deadline.share(0.5)
    sizes = [c.size_bytes for c in instance.collectives]
    tried: dict[tuple[int, ...], float] = {}
    common: dict[str, Any] = {"workers": workers, "seed": seed, "params": params}  # every solve of the search

    def makespan(counts: tuple[int, ...]) -> float | None:
        if counts not in tried:
            if search.expired():
                return None
            cut = mixed(instance, counts)
            found = solve(cut, by, time_limit=search.left(), bound_set="formulas", **common).makespan
            if found is None:
                return None
            tried[counts] = found
        return tried[counts]

    def uniform(cut: Chunking) -> tuple[int, ...]:
        return tuple(1 if c.kind is Kind.SEND else cut.chunks(c.size_bytes) for c in instance.collectives)

    if start is None:
        spans = [(makespan(uniform(cut)), n) for n, cut in enumerate(cuts)]
        known = [(span, n) for span, n in spans if span is not None]
        begin = cuts[min(known)[1]] if known else cuts[0]
    else:
        begin = start if isinstance(start, Chunking) else Chunking(count=start)
    best = uniform(begin)
    best_span = makespan(best)
    groups = like_groups(instance)
    moved = best_span is not None
    while moved and best_span is not None:
        moved = False
        for group in groups:
            options = sorted({cut.chunks(sizes[group[0]]) for cut in cuts})
            members = set(group)
            for count in options:
                if count == best[group[0]]:
                    continue
                trial = tuple(count if n in members else k for n, k in enumerate(best))
                span = makespan(trial)
                if span is None:
                    break
                if span < best_span:
                    best, best_span, moved = trial, span, True
    logger.info("chunk mix: %d mixes simulated, %s", len(tried), best_span)
    one = rechunked(instance, 1)
    bound = every_chunking_bound(one, [rechunked(instance, cut) for cut in cuts], deadline.share(0.25))
    results = solve_all(mixed(instance, best), methods, time_limit=deadline.left(), **common)
    return ChunkMix(best, by, tuple(methods), tuple(results), bound, len(tried))
