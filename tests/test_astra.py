"""ASTRA-sim configurations in and out: mapping rules number by number, round trips, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis_opt.astra import export_astra, import_astra, parse_size, read_micro_workload
from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology
from themis_opt.io import load_instance

from .conftest import DATA

ASTRA = DATA / "astra"
GIB = 2**30


def test_version_1_network_and_system_map_number_by_number() -> None:
    instance = import_astra(ASTRA / "net_v1.json", ASTRA / "sys_v1.txt", all_reduce_bytes=GIB)
    dims = instance.network.dimensions
    assert [d.size for d in dims] == [4, 8, 4]
    assert [d.topology for d in dims] == [Topology.RING, Topology.FULLY_CONNECTED, Topology.SWITCH]
    assert [d.bandwidth_gbps for d in dims] == [200.0, 140.0, 50.0]  # links-count x link-bandwidth
    assert [d.latency_ns for d in dims] == [400.0, 300.0, 600.0]
    assert [d.algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]
    assert [d.all_to_all_algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.DIRECT]
    assert instance.network.endpoint_delay_ns == 20.0
    (coll,) = instance.collectives
    assert (coll.kind, coll.size_bytes, coll.chunks) == (Kind.ALL_REDUCE, GIB, 16)
    meta = dict(instance.metadata)
    assert meta["astra_method"] == "themis" and meta["astra_intra"] == "scf"
    assert meta["astra_scheduling_policy"] == "LIFO"
    assert instance.name == "net_v1"


def test_version_2_network_and_system_map_number_by_number() -> None:
    instance = import_astra(ASTRA / "net_v2.yml", ASTRA / "sys_v2.json", all_reduce_bytes=64 * 2**20)
    dims = instance.network.dimensions
    # ring and switch: the link bandwidth; fully connected under direct: (n - 1) links
    assert [d.bandwidth_gbps for d in dims] == [200.0, 7 * 20.0, 50.0]
    assert [d.algorithm for d in dims] == [Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]
    assert dict(instance.metadata)["astra_method"] == "baseline"
    assert instance.collectives[0].chunks == 16


def test_micro_workload_gives_the_collective() -> None:
    assert read_micro_workload(ASTRA / "micro_ag.txt") == (Kind.ALL_GATHER, 65536)
    instance = import_astra(ASTRA / "net_v1.json", ASTRA / "sys_v1.txt", workload=ASTRA / "micro_ag.txt")
    (coll,) = instance.collectives
    # the file gives each NPU's shard; the all-gather's size is its output
    assert coll.kind is Kind.ALL_GATHER and coll.size_bytes == 65536 * 128


def _same_case(a: Instance, b: Instance) -> None:
    for x, y in zip(a.network.dimensions, b.network.dimensions, strict=True):
        assert (x.size, x.topology, x.bandwidth_gbps, x.latency_ns, x.algorithm, x.all_to_all_algorithm) == (
            y.size,
            y.topology,
            y.bandwidth_gbps,
            y.latency_ns,
            y.algorithm,
            y.all_to_all_algorithm,
        )
    assert a.network.endpoint_delay_ns == b.network.endpoint_delay_ns
    ca, cb = a.collectives[0], b.collectives[0]
    assert (ca.kind, ca.size_bytes, ca.chunks) == (cb.kind, cb.size_bytes, cb.chunks)


@pytest.mark.parametrize("kind", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
@pytest.mark.parametrize("version", [1, 2])
def test_round_trip(kind: str, version: int, tmp_path: Path) -> None:
    network = Network(
        (
            Dimension(4, "ring", 300.0, 500.0),
            Dimension(8, "fully_connected", 140.0, 250.0, all_to_all_algorithm="ring"),
            Dimension(16, "switch", 50.0, 700.0),
        ),
        endpoint_delay_ns=10,
    )
    instance = Instance(network, (Collective(kind, 16 * 2**20 * 128, 32, id=kind),), "case")
    files = export_astra(instance, version, tmp_path, "themis")
    names = {f.name for f in files}
    if version == 1:
        assert names == {"network.json", "system.txt", "workload.txt"}
        again = import_astra(tmp_path / "network.json", tmp_path / "system.txt", workload=tmp_path / "workload.txt")
    else:
        assert names == {"network.yml", "system.json", "WORKLOAD.md"}
        if kind != "all_reduce":
            return  # the 2.x workload is a Chakra trace, made by Chakra's tools
        again = import_astra(tmp_path / "network.yml", tmp_path / "system.json", all_reduce_bytes=16 * 2**20 * 128)
    _same_case(again, instance)
    assert dict(again.metadata)["astra_method"] == "themis" and dict(again.metadata)["astra_intra"] == "scf"


def test_what_astra_cannot_express_is_refused(tmp_path: Path) -> None:
    two = Instance(
        Network((Dimension(4, "ring", 100.0, 500.0),)),
        (Collective("all_reduce", 2**20, 4), Collective("all_reduce", 2**20, 4, issue_ns=5.0)),
    )
    with pytest.raises(InputError, match="one collective"):
        export_astra(two, 1, tmp_path)
    odd = Instance(Network((Dimension(8, "fully_connected", 235.2, 500.0),)), (Collective("all_reduce", 2**20, 4),))
    with pytest.raises(InputError, match="does not split exactly over 7 links"):
        export_astra(odd, 2, tmp_path)


def test_sizes_parse() -> None:
    assert parse_size("64MiB") == 64 * 2**20 and parse_size("1GiB") == GIB and parse_size("1073741824") == GIB
    for bad in ("lots", "1.5B", "0", "12 parsecs"):
        with pytest.raises(InputError, match="--all-reduce"):
            parse_size(bad)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _net_v1(**change: object) -> str:
    data = json.loads((ASTRA / "net_v1.json").read_text())
    data.update(change)
    return json.dumps(data)


BAD = [
    ("net.json", _net_v1(**{"topologies-per-dim": ["Ring", "Torus", "Switch"]}), None, "unknown topology 'Torus'"),
    ("net.json", _net_v1(**{"units-count": [4, 8]}), None, "units-count: has 2 entries, the network has 3 dimensions"),
    ("net.json", _net_v1(**{"link-bandwidth": [100, "fast", 50]}), None, "link-bandwidth: must hold a number"),
    ("net.json", _net_v1(**{"topology-name": "Torus"}), None, "topology-name: must be 'Hierarchical'"),
    ("net.json", "{not json", None, "not valid JSON"),
    (
        "net.yml",
        "topology: [ Ring ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n",
        None,
        "npus_count: has 2 entries",
    ),
    ("net.txt", "whatever", None, "must be an ASTRA-sim 1.0 network .json or a 2.x network .yml"),
    (
        None,
        None,
        "all-reduce-implementation: doubleBinaryTree_ring_ring\n",
        "all-reduce-implementation: algorithm 'doubleBinaryTree' is not supported",
    ),
    (None, None, "all-reduce-implementation: oneRing\n", "all-reduce-implementation: names 1 algorithms"),
    (None, None, "endpoint-delay: soon\n", "endpoint-delay: must be a number >= 0"),
    (None, None, "preferred-dataset-splits: 2.5\n", "preferred-dataset-splits: must be a whole number"),
    (None, None, "inter-dimension-scheduling: magic\n", "inter-dimension-scheduling: unknown 'magic'"),
    (None, None, "this line has no colon\n", "line 1: expected 'key: value'"),
]


@pytest.mark.parametrize(("net_name", "net_text", "sys_text", "message"), BAD)
def test_bad_files_exit_2_naming_file_and_key(
    net_name: str | None,
    net_text: str | None,
    sys_text: str | None,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    net = _write(tmp_path, net_name, net_text) if net_name and net_text is not None else ASTRA / "net_v1.json"
    system = _write(tmp_path, "sys.txt", sys_text) if sys_text is not None else ASTRA / "sys_v1.txt"
    code = main(["import-astra", str(net), str(system), "--all-reduce", "1GiB", "--out", str(tmp_path / "i.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert (str(net) in err) or (str(system) in err)
    assert not (tmp_path / "i.json").exists()


def test_cli_import_then_export_then_solve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "inst.json"
    argv = ["import-astra", str(ASTRA / "net_v1.json"), str(ASTRA / "sys_v1.txt"), "--all-reduce", "64MiB"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "asks for themis with scf" in capsys.readouterr().out
    assert load_instance(out).collectives[0].size_bytes == 64 * 2**20
    assert main(["export-astra", str(out), "--version", "1", "--out", str(tmp_path / "astra")]) == 0
    assert (tmp_path / "astra" / "system.txt").read_text().count("intra-dimension-scheduling: SCF") == 1
    assert main(["solve", str(out), "--method", "themis"]) == 0
    with pytest.raises(SystemExit) as exit_:  # neither --all-reduce nor --workload: a usage error
        main(["import-astra", str(ASTRA / "net_v1.json"), str(ASTRA / "sys_v1.txt"), "--out", "x.json"])
    assert exit_.value.code == 2
