"""The tasks of an instance: collectives, compute tasks, their dependencies and chunk classes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from themis_opt.errors import InputError
from themis_opt.instance.checks import (
    MAX_DIMENSIONS,
    MAX_NPUS,
    MAX_PHASES,
    MAX_SIZE_BYTES,
    MAX_STAGES,
    MAX_TIME_NS,
    check_enum,
    check_int,
    check_name,
    check_number,
)


class Kind(StrEnum):
    """Kind of collective communication."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    SEND = "send"


COLLECTIVE_KINDS = tuple(kind for kind in Kind if kind is not Kind.SEND)  # the kinds that run an algorithm


@dataclass(frozen=True)
class After:
    """A dependency: the task waits until ``task`` has ended, plus ``lag_ns``.

    Parameters
    ----------
    task
        The id of the task waited for. A collective ends when its last
        chunk's last phase ends; a compute task when its duration is over.
    lag_ns
        Extra wait after that end (>= 0), e.g. a weight update.
    """

    task: str
    lag_ns: float = 0.0

    def __post_init__(self) -> None:
        check_name("task", self.task)
        object.__setattr__(self, "lag_ns", check_number("lag_ns", self.lag_ns, maximum=MAX_TIME_NS))


def _check_after(after: Any) -> tuple[After, ...]:
    if not isinstance(after, (tuple, list)):
        raise InputError("after", f"must be a list of dependencies, got {after!r}")
    if not all(issubclass(kind, After) for kind in set(map(type, after))):  # one look per type: a million in ms
        index, dep = next((k, dep) for k, dep in enumerate(after) if not isinstance(dep, After))
        raise InputError(f"after[{index}]", f"must be an After, got {dep!r}")
    return tuple(after)


