"""ASTRA-sim configurations in and out: networks, system files and single-collective workloads.

Import (the network's format is told from its file name):

* ASTRA-sim 1.0 analytical network JSON (``topology-name: Hierarchical``):
  dimension d has ``units-count[d]`` NPUs, topology ``topologies-per-dim[d]``
  (Ring, FullyConnected, Switch), per-NPU bandwidth ``links-count[d] x
  link-bandwidth[d]`` GB/s and per-hop latency ``link-latency[d]`` ns; other
  keys are read and ignored.
* ASTRA-sim 2.x network YAML (``topology``, ``npus_count``, ``bandwidth`` GB/s
  per link, ``latency`` ns): a ring or switch dimension's per-NPU bandwidth is
  ``bandwidth``; a fully-connected one under the ``direct`` algorithm has
  n - 1 links, so (n - 1) x ``bandwidth``; under any other algorithm
  ``bandwidth`` as given.
* The system file (1.0: ``key: value`` text; 2.x: JSON): ``endpoint-delay`` ->
  the endpoint delay, ``preferred-dataset-splits`` -> chunks,
  ``all-reduce-implementation`` (``ring_direct_halvingDoubling`` in 1.0, a list
  in 2.x) -> each dimension's algorithm (``ring``, ``direct``,
  ``halvingDoubling``; anything else, ``oneRing``, ``oneDirect`` and
  ``doubleBinaryTree`` included, is an error naming the key),
  ``all-to-all-implementation`` -> each dimension's all-to-all algorithm,
  ``inter-dimension-scheduling`` (``baseline``; ``themis``, ``offlineGreedy``,
  ``offlineGreedyFlex``) and ``intra-dimension-scheduling`` (``FIFO``,
  ``SCF``) -> the method and intra policy recorded in the instance's metadata,
  with ``scheduling-policy``.

Export writes the files that make ASTRA-sim run the same case: 1.0
``network.json``, ``system.txt`` and a MICRO ``workload.txt``; 2.x
``network.yml`` and ``system.json`` (plus ``WORKLOAD.md`` on making the Chakra
workload). Only what ASTRA-sim can express is exported: one collective over
every dimension, issued at 0, no compute tasks; anything else is an error.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology

TOPOLOGIES = {"Ring": Topology.RING, "FullyConnected": Topology.FULLY_CONNECTED, "Switch": Topology.SWITCH}
ALGORITHMS = {"ring": Algorithm.RING, "direct": Algorithm.DIRECT, "halvingDoubling": Algorithm.HALVING_DOUBLING}
METHODS = {"baseline": "baseline", "themis": "themis", "offlineGreedy": "themis", "offlineGreedyFlex": "themis"}
INTRA = {"FIFO": "fifo", "SCF": "scf", "smallestFirst": "scf"}
WORKLOAD_TYPES = {
    Kind.ALL_REDUCE: "ALLREDUCE",
    Kind.REDUCE_SCATTER: "REDUCESCATTER",
    Kind.ALL_GATHER: "ALLGATHER",
    Kind.ALL_TO_ALL: "ALLTOALL",
}
_UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text: str, option: str = "--all-reduce") -> int:
    """Bytes from ``64MiB``, ``1GiB``, ``1073741824`` or ``1.5 GB``."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2) not in _UNITS:
        raise InputError(option, f"must be a size like 64MiB, 1GiB or 1073741824, got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if value != int(value) or value < 1:
        raise InputError(option, f"must be a whole number of bytes >= 1, got {text!r}")
    return int(value)


# ------------------------------------------------------------------ reading


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(str(path), f"cannot be read ({error})") from None


def _json_object(text: str, path: Path) -> dict[str, Any]:
    from themis_opt.io import parse_json

    try:
        raw = parse_json(text)
    except InputError as error:
        raise InputError(str(path), error.problem) from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "must be a JSON object")
    return raw


def _numbers(raw: dict[str, Any], key: str, where: Path, count: int | None, *, integer: bool = False) -> list[Any]:
    if key not in raw:
        raise InputError(f"{where}: {key}", "missing")
    values = raw[key]
    if not isinstance(values, list):
        raise InputError(f"{where}: {key}", f"must be a list, got {values!r}")
    if count is not None and len(values) != count:
        raise InputError(f"{where}: {key}", f"has {len(values)} entries, the network has {count} dimensions")
    for value in values:
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok or not math.isfinite(value):
            kind = "an integer" if integer else "a number"
            raise InputError(f"{where}: {key}", f"must hold {kind} per dimension, got {value!r}")
    return values


def _topologies(raw: dict[str, Any], key: str, where: Path) -> list[Topology]:
    names = raw.get(key)
    if not isinstance(names, list) or not names:
        raise InputError(f"{where}: {key}", f"must be a non-empty list of Ring, FullyConnected, Switch, got {names!r}")
    for name in names:
        if name not in TOPOLOGIES:
            raise InputError(f"{where}: {key}", f"unknown topology {name!r} (known: Ring, FullyConnected, Switch)")
    return [TOPOLOGIES[n] for n in names]


