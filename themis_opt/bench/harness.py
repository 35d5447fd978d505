"""The benchmark harness: every method on one instance, run and validated into a row.

One :class:`Record` per instance holds what each method measured; records
go to a JSON-lines file one at a time, so an interrupted run keeps what it
finished and ``resume`` skips it. A record names its instance by a digest of
the instance's content (not its path), and says which methods, time limit and
seed produced it, so rows of different runs are never mixed by accident.
Every schedule is checked by the validator and the record says whether it
passed.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from themis_opt.bench.records import BENCH_BOUNDS, Outcome, Record, instance_digest
from themis_opt.bounds import compute_bounds
from themis_opt.budget import Deadline
from themis_opt.errors import InputError
from themis_opt.formats.native import (
    in_file,
    instance_from_dict,
    read_json,
)
from themis_opt.instance import Instance
from themis_opt.methods import VARIANTS, method_names
from themis_opt.metrics import iteration_metrics
from themis_opt.params import SolveParams, changes
from themis_opt.solving import solve_all
from themis_opt.validator import validate
from themis_opt.version import __version__

METHODS = VARIANTS  # the bench's runs: methods of the registry, with their intra-dimension variants


def parse_methods(text: str) -> tuple[str, ...]:
    """A comma-separated list of methods or variants (as :func:`~themis_opt.solving.solve` takes
    them), or ``all``: every variant; checked.
    """
    if text.strip() == "all":
        return METHODS
    methods = tuple(m.strip() for m in text.split(","))
    if not any(methods):
        raise InputError("method", "names no method")
    for m in methods:
        if not m:
            raise InputError("method", f"has an empty name in {text!r}")
        if m == "all":
            raise InputError("method", f"all stands alone: every method, not one in a list ({text!r})")
        if m not in method_names():
            raise InputError("method", f"unknown method {m!r} (choose from {', '.join(method_names())}, or all)")
    if len(set(methods)) != len(methods):
        raise InputError("method", f"names a method twice: {text!r}")
    return methods


def instance_of(document: object, path: str) -> Instance:
    """The instance of an instance file's JSON ``document`` (errors name the file)."""
    try:
        return instance_from_dict(document, Path(path).stem)
    except InputError as error:
        raise in_file(error, path) from None


def run_instance(
    path: str,
    methods: Sequence[str],
    time_limit: float,
    workers: int,
    seed: int,
    params: SolveParams | None = None,
    bound_set: str = BENCH_BOUNDS,
) -> Record:
    """Run ``methods`` on the instance file at ``path`` and validate every schedule."""
    return run_document(read_json(path), path, methods, time_limit, workers, seed, params, bound_set)


def run_document(
    document: Any,
    path: str,
    methods: Sequence[str],
    time_limit: float,
    workers: int,
    seed: int,
    params: SolveParams | None = None,
    bound_set: str = BENCH_BOUNDS,
) -> Record:
    """Run ``methods`` on an instance given as its JSON document (what a remote worker receives).

    The bounds get their own ``time_limit``, then every method gets
    ``time_limit`` for its whole run (:func:`~themis_opt.solving.solve_all`
    with ``each``); the row reports the bounds of ``bound_set`` (see
    :func:`~themis_opt.solving.solve`).
    """
    instance = instance_of(document, path)
    params = params if params is not None else SolveParams()
    results = solve_all(
        instance,
        methods,
        time_limit=time_limit,
        each=True,
        workers=workers,
        seed=seed,
        params=params,
        bound_set=bound_set,
    )
    best = results[0].bounds if results else compute_bounds(instance, Deadline.after(time_limit))
    outcomes = []
    for m, r in zip(methods, results):
        valid = r.schedule is not None and not validate(instance, r.schedule)
        status = r.status.value
        metrics = iteration_metrics(instance, r.schedule) if r.schedule is not None else None
        outcomes.append(
            Outcome(
                m,
                status,
                r.makespan,
                r.runtime,
                r.bandwidth_utilization,
                valid,
                r.note,
                metrics.iteration_ns if metrics else None,
                metrics.exposed_ns if metrics else None,
            )
        )
    return Record(
        path=path,
        instance=instance.name,
        dims="x".join(str(d.size) for d in instance.network.dimensions),
        npus=instance.network.num_npus,
        chunks=instance.num_chunks,
        lower_bound_ns=best.best,
        ideal_ns=best.ideal,
        outcomes=tuple(outcomes),
        digest=instance_digest(instance),
        methods=tuple(methods),
        time_limit_s=time_limit,
        seed=seed,
        params=changes(params),
        bound=best.best_name,
        bounds=bound_set,
        measured=datetime.datetime.now(datetime.UTC).date().isoformat(),
        version=__version__,
    )


def stop_pool(pool: Any) -> None:
    """Stop a process pool now: cancel what has not started, kill what runs."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)
