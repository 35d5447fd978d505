"""The benchmark harness: every method on every instance, the rows files, the summary, and running a sweep.

* :mod:`~themis_opt.bench.records`: one instance's :class:`Record` of every method's :class:`Outcome`;
* :mod:`~themis_opt.bench.harness`: running every method on one instance and validating each schedule;
* :mod:`~themis_opt.bench.rows`: rows files (JSON lines, appended a whole row at a time) and CSV;
* :mod:`~themis_opt.bench.summary`: the summary per method;
* :mod:`~themis_opt.bench.runner`: a sweep of instances on local processes or a Dask cluster.
"""

from themis_opt.bench.harness import METHODS, instance_of, parse_methods, run_document, run_instance, stop_pool
from themis_opt.bench.records import (
    BENCH_BOUNDS,
    Outcome,
    Record,
    Settings,
    failed_record,
    instance_digest,
    settings_of,
)
from themis_opt.bench.rows import append_record, prepare_rows_file, read_records, rows_lock, write_csv
from themis_opt.bench.summary import MethodSummary, Summary, summarize

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
    "rows_lock",
    "run_document",
    "run_instance",
    "settings_of",
    "stop_pool",
    "summarize",
    "write_csv",
]
