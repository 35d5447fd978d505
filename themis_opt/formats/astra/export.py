"""ASTRA-sim input files that run the same case as an instance.

1.0: ``network.json``, ``system.txt`` and a MICRO ``workload.txt`` (one
collective over every dimension, issued at 0, no compute tasks); 2.x:
``network.yml``, ``system.json`` and one Chakra trace per NPU
(``workload.<npu>.et``: a compute node per compute task, a collective node
per collective, the dependencies; the ``[chakra]`` extra writes them).
Anything ASTRA-sim cannot express is an error.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path

from themis_opt.errors import InputError, counted
from themis_opt.fileio import check_apart, write_text
from themis_opt.formats.astra.chakra import COLLECTIVE_TYPES, TraceNode, write_trace
from themis_opt.formats.astra.files import IMPLEMENTATION_KEYS, TOPOLOGIES, WORKLOAD_TYPES
from themis_opt.formats.astra.v2 import NO_ALL_TO_ALL, SUPPORTED
from themis_opt.instance import (
    COLLECTIVE_KINDS,
    Algorithm,
    AllReducePhases,
    Collective,
    Compute,
    Dimension,
    Instance,
    Kind,
    Network,
    Topology,
)


def _expressible(instance: Instance) -> Collective:
    """The one collective of an instance ASTRA-sim can run as it stands, or an error saying why not."""
    if instance.computes or len(instance.collectives) != 1:
        raise InputError(
            "export-astra",
            "ASTRA-sim runs one collective from a MICRO workload here; this instance has "
            f"{counted(len(instance.collectives), 'collective')} and {counted(len(instance.computes), 'compute task')}",
        )
    coll = instance.collectives[0]
    if coll.issue_ns != 0 or coll.after:
        raise InputError("export-astra", "the collective must be issued at 0 with no dependencies")
    if coll.dimensions is not None and sorted(coll.dimensions) != list(range(instance.network.num_dims)):
        raise InputError("export-astra", "the collective must run over every dimension")
    if coll.kind is Kind.ALL_GATHER and coll.size_bytes % instance.network.num_npus:
        raise InputError("export-astra", "an all-gather's size must split evenly into NPU shards")
    return coll


def _kept_settings(instance: Instance, version: int) -> None:
    """An error for a setting of the instance the files of ``version`` would drop: ASTRA-sim would
    time another case, silently.
    """
    network = instance.network
    delay = network.endpoint_delay_ns
    if delay != int(delay):
        raise InputError("export-astra", f"ASTRA-sim's endpoint-delay is whole cycles (ns), got {delay}")
    if network.phase_delay_ns not in (0.0, delay):  # ASTRA-sim ends each phase with one endpoint delay more
        raise InputError(
            "export-astra",
            f"phase_delay_ns {network.phase_delay_ns:g}: ASTRA-sim's phase delay is its endpoint-delay ({delay:g})",
        )
    if version == 1 and network.reduction_gbps is not None and network.reduction_gbps < FREE_REDUCTIONS_GBPS:
        raise InputError("export-astra", "reduction_gbps: ASTRA-sim 1.0 reduces for free (2.x's local-mem-bw)")
    overhead = next((d for d in network.dimensions if d.message_overhead_ns), None)
    if version == 2 and overhead is not None:
        raise InputError(
            "export-astra",
            f"dimension {overhead.name}: message_overhead_ns {overhead.message_overhead_ns:g}: ASTRA-sim 2.x's "
            "analytical network has link latencies only",
        )


def _cut_as_astra_1(coll: Collective, files: dict[str, str]) -> None:
    """An error unless ASTRA-sim 1.0 cuts the collective of ``files`` as the instance cuts ``coll``
    (read back by themis_opt's importer, which cuts as ASTRA-sim 1.0 does).
    """
    from themis_opt.formats.astra.importer import import_astra

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for file, text in files.items():
            (folder / file).write_text(text, encoding="utf-8")
        again = import_astra(folder / "network.json", folder / "system.txt", workload=folder / "workload.txt")
    cut = next(c for c in again.collectives)
    if (cut.chunks, cut.chunk_bytes, cut.size_bytes) != (coll.chunks, coll.chunk_bytes, coll.size_bytes):
        raise InputError(
            f"export-astra: {coll.id}",
            f"{coll.chunks} chunks of {coll.chunk_bytes} bytes: ASTRA-sim 1.0 cuts it into {cut.chunks} of "
            f"{cut.chunk_bytes}",
        )


def _links(dim: Dimension) -> int:
    """How many links ASTRA-sim 1.0 would give the dimension, if they split its bandwidth exactly."""
    preferred = {Topology.RING: 2, Topology.FULLY_CONNECTED: dim.size - 1, Topology.SWITCH: 1}[dim.topology]
    preferred = max(1, preferred)
    return preferred if (dim.bandwidth_gbps / preferred) * preferred == dim.bandwidth_gbps else 1


def _name_of(algorithm: Algorithm) -> str:
    return algorithm.spec.astra


def _implementation(dims: tuple[Dimension, ...], kind: Kind) -> str:
    """A kind's 1.0 implementation list (a flattened algorithm is the whole list)."""
    first = dims[0].algorithm_for(kind)
    if first.flattened:
        return _name_of(first)
    return "_".join(_name_of(d.algorithm_for(kind)) for d in dims)


FREE_REDUCTIONS_GBPS = 1e9  # local-mem-bw for free reductions: below a GB no message's takes 1 ns
# what 2.x reads, but no halving-doubling all-to-all (2.x exits on one)
V2_SUPPORTED = {
    kind: tuple(a for a in SUPPORTED[kind] if kind is not Kind.ALL_TO_ALL or a not in NO_ALL_TO_ALL)
    for kind in COLLECTIVE_KINDS
}


def _topology_name(topology: Topology) -> str:
    return next(k for k, v in TOPOLOGIES.items() if v is topology)


def _version_2(instance: Instance) -> tuple[dict[str, str], dict[str, list[TraceNode]]]:
    """ASTRA-sim 2.x's network YAML, system JSON and one Chakra trace per NPU (``workload.<npu>.et``)."""
    network = instance.network
    dims = network.dimensions
    per_link = []
    for d in dims:
        links = d.size - 1 if d.topology is Topology.FULLY_CONNECTED else 1
        share = d.bandwidth_gbps / links
        if share * links != d.bandwidth_gbps:
            raise InputError(
                "export-astra",
                f"dimension {d.name}: {d.bandwidth_gbps} GB/s does not split exactly over {links} links",
            )
        per_link.append(share)
    network_yml = (
        f"topology: [ {', '.join(_topology_name(d.topology) for d in dims)} ]\n"
        f"npus_count: [ {', '.join(str(d.size) for d in dims)} ]\n"
        f"bandwidth: [ {', '.join(repr(b) for b in per_link)} ]  # GB/s per link\n"
        f"latency: [ {', '.join(repr(d.latency_ns) for d in dims)} ]  # ns\n"
    )
    colls = instance.collectives
    splits = _splits(instance)
    for kind in COLLECTIVE_KINDS:
        for d in dims:
            if d.algorithm_for(kind) not in V2_SUPPORTED[kind]:
                raise InputError(
                    "export-astra",
                    f"dimension {d.name}: {d.algorithm_for(kind).value} is not written for ASTRA-sim 2.x",
                )
        if network.flattened(kind) and not network.innermost_charge:
            raise InputError(
                "export-astra",
                f"{dims[0].algorithm_for(kind).value} with messages charged on the outermost dimension (ASTRA-sim "
                "1.0's rule): 2.x charges the innermost (set innermost_charge)",
            )
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": int(network.endpoint_delay_ns),
        "active-chunks-per-dimension": network.active_chunks,
        "preferred-dataset-splits": splits,
        **{key: [_name_of(a) for a in _v2_list(network, kind)] for kind, key in IMPLEMENTATION_KEYS.items()},
        "collective-optimization": "baseline"
        if network.all_reduce_phases is AllReducePhases.PER_DIMENSION
        else "localBWAware",
        # no local memory bandwidth: reductions free (a bandwidth no message's bytes reach 1 ns of)
        "local-mem-bw": network.reduction_gbps if network.reduction_gbps is not None else FREE_REDUCTIONS_GBPS,
    }
    number = {task.id: n for n, task in enumerate(instance.tasks)}
    nodes = []
    for n, task in enumerate(instance.tasks):
        where = f"export-astra: {task.id}"
        if task.issue_ns:
            raise InputError(where, "an issue time: ASTRA-sim 2.x starts a node when its dependencies end")
        if any(dep.lag_ns for dep in task.after):
            raise InputError(where, "a dependency with a lag: ASTRA-sim 2.x has none")
        deps = tuple(number[dep.task] for dep in task.after)
        if isinstance(task, Compute):
            micros, rest = divmod(task.duration_ns, 1000.0)
            if rest and task.duration_ns != 1.0:
                raise InputError(where, f"{task.duration_ns} ns: ASTRA-sim 2.x replays whole microseconds (or 1 ns)")
            nodes.append(TraceNode(n, task.id, "COMP_NODE", deps, (), int(micros), ()))
            continue
        c = colls.index(task)
        involved = tuple(d in instance.active_dims[c] for d in range(len(dims)))
        size = _comm_size(instance, c)
        code = next(k for k, v in COLLECTIVE_TYPES.items() if v is task.kind)
        attrs = (("comm_type", code), ("comm_size", size), ("involved_dim", involved))
        nodes.append(TraceNode(n, task.id, "COMM_COLL_NODE", deps, (), 0, attrs))
    _check_one_at_a_time(instance)
    files = {"network.yml": network_yml, "system.json": json.dumps(system, indent=2) + "\n"}
    npus = network.num_npus
    traces = {}
    for npu in range(npus):  # ids offset per NPU, as Chakra's converters write them
        shift = npu * len(nodes)
        traces[f"workload.{npu}.et"] = [
            dataclasses.replace(node, id=node.id + shift, data_deps=tuple(d + shift for d in node.data_deps))
            for node in nodes
        ]
    return files, traces


