"""The settings of ASTRA-sim's network and system files, and the checks that they run the instance's case.

For 1.0: the one collective a MICRO workload runs, a dimension's links, the
implementation lists, and the check that ASTRA-sim 1.0 cuts the collective as
the instance does. For 2.x: the algorithms its files can name, the system
file, and the one ``preferred-dataset-splits`` that cuts every collective as
the instance does. For both: an error for a network setting the files would
drop (ASTRA-sim would time another case, silently).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from themis_opt.errors import InputError, counted
from themis_opt.formats.astra.export_traces import _comm_size
from themis_opt.formats.astra.files import IMPLEMENTATION_KEYS, TOPOLOGIES
from themis_opt.formats.astra.v1 import LOCAL_MEMORY_BYTES_PER_NS
from themis_opt.formats.astra.v2 import NO_ALL_TO_ALL, SUPPORTED, SystemV2
from themis_opt.instance import (
    COLLECTIVE_KINDS,
    Algorithm,
    AllReducePhases,
    Collective,
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
    rate = network.reduction_gbps
    if version == 1 and rate is not None and rate != LOCAL_MEMORY_BYTES_PER_NS and rate < FREE_REDUCTIONS_GBPS:
        raise InputError(
            "export-astra",
            f"reduction_gbps {rate:g}: ASTRA-sim 1.0 reduces at its fixed "
            f"{LOCAL_MEMORY_BYTES_PER_NS:,.0f} bytes per ns (2.x's local-mem-bw sets it)",
        )
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


def _check_algorithms(network: Network) -> None:
    """An error for an algorithm 2.x's files cannot name, or a flattened one charged as 1.0 charges it."""
    dims = network.dimensions
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


def _system_json(network: Network, splits: int) -> dict[str, object]:
    """The 2.x system file of ``network`` with ``splits`` chunks a collective."""
    return {
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


def _splits(instance: Instance) -> int:
    """The one preferred-dataset-splits that cuts every collective as the instance does: the chunk
    counts most collectives have first (``fit_astra_2`` cuts with the commonest; a size it does not
    divide gets a chunk more), then each one less.
    """
    counts = Counter(c.chunks for c in instance.collectives if c.kind is not Kind.SEND)
    if not counts:
        return 1
    common = [n for n, _ in counts.most_common()]
    candidates = list(dict.fromkeys([*common, *(n - 1 for n in common if n > 1)]))
    first: InputError | None = None
    for splits in candidates:
        wrong = _cut_otherwise(instance, splits)
        if wrong is None:
            return splits
        first = first or wrong
    assert first is not None
    raise first


def _cut_otherwise(instance: Instance, splits: int) -> InputError | None:
    """The error naming the first collective that ``splits`` would cut otherwise than the instance
    does (``None``: none).
    """
    from themis_opt.formats.astra.v2 import collective

    network = instance.network
    system = _settings(network, splits)
    for c, coll in enumerate(instance.collectives):
        if coll.kind is Kind.SEND:
            continue
        involved = None if coll.group else tuple(d in instance.active_dims[c] for d in range(network.num_dims))
        again, _ = collective(
            coll.kind, _comm_size(instance, c), involved, network, system, f"export-astra: {coll.id}", group=coll.group
        )
        if (again.chunks, again.chunk_bytes, again.size_bytes) != (coll.chunks, coll.chunk_bytes, coll.size_bytes):
            return InputError(
                f"export-astra: {coll.id}",
                f"{coll.chunks} chunks of {coll.chunk_bytes} bytes: ASTRA-sim 2.x cuts every collective into "
                f"size // {splits} byte chunks, each full size (--fit cuts them so)",
            )
    return None


def _settings(network: Network, splits: int) -> SystemV2:
    """What a 2.x system file written for ``network`` with ``splits`` sets, as the import reads it."""
    implementations: dict[Kind, tuple[Algorithm, ...]] = {kind: _v2_list(network, kind) for kind in COLLECTIVE_KINDS}
    return SystemV2(
        splits,
        network.endpoint_delay_ns,
        network.active_chunks,
        network.all_reduce_phases,
        "LIFO",
        implementations,
        None,
        None,
    )


def _v2_list(network: Network, kind: Kind) -> tuple[Algorithm, ...]:
    """A kind's 2.x implementation list: one algorithm per dimension, or a flattened one alone."""
    if network.flattened(kind):
        return (network.dimensions[0].algorithm_for(kind),)
    return tuple(d.algorithm_for(kind) for d in network.dimensions)
