"""Running a sweep of instances: one interface, two backends (local processes, a Dask cluster).

:func:`run_sweep` yields each instance's :class:`~themis_opt.bench.Record` as
it finishes, on the backend given: :class:`Local` (this process, or
``jobs`` processes) or :class:`Dask` (a scheduler's workers). The command
line's ``bench`` and the library run sweeps alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from themis_opt.bench.harness import run_instance, stop_pool
from themis_opt.bench.records import BENCH_BOUNDS, Record, failed_record, settings_of
from themis_opt.budget import die_with_parent
from themis_opt.errors import InputError, counted

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.params import SolveParams


@dataclass(frozen=True)
class Local:
    """Instances run in this process (``jobs`` 1) or in ``jobs`` processes at once.

    ``workers``: CP-SAT workers per job (default: the cores over the jobs);
    ``warn`` is told when the jobs times the workers exceed the cores.
    """

    jobs: int = 1
    workers: int | None = None
    warn: Callable[[str], None] | None = None


@dataclass(frozen=True)
class Dask:
    """Instances run on the workers of the Dask scheduler ``scheduler`` (``tcp://HOST:PORT`` or ``local:N``).

    ``timeout``: seconds to wait for it to answer; ``workers``: CP-SAT workers per task (default: the
    fewest threads a worker has).
    """

    scheduler: str
    timeout: float
    workers: int | None = None


@dataclass
class Sweep:
    """A sweep under way: its runs as they finish, and how it runs (jobs at once, CP-SAT workers each)."""

    runs: Iterator[tuple[str, Record]]
    jobs: int
    workers: int


@contextmanager
def run_sweep(
    backend: Local | Dask,
    paths: Sequence[str],
    documents: dict[str, Any],
    digests: dict[str, str],
    methods: tuple[str, ...],
    time_limit: float,
    seed: int,
    params: SolveParams | None,
    bound_set: str = BENCH_BOUNDS,
) -> Iterator[Sweep]:
    """The sweep of ``methods`` over the instance files ``paths`` on ``backend``.

    Parameters
    ----------
    backend
        Where the instances run.
    paths
        The instance files, in the order to start them.
    documents, digests
        Each path's JSON document (what a cluster's workers receive) and content digest.
    methods, time_limit, seed, params, bound_set
        As :func:`~themis_opt.bench.run_instance` takes them.

    Yields
    ------
    Sweep
        Its ``runs`` yield (path, record) as instances finish; an instance that fails yields a record
        with its error. Leaving the ``with`` block stops what still runs.
    """
    from themis_opt.budget import available_workers

    if isinstance(backend, Local):
        workers = backend.workers if backend.workers is not None else max(1, available_workers() // backend.jobs)
        if backend.jobs * workers > available_workers() and backend.warn is not None:
            backend.warn(
                f"warning: {counted(backend.jobs, 'job')} x {counted(workers, 'worker')} exceed the "
                f"{available_workers()} cores available: timings will suffer"
            )
        yield Sweep(
            _local(backend.jobs, paths, methods, time_limit, workers, seed, params, bound_set, digests),
            backend.jobs,
            workers,
        )
        return
    from themis_opt.bench.cluster import connect, run_on_cluster, worker_threads

    with connect(backend.scheduler, backend.timeout) as client:
        jobs, threads = worker_threads(client)
        workers = backend.workers if backend.workers is not None else threads
        items = [(path, documents[path], digests[path]) for path in paths]
        runs = run_on_cluster(client, items, methods, time_limit, workers, seed, params, bound_set)
        yield Sweep(runs, jobs, workers)


def _local(
    jobs: int,
    paths: Sequence[str],
    methods: tuple[str, ...],
    time_limit: float,
    workers: int,
    seed: int,
    params: SolveParams | None,
    bound_set: str,
    digests: dict[str, str],
) -> Iterator[tuple[str, Record]]:
    """Yield (path, record) as instances finish, in this process or in ``jobs`` processes."""
    settings = settings_of(methods, time_limit, seed, params, bound_set)
    run = (methods, time_limit, workers, seed, params, bound_set)

    def failed(path: str, error: BaseException) -> Record:
        return failed_record(path, digests[path], settings, str(error))

    if jobs == 1:
        for path in paths:
            try:
                record = run_instance(path, *run)
            except InputError as error:
                record = failed(path, error)
            yield path, record
        return
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(max_workers=jobs, initializer=die_with_parent)
    try:
        pending: dict[Future[Record], str] = {}
        queue = list(paths)
        while queue or pending:
            while queue and len(pending) < jobs:
                path = queue.pop(0)
                pending[pool.submit(run_instance, path, *run)] = path
            finished_now, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished_now:
                path = pending.pop(future)
                try:
                    record = future.result()
                except Exception as error:  # a worker's failure is reported in its row
                    record = failed(path, error)
                yield path, record
    except BaseException:  # Ctrl-C, or the caller stopped: no worker may outlive the bench
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
