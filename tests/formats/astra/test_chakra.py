"""ASTRA-sim 2.x: Chakra traces written here with mlc-chakra, system keys, times computed by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.formats.astra.traces import (
    CHUNK_AR_NS,
    MIB,
    SYSTEM,
    trace_files,
    trace_node,
    write_traces,
)
from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.formats.astra import import_astra
from themis_opt.formats.astra.etfiles import TraceNode, write_trace
from themis_opt.instance import Kind
from themis_opt.solving import solve
from themis_opt.validator import validate

pytest.importorskip("chakra", reason='the chakra extra is not installed (pip install -e ".[chakra]")')


def _two_chains(comm_type: int) -> list[TraceNode]:
    """A computation then an all-reduce, beside a collective of ``comm_type`` then a computation."""
    return [
        trace_node(0, "COMP_NODE", duration_micros=2),
        trace_node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
        trace_node(2, "COMM_COLL_NODE", comm_type=comm_type, comm_size=MIB),
        trace_node(3, "COMP_NODE", data=(2,), duration_micros=1),
    ]


def test_one_all_reduce_takes_four_chunks_in_turn(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    prefix = write_traces(tmp_path, [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB)])
    instance = import_astra(net, system, workload=prefix)
    (coll,) = instance.collectives
    assert (coll.kind, coll.size_bytes, coll.chunks) == (Kind.ALL_REDUCE, MIB, 4)
    result = solve(instance, "baseline")
    assert result.makespan == 4 * CHUNK_AR_NS  # one dimension: the chunks queue


def test_compute_and_both_kinds_of_dependency(tmp_path: Path) -> None:
    # 2 us of compute, then the all-reduce (a data dependency), then a compute of 0 us (1 ns; a control
    # dependency), and beside them a 3 us compute that only waits for the first
    nodes = [
        trace_node(0, "COMP_NODE", duration_micros=2),
        trace_node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
        trace_node(2, "COMP_NODE", ctrl=(1,)),
        trace_node(3, "COMP_NODE", data=(0,), duration_micros=3),
    ]
    net, system = trace_files(tmp_path)
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
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
    nodes = _two_chains(comm_type=0)
    net, system = trace_files(tmp_path)
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
    first, second = instance.collectives
    assert {d.task for d in first.after} == {"n0", "n2"} and not second.after
    assert "n2 -> n1" in dict(instance.metadata)["astra_notes"]
    result = solve(instance, "baseline")
    assert result.makespan == 2 * 4 * CHUNK_AR_NS
    assert result.schedule is not None and validate(instance, result.schedule) == []


def test_the_roofline_times_compute_from_its_operations(tmp_path: Path) -> None:
    # 10^9 operations on 10^6 bytes at 1600 GB/s: 1.6 * 10^15 op/s by memory, capped at 900 TFLOPS
    net, system = trace_files(tmp_path, {**SYSTEM, "roofline-enabled": 1, "peak-perf": 900})
    nodes = [
        trace_node(0, "COMP_NODE", duration_micros=7, num_ops=10**9, tensor_size=10**6),
        trace_node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
    ]
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
    assert instance.computes[0].duration_ns == int(10**9 / 900e12 * 1e9)


def test_a_small_collective_is_inflated_and_an_all_gather_is_its_inputs(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    nodes = [
        trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=10),
        trace_node(1, "COMM_COLL_NODE", data=(0,), comm_type=2, comm_size=MIB),
    ]
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
    small, gather = instance.collectives
    assert (small.chunks, small.chunk_bytes, small.size_bytes) == (4, 4, 16)  # 10 // 4 < 4 NPUs: 4 bytes each
    assert (gather.kind, gather.size_bytes, gather.chunks) == (Kind.ALL_GATHER, 4 * MIB, 4)  # every NPU's input
    assert "inflated" in dict(instance.metadata)["astra_notes"]


def test_involved_dimensions_select_the_phases(tmp_path: Path) -> None:
    net2 = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 800.0 ]\n"
    system = {**SYSTEM, **{k: ["ring", "ring"] for k in SYSTEM if k.endswith("implementation")}}
    net, sys_file = trace_files(tmp_path, system, net2)
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=7, comm_size=MIB, involved_dim=(False, True))]
    instance = import_astra(net, sys_file, workload=write_traces(tmp_path, nodes, npus=8))
    assert instance.active_dims[0] == (1,)
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=7, comm_size=MIB, involved_dim=(False, False))]
    with pytest.raises(InputError, match="involves no dimension"):
        import_astra(net, sys_file, workload=write_traces(tmp_path, nodes, npus=8))


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([trace_node(0, "COMM_SEND_NODE")], "has no comm_dst"),
        ([trace_node(0, "MEM_LOAD_NODE")], "remote memory accesses are not modelled"),
        ([trace_node(0, "METADATA_NODE")], "metadata node: ASTRA-sim 2.x aborts"),
        ([trace_node(0, "INVALID_NODE")], "skips it and may never issue its children"),
        ([trace_node(0, "COMP_NODE", is_cpu_op=True)], "runs on the CPU"),
        ([trace_node(0, "COMM_COLL_NODE", comm_type=5, comm_size=8)], "a BROADCAST collective is not modelled"),
        ([trace_node(0, "COMM_COLL_NODE", comm_type=0)], "has no comm_size"),
        ([trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=8, pg_name="3")], "communicator group '3'"),
        ([trace_node(0, "COMP_NODE", data=(7,))], "depends on node 7, which is not in the trace"),
    ],
)
def test_what_is_not_modelled_or_breaks_astra_sim_is_refused(
    tmp_path: Path, nodes: list[TraceNode], message: str
) -> None:
    net, system = trace_files(tmp_path)
    with pytest.raises(InputError, match=message) as error:
        import_astra(net, system, workload=write_traces(tmp_path, nodes))
    assert "trace.0.et" in str(error.value) and "\n" not in str(error.value)


def test_a_trace_whose_npus_differ_is_refused_naming_the_first(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    nodes = [
        trace_node(0, "COMP_NODE", duration_micros=1),
        trace_node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
    ]
    with pytest.raises(InputError, match=r"trace\.2\.et: node 200 .*NPU 2 differs from NPU 0's node 0"):
        import_astra(net, system, workload=write_traces(tmp_path, nodes, differ=2))
    three = tmp_path / "three"
    three.mkdir()
    with pytest.raises(InputError, match=r"trace\.3\.et: no such trace: the network has 4 NPUs"):
        import_astra(net, system, workload=write_traces(three, nodes, npus=3))


def test_a_file_that_is_not_a_trace_is_one_line(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
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
    net, sys_file = trace_files(tmp_path, system)
    with pytest.raises(InputError, match=message):
        import_astra(net, sys_file, all_reduce_bytes=MIB)


def test_keys_without_effect_are_noted_and_a_halving_doubling_all_to_all_only_fails_when_run(tmp_path: Path) -> None:
    system = {
        **SYSTEM,
        "boost-mode": 1,
        "inter-dimension-scheduling": "themis",
        "all-to-all-implementation": ["halvingDoubling"],
    }
    net, sys_file = trace_files(tmp_path, system)
    notes = dict(import_astra(net, sys_file, all_reduce_bytes=MIB).metadata)["astra_notes"]
    assert "boost-mode has no effect" in notes and "inter-dimension-scheduling is never read" in notes
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=6, comm_size=MIB)]
    with pytest.raises(InputError, match="all-to-all with halvingDoubling"):
        import_astra(net, sys_file, workload=write_traces(tmp_path, nodes))


def test_fractions_where_astra_sim_reads_whole_numbers_are_cut_as_there_and_noted(tmp_path: Path) -> None:
    system = {**SYSTEM, "preferred-dataset-splits": 4.7, "active-chunks-per-dimension": 2.5, "endpoint-delay": 10.9}
    net, sys_file = trace_files(tmp_path, system)
    instance = import_astra(net, sys_file, all_reduce_bytes=MIB)
    (tmp_path / "whole").mkdir()
    whole_files = trace_files(tmp_path / "whole", {**SYSTEM, "active-chunks-per-dimension": 2})
    whole = import_astra(*whole_files, all_reduce_bytes=MIB)
    assert instance.collectives[0].chunks == whole.collectives[0].chunks == 4
    assert instance.network == whole.network and instance.network.active_chunks == 2
    notes = dict(instance.metadata)["astra_notes"]
    for key, value, read in (("preferred-dataset-splits", 4.7, 4), ("active-chunks-per-dimension", 2.5, 2)):
        assert f"{key} {value:g} is read as {read}" in notes
    assert "endpoint-delay 10.9 is read as 10" in notes


def test_involved_dims_past_the_implementation_list_are_noted_as_unread(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB, involved_dim=(True, True, False))]
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
    assert instance.collectives[0].dimensions == (0,)
    notes = dict(instance.metadata)["astra_notes"]
    assert "node 0 (node0): involved_dim's entries past the first 1 are not read" in notes
    (tmp_path / "quiet").mkdir()
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB, involved_dim=(True, False))]
    quiet = import_astra(net, system, workload=write_traces(tmp_path / "quiet", nodes))
    assert "involved_dim" not in dict(quiet.metadata).get("astra_notes", "")


def test_traces_past_the_networks_npus_are_noted_as_unread(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB)]
    prefix = write_traces(tmp_path, nodes, npus=6)  # two more than the ring of 4
    (tmp_path / "trace.x.et").write_bytes(b"")  # not an NPU's name: not ASTRA-sim's either
    instance = import_astra(net, system, workload=prefix)
    assert (
        "2 traces past the network's 4 NPUs not read (trace.4.et, trace.5.et)" in dict(instance.metadata)["astra_notes"]
    )
    (tmp_path / "four").mkdir()
    four = import_astra(net, system, workload=write_traces(tmp_path / "four", nodes))
    assert instance.tasks == four.tasks and "not read" not in dict(four.metadata).get("astra_notes", "")
    assert "involved_dim" not in dict(four.metadata).get("astra_notes", "")  # none given: nothing unread


def test_the_cli_imports_a_trace_and_says_so_without_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    net, system = trace_files(tmp_path)
    prefix = write_traces(tmp_path, [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=MIB)])
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

    nodes = _two_chains(comm_type=2)
    net, system = trace_files(tmp_path)
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
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

    net, system = trace_files(tmp_path)
    nodes = [
        trace_node(0, "COMP_NODE", duration_micros=2),
        trace_node(1, "COMM_COLL_NODE", data=(0,), comm_type=0, comm_size=MIB),
    ]
    instance = import_astra(net, system, workload=write_traces(tmp_path, nodes))
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
    net, sys_file = trace_files(tmp_path, system, NET_2D)
    nodes = [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=4 * MIB)]
    instance = import_astra(net, sys_file, workload=write_traces(tmp_path, nodes, npus=16))
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
    net, sys_file = trace_files(tmp_path, system, NET_2D)
    with pytest.raises(InputError, match=message):
        import_astra(net, sys_file, all_reduce_bytes=MIB)


def test_a_flattened_network_charged_outermost_is_not_exported_for_2x(tmp_path: Path) -> None:
    import dataclasses

    from themis_opt.formats.astra import export_astra
    from themis_opt.instance import Instance

    system = {**SYSTEM, **{k: ["oneRing"] for k in SYSTEM if k.endswith("implementation")}}
    net, sys_file = trace_files(tmp_path, system, NET_2D)
    instance = import_astra(net, sys_file, all_reduce_bytes=MIB)
    outermost = Instance(dataclasses.replace(instance.network, innermost_charge=False), instance.tasks)
    assert solve(outermost, "baseline").makespan != solve(instance, "baseline").makespan
    with pytest.raises(InputError, match="charged on the outermost dimension"):
        export_astra(outermost, 2, tmp_path / "out")


# Communicator groups, on a 4 x 4 network (dimension 0 a ring of 100 GB/s and 500 ns a hop, dimension 1 a switch


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
    net, system = trace_files(tmp_path, network=huge)
    nodes = [trace_node(0, "COMP_NODE", duration_micros=1)]
    with pytest.raises(InputError, match=r"trace\.4\.et: no such trace: the network has 1099511627776 NPUs"):
        import_astra(net, system, workload=write_traces(tmp_path, nodes))


def test_a_trace_of_more_nodes_than_an_import_makes_is_refused_before_it_is_ordered(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    nodes = [trace_node(i, "COMP_NODE", data=(i - 1,) if i else (), duration_micros=1) for i in range(10_001)]
    refused = r"trace\.0\.et: 10001 nodes that would be tasks: an imported trace makes at most 10000"
    with pytest.raises(InputError, match=refused):
        import_astra(net, system, workload=write_traces(tmp_path, nodes))
