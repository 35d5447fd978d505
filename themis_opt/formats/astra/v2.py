"""ASTRA-sim 2.x's network YAML, system JSON and Chakra workloads, read as its analytical
(congestion-unaware) backend runs them.

Every key of the system file is modelled, accepted with no effect on the time
(a note says so) or refused; unknown keys are errors unless ``ignore_unknown``.
2.x fixes the scheduling: every chunk takes the ascending order (all-gathers the
descending one) and every dimension serves its queue first come, first served;
``inter-dimension-scheduling`` and ``intra-dimension-scheduling`` are never read.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themis_opt.algorithms import ALGORITHMS, BY_ASTRA_NAME
from themis_opt.errors import InputError, counted, too_many_digits
from themis_opt.fileio import check_yaml_expansion
from themis_opt.formats.astra.files import (
    IMPLEMENTATION_KEYS,
    json_object,
    numbers,
    read_text,
    topologies,
    unknown_keys,
)
from themis_opt.instance import (
    After,
    Algorithm,
    AllReducePhases,
    Collective,
    Dimension,
    Kind,
    Network,
    Topology,
)

# what ASTRA-sim 2.x does with each system key, and so what themis_opt does (the docs' table)
SYSTEM_KEYS: dict[str, str] = {
    "scheduling-policy": "LIFO, FIFO or EXPLICIT: a collective's priority; one collective runs at a time, so no effect",
    "collective-optimization": "baseline (an all-reduce per dimension) or localBWAware: the all-reduce's phases",
    "active-chunks-per-dimension": "chunks a dimension runs at once, each at full speed (0: refused, 2.x stalls)",
    "endpoint-delay": "ns at the start of every phase and after every received message (times `--injection-scale`)",
    "preferred-dataset-splits": "the chunk count: a collective's size over it, inflated to the NPU count",
    "local-mem-bw": "decimal GB/s: every reduced message adds 3 x its bytes over it; also the roofline's memory",
    "roofline-enabled": "compute times from num_ops and tensor_size at peak-perf and local-mem-bw",
    "peak-perf": "TFLOPS of the roofline",
    "all-reduce-implementation": "one algorithm per dimension (ring, direct, halvingDoubling), or a flattened "
    "oneRing, oneDirect or oneHalvingDoubling alone (doubleBinaryTree: refused)",
    "reduce-scatter-implementation": "the same for reduce-scatters",
    "all-gather-implementation": "the same for all-gathers",
    "all-to-all-implementation": "the same for all-to-alls (the halving-doublings exit when one runs)",
    "local-reduction-delay": "used only with model-shared-bus: no effect",
    "model-shared-bus": "0: no effect; 1 (LogGP buses) is refused",
    "L": "LogGP, only with model-shared-bus: no effect",
    "o": "LogGP, only with model-shared-bus: no effect",
    "g": "LogGP, only with model-shared-bus: no effect",
    "G": "LogGP, only with model-shared-bus: no effect",
    "boost-mode": "never read by ASTRA-sim 2.x: no effect",
    "trace-enabled": "logging only: no effect",
    "replay-only": "0: no effect; on (every node replays its recorded duration) is refused",
    "track-local-mem": "0: no effect; on (memory tracking) is refused",
    "local-mem-trace-filename": "an output file name: no effect",
    "inter-dimension-scheduling": "never read by ASTRA-sim 2.x (it runs the baseline): noted",
    "intra-dimension-scheduling": "never read by ASTRA-sim 2.x (it serves queues FIFO): noted",
}
NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
# what 2.x's files may name, for every kind (an all-to-all on an algorithm that cannot run one: refused when one runs)
SUPPORTED = {kind: tuple(a for a, spec in ALGORITHMS.items() if spec.astra2) for kind in Kind}
NO_ALL_TO_ALL = tuple(a for a, spec in ALGORITHMS.items() if not spec.all_to_all)
_SWITCHES = ("roofline-enabled", "replay-only", "track-local-mem", "trace-enabled")


@dataclass(frozen=True)
class SystemV2:
    """What a 2.x system file sets, as ASTRA-sim 2.x reads it."""

    splits: int
    endpoint_delay: float
    active_chunks: int
    phases: AllReducePhases
    policy: str
    implementations: dict[Kind, tuple[Algorithm, ...]]
    reduction_gbps: float | None
    peak_tflops: float | None  # the roofline's, when it is on
    notes: list[str] = field(default_factory=list)


class _Duplicate(Exception):
    """A key that a YAML mapping gives twice (PyYAML keeps the last silently)."""


@functools.cache
def _strict_loader() -> type:
    """PyYAML's SafeLoader, refusing a key given twice in one mapping."""
    import yaml

    class Strict(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types here
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, (str, int, float, bool)):  # SafeLoader refuses the others itself
                    continue
                if key in seen:
                    raise _Duplicate(str(key))
                seen.add(key)
            mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
            return mapping

        def get_single_data(self) -> Any:  # the document's size checked before it is built
            node = self.get_single_node()
            if node is None:
                return None
            check_yaml_expansion(node)
            return self.construct_document(node)

    return Strict


