"""ASTRA-sim input files that run the same case as an instance.

1.0: ``network.json``, ``system.txt`` and a MICRO ``workload.txt`` (one
collective over every dimension, issued at 0, no compute tasks); 2.x:
``network.yml``, ``system.json``, one Chakra trace per NPU
(``workload.<npu>.et``: a compute node per compute task, a collective node
per collective, a send and a receive node per send, the dependencies; the
``[chakra]`` extra writes them) and, with groups, ``comm_groups.json``.
Anything ASTRA-sim cannot express is an error; :func:`fit_astra_2` makes an
instance expressible by 2.x where rounding, cutting and chaining can.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from themis_opt.cost.steps import link_gbps
from themis_opt.errors import InputError, counted
from themis_opt.fileio import atomic_folder, check_apart, check_new_folder, write_text
from themis_opt.formats.astra.etfiles import TraceNode, write_trace
from themis_opt.formats.astra.export_settings import (
    FREE_REDUCTIONS_GBPS as FREE_REDUCTIONS_GBPS,
    V2_SUPPORTED as V2_SUPPORTED,
    _check_algorithms as _check_algorithms,
    _cut_as_astra_1 as _cut_as_astra_1,
    _expressible as _expressible,
    _implementation as _implementation,
    _kept_settings as _kept_settings,
    _links as _links,
    _name_of as _name_of,
    _settings as _settings,
    _splits as _splits,
    _system_json as _system_json,
    _topology_name as _topology_name,
    _v2_list as _v2_list,
)
from themis_opt.formats.astra.export_traces import (
    _check_one_at_a_time as _check_one_at_a_time,
    _comm_size as _comm_size,
    _Node as _Node,
    _node_ids as _node_ids,
    _receive as _receive,
    _tiles as _tiles,
    _traces as _traces,
    _within_stage as _within_stage,
    gathered_over as gathered_over,
    stage_members as stage_members,
)
from themis_opt.formats.astra.files import IMPLEMENTATION_KEYS, WORKLOAD_TYPES
from themis_opt.instance import AllReducePhases, Collective, Compute, Instance, Kind, Topology


def _version_2(instance: Instance) -> tuple[dict[str, str], dict[str, list[TraceNode]]]:
    """ASTRA-sim 2.x's network YAML, system JSON, one Chakra trace per NPU (``workload.<npu>.et``) and,
    when a collective runs in a group, the communicator-group file (``comm_groups.json``).
    """
    network = instance.network
    dims = network.dimensions
    per_link = []
    for d in dims:
        links = d.size - 1 if d.topology is Topology.FULLY_CONNECTED else 1
        share = link_gbps(d)
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
    _check_algorithms(network)
    splits = _splits(instance)
    system = _system_json(network, splits)
    members = stage_members(instance)
    for task in instance.tasks:
        where = f"export-astra: {task.id}"
        if task.issue_ns:
            raise InputError(where, "an issue time: ASTRA-sim 2.x starts a node when its dependencies end")
        if any(dep.lag_ns for dep in task.after):
            raise InputError(where, "a dependency with a lag: ASTRA-sim 2.x has none")
    _check_one_at_a_time(instance)
    traces, groups = _traces(instance, members)
    files = {"network.yml": network_yml, "system.json": json.dumps(system, indent=2) + "\n"}
    if groups:
        lines = ",\n".join(f'  "{n}": {json.dumps(list(group))}' for group, n in groups.items())
        files[GROUP_FILE] = "{\n" + lines + "\n}\n"
    return files, traces


GROUP_FILE = "comm_groups.json"  # the communicator groups, for 2.x's --comm-group-configuration
MAX_RECUTS = 4  # an all-gather's cut again from its inflated input: the second cut stays (its chunks divide it)


def fit_astra_2(instance: Instance) -> tuple[Instance, list[str]]:
    """The instance made expressible by ASTRA-sim 2.x, and notes saying what changed.

    * every compute time rounded to whole microseconds (2.x replays
      ``duration_micros``; one that rounds to 0 takes 1 ns, as 2.x runs a
      node of 0);
    * every collective cut as 2.x cuts it, with one split count for all (the
      chunk count most of them have): ``size // splits`` bytes a chunk, each
      full size, inflated to the NPU count where smaller (all-gathers aside);
    * every stage's collectives and sends chained in the order 2.x runs them,
      one at a time per NPU (:func:`~themis_opt.workloads.astra2.serialised`).

    What :func:`export_astra` refuses for other reasons (issue times, lags, a
    message overhead...) is left as it is.
    """
    from themis_opt.formats.astra.v2 import collective
    from themis_opt.workloads.astra2 import serialised

    network = instance.network
    counts = Counter(c.chunks for c in instance.collectives if c.kind is not Kind.SEND)
    splits = max(counts, key=lambda k: counts[k]) if counts else 1  # ties: the first met
    system = _settings(network, splits)
    tasks: list[Collective | Compute] = []
    rounded = recut = 0
    for task in instance.tasks:
        if isinstance(task, Compute):
            micros = round(task.duration_ns / 1000.0)
            duration = 1000.0 * micros if micros else 1.0
            rounded += duration != task.duration_ns
            tasks.append(dataclasses.replace(task, duration_ns=duration))
            continue
        if task.kind is Kind.SEND:
            tasks.append(task)
            continue
        c = instance.collectives.index(task)
        involved = None if task.group else tuple(d in instance.active_dims[c] for d in range(network.num_dims))
        size, npus = _comm_size(instance, c), gathered_over(instance, c)
        for _ in range(MAX_RECUTS):  # an all-gather inflated to whole chunks: cut again from its new input
            cut, _ = collective(
                task.kind, size, involved, network, system, f"export-astra: {task.id}",
                id=task.id, after=task.after, group=task.group,
            )  # fmt: skip
            if cut.size_bytes // npus == size:
                break
            size = cut.size_bytes // npus
        cut = dataclasses.replace(cut, issue_ns=task.issue_ns, priority=task.priority, stage=task.stage)
        recut += (cut.chunks, cut.chunk_bytes, cut.size_bytes) != (task.chunks, task.chunk_bytes, task.size_bytes)
        tasks.append(cut)
    chained, _ = serialised(tasks, network, instance.stage_npus)
    linked = sum(a.after != b.after for a, b in zip(tasks, chained))
    notes = [
        f"{counted(rounded, 'compute time')} rounded to whole microseconds",
        f"{counted(recut, 'collective')} cut as ASTRA-sim 2.x cuts them (size // {splits} bytes a chunk)",
        f"{counted(linked, 'collective or send', 'collectives or sends')} chained in the order ASTRA-sim 2.x runs "
        "them (one at a time per NPU)",
    ]
    fitted = Instance(network, chained, instance.name, instance.metadata, instance.stage_npus)
    return fitted, notes


def export_astra(
    instance: Instance,
    version: int,
    out: str | Path,
    method: str | None = None,
    keep: Sequence[str | Path] = (),
    *,
    force: bool = False,
) -> list[Path]:
    """Write ASTRA-sim input files for ``instance`` into folder ``out``; returns the files written.

    The folder is written whole or not at all (:func:`~themis_opt.fileio.atomic_folder`): ``out``
    must be new or empty, or with ``force`` it is replaced whole. Files of ``keep`` (the inputs)
    must not be in it: that is an error, before any file is written.

    ``method`` (``baseline`` or ``themis``, default themis) chooses the
    inter-dimension scheduling a 1.0 system file asks for; Themis is written
    with SCF, the baseline with FIFO, as themis_opt's defaults. ASTRA-sim
    2.x always runs the baseline: a method is an error there.

    For 2.x every NPU gets a trace: its pipeline stage's tasks
    (:func:`stage_members` says which NPUs run which stage), each group and
    the other NPU of each send or receive moved to it; a collective in a
    group names its group in ``pg_name``, and the groups go to
    ``comm_groups.json`` (2.x's ``--comm-group-configuration``); a send is a
    ``COMM_SEND_NODE`` and the receiving stage gets its ``COMM_RECV_NODE``,
    which the tasks that wait for the send wait for. An instance 2.x would
    time otherwise (collectives that may run beside each other, compute
    times not whole microseconds, chunks it would not cut) is an error;
    :func:`fit_astra_2` makes one expressible.
    """
    if version == 2 and method is not None:
        raise InputError("method", "ASTRA-sim 2.x always runs the baseline (it reads no scheduling keys)")
    method = method or "themis"
    if method not in ("baseline", "themis"):
        raise InputError("method", f"must be baseline or themis, got {method!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    check_new_folder(out, force=force, keep=keep)
    dims = instance.network.dimensions
    if any(d.carved for d in dims):
        raise InputError("export-astra", "a dimension carved from another is ASTRA-sim's own split: not written")
    if version == 1 and (instance.num_stages > 1 or instance.has_sends):
        raise InputError("export-astra", "pipeline stages and sends are ASTRA-sim 2.x's: write them with --version 2")
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
    with atomic_folder(out, force=force) as folder:
        for file, text in files.items():
            write_text(folder / file, text)
        for file, nodes in traces.items():
            write_trace(folder / file, nodes)
    return [out / file for file in [*files, *traces]]
