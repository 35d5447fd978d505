"""MSCCL-IR XML: every method's all-reduce, reduce-scatter and all-gather written within the executor's
limits, read back and proved."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.conftest import load
from themis_opt import solve
from themis_opt.errors import InputError
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology
from themis_opt.programs import OpKind, check_program, program_of
from themis_opt.programs.msccl import LIMITS, XML, as_msccl, communicator, one_collective, read_msccl, write_msccl
from themis_opt.programs.races import order_reductions

STEP = re.compile(r'^ {6}<step( [a-z_A-Z]+="-?\w+")+/>$')


def _roundtrip(instance: Instance, method: str, folder: Path, **options: int) -> tuple[int, int]:
    program = as_msccl(program_of(instance, solve(instance, method=method, time_limit=2, workers=1)))
    time_ns = check_program(program).time_ns
    write_msccl(program, folder, time_ns=time_ns, **options)
    return time_ns, check_program(read_msccl(folder)).time_ns


@st.composite
def collectives(draw: st.DrawFn) -> Instance:
    dims = []
    for _ in range(draw(st.integers(1, 3))):
        algorithm = draw(st.sampled_from([Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]))
        size = draw(st.sampled_from([2, 4] if algorithm is Algorithm.HALVING_DOUBLING else [2, 3, 4]))
        topology = draw(st.sampled_from(list(Topology)))
        dims.append(Dimension(size, topology, draw(st.sampled_from([25.0, 100.0])), 300.0, algorithm=algorithm))
    kind = draw(st.sampled_from([Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER]))
    over = draw(st.sets(st.integers(0, len(dims) - 1), min_size=1))  # some dimensions: its communicator's
    coll = Collective(kind, 1 << 20, draw(st.integers(1, 4)), dimensions=tuple(sorted(over)))
    return Instance(Network(tuple(dims)), (coll,), name="m")


@settings(max_examples=10, deadline=None)
@given(collectives(), st.sampled_from(["baseline", "themis", "balanced"]))
def test_random_collectives_are_written_and_proved(instance: Instance, method: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        ours, back = _roundtrip(instance, method, Path(folder) / "m")
        text = (Path(folder) / "m" / XML).read_text()
    # the joins (1 ns each in ASTRA-sim) are gone, a thread block's steps run in order; a reduce-scatter's
    # or all-gather's message of several runs of the buffer is several steps, each a message read back
    assert back >= 0.98 * ours - 50
    if instance.collectives[0].kind is Kind.ALL_REDUCE:
        assert back <= 1.02 * ours + 50
    lines = text.splitlines()
    coll = {Kind.ALL_REDUCE: "allreduce", Kind.REDUCE_SCATTER: "reducescatter", Kind.ALL_GATHER: "allgather"}
    assert lines[0].startswith('<algo name="themis_opt" proto="Simple" nchannels=')
    assert f'coll="{coll[instance.collectives[0].kind]}"' in lines[0] and lines[-1] == "</algo>"
    assert "\t" not in text and "<?xml" not in text
    assert all(STEP.match(line) for line in lines if "<step" in line)


def test_the_bundled_all_reduces(tmp_path: Path) -> None:
    for name, method in (("worked", "balanced"), ("three_dim", "themis")):
        ours, back = _roundtrip(load(name), method, tmp_path / f"{name}-{method}")
        assert abs(back - ours) <= 0.01 * ours


def test_fewer_steps_a_thread_block_take_more_channels(tmp_path: Path) -> None:
    _roundtrip(load("worked"), "themis", tmp_path / "a")
    _roundtrip(load("worked"), "themis", tmp_path / "b", max_steps=8)
    channels = [int(re.search(r'nchannels="(\d+)"', (tmp_path / f / XML).read_text()).group(1)) for f in "ab"]
    assert channels[1] > channels[0]
    steps = max(len(re.findall("<step", tb)) for tb in (tmp_path / "b" / XML).read_text().split("<tb ")[1:])
    assert steps <= 8


def test_a_reduce_scatter_leaves_each_block_where_msccl_reads_it(tmp_path: Path) -> None:
    ours, back = _roundtrip(load("tiny_rs"), "themis", tmp_path / "rs")  # proved as read: piece u*chunks+c on GPU u
    assert back >= 0.98 * ours
    text = (tmp_path / "rs" / XML).read_text()
    assert 'coll="reducescatter"' in text and 'i_chunks="32" o_chunks="0"' in text
    # a receive into another GPU's block than its send carries is named, not summed
    tampered = re.sub(r'(type="rrc" srcbuf="i" srcoff=")(\d+)(" dstbuf="i" dstoff=")(\d+)', _shift, text, count=1)
    (tmp_path / "rs" / XML).write_text(tampered)
    with pytest.raises(InputError, match="other pieces than its send"):
        check_program(read_msccl(tmp_path / "rs"))


def _shift(match: re.Match[str]) -> str:
    spot = (int(match.group(2)) + 4) % 32  # the same chunk (of 4), the next GPU's block
    return f"{match.group(1)}{spot}{match.group(3)}{spot}"


def test_what_msccl_cannot_run_is_refused_with_the_limit_named(tmp_path: Path) -> None:
    net = Network((Dimension(2, Topology.SWITCH, 50, 500), Dimension(4, Topology.SWITCH, 50, 500)))
    a2a = Instance(net, (Collective(Kind.ALL_TO_ALL, 1 << 20, 2),), name="a2a")
    rings = Instance(net, (Collective(Kind.ALL_REDUCE, 1 << 20, 2, group=(0, 1, 4, 5)),), name="rings")
    carved = Network(
        (
            Dimension(4, Topology.RING, 100, 300, physical_size=8),
            Dimension(2, Topology.RING, 100, 300, physical_size=8, stride=4),
            Dimension(2, Topology.SWITCH, 50, 500),
        )
    )
    part = Instance(carved, (Collective(Kind.ALL_REDUCE, 1 << 20, 2, dimensions=(0,)),), name="part")
    for instance, words in (
        (a2a, "all_to_all: no MSCCL program"),
        (rings, "by communicator groups"),
        (part, "part of a carved dimension"),
    ):
        with pytest.raises(InputError, match=words):
            _roundtrip(instance, "baseline", tmp_path / instance.name)
    with pytest.raises(InputError, match="steps"):
        _roundtrip(load("three_dim"), "themis", tmp_path / "few", max_steps=1)
    assert not any(tmp_path.iterdir())


def test_a_message_of_more_pieces_than_a_step_moves_takes_several_steps(tmp_path: Path) -> None:
    big = Instance(
        Network((Dimension(16, Topology.SWITCH, 50, 500), Dimension(16, Topology.SWITCH, 50, 500))),
        (Collective(Kind.ALL_REDUCE, 1 << 24, 1),),
        name="big",
    )
    ours, back = _roundtrip(big, "themis", tmp_path / "big")  # halving-doubling's first messages: 128 pieces
    counts = [int(c) for c in re.findall(r'cnt="(\d+)"', (tmp_path / "big" / XML).read_text())]
    assert max(counts) == LIMITS["chunks a step moves"] and abs(back - ours) <= 0.05 * ours


def test_a_step_waiting_for_no_step_is_named(tmp_path: Path) -> None:
    _roundtrip(load("worked"), "baseline", tmp_path / "m")
    path = tmp_path / "m" / XML
    text = path.read_text()
    path.write_text(text.replace('depid="-1" deps="-1"', 'depid="0" deps="999"', 1))
    with pytest.raises(InputError, match="tb 0 step 999"):
        read_msccl(tmp_path / "m")


def test_steps_are_counted_as_the_executor_counts_them(tmp_path: Path) -> None:
    _, back = _roundtrip(load("tiny_ar"), "themis", tmp_path / "m")
    path = tmp_path / "m" / XML
    text = path.read_text()
    assert 'type="nop"' in text
    # the executor does not read s: any value within its steps is the same program
    path.write_text(re.sub(r' s="\d+"', ' s="0"', text))
    assert check_program(read_msccl(tmp_path / "m")).time_ns == back
    # a step waited for signals only with hasdep="1": with none, every wait is for ever
    path.write_text(text.replace('hasdep="1"', 'hasdep="0"'))
    with pytest.raises(InputError, match="wait for ever"):
        read_msccl(tmp_path / "m")
    # a step after nops that wait must wait itself, or the executor ignores the XML
    nop_then_step = re.compile(r'(type="nop"[^\n]*\n[^\n]*type="(?:s|r|rrc)"[^\n]*)depid="\d+" deps="\d+"')
    path.write_text(nop_then_step.sub(r'\1depid="-1" deps="-1"', text, count=1))
    with pytest.raises(InputError, match="names no step itself"):
        read_msccl(tmp_path / "m")


def test_an_algo_the_executor_would_run_otherwise_is_refused(tmp_path: Path) -> None:
    _roundtrip(load("worked"), "baseline", tmp_path / "m")
    path = tmp_path / "m" / XML
    text = path.read_text()
    loop = re.search(r'nchunksperloop="(\d+)"', text).group(1)  # type: ignore[union-attr]
    edits = [  # the loop cut otherwise, another number of GPUs, out of place, a protocol it has not
        (f'nchunksperloop="{loop}"', f'nchunksperloop="{2 * int(loop)}"'),
        ('ngpus="', 'ngpus="1'),
        ('inplace="1"', 'inplace="0"'),
        ('proto="Simple"', 'proto="Fast"'),
    ]
    _each_refused(tmp_path / "m", text, [(re.escape(old), new, "would run another program") for old, new in edits])


def test_thread_blocks_the_executor_refuses_are_refused(tmp_path: Path) -> None:
    _roundtrip(load("worked"), "baseline", tmp_path / "m")
    path = tmp_path / "m" / XML
    text = path.read_text()
    first = re.search(r'<tb id="0" send="(-?\d+)" recv="(-?\d+)" chan="(\d+)">', text)
    assert first is not None
    edits = [  # a gap in the blocks' ids, a block to its own GPU, a second block on the first's connection
        ('<tb id="1" ', '<tb id="99" ', "without a gap"),
        (re.escape(first.group(0)), '<tb id="0" send="0" recv="-1" chan="0">', "another of the GPUs"),
        ('<tb id="1" send="-?\\d+" recv="-?\\d+" chan="\\d+">', first.group(0).replace('id="0"', 'id="1"'), "repeats"),
    ]
    _each_refused(tmp_path / "m", text, edits)


def _each_refused(folder: Path, text: str, edits: list[tuple[str, str, str]]) -> None:
    """The folder's XML ``text`` with each edit (pattern, replacement, the error's words) made alone:
    read back, each refused with its words.
    """
    for old, new, words in edits:
        (folder / XML).write_text(re.sub(old, new, text, count=1))
        with pytest.raises(InputError, match=words):
            read_msccl(folder)


def test_a_step_in_another_buffer_is_named(tmp_path: Path) -> None:
    _roundtrip(load("worked"), "baseline", tmp_path / "m")
    path = tmp_path / "m" / XML
    path.write_text(path.read_text().replace('type="s" srcbuf="i"', 'type="s" srcbuf="o"', 1))
    with pytest.raises(InputError, match="runs in 'i' alone"):
        read_msccl(tmp_path / "m")


def test_a_padded_program_is_not_written_as_msccl(tmp_path: Path) -> None:
    # padding stands for the model's delays in ASTRA-sim; an MSCCL step carries data alone
    instance = load("worked")
    program = program_of(instance, solve(instance, method="themis"))
    assert program.pad.any() and not program.unpadded().pad.any()
    with pytest.raises(ValueError, match="unpadded"):
        write_msccl(program, tmp_path / "m", time_ns=check_program(program).time_ns)
    assert not (tmp_path / "m").exists()


NET3 = Network(
    (
        Dimension(2, Topology.SWITCH, 50, 500),
        Dimension(4, Topology.RING, 100, 300),
        Dimension(3, Topology.FULLY_CONNECTED, 25, 200),
    )
)


@pytest.mark.parametrize("dims", [(1,), (0, 2)])
@pytest.mark.parametrize("kind", [Kind.ALL_REDUCE, Kind.REDUCE_SCATTER])
def test_a_collective_over_some_dimensions_is_its_communicators_algorithm(
    tmp_path: Path, dims: tuple[int, ...], kind: Kind
) -> None:
    instance = Instance(NET3, (Collective(kind, 1 << 20, 3, dimensions=dims),), name="part")
    whole = program_of(instance, solve(instance, method="themis", time_limit=2, workers=1))
    ours, back = _roundtrip(instance, "themis", tmp_path / "m")
    group = [n for n in range(whole.npus) if all(whole.coordinates[n, d] == 0 for d in range(3) if d not in dims)]
    assert ours == check_program(whole.unpadded()).time_ns  # every group at once takes as long as one
    assert back >= 0.98 * ours - 50 and (kind is not Kind.ALL_REDUCE or back <= 1.02 * ours + 50)
    text = (tmp_path / "m" / XML).read_text()
    assert f'ngpus="{len(group)}"' in text and len(group) < whole.npus
    # rank u of the communicator is the group's NPU at position u: its messages go where NPU group[u]'s go
    one = as_msccl(whole)
    sends = whole.kind == OpKind.SEND
    for u, npu in enumerate(group):
        mine = sends & (whole.rank == npu)
        theirs = (one.kind == OpKind.SEND) & (one.rank == u)
        assert [group.index(p) for p in whole.peer[mine].tolist()] == one.peer[theirs].tolist()


@pytest.mark.parametrize("stage", [0, 1])
def test_a_stages_collective_is_its_stages_algorithm_and_the_idle_stage_is_checked(tmp_path: Path, stage: int) -> None:
    # the other stage runs no task: its NPUs hold no operation (the race check once failed on them)
    network = Network((*NET3.dimensions[:2], Dimension(2, Topology.FULLY_CONNECTED, 25, 200)))
    colls = (Collective(Kind.ALL_REDUCE, 1 << 20, 2, dimensions=(0, 1), stage=stage),)
    instance = Instance(network, colls, "st", stage_npus=(0, 8))
    whole = program_of(instance, solve(instance, method="themis", time_limit=2, workers=1))
    rows = np.diff(whole.rank_start).reshape(2, 8)  # per stage, its NPUs' operations
    assert rows[stage].all() and not rows[1 - stage].any()
    ours, back = _roundtrip(instance, "themis", tmp_path / "m")
    assert ours == check_program(whole.unpadded()).time_ns and abs(back - ours) <= 0.02 * ours
    assert 'ngpus="8"' in (tmp_path / "m" / XML).read_text()


def test_write_msccl_asks_for_the_communicators_program(tmp_path: Path) -> None:
    instance = Instance(NET3, (Collective(Kind.ALL_REDUCE, 1 << 20, 2, dimensions=(1,)),), name="part")
    program = program_of(instance, solve(instance, method="baseline"))
    with pytest.raises(ValueError, match="communicator"):
        write_msccl(order_reductions(program.unpadded()), tmp_path / "m", time_ns=1)
    one = communicator(program)
    assert one.npus == 4 and communicator(one) is one  # the communicator's own program is whole


def test_a_collective_over_every_part_of_one_carved_dimension_is_a_communicator(tmp_path: Path) -> None:
    def parts(topology: Topology, gbps: float) -> tuple[Dimension, Dimension]:
        inner = Dimension(2, topology, gbps, 300, physical_size=4)
        return inner, Dimension(2, topology, gbps, 300, physical_size=4, stride=2)

    network = Network((*parts(Topology.RING, 100), *parts(Topology.SWITCH, 50)))
    for dims in ((0, 1), (2, 3)):
        instance = Instance(network, (Collective(Kind.ALL_REDUCE, 1 << 20, 2, dimensions=dims),), name="c")
        whole = program_of(instance, solve(instance, method="themis", time_limit=2, workers=1))
        ours, back = _roundtrip(instance, "themis", tmp_path / f"m{dims[0]}")
        assert ours == check_program(whole.unpadded()).time_ns and abs(back - ours) <= 0.02 * ours
        assert 'ngpus="4"' in (tmp_path / f"m{dims[0]}" / XML).read_text()


def test_the_cli_writes_a_communicators_algorithm_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from themis_opt.cli import main
    from themis_opt.formats.native import save_instance, save_result

    instance = Instance(NET3, (Collective(Kind.ALL_REDUCE, 1 << 20, 2, dimensions=(0, 2)),), name="part")
    save_instance(instance, tmp_path / "i.json")
    save_result(solve(instance, method="themis"), tmp_path / "r.json")
    out = tmp_path / "m"
    argv = ["export-program", str(tmp_path / "r.json"), "--instance", str(tmp_path / "i.json"), "--format", "msccl"]
    assert main([*argv, "--out", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "6 NPUs (of the 24: the communicator of one group of the collective's, each runs the same)" in said
    assert main(["check-program", str(out)]) == 0
    assert "6 NPUs, 1 collective" in " ".join(capsys.readouterr().out.split())


def _several() -> Instance:
    from themis_opt.instance import After, Compute

    tasks = (
        Compute(3000, id="f"),
        Collective(Kind.ALL_REDUCE, 1 << 20, 3, id="a", after=(After("f"),)),
        Collective(Kind.REDUCE_SCATTER, 1 << 21, 2, id="b", issue_ns=1000, dimensions=(1, 2)),
        Collective(Kind.ALL_GATHER, 1 << 20, 4, id="c", after=(After("a"),), dimensions=(0,)),
    )
    network = Network((*NET3.dimensions[:2], Dimension(2, Topology.FULLY_CONNECTED, 25, 200)))
    return Instance(network, tasks, name="several")


@pytest.mark.parametrize("method", ["baseline", "themis"])
def test_one_collective_of_several_is_its_algorithm_alone(tmp_path: Path, method: str) -> None:
    instance = _several()
    result = solve(instance, method=method, time_limit=2, workers=1)
    whole = program_of(instance, result)
    for c, coll in enumerate(instance.collectives):
        alone = one_collective(whole, c)
        mine = (whole.collective == c) & (whole.kind != OpKind.COMP)
        assert alone.num_ops == mine.sum() and not (alone.kind == OpKind.COMP).any()
        assert alone.peer.tolist() == whole.peer[mine].tolist()  # the same messages, in the same order
        # nothing waits for what is not there: the rest of the schedule only delays it
        phases = [p for chunk in result.schedule.chunks if chunk.collective == c for p in chunk.phases]
        span = max(p.end_ns for p in phases) - min(p.start_ns for p in phases)
        program = as_msccl(whole, c)
        time_ns = check_program(program).time_ns
        assert time_ns <= span + 1
        write_msccl(program, tmp_path / coll.id, time_ns=time_ns)
        back = check_program(read_msccl(tmp_path / coll.id)).time_ns
        assert back >= 0.98 * time_ns - 50 and (coll.kind is not Kind.ALL_REDUCE or back <= 1.02 * time_ns + 50)
    with pytest.raises(InputError, match="not one of the program's 3"):
        one_collective(whole, 3)


def test_the_cli_writes_one_collective_named_and_asks_for_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from themis_opt.cli import main
    from themis_opt.formats.native import save_instance, save_result

    instance = _several()
    save_instance(instance, tmp_path / "i.json")
    save_result(solve(instance, method="themis", time_limit=2, workers=1), tmp_path / "r.json")
    argv = ["export-program", str(tmp_path / "r.json"), "--instance", str(tmp_path / "i.json")]
    for flags, words in (
        (["--format", "msccl"], "holds 3 collectives (a, b, c): name the one"),
        (["--format", "msccl", "--collective", "zz"], "no collective 'zz' in the instance (its ids: a, b, c)"),
        (["--collective", "a"], "applies with --format msccl only"),
    ):
        assert main([*argv, *flags, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
    assert main([*argv, "--format", "msccl", "--collective", "b", "--out", str(tmp_path / "b")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "8 NPUs (of the 16" in said and "collective b alone; its span in the schedule" in said
    assert main(["check-program", str(tmp_path / "b")]) == 0
    assert 'coll="reducescatter"' in (tmp_path / "b" / XML).read_text()


def test_each_stages_all_reduce_of_a_pipeline_is_its_stages_algorithm(tmp_path: Path) -> None:
    instance = load("two_stages")  # two stages of two NPUs, their sends between them
    whole = program_of(instance, solve(instance, method="themis"))
    stages = {coll.stage for coll in instance.collectives if coll.kind is Kind.ALL_REDUCE}
    assert stages == {0, 1}
    for c, coll in enumerate(instance.collectives):
        if coll.kind is Kind.ALL_REDUCE:
            program = as_msccl(whole, c)
            assert program.npus == 2 and program.collectives[0].stage == 0
            time_ns = check_program(program).time_ns
            write_msccl(program, tmp_path / coll.id, time_ns=time_ns)
            assert check_program(read_msccl(tmp_path / coll.id)).time_ns == time_ns
