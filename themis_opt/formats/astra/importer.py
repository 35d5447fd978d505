"""Reading ASTRA-sim's configurations (1.0 and 2.x) and workloads into one instance: :func:`import_astra`."""

from __future__ import annotations

from pathlib import Path

from themis_opt.cost import flattened_ring_stalls
from themis_opt.errors import InputError
from themis_opt.formats.astra import chakra, v2
from themis_opt.formats.astra.files import IMPLEMENTATION_KEYS
from themis_opt.formats.astra.groups import read_comm_groups
from themis_opt.formats.astra.v1 import SystemFile
from themis_opt.instance import Algorithm, Collective, Compute, Instance, Kind
from themis_opt.sim.model import chunk_plan


def import_astra(
    network_path: str | Path,
    system_path: str | Path,
    *,
    all_reduce_bytes: int | None = None,
    workload: str | Path | None = None,
    passes: int = 1,
    comm_scale: float = 1.0,
    compute_scale: float = 1.0,
    injection_scale: float = 1.0,
    ignore_unknown: bool = False,
    name: str | None = None,
    comm_groups: str | Path | None = None,
    groups: str = "as-astra",
) -> Instance:
    """The instance ASTRA-sim runs from a network, a system and a workload (or one all-reduce).

    Parameters
    ----------
    network_path, system_path
        ASTRA-sim's network and system files (1.0: JSON and ``key: value``
        text; 2.x: YAML and JSON).
    all_reduce_bytes
        One all-reduce of this many bytes per NPU (no workload file).
    workload
        An ASTRA-sim 1.0 workload file of any parallelism, or for 2.x the
        prefix of its Chakra traces (``PREFIX.0.et``...; needs the
        ``[chakra]`` extra).
    passes, comm_scale, compute_scale, injection_scale
        ASTRA-sim's ``--num-passes``, ``--comm-scale``, ``--compute-scale``
        and ``--injection-scale`` (defaults as ASTRA-sim's: 1).
    ignore_unknown
        Skip keys ASTRA-sim does not read (noted in the metadata) instead of
        stopping on them.
    name
        The instance's name (default: the network file's stem).
    comm_groups
        2.x's communicator-group file (``--comm-group-configuration``:
        ``{"id": [ranks]}``), which the traces' ``pg_name`` refers to.
    groups
        ``as-astra``: a collective in a group smaller than the network runs
        as 2.x runs it, on one ring over the group's NPUs; ``dimensions``:
        one whose group is exactly some whole dimensions runs over them
        instead, so that the methods may order its chunks (what 2.x does not
        do; the others stay rings).

    Returns
    -------
    Instance
        With ``metadata`` naming the sources, the method and intra-dimension
        policy the system file asks for (``astra_method``, ``astra_intra``)
        and, in ``astra_notes``, what was read as ASTRA-sim reads it but is
        worth knowing (odd link counts, ignored keys).

    Raises
    ------
    InputError
        One line naming the file and key of the first thing ASTRA-sim would
        stop, crash or hang on, or that themis_opt does not model.
    """
    from themis_opt.formats.astra import v1
    from themis_opt.formats.workload_text import parse_workload
    from themis_opt.workloads.astra1 import Cut, task_graph
    from themis_opt.workloads.layers import Layer, Workload, scaled

    network_path, system_path = Path(network_path), Path(system_path)
    if groups not in ("as-astra", "dimensions"):
        raise InputError("groups", f"must be as-astra or dimensions, got {groups!r}")
    if (all_reduce_bytes is None) == (workload is None):
        raise InputError("all_reduce_bytes", "give one collective: an all-reduce size or a workload")
    suffix = network_path.suffix.lower()
    if suffix in (".yml", ".yaml"):
        if passes != 1 or comm_scale != 1 or compute_scale != 1:
            raise InputError(
                "import-astra", "ASTRA-sim 2.x has no --num-passes and never reads --comm-scale or --compute-scale"
            )
        if comm_groups is not None and workload is None:
            raise InputError("comm_groups", "name the groups of a workload's collectives: give a workload too")
        return _import_v2(
            network_path,
            system_path,
            all_reduce_bytes=all_reduce_bytes,
            workload=Path(workload) if workload is not None else None,
            injection_scale=injection_scale,
            ignore_unknown=ignore_unknown,
            name=name,
            comm_groups=Path(comm_groups) if comm_groups is not None else None,
            as_dimensions=groups == "dimensions",
        )
    if suffix != ".json":
        raise InputError(str(network_path), "must be an ASTRA-sim 1.0 network .json or a 2.x network .yml")
    if comm_groups is not None or groups != "as-astra":
        raise InputError("comm_groups", "communicator groups are ASTRA-sim 2.x's: 1.0 has none")
    net = v1.read_network(network_path, ignore_unknown=ignore_unknown)
    system = v1.read_system(system_path, len(net.dimensions), ignore_unknown=ignore_unknown)
    network = v1.network_of(net, system, injection_scale)
    if workload is not None:
        plan = scaled(parse_workload(workload), comm=comm_scale, compute=compute_scale)
    else:
        assert all_reduce_bytes is not None
        layer = Layer("all_reduce", 0, None, 0, 0, None, 0, 0, Kind.ALL_REDUCE, all_reduce_bytes, 0)
        plan = scaled(Workload("MICRO", (layer,), name="all_reduce"), comm=comm_scale)
    cut = Cut(system.splits, astra=True, policy=system.policy, spans=v1.spans(system))
    try:
        instance = task_graph(plan, network, passes=passes, cut=cut, name=name or network_path.stem)
    except InputError as error:
        where = str(workload) if workload is not None else "import-astra"
        raise InputError(f"{where}: {error.path}" if error.path else where, error.problem) from None
    _check_runs(instance, system, system_path, len(net.dimensions))
    notes = [*net.notes, *system.notes, *plan.notes]
    if system.method == "themis" and system.active_chunks > 1 and len(instance.collectives) > 1:
        notes.append(
            f"{system_path.name}: Themis with {system.active_chunks} chunks at once and several collectives: "
            "ASTRA-sim 1.0's times are reproduced within 1% on most such runs, not all (its samples: 290 of 300)"
        )
    metadata = dict(instance.metadata)
    metadata.update(
        {
            "source": f"ASTRA-sim 1.0: {network_path.name}, {system_path.name}"
            + (f", {Path(workload).name}" if workload is not None else ""),
            "astra_method": system.method,
            "astra_intra": system.intra,
            "astra_scheduling_policy": system.policy,
            "astra_passes": str(passes),
            "astra_splits": str(system.splits),
            **({"astra_notes": "; ".join(notes)} if notes else {}),
        }
    )
    return Instance(instance.network, instance.tasks, instance.name, tuple(sorted(metadata.items())))