def read_network(path: str | Path) -> tuple[int, list[dict[str, Any]]]:
    """(ASTRA-sim version 1 or 2, per dimension: size, topology, link bandwidth, links, latency)."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() in (".yml", ".yaml"):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise InputError(str(path), f"not valid YAML ({str(error).splitlines()[0]})") from None
        if not isinstance(raw, dict):
            raise InputError(str(path), "must be a YAML mapping of topology, npus_count, bandwidth, latency")
        topologies = _topologies(raw, "topology", path)
        n = len(topologies)
        sizes = _numbers(raw, "npus_count", path, n, integer=True)
        bandwidth = _numbers(raw, "bandwidth", path, n)
        latency = _numbers(raw, "latency", path, n)
        return 2, [
            {"size": s, "topology": t, "link_bandwidth": b, "links": 1, "latency": lat}
            for s, t, b, lat in zip(sizes, topologies, bandwidth, latency)
        ]
    if path.suffix.lower() != ".json":
        raise InputError(str(path), "must be an ASTRA-sim 1.0 network .json or a 2.x network .yml")
    raw = _json_object(text, path)
    if raw.get("topology-name") != "Hierarchical":
        raise InputError(f"{path}: topology-name", f"must be 'Hierarchical', got {raw.get('topology-name')!r}")
    topologies = _topologies(raw, "topologies-per-dim", path)
    n = len(topologies)
    if "dimensions-count" in raw and raw["dimensions-count"] != n:
        raise InputError(f"{path}: dimensions-count", f"is {raw['dimensions-count']!r}, topologies-per-dim has {n}")
    sizes = _numbers(raw, "units-count", path, n, integer=True)
    links = _numbers(raw, "links-count", path, n, integer=True)
    bandwidth = _numbers(raw, "link-bandwidth", path, n)
    latency = _numbers(raw, "link-latency", path, n)
    return 1, [
        {"size": s, "topology": t, "link_bandwidth": b, "links": k, "latency": lat}
        for s, t, b, k, lat in zip(sizes, topologies, bandwidth, links, latency)
    ]


def read_system(path: str | Path) -> dict[str, Any]:
    """The system file's entries (1.0 ``key: value`` text, or 2.x JSON), values as written."""
    path = Path(path)
    text = _read_text(path)
    if text.lstrip().startswith("{"):
        return _json_object(text, path)
    entries: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise InputError(f"{path}: line {number}", f"expected 'key: value', got {line!r}")
        entries[key.strip()] = value.strip()
    return entries


def _algorithms(system: dict[str, Any], key: str, where: Path, count: int, default: Any) -> list[Algorithm] | None:
    if key not in system:
        return None
    value = system[key]
    names = value.split("_") if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{where}: {key}", f"must name one algorithm per dimension, got {value!r}")
    if len(names) != count:
        raise InputError(f"{where}: {key}", f"names {len(names)} algorithms, the network has {count} dimensions")
    for name in names:
        if name not in ALGORITHMS or (default is not None and ALGORITHMS[name] not in default):
            allowed = ", ".join(n for n in ALGORITHMS if default is None or ALGORITHMS[n] in default)
            raise InputError(f"{where}: {key}", f"algorithm {name!r} is not supported (supported: {allowed})")
    return [ALGORITHMS[n] for n in names]


def _number(system: dict[str, Any], key: str, where: Path, default: float, *, integer: bool = False) -> float:
    value = system.get(key, default)
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or (integer and number != int(number)):
        kind = "a whole number" if integer else "a number"
        raise InputError(f"{where}: {key}", f"must be {kind} >= 0, got {value!r}")
    return number


def read_micro_workload(path: str | Path) -> tuple[Kind, int]:
    """The collective of an ASTRA-sim 1.0 MICRO workload file: (kind, size as the file gives it).

    Tokens are separated by any white space: ``MICRO``, the layer count, then
    12 tokens per layer; a MICRO workload runs layer 0's weight-gradient
    collective (tokens 10 and 11: type and size in bytes).
    """
    path = Path(path)
    tokens = _read_text(path).split()
    if not tokens:
        raise InputError(str(path), "is empty: expected a workload starting with its parallelism")
    if tokens[0] != "MICRO":
        raise InputError(
            f"{path}: token 1", f"parallelism {tokens[0]!r}: only MICRO workloads (one collective) are imported here"
        )
    if len(tokens) < 2 or not tokens[1].isdigit() or int(tokens[1]) < 1:
        raise InputError(f"{path}: token 2", f"must be the layer count (an integer >= 1), got {tokens[1:2]}")
    if len(tokens) < 2 + 12:
        raise InputError(f"{path}: token {len(tokens) + 1}", "the file ends inside layer 0's 12 tokens")
    kinds = {v: k for k, v in WORKLOAD_TYPES.items()}
    kind, size = tokens[2 + 9], tokens[2 + 10]
    if kind not in kinds:
        raise InputError(f"{path}: token {2 + 10}", f"weight-gradient type {kind!r} is not a collective")
    if not size.isdigit() or int(size) < 1:
        raise InputError(f"{path}: token {2 + 11}", f"weight-gradient size must be a positive integer, got {size!r}")
    return kinds[kind], int(size)


