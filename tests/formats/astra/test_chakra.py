"""ASTRA-sim 2.x: Chakra traces written here with mlc-chakra, system keys, times computed by hand."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.formats.astra import import_astra
from themis_opt.formats.astra.etfiles import TraceNode, write_trace
from themis_opt.instance import Collective, Kind
from themis_opt.solving import solve
from themis_opt.validator import validate

pytest.importorskip("chakra", reason='the chakra extra is not installed (pip install -e ".[chakra]")')

MIB = 2**20
RING4 = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
}
# one 256 KiB chunk's all-reduce on the ring of 4 (50 GB/s of 2^30 bytes, 500 ns, 10 ns endpoint delay):
# 6 messages of 64 KiB, each floor(500 + 65536 / 53.687) = 1720 ns plus 10 ns, one more 10 ns at the
# start, and the first 3 receipts reduced at 1600 GB/s: 3 x floor(65536 / 1600) = 120 ns each
CHUNK_AR_NS = 10 + 6 * (1720 + 10) + 3 * 120


def _files(tmp_path: Path, system: dict[str, Any] | None = None, network: str = RING4) -> tuple[Path, Path]:
    net, sys_file = tmp_path / "net.yml", tmp_path / "sys.json"
    net.write_text(network)
    sys_file.write_text(json.dumps(system or SYSTEM))
    return net, sys_file


def _node(id: int, type: str, *, data: tuple[int, ...] = (), ctrl: tuple[int, ...] = (), **attrs: Any) -> TraceNode:
    duration = attrs.pop("duration_micros", 0)
    return TraceNode(id, f"node{id}", type, data, ctrl, duration, tuple(attrs.items()))


def _traces(tmp_path: Path, nodes: list[TraceNode], npus: int = 4, differ: int | None = None) -> Path:
    """The same graph for every NPU, its ids offset per NPU as the converters write them."""
    for npu in range(npus):
        shift = 100 * npu
        mine = [
            TraceNode(
                n.id + shift,
                n.name,
                n.type,
                tuple(d + shift for d in n.data_deps),
                tuple(d + shift for d in n.ctrl_deps),
                n.duration_micros + (1 if npu == differ and i == 0 else 0),
                n.attrs,
            )
            for i, n in enumerate(nodes)
        ]
        write_trace(tmp_path / f"trace.{npu}.et", mine)
    return tmp_path / "trace"


def test_one_all_reduce_takes_four_chunks_in_turn(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    prefix = _traces(tmp_path, [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB)])
    instance = import_astra(net, system, workload=prefix)
    (coll,) = instance.collectives
    assert (coll.kind, coll.size_bytes, coll.chunks) == (Kind.ALL_REDUCE, MIB, 4)
    result = solve(instance, "baseline")
    assert result.makespan == 4 * CHUNK_AR_NS  # one dimension: the chunks queue


def test_compute_and_both_kinds_of_dependency(tmp_path: Path) -> None:
    # 2 us of compute, then the all-reduce (a data dependency), then a compute of 0 us (1 ns; a control
    # dependency), and beside them a 3 us compute that only waits for the first
    nodes = [
        _node(0, "COMP_NODE", duration_micros=2),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
        _node(2, "COMP_NODE", ctrl=(1,)),
        _node(3, "COMP_NODE", data=(0,), duration_micros=3),
    ]
    net, system = _files(tmp_path)
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    assert [t.duration_ns for t in instance.computes] == [2000.0, 1.0, 3000.0]
    result = solve(instance, "baseline")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.makespan == 2000 + 4 * CHUNK_AR_NS + 1
    for method in ("themis", "balanced", "cpsat"):
        other = solve(instance, method, time_limit=10, workers=1)
        assert other.schedule is not None and validate(instance, other.schedule) == []
        assert other.lower_bound <= other.makespan  # type: ignore[operator]


def test_collectives_run_one_at_a_time_lowest_ready_id_first(tmp_path: Path) -> None:
    # node 2 is ready at 0 and takes the network until 43 us; node 1, ready at 2 us, waits for it;
    # node 3's compute waits for node 2 only
    nodes = [
        _node(0, "COMP_NODE", duration_micros=2),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
        _node(2, "COMM_COLL_NODE", comm_type=0, comm_size=MIB),
        _node(3, "COMP_NODE", data=(2,), duration_micros=1),
    ]
    net, system = _files(tmp_path)
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    first, second = instance.collectives
    assert {d.task for d in first.after} == {"n0", "n2"} and not second.after
    assert "n2 -> n1" in dict(instance.metadata)["astra_notes"]
    result = solve(instance, "baseline")
    assert result.makespan == 2 * 4 * CHUNK_AR_NS
    assert result.schedule is not None and validate(instance, result.schedule) == []


def test_the_roofline_times_compute_from_its_operations(tmp_path: Path) -> None:
    # 10^9 operations on 10^6 bytes at 1600 GB/s: 1.6 * 10^15 op/s by memory, capped at 900 TFLOPS
    net, system = _files(tmp_path, {**SYSTEM, "roofline-enabled": 1, "peak-perf": 900})
    nodes = [
        _node(0, "COMP_NODE", duration_micros=7, num_ops=10**9, tensor_size=10**6),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
    ]
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    assert instance.computes[0].duration_ns == int(10**9 / 900e12 * 1e9)


def test_a_small_collective_is_inflated_and_an_all_gather_is_its_inputs(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    nodes = [
        _node(0, "COMM_COLL_NODE", comm_type=0, comm_size=10),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=2, comm_size=MIB),
    ]
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    small, gather = instance.collectives
    assert (small.chunks, small.chunk_bytes, small.size_bytes) == (4, 4, 16)  # 10 // 4 < 4 NPUs: 4 bytes each
    assert (gather.kind, gather.size_bytes, gather.chunks) == (Kind.ALL_GATHER, 4 * MIB, 4)  # every NPU's input
    assert "inflated" in dict(instance.metadata)["astra_notes"]


def test_involved_dimensions_select_the_phases(tmp_path: Path) -> None:
    net2 = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 800.0 ]\n"
    system = {**SYSTEM, **{k: ["ring", "ring"] for k in SYSTEM if k.endswith("implementation")}}
    net, sys_file = _files(tmp_path, system, net2)
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=7, comm_size=MIB, involved_dim=(False, True))]
    instance = import_astra(net, sys_file, workload=_traces(tmp_path, nodes, npus=8))
    assert instance.active_dims[0] == (1,)
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=7, comm_size=MIB, involved_dim=(False, False))]
    with pytest.raises(InputError, match="involves no dimension"):
        import_astra(net, sys_file, workload=_traces(tmp_path, nodes, npus=8))


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([_node(0, "COMM_SEND_NODE")], "has no comm_dst"),
        ([_node(0, "MEM_LOAD_NODE")], "remote memory accesses are not modelled"),
        ([_node(0, "METADATA_NODE")], "metadata node: ASTRA-sim 2.x aborts"),
        ([_node(0, "INVALID_NODE")], "skips it and may never issue its children"),
        ([_node(0, "COMP_NODE", is_cpu_op=True)], "runs on the CPU"),
        ([_node(0, "COMM_COLL_NODE", comm_type=5, comm_size=8)], "a BROADCAST collective is not modelled"),
        ([_node(0, "COMM_COLL_NODE", comm_type=0)], "has no comm_size"),
        ([_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=8, pg_name="3")], "communicator group '3'"),
        ([_node(0, "COMP_NODE", data=(7,))], "depends on node 7, which is not in the trace"),
    ],
)
def test_what_is_not_modelled_or_breaks_astra_sim_is_refused(
    tmp_path: Path, nodes: list[TraceNode], message: str
) -> None:
    net, system = _files(tmp_path)
    with pytest.raises(InputError, match=message) as error:
        import_astra(net, system, workload=_traces(tmp_path, nodes))
    assert "trace.0.et" in str(error.value) and "\n" not in str(error.value)


def test_a_trace_whose_npus_differ_is_refused_naming_the_first(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    nodes = [
        _node(0, "COMP_NODE", duration_micros=1),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
    ]
    with pytest.raises(InputError, match=r"trace\.2\.et: node 200 .*NPU 2 differs from NPU 0's node 0"):
        import_astra(net, system, workload=_traces(tmp_path, nodes, differ=2))
    three = tmp_path / "three"
    three.mkdir()
    with pytest.raises(InputError, match=r"trace\.3\.et: no such trace: the network has 4 NPUs"):
        import_astra(net, system, workload=_traces(three, nodes, npus=3))


def test_a_file_that_is_not_a_trace_is_one_line(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    for npu in range(4):
        (tmp_path / f"bad.{npu}.et").write_bytes(b"\xd8\xff\x00garbage")
    with pytest.raises(InputError, match=r"bad\.0\.et: not a Chakra trace"):
        import_astra(net, system, workload=tmp_path / "bad")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"active-chunks-per-dimension": 0}, "no chunk ever starts"),
        ({"preferred-dataset-splits": 0}, "divides by it and crashes"),
        ({"scheduling-policy": None}, "scheduling-policy: missing"),
        ({"collective-optimization": "fast"}, "unknown 'fast'"),
        ({"roofline-enabled": False}, "reads false as on: write 0 or 1"),
        ({"model-shared-bus": 1}, "LogGP"),
        ({"all-reduce-implementation": ["ring", "ring"]}, "names 2 algorithms for 1 dimension"),
        ({"all-reduce-implementation": ["direct4"]}, "a window of direct messages is not modelled"),
        ({"all-reduce-implementation": ["magic"]}, "not an algorithm ASTRA-sim 2.x knows"),
        ({"endpoint-delay": 0}, "ASTRA-sim 2.x aborts"),
        ({"colective-optimization": "baseline"}, "unknown key"),
        ({"L": "x"}, "L: must be a number"),
        ({"local-reduction-delay": True}, "local-reduction-delay: must be a number"),
    ],
)
def test_system_keys_are_modelled_or_refused(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    system = {k: v for k, v in {**SYSTEM, **change}.items() if v is not None}
    net, sys_file = _files(tmp_path, system)
    with pytest.raises(InputError, match=message):
        import_astra(net, sys_file, all_reduce_bytes=MIB)


def test_keys_without_effect_are_noted_and_a_halving_doubling_all_to_all_only_fails_when_run(tmp_path: Path) -> None:
    system = {
        **SYSTEM,
        "boost-mode": 1,
        "inter-dimension-scheduling": "themis",
        "all-to-all-implementation": ["halvingDoubling"],
    }
    net, sys_file = _files(tmp_path, system)
    notes = dict(import_astra(net, sys_file, all_reduce_bytes=MIB).metadata)["astra_notes"]
    assert "boost-mode has no effect" in notes and "inter-dimension-scheduling is never read" in notes
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=6, comm_size=MIB)]
    with pytest.raises(InputError, match="all-to-all with halvingDoubling"):
        import_astra(net, sys_file, workload=_traces(tmp_path, nodes))


def test_fractions_where_astra_sim_reads_whole_numbers_are_cut_as_there_and_noted(tmp_path: Path) -> None:
    system = {**SYSTEM, "preferred-dataset-splits": 4.7, "active-chunks-per-dimension": 2.5, "endpoint-delay": 10.9}
    net, sys_file = _files(tmp_path, system)
    instance = import_astra(net, sys_file, all_reduce_bytes=MIB)
    (tmp_path / "whole").mkdir()
    whole_files = _files(tmp_path / "whole", {**SYSTEM, "active-chunks-per-dimension": 2})
    whole = import_astra(*whole_files, all_reduce_bytes=MIB)
    assert instance.collectives[0].chunks == whole.collectives[0].chunks == 4
    assert instance.network == whole.network and instance.network.active_chunks == 2
    notes = dict(instance.metadata)["astra_notes"]
    for key, value, read in (("preferred-dataset-splits", 4.7, 4), ("active-chunks-per-dimension", 2.5, 2)):
        assert f"{key} {value:g} is read as {read}" in notes
    assert "endpoint-delay 10.9 is read as 10" in notes


def test_involved_dims_past_the_implementation_list_are_noted_as_unread(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB, involved_dim=(True, True, False))]
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    assert instance.collectives[0].dimensions == (0,)
    notes = dict(instance.metadata)["astra_notes"]
    assert "node 0 (node0): involved_dim's entries past the first 1 are not read" in notes
    (tmp_path / "quiet").mkdir()
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB, involved_dim=(True, False))]
    quiet = import_astra(net, system, workload=_traces(tmp_path / "quiet", nodes))
    assert "involved_dim" not in dict(quiet.metadata).get("astra_notes", "")


def test_traces_past_the_networks_npus_are_noted_as_unread(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB)]
    prefix = _traces(tmp_path, nodes, npus=6)  # two more than the ring of 4
    (tmp_path / "trace.x.et").write_bytes(b"")  # not an NPU's name: not ASTRA-sim's either
    instance = import_astra(net, system, workload=prefix)
    assert (
        "2 traces past the network's 4 NPUs not read (trace.4.et, trace.5.et)" in dict(instance.metadata)["astra_notes"]
    )
    (tmp_path / "four").mkdir()
    four = import_astra(net, system, workload=_traces(tmp_path / "four", nodes))
    assert instance.tasks == four.tasks and "not read" not in dict(four.metadata).get("astra_notes", "")
    assert "involved_dim" not in dict(four.metadata).get("astra_notes", "")  # none given: nothing unread


def test_the_cli_imports_a_trace_and_says_so_without_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    net, system = _files(tmp_path)
    prefix = _traces(tmp_path, [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB)])
    out = tmp_path / "i.json"
    assert main(["import-astra", str(net), str(system), "--workload", str(prefix), "--out", str(out)]) == 0
    assert main(["solve", str(out), "--method", "baseline"]) == 0
    assert "43.000 µs" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "chakra", None)  # as if mlc-chakra were not installed
    monkeypatch.setitem(sys.modules, "chakra.schema", None)
    monkeypatch.setitem(sys.modules, "chakra.schema.protobuf", None)
    code = main(["import-astra", str(net), str(system), "--workload", str(prefix), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and 'pip install -e ".[chakra]"' in err and err.count("\n") == 1


def test_an_export_imports_as_the_same_instance(tmp_path: Path) -> None:
    from themis_opt.formats.astra import export_astra

    nodes = [
        _node(0, "COMP_NODE", duration_micros=2),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
        _node(2, "COMM_COLL_NODE", comm_type=2, comm_size=MIB),
        _node(3, "COMP_NODE", data=(2,), duration_micros=1),
    ]
    net, system = _files(tmp_path)
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    files = export_astra(instance, 2, tmp_path / "out")
    assert {f.name for f in files} == {"network.yml", "system.json", *(f"workload.{n}.et" for n in range(4))}
    again = import_astra(
        tmp_path / "out" / "network.yml", tmp_path / "out" / "system.json", workload=tmp_path / "out" / "workload"
    )
    assert again.network == instance.network and again.tasks == instance.tasks


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"issue_ns": 5.0}, "an issue time"),
        ({"duration_ns": 1500.0}, "replays whole microseconds"),
    ],
)
def test_what_astra_2x_cannot_express_is_not_exported(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    import dataclasses

    from themis_opt.formats.astra import export_astra
    from themis_opt.instance import Instance

    net, system = _files(tmp_path)
    nodes = [
        _node(0, "COMP_NODE", duration_micros=2),
        _node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
    ]
    instance = import_astra(net, system, workload=_traces(tmp_path, nodes))
    (compute,), (coll,) = instance.computes, instance.collectives
    broken = Instance(instance.network, (dataclasses.replace(compute, **change), coll))
    with pytest.raises(InputError, match=message):
        export_astra(broken, 2, tmp_path / "out")
    alone = dataclasses.replace(coll, after=())
    two = Instance(instance.network, (alone, dataclasses.replace(alone, id="other")))
    with pytest.raises(InputError, match="may run beside"):
        export_astra(two, 2, tmp_path / "out")
    with pytest.raises(InputError, match="always runs the baseline"):
        export_astra(instance, 2, tmp_path / "out", "themis")


NET_2D = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 200.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n"
# one 4 MiB all-reduce chunk over all 16 NPUs of ring 4 (200 GB/s of 2^30 bytes, 500 ns) x switch 4 (50,
# 1000 ns), every message charged on the innermost dimension the two NPUs differ in, its latency and
# bytes truncated as one sum, 10 ns endpoint delay a step and once a phase, reductions at 1600 GB/s:
# * oneRing: 30 steps of 256 KiB to the next NPU, always on the ring (1 hop): floor(500 + 1220.7) + 10,
#   the first 15 receipts reduced: 3 x floor(262144 / 1600) each;
# * oneDirect: 2 steps of 256 KiB to every NPU at once, the slowest through the switch (NPUs 4, 8, 12:
#   2 hops): floor(2000 + 4882.8) + 10, the receipts reduced once;
# * oneHalvingDoubling: partners 1 and 2 apart on the ring (1 and 2 hops), 4 and 8 through the switch,
#   with 2, 1, 0.5 and 0.25 MiB, and back; reduced on 1 MiB, 512 KiB and 256 KiB.
FLAT_AR_NS = {
    "oneRing": 10 + 30 * (1720 + 10) + 15 * 3 * 163,
    "oneDirect": 10 + 2 * (6882 + 10) + 3 * 163,
    "oneHalvingDoubling": 10 + 2 * (10265 + 5882 + 11765 + 6882 + 4 * 10) + 3 * (655 + 327 + 163),
}


@pytest.mark.parametrize("algorithm", sorted(FLAT_AR_NS))
def test_a_flattened_algorithm_runs_over_every_npu_charged_innermost(tmp_path: Path, algorithm: str) -> None:
    from themis_opt.formats.astra import export_astra

    system = {
        **SYSTEM,
        "preferred-dataset-splits": 1,
        **{k: [algorithm] for k in SYSTEM if k.endswith("implementation")},
    }
    net, sys_file = _files(tmp_path, system, NET_2D)
    nodes = [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=4 * MIB)]
    instance = import_astra(net, sys_file, workload=_traces(tmp_path, nodes, npus=16))
    assert instance.network.innermost_charge and instance.active_dims == ((0,),)
    result = solve(instance, "baseline")
    assert result.makespan == FLAT_AR_NS[algorithm]
    assert result.schedule is not None and validate(instance, result.schedule) == []
    export_astra(instance, 2, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "system.json").read_text())["all-reduce-implementation"] == [algorithm]
    again = import_astra(
        tmp_path / "out" / "network.yml", tmp_path / "out" / "system.json", workload=tmp_path / "out" / "workload"
    )
    assert again.network == instance.network and again.tasks == instance.tasks


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["ring", "oneRing"], "'oneRing' after other dimensions is not modelled"),
        (["oneDirect", "ring"], "'oneDirect' runs over every NPU: ASTRA-sim 2.x ignores the rest"),
        (["doubleBinaryTree", "ring"], "NPUs finish a tree at different times"),
    ],
)
def test_flattened_lists_with_more_and_trees_are_refused(tmp_path: Path, names: list[str], message: str) -> None:
    system = {**SYSTEM, "all-reduce-implementation": names}
    net, sys_file = _files(tmp_path, system, NET_2D)
    with pytest.raises(InputError, match=message):
        import_astra(net, sys_file, all_reduce_bytes=MIB)


def test_a_flattened_network_charged_outermost_is_not_exported_for_2x(tmp_path: Path) -> None:
    import dataclasses

    from themis_opt.formats.astra import export_astra
    from themis_opt.instance import Instance

    system = {**SYSTEM, **{k: ["oneRing"] for k in SYSTEM if k.endswith("implementation")}}
    net, sys_file = _files(tmp_path, system, NET_2D)
    instance = import_astra(net, sys_file, all_reduce_bytes=MIB)
    outermost = Instance(dataclasses.replace(instance.network, innermost_charge=False), instance.tasks)
    assert solve(outermost, "baseline").makespan != solve(instance, "baseline").makespan
    with pytest.raises(InputError, match="charged on the outermost dimension"):
        export_astra(outermost, 2, tmp_path / "out")


# Communicator groups, on a 4 x 4 network (dimension 0 a ring of 100 GB/s and 500 ns a hop, dimension 1 a switch
# of 50 GB/s and 1000 ns a hop, two hops through it), 4 splits, rings, local-mem-bw 1600 (1600 bytes a ns)
NET4X4 = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 100.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n"
RINGS = {**SYSTEM, **{k: ["ring", "ring"] for k in SYSTEM if k.endswith("-implementation")}}
# an all-reduce of 1 MiB on a group of 4 NPUs: 4 chunks of 256 KiB, one after another; each 2 x 3 steps of
# 64 KiB, every step 10 ns (a group's ring, not endpoint-delay) plus one message, and 10 ns at the start; the
# first 3 receipts reduced: 3 x floor(65536 / 1600) = 120 ns each
RING_DIM0_NS = 4 * (10 + 6 * (math.floor(500 + 65536 / (100 * 2**30 / 1e9)) + 10) + 3 * 120)  # 1 hop
RING_DIM1_NS = 4 * (10 + 6 * (math.floor(2 * 1000 + 65536 / (50 * 2**30 / 1e9)) + 10) + 3 * 120)  # 2 hops
DP = {str(1 + r): [4 * r + i for i in range(4)] for r in range(4)}  # rows of dimension 0
TP = {str(5 + i): [4 * r + i for r in range(4)] for i in range(4)}  # columns, across dimension 1


def _grouped_traces(tmp_path: Path, pgs: list[Any], npus: int = 16) -> Path:
    """Per NPU one all-reduce of 1 MiB per entry of ``pgs``, each after the one before; an entry is a group id,
    or a function of the NPU that gives its group id.
    """
    for npu in range(npus):
        nodes = []
        for n, pg in enumerate(pgs):
            name = pg(npu) if callable(pg) else pg
            nodes.append(
                TraceNode(
                    100 * npu + n,
                    f"ar{n}",
                    "COMM_COLL_NODE",
                    (100 * npu + n - 1,) if n else (),
                    (),
                    0,
                    (("comm_type", 0), ("comm_size", MIB), ("pg_name", name)),
                )
            )
        write_trace(tmp_path / f"trace.{npu}.et", nodes)
    return tmp_path / "trace"


def _groups(tmp_path: Path, groups: dict[str, list[int]]) -> Path:
    path = tmp_path / "groups.json"
    path.write_text(json.dumps(groups))
    return path


def test_data_and_tensor_parallel_groups_run_as_rings(tmp_path: Path) -> None:
    net, system = _files(tmp_path, RINGS, NET4X4)
    groups = _groups(tmp_path, {**DP, **TP})
    prefix = _grouped_traces(tmp_path, [lambda j: str(1 + j // 4), lambda j: str(5 + j % 4)])
    instance = import_astra(net, system, workload=prefix, comm_groups=groups)
    dp, tp = instance.collectives
    assert dp.group == (0, 1, 2, 3) and tp.group == (0, 4, 8, 12)
    assert instance.active_dims == ((0,), (1,))
    result = solve(instance, "baseline", intra="fifo")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.makespan == RING_DIM0_NS + RING_DIM1_NS  # one communication at a time: 28360 + 79000 ns
    for method in ("themis", "balanced", "cpsat"):
        other = solve(instance, method, time_limit=5)
        assert other.schedule is not None and validate(instance, other.schedule) == []
        assert other.makespan is not None and other.makespan >= other.lower_bound * (1 - 1e-9)


NET8X2 = "topology: [ Ring, Switch ]\nnpus_count: [ 8, 2 ]\nbandwidth: [ 100.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n"


@pytest.mark.parametrize(
    ("size", "chunks", "expected"),
    [
        # 4 chunks of 256 KiB on the ring 0, 1, 2, 3 of a ring of 8 (links of 1, 1, 1 and 3 hops: 1110 and
        # 2110 ns a message); each NPU runs its chunks back to back, so its chain of receipts crosses every
        # link 6 times: 4 x (10 + 6 x 10 + 3 x 120) + 6 x (3 x 1110 + 2110), not 4 times a chunk's dearest
        # 6 links (36,360)
        (MIB, 4, 4 * 430 + 6 * (3 * 1110 + 2110)),
        # 2 bytes more: 2.x cuts a fifth chunk of 256 KiB. 30 receipts: every link 7 times, then the dearest 2
        (MIB + 2, 5, 5 * 430 + 7 * (3 * 1110 + 2110) + 2110 + 1110),
    ],
)
def test_a_groups_chunks_chain_across_its_ring_as_in_2x(tmp_path: Path, size: int, chunks: int, expected: int) -> None:
    # ASTRA-sim 2.x (518bd51, measured 2026-12-04): 34,360 and 43,450 ns (sys[i] finished, largest)
    net, system = _files(tmp_path, RINGS, NET8X2)
    groups = _groups(tmp_path, {str(1 + r): [4 * r + i for i in range(4)] for r in range(4)})
    for npu in range(16):
        attrs = (("comm_type", 0), ("comm_size", size), ("pg_name", str(1 + npu // 4)))
        write_trace(tmp_path / f"trace.{npu}.et", [TraceNode(100 * npu, "ar", "COMM_COLL_NODE", (), (), 0, attrs)])
    instance = import_astra(net, system, workload=tmp_path / "trace", comm_groups=groups)
    (coll,) = instance.collectives
    assert (coll.group, coll.chunks, coll.chunk_bytes) == ((0, 1, 2, 3), chunks, MIB // 4)
    assert coll.last_chunk_bytes == MIB // 4  # 2.x's last chunk is a whole one
    result = solve(instance, "baseline", intra="fifo")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.makespan == expected


def test_a_group_of_every_npu_is_the_networks_own_plan(tmp_path: Path) -> None:
    net, system = _files(tmp_path, RINGS, NET4X4)
    groups = _groups(tmp_path, {"9": list(range(16))})
    everyone = import_astra(net, system, workload=_grouped_traces(tmp_path, ["9"]), comm_groups=groups)
    plain = import_astra(net, system, workload=_grouped_traces(tmp_path, [""]))
    assert everyone.collectives[0].group == () and everyone.collectives[0].dimensions == (0, 1)
    assert solve(everyone, "baseline").makespan == solve(plain, "baseline").makespan


def test_groups_as_dimensions_run_over_them(tmp_path: Path) -> None:
    net, system = _files(tmp_path, RINGS, NET4X4)
    groups = _groups(tmp_path, {**DP, **TP})
    prefix = _grouped_traces(tmp_path, [lambda j: str(1 + j // 4), lambda j: str(5 + j % 4)])
    instance = import_astra(net, system, workload=prefix, comm_groups=groups, groups="dimensions")
    assert [(c.group, c.dimensions) for c in instance.collectives] == [((), (0,)), ((), (1,))]
    notes = dict(instance.metadata)["astra_notes"]  # one note per dimension set, not per node
    assert "the groups of 1 collective run over dimensions [0] (--groups dimensions: nodes 0)" in notes
    assert "the groups of 1 collective run over dimensions [1] (--groups dimensions: nodes 1)" in notes


@pytest.mark.parametrize(
    ("groups", "pg", "message"),
    [
        ({**DP, **TP}, lambda j: "77", "communicator group 77 ('77') is not in the group file"),
        ({"1": [0, 2, 1, 3], "2": [4, 5, 6, 7], "3": [8, 9, 10, 11], "4": [12, 13, 14, 15]},
         lambda j: str(1 + j // 4), "NPU 4's group [4, 5, 6, 7] is not NPU 0's [0, 2, 1, 3], nor that ring moved"),
        ({"1": [1, 2, 3]}, lambda j: "1", "NPU 0 is not in its communicator"),
        ({"0": list(range(4))}, lambda j: "0", "0 is every NPU"),
        ({"1": [0, 1, 1]}, lambda j: "1", "names an NPU twice"),
        ({"1": [0, 16]}, lambda j: "1", "names NPU 16, but the network has 16 NPUs"),
        ({**DP, "9": []}, lambda j: str(1 + j // 4), "group '9': names no NPU"),
        ({**DP, "2147483648": [0, 1]}, lambda j: str(1 + j // 4), "the id 2147483648 is beyond a 32-bit int"),
        ({**DP, "x1": [0, 1]}, lambda j: str(1 + j // 4), "the id must start with a whole number, got 'x1'"),
        ({**DP, "01": [0, 1]}, lambda j: str(1 + j // 4), "id 1 is given twice (2.x reads '01' as 1)"),
        (DP, lambda j: "one", "pg_name: the id must start with a whole number, got 'one'"),
    ],
)  # fmt: skip
def test_groups_2x_cannot_run_or_asymmetric_ones_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], groups: dict[str, list[int]], pg: Any, message: str
) -> None:
    net, system = _files(tmp_path, RINGS, NET4X4)
    prefix = _grouped_traces(tmp_path, [pg])
    argv = ["import-astra", str(net), str(system), "--workload", str(prefix), "--out", str(tmp_path / "x.json")]
    assert main([*argv, "--comm-groups", str(_groups(tmp_path, groups))]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


def test_group_ids_are_read_as_2x_reads_them_with_stoi(tmp_path: Path) -> None:
    # "01", " 1" and "1_0" are group 1 to 2.x (std::stoi), in the group file and in a node's pg_name
    net, system = _files(tmp_path, RINGS, NET4X4)
    plain = import_astra(net, system, workload=_grouped_traces(tmp_path / "a", [lambda j: str(1 + j // 4)]),
                         comm_groups=_groups(tmp_path / "a", DP))  # fmt: skip
    spelled = {f"0{key}" if key == "1" else f"{key}_0": members for key, members in DP.items()}
    other = import_astra(net, system, workload=_grouped_traces(tmp_path / "b", [lambda j: f" {1 + j // 4}_x"]),
                         comm_groups=_groups(tmp_path / "b", spelled))  # fmt: skip
    assert [c.group for c in other.collectives] == [c.group for c in plain.collectives]
    assert [c.dimensions for c in other.collectives] == [c.dimensions for c in plain.collectives]


def test_groups_as_dimensions_that_changes_nothing_is_refused(tmp_path: Path) -> None:
    net, system = _files(tmp_path, RINGS, NET4X4)
    pairs = {str(1 + i): [2 * i, 2 * i + 1] for i in range(8)}  # halves of dimension 0: no whole dimension
    with pytest.raises(InputError, match="groups: dimensions changes nothing here"):
        import_astra(net, system, workload=_grouped_traces(tmp_path, [lambda j: str(1 + j // 2)]),
                     comm_groups=_groups(tmp_path, pairs), groups="dimensions")  # fmt: skip


def test_a_group_without_the_group_file_is_refused(tmp_path: Path) -> None:
    net, system = _files(tmp_path, RINGS, NET4X4)
    with pytest.raises(InputError, match="give the group file"):
        import_astra(net, system, workload=_grouped_traces(tmp_path, ["1"]))


@pytest.mark.parametrize("micros", [2**63 - 1, 10**12 + 1])
def test_a_compute_time_beyond_the_limits_names_the_file_node_and_key(micros: int, tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    traces = _traces(tmp_path, [_node(0, "COMP_NODE", duration_micros=micros)])
    with pytest.raises(InputError) as error:
        import_astra(net, system, workload=traces)
    assert str(error.value).startswith(f"{traces}.0.et: node 0 (node0): duration_micros: makes ")
    assert "must be <=" in str(error.value)


def test_a_collective_size_beyond_the_limits_names_the_file_and_node(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    traces = _traces(tmp_path, [_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=2**62)])
    with pytest.raises(InputError, match="size_bytes must be <=") as error:
        import_astra(net, system, workload=traces)
    assert str(error.value).startswith(f"{traces}.0.et: node 0 (node0): {2**62} bytes: ")


NET2X2 = "topology: [ Ring, Switch ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 100.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n"


def _pipeline(tmp_path: Path, back_tag: int = 8, stray: bool = False) -> tuple[Path, Path]:
    """Two stages on a ring 2 x switch 2: NPUs 0 and 1 compute and send activations to NPUs 2 and 3,
    which compute, send gradients back and all-reduce in pairs (groups [0, 1] and [2, 3]); NPU 3's
    receive comes from NPU 0 with ``stray``. The traces' prefix and the group file.
    """
    for npu in range(4):
        b, peer = 100 * npu, (npu + 2) % 4
        if stray and npu == 3:
            peer = 0
        if npu < 2:
            nodes = [
                _node(b, "COMP_NODE", duration_micros=1),
                _node(b + 1, "COMM_SEND_NODE", data=(b,), comm_dst=peer, comm_tag=7, comm_size=MIB),
                _node(b + 2, "COMM_RECV_NODE", comm_src=peer, comm_tag=8, comm_size=MIB),
                _node(b + 3, "COMP_NODE", data=(b + 2,), duration_micros=3),
                _node(b + 4, "COMM_COLL_NODE", data=(b + 3,), comm_type=0, comm_size=MIB, pg_name="1"),
            ]
        else:
            nodes = [
                _node(b, "COMM_RECV_NODE", comm_src=peer, comm_tag=7, comm_size=MIB),
                _node(b + 1, "COMP_NODE", data=(b,), duration_micros=2),
                _node(b + 2, "COMM_SEND_NODE", data=(b + 1,), comm_dst=peer, comm_tag=back_tag, comm_size=MIB),
                _node(b + 3, "COMM_COLL_NODE", data=(b + 1,), comm_type=0, comm_size=MIB, pg_name="2"),
            ]
        write_trace(tmp_path / f"trace.{npu}.et", nodes)
    return tmp_path / "trace", _groups(tmp_path, {"1": [0, 1], "2": [2, 3]})


def test_pipeline_stages_send_and_receive_as_astra_2x_times_them(tmp_path: Path) -> None:
    # Stage 0 (NPUs 0, 1) computes 1 us, then sends 1 MiB across the switch: floor(2 x 1000 + 2^20 / 53.687)
    # = 21531 ns, arriving at 22531. Stage 1 (NPUs 2, 3) receives it, computes 2 us (to 24531); its send back
    # (node 2) and its all-reduce (node 3) are ready at once and share one slot: the send first (lowest id),
    # arriving at 46062, then the all-reduce on the ring [2, 3]: 4 chunks of 256 KiB, each 3 x 10 ns plus
    # 2 messages of floor(500 + 131072 / 107.374) = 1720 ns plus one reduction of 3 x floor(131072 / 1600)
    # = 243 ns: 3713 ns, to 60914. Stage 0 computes 3 us once the gradients arrive (to 49062), then
    # all-reduces on [0, 1] to 63914. ASTRA-sim 2.x prints sys[0, 1] finished at 63914, sys[2, 3] at 60914.
    net, system = _files(tmp_path, RINGS, NET2X2)
    prefix, groups = _pipeline(tmp_path)
    instance = import_astra(net, system, workload=prefix, comm_groups=groups)
    assert instance.stage_npus == (0, 2)
    sends = [c for c in instance.collectives if c.kind is Kind.SEND]
    assert [(c.id, c.group, c.stage) for c in sends] == [("s0.n1", (0, 2), 0), ("s1.n202", (2, 0), 1)]
    backward = next(t for t in instance.tasks if t.id == "s0.n3")
    assert [d.task for d in backward.after] == ["s1.n202"]  # its receive stands for the send
    assert [d.task for d in next(t for t in instance.tasks if t.id == "s1.n203").after] == ["s1.n201", "s1.n202"]
    result = solve(instance, "baseline", intra="fifo")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.makespan == 63914.0
    ends = result.schedule.collective_ends(len(instance.collectives))
    assert max(e for e, c in zip(ends, instance.collectives) if c.stage == 1) == 60914.0
    for method in ("themis", "balanced", "cpsat"):
        other = solve(instance, method, time_limit=5)
        assert other.schedule is not None and validate(instance, other.schedule) == []
        assert other.lower_bound <= other.makespan <= 63914.0  # type: ignore[operator]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"back_tag": 9},
            r"trace\.0\.et: node 2 \(node2\): a receive from NPU 2 \(tag 8, 1048576 bytes\) that nothing",
        ),
        (
            {"stray": True},
            r"trace\.3\.et: node 300 \(node300\): NPU 3's comm_src is 0, not 1 \(NPU 2's 0 moved as NPU 3 is\)",
        ),
    ],
)
def test_an_unmatched_send_or_an_asymmetric_stage_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    import re

    net, system = _files(tmp_path, RINGS, NET2X2)
    prefix, groups = _pipeline(tmp_path, **change)
    out = tmp_path / "x.json"
    argv = ["import-astra", str(net), str(system), "--workload", str(prefix), "--comm-groups", str(groups)]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and err.count("\n") == 1
    assert not out.exists()


def _reimport(out: Path) -> Any:
    """The instance ASTRA-sim 2.x's files in ``out`` make (with their group file, if written)."""
    groups = out / "comm_groups.json"
    return import_astra(
        out / "network.yml",
        out / "system.json",
        workload=out / "workload",
        comm_groups=groups if groups.exists() else None,
    )


