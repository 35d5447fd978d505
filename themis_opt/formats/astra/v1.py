"""ASTRA-sim 1.0's analytical network JSON and system file, read as ASTRA-sim 1.0 reads them.

Every key ASTRA-sim 1.0 reads is either modelled as it models it or refused
with a line naming the key and value; the docs' ASTRA-sim page lists each key
and what becomes of it. The rules found in ASTRA-sim 1.0's source
(``Sys.cc``, ``GeneralComplexTopology.cc``, the analytical backend's
``HierarchicalTopology.cc``):

* the system file is white-space separated (key, value) tokens, every key
  ending in ``:``; there are no comments, and an unknown key stops ASTRA-sim;
* a dimension's bandwidth is ``links x link-bandwidth`` with the links
  ASTRA-sim counts (an even number on a ring, a multiple of n - 1 when fully
  connected); each message gets one link's share on a fully-connected
  dimension and all of it elsewhere, every message on its own (the backend
  has no contention); ``nic-latency`` is paid twice per message and
  ``router-latency`` once through a switch;
* each kind of collective has its own implementation list; a list shorter
  than the network leaves the outer dimensions out of that kind's
  collectives; a flattened ``one*`` entry makes one ring of every NPU;
* ``collective-optimization: localBWAware`` runs the baseline's last
  dimension as one all-reduce phase, ``baseline`` one all-reduce per dimension;
* ``preferred-dataset-splits`` cuts ``size // splits`` bytes at a time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from themis_opt.algorithms import BY_ASTRA_NAME
from themis_opt.errors import InputError, counted
from themis_opt.formats.astra.files import (
    IMPLEMENTATION_KEYS,
    json_object,
    numbers,
    read_text,
    topologies,
    unknown_keys,
)
from themis_opt.instance import (
    DEFAULT_ALGORITHM,
    DEFAULT_ALL_TO_ALL_ALGORITHM,
    Algorithm,
    AllReducePhases,
    Dimension,
    Kind,
    Network,
    Topology,
)

NETWORK_KEYS = {
    "topology-name",
    "dimensions-count",
    "topologies-per-dim",
    "dimension-type",
    "units-count",
    "links-count",
    "link-latency",
    "link-bandwidth",
    "nic-latency",
    "router-latency",
    "hbm-latency",
    "hbm-bandwidth",
    "hbm-scale",
}
IGNORED_NETWORK_KEYS = {"use-fast-version"}  # read by nothing in ASTRA-sim 1.0
DIMENSION_TYPES = ("T", "N", "P", "PP")  # the backend's cost accounting only
INTER = {"baseline": "baseline", "ascending": "baseline", "themis": "themis", "offlineGreedy": "themis"}
INTER_REFUSED = {
    "themisFlex": "Themis with chunks sized to the loads (offlineGreedyFlex)",
    "offlineGreedyFlex": "Themis with chunks sized to the loads",
    "roundRobin": "the round-robin dimension order",
}
INTRA = {"FIFO": "fifo", "SCF": "scf", "smallestFirst": "scf"}
INTRA_REFUSED = {"RG": "RG queueing", "lessRemainingPhaseFirst": "less-remaining-phase-first queueing"}
REQUIRED = ("scheduling-policy", *IMPLEMENTATION_KEYS.values(), "collective-optimization", "preferred-dataset-splits")
# keys that only the shared-bus (LogGP) model reads: no effect while model-shared-bus is 0
SHARED_BUS_ONLY = ("local-reduction-delay", "L", "o", "g", "G")
SYSTEM_KEYS = {
    *REQUIRED,
    "endpoint-delay",
    "active-chunks-per-dimension",
    "boost-mode",
    "intra-dimension-scheduling",
    "inter-dimension-scheduling",
    "model-shared-bus",
    "seprate-log",
    *SHARED_BUS_ONLY,
}
BYTES_PER_NS = 2**30 / 1e9  # GB/s to bytes per ns, as the backend converts
# the analytical backend's local memory (main.cc: SimpleMemory(NI, 1, 500000, 12.5)): a reduction of
# s bytes takes one write and two reads of s / 500000 ns each, each truncated (PacketBundle.cc:49-55)
LOCAL_MEMORY_BYTES_PER_NS = 500_000.0


@dataclass(frozen=True)
class PhysicalDimension:
    """One dimension of a 1.0 network file, as the analytical backend builds it."""

    size: int
    topology: Topology
    bandwidth_gbps: float  # links that count x link bandwidth: the NPU's in this dimension
    latency_ns: float
    overhead_ns: float  # per message: 2 x nic-latency, plus router-latency through a switch


@dataclass(frozen=True)
class NetworkFile:
    """A 1.0 network file: its dimensions and what was noted while reading it."""

    dimensions: tuple[PhysicalDimension, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Implementations:
    """One kind's implementation list: an algorithm per logical dimension it spans."""

    algorithms: tuple[Algorithm, ...]
    text: str
    broken: str = ""  # why ASTRA-sim crashes as soon as a collective of this kind runs, if it does

    @property
    def span(self) -> int:
        """How many dimensions the kind's collectives use (a flattened entry: one, over every NPU)."""
        return len(self.algorithms)

    @property
    def flattened(self) -> bool:
        """Whether it is one flattened algorithm over every NPU."""
        return self.algorithms[0].flattened


