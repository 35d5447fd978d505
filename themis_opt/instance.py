"""Instance data: the network, its dimensions and the collectives to schedule.

Every class is a frozen dataclass that validates itself on construction and
raises :class:`~themis_opt.errors.InputError` naming the offending field.
Cross-field checks (a collective's dimensions against the network) live in
:class:`Instance`, which also builds the lookup tables the rest of the library
reads.
"""

from __future__ import annotations

import dataclasses
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
    ALL_TO_ALL = "all_to_all"


class Op(StrEnum):
    """Operation of one phase on one dimension."""

    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"


DEFAULT_ALGORITHM = {
    Topology.RING: Algorithm.RING,
    Topology.FULLY_CONNECTED: Algorithm.DIRECT,
    Topology.SWITCH: Algorithm.HALVING_DOUBLING,
}
DEFAULT_ALL_TO_ALL_ALGORITHM = {
    Topology.RING: Algorithm.RING,
    Topology.FULLY_CONNECTED: Algorithm.DIRECT,
    Topology.SWITCH: Algorithm.DIRECT,
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
    all_to_all_algorithm
        How an all-to-all runs here: ``ring`` or ``direct`` (``None``: ring on
        a ring, direct elsewhere); ``halving_doubling`` is accepted but no
        all-to-all may then use the dimension (ASTRA-sim cannot run it).
    """

    size: int
    topology: Topology
    bandwidth_gbps: float
    latency_ns: float
    algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below
    name: str = ""
    all_to_all_algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below

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
        if self.all_to_all_algorithm is None:
            a2a = DEFAULT_ALL_TO_ALL_ALGORITHM[topology]
        else:
            a2a = check_enum("all_to_all_algorithm", self.all_to_all_algorithm, Algorithm)
        object.__setattr__(self, "all_to_all_algorithm", a2a)
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
                dim = dataclasses.replace(dim, name=f"d{index}")
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
    for index, dep in enumerate(after):
        if not isinstance(dep, After):
            raise InputError(f"after[{index}]", f"must be an After, got {dep!r}")
    return tuple(after)


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
    id
        The task's id in a task graph; ``""`` lets the instance call it
        ``c<index>``.
    priority
        Which collective's waiting phase a dimension serves first (higher
        first; see the simulator).
    after
        The tasks it waits for; its release is the latest of ``issue_ns``
        and each dependency's end plus lag.
    """

    kind: Kind
    size_bytes: int
    chunks: int
    issue_ns: float = 0.0
    dimensions: tuple[int, ...] | None = None
    id: str = ""
    priority: int = 0
    after: tuple[After, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_enum("kind", self.kind, Kind))
        check_name("id", self.id)
        check_int("priority", self.priority, -(2**31), 2**31 - 1)
        object.__setattr__(self, "after", _check_after(self.after))
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
    """

    duration_ns: float
    id: str = ""
    issue_ns: float = 0.0
    after: tuple[After, ...] = ()

    def __post_init__(self) -> None:
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


@dataclass(frozen=True)
class Instance:
    """A scheduling instance: a network and the tasks that share it.

    Parameters
    ----------
    network
        The network.
    tasks
        Collectives and compute tasks, in list order (which breaks ties: the
        compute unit starts the first listed ready task). Collective ``c`` is
        the c-th collective of the list, compute ``j`` the j-th compute task.
        Unnamed tasks get the ids ``c<index>`` and ``t<index>``.
    name
        A label for results and tables.
    metadata
        Free-form (key, value) strings, kept with the instance: where it came
        from, what an importer read (e.g. the method and intra policy an
        ASTRA-sim system file asks for).
    """

    network: Network
    tasks: tuple[Task, ...]
    name: str = "instance"
    metadata: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_name("name", self.name)
        if not isinstance(self.metadata, (tuple, list)) or not all(
            isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
            for entry in self.metadata
        ):
            raise InputError("metadata", f"must be (key, value) string pairs, got {self.metadata!r}")
        object.__setattr__(self, "metadata", tuple(self.metadata))
        if not isinstance(self.network, Network):
            raise InputError("network", f"must be a Network, got {self.network!r}")
        if not isinstance(self.tasks, (tuple, list)):
            raise InputError("tasks", f"must be a list of tasks, got {self.tasks!r}")
        if len(self.tasks) > MAX_COLLECTIVES:
            raise InputError("tasks", f"must hold at most {MAX_COLLECTIVES} tasks, got {len(self.tasks)}")
        named: list[Task] = []
        counts = {Collective: 0, Compute: 0}
        for index, task in enumerate(self.tasks):
            if not isinstance(task, (Collective, Compute)):
                raise InputError(f"tasks[{index}]", f"must be a Collective or a Compute, got {task!r}")
            if not task.id:
                prefix = "c" if isinstance(task, Collective) else "t"
                task = dataclasses.replace(task, id=f"{prefix}{counts[type(task)]}")
            counts[type(task)] += 1
            named.append(task)
        object.__setattr__(self, "tasks", tuple(named))
        if not self.collectives:
            raise InputError("tasks", "must hold at least one collective")
        self._check_graph()
        num_dims = self.network.num_dims
        dims = self.network.dimensions
        for c, coll in enumerate(self.collectives):
            where = self.where(coll)
            for pos, dim in enumerate(coll.dimensions or ()):
                if dim >= num_dims:
                    raise InputError(
                        f"{where}.dimensions[{pos}]",
                        f"must be < {num_dims} (the network's dimensions), got {dim}",
                    )
            if not self.active_dims[c]:
                raise InputError(f"{where}.dimensions", "must include a dimension of size >= 2")
            if coll.kind is Kind.ALL_TO_ALL:
                for d in self.active_dims[c]:
                    if dims[d].all_to_all_algorithm is Algorithm.HALVING_DOUBLING:
                        raise InputError(
                            f"{where}.dimensions",
                            f"an all-to-all cannot run on dimension {d} ({dims[d].name}): "
                            "its all_to_all_algorithm is halving_doubling",
                        )
        if self.num_phases > MAX_PHASES:
            raise InputError(
                "tasks",
                f"hold {self.num_phases} chunk phases in all, more than the {MAX_PHASES} themis_opt schedules "
                "(use fewer chunks)",
            )

    def where(self, task: Task) -> str:
        """The field path of ``task`` in errors: ``tasks[i] (id)``."""
        return f"tasks[{self.task_index[task.id]}] ({task.id})"

    def _check_graph(self) -> None:
        index: dict[str, int] = {}
        for i, task in enumerate(self.tasks):
            if task.id in index:
                raise InputError(f"tasks[{i}].id", f"duplicate id {task.id!r} (also tasks[{index[task.id]}])")
            index[task.id] = i
        for i, task in enumerate(self.tasks):
            for k, dep in enumerate(task.after):
                if dep.task not in index:
                    raise InputError(f"tasks[{i}] ({task.id}).after[{k}]", f"unknown task id {dep.task!r}")
                if dep.task == task.id:
                    raise InputError(f"tasks[{i}] ({task.id}).after[{k}]", "a task cannot wait for itself")
        cycle = _find_cycle([[index[d.task] for d in t.after] for t in self.tasks])
        if cycle:
            names = " -> ".join(self.tasks[i].id for i in cycle)
            raise InputError(
                f"tasks[{cycle[0]}] ({self.tasks[cycle[0]].id}).after",
                f"dependency cycle (each waits for the next): {names}",
            )

    @cached_property
    def task_index(self) -> dict[str, int]:
        """Each task's position in ``tasks``, by id."""
        return {task.id: i for i, task in enumerate(self.tasks)}

    @cached_property
    def collectives(self) -> tuple[Collective, ...]:
        """The collectives, in list order: collective ``c`` is the c-th."""
        return tuple(t for t in self.tasks if isinstance(t, Collective))

    @cached_property
    def computes(self) -> tuple[Compute, ...]:
        """The compute tasks, in list order: compute ``j`` is the j-th."""
        return tuple(t for t in self.tasks if isinstance(t, Compute))

    @cached_property
    def is_task_graph(self) -> bool:
        """Whether it has compute tasks or dependencies (format version 2 proper)."""
        return bool(self.computes) or any(t.after for t in self.tasks)

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
                if d < len(dims) and dims[d].size >= 2
            )
            for coll in self.collectives
        )

    @cached_property
    def orders(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per collective, every order its chunks may take, lexicographically
        (only the ascending one for an all-to-all, which is never reordered).
        """
        return tuple(
            (dims,) if coll.kind is Kind.ALL_TO_ALL else tuple(itertools.permutations(dims))
            for coll, dims in zip(self.collectives, self.active_dims)
        )

    def order_count(self, collective: int) -> int:
        """How many orders a chunk of ``collective`` may take, without listing them
        (16! on 16 dimensions: look before enumerating :attr:`orders`).
        """
        if self.collectives[collective].kind is Kind.ALL_TO_ALL:
            return 1
        return math.factorial(len(self.active_dims[collective]))

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

    @cached_property
    def origin_ns(self) -> float:
        """The earliest issue time of any task: where every schedule's span starts."""
        return min(task.issue_ns for task in self.tasks)

    @cached_property
    def num_phases(self) -> int:
        """Total number of phases over all chunks."""
        return sum(
            coll.chunks * len(dims) * (2 if coll.kind is Kind.ALL_REDUCE else 1)
            for coll, dims in zip(self.collectives, self.active_dims)
        )


def _find_cycle(preds: list[list[int]]) -> list[int]:
    """A cycle of the graph whose node i waits for ``preds[i]``: nodes, each waiting
    for the next, ending where it starts; [] if there is none.
    """
    state = [0] * len(preds)  # 0 new, 1 on the stack, 2 done
    for root in range(len(preds)):
        if state[root]:
            continue
        stack = [(root, iter(preds[root]))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state[nxt] == 1:
                return [*path[path.index(nxt) :], nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(preds[nxt])))
                path.append(nxt)
    return []


__all__ = [
    "After",
    "Algorithm",
    "ChunkClass",
    "Collective",
    "Compute",
    "Dimension",
    "Instance",
    "Kind",
    "Network",
    "Op",
    "Task",
    "Topology",
]
