"""ASTRA-sim 2.x's network YAML and system JSON (the collective given on the command line).

A ring or switch dimension's per-NPU bandwidth is the YAML's ``bandwidth``; a
fully-connected one under the ``direct`` algorithm has n - 1 links, so
(n - 1) x ``bandwidth``; under any other algorithm ``bandwidth`` as given.
The system file's ``endpoint-delay``, ``preferred-dataset-splits``,
``all-reduce-implementation`` and ``all-to-all-implementation`` (lists of
``ring``, ``direct``, ``halvingDoubling``) are read; ``inter-dimension-scheduling``
and ``intra-dimension-scheduling`` are recorded in the metadata.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from themis_opt.astra.files import ALGORITHMS, json_object, numbers, read_text, topologies
from themis_opt.errors import InputError, counted
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology

METHODS = {"baseline": "baseline", "themis": "themis", "offlineGreedy": "themis", "offlineGreedyFlex": "themis"}
INTRA = {"FIFO": "fifo", "SCF": "scf", "smallestFirst": "scf"}
SUPPORTED = (Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING)


def read_network(path: Path) -> list[dict[str, Any]]:
    """Per dimension: size, topology, link bandwidth, latency."""
    import yaml

    try:
        raw = yaml.safe_load(read_text(path))
    except yaml.YAMLError as error:
        raise InputError(str(path), f"not valid YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "must be a YAML mapping of topology, npus_count, bandwidth, latency")
    kinds = topologies(raw, "topology", path)
    n = len(kinds)
    sizes = numbers(raw, "npus_count", path, n, integer=True)
    bandwidth = numbers(raw, "bandwidth", path, n)
    latency = numbers(raw, "latency", path, n)
    return [
        {"size": s, "topology": t, "link_bandwidth": b, "latency": lat}
        for s, t, b, lat in zip(sizes, kinds, bandwidth, latency)
    ]


def _algorithms(
    system: dict[str, Any], key: str, where: Path, count: int, allowed: tuple[Algorithm, ...]
) -> list[Algorithm] | None:
    if key not in system:
        return None
    names = system[key]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{where}: {key}", f"must name one algorithm per dimension, got {names!r}")
    if len(names) != count:
        raise InputError(
            f"{where}: {key}",
            f"names {counted(len(names), 'algorithm')}, the network has {counted(count, 'dimension')}",
        )
    for name in names:
        if name not in ALGORITHMS or ALGORITHMS[name] not in allowed:
            known = ", ".join(n for n in ALGORITHMS if ALGORITHMS[n] in allowed)
            raise InputError(f"{where}: {key}", f"algorithm {name!r} is not supported (supported: {known})")
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


def import_v2(network_path: Path, system_path: Path, all_reduce_bytes: int, name: str | None) -> Instance:
    """One all-reduce of ``all_reduce_bytes`` on a 2.x network and system."""
    dims = read_network(network_path)
    system = json_object(read_text(system_path), system_path)
    n = len(dims)
    algorithms = _algorithms(system, "all-reduce-implementation", system_path, n, SUPPORTED)
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
        bandwidth = raw["link_bandwidth"]
        if raw["topology"] is Topology.FULLY_CONNECTED and algorithm is Algorithm.DIRECT:
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
        "source": f"ASTRA-sim 2.x: {network_path.name}, {system_path.name}",
        "astra_method": METHODS[method],
        "astra_intra": INTRA[intra],
        "astra_scheduling_policy": str(system.get("scheduling-policy", "LIFO")),
    }
    collective = Collective(Kind.ALL_REDUCE, all_reduce_bytes, min(chunks, all_reduce_bytes), id="all_reduce")
    return Instance(network, (collective,), name or network_path.stem, tuple(sorted(metadata.items())))
