"""Rows files: JSON lines, one whole :class:`~themis_opt.bench.records.Record` a line, appended as each
instance finishes (an interrupted run keeps what it finished, and ``--resume`` skips it), read back
strictly; and their CSV export.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from themis_opt.bench.records import Record, Settings
from themis_opt.errors import InputError, counted
from themis_opt.fileio import atomic_writer, read_bytes, read_text
from themis_opt.formats.native import (
    check_writable,
    in_file,
    parse_json,
)


def read_records(path: str | Path) -> list[Record]:
    """Records already in a JSON-lines file.

    A last line that is cut short (not valid JSON, no newline, after at least
    one good record: a write that was interrupted) is dropped; anything else
    that is not a record is an error. The file is left as it is (a run that
    takes it cuts that line: :func:`prepare_rows_file`).
    """
    path = Path(path)
    if not path.exists():
        return []
    text = read_text(path)
    lines = text.split("\n")
    records: list[Record] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = parse_json(line)
        except InputError as error:
            if number == len(lines) and not text.endswith("\n") and records:
                break
            raise in_file(InputError(f"line {number}", f"not a rows file: {error.problem}"), path) from None
        try:
            records.append(Record.from_dict(data))
        except InputError as error:
            where = f"line {number}" + (f", {error.path}" if error.path else "")
            raise in_file(InputError(where, f"not a rows file: {error.problem}"), path) from None
    return records


def prepare_rows_file(
    path: str | Path, settings: Settings, *, allow_mixed: bool = False, resume: bool = True
) -> list[Record]:
    """Check a rows file before any work starts and return the rows it holds.

    A missing file is fine (its missing folders are created); an existing one
    must be a rows file, and is only ever appended to. Rows made with other
    methods, time limit or seed are refused unless ``allow_mixed``; rows of
    these settings unless ``resume`` (running again would add them a second
    time).

    Raises
    ------
    InputError
        If the path is a folder, cannot be written, is not a rows file, holds
        rows of these settings and ``resume`` is not set, or rows of other
        settings and ``allow_mixed`` is not set.
    """
    path = Path(path)
    check_writable(path)
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror})") from None
        return []
    records = read_records(path)
    other = next((r for r in records if r.settings() != settings), None)
    if other is not None and not allow_mixed:
        methods, limit, seed, params, bound_set = other.settings()
        changed = "" if params == "{}" else f", parameters {params}"
        raise InputError(
            str(path),
            f"holds rows made with other settings (methods {','.join(methods) or '?'}, time limit {limit:g} s, "
            f"seed {seed}, bounds {bound_set}{changed}); use another --out file, or --allow-mixed to add to it anyway",
        )
    same = sum(1 for r in records if r.settings() == settings)
    if same and not resume:  # running again would add the same rows a second time
        raise InputError(
            str(path),
            f"holds {counted(same, 'row')} of these settings already: use --resume to add to it (the instances "
            "in it are skipped), or another --out file",
        )
    _end_with_newline(path)  # only once the file is taken: a refused run leaves it as it was
    return records


def _end_with_newline(path: Path) -> None:
    """A rows file whose last row has no newline (written by hand, or cut by an editor) gets one,
    so that the next row appended starts a line of its own; a last line cut short (an interrupted
    write, which :func:`read_records` dropped) is cut off.
    """
    data = read_bytes(path)
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
        cut = False
    except ValueError:
        cut = True
    try:
        with open(path, "rb+") as handle:
            if cut:
                handle.truncate(start)
            else:
                handle.seek(0, os.SEEK_END)
                handle.write(b"\n")
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None


@contextlib.contextmanager
def rows_lock(path: str | Path) -> Iterator[None]:
    """Hold the rows file at ``path`` for one run (an exclusive lock on the file itself, which is
    made if missing and removed again if the run adds nothing to it).

    Raises
    ------
    InputError
        If another run holds it (two runs would mix their rows), or it cannot be opened.
    """
    import fcntl

    path = Path(path)
    made = not path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "ab")  # noqa: SIM115  # held open for the run: the lock lives as long as it
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(
                str(path), "is being written by another bench run: wait for it, or give another --out"
            ) from None
        yield
    finally:
        if made:
            with contextlib.suppress(OSError):
                if path.stat().st_size == 0:  # this run made it and added nothing: as if it never ran
                    path.unlink()
        handle.close()


def append_record(path: str | Path, record: Record) -> None:
    """Append one record as a line, written through at once.

    Raises
    ------
    InputError
        If the line cannot be written whole (a full disk): the file is cut
        back to the rows it held, so that it never ends in part of a row.
    """
    line = (record.to_json() + "\n").encode("utf-8")
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    try:
        size = os.fstat(descriptor).st_size
        written = 0
        try:
            while written < len(line):  # a write may land in part
                written += os.write(descriptor, line[written:])
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, size)
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    finally:
        os.close(descriptor)


def write_csv(path: str | Path, records: Iterable[Record], methods: Sequence[str]) -> None:
    """The records as CSV, one row per instance."""
    header = ["instance", "path", "dims", "npus", "chunks", "lower_bound_ns", "ideal_ns"]
    for m in methods:
        header += [
            f"{m}_status",
            f"{m}_makespan_ns",
            f"{m}_gap",
            f"{m}_speedup",
            f"{m}_bw_util",
            f"{m}_runtime_s",
            f"{m}_valid",
        ]
    with atomic_writer(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for r in records:
            row: list[Any] = [r.instance, r.path, r.dims, r.npus, r.chunks, r.lower_bound_ns, r.ideal_ns]
            for m in methods:
                o = r.outcome(m)
                row += (
                    [o.status, o.makespan_ns, r.gap(m), r.speedup(m), o.bandwidth_utilization, o.runtime_s, o.valid]
                    if o
                    else [""] * 7
                )
            writer.writerow(row)