def import_astra(
    network_path: str | Path,
    system_path: str | Path,
    *,
    all_reduce_bytes: int | None = None,
    workload: str | Path | None = None,
    name: str | None = None,
) -> Instance:
    """An instance of one collective on an ASTRA-sim network and system: an
    all-reduce of ``all_reduce_bytes``, or the collective of a MICRO ``workload``.

    Raises
    ------
    InputError
        Naming the file and key of the first problem.
    """
    network_path, system_path = Path(network_path), Path(system_path)
    version, dims = read_network(network_path)
    system = read_system(system_path)
    n = len(dims)
    algorithms = _algorithms(system, "all-reduce-implementation", system_path, n, None)
    a2a = _algorithms(system, "all-to-all-implementation", system_path, n, (Algorithm.RING, Algorithm.DIRECT))
    delay = _number(system, "endpoint-delay", system_path, 10.0)
    chunks = int(_number(system, "preferred-dataset-splits", system_path, 1.0, integer=True))
    if chunks < 1:
        raise InputError(f"{system_path}: preferred-dataset-splits", f"must be >= 1, got {chunks}")
    method = system.get("inter-dimension-scheduling", "baseline")
    if method not in METHODS:
        raise InputError(
            f"{system_path}: inter-dimension-scheduling", f"unknown {method!r} (known: {', '.join(METHODS)})"
        )
    intra = system.get("intra-dimension-scheduling", "FIFO")
    if intra not in INTRA:
        raise InputError(f"{system_path}: intra-dimension-scheduling", f"unknown {intra!r} (known: {', '.join(INTRA)})")
    dimensions = []
    for d, raw in enumerate(dims):
        algorithm = algorithms[d] if algorithms else None
        bandwidth = raw["links"] * raw["link_bandwidth"]
        if version == 2 and raw["topology"] is Topology.FULLY_CONNECTED and algorithm is Algorithm.DIRECT:
            bandwidth = (raw["size"] - 1) * raw["link_bandwidth"]
        try:
            dimensions.append(
                Dimension(
                    raw["size"],
                    raw["topology"],
                    bandwidth,
                    raw["latency"],
                    algorithm,  # type: ignore[arg-type]  # None: the topology's default
                    f"d{d}",
                    a2a[d] if a2a else None,  # type: ignore[arg-type]
                )
            )
        except InputError as error:
            raise InputError(f"{network_path}: dimension {d}: {error.path}", error.problem) from None
    network = Network(tuple(dimensions), delay)
    metadata = {
        "source": f"ASTRA-sim {version}.x: {network_path.name}, {system_path.name}",
        "astra_method": METHODS[method],
        "astra_intra": INTRA[intra],
        "astra_scheduling_policy": str(system.get("scheduling-policy", "LIFO")),
    }
    if (all_reduce_bytes is None) == (workload is None):
        raise InputError("import-astra", "give the collective: --all-reduce SIZE or --workload FILE")
    if workload is not None:
        kind, size = read_micro_workload(workload)
        if kind is Kind.ALL_GATHER:  # the file gives the shard each NPU starts with (rule W5)
            size *= network.num_npus
        metadata["workload"] = Path(workload).name
    else:
        kind, size = Kind.ALL_REDUCE, all_reduce_bytes  # type: ignore[assignment]
    collective = Collective(kind, size, min(chunks, size), id=kind.value)
    return Instance(network, (collective,), name or network_path.stem, tuple(sorted(metadata.items())))


# ------------------------------------------------------------------ writing


def _expressible(instance: Instance) -> Collective:
    """The one collective of an instance ASTRA-sim can run as it stands, or an error saying why not."""
    if instance.computes or len(instance.collectives) != 1:
        raise InputError(
            "export-astra",
            "ASTRA-sim runs one collective from a MICRO workload here; this instance has "
            f"{len(instance.collectives)} collectives and {len(instance.computes)} compute tasks",
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
    delay = int(instance.network.endpoint_delay_ns)
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
            "nic-latency": [0] * len(dims),
            "router-latency": [0] * len(dims),
            "hbm-latency": [500] * len(dims),
            "hbm-bandwidth": [370] * len(dims),
            "hbm-scale": [0] * len(dims),
        }
        files["network.json"] = json.dumps(network, indent=2) + "\n"
        algorithms = "_".join(_name_of(d.algorithm) for d in dims)
        files["system.txt"] = "".join(
            f"{k}: {v}\n"
            for k, v in (
                ("scheduling-policy", "LIFO"),
                ("endpoint-delay", delay),
                ("active-chunks-per-dimension", 1),
                ("preferred-dataset-splits", coll.chunks),
                ("boost-mode", 0),
                ("all-reduce-implementation", algorithms),
                ("all-gather-implementation", algorithms),
                ("reduce-scatter-implementation", algorithms),
                ("all-to-all-implementation", "_".join(_name_of(d.all_to_all_algorithm) for d in dims)),
                ("collective-optimization", "localBWAware"),
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
            "collective-optimization": "localBWAware",
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
