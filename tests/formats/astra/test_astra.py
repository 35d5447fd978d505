"""ASTRA-sim configurations in and out: every key mapped or refused, round trips, bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from themis_opt.cli import main
from themis_opt.cost import chunk_phases
from themis_opt.errors import InputError
from themis_opt.formats.astra import export_astra, import_astra, parse_size
from themis_opt.formats.astra.v1 import network_keys, system_keys
from themis_opt.formats.native import load_instance
from themis_opt.instance import (
    Algorithm,
    AllReducePhases,
    Collective,
    Dimension,
    Instance,
    Kind,
    Network,
    Op,
    Topology,
)
from themis_opt.solving import solve
from themis_opt.validator import validate

from ...conftest import DATA, ROOT

ASTRA = DATA / "astra"
NET, SYS = ASTRA / "net_v1.json", ASTRA / "sys_v1.txt"
GIB, MIB = 2**30, 2**20


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _net(tmp_path: Path, **change: object) -> Path:
    data = json.loads(NET.read_text())
    data.update(change)
    return _write(tmp_path, "net.json", json.dumps(data))


def _sys(tmp_path: Path, **change: str | None) -> Path:
    entries = dict(line.split(": ", 1) for line in SYS.read_text().splitlines())
    for key, value in change.items():
        key = key.replace("_", "-")
        if value is None:
            entries.pop(key, None)
        else:
            entries[key] = value
    return _write(tmp_path, "sys.txt", "".join(f"{k}: {v}\n" for k, v in entries.items()))


def _micro(tmp_path: Path, kind: str, size: int) -> Path:
    return _write(tmp_path, "micro.txt", f"MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 {kind} {size} 5\n")


def test_version_1_network_and_system_map_number_by_number() -> None:
    instance = import_astra(NET, SYS, all_reduce_bytes=GIB)
    network = instance.network
    dims = network.dimensions
    assert [d.size for d in dims] == [4, 8, 4]
    assert [d.topology for d in dims] == [Topology.RING, Topology.FULLY_CONNECTED, Topology.SWITCH]
    # the links ASTRA-sim counts x link-bandwidth: 2 x 100, 7 x 20 (one per peer), 1 x 50
    assert [d.bandwidth_gbps for d in dims] == [200.0, 140.0, 50.0]
    assert [d.latency_ns for d in dims] == [400.0, 300.0, 600.0]
    assert [d.algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]
    assert [d.all_to_all_algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.DIRECT]
    assert network.endpoint_delay_ns == 20.0 and network.phase_delay_ns == 20.0
    assert network.congestion_unaware and network.all_reduce_phases is AllReducePhases.LOCAL_BW_AWARE
    (coll,) = instance.collectives
    assert (coll.kind, coll.size_bytes, coll.chunks, coll.chunk_bytes) == (Kind.ALL_REDUCE, GIB, 16, GIB // 16)
    meta = dict(instance.metadata)
    assert (meta["astra_method"], meta["astra_intra"], meta["astra_scheduling_policy"]) == ("themis", "scf", "LIFO")
    assert meta["astra_splits"] == "16" and instance.name == "net_v1"


def test_version_2_network_and_system_map_number_by_number() -> None:
    instance = import_astra(ASTRA / "net_v2.yml", ASTRA / "sys_v2.json", all_reduce_bytes=64 * MIB)
    dims = instance.network.dimensions
    # ring and switch: the link bandwidth; fully connected under direct: (n - 1) links
    assert [d.bandwidth_gbps for d in dims] == [200.0, 7 * 20.0, 50.0]
    assert [d.algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]
    assert dict(instance.metadata)["astra_method"] == "baseline"
    assert instance.collectives[0].chunks == 16
    assert not instance.network.serial_phase_ends  # a 1.0 rule: 2.x timings stay as they were


def test_each_kind_runs_its_own_implementation_list(tmp_path: Path) -> None:
    system = _sys(tmp_path, all_gather_implementation="direct_ring_halvingDoubling")
    workload = _micro(tmp_path, "ALLGATHER", 65536)
    instance = import_astra(NET, system, workload=workload)
    (coll,) = instance.collectives
    # the file gives each NPU's shard; the all-gather's size is its output
    assert coll.kind is Kind.ALL_GATHER and coll.size_bytes == 65536 * 128
    dims = instance.network.dimensions
    assert [d.all_gather_algorithm for d in dims] == [Algorithm.DIRECT, Algorithm.RING, Algorithm.HALVING_DOUBLING]
    assert [d.algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]
    # a direct all-gather on the ring of 4 (two hops to the farthest, all at once) against a ring on the
    # fully-connected 8 (7 relayed steps at one link's 20 GB/s); every message in whole ns, and a phase
    # ends with one more endpoint delay
    phases = chunk_phases(instance, 0, coll.chunk_bytes, (0, 1, 2))
    shard = 65536 // 16
    assert phases[0].duration == 20 + 20 + 2 * 400 + math.floor(shard / (200 * 2**30 / 1e9))
    assert phases[1].duration == 20 + 7 * (20 + 300 + math.floor(4 * shard / (20 * 2**30 / 1e9)))
    result = solve(instance, "baseline")
    assert result.schedule is not None and validate(instance, result.schedule) == []


def test_a_shorter_list_leaves_the_outer_dimensions_out(tmp_path: Path) -> None:
    system = _sys(tmp_path, all_reduce_implementation="ring_direct", inter_dimension_scheduling="baseline")
    instance = import_astra(NET, system, all_reduce_bytes=64 * MIB)
    assert instance.active_dims == ((0, 1),)
    # under Themis ASTRA-sim 1.0 plans over all three dimensions and reads past the list
    with pytest.raises(InputError, match="spans 2 of the network's 3 dimensions"):
        import_astra(NET, _sys(tmp_path, all_reduce_implementation="ring_direct"), all_reduce_bytes=64 * MIB)


def test_double_binary_tree_and_flattened_algorithms(tmp_path: Path) -> None:
    system = _sys(
        tmp_path,
        all_reduce_implementation="doubleBinaryTree_doubleBinaryTree_doubleBinaryTree",
        all_to_all_implementation="oneDirect",
        inter_dimension_scheduling="baseline",
    )
    instance = import_astra(NET, system, all_reduce_bytes=64 * MIB)
    assert [d.algorithm for d in instance.network.dimensions] == [Algorithm.DOUBLE_BINARY_TREE] * 3
    assert instance.network.dimensions[0].all_to_all_algorithm is Algorithm.ONE_DIRECT
    # the baseline merges the last dimension's two trees into one all-reduce
    result = solve(instance, "baseline")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert [p.op for p in result.schedule.chunks[0].phases] == [Op.ALL_REDUCE] * 5
    themis = solve(instance, "themis")
    assert themis.makespan is not None and result.makespan is not None and themis.makespan > result.makespan
    a2a = import_astra(NET, system, workload=_micro(tmp_path, "ALLTOALL", 2**20))
    assert a2a.active_dims == ((0,),)  # one phase over all 128 NPUs, on dimension 0
    # a tree last in a list shorter than the network crashes ASTRA-sim 1.0 as soon as it runs
    short = _sys(tmp_path, all_reduce_implementation="ring_doubleBinaryTree", inter_dimension_scheduling="baseline")
    with pytest.raises(InputError, match="doubleBinaryTree last in a list of 2 on a network of 3"):
        import_astra(NET, short, all_reduce_bytes=64 * MIB)
    assert import_astra(NET, short, workload=_micro(tmp_path, "ALLTOALL", 2**20)).collectives  # no all-reduce


def test_astra_cuts_size_over_splits_at_a_time(tmp_path: Path) -> None:
    # 1000001 bytes in 16 splits: 62500 sixteen times and 1 left over, seventeen chunks
    instance = import_astra(NET, SYS, workload=_micro(tmp_path, "ALLREDUCE", 1_000_001))
    (coll,) = instance.collectives
    assert (coll.chunks, coll.chunk_bytes, coll.last_chunk_bytes) == (17, 62500, 1)
    with pytest.raises(InputError, match="cannot be cut into 16 chunks"):
        import_astra(NET, SYS, workload=_micro(tmp_path, "ALLREDUCE", 15))


def test_scales_truncate_as_astra_does(tmp_path: Path) -> None:
    workload = _write(tmp_path, "w.txt", "DATA\n1\nl0 -1 1009 NONE 0 777 NONE 0 333 ALLREDUCE 1000001 10\n")
    instance = import_astra(NET, SYS, workload=workload, comm_scale=0.3, compute_scale=1.5)
    (coll,) = instance.collectives
    assert coll.size_bytes == 300000  # 1000001 x float32(0.3), truncated
    assert [t.duration_ns for t in instance.computes if t.duration_ns] == [1513.0, 499.0]  # fwd, wg
    delayed = import_astra(NET, SYS, all_reduce_bytes=MIB, injection_scale=1.57)
    assert delayed.network.endpoint_delay_ns == 31.0  # int(20 x 1.57)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"active_chunks_per_dimension": "0"}, "active-chunks-per-dimension: must be"),
        ({"model_shared_bus": "1"}, "model-shared-bus: '1': the shared-bus (LogGP) model is not modelled"),
        ({"inter_dimension_scheduling": "offlineGreedyFlex"}, "offlineGreedyFlex"),
        ({"inter_dimension_scheduling": "roundRobin"}, "round-robin"),
        ({"intra_dimension_scheduling": "RG"}, "'RG' (RG queueing) is not modelled"),
        ({"all_reduce_implementation": "direct4_ring_ring"}, "a window of 4 messages is not modelled"),
        ({"all_reduce_implementation": "oneDoubleBinaryTree"}, "unknown implementation 'oneDoubleBinaryTree'"),
        ({"all_reduce_implementation": "ring_ring_ring_ring"}, "names 4 implementations, the network has 3"),
        ({"all_reduce_implementation": "ring_oneRing"}, "'oneRing' after other dimensions"),
        ({"all_to_all_implementation": "oneRing_ring"}, "ASTRA-sim 1.0 ignores the rest"),
        ({"preferred_dataset_splits": None}, "preferred-dataset-splits: missing"),
        ({"collective_optimization": "fast"}, "must be localBWAware or baseline"),
        ({"scheduling_policy": "lifo"}, "must be LIFO or FIFO"),
        ({"endpoint_delay": "4.7"}, "endpoint-delay: must be a whole number >= 0"),
        ({"all_reduce_implementation": ""}, "all-reduce-implementation: has no value (the next token, 'all-gather"),
    ],
)
def test_system_keys_are_modelled_or_refused(
    change: dict[str, str | None], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    system = _sys(tmp_path, **change)
    code = main(["import-astra", str(NET), str(system), "--all-reduce", "1GiB", "--out", str(tmp_path / "i.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "i.json").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"topologies-per-dim": ["Ring", "Torus", "Switch"]}, "unknown topology 'Torus'"),
        ({"units-count": [4, 8]}, "units-count: has 2 entries, the network has 3 dimensions"),
        ({"link-bandwidth": [100, "fast", 50]}, "link-bandwidth: must hold a number"),
        ({"topology-name": "Torus"}, "topology-name: must be 'Hierarchical'"),
        ({"links-count": [1, 7, 1]}, "1 links leave no bandwidth on a ring"),
        ({"links-count": [2, 6, 1]}, "6 links leave no bandwidth on a fully_connected"),
        ({"dimension-type": ["PP", "N", "P"]}, "PP (inter-pod) needs a Switch"),
        ({"hbm-scale": [1, 0, 0], "hbm-bandwidth": [1, 370, 370]}, "hbm-scale: 1 makes memory"),
        ({"router-latency": None}, "router-latency: missing"),
        ({"wormholes": [1, 2, 3]}, "wormholes: unknown key"),
    ],
)
def test_network_keys_are_modelled_or_refused(
    change: dict[str, object], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(NET.read_text())
    for key, value in change.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    net = _write(tmp_path, "net.json", json.dumps(data))
    code = main(["import-astra", str(net), str(SYS), "--all-reduce", "1GiB", "--out", str(tmp_path / "i.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and str(net) in err, err


def test_what_astra_counts_is_noted_and_unknown_keys_may_be_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = _net(tmp_path, **{"links-count": [3, 9, 1], "nic-latency": [5, 5, 5], "router-latency": [7, 7, 7]})
    instance = import_astra(odd, SYS, all_reduce_bytes=MIB)
    dims = instance.network.dimensions
    assert [d.bandwidth_gbps for d in dims] == [200.0, 140.0, 50.0]  # 3 ring links count as 2, 9 as 7 x 1
    assert [d.message_overhead_ns for d in dims] == [10.0, 10.0, 17.0]  # twice the NIC, the router on a switch
    assert "a ring's 3 links count as 2" in dict(instance.metadata)["astra_notes"]
    system = _write(tmp_path, "sys.txt", SYS.read_text() + "packet-routing: hardware\n")
    out = tmp_path / "i.json"
    argv = ["import-astra", str(NET), str(system), "--all-reduce", "1MiB", "--out", str(out)]
    assert main(argv) == 2
    assert "packet-routing:: unknown key" in capsys.readouterr().err
    assert main([*argv, "--ignore-unknown"]) == 0
    assert "note: sys.txt: unknown key 'packet-routing:' ignored" in capsys.readouterr().out


def test_every_key_is_listed_for_the_docs() -> None:
    assert "hbm-scale" in network_keys() and "use-fast-version" in network_keys()
    assert "boost-mode" in system_keys() and "seprate-log" in system_keys()
    docs = (ROOT / "docs" / "astra.md").read_text()
    for key in (*network_keys(), *system_keys()):
        assert f"`{key}`" in docs, key


def test_round_trip(tmp_path: Path) -> None:
    network = Network(
        (
            Dimension(4, "ring", 300.0, 500.0),
            Dimension(8, "fully_connected", 140.0, 250.0, all_to_all_algorithm="ring"),
            Dimension(16, "switch", 50.0, 700.0),
        ),
        endpoint_delay_ns=10,
    )
    for kind in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
        instance = Instance(network, (Collective(kind, 16 * MIB * 128, 32, id=kind),), "case")
        export_astra(instance, 1, tmp_path / kind, "themis")
        again = import_astra(
            tmp_path / kind / "network.json", tmp_path / kind / "system.txt", workload=tmp_path / kind / "workload.txt"
        )
        for x, y in zip(again.network.dimensions, network.dimensions, strict=True):
            assert (x.size, x.topology, x.bandwidth_gbps, x.latency_ns, x.algorithm, x.all_to_all_algorithm) == (
                y.size, y.topology, y.bandwidth_gbps, y.latency_ns, y.algorithm, y.all_to_all_algorithm,
            )  # fmt: skip
        (a,), (b,) = again.collectives, instance.collectives
        assert (a.kind, a.size_bytes, a.chunks) == (b.kind, b.size_bytes, b.chunks)
        assert dict(again.metadata)["astra_method"] == "themis" and dict(again.metadata)["astra_intra"] == "scf"
        export_astra(again, 1, tmp_path / f"{kind}-again", "themis")  # 1.0's own reductions go back out
    export_astra(Instance(network, (Collective("all_reduce", GIB, 32),), "case"), 2, tmp_path / "v2")
    again = import_astra(tmp_path / "v2" / "network.yml", tmp_path / "v2" / "system.json", all_reduce_bytes=GIB)
    assert [d.bandwidth_gbps for d in again.network.dimensions] == [300.0, 140.0, 50.0]


def test_what_astra_cannot_express_is_refused(tmp_path: Path) -> None:
    two = Instance(
        Network((Dimension(4, "ring", 100.0, 500.0),)),
        (Collective("all_reduce", MIB, 4), Collective("all_reduce", MIB, 4, issue_ns=5.0)),
    )
    with pytest.raises(InputError, match="one collective"):
        export_astra(two, 1, tmp_path)
    odd = Instance(Network((Dimension(8, "fully_connected", 235.2, 500.0),)), (Collective("all_reduce", MIB, 4),))
    with pytest.raises(InputError, match="does not split exactly over 7 links"):
        export_astra(odd, 2, tmp_path)


def test_sizes_parse() -> None:
    assert parse_size("64MiB") == 64 * MIB and parse_size("1GiB") == GIB and parse_size("1073741824") == GIB
    assert parse_size("1GB") == 10**9
    for bad in ("lots", "1.5B", "0", "12 parsecs"):
        with pytest.raises(InputError, match="all_reduce_bytes"):
            parse_size(bad)


def test_cli_import_a_workload_then_solve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = _write(
        tmp_path,
        "w.txt",
        "DATA\n2\nl0 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 65536 5\n"
        "l1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 8192 5\n",
    )
    out = tmp_path / "inst.json"
    argv = ["import-astra", str(NET), str(SYS), "--workload", str(workload), "--passes", "2", "--out", str(out)]
    assert main(argv) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the console wraps long paths
    assert "4 collectives" in printed and "asks for themis with scf" in printed
    instance = load_instance(out)
    assert len(instance.collectives) == 4 and instance.computes
    assert main(["solve", str(out), "--method", "themis"]) == 0
    # the network instance's chunk count carries over to a workload built on it
    again = tmp_path / "again.json"
    assert main(["workload", str(workload), "--network", str(out), "--out", str(again)]) == 0
    assert load_instance(again).collectives[0].chunks == 16
    with pytest.raises(SystemExit) as exit_:  # neither --all-reduce nor --workload: a usage error
        main(["import-astra", str(NET), str(SYS), "--out", "x.json"])
    assert exit_.value.code == 2


def test_a_one_ring_astra_never_finishes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 8 NPUs as a ring of 4 (fast) inside a switch of 2 (slow): two ring links and an endpoint delay take
    # less than the switch link, so an NPU sends a step before the next has asked for the last one
    slow = _net(
        tmp_path,
        **{
            "topologies-per-dim": ["Ring", "Switch"],
            "dimension-type": ["N", "N"],
            "dimensions-count": 2,
            "units-count": [4, 2],
            "links-count": [2, 1],
            "link-latency": [500, 500],
            "link-bandwidth": [250, 12.5],
            **{key: [0, 0] for key in ("nic-latency", "router-latency", "hbm-scale")},
            "hbm-latency": [500, 500],
            "hbm-bandwidth": [370, 370],
        },
    )
    system = _sys(
        tmp_path,
        **{f"{k}_implementation": "oneRing" for k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")},
        inter_dimension_scheduling="baseline",
    )
    code = main(["import-astra", str(slow), str(system), "--all-reduce", "1MiB", "--out", str(tmp_path / "i.json")])
    err = capsys.readouterr().err
    assert code == 2 and "ASTRA-sim 1.0 never finishes" in err and err.count("\n") == 1
    # at equal bandwidths it runs (ASTRA-sim finishes these): one phase over all 8 NPUs
    even = json.loads(slow.read_text())
    even["link-bandwidth"] = [25, 50]
    slow.write_text(json.dumps(even))
    instance = import_astra(slow, system, all_reduce_bytes=MIB)
    assert instance.active_dims == ((0,),)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda t: t + "topology: [ Switch, Switch ]\n", "topology: appears twice"),  # PyYAML keeps the last
        (lambda t: t + "extra: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        (lambda t: t.replace("npus_count: [ ", "npus_count: [ " + "9" * 5000 + ", ", 1), "digits"),
    ],
)
def test_a_yaml_network_that_is_not_plain_yaml_is_one_error(change: Any, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "net.yml"
    path.write_text(change((ASTRA / "net_v2.yml").read_text()))
    with pytest.raises(InputError, match=problem):
        import_astra(path, ASTRA / "sys_v2.json", all_reduce_bytes=MIB)


def _tiny(network: dict[str, Any] | None = None, **collective: Any) -> Instance:
    import dataclasses

    instance = load_instance(DATA / "tiny_ar.json")  # 3 MiB in 3 chunks: ASTRA-sim's own cut
    net = dataclasses.replace(instance.network, **(network or {}))
    shape = {"size_bytes": 3 * MIB, "chunks": 3, **collective}
    return Instance(net, (Collective("all_reduce", **shape),), instance.name)


@pytest.mark.parametrize(
    ("instance", "version", "problem"),
    [
        (_tiny({"reduction_gbps": 5.0}), 1, "reduction_gbps 5"),  # 1.0 reduces at 500,000 bytes per ns
        (_tiny({"phase_delay_ns": 99.0}), 1, "phase_delay_ns 99"),  # ASTRA-sim's is its endpoint delay
        (_tiny({"phase_delay_ns": 99.0}), 2, "phase_delay_ns 99"),
        (_tiny(chunk_bytes=100_000, chunks=4, size_bytes=MIB), 1, "cuts it into"),  # the last chunk the rest
        (_tiny(size_bytes=MIB, chunks=3), 1, "cuts it into"),  # 1.0 cuts 1 MiB in 3 splits into 4 chunks
    ],
)
def test_export_refuses_a_setting_astra_sim_would_drop(
    instance: Instance, version: int, problem: str, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=problem):
        export_astra(instance, version, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_export_to_2x_refuses_a_message_overhead(tmp_path: Path) -> None:
    import dataclasses

    instance = _tiny()
    dims = tuple(dataclasses.replace(d, message_overhead_ns=77.0) for d in instance.network.dimensions)
    overhead = Instance(dataclasses.replace(instance.network, dimensions=dims), instance.collectives)
    with pytest.raises(InputError, match="message_overhead_ns 77"):
        export_astra(overhead, 2, tmp_path / "out")
    assert export_astra(overhead, 1, tmp_path / "one")  # 1.0 writes it as its NIC latency


# ASTRA-sim 1.0 (07d5d19, analytical backend) on tests/data/astra/net_v1_ring_switch.json, a baseline FIFO
# LIFO system of 16 splits and one all-reduce of 64 MiB, run on 2026-12-04: "all passes finished at time: N"
ACTIVE_CHUNKS_TIMES = {1: 1_063_965.0, 2: 562_829.0, 3: 437_545.0}


@pytest.mark.parametrize("active", sorted(ACTIVE_CHUNKS_TIMES))
def test_astra1_runs_several_chunks_at_once_per_dimension(tmp_path: Path, active: int) -> None:
    system = _write(
        tmp_path,
        "sys.txt",
        f"scheduling-policy: LIFO\nendpoint-delay: 10\nactive-chunks-per-dimension: {active}\n"
        "preferred-dataset-splits: 16\nboost-mode: 0\nall-reduce-implementation: ring_halvingDoubling\n"
        "all-gather-implementation: ring_halvingDoubling\nreduce-scatter-implementation: ring_halvingDoubling\n"
        "all-to-all-implementation: ring_direct\ncollective-optimization: localBWAware\n"
        "inter-dimension-scheduling: baseline\nintra-dimension-scheduling: FIFO\n",
    )
    instance = import_astra(ASTRA / "net_v1_ring_switch.json", system, all_reduce_bytes=64 * MIB)
    assert instance.network.active_chunks == active
    assert instance.network.serial_phase_ends  # 1.0 handles the phases that end at one instant one by one
    result = solve(instance, "baseline", intra="fifo")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert abs(result.makespan - ACTIVE_CHUNKS_TIMES[active]) <= 10  # the workload's cycles per state change


# ASTRA-sim 1.0 (07d5d19, analytical backend) on tests/data/astra/net_v1_4d.json (fully connected x
# switch x ring x switch), two chunks at once per dimension, halving-doubling on three dimensions and a
# double binary tree on the last, one all-reduce of 64 MiB in 16 splits, run on 2026-12-06. Themis with
# SCF was 1.7% off while reductions were free: their few ns a step moved which phase a dimension took
# first. The 5 ns left are the workload's cycles per state change.
REDUCTION_TIMES = {("baseline", "FIFO"): 3_766_533.0, ("themis", "FIFO"): 1_753_096.0, ("themis", "SCF"): 1_746_379.0}


@pytest.mark.parametrize(("inter", "intra"), sorted(REDUCTION_TIMES))
def test_astra1_reductions_are_timed_at_its_local_memory_bandwidth(tmp_path: Path, inter: str, intra: str) -> None:
    system = _write(
        tmp_path,
        "sys.txt",
        "scheduling-policy: LIFO\nendpoint-delay: 10\nactive-chunks-per-dimension: 2\n"
        "preferred-dataset-splits: 16\nboost-mode: 0\n"
        "all-reduce-implementation: halvingDoubling_halvingDoubling_halvingDoubling_doubleBinaryTree\n"
        "all-gather-implementation: ring_ring_ring_ring\nreduce-scatter-implementation: ring_ring_ring_ring\n"
        "all-to-all-implementation: direct_direct_direct_direct\ncollective-optimization: localBWAware\n"
        f"inter-dimension-scheduling: {inter}\nintra-dimension-scheduling: {intra}\n",
    )
    instance = import_astra(ASTRA / "net_v1_4d.json", system, all_reduce_bytes=64 * MIB)
    assert instance.network.reduction_gbps == 500_000  # bytes per ns: 3 ns for every 500 KB reduced
    result = solve(instance, inter, intra=intra.lower())
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert abs(result.makespan - REDUCTION_TIMES[inter, intra]) <= 10


def test_astra1_active_chunks_of_zero_is_refused(tmp_path: Path) -> None:
    system = _write(
        tmp_path, "sys.txt", SYS.read_text().replace("active-chunks-per-dimension: 1", "active-chunks-per-dimension: 0")
    )
    with pytest.raises(InputError, match="active-chunks-per-dimension"):
        import_astra(NET, system, all_reduce_bytes=MIB)


def test_a_nested_list_of_topologies_is_one_error(tmp_path: Path) -> None:
    yml = tmp_path / "net.yml"
    yml.write_text((ASTRA / "net_v2.yml").read_text().replace("[ Ring,", "[ [Ring],"))
    with pytest.raises(InputError, match="topology: unknown topology \\['Ring'\\]"):
        import_astra(yml, ASTRA / "sys_v2.json", all_reduce_bytes=MIB)
    net = json.loads((ASTRA / "net_v1.json").read_text())
    net["topologies-per-dim"][0] = ["Ring"]
    js = tmp_path / "net.json"
    js.write_text(json.dumps(net))
    with pytest.raises(InputError, match="topologies-per-dim: unknown topology"):
        import_astra(js, ASTRA / "sys_v1.txt", all_reduce_bytes=MIB)


def _laughs(levels: int) -> str:
    """A YAML ``topology`` of nested aliases: 9^levels names from a few hundred bytes."""
    anchors = ["x0: &a0 [Ring, Ring, Ring, Ring, Ring, Ring, Ring, Ring, Ring]"]
    anchors += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "topology: {" + ", ".join(anchors) + "}\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n"


def test_nested_yaml_aliases_are_refused_at_once_and_errors_stay_short(tmp_path: Path) -> None:
    import time

    path = tmp_path / "net.yml"
    path.write_text(_laughs(10))  # 3.5e9 names once expanded
    started = time.perf_counter()
    with pytest.raises(
        InputError, match="more than 100,000 values once its aliases are expanded, under key 'topology'"
    ):
        import_astra(path, ASTRA / "sys_v2.json", all_reduce_bytes=MIB)
    assert time.perf_counter() - started < 1.0
    path.write_text(_laughs(4))  # 7,380 names: read, and refused with a short message
    with pytest.raises(InputError, match="topology: must be a non-empty list") as error:
        import_astra(path, ASTRA / "sys_v2.json", all_reduce_bytes=MIB)
    assert len(str(error.value)) < 700 and "characters left out" in str(error.value)
