"""ASTRA-sim 2.x's communicator groups: the file ``--comm-group-configuration`` reads, and where a group sits.

The file is a JSON object ``{"id": [ranks], ...}``: each id (a positive
integer, as text) names a group of NPUs, in the order its ring visits them.
A collective node names its group in ``pg_name``; ``""`` or ``"0"`` is every
NPU. A group of every NPU runs the network's own multi-dimensional plan; a
smaller one, one ring over its NPUs (:mod:`themis_opt.cost`).

An instance is one NPU's view of a symmetric system, so where NPUs run the
same graph in different groups, each NPU's group must be a translate of
NPU 0's: the same ring, moved by some shift in every dimension, so the same
links (a data- or tensor-parallel group of a ``dp x tp`` layout is).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError, counted
from themis_opt.formats.astra.files import json_object, read_text
from themis_opt.instance import Network

Groups = dict[str, tuple[int, ...]]  # a group's id (as pg_name gives it) -> its NPUs in ring order


def read_comm_groups(path: str | Path, npus: int) -> Groups:
    """The groups of a 2.x communicator-group file, on a network of ``npus`` NPUs.

    Raises
    ------
    InputError
        Naming the file and group of the first thing ASTRA-sim 2.x would abort on, or that
        themis_opt cannot model (a group of one NPU never finishes).
    """
    path = Path(path)
    raw: dict[str, Any] = json_object(read_text(path), path)
    groups: Groups = {}
    for key, members in raw.items():
        where = f"{path}: group {key!r}"
        number = stoi(key, where)
        if number <= 0:
            raise InputError(where, "the id must be at least 1: 0 is every NPU (ASTRA-sim 2.x asserts)")
        if str(number) in groups:
            raise InputError(where, f"id {number} is given twice (2.x reads {key!r} as {number})")
        if not isinstance(members, list) or not all(isinstance(m, int) and not isinstance(m, bool) for m in members):
            raise InputError(where, f"must be a list of NPU numbers, got {str(members)[:60]}")
        if not members:
            raise InputError(where, "names no NPU: a collective in it has nobody to run on")
        outside = [m for m in members if not 0 <= m < npus]
        if outside:
            raise InputError(where, f"names NPU {outside[0]}, but the network has {counted(npus, 'NPU')}")
        if len(set(members)) != len(members):
            raise InputError(where, "names an NPU twice")
        groups[str(number)] = tuple(members)
    return groups


def stoi(text: str, where: str) -> int:
    """``text`` as ASTRA-sim 2.x's ``std::stoi`` reads a group id: leading white space, a sign and the
    digits up to the first other character (``"1_0"`` is 1, ``"01"`` is 1).

    Raises
    ------
    InputError
        Where ``stoi`` throws (2.x aborts): no digits, or a value outside a 32-bit ``int``.
    """
    found = _STOI.match(text)
    if found is None:
        raise InputError(where, f"the id must start with a whole number, got {text!r} (ASTRA-sim 2.x aborts: stoi)")
    value = int(found.group(1))
    if not -(2**31) <= value < 2**31:
        raise InputError(where, f"the id {found.group(1)} is beyond a 32-bit int (ASTRA-sim 2.x aborts: stoi)")
    return value


_STOI = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")  # std::stoi: white space, a sign, decimal digits


def offset(network: Network, a: int, b: int) -> tuple[int, ...]:
    """How far NPU ``b`` sits from NPU ``a`` in every dimension (cyclically)."""
    return tuple(
        (y - x) % d.size for x, y, d in zip(network.coordinates(a), network.coordinates(b), network.dimensions)
    )


def move(network: Network, npus: tuple[int, ...], by: tuple[int, ...]) -> tuple[int, ...]:
    """``npus`` moved by ``by`` positions in every dimension (cyclically)."""
    sizes = [d.size for d in network.dimensions]
    moved = []
    for npu in npus:
        rank, stride = 0, 1
        for at, step, size in zip(network.coordinates(npu), by, sizes):
            rank += ((at + step) % size) * stride
            stride *= size
        moved.append(rank)
    return tuple(moved)


def same_ring_moved(network: Network, a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether ring ``a`` is ring ``b`` moved by some shift in every dimension: the same links, so the
    same time (a data-parallel pair [0, 1] is NPU 1's group as much as NPU 0's).
    """
    if len(a) != len(b) or not a:
        return False
    return any(same_ring(a, move(network, b, offset(network, b[0], member))) for member in a)


def same_ring(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether ``a`` and ``b`` are one ring: the same NPUs in the same cyclic order."""
    if len(a) != len(b) or set(a) != set(b):
        return False
    start = b.index(a[0])
    return a == b[start:] + b[:start]


def aligned_dims(network: Network, group: tuple[int, ...]) -> tuple[int, ...] | None:
    """The dimensions ``group`` spans whole, when it is exactly the NPUs that differ from its first in
    those dimensions alone (every combination of them); ``None`` otherwise.
    """
    places = [network.coordinates(m) for m in group]
    varying = tuple(d for d in range(network.num_dims) if len({p[d] for p in places}) > 1)
    if any(len({p[d] for p in places}) != network.dimensions[d].size for d in varying):
        return None
    expected = 1
    for d in varying:
        expected *= network.dimensions[d].size
    fixed = {d: places[0][d] for d in range(network.num_dims) if d not in varying}
    if len(group) != expected or any(p[d] != v for p in places for d, v in fixed.items()):
        return None
    return varying


def tile_group(network: Network, group: tuple[int, ...], npus: tuple[int, ...]) -> list[tuple[int, ...]]:
    """``group`` and its moves that split ``npus`` into groups, each in ring order (``group`` first),
    found NPU by NPU as 2.x's traces name them.

    Raises
    ------
    ValueError
        With the NPU (``args[0]``) to which no move of ``group`` fits among the NPUs not yet named.
    """
    inside = set(npus)
    tiles = [group]
    named = set(group)
    for npu in npus:
        if npu in named:
            continue
        moved = (move(network, group, offset(network, first, npu)) for first in group)
        tile = next((m for m in moved if all(x in inside and x not in named for x in m)), None)
        if tile is None:
            raise ValueError(npu)
        tiles.append(tile)
        named.update(tile)
    return tiles
