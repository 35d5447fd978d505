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
from typing import Any, assert_never

from themis_opt.algorithms import Algorithm, Op
from themis_opt.errors import InputError


class Topology(StrEnum):
    """Physical topology of one dimension."""

    RING = "ring"
    FULLY_CONNECTED = "fully_connected"
    SWITCH = "switch"


class AllReducePhases(StrEnum):
    """How an all-reduce chunk is cut into phases along its order.

    * ``split``: reduce-scatter over the order, then all-gather over its reverse.
    * ``local_bw_aware``: as ``split``, except that the baseline runs the last
      dimension of its order as one all-reduce phase (ASTRA-sim's
      ``collective-optimization: localBWAware``, whose Themis splits).
    * ``per_dimension``: one all-reduce of the whole chunk on every dimension
      of the order (ASTRA-sim's ``collective-optimization: baseline``).
    """

    SPLIT = "split"
    LOCAL_BW_AWARE = "local_bw_aware"
    PER_DIMENSION = "per_dimension"


class Kind(StrEnum):
    """Kind of collective communication."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    SEND = "send"


COLLECTIVE_KINDS = tuple(kind for kind in Kind if kind is not Kind.SEND)  # the kinds that run an algorithm

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
MAX_ACTIVE_CHUNKS = 1024  # chunks a dimension runs at once
MAX_FLATTENED_NPUS = 2**16  # a flattened (one_*) algorithm's cost is found by visiting every NPU
MAX_STAGES = 1024  # pipeline stages (NPU classes) of one instance


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
        One message gets all of it on a ring or switch and one link's share,
        ``bandwidth / (physical_size - 1)``, on a fully-connected dimension.
    latency_ns
        Latency of one hop, ns.
    algorithm
        How an all-reduce runs here: ``ring``, ``direct``,
        ``halving_doubling``, ``double_binary_tree``, or (on dimension 0
        only) a flattened ``one_*``; ``None`` picks the topology's default
        (ring, direct, halving_doubling respectively).
    name
        A label for tables; ``""`` lets the network call it ``d<index>``.
    all_to_all_algorithm
        How an all-to-all runs here (``None``: ring on a ring, direct
        elsewhere); ``halving_doubling`` is accepted but no all-to-all may
        then use the dimension (ASTRA-sim cannot run it).
    reduce_scatter_algorithm, all_gather_algorithm
        How a standalone reduce-scatter or all-gather runs here (``None``:
        ``algorithm``). The phases of an all-reduce use ``algorithm``.
    message_overhead_ns
        Fixed time added to every message, ns (ASTRA-sim: twice the NIC
        latency, plus the router latency on a switch).
    physical_size
        NPUs of the physical dimension this one is carved from (``None``:
        ``size``); with ``stride``, where its NPUs sit on that ring (ASTRA-sim
        splits a dimension in two for a model-parallel group).
    stride
        Positions between neighbours of this dimension on the physical one.
    """

    size: int
    topology: Topology
    bandwidth_gbps: float
    latency_ns: float
    algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below
    name: str = ""
    all_to_all_algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below
    reduce_scatter_algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below
    all_gather_algorithm: Algorithm = None  # type: ignore[assignment]  # resolved below
    message_overhead_ns: float = 0.0
    physical_size: int = None  # type: ignore[assignment]  # resolved below
    stride: int = 1

    def __post_init__(self) -> None:
        check_int("size", self.size, 1, MAX_DIMENSION_SIZE)
        topology = check_enum("topology", self.topology, Topology)
        object.__setattr__(self, "topology", topology)
        bandwidth = check_number(
            "bandwidth_gbps", self.bandwidth_gbps, minimum=MIN_BANDWIDTH_GBPS, maximum=MAX_BANDWIDTH_GBPS
        )
        object.__setattr__(self, "bandwidth_gbps", bandwidth)
        object.__setattr__(self, "latency_ns", check_number("latency_ns", self.latency_ns, maximum=MAX_TIME_NS))
        overhead = check_number("message_overhead_ns", self.message_overhead_ns, maximum=MAX_TIME_NS)
        object.__setattr__(self, "message_overhead_ns", overhead)
        check_name("name", self.name)
        defaults = {
            "algorithm": DEFAULT_ALGORITHM[topology],
            "all_to_all_algorithm": DEFAULT_ALL_TO_ALL_ALGORITHM[topology],
        }
        for field in ("algorithm", "all_to_all_algorithm", "reduce_scatter_algorithm", "all_gather_algorithm"):
            value = getattr(self, field)
            if value is None:
                value = defaults.get(field, self.algorithm)
            object.__setattr__(self, field, check_enum(field, value, Algorithm))
        physical = self.size if self.physical_size is None else self.physical_size
        check_int("physical_size", physical, self.size, MAX_DIMENSION_SIZE)
        object.__setattr__(self, "physical_size", physical)
        check_int("stride", self.stride, 1, MAX_DIMENSION_SIZE)
        if physical % (self.size * self.stride):
            raise InputError(
                "physical_size",
                f"must be a multiple of size x stride ({self.size} x {self.stride}), got {physical}",
            )
        for field in ("algorithm", "reduce_scatter_algorithm", "all_gather_algorithm", "all_to_all_algorithm"):
            algorithm = getattr(self, field)
            if algorithm.needs_power_of_two and not algorithm.flattened and self.size & (self.size - 1):
                if field == "all_to_all_algorithm" and not algorithm.spec.all_to_all:
                    continue  # no all-to-all may use it anyway (checked by the instance)
                raise InputError("size", f"must be a power of two under {algorithm.value}, got {self.size}")

    @property
    def bytes_per_ns(self) -> float:
        """Bandwidth in bytes per ns (B GB/s = B * 2^30 / 1e9 bytes per ns)."""
        return self.bandwidth_gbps * 2**30 / 1e9

    @property
    def carved(self) -> bool:
        """Whether it is part of a larger physical dimension (``physical_size`` > ``size``)."""
        return self.physical_size != self.size

    def algorithm_for(self, kind: Kind) -> Algorithm:
        """The algorithm a collective of ``kind`` runs here."""
        match kind:
            case Kind.ALL_REDUCE:
                return self.algorithm
            case Kind.REDUCE_SCATTER:
                return self.reduce_scatter_algorithm
            case Kind.ALL_GATHER:
                return self.all_gather_algorithm
            case Kind.ALL_TO_ALL:
                return self.all_to_all_algorithm
            case Kind.SEND:
                raise ValueError("a send is one message: it runs no algorithm")
            case _ as unreachable:
                assert_never(unreachable)