@dataclass(frozen=True)
class Collective:
    """One collective communication, split into chunks.

    Parameters
    ----------
    kind
        ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``,
        or ``send``: one point-to-point message of ``size_bytes`` from
        ``group[0]`` to ``group[1]`` (one chunk, one phase on the lowest
        dimension in which the two NPUs differ; see :func:`themis_opt.cost.send_ns`).
    size_bytes
        The full per-NPU vector in bytes (AR input and output, RS input,
        AG output).
    chunks
        Number of chunks; each is ``chunk_bytes`` but the last, which takes
        what is left.
    issue_ns
        Time the collective is issued; no phase starts earlier.
    dimensions
        Indices of the dimensions it runs over; ``None`` means all.
    id
        The task's id in a task graph; ``""`` lets the instance call it
        ``c<index>``.
    priority
        Which collective's waiting phase a dimension serves first (higher
        first; see the simulator).
    after
        The tasks it waits for; its release is the latest of ``issue_ns``
        and each dependency's end plus lag.
    chunk_bytes
        Size of every chunk but the last; ``None``: ``size_bytes // chunks``
        (the last chunk then takes the remainder too). ASTRA-sim cuts
        ``size // splits`` bytes at a time, so its last chunk may be smaller.
    group
        The NPUs of its communicator group, in ring order, when that is
        smaller than the network: it then runs as ASTRA-sim 2.x runs one, on
        one ring over these NPUs, one phase per chunk (see
        :mod:`themis_opt.cost`), and ``dimensions`` is not given. ``()``:
        every NPU, over ``dimensions``. A send's is (source, destination).
    stage
        The pipeline stage (NPU class) whose resources it occupies (a
        send: the sending stage's); see :class:`~themis_opt.instance.Instance`.
    """

    kind: Kind
    size_bytes: int
    chunks: int
    issue_ns: float = 0.0
    dimensions: tuple[int, ...] | None = None
    id: str = ""
    priority: int = 0
    after: tuple[After, ...] = ()
    chunk_bytes: int = None  # type: ignore[assignment]  # resolved below
    group: tuple[int, ...] = ()
    stage: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_enum("kind", self.kind, Kind))
        check_int("stage", self.stage, 0, MAX_STAGES - 1)
        if not isinstance(self.group, (tuple, list)):
            raise InputError("group", f"must be a list of NPUs, got {self.group!r}")
        object.__setattr__(self, "group", tuple(self.group))
        if self.kind is Kind.SEND and len(self.group) != 2:
            raise InputError("group", f"a send names two NPUs, [source, destination], got {list(self.group)}")
        if self.group:
            for k, npu in enumerate(self.group):
                check_int(f"group[{k}]", npu, 0, MAX_NPUS - 1)
            if len(set(self.group)) != len(self.group):
                raise InputError("group", f"names an NPU twice: {list(self.group)}")
            if len(self.group) < 2:
                raise InputError("group", f"of one NPU never finishes in ASTRA-sim 2.x, got {list(self.group)}")
            if self.kind is Kind.SEND and self.dimensions is not None:
                raise InputError("dimensions", "a send runs where its two NPUs differ: give no dimensions")
            if self.kind is Kind.ALL_TO_ALL:
                raise InputError("group", "an all-to-all in a group smaller than the network is not modelled")
            if self.dimensions is not None:
                raise InputError("dimensions", "a collective in a group runs on the group's ring: give no dimensions")
        check_name("id", self.id)
        check_int("priority", self.priority, -(2**31), 2**31 - 1)
        object.__setattr__(self, "after", _check_after(self.after))
        check_int("size_bytes", self.size_bytes, 1, MAX_SIZE_BYTES)
        check_int("chunks", self.chunks, 1, MAX_PHASES)
        if self.kind is Kind.SEND and self.chunks != 1:
            raise InputError("chunks", f"a send is one message: must be 1, got {self.chunks}")
        if self.chunks > self.size_bytes:
            raise InputError("chunks", f"must be <= size_bytes ({self.size_bytes}), got {self.chunks}")
        if self.chunk_bytes is None:
            object.__setattr__(self, "chunk_bytes", self.size_bytes // self.chunks)
        check_int("chunk_bytes", self.chunk_bytes, 1, self.size_bytes)
        if (self.chunks - 1) * self.chunk_bytes >= self.size_bytes:
            raise InputError(
                "chunk_bytes",
                f"{self.chunks} chunks of {self.chunk_bytes} bytes leave nothing for the last of {self.size_bytes}",
            )
        object.__setattr__(self, "issue_ns", check_number("issue_ns", self.issue_ns, maximum=MAX_TIME_NS))
        if self.dimensions is not None:
            if not isinstance(self.dimensions, (tuple, list)):
                raise InputError("dimensions", f"must be a list of indices, got {self.dimensions!r}")
            if not self.dimensions:
                raise InputError("dimensions", "must name at least one dimension")
            for index, dim in enumerate(self.dimensions):
                check_int(f"dimensions[{index}]", dim, 0, MAX_DIMENSIONS - 1)
            if len(set(self.dimensions)) != len(self.dimensions):
                raise InputError("dimensions", f"must not repeat a dimension, got {list(self.dimensions)}")
            object.__setattr__(self, "dimensions", tuple(self.dimensions))

    @property
    def last_chunk_bytes(self) -> int:
        """Size of the last chunk, which takes the remainder."""
        return self.size_bytes - (self.chunks - 1) * self.chunk_bytes

    def bytes_of(self, chunk: int) -> int:
        """Size in bytes of chunk number ``chunk``."""
        return self.last_chunk_bytes if chunk == self.chunks - 1 else self.chunk_bytes


@dataclass(frozen=True)
class Compute:
    """A compute task: it occupies the NPU's compute unit for its duration.

    Compute tasks run one at a time, without preemption; when several are
    ready the one listed first starts first.

    Parameters
    ----------
    duration_ns
        How long it runs.
    id
        The task's id; ``""`` lets the instance call it ``t<index>``.
    issue_ns
        It starts no earlier.
    after
        The tasks it waits for (see :class:`After`).
    stage
        The pipeline stage whose compute unit runs it (see :class:`~themis_opt.instance.Instance`).
    """

    duration_ns: float
    id: str = ""
    issue_ns: float = 0.0
    after: tuple[After, ...] = ()
    stage: int = 0

    def __post_init__(self) -> None:
        check_int("stage", self.stage, 0, MAX_STAGES - 1)
        object.__setattr__(self, "duration_ns", check_number("duration_ns", self.duration_ns, maximum=MAX_TIME_NS))
        check_name("id", self.id)
        object.__setattr__(self, "issue_ns", check_number("issue_ns", self.issue_ns, maximum=MAX_TIME_NS))
        object.__setattr__(self, "after", _check_after(self.after))


Task = Collective | Compute


@dataclass(frozen=True)
class ChunkClass:
    """Chunks of one collective that have the same size and are interchangeable.

    Parameters
    ----------
    collective
        Index of the collective.
    chunk_bytes
        Size of each chunk in the class.
    chunks
        Indices of the chunks in the class, ascending.
    """

    collective: int
    chunk_bytes: int
    chunks: tuple[int, ...]

    def __hash__(self) -> int:
        # computed once: classes key the load programs' dicts, and a class may hold 2^15 chunks
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.collective, self.chunk_bytes, self.chunks))
            object.__setattr__(self, "_hash", found)
        return found