def _check_runs(instance: Instance, system: SystemFile, system_path: Path, physical: int) -> None:
    """Refuse the collectives ASTRA-sim 1.0 crashes on as soon as they run: a kind whose list ends
    in a double binary tree short of the network; under Themis, which plans over every dimension of
    the network, a kind whose list leaves some out (``dim: 1 requested! but max dim is: 0``).
    """
    for c, coll in enumerate(instance.collectives):
        implementation = system.implementations[coll.kind]
        if implementation.broken:
            raise InputError(f"{system_path}: {IMPLEMENTATION_KEYS[coll.kind]}", implementation.broken)
        if implementation.algorithms[0] is Algorithm.ONE_RING:
            (phase, *_) = chunk_plan(instance, c, coll.chunk_bytes, instance.active_dims[c])
            if flattened_ring_stalls(instance.network, phase.op, phase.bytes_in):
                raise InputError(
                    f"{system_path}: {IMPLEMENTATION_KEYS[coll.kind]}",
                    f"'oneRing' on links this unequal: an NPU sends a step before the next has asked for the "
                    f"last one, and ASTRA-sim 1.0 never finishes {coll.id}",
                )
        if coll.kind is Kind.ALL_TO_ALL or system.method != "themis":
            continue  # Themis does not plan all-to-alls
        if implementation.span < physical:
            raise InputError(
                f"{system_path}: {IMPLEMENTATION_KEYS[coll.kind]}",
                f"{implementation.text!r} spans {implementation.span} of the network's {physical} dimensions: "
                "ASTRA-sim 1.0's Themis plans over all of them and reads past the list (it crashes, or runs "
                "with dimensions missing); use inter-dimension-scheduling: baseline",
            )


def _import_v2(
    network_path: Path,
    system_path: Path,
    *,
    all_reduce_bytes: int | None,
    workload: Path | None,
    injection_scale: float,
    ignore_unknown: bool,
    name: str | None,
    comm_groups: Path | None = None,
    as_dimensions: bool = False,
) -> Instance:
    """One all-reduce of ``all_reduce_bytes``, or the Chakra traces ``workload`` (a prefix), on a
    2.x network and system.
    """
    dims = v2.read_network(network_path)
    system = v2.read_system(system_path, len(dims), ignore_unknown=ignore_unknown, injection_scale=injection_scale)
    try:
        network = v2.network_of(dims, system)
    except InputError as error:
        raise InputError(f"{network_path}: {error.path}", error.problem) from None
    notes = list(system.notes)
    stage_npus: tuple[int, ...] = ()
    if workload is None:
        assert all_reduce_bytes is not None
        coll, note = v2.collective(
            Kind.ALL_REDUCE, all_reduce_bytes, None, network, system, "all_reduce_bytes", id="all_reduce"
        )
        tasks: tuple[Collective | Compute, ...] = (coll,)
        notes += [note] if note else []
        source = f"ASTRA-sim 2.x: {network_path.name}, {system_path.name}"
    else:
        found = read_comm_groups(comm_groups, network.num_npus) if comm_groups is not None else None
        from themis_opt.workloads.astra2 import serialised

        unchained, trace_notes, stage_npus = chakra.trace_tasks(
            workload, network, system, found, as_dimensions=as_dimensions
        )
        tasks, chain_note = serialised(unchained, network, stage_npus)
        notes += [*trace_notes, *([chain_note] if chain_note else [])]
        source = f"ASTRA-sim 2.x: {network_path.name}, {system_path.name}, {workload.name}.*.et"
        source += f", {comm_groups.name}" if comm_groups is not None else ""
    metadata = {
        "source": source,
        "astra_method": "baseline",
        "astra_intra": "fifo",
        "astra_scheduling_policy": system.policy,
        "astra_splits": str(system.splits),
        **({"astra_notes": "; ".join(notes)} if notes else {}),
    }
    try:
        return Instance(network, tasks, name or network_path.stem, tuple(sorted(metadata.items())), stage_npus)
    except InputError as error:
        where = str(workload) if workload is not None else str(network_path)
        raise InputError(f"{where}: {error.path}" if error.path else where, error.problem) from None