def read_network(path: Path) -> list[dict[str, Any]]:
    """Per dimension: size, topology, link bandwidth (GB/s, 2^30 bytes), latency (ns)."""
    import yaml

    try:
        raw = yaml.load(read_text(path), Loader=_strict_loader())
    except yaml.YAMLError as error:
        raise InputError(str(path), f"not valid YAML ({str(error).splitlines()[0]})") from None
    except RecursionError:
        raise InputError(str(path), "not valid YAML (nested too deeply)") from None
    except _Duplicate as error:
        raise InputError(f"{path}: {error.args[0]}", "appears twice in one mapping") from None
    except InputError as error:  # aliases expanding past the limit
        raise InputError(str(path), error.problem) from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise InputError(str(path), f"not valid YAML ({too_many_digits(error)})") from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "must be a YAML mapping of topology, npus_count, bandwidth, latency")
    extra = sorted(set(raw) - set(NETWORK_KEYS))
    if extra:
        raise InputError(f"{path}: {extra[0]}", "unknown key (ASTRA-sim 2.x's analytical backend reads none such)")
    kinds = topologies(raw, "topology", path)
    n = len(kinds)
    sizes = numbers(raw, "npus_count", path, n, integer=True)
    bandwidth = numbers(raw, "bandwidth", path, n)
    latency = numbers(raw, "latency", path, n)
    for d, (size, rate) in enumerate(zip(sizes, bandwidth)):
        if size < 2:
            raise InputError(f"{path}: npus_count", f"dimension {d} has {size} NPUs: ASTRA-sim 2.x needs at least 2")
        if rate <= 0:
            raise InputError(f"{path}: bandwidth", f"dimension {d} has bandwidth {rate}: it must be > 0")
    return [
        {"size": s, "topology": t, "link_bandwidth": b, "latency": lat}
        for s, t, b, lat in zip(sizes, kinds, bandwidth, latency)
    ]


