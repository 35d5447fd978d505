"""The network: its topologies, its dimensions and how a chunk's phases are cut."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never

from themis_opt.algorithms import Algorithm
from themis_opt.errors import InputError
from themis_opt.instance.checks import (
    MAX_ACTIVE_CHUNKS,
    MAX_BANDWIDTH_GBPS,
    MAX_DIMENSION_SIZE,
    MAX_DIMENSIONS,
    MAX_FLATTENED_NPUS,
    MAX_NPUS,
    MAX_TIME_NS,
    MIN_BANDWIDTH_GBPS,
    check_enum,
    check_int,
    check_name,
    check_number,
)
from themis_opt.instance.tasks import Kind


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
        2.x's ``local-mem-bw``; 500,000 in 1.0's analytical backend): every
        received message that is reduced adds three times its bytes over it,
        in whole ns; ``None``: reductions are free.
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

    def split(self, d: int, inner: int) -> Network:
        """The network with dimension ``d`` carved in two: its first ``inner`` NPUs' part
        (neighbours as far apart as the dimension's, named ``NAMEa``) and the part across them
        (``inner`` times as far apart, ``NAMEb``), each with the dimension's topology, bandwidth
        and latency and its own queue, as ASTRA-sim 1.0 splits a dimension for a model-parallel
        group. A part carved already splits the same way, within the physical dimension it is
        carved from (a rail of 32 as 4 x 4 x 2).

        Raises
        ------
        InputError
            If ``inner`` does not divide the dimension.
        """
        dim = self.dimensions[d]
        if dim.size % inner:
            raise InputError(f"dimension {d}", f"cannot be split: {inner} does not divide its {dim.size} NPUs")
        name = dim.name or f"d{d}"
        first = dataclasses.replace(dim, size=inner, name=f"{name}a")
        second = dataclasses.replace(dim, size=dim.size // inner, stride=dim.stride * inner, name=f"{name}b")
        return dataclasses.replace(self, dimensions=(*self.dimensions[:d], first, second, *self.dimensions[d + 1 :]))

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
