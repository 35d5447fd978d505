"""Reading ASTRA-sim's files: text, JSON, sizes and the names both versions share."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError, counted
from themis_opt.instance import Kind, Topology

TOPOLOGIES = {"Ring": Topology.RING, "FullyConnected": Topology.FULLY_CONNECTED, "Switch": Topology.SWITCH}
# the system file's implementation keys, per kind of collective
IMPLEMENTATION_KEYS = {
    Kind.ALL_REDUCE: "all-reduce-implementation",
    Kind.REDUCE_SCATTER: "reduce-scatter-implementation",
    Kind.ALL_GATHER: "all-gather-implementation",
    Kind.ALL_TO_ALL: "all-to-all-implementation",
}
WORKLOAD_TYPES = {
    Kind.ALL_REDUCE: "ALLREDUCE",
    Kind.REDUCE_SCATTER: "REDUCESCATTER",
    Kind.ALL_GATHER: "ALLGATHER",
    Kind.ALL_TO_ALL: "ALLTOALL",
}
_UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text: str, option: str = "all_reduce_bytes") -> int:
    """Bytes from ``64MiB``, ``1GiB`` (binary units, 2^20 and 2^30), ``1GB`` (decimal, 10^9) or ``1073741824``."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2) not in _UNITS:
        raise InputError(option, f"must be a size like 64MiB, 1GiB or 1073741824, got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if value != int(value) or value < 1:
        raise InputError(option, f"must be a whole number of bytes >= 1, got {text!r}")
    return int(value)


def read_text(path: Path) -> str:
    """The text of ``path``, at most the input limit; errors name it."""
    from themis_opt import fileio

    return fileio.read_text(path)


def json_object(text: str, path: Path) -> dict[str, Any]:
    """The JSON object in ``text``; errors name ``path``."""
    from themis_opt.formats.native import parse_json

    try:
        raw = parse_json(text)
    except InputError as error:
        raise InputError(str(path), error.problem) from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "must be a JSON object")
    return raw


def numbers(raw: dict[str, Any], key: str, where: Path, count: int | None, *, integer: bool = False) -> list[Any]:
    """The list of numbers at ``key``, one per dimension when ``count`` is given."""
    if key not in raw:
        raise InputError(f"{where}: {key}", "missing")
    values = raw[key]
    if not isinstance(values, list):
        raise InputError(f"{where}: {key}", f"must be a list, got {values!r}")
    if count is not None and len(values) != count:
        raise InputError(
            f"{where}: {key}",
            f"has {counted(len(values), 'entry', 'entries')}, the network has {counted(count, 'dimension')}",
        )
    for value in values:
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok or not math.isfinite(value) or value < 0:
            kind = "an integer" if integer else "a number"
            raise InputError(f"{where}: {key}", f"must hold {kind} >= 0 per dimension, got {value!r}")
    return values


def topologies(raw: dict[str, Any], key: str, where: Path) -> list[Topology]:
    """The list of topology names at ``key``."""
    names = raw.get(key)
    if not isinstance(names, list) or not names:
        raise InputError(f"{where}: {key}", f"must be a non-empty list of Ring, FullyConnected, Switch, got {names!r}")
    for name in names:
        if not isinstance(name, str) or name not in TOPOLOGIES:  # a list is no name (nor hashable)
            raise InputError(f"{where}: {key}", f"unknown topology {name!r} (known: Ring, FullyConnected, Switch)")
    return [TOPOLOGIES[n] for n in names]


def unknown_keys(raw: dict[str, Any], known: set[str], where: Path, ignore: bool) -> list[str]:
    """The keys of ``raw`` outside ``known``: an error unless ``ignore`` (then a note)."""
    extra = sorted(set(raw) - known)
    if extra and not ignore:
        raise InputError(
            f"{where}: {extra[0]}", "unknown key (ASTRA-sim reads none such; --ignore-unknown skips unknown keys)"
        )
    return [f"{where.name}: unknown key {key!r} ignored" for key in extra]
