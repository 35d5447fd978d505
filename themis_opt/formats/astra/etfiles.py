"""Chakra execution-trace files: their nodes read and written, framed as ASTRA-sim 2.x frames them.

A trace file is a sequence of length-delimited protobuf messages (the global metadata, then one
node a message); :func:`read_trace` reads one to its last byte and :func:`write_trace` writes one.
What the nodes mean to ASTRA-sim 2.x, and the instance they make, is :mod:`themis_opt.formats.astra.chakra`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError
from themis_opt.fileio import atomic_writer

INSTALL_HINT = 'Chakra traces need the chakra extra: pip install -e ".[chakra]" (or pip install mlc-chakra)'


@dataclass(frozen=True)
class TraceNode:
    """One node of a trace, as read.

    Parameters
    ----------
    id
        The node's id in its file.
    name
        Its name (a label only).
    type
        Its node type's name: ``COMP_NODE``, ``COMM_COLL_NODE``...
    data_deps, ctrl_deps
        The ids of the nodes it waits for.
    duration_micros
        The trace's duration field (ASTRA-sim reads it as nanoseconds x 1000).
    attrs
        Its attributes by name, each value as the trace holds it.
    """

    id: int
    name: str
    type: str
    data_deps: tuple[int, ...]
    ctrl_deps: tuple[int, ...]
    duration_micros: int
    attrs: tuple[tuple[str, Any], ...]

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute ``name``, or ``default``."""
        return next((value for key, value in self.attrs if key == name), default)


def _chakra() -> tuple[Any, Any]:
    """mlc-chakra's schema and its file helpers, or the install hint as an input error."""
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError:
        raise InputError("workload", INSTALL_HINT) from None
    return et_def_pb2, protolib


def attr_value(attr: Any) -> Any:
    """An attribute's value, whichever field of its ``oneof`` holds it (lists as tuples)."""
    field = attr.WhichOneof("value")
    if field is None:
        return None
    value = getattr(attr, field)
    if field.endswith("_list"):
        return tuple(value.values)
    return value


VARINT_BYTES = 5  # ASTRA-sim 2.x reads a length prefix of at most 5 bytes (a 32-bit varint)


def messages(data: bytes, where: str) -> Iterator[tuple[int, bytes]]:
    """Each length-delimited message of a trace's bytes, with the byte it starts at, read as ASTRA-sim
    2.x's ``ProtobufUtils::readMessage`` reads them, to the last byte.

    Raises
    ------
    InputError
        Naming the byte, where the bytes are not whole messages: a length prefix longer than
        2.x reads (it stops there, dropping the rest), a message cut short by the end of the file
        (2.x parses what it has), or bytes after the last message that are not one.
    """
    pos, end = 0, len(data)
    while pos < end:
        start, size, shift = pos, 0, 0
        while True:
            if pos == end:
                raise InputError(where, f"not a Chakra trace: it ends inside the length prefix at byte {start}")
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if pos - start == VARINT_BYTES:
                problem = f"a length prefix over {VARINT_BYTES} bytes at byte {start} (2.x stops reading there)"
                raise InputError(where, f"not a Chakra trace: {problem}")
        if size > end - pos:
            problem = f"the message at byte {start} is cut short ({size} bytes announced, {end - pos} left)"
            raise InputError(where, f"not a Chakra trace: {problem}")
        yield start, data[pos : pos + size]
        pos += size


def read_trace(path: Path) -> list[TraceNode]:
    """The nodes of one trace file, in file order (the whole file: see :func:`messages`).

    Raises
    ------
    InputError
        Naming the file and the byte, if it is not a Chakra trace as ASTRA-sim 2.x reads one (a
        gzipped one among them: 2.x reads the file's bytes as they are).
    """
    from google.protobuf.message import DecodeError

    from themis_opt.fileio import read_bytes

    schema, _ = _chakra()
    where = str(path)
    data = read_bytes(path)  # at most the input limit
    if data[:2] == b"\x1f\x8b":
        raise InputError(where, "is gzipped: ASTRA-sim 2.x reads a trace's bytes as they are (gunzip it)")
    nodes: list[TraceNode] = []
    found = messages(data, where)
    at = 0  # the byte the message being parsed starts at
    try:
        first = next(found, None)
        if first is None:
            raise InputError(where, "is empty: not a Chakra trace")
        schema.GlobalMetadata().ParseFromString(first[1])
        for position, body in found:
            at = position
            node = schema.Node()
            node.ParseFromString(body)
            nodes.append(
                TraceNode(
                    node.id,
                    node.name,
                    schema.NodeType.Name(node.type),
                    tuple(node.data_deps),
                    tuple(node.ctrl_deps),
                    node.duration_micros,
                    tuple((a.name, attr_value(a)) for a in node.attr),
                )
            )
    except InputError:
        raise
    except DecodeError as error:
        raise InputError(where, f"not a Chakra trace (the message at byte {at}): {error}") from None
    except ValueError as error:  # an enum value the schema does not know
        raise InputError(where, f"not a Chakra trace: {error}") from None
    return nodes


def write_trace(path: Path, nodes: Sequence[TraceNode]) -> None:
    """Write ``nodes`` as one trace file (attributes as int64, bool, string or bool lists, as ASTRA-sim reads them)."""
    schema, protolib = _chakra()
    with atomic_writer(path, "wb") as handle:
        protolib.encodeMessage(handle, schema.GlobalMetadata(version="0.0.4"))
        for node in nodes:
            message = schema.Node(
                id=node.id,
                name=node.name,
                type=schema.NodeType.Value(node.type),
                duration_micros=node.duration_micros,
            )
            message.data_deps.extend(node.data_deps)
            message.ctrl_deps.extend(node.ctrl_deps)
            for name, value in node.attrs:
                attr = schema.AttributeProto(name=name)
                if isinstance(value, bool):
                    attr.bool_val = value
                elif isinstance(value, str):
                    attr.string_val = value
                elif isinstance(value, tuple):
                    attr.bool_list.values.extend(bool(v) for v in value)
                else:
                    attr.int64_val = int(value)
                message.attr.append(attr)
            protolib.encodeMessage(handle, message)