def _splits(instance: Instance) -> int:
    """The one preferred-dataset-splits that cuts every collective as the instance does."""
    from themis_opt.formats.astra.v2 import SystemV2, collective

    network = instance.network
    first = instance.collectives[0]
    implementations: dict[Kind, tuple[Algorithm, ...]] = {kind: _v2_list(network, kind) for kind in COLLECTIVE_KINDS}
    system = SystemV2(
        first.chunks,
        network.endpoint_delay_ns,
        network.active_chunks,
        network.all_reduce_phases,
        "LIFO",
        implementations,
        None,
        None,
    )
    for c, coll in enumerate(instance.collectives):
        dims = instance.active_dims[c]
        size = _comm_size(instance, c)
        involved = tuple(d in dims for d in range(network.num_dims))
        again, _ = collective(coll.kind, size, involved, network, system, coll.id)
        if (again.chunks, again.chunk_bytes, again.size_bytes) != (coll.chunks, coll.chunk_bytes, coll.size_bytes):
            raise InputError(
                f"export-astra: {coll.id}",
                f"{coll.chunks} chunks of {coll.chunk_bytes} bytes: ASTRA-sim 2.x cuts every collective into "
                f"size // {first.chunks} byte chunks, each full size",
            )
    return first.chunks


def _v2_list(network: Network, kind: Kind) -> tuple[Algorithm, ...]:
    """A kind's 2.x implementation list: one algorithm per dimension, or a flattened one alone."""
    if network.flattened(kind):
        return (network.dimensions[0].algorithm_for(kind),)
    return tuple(d.algorithm_for(kind) for d in network.dimensions)


