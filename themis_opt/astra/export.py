"""ASTRA-sim input files that run the same case as an instance.

1.0: ``network.json``, ``system.txt`` and a MICRO ``workload.txt``; 2.x:
``network.yml`` and ``system.json`` (plus ``WORKLOAD.md`` on making the
Chakra workload). Only what ASTRA-sim can express is exported: one
collective over every dimension, issued at 0, no compute tasks; anything
else is an error.
"""

from __future__ import annotations

import json
from pathlib import Path

from themis_opt.astra.files import ALGORITHMS, TOPOLOGIES, WORKLOAD_TYPES
from themis_opt.errors import InputError, counted
from themis_opt.instance import Algorithm, AllReducePhases, Collective, Dimension, Instance, Kind, Topology


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
    delay = instance.network.endpoint_delay_ns
    if delay != int(delay):
        raise InputError("export-astra", f"ASTRA-sim's endpoint-delay is whole cycles (ns), got {delay}")
    return coll


def _links(dim: Dimension) -> int:
    """How many links ASTRA-sim 1.0 would give the dimension, if they split its bandwidth exactly."""
    preferred = {Topology.RING: 2, Topology.FULLY_CONNECTED: dim.size - 1, Topology.SWITCH: 1}[dim.topology]
    preferred = max(1, preferred)
    return preferred if (dim.bandwidth_gbps / preferred) * preferred == dim.bandwidth_gbps else 1


def _name_of(algorithm: Algorithm) -> str:
    return next(k for k, v in ALGORITHMS.items() if v is algorithm)


KEYS = {
    Kind.ALL_REDUCE: "all-reduce-implementation",
    Kind.ALL_GATHER: "all-gather-implementation",
    Kind.REDUCE_SCATTER: "reduce-scatter-implementation",
    Kind.ALL_TO_ALL: "all-to-all-implementation",
}


def _implementation(dims: tuple[Dimension, ...], kind: Kind) -> str:
    """A kind's 1.0 implementation list (a flattened algorithm is the whole list)."""
    first = dims[0].algorithm_for(kind)
    if first.flattened:
        return _name_of(first)
    return "_".join(_name_of(d.algorithm_for(kind)) for d in dims)


def _topology_name(topology: Topology) -> str:
    return next(k for k, v in TOPOLOGIES.items() if v is topology)


def export_astra(instance: Instance, version: int, out: str | Path, method: str = "themis") -> list[Path]:
    """Write ASTRA-sim input files for ``instance`` into folder ``out``; returns the files written.

    ``method`` (``baseline`` or ``themis``) chooses the inter-dimension
    scheduling the system file asks for; Themis is written with SCF, the
    baseline with FIFO, as themis_opt's defaults.
    """
    coll = _expressible(instance)
    if method not in ("baseline", "themis"):
        raise InputError("--method", f"must be baseline or themis, got {method!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    dims = instance.network.dimensions
    if any(d.carved for d in dims):
        raise InputError("export-astra", "a dimension carved from another is ASTRA-sim's own split: not written")
    delay = int(instance.network.endpoint_delay_ns)
    optimization = "baseline" if instance.network.all_reduce_phases is AllReducePhases.PER_DIMENSION else "localBWAware"
    intra = "SCF" if method == "themis" else "FIFO"
    files: dict[str, str] = {}
    if version == 1:
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
                ("active-chunks-per-dimension", 1),
                ("preferred-dataset-splits", coll.chunks),
                ("boost-mode", 0),
                *((key, _implementation(dims, kind)) for kind, key in KEYS.items()),
                ("collective-optimization", optimization),
                ("inter-dimension-scheduling", method),
                ("intra-dimension-scheduling", intra),
            )
        )
        size = coll.size_bytes // instance.network.num_npus if coll.kind is Kind.ALL_GATHER else coll.size_bytes
        # compute times of one cycle: ASTRA-sim 1.0 aborts on an event at the current time (zero cycles)
        files["workload.txt"] = f"MICRO\n1\n{coll.id} -1 1 NONE 0 1 NONE 0 1 {WORKLOAD_TYPES[coll.kind]} {size} 1\n"
    elif version == 2:
        per_link = []
        for d in dims:
            if d.topology is Topology.FULLY_CONNECTED and d.algorithm is Algorithm.DIRECT:
                share = d.bandwidth_gbps / (d.size - 1)
                if share * (d.size - 1) != d.bandwidth_gbps:
                    raise InputError(
                        "export-astra",
                        f"dimension {d.name}: {d.bandwidth_gbps} GB/s does not split exactly over {d.size - 1} links",
                    )
                per_link.append(share)
            else:
                per_link.append(d.bandwidth_gbps)
        files["network.yml"] = (
            f"topology: [ {', '.join(_topology_name(d.topology) for d in dims)} ]\n"
            f"npus_count: [ {', '.join(str(d.size) for d in dims)} ]\n"
            f"bandwidth: [ {', '.join(repr(b) for b in per_link)} ]  # GB/s per link\n"
            f"latency: [ {', '.join(repr(d.latency_ns) for d in dims)} ]  # ns\n"
        )
        names = [_name_of(d.algorithm) for d in dims]
        system = {
            "scheduling-policy": "LIFO",
            "endpoint-delay": delay,
            "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": coll.chunks,
            "all-reduce-implementation": names,
            "all-gather-implementation": names,
            "reduce-scatter-implementation": names,
            "all-to-all-implementation": [_name_of(d.all_to_all_algorithm) for d in dims],
            "collective-optimization": optimization,
            "local-reduction-delay": 1,
            "inter-dimension-scheduling": method,
            "intra-dimension-scheduling": intra,
        }
        files["system.json"] = json.dumps(system, indent=2) + "\n"
        files["WORKLOAD.md"] = (
            "# The workload\n\nASTRA-sim 2.x reads Chakra execution traces. Make one with a single "
            f"{coll.kind.value} of {coll.size_bytes} bytes per NPU with Chakra's generator (for example "
            "`chakra_gen`'s micro-benchmark option for one all-reduce), then run ASTRA-sim with "
            "`--network-configuration=network.yml --system-configuration=system.json`.\n"
        )
    else:
        raise InputError("--version", f"must be 1 or 2, got {version!r}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for file, text in files.items():
            (out / file).write_text(text, encoding="utf-8")
            written.append(out / file)
    except OSError as error:
        raise InputError(str(out), f"cannot be written ({error.strerror})") from None
    return written
