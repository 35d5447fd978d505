"""Running the bench on a Dask cluster (the optional ``[dask]`` extra).

What crosses the wire: each task is one instance's JSON document plus the
method set and options; each answer is one :class:`~themis_opt.bench.Record`.
Workers need themis_opt installed, not the instance files: no shared
filesystem. The client appends rows as they arrive; the table is ordered by
instance, not by arrival.

``--scheduler`` takes ``tcp://HOST:PORT`` (an existing scheduler) or
``local:N`` (a ``LocalCluster`` of N single-threaded worker processes on this
machine).
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from themis_opt.bench.harness import run_document
from themis_opt.bench.records import BENCH_BOUNDS, Record, failed_record, settings_of
from themis_opt.errors import InputError
from themis_opt.params import SolveParams
from themis_opt.probe import check_dask_peer

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0  # seconds to wait for a scheduler's answer (bench --connect-timeout)
INSTALL_HINT = 'the dask extra is not installed: pip install -e ".[dask]" (or pip install "themis_opt[dask]")'
_LOCAL = re.compile(r"local:(\d+)")
_TCP = re.compile(r"tcp://[^\s:/]+:\d{1,5}")


class ClusterLost(Exception):
    """The scheduler went away in the middle of a sweep."""


def check_scheduler(spec: str) -> None:
    """Raise :class:`InputError` unless ``spec`` is ``tcp://HOST:PORT`` or ``local:N``."""
    local = _LOCAL.fullmatch(spec)
    if local:
        if not 1 <= int(local.group(1)) <= 256:
            raise InputError("scheduler", f"local:N needs 1 <= N <= 256, got {spec!r}")
        return
    if not _TCP.fullmatch(spec) or not 0 < int(spec.rsplit(":", 1)[1]) < 65536:
        raise InputError("scheduler", f"must be tcp://HOST:PORT or local:N, got {spec!r}")


@contextmanager
def connect(spec: str, timeout: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """A Dask client for ``spec``, closed (and a local cluster stopped) on exit.

    Raises
    ------
    InputError
        If dask is not installed, ``spec`` is malformed, or no scheduler
        answers within ``timeout`` seconds.
    """
    check_scheduler(spec)
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise InputError("scheduler", INSTALL_HINT) from None
    cluster = None
    local = _LOCAL.fullmatch(spec)
    try:
        if local:
            # the workers ignore Ctrl-C (they inherit it ignored): this process stops them, quietly
            with _sigint_ignored():
                cluster = LocalCluster(
                    n_workers=int(local.group(1)),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            client = Client(cluster, timeout=timeout)
        else:
            started = time.monotonic()
            check_dask_peer(spec, timeout)  # Dask's client trusts whatever answers on the port
            client = Client(spec, timeout=max(1.0, timeout - (time.monotonic() - started)))
    except (OSError, TimeoutError) as error:
        if cluster is not None:
            cluster.close()
        raise InputError("scheduler", f"no scheduler answered at {spec} within {timeout:g} s ({error})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def worker_threads(client: Any) -> tuple[int, int]:
    """(workers, the fewest threads any worker has) of the cluster behind ``client``."""
    workers = client.scheduler_info().get("workers", {})
    threads = [int(w.get("nthreads", 1)) for w in workers.values()]
    return len(threads), min(threads, default=1)


def run_on_cluster(
    client: Any,
    documents: Sequence[tuple[str, Any, str]],
    methods: Sequence[str],
    time_limit: float,
    workers: int,
    seed: int,
    params: SolveParams | None = None,
    bound_set: str = BENCH_BOUNDS,
) -> Iterator[tuple[str, Record]]:
    """Yield (path, record) as the cluster finishes each instance (``bound_set``: see
    :func:`~themis_opt.bench.run_document`).

    ``documents`` holds (path, instance JSON document, digest). A task that
    fails on a worker yields a record with the error; a worker that dies has
    its task run again elsewhere (Dask's own retries). If the scheduler is
    lost, :class:`ClusterLost` is raised after every finished row was yielded.
    """
    from dask.distributed import as_completed

    futures = {}
    for n, (path, document, digest) in enumerate(documents):
        key = f"themis-opt-bench-{n}-{digest}"
        run = (document, path, tuple(methods), time_limit, workers, seed, params, bound_set)
        future = client.submit(run_document, *run, key=key)
        futures[future] = path
    digests = {path: digest for path, _, digest in documents}
    try:
        for future in as_completed(futures):
            path = futures[future]
            try:
                record = future.result()
            except Exception as error:  # the worker's error goes into the row, the sweep goes on
                if client.status != "running":
                    raise ClusterLost(str(error) or type(error).__name__) from None
                message = f"{type(error).__name__}: {error}"
                settings = settings_of(methods, time_limit, seed, params, bound_set)
                record = failed_record(path, digests[path], settings, message)
            yield path, record
    finally:
        for future in futures:
            future.cancel()