def _number(system: dict[str, Any], key: str, where: Path, default: float | None) -> float:
    if key not in system:
        if default is None:
            raise InputError(f"{where}: {key}", "missing: ASTRA-sim 2.x leaves it undefined (set it)")
        return default
    value = system[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: {key}", f"must be a number >= 0, got {value!r}")
    return float(value)


def _whole(system: dict[str, Any], key: str, where: Path, default: float | None, notes: list[str]) -> int:
    """A key ASTRA-sim 2.x reads into an ``int``: a fraction is cut off there, and noted here."""
    value = _number(system, key, where, default)
    whole = int(value)
    if whole != value:
        notes.append(f"{where.name}: {key} {value:g} is read as {whole} (ASTRA-sim 2.x keeps it in an integer)")
    return whole


def _switch(system: dict[str, Any], key: str, where: Path) -> bool:
    """A key ASTRA-sim 2.x reads as ``value != 0``: a JSON ``false`` turns it on, so booleans are refused."""
    value = system.get(key, 0)
    if isinstance(value, bool):
        raise InputError(f"{where}: {key}", f"ASTRA-sim 2.x reads {str(value).lower()} as on: write 0 or 1")
    if not isinstance(value, (int, float)):
        raise InputError(f"{where}: {key}", f"must be 0 or 1, got {value!r}")
    return value != 0


def _implementations(system: dict[str, Any], where: Path, physical: int) -> dict[Kind, tuple[Algorithm, ...]]:
    found: dict[Kind, tuple[Algorithm, ...]] = {}
    for kind, key in IMPLEMENTATION_KEYS.items():
        if key not in system:
            continue
        names = system[key]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise InputError(f"{where}: {key}", f"must be a list of algorithm names, one per dimension, got {names!r}")
        if len(names) > physical:
            raise InputError(
                f"{where}: {key}",
                f"names {counted(len(names), 'algorithm')} for {counted(physical, 'dimension')} (ASTRA-sim 2.x aborts)",
            )
        for name in names:
            algorithm = BY_ASTRA_NAME.get(name)
            if (name.startswith("direct") and name != "direct") or (
                name.startswith("oneDirect") and name != "oneDirect"
            ):
                raise InputError(f"{where}: {key}", f"{name!r}: a window of direct messages is not modelled")
            if algorithm is None:
                raise InputError(
                    f"{where}: {key}", f"{name!r} is not an algorithm ASTRA-sim 2.x knows (it exits: cannot interpret)"
                )
            if algorithm is Algorithm.DOUBLE_BINARY_TREE:
                raise InputError(
                    f"{where}: {key}",
                    f"{name!r} is not modelled for ASTRA-sim 2.x: its NPUs finish a tree at different times (the "
                    "root first, the leaves last, the two trees taking turns chunk by chunk), and an instance "
                    "times one NPU of a symmetric system",
                )
            if algorithm not in SUPPORTED[kind]:
                raise InputError(f"{where}: {key}", f"{name!r} is not modelled for ASTRA-sim 2.x")
        algorithms = tuple(BY_ASTRA_NAME[n] for n in names)
        flat = [n for n, a in enumerate(algorithms) if a.flattened]
        if flat and flat[0] > 0:
            raise InputError(
                f"{where}: {key}",
                f"{names[flat[0]]!r} after other dimensions is not modelled (ASTRA-sim 2.x adds a ring of every "
                "NPU on top of them)",
            )
        if flat and len(algorithms) > 1:
            raise InputError(f"{where}: {key}", f"{names[0]!r} runs over every NPU: ASTRA-sim 2.x ignores the rest")
        found[kind] = algorithms
    return found


def read_system(path: Path, physical: int, *, ignore_unknown: bool = False, injection_scale: float = 1.0) -> SystemV2:
    """The system file's settings; every key modelled, noted as of no effect, or refused."""
    system = json_object(read_text(path), path)
    notes = unknown_keys(system, set(SYSTEM_KEYS), path, ignore_unknown)
    policy = system.get("scheduling-policy")
    if policy not in ("LIFO", "FIFO", "EXPLICIT"):
        problem = "missing: ASTRA-sim 2.x leaves it undefined" if policy is None else f"unknown {policy!r}"
        raise InputError(f"{path}: scheduling-policy", f"{problem} (known: LIFO, FIFO, EXPLICIT)")
    optimization = system.get("collective-optimization")
    phases = {"baseline": AllReducePhases.PER_DIMENSION, "localBWAware": AllReducePhases.LOCAL_BW_AWARE}
    if optimization not in phases:
        problem = "missing: ASTRA-sim 2.x leaves it undefined" if optimization is None else f"unknown {optimization!r}"
        raise InputError(f"{path}: collective-optimization", f"{problem} (known: baseline, localBWAware)")
    active = _whole(system, "active-chunks-per-dimension", path, 1.0, notes)
    if active < 1:
        raise InputError(
            f"{path}: active-chunks-per-dimension", f"{active}: no chunk ever starts (ASTRA-sim 2.x stalls)"
        )
    if _whole(system, "model-shared-bus", path, 0.0, notes) == 1:
        raise InputError(f"{path}: model-shared-bus", "1 (LogGP buses between NPU and memory) is not modelled")
    for key in ("replay-only", "track-local-mem"):
        if _switch(system, key, path):
            raise InputError(f"{path}: {key}", "on is not modelled")
    splits = _whole(system, "preferred-dataset-splits", path, None, notes)
    if splits < 1:
        raise InputError(f"{path}: preferred-dataset-splits", f"is {splits}: ASTRA-sim 2.x divides by it and crashes")
    delay = float(_whole(system, "endpoint-delay", path, 10.0, notes))
    if "endpoint-delay" in system:
        delay = float(int(delay * injection_scale))
    if delay <= 0:
        raise InputError(
            f"{path}: endpoint-delay", "0: a collective's first event lands at time 0 and ASTRA-sim 2.x aborts"
        )
    memory = system.get("local-mem-bw")
    reduction = _number(system, "local-mem-bw", path, 0.0) if memory is not None else None
    if reduction == 0:
        reduction = None
    roofline = _switch(system, "roofline-enabled", path)
    peak = _number(system, "peak-perf", path, 0.0) if roofline else None
    if roofline and (not peak or reduction is None):
        raise InputError(f"{path}: roofline-enabled", "needs peak-perf and local-mem-bw above 0")
    _switch(system, "trace-enabled", path)
    for key in ("local-reduction-delay", "L", "o", "g", "G"):
        value = system.get(key, 0)  # read as a number even where it has no effect: anything else stops 2.x
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{path}: {key}", f"must be a number (ASTRA-sim 2.x stops on a type error), got {value!r}")
    for key in ("local-reduction-delay", "L", "o", "g", "G", "boost-mode", "local-mem-trace-filename"):
        if key in system:
            notes.append(f"{path.name}: {key} has no effect here (ASTRA-sim 2.x: {SYSTEM_KEYS[key]})")
    for key in ("inter-dimension-scheduling", "intra-dimension-scheduling"):
        if key in system:
            notes.append(f"{path.name}: {key} is never read by ASTRA-sim 2.x: it runs the baseline, FIFO")
    return SystemV2(
        splits,
        delay,
        active,
        phases[optimization],
        policy,
        _implementations(system, path, physical),
        reduction,
        peak,
        notes,
    )


def network_of(dims: list[dict[str, Any]], system: SystemV2) -> Network:
    """The network: per-link bandwidth (a fully-connected dimension's n - 1 links at once), every
    message at its link's bandwidth, whole-ns messages, one endpoint delay per phase besides its
    messages', reductions at the local memory bandwidth.
    """
    dimensions = []
    for d, raw in enumerate(dims):
        bandwidth = raw["link_bandwidth"]
        if raw["topology"] is Topology.FULLY_CONNECTED:
            bandwidth *= raw["size"] - 1
        chosen = {
            kind: (algorithms[d] if d < len(algorithms) else Algorithm.RING)
            for kind, algorithms in system.implementations.items()
        }
        fallback = chosen.get(Kind.ALL_REDUCE, Algorithm.RING)
        if chosen.get(Kind.ALL_TO_ALL) in NO_ALL_TO_ALL:  # only refused once an all-to-all runs
            chosen[Kind.ALL_TO_ALL] = Algorithm.RING
        dimensions.append(
            Dimension(
                raw["size"],
                raw["topology"],
                bandwidth,
                raw["latency"],
                fallback,
                f"d{d}",
                chosen.get(Kind.ALL_TO_ALL, Algorithm.RING),
                chosen.get(Kind.REDUCE_SCATTER, fallback),
                chosen.get(Kind.ALL_GATHER, fallback),
            )
        )
    return Network(
        tuple(dimensions),
        system.endpoint_delay,
        congestion_unaware=True,
        all_reduce_phases=system.phases,
        phase_delay_ns=system.endpoint_delay,
        integer_message_sums=True,
        reduction_gbps=system.reduction_gbps,
        active_chunks=system.active_chunks,
        innermost_charge=True,
    )


def collective(
    kind: Kind,
    comm_size: int,
    involved: tuple[bool, ...] | None,
    network: Network,
    system: SystemV2,
    where: str,
    *,
    id: str = "",
    after: tuple[After, ...] = (),
    group: tuple[int, ...] = (),
) -> tuple[Collective, str]:
    """A collective as ASTRA-sim 2.x cuts it, and a note where its size was changed.

    Chunks are ``comm_size // splits`` bytes, every one full size (the last
    too); below the network's NPU count one is inflated to it, except for an
    all-gather, whose ``comm_size`` is each NPU's input (ours is the output).
    In a ``group`` smaller than the network it runs on one ring over the
    group's NPUs (``involved`` unread): a ring whatever the implementation
    list, unless it names one algorithm only, which 2.x then runs there.
    """
    key = IMPLEMENTATION_KEYS[kind]
    if kind not in system.implementations:
        raise InputError(where, f"a {kind.value} with no {key} in the system file: ASTRA-sim 2.x aborts")
    if group:
        return _group_collective(kind, comm_size, network, system, where, id, after, group)
    if kind is Kind.ALL_TO_ALL and set(NO_ALL_TO_ALL) & set(system.implementations[kind]):
        raise InputError(
            where,
            f"an all-to-all with halvingDoubling in {key}: ASTRA-sim 2.x exits (unknown communication type for "
            "HalvingDoubling collective algorithm)",
        )
    span = len(system.implementations[kind])
    flags = involved if involved is not None else (True,) * 4
    if len(flags) < span:
        raise InputError(
            where,
            f"involved_dim has {counted(len(flags), 'entry', 'entries')} for {counted(span, 'dimension')} of "
            f"{key}: ASTRA-sim 2.x reads past it",
        )
    dims = tuple(d for d in range(span) if flags[d] and network.dimensions[d].size > 1)
    if not dims:
        raise InputError(where, "involves no dimension of more than 1 NPU: ASTRA-sim 2.x never finishes it")
    count, chunk, note = _cut(kind, comm_size, network, system, where)
    if involved is not None and any(flags[span:]):
        unread = f"{where}: involved_dim's entries past the first {span} are not read (ASTRA-sim 2.x: {key}'s length)"
        note = f"{note}; {unread}" if note else unread
    npus = network.num_npus if network.flattened(kind) else math.prod(network.dimensions[d].size for d in dims)
    scale = npus if kind is Kind.ALL_GATHER else 1
    try:
        coll = Collective(
            kind, count * chunk * scale, count, dimensions=dims, id=id, after=after, chunk_bytes=chunk * scale
        )
    except InputError as error:  # beyond the instance's limits: named by where the size came from
        raise InputError(where, f"{comm_size} bytes: {error.path} {error.problem}") from None
    return coll, note


def _cut(kind: Kind, comm_size: int, network: Network, system: SystemV2, where: str) -> tuple[int, int, str]:
    """(chunks, bytes a chunk, a note where the size was changed) as 2.x cuts ``comm_size``."""
    chunk = comm_size // system.splits
    note = ""
    if kind is Kind.ALL_GATHER:
        if chunk == 0:
            raise InputError(
                where, f"an all-gather of {comm_size} bytes in {system.splits} splits: ASTRA-sim 2.x loops"
            )
    elif chunk < network.num_npus:
        chunk = network.num_npus
        note = f"{where}: {comm_size} bytes inflated to {system.splits} chunks of {chunk} (the NPU count)"
        comm_size = system.splits * chunk
    count = -(-comm_size // chunk)
    if count * chunk != comm_size:
        note = note or f"{where}: {comm_size} bytes run as {count} full chunks of {chunk}"
    return count, chunk, note


def _group_collective(
    kind: Kind,
    comm_size: int,
    network: Network,
    system: SystemV2,
    where: str,
    id: str,
    after: tuple[After, ...],
    group: tuple[int, ...],
) -> tuple[Collective, str]:
    """A collective in a communicator group smaller than the network: one ring over its NPUs."""
    listed = system.implementations[kind]
    if len(listed) == 1 and listed[0] is not Algorithm.RING:
        raise InputError(
            where,
            f"a group's {kind.value} with {listed[0].spec.astra} alone in {IMPLEMENTATION_KEYS[kind]}: "
            "2.x runs it on the group's ring, which is not modelled (only ring is)",
        )
    if kind is Kind.ALL_TO_ALL:
        raise InputError(where, "an all-to-all in a group smaller than the network is not modelled")
    count, chunk, note = _cut(kind, comm_size, network, system, where)
    scale = len(group) if kind is Kind.ALL_GATHER else 1
    try:
        coll = Collective(
            kind, count * chunk * scale, count, id=id, after=after, chunk_bytes=chunk * scale, group=group
        )
    except InputError as error:  # beyond the instance's limits: named by where the size came from
        raise InputError(where, f"{comm_size} bytes: {error.path} {error.problem}") from None
    return coll, note
