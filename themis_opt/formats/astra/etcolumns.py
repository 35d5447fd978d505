"""Chakra traces written and read as columns: a million nodes in seconds.

:mod:`~themis_opt.formats.astra.etfiles` handles nodes one protobuf object at a time, which takes
tens of seconds for a program's million nodes. Here a trace is encoded from numpy columns in one
pass (every field of a node is a varint, a length or an ASCII byte, so the whole file is one array
of varints), and read by handing the file to protobuf's C parser as one message of repeated nodes
(the file's frames are that message's fields without their one-byte keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from themis_opt.errors import InputError
from themis_opt.formats.astra.etfiles import _chakra, messages

NODE_TYPES = {"COMP_NODE": 4, "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7}  # Chakra's NodeType
_ID, _TYPE, _DATA_DEPS, _ATTR = 0x08, 0x18, 0x2A, 0x52  # field keys: id 1, type 3, data_deps 5 (packed), attr 10
_NAME, _INT64, _INT64_LIST, _VALUES = 0x0A, 0x48, 0x52, 0x0A  # AttributeProto name 1, int64_val 9, int64_list 10


@dataclass(frozen=True)
class Columns:
    """Nodes as columns.

    Parameters
    ----------
    type
        Each node's Chakra type number (:data:`NODE_TYPES`).
    dep_start, deps
        Node ``i`` waits for nodes ``deps[dep_start[i]:dep_start[i + 1]]`` (their ids, which are
        their positions in the file).
    attrs
        Integer attributes: name -> one value a node, ``-1`` where a node has none.
    lists
        Integer-list attributes: name -> one row a node (all of one length), ``-1`` rows where a node has none.
    durations
        Each node's ``duration_micros``.
    """

    type: np.ndarray
    dep_start: np.ndarray
    deps: np.ndarray
    attrs: dict[str, np.ndarray]
    lists: dict[str, np.ndarray]
    durations: np.ndarray


def _vlen(values: np.ndarray) -> np.ndarray:
    """Bytes of each value as a varint (most of a trace's take one or two: the rest are looked at again)."""
    values = values.astype(np.uint64)
    size: np.ndarray = 1 + (values >= 128).astype(np.int64)
    longer = np.flatnonzero(values >= 1 << 14)
    for k in range(2, 10):
        if not len(longer):
            break
        size[longer] += 1
        longer = longer[values[longer] >= np.uint64(1 << (7 * (k + 1)))] if k < 9 else longer[:0]
    return size


def _varints(values: np.ndarray) -> bytes:
    """The values (non-negative) as consecutive varints."""
    values = values.astype(np.uint64)
    size = _vlen(values)
    start = np.cumsum(size) - size
    out = np.empty(int(size.sum()), dtype=np.uint8)
    # byte 0 of every value, then byte k of those longer than k (few): no per-byte index arrays
    out[start] = (values & np.uint64(0x7F)).astype(np.uint8) | ((size > 1).astype(np.uint8) << 7)
    longer = np.flatnonzero(size > 1)
    for k in range(1, int(size.max(initial=1))):
        longer = longer[size[longer] > k]
        part = (values[longer] >> np.uint64(7 * k)) & np.uint64(0x7F)
        out[start[longer] + k] = part.astype(np.uint8) | ((size[longer] > k + 1).astype(np.uint8) << 7)
    encoded: bytes = out.tobytes()
    return encoded


def encode_trace(columns: Columns) -> bytes:
    """A trace file's bytes: the global metadata, then the nodes of ``columns`` (ids 0, 1, ...).

    Attributes are written as ``int64_val`` (lists as ``int64_list``) for the nodes whose value is
    not ``-1``.
    """
    schema, _ = _chakra()
    n = len(columns.type)
    ids = np.arange(n, dtype=np.int64)
    ndeps = np.diff(columns.dep_start)
    dep_bytes = np.zeros(n, dtype=np.int64)
    if len(columns.deps):
        np.add.at(dep_bytes, np.repeat(ids, ndeps), _vlen(columns.deps))
    # each node: a list of pieces, every piece one int written as a varint (keys, lengths, ASCII
    # bytes and values alike), so the node's ints can be laid out first and encoded at once
    pieces: list[tuple[np.ndarray, np.ndarray]] = []  # (nodes that have it, ints per node: 2-D)
    body = 1 + _vlen(ids) + 1 + _vlen(columns.type.astype(np.int64))
    has_deps = ndeps > 0
    body += np.where(has_deps, 1 + _vlen(dep_bytes) + dep_bytes, 0)
    has_duration = columns.durations > 0
    body += np.where(has_duration, 1 + _vlen(columns.durations), 0)
    for name, values in columns.attrs.items():
        key = name.encode()
        has = values >= 0
        inner = 2 + len(key) + 1 + _vlen(np.maximum(values, 0))
        body += np.where(has, 1 + _vlen(inner) + inner, 0)
        head = np.array([_ATTR, 0, _NAME, len(key), *key, _INT64, 0], dtype=np.int64)
        rows = np.tile(head, (n, 1))
        rows[:, 1], rows[:, -1] = inner, np.maximum(values, 0)
        pieces.append((has, rows))
    for name, table in columns.lists.items():
        key = name.encode()
        has = table[:, 0] >= 0
        clean = np.maximum(table, 0)
        packed = np.zeros(n, dtype=np.int64)
        for j in range(table.shape[1]):
            packed += _vlen(clean[:, j])
        listed = 1 + _vlen(packed) + packed
        inner = 2 + len(key) + 1 + _vlen(listed) + listed
        body += np.where(has, 1 + _vlen(inner) + inner, 0)
        head = np.array([_ATTR, 0, _NAME, len(key), *key, _INT64_LIST, 0, _VALUES, 0], dtype=np.int64)
        rows = np.concatenate([np.tile(head, (n, 1)), clean], axis=1)
        rows[:, 1], rows[:, len(head) - 3], rows[:, len(head) - 1] = inner, listed, packed
        pieces.append((has, rows))
    count = 5 + np.where(has_deps, 2 + ndeps, 0) + np.where(has_duration, 2, 0)
    for has, rows in pieces:
        count += np.where(has, rows.shape[1], 0)
    start = np.cumsum(count) - count
    out = np.zeros(int(count.sum()), dtype=np.int64)
    for j, column in enumerate((body, np.full(n, _ID), ids, np.full(n, _TYPE), columns.type)):
        out[start + j] = column
    at = start + 5
    deps_at = at[has_deps]
    out[deps_at] = _DATA_DEPS
    out[deps_at + 1] = dep_bytes[has_deps]
    if len(columns.deps):
        out[np.repeat(at + 2, ndeps) + _ranges(ndeps)] = columns.deps
    at = at + np.where(has_deps, 2 + ndeps, 0)
    out[at[has_duration]] = 0x38  # duration_micros: field 7
    out[at[has_duration] + 1] = columns.durations[has_duration]
    at = at + np.where(has_duration, 2, 0)
    for has, rows in pieces:
        width = rows.shape[1]
        where = at[has]
        out[(where[:, None] + np.arange(width)[None, :]).ravel()] = rows[has].ravel()
        at = at + np.where(has, width, 0)
    metadata = schema.GlobalMetadata(version="0.0.4").SerializeToString()
    metadata_bytes: bytes = metadata
    return _varints(np.array([len(metadata_bytes)])) + metadata_bytes + _varints(out)


def _ranges(counts: np.ndarray) -> np.ndarray:
    """``0..c-1`` for each ``c`` of ``counts``, concatenated."""
    within: np.ndarray = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return within


@cache
def _node_list() -> Any:
    """A message type of repeated Chakra nodes (field 1), made at run time in the schema's pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    schema, _ = _chakra()
    pool = descriptor_pool.Default()
    name = "themis_opt_node_list.proto"
    try:
        pool.FindFileByName(name)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto(name=name, package="themis_opt", dependency=[schema.DESCRIPTOR.name])
        message = proto.message_type.add(name="NodeList")
        message.field.add(
            name="nodes",
            number=1,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=f".{schema.DESCRIPTOR.package}.Node",
        )
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("themis_opt.NodeList"))


def read_nodes(path: Path, data: bytes) -> Sequence[Any]:
    """The nodes of a trace's bytes (the metadata skipped), parsed by protobuf at once.

    Raises
    ------
    InputError
        Naming the file, if its bytes are not whole messages or a node does not parse.
    """
    from google.protobuf.message import DecodeError

    where = str(path)
    frames = list(messages(data, where))
    if not frames:
        raise InputError(where, "is empty: not a Chakra trace")
    pieces = []
    for (start, _), nxt in zip(frames[1:], [*(f[0] for f in frames[2:]), len(data)]):
        pieces.append(b"\n")
        pieces.append(data[start:nxt])
    try:
        listed = _node_list()()
        listed.ParseFromString(b"".join(pieces))
    except DecodeError as error:
        raise InputError(where, f"not a Chakra trace: {error}") from None
    return listed.nodes  # type: ignore[no-any-return]


def _decode_varints(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Every varint of ``data`` read one after another: their values and the byte each starts at."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw < 0x80)
    if not len(ends) or ends[-1] != len(raw) - 1:
        raise ValueError("not a sequence of varints")
    starts = np.r_[0, ends[:-1] + 1]
    lengths = ends - starts + 1
    if lengths.max() > 9:
        raise ValueError("a varint of over 63 bits")
    values = (raw[starts] & 0x7F).astype(np.int64)
    longer = np.flatnonzero(lengths > 1)
    for j in range(1, int(lengths.max())):
        longer = longer[lengths[longer] > j]
        values[longer] |= (raw[starts[longer] + j].astype(np.int64) & 0x7F) << (7 * j)
    return values, starts


def decode_trace(data: bytes, where: str, attrs: Sequence[str], lists: dict[str, int]) -> Columns | None:
    """The nodes of a trace as columns, read at once, if the file is written as :func:`encode_trace`
    writes one (every field a varint); ``None`` otherwise (read it node by node then).

    Only ``attrs`` (integers) and ``lists`` (name -> width) are read; the caller checks the result
    by encoding it again and comparing the bytes, which proves the read right.
    """
    frames = [start for start, _ in messages(data, where)]
    if len(frames) < 2:
        return None
    try:
        ints, at_byte = _decode_varints(data)
    except ValueError:
        return None
    node = np.searchsorted(at_byte, frames[1:])
    if np.any(at_byte[node] != frames[1:]):
        return None
    n, total = len(node), len(ints)
    stop = np.r_[node[1:], total]
    padded = np.r_[ints, np.full(64, -1)]  # reads past a node's end see -1, never a key
    if np.any(padded[node + 1] != _ID) or np.any(padded[node + 3] != _TYPE):
        return None
    kinds = padded[node + 4]
    p = node + 5
    has_deps = (padded[p] == _DATA_DEPS) & (p < stop)
    dep_first = p + 2
    dep_end_byte = np.where(has_deps, at_byte[np.minimum(dep_first, total - 1)] + padded[p + 1], 0)
    dep_stop = np.where(has_deps, np.searchsorted(at_byte, dep_end_byte), dep_first)
    ndeps = np.where(has_deps, dep_stop - dep_first, 0)
    deps = padded[np.repeat(dep_first, ndeps) + _ranges(ndeps)]
    p = np.where(has_deps, dep_stop, p)
    has_duration = (padded[p] == 0x38) & (p < stop)
    durations = np.where(has_duration, padded[p + 1], 0)
    p = np.where(has_duration, p + 2, p)
    found = {name: np.full(n, -1, dtype=np.int64) for name in attrs}
    listed = {name: np.full((n, width), -1, dtype=np.int64) for name, width in lists.items()}
    for _ in range(len(attrs) + len(lists)):
        live = (padded[p] == _ATTR) & (p < stop)
        if not np.any(live):
            break
        size = padded[p + 3]
        for name in (*attrs, *lists):
            key = name.encode()
            match = live & (padded[p + 2] == _NAME) & (size == len(key))
            for j, byte in enumerate(key):
                match &= padded[p + 4 + j] == byte
            value_at = p + 4 + len(key)
            if name in found:
                ok = match & (padded[value_at] == _INT64)
                found[name][ok] = padded[value_at + 1][ok]
            else:
                width = lists[name]
                ok = match & (padded[value_at] == _INT64_LIST) & (padded[value_at + 2] == _VALUES)
                rows = value_at[ok][:, None] + 4 + np.arange(width)[None, :]
                listed[name][ok] = padded[rows]
        end_byte = at_byte[np.minimum(p + 1, total - 1)] + _vlen(np.maximum(padded[p + 1], 0)) + padded[p + 1]
        p = np.where(live, np.searchsorted(at_byte, end_byte), p)
    if np.any(p != stop):
        return None
    return Columns(kinds, np.r_[0, np.cumsum(ndeps)], deps, found, listed, durations)
