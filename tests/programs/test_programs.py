"""Programs: built from every method's schedules, proved by the checker, timed as ASTRA-sim 2.x times them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.conftest import load
from themis_opt import solve
from themis_opt.errors import InputError
from themis_opt.instance import After, Algorithm, Collective, Dimension, Instance, Kind, Network, Topology
from themis_opt.programs import (
    Link,
    OpKind,
    Program,
    ProgramCollective,
    check_program,
    check_programmable,
    program_of,
    time_program,
)
from themis_opt.schedule import ChunkSchedule, Phase, Schedule

HEURISTICS = ("baseline", "themis", "balanced")
FLATTENED = (Algorithm.ONE_RING, Algorithm.ONE_DIRECT, Algorithm.ONE_HALVING_DOUBLING)


def _instance(
    dims: list[Dimension], kind: Kind = Kind.ALL_REDUCE, size: int = 1 << 20, chunks: int = 1, **net: object
) -> Instance:
    return Instance(Network(tuple(dims), **net), (Collective(kind, size, chunks),), name="p")  # type: ignore[arg-type]


def _off_by(program: Program, makespan: float | None) -> float:
    """How far the program's time is from the schedule's makespan, in ns, less what rounding allows:
    1 ns a message on a path (a pad rounds up to whole bytes, ASTRA-sim truncates each message), at
    most as many messages as an NPU sends. At most 0 where the program keeps the schedule's time.
    """
    assert makespan is not None
    sends = program.kind == OpKind.SEND
    messages = int(np.bincount(program.rank[sends], minlength=program.npus).max(initial=0))
    return abs(check_program(program).time_ns - makespan) - 1 - messages


def test_a_hand_ring_takes_what_astra_sim_measured() -> None:
    # ASTRA-sim 2.x (518bd51): a 1 MiB all-reduce as a hand ring on Ring 4 @ 50 GB/s, 500 ns:
    # 3 reduce-scatter and 3 all-gather steps of 256 KiB, 5382 ns each, and the end waits for the
    # ring's every send, one of which lands 1 ns after its step's receipt: 32293 ns in all (no
    # endpoint delay in the model: no message padded)
    instance = _instance([Dimension(4, Topology.RING, 50, 500)], endpoint_delay_ns=0.0)
    program = program_of(instance, solve(instance, method="baseline"))
    assert check_program(program).time_ns == 32293
    sends = program.kind == OpKind.SEND
    assert set(program.size[sends].tolist()) == {1 << 18}
    assert np.count_nonzero(sends) == 4 * 6


def test_two_chunks_in_opposite_orders_take_what_astra_sim_measured() -> None:
    # ASTRA-sim 2.x: Ring4 (100 GB/s, 500 ns) x Ring2 (25 GB/s, 1000 ns), 4 MiB as 2 chunks, chunk 0
    # d0 then d1, chunk 1 the reverse, both dimensions one phase at a time: 101654 ns
    instance = _instance(
        [Dimension(4, Topology.RING, 100, 500), Dimension(2, Topology.RING, 25, 1000)],
        size=4 << 20,
        chunks=2,
        endpoint_delay_ns=0.0,
    )
    schedule = solve(instance, method="themis").schedule
    assert schedule is not None and {c.order for c in schedule.chunks} == {(0, 1), (1, 0)}
    assert check_program(program_of(instance, schedule)).time_ns == 101654


@pytest.mark.parametrize("name", ["worked", "tiny_ar", "tiny_rs", "tiny_ag", "tiny_3d", "three_dim"])
@pytest.mark.parametrize("method", HEURISTICS)
def test_every_method_on_the_bundled_tiny_instances(name: str, method: str) -> None:
    instance = load(name)
    result = solve(instance, method=method)
    program = program_of(instance, result)
    # each message padded with the model's delays the custom path lacks: the schedule's time
    assert _off_by(program, result.makespan) <= 0


def test_cpsat_schedules_become_programs_too() -> None:
    instance = load("tiny_ar")
    result = solve(instance, method="cpsat", time_limit=5, workers=1)
    assert _off_by(program_of(instance, result), result.makespan) <= 0


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    dims = []
    for _ in range(draw(st.integers(1, 3))):
        topology = draw(st.sampled_from(list(Topology)))
        algorithm = draw(st.sampled_from([Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING]))
        size = draw(st.sampled_from([2, 4] if algorithm is Algorithm.HALVING_DOUBLING else [2, 3, 4]))
        bandwidth = draw(st.sampled_from([25.0, 50.0, 100.0]))
        latency = draw(st.sampled_from([0.0, 300.0]))
        dims.append(Dimension(size, topology, bandwidth, latency, algorithm=algorithm, all_to_all_algorithm="direct"))
    kind = draw(st.sampled_from([Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.ALL_TO_ALL]))
    size = draw(st.sampled_from([1 << 16, 3 * 5 * 7 * 1024 + 1]))  # shared out evenly, or not
    unaware = draw(st.booleans())
    active = draw(st.sampled_from([1, 2])) if unaware else 1
    flat = draw(st.sampled_from([None, None, None, *FLATTENED]))  # then all but all-to-alls flattened
    if flat is not None:
        sizes = [2, 4] if flat is Algorithm.ONE_HALVING_DOUBLING else [2, 3, 4]
        dims = [
            Dimension(
                draw(st.sampled_from([2, 4] if a is Algorithm.HALVING_DOUBLING else sizes)),
                d.topology,
                d.bandwidth_gbps,
                d.latency_ns,
                algorithm=a,
                all_to_all_algorithm="direct",
            )
            for a, d in zip([flat, *(d.algorithm for d in dims[1:])], dims)
        ]
        return _instance(dims, kind, size, draw(st.integers(1, 4)), congestion_unaware=True, innermost_charge=True)
    instance = _instance(dims, kind, size, draw(st.integers(1, 4)), congestion_unaware=unaware, active_chunks=active)
    fours = [d for d, dim in enumerate(dims) if dim.size == 4]
    if fours and draw(st.booleans()):  # a dimension carved in two (each part its own ring or switch)
        instance = Instance(instance.network.split(draw(st.sampled_from(fours)), 2), instance.collectives, name="p")
    return instance


@settings(max_examples=30, deadline=None)
@given(instances(), st.sampled_from(HEURISTICS))
def test_random_programs_compute_their_collective(instance: Instance, method: str) -> None:
    result = solve(instance, method=method)
    program = program_of(instance, result)
    timing = check_program(program)
    assert result.makespan is not None and result.schedule is not None
    # at most the makespan, but for the latency of each message a direct phase on a ring or switch
    # sends after another (the model shares the bandwidth among them; the program sends them in turn)
    phases = sum(len(c.phases) for c in result.schedule.chunks)
    kind = instance.collectives[0].kind
    direct = [d for d in instance.network.dimensions if d.algorithm_for(kind) is Algorithm.DIRECT]
    extra = (
        max((d.size - 2) * 2 * d.latency_ns for d in direct)
        if any(d.topology is not Topology.FULLY_CONNECTED for d in direct) and not instance.network.congestion_unaware
        else 0
    )
    assert timing.time_ns <= result.makespan + phases * extra + 1 + np.count_nonzero(program.kind == OpKind.SEND)
    if not extra:
        assert _off_by(program, result.makespan) <= 0
    # every message carries bytes
    sends = program.kind == OpKind.SEND
    assert program.size[sends].min() > 0


def _tamper(program: Program, **columns: np.ndarray) -> Program:
    return dataclasses.replace(program, **columns)


@pytest.fixture(scope="module")
def tiny() -> Program:
    instance = load("tiny_ar")
    return program_of(instance, solve(instance, method="themis"))


def test_a_receive_of_another_size_is_refused(tiny: Program) -> None:
    size = tiny.size.copy()
    size[np.flatnonzero(tiny.kind == OpKind.RECV)[3]] += 1
    with pytest.raises(InputError, match="another size"):
        check_program(_tamper(tiny, size=size))


def test_a_send_without_its_receive_is_refused(tiny: Program) -> None:
    tag = tiny.tag.copy()
    tag[np.flatnonzero(tiny.kind == OpKind.SEND)[0]] += 10**9
    with pytest.raises(InputError, match="without its match"):
        check_program(_tamper(tiny, tag=tag))


def test_data_reduced_twice_is_refused(tiny: Program) -> None:
    # a reduce-scatter receive that copies leaves the sum short; one that an all-gather's becomes sums twice
    reduce = tiny.reduce.copy()
    reduce[(tiny.kind == OpKind.RECV) & ~tiny.reduce] = True
    with pytest.raises(InputError, match=r"holds it already|without its result"):
        check_program(_tamper(tiny, reduce=reduce))


def test_the_wrong_units_are_refused(tiny: Program) -> None:
    units = tiny.units.copy()
    recvs = np.flatnonzero(tiny.kind == OpKind.SEND)
    units[recvs[0]] = (units[recvs[0]] + 1) % len(tiny.unit_sets)
    with pytest.raises(InputError):
        check_program(_tamper(tiny, units=units))


def _two_npus(first: OpKind, second: OpKind, *, chained: bool) -> Program:
    """Two NPUs on a 2-ring, each running ``first`` then ``second`` (to the other), one chunk of 2 units."""
    kinds = [first, second] * 2
    peers = [1, 1, 0, 0]
    zeros = np.zeros(4, dtype=np.int64)
    sends = [k == OpKind.SEND for k in kinds]
    return Program(
        links=(Link(2, Topology.RING, 50.0, 500.0),),
        collectives=(ProgramCollective(Kind.REDUCE_SCATTER, (0,), (2048,)),),
        unit_sets=(0b10, 0b01),
        rank_start=np.array([0, 2, 4]),
        kind=np.array(kinds),
        peer=np.array(peers),
        size=np.full(4, 1024),
        tag=zeros,
        collective=zeros,
        chunk=zeros,
        phase=zeros,
        units=np.array([0 if (r == 0) == send else 1 for r, send in zip([0, 0, 1, 1], sends)]),
        reduce=~np.array(sends),
        duration_ns=zeros,
        dep_start=np.array([0, 0, 1, 1, 2]) if chained else np.zeros(5, dtype=np.int64),
        deps=np.array([0, 2]) if chained else np.zeros(0, dtype=np.int64),
    )


def test_a_message_is_timed_with_astra_sims_own_rounding() -> None:
    # 2.x's rate is 50 * 2^30 / 10^9 B/ns, rounded once: 12,582,912 B take 234,375 ns exactly (the rate
    # rounded twice, 50 * (2^30 / 10^9), makes it 234,374.99999999997: 1 ns short once truncated)
    program = _two_npus(OpKind.SEND, OpKind.RECV, chained=False)
    timing = time_program(_tamper(program, size=np.full(4, 12_582_912)))
    assert timing.time_ns == 500 + 234_375


def test_a_reduce_scatter_by_hand_is_proved() -> None:
    program = _two_npus(OpKind.SEND, OpKind.RECV, chained=False)
    assert check_program(program).time_ns == int(500 + 1024 / (50 * 2**30 / 1e9))


def test_each_waiting_to_receive_first_is_a_deadlock() -> None:
    with pytest.raises(InputError, match="deadlock"):
        check_program(_two_npus(OpKind.RECV, OpKind.SEND, chained=True))


def _rebuild(program: Program, deps: list[list[int]]) -> Program:
    counts = np.array([len(d) for d in deps])
    return dataclasses.replace(
        program, dep_start=np.r_[0, np.cumsum(counts)], deps=np.array([x for d in deps for x in d], dtype=np.int64)
    )


def test_two_phases_at_once_on_a_dimension_are_refused() -> None:
    instance = _instance([Dimension(4, Topology.RING, 50, 500)], chunks=2)
    program = program_of(instance, solve(instance, method="baseline"))
    check_program(program)
    # drop every dependency of the second chunk's first step: it then runs beside the first chunk
    deps = [program.deps_of(i).tolist() for i in range(program.num_ops)]
    for i in range(program.num_ops):
        if program.chunk[i] == 1 and program.tag[i] % 10 == 0 and program.phase[i] == 0:
            deps[i] = []
    with pytest.raises(InputError, match="still runs there"):
        check_program(_rebuild(program, deps))


@pytest.mark.parametrize("inner", [2, 4])
def test_a_ring_carved_from_a_larger_one_runs_in_the_schedules_time(inner: int) -> None:
    # a part of a ring of 8 NPUs: its closing link spans the far way round (3 hops for 4 NPUs one
    # apart), which only the NPU behind it waits for, as the model's relayed ring has it
    network = Network((Dimension(8, Topology.RING, 100, 500), Dimension(2, Topology.SWITCH, 50, 700)))
    instance = Instance(network.split(0, inner), (Collective(Kind.ALL_REDUCE, 1 << 26, 4),), name="carved")
    for method in ("baseline", "themis"):
        result = solve(instance, method=method)
        program = program_of(instance, result)
        assert _off_by(program, result.makespan) <= 0
    sends = program.kind == OpKind.SEND
    assert set(program.message_apart[sends & (program.message_dim == 0)].tolist()) == {1, inner - 1}
    assert set(program.message_apart[sends & (program.message_dim == 1)].tolist()) == {inner, 8 - inner}


def test_what_no_program_is_written_for_is_named() -> None:
    tree = _instance([Dimension(4, Topology.SWITCH, 50, 500, algorithm=Algorithm.DOUBLE_BINARY_TREE)])
    with pytest.raises(InputError, match="double_binary_tree"):
        program_of(tree, solve(tree, method="baseline"))
    relayed = _instance([Dimension(4, Topology.RING, 50, 500)], Kind.ALL_TO_ALL)  # a ring's all-to-all is relayed
    with pytest.raises(InputError, match="ring: no program is written for its all-to-all"):
        program_of(relayed, solve(relayed, method="baseline"))
    # a send within the one stage is a ring's step (ring attention): each NPU to the next, not refused
    sends = Instance(
        Network((Dimension(4, Topology.SWITCH, 50, 500),)), (Collective(Kind.SEND, 1 << 20, 1, group=(0, 1)),), "s"
    )
    result = solve(sends, method="baseline")
    program = program_of(sends, result)
    assert program.peer[program.kind == OpKind.SEND].tolist() == [1, 2, 3, 0]
    assert _off_by(program, result.makespan) <= 0


def _all_to_all(topology: Topology = Topology.FULLY_CONNECTED) -> Instance:
    dims = (Dimension(3, topology, 100.0, 500.0), Dimension(2, Topology.FULLY_CONNECTED, 50.0, 700.0))
    colls = (Collective(Kind.ALL_TO_ALL, 3 * 2**20 + 7, 2), Collective(Kind.ALL_REDUCE, 2**20, 2, issue_ns=1_000.0))
    return Instance(Network(dims), colls, "a2a")


@pytest.mark.parametrize("method", [*HEURISTICS, "cpsat"])
def test_an_all_to_all_delivers_every_block_in_the_schedules_time(method: str) -> None:
    # each NPU ends with the block every NPU had for it; where each NPU's messages have their own
    # links (fully connected) the program takes the schedule's time, less the model's endpoint delays
    instance = _all_to_all()
    result = solve(instance, method=method, time_limit=2, workers=1)
    assert result.makespan is not None
    program = program_of(instance, result)
    assert _off_by(program, result.makespan) <= 0
    # the bytes moved: on the 3-NPU dimension each unit leaves the 4 NPUs not at its coordinate
    # there, on the 2-NPU one each NPU sends one unit from each of 3 NPUs: 7 times the bytes in all
    sends = (program.kind == OpKind.SEND) & (program.collective == 0)
    assert int(program.size[sends].sum()) == 7 * (3 * 2**20 + 7)


def test_an_all_to_all_block_sent_to_the_wrong_npu_is_refused() -> None:
    instance = _all_to_all()
    program = program_of(instance, solve(instance, method="baseline"))
    units = program.units.copy()
    sends = np.flatnonzero((program.kind == OpKind.SEND) & (program.collective == 0) & (program.rank == 0))
    units[sends[0]], units[sends[1]] = units[sends[1]], units[sends[0]]  # two blocks swapped at NPU 0
    with pytest.raises(InputError):
        check_program(_tamper(program, units=units))


def test_a_schedule_of_another_instance_is_refused() -> None:
    instance = load("tiny_ar")
    other = load("worked")
    with pytest.raises(InputError, match="does not fit"):
        program_of(instance, solve(other, method="baseline"))
    bad = Schedule((ChunkSchedule(0, 0, (0,), (Phase(0, "reduce_scatter", 0, 1, 1, 1),)),))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="does not fit"):
        program_of(instance, bad)


def test_the_timer_follows_the_longest_path(tiny: Program) -> None:
    timing = time_program(tiny)
    assert timing.time_ns == timing.end_ns.max()
    assert len(timing.order) == tiny.num_ops
    place = np.empty(tiny.num_ops, dtype=np.int64)
    place[timing.order] = np.arange(tiny.num_ops)
    owner = np.repeat(np.arange(tiny.num_ops), np.diff(tiny.dep_start))
    assert np.all(place[tiny.deps] < place[owner])


@pytest.mark.parametrize("active", [2, 3])
def test_phases_at_once_on_a_dimension_keep_their_slots(active: int) -> None:
    # with active_chunks at once a phase takes the slot of the one that ended by its start: no more
    # run at once than the schedule runs, and no wait it does not have
    dims = (
        Dimension(4, Topology.RING, 100, 500),
        Dimension(4, Topology.SWITCH, 50, 500, algorithm=Algorithm.DIRECT),
        Dimension(2, Topology.SWITCH, 25, 700, algorithm=Algorithm.HALVING_DOUBLING),
    )
    network = Network(dims, congestion_unaware=True, active_chunks=active)
    instance = Instance(network, (Collective(Kind.ALL_REDUCE, 64 << 20, 8),), name="slots")
    for method in HEURISTICS:
        result = solve(instance, method=method)
        assert _off_by(program_of(instance, result), result.makespan) <= 0


def _flattened(algorithm: Algorithm, kind: Kind, **net: object) -> Instance:
    dims = [
        Dimension(4, Topology.RING, 100.0, 500.0, algorithm=algorithm),  # messages of every dimension
        Dimension(2, Topology.SWITCH, 50.0, 700.0),
        Dimension(2, Topology.FULLY_CONNECTED, 25.0, 900.0),
    ]
    return _instance(dims, kind, 1 << 26, 3, **{"innermost_charge": True, "congestion_unaware": True, **net})


@pytest.mark.parametrize("algorithm", FLATTENED)
@pytest.mark.parametrize("kind", [Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER])
def test_a_flattened_collective_runs_over_every_npu_in_the_schedules_time(algorithm: Algorithm, kind: Kind) -> None:
    # one phase over all 16 NPUs a chunk, its messages charged where ASTRA-sim 2.x charges them (the
    # lowest dimension their NPUs differ in); the schedule's endpoint delays are all that differ
    instance = _flattened(algorithm, kind)
    result = solve(instance, method="themis")
    program = program_of(instance, result)
    assert program.collectives[0].flat and program.group_units(0) == 16
    differ = (program.coordinates[program.rank] != program.coordinates[program.peer]).sum(axis=1)
    several = np.any((program.kind == OpKind.SEND) & (differ > 1))  # a hop over several dimensions
    assert several == (algorithm is not Algorithm.ONE_HALVING_DOUBLING)  # its partners differ in one bit
    assert _off_by(program, result.makespan) <= 0


def test_a_flattened_direct_on_shared_ports_sends_each_dimensions_messages_in_turn() -> None:
    shared = _flattened(Algorithm.ONE_DIRECT, Kind.REDUCE_SCATTER, congestion_unaware=False)
    free = _flattened(Algorithm.ONE_DIRECT, Kind.REDUCE_SCATTER)
    times = [check_program(program_of(i, solve(i, method="baseline"))).time_ns for i in (shared, free)]
    makespan = solve(shared, method="baseline").makespan
    assert makespan is not None and times[0] > 1.5 * times[1]
    assert makespan <= times[0] <= 1.1 * makespan  # a latency a message in turn, where the model pays one
    # a dimension's messages in turn pay the step's 10 ns delay once: a share each (NPU 0's 15 are
    # charged 12 on the ring, 2 on the switch, in turn, and 1 on the fully-connected dimension)
    program = program_of(shared, solve(shared, method="baseline"))
    first = (program.rank == 0) & (program.kind == OpKind.SEND) & (program.tag == program.tag.min())
    gbps = np.array([link.bandwidth_gbps for link in program.links])[program.message_dim[first]]
    count = np.array([12, 2, 1])[program.message_dim[first]]
    assert np.array_equal(program.pad[first], np.ceil(10 / count * gbps * 2**30 / 1e9).astype(np.int64))


def test_a_flattened_collective_charged_on_the_outermost_dimension_is_refused() -> None:
    outer = _flattened(Algorithm.ONE_RING, Kind.ALL_REDUCE, innermost_charge=False)
    with pytest.raises(InputError, match=r"outermost dimension.*2\.x charges the innermost"):
        program_of(outer, solve(outer, method="baseline"))


def test_a_flattened_collective_beside_a_dimension_by_dimension_one() -> None:
    # the all-reduce takes dimension 0 (of every NPU) in the schedule, the all-to-all each dimension
    direct = {"all_to_all_algorithm": Algorithm.DIRECT}
    dims = (
        Dimension(4, Topology.SWITCH, 100.0, 500.0, algorithm=Algorithm.ONE_DIRECT, **direct),
        Dimension(2, Topology.SWITCH, 50.0, 700.0, **direct),
    )
    network = Network(dims, innermost_charge=True, congestion_unaware=True)
    colls = (Collective(Kind.ALL_REDUCE, 1 << 24, 2), Collective(Kind.ALL_TO_ALL, 1 << 24, 2, issue_ns=1000.0))
    instance = Instance(network, colls, "mixed")
    result = solve(instance, method="themis")
    program = program_of(instance, result)
    assert [c.flat for c in program.collectives] == [True, False]
    assert _off_by(program, result.makespan) <= 0


def test_pipeline_stages_run_their_own_tasks_and_send_each_npu_to_its_partner() -> None:
    # two stages of two NPUs (the switch of 2 between them): each stage's computations and
    # all-reduce at its own NPUs, its sends from each NPU to the one across the switch
    instance = load("two_stages")
    result = solve(instance, method="themis")
    program = program_of(instance, result)
    assert program.stages == ((0, 1), (2, 3))
    for c, coll in enumerate(program.collectives):
        ranks = set(program.rank[(program.collective == c) & (program.kind != OpKind.COMP)].tolist())
        if coll.kind is Kind.SEND:  # from every NPU of its stage, to every one of the other
            assert ranks == {0, 1, 2, 3}
            sends = (program.collective == c) & (program.kind == OpKind.SEND)
            assert set(program.rank[sends].tolist()) == set(program.stages[coll.stage])
            assert np.all(program.peer[sends] == program.rank[sends] ^ 2)
        else:
            assert ranks == set(program.stages[coll.stage])
    durations = program.duration_ns[program.kind == OpKind.COMP]
    assert sorted(set(durations.tolist()) - {0}) == [1000, 2000, 3000]
    assert _off_by(program, result.makespan) <= 0


@pytest.mark.parametrize("pp", [1, 2])
def test_ring_attention_sends_each_npu_its_block_round_its_stage(pp: int) -> None:
    from themis_opt.workloads.llm import Layout, LlmConfig, llm_task_graph

    network = Network(tuple(Dimension(n, Topology.SWITCH, b, 500.0) for n, b in ((2, 400.0), (4, 100.0), (2, 25.0))))
    layout = Layout(tp=2, cp=4, dp=2 // pp, pp=pp, microbatches=pp, batch=2, sequence=1024, cp_attention="ring")
    instance = llm_task_graph(LlmConfig("toy", 2, 8, 2, 1, 16, 32, 4, True), network, layout)
    result = solve(instance, method="themis")
    program = program_of(instance, result)
    rings = [c for c, coll in enumerate(instance.collectives) if "ring_" in coll.id]
    assert rings
    for c in rings:  # from every NPU of its stage to the next of its context group: one step round dimension 1
        sends = (program.collective == c) & (program.kind == OpKind.SEND)
        ranks = program.rank[sends]
        assert set(ranks.tolist()) == set(program.stages[instance.collectives[c].stage] if pp > 1 else range(16))
        x1 = (ranks // 2) % 4
        assert np.all(program.peer[sends] == ranks + 2 * ((x1 + 1) % 4 - x1))
    assert _off_by(program, result.makespan) <= 0


def test_what_a_pipeline_program_cannot_hold_is_named() -> None:
    instance = load("two_stages")
    tasks = list(instance.tasks)
    f1 = next(n for n, t in enumerate(tasks) if t.id == "f1")
    tasks[f1] = dataclasses.replace(tasks[f1], after=(*tasks[f1].after, After("f0")))  # not through a send
    crossing = dataclasses.replace(instance, tasks=tuple(tasks))
    with pytest.raises(InputError, match="waits for f0 of stage 0: a stage waits for another through a send"):
        check_programmable(crossing)
    ar = next(n for n, t in enumerate(instance.tasks) if t.id == "ar0")
    wide = list(instance.tasks)
    wide[ar] = dataclasses.replace(wide[ar], dimensions=(0, 1))  # over the switch between the stages
    with pytest.raises(InputError, match="runs beyond stage 0's NPUs"):
        check_programmable(dataclasses.replace(instance, tasks=tuple(wide)))


def _grouped(kind: Kind) -> Instance:
    """Three collectives one after another in communicator groups of a 4 x 4 network: the rows (over
    the ring), the columns (across the switch) and the diagonals (both), each moved to every NPU."""
    network = Network(
        (Dimension(4, Topology.RING, 100.0, 500.0), Dimension(4, Topology.SWITCH, 50.0, 1000.0)),
        innermost_charge=True,
        congestion_unaware=True,
    )
    colls = (
        Collective(kind, 1 << 20, 4, group=(0, 1, 2, 3), id="dp"),
        Collective(kind, 1 << 20, 4, group=(0, 4, 8, 12), id="tp", after=(After("dp"),)),
        Collective(kind, 3 << 20, 2, group=(0, 5, 10, 15), id="diag", after=(After("tp"),)),
    )
    return Instance(network, colls, "groups")


@pytest.mark.parametrize("kind", [Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER])
def test_a_communicator_group_runs_one_ring_over_each_of_its_moves(kind: Kind) -> None:
    instance = _grouped(kind)
    result = solve(instance, method="themis")
    program = program_of(instance, result)
    assert program.collectives[2].groups == ((0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))
    for c, coll in enumerate(program.collectives):
        sends = (program.collective == c) & (program.kind == OpKind.SEND)
        after = {g[k]: g[(k + 1) % len(g)] for g in coll.groups for k in range(len(g))}  # the ring's next NPU
        assert all(after[r] == p for r, p in zip(program.rank[sends].tolist(), program.peer[sends].tolist()))
    # the check proves every group's result at its NPUs, in the schedule's time
    assert _off_by(program, result.makespan) <= 0


def test_a_group_whose_moves_do_not_split_the_npus_is_named() -> None:
    network = Network((Dimension(4, Topology.RING, 100.0, 500.0),), innermost_charge=True)
    overlapping = Instance(network, (Collective(Kind.ALL_REDUCE, 1 << 20, 1, group=(0, 1, 2)),), "odd")
    with pytest.raises(InputError, match=r"group \[0, 1, 2\] moved to NPU 3 overlaps another NPU's group"):
        check_programmable(overlapping)