def _comm_size(instance: Instance, c: int) -> int:
    """A collective's ``comm_size`` in a trace: its bytes, an all-gather's each NPU's input."""
    coll = instance.collectives[c]
    if coll.kind is not Kind.ALL_GATHER:
        return coll.size_bytes
    network = instance.network
    if network.flattened(coll.kind):
        return coll.size_bytes // network.num_npus
    return coll.size_bytes // math.prod(network.dimensions[d].size for d in instance.active_dims[c])


def _check_one_at_a_time(instance: Instance) -> None:
    """ASTRA-sim 2.x runs one collective at a time per NPU: they must be chained by dependencies."""
    ancestors: dict[str, set[str]] = {}
    for task in instance.tasks:
        seen: set[str] = set()
        for dep in task.after:
            seen |= {dep.task, *ancestors.get(dep.task, set())}
        ancestors[task.id] = seen
    ids = [c.id for c in instance.collectives]
    for i, a in enumerate(ids):
        b = next((b for b in ids[i + 1 :] if a not in ancestors[b] and b not in ancestors[a]), None)
        if b is not None:
            raise InputError(
                f"export-astra: {b}",
                f"may run beside {a}: ASTRA-sim 2.x runs one collective at a time, so it would time another case",
            )


def export_astra(
    instance: Instance, version: int, out: str | Path, method: str | None = None, keep: Sequence[str | Path] = ()
) -> list[Path]:
    """Write ASTRA-sim input files for ``instance`` into folder ``out``; returns the files written.

    Files of ``keep`` (the inputs) must not be among them: that is an error,
    before any file is written. Each file is written atomically.

    ``method`` (``baseline`` or ``themis``, default themis) chooses the
    inter-dimension scheduling a 1.0 system file asks for; Themis is written
    with SCF, the baseline with FIFO, as themis_opt's defaults. ASTRA-sim
    2.x always runs the baseline: a method is an error there.
    """
    if version == 2 and method is not None:
        raise InputError("method", "ASTRA-sim 2.x always runs the baseline (it reads no scheduling keys)")
    method = method or "themis"
    if method not in ("baseline", "themis"):
        raise InputError("method", f"must be baseline or themis, got {method!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    dims = instance.network.dimensions
    if any(d.carved for d in dims):
        raise InputError("export-astra", "a dimension carved from another is ASTRA-sim's own split: not written")
    if instance.num_stages > 1 or instance.has_sends:
        raise InputError("export-astra", "pipeline stages and sends are not written (import 2.x's traces instead)")
    _kept_settings(instance, version)
    delay = int(instance.network.endpoint_delay_ns)
    optimization = "baseline" if instance.network.all_reduce_phases is AllReducePhases.PER_DIMENSION else "localBWAware"
    intra = "SCF" if method == "themis" else "FIFO"
    files: dict[str, str] = {}
    traces: dict[str, list[TraceNode]] = {}
    if version == 1:
        coll = _expressible(instance)
        links = [_links(d) for d in dims]
        network = {
            "topology-name": "Hierarchical",
            "topologies-per-dim": [_topology_name(d.topology) for d in dims],
            "dimension-type": ["N"] * len(dims),
            "dimensions-count": len(dims),
            "units-count": [d.size for d in dims],
            "links-count": links,
            "link-latency": [d.latency_ns for d in dims],
            "link-bandwidth": [d.bandwidth_gbps / k for d, k in zip(dims, links)],
            "nic-latency": [d.message_overhead_ns / 2 for d in dims],  # paid twice per message
            "router-latency": [0] * len(dims),
            "hbm-latency": [500] * len(dims),
            "hbm-bandwidth": [370] * len(dims),
            "hbm-scale": [0] * len(dims),
        }
        files["network.json"] = json.dumps(network, indent=2) + "\n"
        files["system.txt"] = "".join(
            f"{k}: {v}\n"
            for k, v in (
                ("scheduling-policy", "LIFO"),
                ("endpoint-delay", delay),
                ("active-chunks-per-dimension", instance.network.active_chunks),
                ("preferred-dataset-splits", coll.chunks),
                ("boost-mode", 0),
                *((key, _implementation(dims, kind)) for kind, key in IMPLEMENTATION_KEYS.items()),
                ("collective-optimization", optimization),
                ("inter-dimension-scheduling", method),
                ("intra-dimension-scheduling", intra),
            )
        )
        size = coll.size_bytes // instance.network.num_npus if coll.kind is Kind.ALL_GATHER else coll.size_bytes
        # compute times of one cycle: ASTRA-sim 1.0 aborts on an event at the current time (zero cycles)
        files["workload.txt"] = f"MICRO\n1\n{coll.id} -1 1 NONE 0 1 NONE 0 1 {WORKLOAD_TYPES[coll.kind]} {size} 1\n"
        _cut_as_astra_1(coll, files)
    elif version == 2:
        files, traces = _version_2(instance)
    else:
        raise InputError("version", f"must be 1 or 2, got {version!r}")
    check_apart([("--out", out / file) for file in [*files, *traces]], keep)
    written = []
    for file, text in files.items():
        write_text(out / file, text)
        written.append(out / file)
    for file, nodes in traces.items():
        write_trace(out / file, nodes)
        written.append(out / file)
    return written