def test_an_export_with_groups_names_each_npus_group_and_imports_as_the_same_instance(tmp_path: Path) -> None:
    from themis_opt.formats.astra import export_astra

    net, system = _files(tmp_path, RINGS, NET4X4)
    groups = _groups(tmp_path, {**DP, **TP})
    prefix = _grouped_traces(tmp_path, [lambda j: str(1 + j // 4), lambda j: str(5 + j % 4)])
    instance = import_astra(net, system, workload=prefix, comm_groups=groups)
    files = export_astra(instance, 2, tmp_path / "out")
    assert "comm_groups.json" in {f.name for f in files}
    written = json.loads((tmp_path / "out" / "comm_groups.json").read_text())
    assert sorted(written.values()) == sorted([*DP.values(), *TP.values()])
    again = _reimport(tmp_path / "out")
    assert again.network == instance.network and again.tasks == instance.tasks
    result = solve(again, "baseline", intra="fifo")
    assert result.schedule is not None and validate(again, result.schedule) == []
    assert result.makespan == solve(instance, "baseline", intra="fifo").makespan == RING_DIM0_NS + RING_DIM1_NS


def test_a_group_is_moved_to_every_npu_so_that_its_moves_split_the_npus(tmp_path: Path) -> None:
    import dataclasses

    from themis_opt.formats.astra import export_astra
    from themis_opt.formats.astra.etfiles import read_trace
    from themis_opt.instance import Instance

    net, system = _files(tmp_path, RINGS, NET4X4)
    network = import_astra(net, system, all_reduce_bytes=MIB).network
    pair = Collective(Kind.ALL_REDUCE, MIB, 4, group=(1, 0))  # NPU 0's pair, in ring order 1 -> 0
    export_astra(Instance(network, (pair,)), 2, tmp_path / "out")
    written = json.loads((tmp_path / "out" / "comm_groups.json").read_text())
    assert written["1"] == [1, 0] and len(written) == 8  # the pairs {0, 1}, {2, 3}, ... of every row
    for npu in range(16):
        (node,) = read_trace(tmp_path / "out" / f"workload.{npu}.et")
        assert npu in written[node.attr("pg_name")]
    assert _reimport(tmp_path / "out").collectives[0].group == (1, 0)
    overlapping = dataclasses.replace(pair, group=(0, 1, 2))  # moved by one, it overlaps itself
    with pytest.raises(InputError, match=r"group \[0, 1, 2\] moved to NPU 3 overlaps another NPU's group"):
        export_astra(Instance(network, (overlapping,)), 2, tmp_path / "out2")


def _two_stages(tmp_path: Path) -> Any:
    """Two pipeline stages on ring 2 x switch 2 (NPUs 0, 1 and 2, 3) as a model would write them (its own
    task ids, collectives over a dimension, a send and an all-reduce ready at once): not yet expressible.
    """
    from themis_opt.instance import After, Compute, Instance

    net, system = _files(tmp_path, RINGS, NET2X2)
    network = import_astra(net, system, all_reduce_bytes=MIB).network
    tasks = (
        Compute(1000.0, "fwd0"),
        Collective(Kind.SEND, MIB, 1, id="act", after=(After("fwd0"),), group=(0, 2)),
        Compute(2400.0, "fwd1", after=(After("act"),), stage=1),
        Collective(Kind.SEND, MIB, 1, id="grad", after=(After("fwd1"),), group=(2, 0), stage=1),
        Collective(Kind.ALL_REDUCE, MIB, 4, dimensions=(0,), id="ar1", after=(After("fwd1"),), stage=1),
        Compute(3000.0, "bwd0", after=(After("grad"),)),
        Collective(Kind.ALL_REDUCE, MIB, 4, dimensions=(0,), id="ar0", after=(After("bwd0"),)),
    )
    return Instance(network, tasks, "two-stages", stage_npus=(0, 2))


def test_a_two_stage_pipeline_exports_with_sends_and_receives_and_imports_as_the_same_instance(
    tmp_path: Path,
) -> None:
    import dataclasses

    from themis_opt.formats.astra import export_astra
    from themis_opt.formats.astra.etfiles import read_trace
    from themis_opt.formats.astra.export import fit_astra_2

    instance = _two_stages(tmp_path)
    with pytest.raises(InputError, match=r"export-astra: ar1: may run beside grad: .* \(--fit chains them"):
        export_astra(instance, 2, tmp_path / "out")
    fitted, notes = fit_astra_2(instance)
    assert notes[0] == "1 compute time rounded to whole microseconds"
    assert [d.task for d in fitted.tasks[4].after] == ["fwd1", "grad"]  # the send first, as 2.x runs them
    files = export_astra(fitted, 2, tmp_path / "out")
    assert "comm_groups.json" not in {f.name for f in files}
    nodes = {npu: read_trace(tmp_path / "out" / f"workload.{npu}.et") for npu in range(4)}
    send = next(n for n in nodes[1] if n.type == "COMM_SEND_NODE")  # NPU 1 sends to NPU 3, which receives
    receive = next(n for n in nodes[3] if n.type == "COMM_RECV_NODE" and n.attr("comm_tag") == send.attr("comm_tag"))
    assert [n.attr(k) for n in (send, receive) for k in ("comm_src", "comm_dst")] == [1, 3, 1, 3]
    again = _reimport(tmp_path / "out")
    assert again.stage_npus == fitted.stage_npus == (0, 2)
    renamed = {f"s{t.stage}.n{n}": t.id for n, t in enumerate(fitted.tasks)}  # the import names tasks by node

    def named(task: Any) -> Any:
        after = tuple(dataclasses.replace(d, task=renamed[d.task]) for d in task.after)
        return dataclasses.replace(task, id=renamed[task.id], after=after)

    assert [named(t) for t in again.tasks] == sorted(fitted.tasks, key=lambda t: t.stage)  # stage by stage
    result = solve(again, "baseline", intra="fifo")
    assert result.schedule is not None and validate(again, result.schedule) == []
    # stage 0 computes 1 us and sends 1 MiB across the switch (21531 ns, to 22531); stage 1 computes 2 us (to
    # 24531), sends back (to 46062) and then all-reduces on its ring (3713 ns a chunk: to 60914); stage 0 computes
    # 3 us (to 49062) and all-reduces (to 63914): as the hand-made traces above
    assert result.makespan == solve(fitted, "baseline", intra="fifo").makespan == 63914.0


@pytest.mark.parametrize(
    ("task", "change", "message"),
    [
        ("ar0", {"after": ("fwd1",)}, r"export-astra: ar0: waits for fwd1 of stage 1: a stage waits for another only"),
        ("ar1", {"dimensions": (1,)}, r"export-astra: ar1: runs over dimensions \[1\], which reach NPU 0, beyond"),
        ("ar1", {"dimensions": None, "group": (2, 0)}, r"export-astra: ar1: group \[2, 0\] reaches beyond stage 1"),
    ],
)
def test_what_2x_cannot_run_of_pipeline_stages_is_refused(
    tmp_path: Path, task: str, change: dict[str, Any], message: str
) -> None:
    import dataclasses

    from themis_opt.formats.astra import export_astra
    from themis_opt.formats.astra.export import fit_astra_2
    from themis_opt.instance import After

    fitted, _ = fit_astra_2(_two_stages(tmp_path))
    if "after" in change:
        change = {"after": tuple(After(t) for t in change["after"])}
    tasks = tuple(dataclasses.replace(t, **change) if t.id == task else t for t in fitted.tasks)
    with pytest.raises(InputError, match=message):
        export_astra(dataclasses.replace(fitted, tasks=tasks), 2, tmp_path / "out")


def test_stages_that_do_not_split_the_network_along_dimensions_are_refused(tmp_path: Path) -> None:
    from themis_opt.formats.astra import export_astra
    from themis_opt.instance import Instance

    network = _two_stages(tmp_path).network
    pairs = (
        Collective(Kind.ALL_REDUCE, MIB, 4, group=(0, 1)),
        Collective(Kind.ALL_REDUCE, MIB, 4, group=(3, 2), stage=1),
    )
    with pytest.raises(InputError, match=r"export-astra: stage_npus: 2 stages do not take every NPU: dimensions"):
        export_astra(Instance(network, pairs, stage_npus=(0, 3)), 2, tmp_path / "out")


def test_the_cli_fits_an_instance_for_2x_on_asking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from themis_opt.formats.native import save_instance

    save_instance(_two_stages(tmp_path), tmp_path / "w.json")
    argv = ["export-astra", str(tmp_path / "w.json"), "--version", "2", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "may run beside grad" in err and err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert main([*argv, "--fit"]) == 0
    out = capsys.readouterr().out
    assert "fitted: 1 compute time rounded to whole microseconds" in out
    assert solve(_reimport(tmp_path / "out"), "baseline", intra="fifo").makespan == 63914.0
    assert main([*argv[:3], "1", *argv[4:], "--fit"]) == 2
    assert "--fit: makes an instance expressible by ASTRA-sim 2.x" in capsys.readouterr().err


def _one_trace(tmp_path: Path) -> bytes:
    """The bytes of a trace of two compute nodes, as write_trace writes it."""
    nodes = [
        TraceNode(0, "a", "COMP_NODE", (), (), 5, ()),
        TraceNode(1, "b", "COMP_NODE", (0,), (), 7, ()),
    ]
    write_trace(tmp_path / "whole.et", nodes)
    return (tmp_path / "whole.et").read_bytes()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda data: data + b"\xff" * 3, r"not a Chakra trace: it ends inside the length prefix at byte \d+"),
        (
            lambda data: data + b"\xff" * 6,
            r"not a Chakra trace: a length prefix over 5 bytes at byte \d+ \(2\.x stops reading there\)",
        ),
        (lambda data: data + bytes([0x80 | 2**6, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]), ".* over 5 bytes"),
        (
            lambda data: data[:-3],
            r"not a Chakra trace: the message at byte \d+ is cut short \(\d+ bytes announced, \d+ left\)",
        ),
        (lambda data: data + bytes([4, 0xFF, 0xFF, 0xFF, 0xFF]), r"not a Chakra trace \(the message at byte \d+\)"),
        (lambda data: __import__("gzip").compress(data), "is gzipped: ASTRA-sim 2.x reads a trace's bytes as they are"),
        (lambda data: b"", "is empty: not a Chakra trace"),
    ],
)
def test_a_trace_is_read_to_its_last_byte(tmp_path: Path, change: Any, message: str) -> None:
    from themis_opt.formats.astra.etfiles import read_trace

    data = _one_trace(tmp_path)
    assert [n.duration_micros for n in read_trace(tmp_path / "whole.et")] == [5, 7]
    (tmp_path / "changed.et").write_bytes(change(data))
    with pytest.raises(InputError, match=r"changed\.et: " + message):
        read_trace(tmp_path / "changed.et")


def test_a_network_of_more_npus_than_traces_stops_at_the_first_missing_one(tmp_path: Path) -> None:
    # 2^40 NPUs: the trace files are looked for one at a time (a list of every name ran out of memory)
    huge = "topology: [ Switch, Switch ]\nnpus_count: [ 1048576, 1048576 ]\n"
    huge += "bandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n"
    net, system = _files(tmp_path, network=huge)
    nodes = [_node(0, "COMP_NODE", duration_micros=1)]
    with pytest.raises(InputError, match=r"trace\.4\.et: no such trace: the network has 1099511627776 NPUs"):
        import_astra(net, system, workload=_traces(tmp_path, nodes))


def test_a_trace_of_more_nodes_than_an_import_makes_is_refused_before_it_is_ordered(tmp_path: Path) -> None:
    net, system = _files(tmp_path)
    nodes = [_node(i, "COMP_NODE", data=(i - 1,) if i else (), duration_micros=1) for i in range(10_001)]
    refused = r"trace\.0\.et: 10001 nodes that would be tasks: an imported trace makes at most 10000"
    with pytest.raises(InputError, match=refused):
        import_astra(net, system, workload=_traces(tmp_path, nodes))
