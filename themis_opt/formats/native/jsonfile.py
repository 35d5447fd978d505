"""Strict JSON documents: parsing and reading them, checking their fields, writing them.

The parser refuses NaN, Infinity and duplicate keys; the field checks refuse
unknown, missing and mistyped fields, naming the field path; the writer
writes indented JSON atomically.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from themis_opt.budget import gc_paused
from themis_opt.errors import InputError, too_many_digits
from themis_opt.fileio import read_text, write_text

T = TypeVar("T")

VERSION = 2
VERSIONS = (1, 2)  # what the readers accept; writers write VERSION


# ---------------------------------------------------------------- reading


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) < len(pairs):  # a key stands twice: name the first
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise InputError(key, "appears twice in one object")
            seen.add(key)
    return data


def _no_constant(name: str) -> Any:
    raise InputError("", f"{name} is not a number JSON allows")


def parse_json(text: str) -> Any:
    """Parse JSON text strictly (no NaN or Infinity, no duplicate keys)."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        what = error.msg.removesuffix(" at")  # json's "Unterminated string starting at"
        raise InputError("", f"not valid JSON: {what} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise InputError("", "not valid JSON: nested too deeply") from None
    except InputError:
        raise
    except ValueError as error:  # an integer of more digits than Python converts
        raise InputError("", f"not valid JSON: {too_many_digits(error)}") from None


def read_json(path: str | Path) -> Any:
    """Read and parse a JSON file; errors name the file."""
    path = Path(path)
    text = read_text(path)  # at most the input limit: an endless file is refused, not read until memory runs out
    try:
        return parse_json(text)
    except InputError as error:
        raise in_file(error, path) from None


def in_file(error: InputError, path: str | Path) -> InputError:
    """``error`` located in file ``path``: ``FILE: field.path``."""
    return InputError(f"{path}: {error.path}" if error.path else str(path), error.problem)


def _read(path: str | Path, build: Callable[[Any], T]) -> T:
    """Parse the JSON file at ``path`` with ``build``; errors name the file. The cyclic garbage
    collector waits meanwhile: a file of a million phases makes millions of objects and no cycle,
    and its passes over them took a third of the reading.
    """
    with gc_paused():
        data = read_json(path)
        try:
            return build(data)
        except InputError as error:
            raise in_file(error, path) from None


def _object(value: Any, path: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(path, f"must be an object, got {_kind(value)}")
    for key in value:
        if key not in required and key not in optional:
            allowed = ", ".join(sorted(required | optional))
            raise InputError(_join(path, key), f"unknown field (allowed: {allowed})")
    for key in sorted(required):
        if key not in value:
            raise InputError(_join(path, key), "missing required field")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(path, f"must be a list, got {_kind(value)}")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "an object", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _build(path: str, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """Construct a data class, locating its own validation errors at ``path``."""
    try:
        return factory(*args, **kwargs)
    except InputError as error:
        raise error.within(path) from None


def _header(data: Any, fmt: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if isinstance(data, dict) and "format" in data and data["format"] != fmt:
        raise InputError("format", f"must be {fmt!r}, got {data['format']!r}")
    if isinstance(data, dict) and "version" in data and (data["version"] not in VERSIONS or _is_bool(data["version"])):
        raise InputError("version", f"must be 1 or 2, got {data['version']!r}")
    data = _object(data, "", required | {"format", "version"}, optional)
    header: dict[str, Any] = data
    return header


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


# ---------------------------------------------------------------- writing


def _num(value: float) -> int | float:
    """Integral floats as ints, so files stay as people write them."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


ONE_A_LINE = 8  # a list of more objects than this is written one object a line (a schedule's chunks)


class Lines(tuple[str, ...]):
    """A list of JSON texts that :func:`write_json` writes one a line, each as it stands (a
    schedule's chunks, rendered from columns without building their dicts).
    """


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically, creating parent folders; errors name the file.

    A long list of objects (a schedule's chunks) has one object a line: the
    standard library's C encoder writes those, five times faster than its
    indenting Python one on a schedule of 40,000 phases.
    """
    write_text(path, _indented(data) + "\n")  # atomic: a failed write leaves the earlier file whole


def _indented(value: Any, depth: int = 0) -> str:
    """``json.dumps(value, indent=2)``, but a list of more than :data:`ONE_A_LINE` objects gets one
    object a line (and :class:`Lines` its texts).
    """
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, Lines):
        return f"[\n{inner}" + f",\n{inner}".join(value) + f"\n{pad}]" if value else "[]"
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(k))}: {_indented(v, depth + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        if len(value) > ONE_A_LINE and all(isinstance(v, dict) for v in value):
            return _indented(Lines(map(json.dumps, value)), depth)
        if any(isinstance(v, (dict, list)) for v in value):
            return "[\n" + ",\n".join(inner + _indented(v, depth + 1) for v in value) + f"\n{pad}]"
    return json.dumps(value, indent=2 if isinstance(value, (dict, list)) else None)