@dataclass(frozen=True)
class Network:
    """A multi-dimensional network; dimension 0 is the innermost.

    Parameters
    ----------
    dimensions
        The dimensions, innermost first. Unnamed ones are named ``d<index>``.
    endpoint_delay_ns
        Delay added to every step of every phase, ns.
    congestion_unaware
        Whether every message an NPU sends at once gets its link's whole
        bandwidth (ASTRA-sim's congestion-unaware analytical backend); by
        default the messages an NPU sends at once on a ring or switch
        dimension share its bandwidth there.
    all_reduce_phases
        How an all-reduce chunk is cut into phases (:class:`AllReducePhases`).
    phase_delay_ns
        Delay added once to every phase, ns (ASTRA-sim: a phase ends with one
        more endpoint delay than it has steps).
    integer_messages
        Whether every message's hop latency and bytes-over-bandwidth time are
        each truncated to whole ns (ASTRA-sim's analytical backend keeps them
        in an integer).
    integer_message_sums
        Whether every message's hop latency plus bytes-over-bandwidth time is
        truncated to whole ns as one sum (ASTRA-sim 2.x's analytical backend).
    active_chunks
        How many chunks' phases each dimension runs at once, each at full
        speed (ASTRA-sim 2.x's ``active-chunks-per-dimension``); above 1 only
        on a congestion-unaware network.
    reduction_gbps
        The local memory bandwidth reductions run at, decimal GB/s (ASTRA-sim
        2.x's ``local-mem-bw``): every received message that is reduced adds
        three times its bytes over it, in whole ns; ``None``: reductions are
        free.
    innermost_charge
        Whether a message between NPUs that differ in several dimensions is
        charged on the innermost of them (ASTRA-sim 2.x's analytical backend)
        rather than the outermost (1.0's); only the flattened ``one_*``
        algorithms send such messages.
    serial_phase_ends
        Whether phases that end at the same instant are handled one at a time
        (ASTRA-sim 1.0's ``proceed_to_next_vnet_baseline``, one call per ended
        phase): reduce-scatters last (their last step's reduction registers
        their end after the others'), the others in the order they started;
        each queues its chunk's next phase, then its dimension starts its next
        waiting phase, then the next phase's dimension starts one if it has
        room. By default every phase that ends is handled first and their next
        phases are queued after (see :mod:`themis_opt.sim.engine`).
    """

    dimensions: tuple[Dimension, ...]
    endpoint_delay_ns: float = DEFAULT_ENDPOINT_DELAY_NS
    congestion_unaware: bool = False
    all_reduce_phases: AllReducePhases = AllReducePhases.SPLIT
    phase_delay_ns: float = 0.0
    integer_messages: bool = False
    integer_message_sums: bool = False
    reduction_gbps: float | None = None
    active_chunks: int = 1
    innermost_charge: bool = False
    serial_phase_ends: bool = False

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
        object.__setattr__(
            self, "phase_delay_ns", check_number("phase_delay_ns", self.phase_delay_ns, maximum=MAX_TIME_NS)
        )
        if self.reduction_gbps is not None:
            rate = check_number("reduction_gbps", self.reduction_gbps, positive=True, maximum=MAX_BANDWIDTH_GBPS)
            object.__setattr__(self, "reduction_gbps", rate)
        check_int("active_chunks", self.active_chunks, 1, MAX_ACTIVE_CHUNKS)
        if self.active_chunks > 1 and not self.congestion_unaware:
            raise InputError("active_chunks", "above 1 needs congestion_unaware: chunks at once would share bandwidth")
        flags = (
            "congestion_unaware",
            "integer_messages",
            "integer_message_sums",
            "innermost_charge",
            "serial_phase_ends",
        )
        for flag in flags:
            if not isinstance(getattr(self, flag), bool):
                raise InputError(flag, f"must be true or false, got {getattr(self, flag)!r}")
        object.__setattr__(
            self, "all_reduce_phases", check_enum("all_reduce_phases", self.all_reduce_phases, AllReducePhases)
        )
        if self.num_npus > MAX_NPUS:
            raise InputError("dimensions", f"must have at most {MAX_NPUS} NPUs in all, got {self.num_npus}")
        self._check_flattened()

    def _check_flattened(self) -> None:
        fields = ("algorithm", "reduce_scatter_algorithm", "all_gather_algorithm", "all_to_all_algorithm")
        for index, dim in enumerate(self.dimensions):
            for field in fields:
                algorithm = getattr(dim, field)
                if not algorithm.flattened:
                    continue
                where = f"dimensions[{index}].{field}"
                if index:
                    raise InputError(where, f"{algorithm.value} runs over the whole network: only on dimension 0")
                if any(d.carved for d in self.dimensions):
                    raise InputError(where, f"{algorithm.value} needs dimensions that are not carved from others")
                if self.num_npus > MAX_FLATTENED_NPUS:
                    raise InputError(
                        where, f"{algorithm.value} runs on at most {MAX_FLATTENED_NPUS} NPUs, got {self.num_npus}"
                    )
                if algorithm.needs_power_of_two and self.num_npus & (self.num_npus - 1):
                    raise InputError(where, f"{algorithm.value} needs a power-of-two NPU count, got {self.num_npus}")

    def flattened(self, kind: Kind) -> bool:
        """Whether a collective of ``kind`` runs as one phase over every NPU (a ``one_*`` algorithm)."""
        return self.dimensions[0].algorithm_for(kind).flattened

    def coordinates(self, npu: int) -> tuple[int, ...]:
        """NPU ``npu``'s position in each dimension (dimension 0 varies fastest, as ASTRA-sim numbers NPUs)."""
        position = []
        for dim in self.dimensions:
            npu, at = divmod(npu, dim.size)
            position.append(at)
        return tuple(position)

    def ring_dim(self, group: tuple[int, ...]) -> int:
        """The dimension a ring over ``group`` (in that order) runs on: the lowest in which two neighbours
        of the ring differ (where ASTRA-sim 2.x costs their messages).
        """
        places = [self.coordinates(npu) for npu in group]
        return min(
            next(d for d, (x, y) in enumerate(zip(a, b)) if x != y) for a, b in zip(places, places[1:] + places[:1])
        )

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
        send: the sending stage's); see :class:`Instance`.
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
        The pipeline stage whose compute unit runs it (see :class:`Instance`).
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
    stage_npus
        With pipeline parallelism, per **stage** (a class of NPUs that run
        the same task graph), the NPU that stands for it: its lowest. Stage
        ``s``'s tasks (``stage = s``) see the network from NPU
        ``stage_npus[s]``: its groups include that NPU and its sends leave
        from it. Each stage has its own dimensions (one queue each) and its
        own compute unit; tasks of different stages share no resource and
        meet only through dependencies (a send's receiver lists it in
        ``after``). ``()``: one stage, NPU 0.
    """

    network: Network
    tasks: tuple[Task, ...]
    name: str = "instance"
    metadata: tuple[tuple[str, str], ...] = ()
    stage_npus: tuple[int, ...] = ()

    def __hash__(self) -> int:
        # computed once: instances key the load programs' caches, and a hash visits every dependency
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.network, self.tasks, self.name, self.metadata, self.stage_npus))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict[str, Any]:
        # a string's hash differs between processes: the kept one stays in this process
        return {key: value for key, value in self.__dict__.items() if key != "_hash"}

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
        self._check_stages()
        num_dims = self.network.num_dims
        dims = self.network.dimensions
        for c, coll in enumerate(self.collectives):
            where = self.where(coll)
            if coll.group:
                npus = self.network.num_npus
                if max(coll.group) >= npus:
                    raise InputError(f"{where}.group", f"names NPU {max(coll.group)}, but the network has {npus}")
                if len(coll.group) == npus and coll.kind is not Kind.SEND:
                    raise InputError(f"{where}.group", "is every NPU: give no group (the network's own plan)")
                own = self.stage_npu(coll.stage)
                if coll.kind is Kind.SEND and coll.group[0] != own:
                    raise InputError(
                        f"{where}.group",
                        f"a send of stage {coll.stage} leaves from its NPU {own}, not NPU {coll.group[0]}",
                    )
                if self.stage_npus and own not in coll.group:
                    raise InputError(f"{where}.group", f"must include NPU {own}, which stands for stage {coll.stage}")
            for pos, dim in enumerate(coll.dimensions or ()):
                if dim >= num_dims:
                    raise InputError(
                        f"{where}.dimensions[{pos}]",
                        f"must be < {num_dims} (the network's dimensions), got {dim}",
                    )
            if not self.active_dims[c]:
                if self.network.flattened(coll.kind):
                    raise InputError(
                        f"{where}.dimensions",
                        f"must include dimension 0: a {coll.kind.value} runs flattened over every NPU there",
                    )
                raise InputError(f"{where}.dimensions", "must include a dimension of size >= 2")
            if coll.kind is Kind.ALL_TO_ALL:
                for d in self.active_dims[c]:
                    algorithm = dims[d].all_to_all_algorithm
                    if not algorithm.spec.all_to_all:
                        raise InputError(
                            f"{where}.dimensions",
                            f"an all-to-all cannot run on dimension {d} ({dims[d].name}): "
                            f"its all_to_all_algorithm is {algorithm.value}",
                        )
        if self.num_phases > MAX_PHASES:
            raise InputError(
                "tasks",
                f"hold {self.num_phases} chunk phases in all, more than the {MAX_PHASES} themis_opt schedules "
                "(use fewer chunks)",
            )

    def _check_stages(self) -> None:
        if not isinstance(self.stage_npus, (tuple, list)):
            raise InputError("stage_npus", f"must be a list of NPUs, got {self.stage_npus!r}")
        npus = tuple(self.stage_npus)
        object.__setattr__(self, "stage_npus", npus)
        if len(npus) > MAX_STAGES:
            raise InputError("stage_npus", f"must name at most {MAX_STAGES} stages, got {len(npus)}")
        for k, npu in enumerate(npus):
            check_int(f"stage_npus[{k}]", npu, 0, self.network.num_npus - 1)
        if len(set(npus)) != len(npus):
            raise InputError("stage_npus", f"names an NPU twice: {list(npus)}")
        for i, task in enumerate(self.tasks):
            if task.stage >= self.num_stages:
                raise InputError(
                    f"tasks[{i}] ({task.id}).stage",
                    f"is {task.stage}, but stage_npus names {self.num_stages} stage(s)",
                )

    @property
    def num_stages(self) -> int:
        """How many pipeline stages (NPU classes) the instance has: 1 without ``stage_npus``."""
        return max(1, len(self.stage_npus))

    def stage_npu(self, stage: int) -> int:
        """The NPU that stands for ``stage`` (NPU 0 without ``stage_npus``)."""
        return self.stage_npus[stage] if self.stage_npus else 0

    @property
    def num_lanes(self) -> int:
        """Resources a phase may run on: every stage's dimensions, ``stage * num_dims + dim``."""
        return self.num_stages * self.network.num_dims

    def lane(self, collective: int, dim: int) -> int:
        """The resource a phase of ``collective`` on dimension ``dim`` runs on: its stage's dimension
        (``stage * num_dims + dim``; on one stage, ``dim``).
        """
        return self.collectives[collective].stage * self.network.num_dims + dim

    @cached_property
    def has_sends(self) -> bool:
        """Whether a collective is a point-to-point send."""
        return any(coll.kind is Kind.SEND for coll in self.collectives)

    def stage_part(self, stage: int, issues: tuple[float, ...] | None = None) -> Instance | None:
        """Stage ``stage``'s tasks alone, as a one-stage instance (``None`` if it has no collective):
        dependencies on other stages dropped, each task issued no earlier than ``issues[t]`` (per task
        of this instance, e.g. a lower bound on its release) where given. Its schedules are the
        restrictions of this instance's, so a lower bound of it holds here.
        """
        index = self.task_index
        mine = {t.id for t in self.tasks if t.stage == stage}
        tasks: list[Task] = []
        for task in self.tasks:
            if task.stage != stage:
                continue
            issue = task.issue_ns if issues is None else max(task.issue_ns, issues[index[task.id]])
            after = tuple(d for d in task.after if d.task in mine)
            tasks.append(dataclasses.replace(task, stage=0, after=after, issue_ns=issue))
        if not any(isinstance(t, Collective) for t in tasks):
            return None
        own = self.stage_npus[stage : stage + 1]
        return Instance(self.network, tuple(tasks), f"{self.name}/stage{stage}", self.metadata, own)

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
        permutation of them. A collective of a flattened kind (a ``one_*``
        algorithm) visits dimension 0 alone, if it includes it: its one phase
        there spans every NPU. A collective in a group visits the dimension
        its ring runs on (:meth:`Network.ring_dim`) alone.
        """
        network = self.network
        dims = network.dimensions
        active: list[tuple[int, ...]] = []
        for coll in self.collectives:
            named = coll.dimensions if coll.dimensions is not None else range(len(dims))
            if coll.group:
                active.append((network.ring_dim(coll.group),))
            elif network.flattened(coll.kind):
                active.append((0,) if 0 in named and network.num_npus >= 2 else ())
            else:
                active.append(tuple(d for d in sorted(named) if d < len(dims) and dims[d].size >= 2))
        return tuple(active)

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
        per_dimension = self.network.all_reduce_phases is AllReducePhases.PER_DIMENSION
        return sum(
            coll.chunks
            * len(dims)
            * (2 if coll.kind is Kind.ALL_REDUCE and not per_dimension and not coll.group else 1)
            for coll, dims in zip(self.collectives, self.active_dims)
        )  # a group's collective (a send too) is one phase a chunk on its ring


def _find_cycle(preds: list[list[int]]) -> list[int]:
    """A cycle of the graph whose node i waits for ``preds[i]``: nodes, each waiting
    for the next, ending where it starts; [] if there is none.
    """
    if all(max(before, default=-1) < node for node, before in enumerate(preds)):
        return []  # every task waits only for tasks listed before it (as generated graphs are): no cycle
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
    "COLLECTIVE_KINDS",
    "After",
    "Algorithm",
    "AllReducePhases",
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
