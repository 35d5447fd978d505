"""Program folders: written for ASTRA-sim 2.x, read back into the same program, refused when broken."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import DATA, load
from themis_opt import solve
from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance, save_result
from themis_opt.programs import OpKind, Program, check_program, program_of
from themis_opt.programs.astra import read_program, write_program

COLUMNS = (
    "kind",
    "peer",
    "size",
    "tag",
    "collective",
    "chunk",
    "phase",
    "units",
    "reduce",
    "duration_ns",
    "deps",
    "dep_start",
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Program, Path]:
    instance = load("tiny_ag")  # issued at 1 us: a computation too
    program = program_of(instance, solve(instance, method="themis"))
    out = tmp_path_factory.mktemp("programs") / "tiny_ag"
    write_program(program, out, time_ns=check_program(program).time_ns)
    return program, out


def test_a_folder_reads_back_as_the_program_it_was(folder: tuple[Program, Path]) -> None:
    program, out = folder
    again = read_program(out)
    for name in COLUMNS:
        assert np.array_equal(getattr(program, name), getattr(again, name)), name
    assert again.unit_sets == program.unit_sets
    meta = json.loads((out / "program.json").read_text())
    assert meta["program_time_ns"] == check_program(again).time_ns
    assert meta["nodes"] == program.num_ops and meta["npus"] == 8
    system = json.loads((out / "system.json").read_text())
    assert system["preferred-dataset-splits"] == 1 and system["all-gather-implementation-custom"] == ["program"]
    assert sorted(p.name for p in out.glob("program.*.et")) == sorted(f"program.{r}.et" for r in range(8))


def test_a_trace_written_node_by_node_reads_the_same(folder: tuple[Program, Path], tmp_path: Path) -> None:
    # the fast reader proves itself by writing the file again; one in another layout is read node by node
    program, out = folder
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in out.iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    _rewrite(copy / "program.0.et", lambda nodes: list(reversed(nodes)))  # a node before those it waits for
    again = read_program(copy)
    assert np.array_equal(np.sort(again.tag), np.sort(program.tag))
    assert check_program(again).time_ns == check_program(program).time_ns


def _rewrite(path: Path, change: Callable[[list[Any]], list[Any]]) -> None:
    """Write a trace again, node by node, as ``change`` makes its nodes."""
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata
    from chakra.src.third_party.utils.protolib import encodeMessage

    from themis_opt.formats.astra.etcolumns import read_nodes

    nodes = change(list(read_nodes(path, path.read_bytes())))
    with path.open("wb") as handle:
        encodeMessage(handle, GlobalMetadata(version="0.0.4"))
        for node in nodes:
            node.name = f"node {node.id}"  # another layout than export-program's: read node by node
            encodeMessage(handle, node)


def test_a_missing_rank_is_named(folder: tuple[Program, Path], tmp_path: Path) -> None:
    _, out = folder
    for path in out.iterdir():
        if path.is_file() and path.name != "program.5.et":
            (tmp_path / path.name).write_bytes(path.read_bytes())
    with pytest.raises(InputError, match=r"program\.5\.et: missing"):
        read_program(tmp_path)


def test_the_cli_exports_checks_and_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    instance = DATA / "worked.json"
    result = tmp_path / "r.json"
    save_result(solve(load("worked"), method="themis"), result)
    out = tmp_path / "prog"
    assert main(["export-program", str(result), "--instance", str(instance), "--out", str(out)]) == 0
    assert "program time" in capsys.readouterr().out
    assert main(["check-program", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())  # as one line, whatever the terminal's width
    assert "no race, every NPU ends with its collective's result" in said and "padded with" in said
    inside = out / "r.json"
    inside.write_bytes(result.read_bytes())
    assert main(["export-program", str(inside), "--instance", str(instance), "--out", str(out), "--force"]) == 2
    assert "an input" in capsys.readouterr().err and inside.exists()
    inside.unlink()
    assert main(["export-program", str(result), "--instance", str(instance), "--out", str(out), "--force"]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in out.iterdir())
    assert main(["export-program", str(result), "--instance", str(instance), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before
    assert (
        main(["export-program", str(result), "--instance", str(DATA / "tiny_ar.json"), "--out", str(tmp_path / "x")])
        == 2
    )
    assert "the result is for" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    # a receive of another size than its send: ASTRA-sim would run it and leave an NPU unfinished
    recv = int(np.flatnonzero(read_program(out).kind == 1)[0])

    def bigger(nodes: list[Any]) -> list[Any]:
        next(a for a in nodes[recv].attr if a.name == "comm_size").int64_val += 1
        return nodes

    _rewrite(out / "program.0.et", bigger)
    assert main(["check-program", str(out)]) == 2
    err = capsys.readouterr().err
    assert "another size" in err and err.count("\n") == 1

    def cycle(nodes: list[Any]) -> list[Any]:  # the first two nodes wait for each other
        nodes[0].data_deps.append(nodes[1].id)
        nodes[1].data_deps.append(nodes[0].id)
        return nodes

    _rewrite(out / "program.1.et", cycle)
    assert main(["check-program", str(out)]) == 2
    err = capsys.readouterr().err
    assert "program.1.et node" in err and "cycle" in err and err.count("\n") == 1


def test_a_flattened_program_reads_back_flattened(tmp_path: Path) -> None:
    from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology

    ring = Dimension(4, Topology.RING, 100.0, 500.0, algorithm=Algorithm.ONE_RING)
    network = Network((ring, Dimension(2, Topology.SWITCH, 50.0, 700.0)), innermost_charge=True)
    instance = Instance(network, (Collective(Kind.ALL_REDUCE, 1 << 24, 2),), "flat")
    program = program_of(instance, solve(instance, method="themis"))
    write_program(program, tmp_path / "flat", time_ns=check_program(program).time_ns)
    again = read_program(tmp_path / "flat")  # its messages from NPU 3 to 4 differ in both dimensions
    assert again.collectives == program.collectives and again.collectives[0].flat
    assert np.array_equal(again.peer, program.peer)
    assert (
        check_program(again).time_ns == json.loads((tmp_path / "flat" / "program.json").read_text())["program_time_ns"]
    )
    meta = json.loads((tmp_path / "flat" / "program.json").read_text())
    meta["programs"][0]["flat"] = "yes"
    (tmp_path / "flat" / "program.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="flat must be true or false"):
        read_program(tmp_path / "flat")


def test_a_pipeline_program_reads_back_with_its_stages(tmp_path: Path) -> None:
    instance = load("two_stages")  # sends between two stages, computations at each
    program = program_of(instance, solve(instance, method="baseline"))
    write_program(program, tmp_path / "pp", time_ns=check_program(program).time_ns)
    again = read_program(tmp_path / "pp")
    assert again.stages == program.stages == ((0, 1), (2, 3)) and again.collectives == program.collectives
    for name in COLUMNS:
        assert np.array_equal(getattr(program, name), getattr(again, name)), name
    meta = json.loads((tmp_path / "pp" / "program.json").read_text())
    assert check_program(again).time_ns == meta["program_time_ns"]
    meta["stages"] = [[0, 1], [2, 2]]
    (tmp_path / "pp" / "program.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="stages: must take each of the 4 NPUs once"):
        read_program(tmp_path / "pp")


def test_a_grouped_program_reads_back_with_its_groups(tmp_path: Path) -> None:
    from themis_opt.instance import Collective, Dimension, Instance, Kind, Network, Topology

    network = Network((Dimension(2, Topology.RING, 100.0, 500.0), Dimension(4, Topology.SWITCH, 50.0, 900.0)))
    colls = tuple(Collective(Kind.ALL_REDUCE, 1 << 20, 2, group=(0, 2, 4, 6), id=f"c{i}") for i in range(2))
    instance = Instance(network, colls, "grouped")  # two collectives of one grouping: written once
    program = program_of(instance, solve(instance, method="baseline"))
    write_program(program, tmp_path / "g", time_ns=check_program(program).time_ns)
    meta = json.loads((tmp_path / "g" / "program.json").read_text())
    assert meta["groupings"] == [[[0, 2, 4, 6], [1, 3, 5, 7]]] and [p["grouping"] for p in meta["programs"]] == [0, 0]
    again = read_program(tmp_path / "g")
    assert again.collectives == program.collectives
    assert check_program(again).time_ns == meta["program_time_ns"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m["programs"][0].update(grouping=5), "not a program's description"),
        (lambda m: m.update(groupings=[[[0, 2, 4, 9], [1, 3, 5, 7]]]), "groups must name NPUs 0 to 7"),
        (lambda m: m.update(groupings=[[[0, 2, 4], [1, 3, 5, 7]]]), "groups must be disjoint, of one size"),
    ],
)
def test_a_broken_grouping_is_one_line(tmp_path: Path, change: Callable[[Any], None], message: str) -> None:
    from themis_opt.instance import Collective, Dimension, Instance, Kind, Network, Topology

    network = Network((Dimension(2, Topology.RING, 100.0, 500.0), Dimension(4, Topology.SWITCH, 50.0, 900.0)))
    instance = Instance(network, (Collective(Kind.ALL_REDUCE, 1 << 20, 1, group=(0, 2, 4, 6)),), "grouped")
    program = program_of(instance, solve(instance, method="baseline"))
    write_program(program, tmp_path / "g", time_ns=check_program(program).time_ns)
    meta = json.loads((tmp_path / "g" / "program.json").read_text())
    change(meta)
    (tmp_path / "g" / "program.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=message):
        read_program(tmp_path / "g")


def test_a_message_outside_its_collectives_groups_is_named(tmp_path: Path) -> None:
    from themis_opt.instance import Collective, Dimension, Instance, Kind, Network, Topology

    network = Network((Dimension(2, Topology.RING, 100.0, 500.0), Dimension(4, Topology.SWITCH, 50.0, 900.0)))
    instance = Instance(network, (Collective(Kind.ALL_REDUCE, 1 << 20, 1, group=(0, 2, 4, 6)),), "grouped")
    program = program_of(instance, solve(instance, method="baseline"))
    write_program(program, tmp_path / "g", time_ns=check_program(program).time_ns)
    meta = json.loads((tmp_path / "g" / "program.json").read_text())
    meta["groupings"] = [[[0, 2, 4, 6]]]  # NPUs 1, 3, 5 and 7 still run the ring moved to them
    (tmp_path / "g" / "program.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="NPU 1 node 0: a message of collective 0 at an NPU outside its groups"):
        check_program(read_program(tmp_path / "g"))


def test_a_carved_program_is_written_on_its_whole_dimension(tmp_path: Path) -> None:
    from themis_opt.instance import Collective, Dimension, Instance, Kind, Network, Topology

    network = Network((Dimension(8, Topology.RING, 100.0, 500.0), Dimension(2, Topology.SWITCH, 50.0, 700.0)))
    instance = Instance(network.split(0, 4), (Collective(Kind.ALL_REDUCE, 1 << 24, 2),), "carved")
    program = program_of(instance, solve(instance, method="themis"))
    write_program(program, tmp_path / "c", time_ns=check_program(program).time_ns)
    assert "npus_count: [ 8, 2 ]" in (tmp_path / "c" / "network.yml").read_text()  # the ring ASTRA-sim runs
    meta = json.loads((tmp_path / "c" / "program.json").read_text())
    assert [(x["size"], x.get("physical_size"), x.get("stride")) for x in meta["links"]] == [
        (4, 8, 1),
        (2, 8, 4),
        (2, None, None),
    ]
    again = read_program(tmp_path / "c")
    assert again.links == program.links and check_program(again).time_ns == meta["program_time_ns"]
    meta["links"][1]["stride"] = 2  # the parts no longer tile the ring
    (tmp_path / "c" / "program.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"links\[1\]: carved parts that do not tile their dimension"):
        read_program(tmp_path / "c")


def test_a_part_carved_again_is_written_on_its_whole_dimension(tmp_path: Path) -> None:
    from themis_opt.instance import Collective, Dimension, Instance, Kind, Network, Topology

    network = Network((Dimension(16, Topology.RING, 100.0, 500.0), Dimension(2, Topology.SWITCH, 50.0, 700.0)))
    instance = Instance(network.split(0, 2).split(1, 4), (Collective(Kind.ALL_REDUCE, 1 << 24, 2),), "carved3")
    program = program_of(instance, solve(instance, method="themis"))
    write_program(program, tmp_path / "c", time_ns=check_program(program).time_ns)
    assert "npus_count: [ 16, 2 ]" in (tmp_path / "c" / "network.yml").read_text()
    meta = json.loads((tmp_path / "c" / "program.json").read_text())
    parts = [(x["size"], x.get("physical_size"), x.get("stride")) for x in meta["links"]]
    assert parts == [(2, 16, 1), (4, 16, 2), (2, 16, 8), (2, None, None)]  # 16 = 2 x 4 x 2
    again = read_program(tmp_path / "c")
    assert again.links == program.links and check_program(again).time_ns == meta["program_time_ns"]


def test_a_computation_of_1_ns_is_written_as_a_node_of_0(tmp_path: Path) -> None:
    # export-astra --fit's shortest compute: 2.x runs a node of 0 microseconds in 1 ns
    from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Kind, Network, Topology

    network = Network((Dimension(4, Topology.SWITCH, 50.0, 500.0),))
    for ns, written in ((1.0, True), (1.5, False)):
        tasks = (Compute(ns, id="t"), Collective(Kind.ALL_REDUCE, 1 << 20, 2, id="ar", after=(After("t"),)))
        instance = Instance(network, tasks, "short")
        program = program_of(instance, solve(instance, method="baseline"))
        time = check_program(program).time_ns
        if not written:
            with pytest.raises(InputError, match="a computation of a fraction of a microsecond"):
                write_program(program, tmp_path / "no", time_ns=time)
            continue
        write_program(program, tmp_path / "s", time_ns=time)
        again = read_program(tmp_path / "s")
        assert check_program(again).time_ns == time


def test_messages_carry_the_models_delays_as_padding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from themis_opt.formats.astra.etcolumns import read_nodes

    instance = DATA / "worked.json"
    result = tmp_path / "r.json"
    save_result(solve(load("worked"), method="themis"), result)
    padded, bare = tmp_path / "padded", tmp_path / "bare"
    assert main(["export-program", str(result), "--instance", str(instance), "--out", str(padded)]) == 0
    assert main(["export-program", str(result), "--instance", str(instance), "--out", str(bare), "--unpadded"]) == 0
    capsys.readouterr()
    one, other = read_program(padded), read_program(bare)
    sends = one.kind == OpKind.SEND
    # the same data; each message padded by its 10 ns endpoint delay's bytes at its link's bandwidth
    assert np.array_equal(one.size, other.size) and not other.pad.any()
    gbps = np.array([link.bandwidth_gbps for link in one.links])[one.message_dim[sends]]
    assert np.array_equal(one.pad[sends], np.ceil(10 * gbps * 2**30 / 1e9).astype(np.int64))
    described = [json.loads((out / "program.json").read_text()) for out in (padded, bare)]
    assert [d["padding_bytes"] for d in described] == [int(one.pad[sends].sum()), 0]
    times = [d["program_time_ns"] for d in described]
    assert times == [check_program(one).time_ns, check_program(other).time_ns] and times[0] > times[1]
    # ASTRA-sim reads the padded size: data and pad
    node = next(n for n in read_nodes(padded / "program.0.et", (padded / "program.0.et").read_bytes()) if n.type == 5)
    attrs = {a.name: a.int64_val for a in node.attr if a.name in ("comm_size", "themis_pad")}
    row = node.id  # rank 0's rows come first, in node order
    assert attrs["comm_size"] == one.size[row] + one.pad[row] and attrs["themis_pad"] == one.pad[row] > 0
    flags = ["--format", "msccl", "--unpadded"]
    assert main(["export-program", str(result), "--instance", str(instance), "--out", str(tmp_path / "m"), *flags]) == 2
    assert "--unpadded" in capsys.readouterr().err and not (tmp_path / "m").exists()


def test_a_pad_that_is_not_part_of_a_message_is_named(folder: tuple[Program, Path], tmp_path: Path) -> None:
    _, out = folder
    for path in out.iterdir():
        if path.is_file():
            (tmp_path / path.name).write_bytes(path.read_bytes())

    def too_much(nodes: list[Any]) -> list[Any]:
        node = next(n for n in nodes if any(a.name == "themis_pad" for a in n.attr))
        next(a for a in node.attr if a.name == "themis_pad").int64_val = 1 << 40
        return nodes

    _rewrite(tmp_path / "program.0.et", too_much)
    with pytest.raises(InputError, match=r"program\.0\.et node \d+: a themis_pad of 1099511627776"):
        read_program(tmp_path)


def test_a_folder_of_the_first_version_reads_and_a_later_one_is_named(
    folder: tuple[Program, Path], tmp_path: Path
) -> None:
    # version 1 wrote each message's data alone (as --unpadded does); a version this reader does not
    # know is one line, not a misread
    program, _ = folder
    old = tmp_path / "v1"
    write_program(program.unpadded(), old, time_ns=check_program(program.unpadded()).time_ns)
    described = json.loads((old / "program.json").read_text())
    for version, fine in ((1, True), (3, False)):
        (old / "program.json").write_text(json.dumps({**described, "version": version}))
        if fine:
            assert check_program(read_program(old)).time_ns == described["program_time_ns"]
        else:
            with pytest.raises(InputError, match=r"version 3: this themis-opt reads versions 1, 2"):
                read_program(old)


def test_a_program_beyond_the_memory_available_is_one_line(tmp_path: Path) -> None:
    import resource
    import subprocess
    import sys

    from themis_opt.budget import available_memory
    from themis_opt.suites import suite_folder

    memory = available_memory()
    assert memory is not None and memory > 0
    instance = suite_folder("paper") / "paper-3d-sw8x8x8.json"  # 1.2 million operations: about 850 MB
    save_result(solve(load_instance(instance), method="baseline"), tmp_path / "r.json")
    limit = 1100 * 2**20  # the interpreter and its imports take about 200 MB of it

    def cap() -> None:  # pragma: no cover - runs in the child
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    argv = ["export-program", str(tmp_path / "r.json"), "--instance", str(instance), "--out", str(tmp_path / "p")]
    run = subprocess.run(
        [sys.executable, "-m", "themis_opt", *argv],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "memory" in run.stderr
    assert not (tmp_path / "p").exists()


def test_a_folder_of_more_nodes_than_the_memory_holds_is_one_line(
    folder: tuple[Program, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    _, out = folder
    big = tmp_path / "big"
    shutil.copytree(out, big)
    meta = json.loads((big / "program.json").read_text())
    meta["nodes"] = 10**15  # a petabyte of nodes: no machine reads it
    (big / "program.json").write_text(json.dumps(meta))
    assert main(["check-program", str(big)]) == 2
    err = capsys.readouterr().err
    assert "states 1,000,000,000,000,000 nodes" in err and "memory available" in err
    assert len(err.strip().splitlines()) == 1