@dataclass(frozen=True)
class SystemFile:
    """A 1.0 system file, as themis_opt models it."""

    policy: str
    implementations: dict[Kind, Implementations]
    all_reduce_phases: AllReducePhases
    endpoint_delay: int | None  # None: ASTRA-sim's default 10, not scaled by --injection-scale
    splits: int
    method: str
    intra: str
    notes: tuple[str, ...] = field(default=())
    active_chunks: int = 1


def read_network(path: Path, *, ignore_unknown: bool = False) -> NetworkFile:
    """A 1.0 analytical network JSON file.

    Raises
    ------
    InputError
        Naming the file and key of the first thing ASTRA-sim 1.0 would stop,
        crash or hang on, or that themis_opt does not model.
    """
    raw = json_object(read_text(path), path)
    notes = unknown_keys(raw, NETWORK_KEYS | IGNORED_NETWORK_KEYS, path, ignore_unknown)
    for key in sorted(NETWORK_KEYS):
        if key not in raw:
            raise InputError(f"{path}: {key}", "missing (ASTRA-sim 1.0 needs every key of the network file)")
    if raw["topology-name"] != "Hierarchical":
        raise InputError(f"{path}: topology-name", f"must be 'Hierarchical', got {raw['topology-name']!r}")
    count = raw["dimensions-count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(f"{path}: dimensions-count", f"must be an integer >= 1, got {count!r}")
    kinds = topologies(raw, "topologies-per-dim", path)
    if len(kinds) != count:
        raise InputError(
            f"{path}: topologies-per-dim", f"has {counted(len(kinds), 'entry', 'entries')}, dimensions-count is {count}"
        )
    types = raw["dimension-type"]
    if not isinstance(types, list) or len(types) != count or any(t not in DIMENSION_TYPES for t in types):
        raise InputError(
            f"{path}: dimension-type", f"must name one of T, N, P, PP per dimension ({count}), got {types!r}"
        )
    sizes = numbers(raw, "units-count", path, count, integer=True)
    links = numbers(raw, "links-count", path, count, integer=True)
    latency = numbers(raw, "link-latency", path, count)
    bandwidth = numbers(raw, "link-bandwidth", path, count)
    nic = numbers(raw, "nic-latency", path, count)
    router = numbers(raw, "router-latency", path, count)
    hbm_latency = numbers(raw, "hbm-latency", path, count)
    hbm_bandwidth = numbers(raw, "hbm-bandwidth", path, count)
    hbm_scale = numbers(raw, "hbm-scale", path, count)
    dims = []
    for d in range(count):
        size, topology, k = sizes[d], kinds[d], links[d]
        where = f"{path}: dimension {d}"
        if size < 1:
            raise InputError(f"{path}: units-count", f"must be >= 1 per dimension, got {size}")
        if types[d] == "PP" and topology is not Topology.SWITCH:
            raise InputError(
                f"{where}: dimension-type",
                "PP (inter-pod) needs a Switch: ASTRA-sim 1.0 stops on a Ring or FullyConnected",
            )
        match topology:
            case Topology.RING:
                scalar = k - k % 2  # the links of a ring come in pairs
                if k % 2:
                    notes.append(f"{path.name}: dimension {d}: a ring's {k} links count as {scalar}, as ASTRA-sim does")
                per_npu = scalar
            case Topology.FULLY_CONNECTED:
                if size == 1:
                    raise InputError(
                        f"{where}: units-count", "a FullyConnected dimension of 1 NPU crashes ASTRA-sim 1.0"
                    )
                scalar = k // (size - 1)  # links per peer
                if k % (size - 1):
                    notes.append(
                        f"{path.name}: dimension {d}: {k} links over {size - 1} peers count as {scalar} each, "
                        "as ASTRA-sim does"
                    )
                per_npu = scalar * (size - 1)
            case Topology.SWITCH:
                scalar = per_npu = k
        if scalar == 0:
            raise InputError(
                f"{where}: links-count",
                f"{k} links leave no bandwidth on a {topology.value} of {size} (ASTRA-sim 1.0: bandwidth scalar is 0)",
            )
        if bandwidth[d] <= 0:
            raise InputError(f"{where}: link-bandwidth", f"must be > 0, got {bandwidth[d]}")
        # whole ns, as the backend adds them to a message's integer time
        overhead = math.floor(2 * nic[d]) + (math.floor(router[d]) if topology is Topology.SWITCH else 0)
        if hbm_scale[d] > 0:
            _check_memory(
                where,
                topology,
                latency[d],
                overhead,
                bandwidth[d] * scalar,
                hbm_latency[d],
                hbm_bandwidth[d],
                hbm_scale[d],
            )
        dims.append(
            PhysicalDimension(size, topology, float(per_npu * bandwidth[d]), float(latency[d]), float(overhead))
        )
    return NetworkFile(tuple(dims), tuple(notes))


def _check_memory(
    where: str,
    topology: Topology,
    latency: float,
    overhead: float,
    link_gbps: float,
    hbm_latency: float,
    hbm_bw: float,
    scale: float,
) -> None:
    """Refuse memory (hbm-*) that could outlast a message: ASTRA-sim charges the longer of the two."""
    hops = 2 if topology is Topology.SWITCH else 1
    slowest_fixed = scale * hbm_latency > hops * latency + overhead
    slowest_rate = hbm_bw <= 0 or scale / hbm_bw > 1 / (link_gbps * BYTES_PER_NS)
    if slowest_fixed or slowest_rate:
        raise InputError(
            f"{where}: hbm-scale",
            f"{scale:g} makes memory (hbm-latency {hbm_latency:g}, hbm-bandwidth {hbm_bw:g}) slower than some "
            "messages: themis_opt does not model memory (set hbm-scale to 0)",
        )


def _tokens(text: str, path: Path) -> list[tuple[str, str]]:
    """(key, value) pairs of white-space separated tokens, as ASTRA-sim 1.0's parser pairs them."""
    tokens = text.split()
    for key, value in zip(tokens[::2], tokens[1::2]):
        if value.endswith(":"):  # a key where a value should be: ASTRA-sim would read it as the value
            raise InputError(f"{path}: {key.removesuffix(':')}", f"has no value (the next token, {value!r}, is a key)")
    if len(tokens) % 2:
        raise InputError(f"{path}: {tokens[-1]}", "has no value (the file is key: value pairs)")
    return list(zip(tokens[::2], tokens[1::2]))


def _implementations(text: str, key: str, path: Path, physical: int) -> Implementations:
    """One implementation list: ``ring_direct_halvingDoubling``, ``oneRing``, ``doubleBinaryTree`` ..."""
    where = f"{path}: {key}"
    names = [n for n in text.split("_") if n]  # ASTRA-sim splits with strtok: empty fields vanish
    if not names:
        raise InputError(where, f"names no algorithm: {text!r}")
    algorithms = []
    for name in names:
        window = re.fullmatch(r"(direct|oneDirect)(\d+)", name)
        if window:
            raise InputError(
                where, f"{name!r}: a direct collective with a window of {window.group(2)} messages is not modelled"
            )
        if name not in BY_ASTRA_NAME:
            known = ", ".join(BY_ASTRA_NAME)
            raise InputError(where, f"unknown implementation {name!r} (ASTRA-sim 1.0 knows {known})")
        algorithms.append(BY_ASTRA_NAME[name])
    flat = [i for i, a in enumerate(algorithms) if a.flattened]
    if flat and flat[0] > 0:
        raise InputError(
            where,
            f"{names[flat[0]]!r} after other dimensions is not modelled (ASTRA-sim 1.0 adds a ring of every NPU "
            "on top of them)",
        )
    if flat and len(algorithms) > 1:
        raise InputError(where, f"{names[0]!r} runs over every NPU: ASTRA-sim 1.0 ignores the rest ({text!r})")
    if not flat and len(algorithms) > physical:
        raise InputError(
            where,
            f"names {counted(len(algorithms), 'implementation')}, the network has "
            f"{counted(physical, 'dimension')} (ASTRA-sim 1.0 crashes)",
        )
    broken = ""
    if algorithms[-1] is Algorithm.DOUBLE_BINARY_TREE and len(algorithms) < physical:
        broken = (
            f"doubleBinaryTree last in a list of {len(algorithms)} on a network of {counted(physical, 'dimension')}: "
            "ASTRA-sim 1.0 crashes on its collectives"
        )
    return Implementations(tuple(algorithms), text, broken)


def _integer(value: str, key: str, path: Path, minimum: int) -> int:
    if not re.fullmatch(r"[0-9]+", value) or len(value) > 30 or int(value) < minimum:
        shown = value if len(value) <= 30 else f"a number of {len(value)} digits"
        raise InputError(f"{path}: {key}", f"must be a whole number >= {minimum} (30 digits at most), got {shown!r}")
    return int(value)


def read_system(path: Path, physical: int, *, ignore_unknown: bool = False) -> SystemFile:
    """A 1.0 system file on a network of ``physical`` dimensions.

    Raises
    ------
    InputError
        Naming the file and key of the first thing ASTRA-sim 1.0 would stop,
        crash or hang on, or that themis_opt does not model.
    """
    pairs = _tokens(read_text(path), path)
    entries: dict[str, str] = {}
    notes: list[str] = []
    for key, value in pairs:
        if not key.endswith(":") or key[:-1] not in SYSTEM_KEYS:
            if ignore_unknown:
                notes.append(f"{path.name}: unknown key {key!r} ignored")
                continue
            hint = " (keys end in ':')" if key[:-1] not in SYSTEM_KEYS and key in SYSTEM_KEYS else ""
            raise InputError(
                f"{path}: {key}", f"unknown key{hint}: ASTRA-sim 1.0 stops on it (--ignore-unknown skips unknown keys)"
            )
        name = key[:-1]
        if name in entries:
            notes.append(f"{path.name}: {name} given twice: the last, {value!r}, counts, as in ASTRA-sim")
        entries[name] = value
    for key in REQUIRED:
        if key not in entries:
            raise InputError(f"{path}: {key}", "missing (ASTRA-sim 1.0 stops or crashes without it)")
    policy = entries["scheduling-policy"]
    if policy not in ("LIFO", "FIFO"):
        raise InputError(f"{path}: scheduling-policy", f"must be LIFO or FIFO, got {policy!r}")
    implementations = {
        kind: _implementations(entries[key], key, path, physical) for kind, key in IMPLEMENTATION_KEYS.items()
    }
    optimization = entries["collective-optimization"]
    phases = {"localBWAware": AllReducePhases.LOCAL_BW_AWARE, "baseline": AllReducePhases.PER_DIMENSION}
    if optimization not in phases:
        raise InputError(f"{path}: collective-optimization", f"must be localBWAware or baseline, got {optimization!r}")
    splits = _integer(entries["preferred-dataset-splits"], "preferred-dataset-splits", path, 1)
    delay = _integer(entries["endpoint-delay"], "endpoint-delay", path, 0) if "endpoint-delay" in entries else None
    # k phases at once on each dimension, each at full speed (Sys.cc's concurrent_streams; 0: none ever starts)
    active = _integer(entries.get("active-chunks-per-dimension", "1"), "active-chunks-per-dimension", path, 1)
    if entries.get("model-shared-bus", "0") != "0":
        raise InputError(
            f"{path}: model-shared-bus",
            f"{entries['model-shared-bus']!r}: the shared-bus (LogGP) model is not modelled",
        )
    for key in SHARED_BUS_ONLY:
        if key in entries:
            try:
                float(entries[key])
            except ValueError:
                raise InputError(f"{path}: {key}", f"must be a number, got {entries[key]!r}") from None
            notes.append(f"{path.name}: {key} acts only with model-shared-bus: 1, as in ASTRA-sim")
    boost = entries.get("boost-mode", "0")
    if not re.fullmatch(r"-?[0-9]+", boost):
        raise InputError(f"{path}: boost-mode", f"must be 0 or 1, got {boost!r}")
    inter = entries.get("inter-dimension-scheduling", "baseline")
    if inter in INTER_REFUSED:
        raise InputError(f"{path}: inter-dimension-scheduling", f"{inter!r} ({INTER_REFUSED[inter]}) is not modelled")
    if inter not in INTER:
        raise InputError(f"{path}: inter-dimension-scheduling", f"unknown {inter!r} (known: {', '.join(INTER)})")
    intra = entries.get("intra-dimension-scheduling", "FIFO")
    if intra in INTRA_REFUSED:
        raise InputError(f"{path}: intra-dimension-scheduling", f"{intra!r} ({INTRA_REFUSED[intra]}) is not modelled")
    if intra not in INTRA:
        raise InputError(f"{path}: intra-dimension-scheduling", f"unknown {intra!r} (known: {', '.join(INTRA)})")
    return SystemFile(
        policy, implementations, phases[optimization], delay, splits, INTER[inter], INTRA[intra], tuple(notes), active
    )


def network_of(net: NetworkFile, system: SystemFile, injection_scale: float = 1.0) -> Network:
    """The network of ``net`` with the algorithms, endpoint delay and all-reduce phases of ``system``."""
    if not (math.isfinite(injection_scale) and injection_scale > 0):
        raise InputError("injection_scale", f"must be a number > 0, got {injection_scale!r}")
    dims = []
    for d, phys in enumerate(net.dimensions):
        chosen: dict[Kind, Algorithm] = {}
        for kind, implementation in system.implementations.items():
            default = (DEFAULT_ALL_TO_ALL_ALGORITHM if kind is Kind.ALL_TO_ALL else DEFAULT_ALGORITHM)[phys.topology]
            if implementation.flattened:  # dimension 0 runs it; the rest never see the kind
                chosen[kind] = implementation.algorithms[0] if d == 0 else default
            else:
                chosen[kind] = implementation.algorithms[d] if d < implementation.span else default
        try:
            dims.append(
                Dimension(
                    phys.size,
                    phys.topology,
                    phys.bandwidth_gbps,
                    phys.latency_ns,
                    chosen[Kind.ALL_REDUCE],
                    f"d{d}",
                    chosen[Kind.ALL_TO_ALL],
                    chosen[Kind.REDUCE_SCATTER],
                    chosen[Kind.ALL_GATHER],
                    phys.overhead_ns,
                )
            )
        except InputError as error:
            raise InputError(
                f"dimension {d}: {error.path}", f"{error.problem} (ASTRA-sim 1.0 crashes or hangs)"
            ) from None
    delay = 10.0 if system.endpoint_delay is None else float(math.floor(system.endpoint_delay * injection_scale))
    return Network(
        tuple(dims),
        delay,
        congestion_unaware=True,
        all_reduce_phases=system.all_reduce_phases,
        phase_delay_ns=delay,  # a phase ends with one more endpoint delay than it has steps
        integer_messages=True,
        active_chunks=system.active_chunks,
        reduction_gbps=LOCAL_MEMORY_BYTES_PER_NS,
        serial_phase_ends=True,  # proceed_to_next_vnet_baseline (Sys.cc:1410-1521) runs once per ended phase
    )


def spans(system: SystemFile) -> dict[Kind, int]:
    """Per kind, how many dimensions its collectives may use."""
    return {kind: implementation.span for kind, implementation in system.implementations.items()}


def network_keys() -> tuple[str, ...]:
    """Every key of the 1.0 network file (for the docs' table and its test)."""
    return tuple(sorted(NETWORK_KEYS | IGNORED_NETWORK_KEYS))


def system_keys() -> tuple[str, ...]:
    """Every key of the 1.0 system file (for the docs' table and its test)."""
    return tuple(sorted(SYSTEM_KEYS))
