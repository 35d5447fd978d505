"""ASTRA-sim 2.x traces with communicator groups and pipeline stages: imported, timed by hand, exported."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.formats.astra.traces import (
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
from themis_opt.instance import Collective, Kind
from themis_opt.solving import solve
from themis_opt.validator import validate

pytest.importorskip("chakra", reason='the chakra extra is not installed (pip install -e ".[chakra]")')

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
    net, system = trace_files(tmp_path, RINGS, NET4X4)
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
    net, system = trace_files(tmp_path, RINGS, NET8X2)
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
    net, system = trace_files(tmp_path, RINGS, NET4X4)
    groups = _groups(tmp_path, {"9": list(range(16))})
    everyone = import_astra(net, system, workload=_grouped_traces(tmp_path, ["9"]), comm_groups=groups)
    plain = import_astra(net, system, workload=_grouped_traces(tmp_path, [""]))
    assert everyone.collectives[0].group == () and everyone.collectives[0].dimensions == (0, 1)
    assert solve(everyone, "baseline").makespan == solve(plain, "baseline").makespan


def test_groups_as_dimensions_run_over_them(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path, RINGS, NET4X4)
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
    net, system = trace_files(tmp_path, RINGS, NET4X4)
    prefix = _grouped_traces(tmp_path, [pg])
    argv = ["import-astra", str(net), str(system), "--workload", str(prefix), "--out", str(tmp_path / "x.json")]
    assert main([*argv, "--comm-groups", str(_groups(tmp_path, groups))]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


def test_group_ids_are_read_as_2x_reads_them_with_stoi(tmp_path: Path) -> None:
    # "01", " 1" and "1_0" are group 1 to 2.x (std::stoi), in the group file and in a node's pg_name
    net, system = trace_files(tmp_path, RINGS, NET4X4)
    plain = import_astra(net, system, workload=_grouped_traces(tmp_path / "a", [lambda j: str(1 + j // 4)]),
                         comm_groups=_groups(tmp_path / "a", DP))  # fmt: skip
    spelled = {f"0{key}" if key == "1" else f"{key}_0": members for key, members in DP.items()}
    other = import_astra(net, system, workload=_grouped_traces(tmp_path / "b", [lambda j: f" {1 + j // 4}_x"]),
                         comm_groups=_groups(tmp_path / "b", spelled))  # fmt: skip
    assert [c.group for c in other.collectives] == [c.group for c in plain.collectives]
    assert [c.dimensions for c in other.collectives] == [c.dimensions for c in plain.collectives]


def test_groups_as_dimensions_that_changes_nothing_is_refused(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path, RINGS, NET4X4)
    pairs = {str(1 + i): [2 * i, 2 * i + 1] for i in range(8)}  # halves of dimension 0: no whole dimension
    with pytest.raises(InputError, match="groups: dimensions changes nothing here"):
        import_astra(net, system, workload=_grouped_traces(tmp_path, [lambda j: str(1 + j // 2)]),
                     comm_groups=_groups(tmp_path, pairs), groups="dimensions")  # fmt: skip


def test_a_group_without_the_group_file_is_refused(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path, RINGS, NET4X4)
    with pytest.raises(InputError, match="give the group file"):
        import_astra(net, system, workload=_grouped_traces(tmp_path, ["1"]))


@pytest.mark.parametrize("micros", [2**63 - 1, 10**12 + 1])
def test_a_compute_time_beyond_the_limits_names_the_file_node_and_key(micros: int, tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    traces = write_traces(tmp_path, [trace_node(0, "COMP_NODE", duration_micros=micros)])
    with pytest.raises(InputError) as error:
        import_astra(net, system, workload=traces)
    assert str(error.value).startswith(f"{traces}.0.et: node 0 (node0): duration_micros: makes ")
    assert "must be <=" in str(error.value)


def test_a_collective_size_beyond_the_limits_names_the_file_and_node(tmp_path: Path) -> None:
    net, system = trace_files(tmp_path)
    traces = write_traces(tmp_path, [trace_node(0, "COMM_COLL_NODE", comm_type=0, comm_size=2**62)])
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
                trace_node(b, "COMP_NODE", duration_micros=1),
                trace_node(b + 1, "COMM_SEND_NODE", data=(b,), comm_dst=peer, comm_tag=7, comm_size=MIB),
                trace_node(b + 2, "COMM_RECV_NODE", comm_src=peer, comm_tag=8, comm_size=MIB),
                trace_node(b + 3, "COMP_NODE", data=(b + 2,), duration_micros=3),
                trace_node(b + 4, "COMM_COLL_NODE", data=(b + 3,), comm_type=0, comm_size=MIB, pg_name="1"),
            ]
        else:
            nodes = [
                trace_node(b, "COMM_RECV_NODE", comm_src=peer, comm_tag=7, comm_size=MIB),
                trace_node(b + 1, "COMP_NODE", data=(b,), duration_micros=2),
                trace_node(b + 2, "COMM_SEND_NODE", data=(b + 1,), comm_dst=peer, comm_tag=back_tag, comm_size=MIB),
                trace_node(b + 3, "COMM_COLL_NODE", data=(b + 1,), comm_type=0, comm_size=MIB, pg_name="2"),
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
    net, system = trace_files(tmp_path, RINGS, NET2X2)
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

    net, system = trace_files(tmp_path, RINGS, NET2X2)
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

    net, system = trace_files(tmp_path, RINGS, NET4X4)
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

    net, system = trace_files(tmp_path, RINGS, NET4X4)
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

    net, system = trace_files(tmp_path, RINGS, NET2X2)
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


def test_a_send_within_a_stage_is_a_ring_step_each_npu_receiving_from_the_one_before(tmp_path: Path) -> None:
    # ring attention's step (workload --cp-attention ring): every NPU sends to the next of the ring
    # and what waits for the send waits for the receipt from the NPU before it
    from themis_opt.formats.astra import export_astra
    from themis_opt.formats.astra.etfiles import read_trace
    from themis_opt.instance import After, Compute, Instance

    net, system = trace_files(tmp_path, RINGS, NET4X4)
    network = import_astra(net, system, all_reduce_bytes=MIB).network
    tasks = (
        Compute(1000.0, "qkv"),
        Collective(Kind.SEND, MIB, 1, id="kv", after=(After("qkv"),), group=(0, 1)),
        Compute(2000.0, "a0", after=(After("qkv"),)),
        Compute(2000.0, "a1", after=(After("a0"), After("kv"))),
    )
    instance = Instance(network, tasks, "ring-step")
    export_astra(instance, 2, tmp_path / "out")
    for npu in (0, 5):
        nodes = read_trace(tmp_path / "out" / f"workload.{npu}.et")
        send = next(n for n in nodes if n.type == "COMM_SEND_NODE")
        receive = next(n for n in nodes if n.type == "COMM_RECV_NODE")
        row = npu - npu % 4
        assert (send.attr("comm_src"), send.attr("comm_dst")) == (npu, row + (npu + 1) % 4)
        assert (receive.attr("comm_src"), receive.attr("comm_dst")) == (row + (npu - 1) % 4, npu)
        a1 = next(n for n in nodes if n.name == "a1")
        assert receive.id in a1.data_deps and send.id not in a1.data_deps
    again = _reimport(tmp_path / "out")
    result = solve(again, "baseline", intra="fifo")
    assert result.schedule is not None and validate(again, result.schedule) == []
    assert result.makespan == solve(instance, "baseline", intra="fifo").makespan


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


def test_an_all_gather_whose_input_chunks_do_not_divide_is_fitted_as_2x_runs_what_is_written(tmp_path: Path) -> None:
    # 258 bytes an NPU in 4 chunks: 2.x cuts 64-byte chunks, 5 of them (320 bytes); written, that
    # input is 320 bytes, which 2.x cuts in 4 chunks of 80: the fit cuts it again from there
    from themis_opt.formats.astra import export_astra
    from themis_opt.formats.astra.export import fit_astra_2
    from themis_opt.instance import Instance

    net, system = trace_files(tmp_path, RINGS, NET4X4)
    network = import_astra(net, system, all_reduce_bytes=MIB).network
    gather = Collective(Kind.ALL_GATHER, 16 * 258, 4, id="ag")
    instance = Instance(network, (gather, Collective(Kind.ALL_REDUCE, MIB, 4, id="ar")), "odd")
    fitted, _ = fit_astra_2(instance)
    cut = fitted.collectives[0]
    assert (cut.size_bytes, cut.chunks, cut.chunk_bytes) == (16 * 320, 4, 16 * 80)
    export_astra(fitted, 2, tmp_path / "out")  # refused before: 5 chunks where 2.x cuts 4
    again = _reimport(tmp_path / "out")
    assert solve(again, "baseline", intra="fifo").makespan == solve(fitted, "baseline", intra="fifo").makespan


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
