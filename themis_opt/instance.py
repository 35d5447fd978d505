"""Instance data: the network, its dimensions and the collectives to schedule.

Every class is a frozen dataclass that validates itself on construction and
raises :class:`~themis_opt.errors.InputError` naming the offending field.
Cross-field checks (a collective's dimensions against the network) live in
:class:`Instance`, which also builds the lookup tables the rest of the library
reads.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import cached_property
from typing import Any

from themis_opt.errors import InputError


class Topology(StrEnum):
    """Physical topology of one dimension."""

    RING = "ring"
    FULLY_CONNECTED = "fully_connected"
    SWITCH = "switch"


class Algorithm(StrEnum):
    """Collective algorithm run on one dimension."""

    RING = "ring"
    DIRECT = "direct"
    HALVING_DOUBLING = "halving_doubling"


class Kind(StrEnum):
    """Kind of collective communication."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"


class Op(StrEnum):
    """Operation of one phase on one dimension."""

    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"


DEFAULT_ALGORITHM = {
    Topology.RING: Algorithm.RING,
    Topology.FULLY_CONNECTED: Algorithm.DIRECT,
    Topology.SWITCH: Algorithm.HALVING_DOUBLING,
}
DEFAULT_ENDPOINT_DELAY_NS = 10.0

# Sane upper limits: input beyond them is rejected on construction with a
# message, instead of overflowing a solver or running for hours.
MAX_DIMENSIONS = 16
MAX_DIMENSION_SIZE = 2**20
MAX_NPUS = 2**40
MAX_BANDWIDTH_GBPS = 1e9
MIN_BANDWIDTH_GBPS = 1e-6
MAX_TIME_NS = 1e15  # latencies, delays and issue times: about 11.6 days
MAX_SIZE_BYTES = 2**50  # 1 PiB per collective
MAX_COLLECTIVES = 10_000
MAX_PHASES = 2**18  # chunk phases over the whole instance: the simulator's scale (seconds)


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` if it is an integer ``>= minimum`` (and ``<= maximum``), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(name, f"must be an integer, got {value!r}")
    if value < minimum:
        raise InputError(name, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InputError(name, f"must be <= {maximum}, got {value}")
    return value


def check_number(
    name: str, value: Any, *, positive: bool = False, minimum: float = 0.0, maximum: float | None = None
) -> float:
    """Return ``value`` as a float if it is a finite number ``>= minimum``
    (``> 0`` when ``positive``) and ``<= maximum``, else raise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(name, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InputError(name, f"must be finite, got {value!r}")
    if positive and value <= 0:
        raise InputError(name, f"must be > 0, got {value!r}")
    if value < minimum:
        raise InputError(name, f"must be >= {minimum:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise InputError(name, f"must be <= {maximum:g}, got {value!r}")
    return float(value)


def check_enum(name: str, value: Any, enum: type[Enum]) -> Any:
    """Return the member of ``enum`` that ``value`` names, else raise."""
    if isinstance(value, enum):
        return value
    choices = ", ".join(member.value for member in enum)
    if not isinstance(value, str):
        raise InputError(name, f"must be one of {choices}, got {value!r}")
    try:
        return enum(value)
    except ValueError:
        raise InputError(name, f"must be one of {choices}, got {value!r}") from None


def check_name(name: str, value: Any) -> str:
    """Return ``value`` if it is a string, else raise."""
    if not isinstance(value, str):
        raise InputError(name, f"must be a string, got {value!r}")
    return value


@dataclass(frozen=True)
class Dimension:
    """One dimension of the network.

    Parameters
    ----------
    size
        NPUs along the dimension (>= 1; a size-1 dimension carries no phase).
    topology
        ``ring``, ``fully_connected`` or ``switch``.
    bandwidth_gbps
        The NPU's total bandwidth in this dimension, GB/s with 1 GB = 2^30 B.
    latency_ns
        Latency of one hop, ns.
    algorithm
        ``ring``, ``direct`` or ``halving_doubling``; ``None`` picks the
        topology's default (ring, direct, halving_doubling respectively).
    name
        A label for tables; ``""`` lets the network call it ``d<index>``.
    """

    size: int
    topology: Topology
    bandwidth_gbps: float
    latency_ns: float
    algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below
    name: str = ""

    def __post_init__(self) -> None:
        check_int("size", self.size, 1, MAX_DIMENSION_SIZE)
        topology = check_enum("topology", self.topology, Topology)
        object.__setattr__(self, "topology", topology)
        bandwidth = check_number(
            "bandwidth_gbps", self.bandwidth_gbps, minimum=MIN_BANDWIDTH_GBPS, maximum=MAX_BANDWIDTH_GBPS
        )
        object.__setattr__(self, "bandwidth_gbps", bandwidth)
        object.__setattr__(self, "latency_ns", check_number("latency_ns", self.latency_ns, maximum=MAX_TIME_NS))
        if self.algorithm is None:
            algorithm = DEFAULT_ALGORITHM[topology]
        else:
            algorithm = check_enum("algorithm", self.algorithm, Algorithm)
        object.__setattr__(self, "algorithm", algorithm)
        check_name("name", self.name)
        if algorithm is Algorithm.HALVING_DOUBLING and self.size & (self.size - 1):
            raise InputError("size", f"must be a power of two under halving_doubling, got {self.size}")

    @property
    def bytes_per_ns(self) -> float:
        """Bandwidth in bytes per ns (B GB/s = B * 2^30 / 1e9 bytes per ns)."""
        return self.bandwidth_gbps * 2**30 / 1e9


@dataclass(frozen=True)
class Network:
    """A multi-dimensional network; dimension 0 is the innermost.

    Parameters
    ----------
    dimensions
        The dimensions, innermost first. Unnamed ones are named ``d<index>``.
    endpoint_delay_ns
        Delay added to every step of every phase, ns.
    """

    dimensions: tuple[Dimension, ...]
    endpoint_delay_ns: float = DEFAULT_ENDPOINT_DELAY_NS

    def __post_init__(self) -> None:
        dims = self.dimensions
        if not isinstance(dims, (tuple, list)):
            raise InputError("dimensions", f"must be a list of dimensions, got {dims!r}")
        if not dims:
            raise InputError("dimensions", "must hold at least one dimension")
        if len(dims) > MAX_DIMENSIONS:
            raise InputError("dimensions", f"must hold at most {MAX_DIMENSIONS} dimensions, got {len(dims)}")
        named = []
        for index, dim in enumerate(dims):
            if not isinstance(dim, Dimension):
                raise InputError(f"dimensions[{index}]", f"must be a Dimension, got {dim!r}")
            if not dim.name:
                dim = Dimension(dim.size, dim.topology, dim.bandwidth_gbps, dim.latency_ns, dim.algorithm, f"d{index}")
            named.append(dim)
        object.__setattr__(self, "dimensions", tuple(named))
        delay = check_number("endpoint_delay_ns", self.endpoint_delay_ns, maximum=MAX_TIME_NS)
        object.__setattr__(self, "endpoint_delay_ns", delay)
        if self.num_npus > MAX_NPUS:
            raise InputError("dimensions", f"must have at most {MAX_NPUS} NPUs in all, got {self.num_npus}")

    @property
    def num_dims(self) -> int:
        """Number of dimensions, size-1 ones included."""
        return len(self.dimensions)

    @property
    def num_npus(self) -> int:
        """Number of NPUs: the product of the dimension sizes."""
        return math.prod(dim.size for dim in self.dimensions)


@dataclass(frozen=True)
class Collective:
    """One collective communication, split into chunks.

    Parameters
    ----------
    kind
        ``all_reduce``, ``reduce_scatter`` or ``all_gather``.
    size_bytes
        The full per-NPU vector in bytes (AR input and output, RS input,
        AG output).
    chunks
        Number of chunks; chunk size is ``size_bytes // chunks`` and the last
        chunk takes the remainder.
    issue_ns
        Time the collective is issued; no phase starts earlier.
    dimensions
        Indices of the dimensions it runs over; ``None`` means all.
    """

    kind: Kind
    size_bytes: int
    chunks: int
    issue_ns: float = 0.0
    dimensions: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_enum("kind", self.kind, Kind))
        check_int("size_bytes", self.size_bytes, 1, MAX_SIZE_BYTES)
        check_int("chunks", self.chunks, 1, MAX_PHASES)
        if self.chunks > self.size_bytes:
            raise InputError("chunks", f"must be <= size_bytes ({self.size_bytes}), got {self.chunks}")
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
    def chunk_bytes(self) -> int:
        """Nominal chunk size: ``size_bytes // chunks``."""
        return self.size_bytes // self.chunks

    @property
    def last_chunk_bytes(self) -> int:
        """Size of the last chunk, which takes the remainder."""
        return self.size_bytes - (self.chunks - 1) * self.chunk_bytes

    def bytes_of(self, chunk: int) -> int:
        """Size in bytes of chunk number ``chunk``."""
        return self.last_chunk_bytes if chunk == self.chunks - 1 else self.chunk_bytes


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


@dataclass(frozen=True)
class Instance:
    """A scheduling instance: a network and the collectives that share it.

    Parameters
    ----------
    network
        The network.
    collectives
        The collectives, in index order.
    name
        A label for results and tables.
    """

    network: Network
    collectives: tuple[Collective, ...]
    name: str = "instance"

    def __post_init__(self) -> None:
        check_name("name", self.name)
        if not isinstance(self.network, Network):
            raise InputError("network", f"must be a Network, got {self.network!r}")
        if not isinstance(self.collectives, (tuple, list)):
            raise InputError("collectives", f"must be a list of collectives, got {self.collectives!r}")
        if not self.collectives:
            raise InputError("collectives", "must hold at least one collective")
        if len(self.collectives) > MAX_COLLECTIVES:
            raise InputError(
                "collectives", f"must hold at most {MAX_COLLECTIVES} collectives, got {len(self.collectives)}"
            )
        object.__setattr__(self, "collectives", tuple(self.collectives))
        num_dims = self.network.num_dims
        for index, coll in enumerate(self.collectives):
            where = f"collectives[{index}]"
            if not isinstance(coll, Collective):
                raise InputError(where, f"must be a Collective, got {coll!r}")
            for pos, dim in enumerate(coll.dimensions or ()):
                if dim >= num_dims:
                    raise InputError(
                        f"{where}.dimensions[{pos}]",
                        f"must be < {num_dims} (the network's dimensions), got {dim}",
                    )
        for index, dims in enumerate(self.active_dims):
            if not dims:
                raise InputError(f"collectives[{index}].dimensions", "must include a dimension of size >= 2")
        if self.num_phases > MAX_PHASES:
            raise InputError(
                "collectives",
                f"hold {self.num_phases} chunk phases in all, more than the {MAX_PHASES} themis_opt schedules "
                "(use fewer chunks)",
            )

    @cached_property
    def active_dims(self) -> tuple[tuple[int, ...], ...]:
        """Per collective, its dimensions of size >= 2 in ascending order.

        These are the dimensions its chunks visit; a chunk's order is a
        permutation of them.
        """
        dims = self.network.dimensions
        return tuple(
            tuple(
                d
                for d in sorted(coll.dimensions if coll.dimensions is not None else range(len(dims)))
                if dims[d].size >= 2
            )
            for coll in self.collectives
        )

    @cached_property
    def orders(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per collective, every order its chunks may take, lexicographically."""
        return tuple(tuple(itertools.permutations(dims)) for dims in self.active_dims)

    @cached_property
    def chunk_classes(self) -> tuple[ChunkClass, ...]:
        """Interchangeable chunks: per collective, the nominal chunks and,
        when its size differs, the last chunk.
        """
        classes = []
        for c, coll in enumerate(self.collectives):
            if coll.last_chunk_bytes == coll.chunk_bytes:
                classes.append(ChunkClass(c, coll.chunk_bytes, tuple(range(coll.chunks))))
            else:
                classes.append(ChunkClass(c, coll.chunk_bytes, tuple(range(coll.chunks - 1))))
                classes.append(ChunkClass(c, coll.last_chunk_bytes, (coll.chunks - 1,)))
        return tuple(classes)

    @cached_property
    def chunk_ids(self) -> tuple[tuple[int, int], ...]:
        """Every chunk as (collective, chunk), in index order."""
        return tuple((c, k) for c, coll in enumerate(self.collectives) for k in range(coll.chunks))

    @property
    def num_chunks(self) -> int:
        """Total number of chunks over all collectives."""
        return len(self.chunk_ids)

    @property
    def num_phases(self) -> int:
        """Total number of phases over all chunks."""
        return sum(
            coll.chunks * len(dims) * (2 if coll.kind is Kind.ALL_REDUCE else 1)
            for coll, dims in zip(self.collectives, self.active_dims)
        )


__all__ = [
    "Algorithm",
    "ChunkClass",
    "Collective",
    "Dimension",
    "Instance",
    "Kind",
    "Network",
    "Op",
    "Topology",
]
