"""The benchmark harness: every method on every instance, the rows files, the summary, and running a sweep.

* :mod:`~themis_opt.bench.harness`: one instance's :class:`Record` (every method run and validated),
  rows files (JSON lines), CSV and the summary;
* :mod:`~themis_opt.bench.runner`: a sweep of instances on local processes or a Dask cluster.
"""

from themis_opt.bench.harness import (
    BENCH_BOUNDS,
    METHODS,
    MethodSummary,
    Outcome,
    Record,
    Settings,
    Summary,
    append_record,
    failed_record,
    instance_digest,
    instance_of,
    parse_methods,
    prepare_rows_file,
    read_records,
    run_document,
    run_instance,
    settings_of,
    stop_pool,
    summarize,
    write_csv,
)

__all__ = [
    "BENCH_BOUNDS",
    "METHODS",
    "MethodSummary",
    "Outcome",
    "Record",
    "Settings",
    "Summary",
    "append_record",
    "failed_record",
    "instance_digest",
    "instance_of",
    "parse_methods",
    "prepare_rows_file",
    "read_records",
    "run_document",
    "run_instance",
    "settings_of",
    "stop_pool",
    "summarize",
    "write_csv",
]
