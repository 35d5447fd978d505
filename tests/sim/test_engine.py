"""The simulator: worked-example makespans, the SCF queue, left shifts."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
from hypothesis import given, strategies as st

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.errors import InputError
from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Network
from themis_opt.policies import ThemisTracker, baseline_orders, themis_orders
from themis_opt.schedule import Schedule
from themis_opt.search.timer import AssignmentTimer
from themis_opt.sim import Engine, PhaseMemo, core as simcore, retime, sequences_of, simulate, simulate_makespan
from themis_opt.sim.engine import ScfQueue
from themis_opt.sim.queues import Intra
from themis_opt.validator import critical_path, validate

from ..conftest import heuristic_schedules, load


def test_worked_example_makespans(worked: Instance) -> None:
    assert simulate(worked, baseline_orders(worked), "fifo").makespan == pytest.approx(949740.0)
    assert simulate(worked, themis_orders(worked), "fifo").makespan == pytest.approx(1147316.875)
    assert simulate(worked, themis_orders(worked), "scf").makespan == pytest.approx(1147316.875)


MIB = 2**20


def _one_dim(*collectives: Collective) -> Instance:
    """One ring of 2 NPUs at 100 GB/s: every phase of every collective queues on d0."""
    return Instance(Network((Dimension(2, "ring", 100.0, 500.0),)), collectives)


def _service(schedule: Schedule) -> list[tuple[int, str]]:
    """The order d0 serves phases in, as (collective, op initial)."""
    return [(c, phase.op.value[0]) for phase, c, _ in schedule.by_dimension()[0]]


def test_scf_second_to_last_phase_joins_the_tail_and_the_last_is_inserted_by_size() -> None:
    # c0 (RS 8 MiB) runs from 0; c1 (AR 1 MiB), c2 (RS 4 MiB) and c3 (AR 1 MiB) wait.
    instance = _one_dim(
        Collective("reduce_scatter", 8 * MIB, 1),
        Collective("all_reduce", MIB, 1),
        Collective("reduce_scatter", 4 * MIB, 1, issue_ns=1000),
        Collective("all_reduce", MIB, 1, issue_ns=2000),
    )
    schedule = simulate(instance, baseline_orders(instance), "scf")
    # Queue while c0 runs: c1's RS is second-to-last: tail -> [c1.r]; c2 has no smaller
    # entry after it -> [c1.r, c2]; c3's RS, second-to-last, also joins the tail although
    # it is the smallest -> [c1.r, c2, c3.r]. c1's AG (its last phase, 1 MiB) then goes
    # before c2 (4 MiB): inserted by size.
    assert _service(schedule) == [(0, "r"), (1, "r"), (1, "a"), (2, "r"), (3, "r"), (3, "a")]
    assert validate(instance, schedule) == []


def test_scf_same_instant_arrival_starts_an_idle_dimension_at_once() -> None:
    # Both are issued at 0, the larger first in collective order: it finds d0 idle and
    # starts before the smaller one is even queued.
    instance = _one_dim(Collective("reduce_scatter", 4 * MIB, 1), Collective("reduce_scatter", MIB, 1))
    schedule = simulate(instance, baseline_orders(instance), "scf")
    assert _service(schedule) == [(0, "r"), (1, "r")]
    first = schedule.chunks[0].phases[0]
    assert first.start_ns == 0.0
    assert schedule.chunks[1].phases[0].start_ns == pytest.approx(first.end_ns)
    # Phases that wait for a busy dimension still queue by size: the later, smaller one first.
    three = _one_dim(
        Collective("reduce_scatter", 4 * MIB, 1),
        Collective("reduce_scatter", 2 * MIB, 1, issue_ns=10),
        Collective("reduce_scatter", MIB, 1, issue_ns=20),
    )
    assert _service(simulate(three, baseline_orders(three), "scf")) == [(0, "r"), (2, "r"), (1, "r")]


@pytest.mark.parametrize("engine", ["core", "python"])
def test_tail_serves_the_phase_with_the_longest_tail_first(engine: Engine) -> None:
    # c0 holds d0 from 0; c1 then c2 queue behind it. c2 has the longer tail: a compute task of
    # 1 ms waits for it; c3 (queued last, on d0 then d1) has its phase on d1 still to run.
    instance = Instance(
        Network((Dimension(2, "ring", 100.0, 500.0), Dimension(2, "ring", 10.0, 500.0))),
        (
            Collective("reduce_scatter", 8 * MIB, 1, dimensions=(0,)),
            Collective("reduce_scatter", MIB, 1, issue_ns=1000, dimensions=(0,)),
            Collective("reduce_scatter", MIB, 1, issue_ns=2000, dimensions=(0,), id="c2"),
            Collective("reduce_scatter", MIB, 1, issue_ns=3000, dimensions=(0, 1)),
            Compute(1e6, after=(After("c2"),)),
        ),
    )
    orders = baseline_orders(instance)
    fifo = simulate(instance, orders, "fifo", engine=engine)
    tail = simulate(instance, orders, "tail", engine=engine)
    assert _service(fifo) == [(0, "r"), (1, "r"), (2, "r"), (3, "r")]
    # c2's tail (1 ms) > c3's (its phase on the 10 GB/s ring) > c1's (nothing)
    assert _service(tail) == [(0, "r"), (2, "r"), (3, "r"), (1, "r")]
    assert tail.makespan < fifo.makespan
    assert validate(instance, tail) == []
    # its priorities come from the task graph's tails: worked out within the deadline, or not at all
    fresh = dataclasses.replace(instance)  # a new instance: nothing worked out for it yet
    with pytest.raises(OutOfTime, match="the tail policy's priorities"):
        simulate(fresh, orders, "tail", Deadline.after(0), engine=engine)


def test_every_simulated_schedule_is_valid_and_left_shifted(instance: Instance) -> None:
    for name, schedule in heuristic_schedules(instance).items():
        assert validate(instance, schedule) == [], name
        length, path = critical_path(instance, schedule)
        assert length == pytest.approx(schedule.makespan, rel=1e-12), name
        assert path


def test_issue_time_is_respected(instance: Instance) -> None:
    schedule = simulate(instance, themis_orders(instance), "scf")
    for chunk in schedule.chunks:
        assert chunk.phases[0].start_ns >= instance.collectives[chunk.collective].issue_ns


def test_retime_reproduces_a_left_shifted_schedule(instance: Instance) -> None:
    schedule = simulate(instance, themis_orders(instance), "fifo")
    again = retime(instance, schedule.orders, sequences_of(instance, schedule))
    assert again == schedule


def test_retime_rejects_inconsistent_sequences(worked: Instance) -> None:
    schedule = simulate(worked, baseline_orders(worked), "fifo")
    sequences = sequences_of(worked, schedule)
    sequences[0] = list(reversed(sequences[0]))  # chunk 0's AG before its RS on dim 0
    with pytest.raises(InputError, match="cycle"):
        retime(worked, schedule.orders, sequences)
    sequences = sequences_of(worked, schedule)
    sequences[0] = sequences[0][1:]
    with pytest.raises(InputError, match="must sequence all"):
        retime(worked, schedule.orders, sequences)


def test_simulate_rejects_bad_orders(worked: Instance) -> None:
    orders = baseline_orders(worked)
    orders[(0, 1)] = (0, 0)
    with pytest.raises(InputError, match=r"orders\[0, 1\]"):
        simulate(worked, orders)
    del orders[(0, 1)]
    with pytest.raises(InputError, match="missing"):
        simulate(worked, orders)


Op3 = tuple[str, float, int]


def _naive(ops: list[Op3]) -> list[int]:
    """ASTRA-sim's list insertion, literally: scan to the first item >= key
    (or, for an all-to-all, to the first of lower rank).
    """
    queue: list[tuple[float, int, int]] = []
    popped = []
    for item, (op, key, rank) in enumerate(ops):
        if op == "pop":
            if queue:
                popped.append(queue.pop(0)[2])
        elif op == "tail":
            queue.append((key, rank, item))
        elif op == "insert":
            at = next((i for i, (k, _, _) in enumerate(queue) if k >= key), len(queue))
            queue.insert(at, (key, rank, item))
        else:
            at = next((i for i, (_, r, _) in enumerate(queue) if r < rank), len(queue))
            queue.insert(at, (key, rank, item))
    return popped + [item for _, _, item in queue]


def _queued(ops: list[Op3]) -> list[int]:
    queue = ScfQueue()
    popped = []
    for item, (op, key, rank) in enumerate(ops):
        if op == "pop":
            if len(queue):
                popped.append(queue.pop())
        elif op == "tail":
            queue.append(key, item, rank)
        elif op == "insert":
            queue.insert_before_ge(key, item, rank)
        else:
            queue.insert_before_lower_rank(rank, key, item)
    while len(queue):
        popped.append(queue.pop())
    return popped


OPS = st.sampled_from(["insert", "insert", "tail", "pop", "rank"])


@given(st.lists(st.tuples(OPS, st.integers(1, 6).map(float), st.integers(0, 3))))
def test_scf_queue_matches_the_literal_list(ops: list[Op3]) -> None:
    assert _queued(ops) == _naive(ops)


@pytest.mark.parametrize("seed", range(20))
def test_long_scf_queues_match_the_literal_list(seed: int) -> None:
    # hundreds of items: blocks fill, split and empty
    rng = random.Random(seed)
    kinds = ["insert", "insert", "tail", "pop", "rank"] if seed % 2 else ["insert", "tail", "tail"]
    ops = [(rng.choice(kinds), float(rng.randint(1, 40)), rng.randint(0, 3)) for _ in range(rng.randint(100, 600))]
    assert _queued(ops) == _naive(ops)


def test_scf_queue_pop_empty() -> None:
    with pytest.raises(IndexError):
        ScfQueue().pop()


def test_simulation_is_deterministic(instance: Instance) -> None:
    first = simulate(instance, themis_orders(instance), "scf")
    assert simulate(instance, themis_orders(instance), "scf") == first


@pytest.mark.parametrize("name", ["worked", "three_dim", "mixed", "tiny_ag", "graph_2l2p"])
def test_makespan_only_runs_match_simulate(name: str) -> None:
    instance = load(name)
    rng = random.Random(7)
    memo: PhaseMemo = {}  # one memo across every run, as the assignment search keeps it
    for _ in range(6):
        orders = {
            (c, k): tuple(rng.sample(instance.active_dims[c], len(instance.active_dims[c])))
            for c, k in instance.chunk_ids
        }
        for intra in Intra:
            makespan, build = simulate_makespan(instance, orders, intra, Deadline(), memo)
            schedule = simulate(instance, orders, intra)
            assert makespan == schedule.makespan
            built = build()
            assert built == schedule
            assert validate(instance, built) == []


@pytest.mark.parametrize("engine", ["core", "python"])
@pytest.mark.parametrize("name", ["worked", "three_dim", "mixed", "graph_2l2p"])
def test_an_assignment_timer_times_as_simulate_does(name: str, engine: Engine) -> None:
    instance = load(name)
    rng = random.Random(3)
    timer = AssignmentTimer(instance, engine)
    for _ in range(4):
        orders = {
            (c, k): tuple(rng.sample(instance.active_dims[c], len(instance.active_dims[c])))
            for c, k in instance.chunk_ids
        }
        tokens = timer.tokens(orders)
        assert timer.orders(tokens) == orders
        for intra in Intra:
            expected = simulate(instance, orders, intra)
            assert timer.makespan(tokens, intra, Deadline()) == expected.makespan
            assert timer.schedule(tokens, intra) == expected


@pytest.mark.parametrize("engine", ["core", "python"])
@pytest.mark.parametrize("name", ["worked", "three_dim", "graph_2l2p"])
def test_an_assignment_timer_stops_only_past_its_cutoff(name: str, engine: Engine) -> None:
    # at or above the makespan the cutoff changes nothing; below it the answer is the makespan or
    # inf, and inf (the core stops early) when even the busiest dimension's work alone exceeds it
    instance = load(name)
    timer = AssignmentTimer(instance, engine)
    tokens = timer.tokens(themis_orders(instance))
    for intra in Intra:
        makespan = timer.makespan(tokens, intra, Deadline())
        for cutoff in (makespan, makespan * (1 + 1e-6), math.inf):
            assert timer.makespan(tokens, intra, Deadline(), cutoff) == makespan
        for cutoff in (makespan * 0.999, makespan * 0.5):
            assert timer.makespan(tokens, intra, Deadline(), cutoff) in (makespan, math.inf)
        stopped = timer.makespan(tokens, intra, Deadline(), 0.0)
        assert stopped == (math.inf if engine == "core" and simcore.available() else makespan)


def test_two_assignment_timers_asked_alike_number_alike(worked: Instance) -> None:
    one, two = AssignmentTimer(worked), AssignmentTimer(worked)
    orders = themis_orders(worked)
    tokens = one.tokens(orders)
    for c, k, order in one.made:
        two.token(c, k, order)
    assert two.tokens(orders) == tokens and two.made == one.made


def test_an_assignment_timer_refuses_an_order_a_chunk_cannot_take(worked: Instance) -> None:
    timer = AssignmentTimer(worked)
    with pytest.raises(InputError, match=r"orders\[0, 0\]"):
        timer.token(0, 0, (0, 0))
    with pytest.raises(InputError, match="missing"):
        timer.tokens({})
    tokens = timer.tokens(themis_orders(worked))
    with pytest.raises(ValueError, match="tokens for"):
        timer.makespan(tokens[:-1], Intra.FIFO, Deadline())


def _crowd(active: int, chunks: int = 3) -> Instance:
    """Reduce-scatters of equal chunks on one ring, up to ``active`` phases at once."""
    network = Network((Dimension(4, "ring", 100.0, 500.0),), congestion_unaware=True, active_chunks=active)
    return Instance(network, (Collective("reduce_scatter", chunks * 2**20, chunks),))


def test_a_dimension_runs_as_many_phases_at_once_as_it_has_room_for() -> None:
    one = simulate(_crowd(1), baseline_orders(_crowd(1)), "fifo")
    phase = one.chunks[0].phases[0].duration
    assert one.makespan == pytest.approx(3 * phase)
    for active, rounds in ((2, 2), (3, 1), (8, 1)):
        instance = _crowd(active)
        schedule = simulate(instance, baseline_orders(instance), "fifo")
        assert schedule.makespan == pytest.approx(rounds * phase) and validate(instance, schedule) == []
        # re-timing its sequences gives it back: the left shift fills every free place
        assert retime(instance, schedule.orders, sequences_of(instance, schedule)) == schedule


def test_several_at_once_needs_a_congestion_unaware_network() -> None:
    with pytest.raises(InputError, match="active_chunks: above 1 needs congestion_unaware"):
        Network((Dimension(4, "ring", 100.0, 500.0),), active_chunks=2)


def test_two_stages_baseline_by_hand(two_stages: Instance) -> None:
    # ring 2 (100 GB/s, 500 ns) x switch 2 (50 GB/s, 1000 ns); stage 0 is NPU 0, stage 1 NPU 2.
    # f0 0-1000; s0 (0 -> 2, dim 1, 2 hops): 2000 + 1 MiB / 53.687 B/ns = 21531.25, ends 22531.25;
    # f1 on stage 1's unit until 24531.25; then s1 (stage 1, dim 1) and ar1 (stage 1, dim 0) at once:
    # s1 ends 46062.5; ar1's four phases (10 + 500 + 1 MiB / 107.374 B/ns = 10275.625 each) end 65633.75;
    # b0 46062.5-49062.5 on stage 0's unit; ar0's four phases end 49062.5 + 41102.5 = 90165
    schedule = simulate(two_stages, baseline_orders(two_stages), "fifo")
    assert validate(two_stages, schedule) == []
    ends = dict(zip((c.id for c in two_stages.collectives), schedule.collective_ends(4)))
    assert ends == {"s0": 22531.25, "s1": 46062.5, "ar1": 65633.75, "ar0": 90165.0}
    assert [(c.start_ns, c.end_ns) for c in schedule.computes] == [(0, 1000), (22531.25, 24531.25), (46062.5, 49062.5)]
    assert schedule.makespan == 90165.0
    assert simcore_runs(two_stages)  # the compiled core's, as Python's
    assert schedule == simulate(two_stages, baseline_orders(two_stages), "fifo", engine="python")


def simcore_runs(instance: Instance) -> bool:
    from themis_opt.sim.dispatch import core_runs

    return core_runs(instance, baseline_orders(instance), "auto")[0]


def test_stages_have_their_own_dimensions_and_compute_units() -> None:
    from themis_opt.instance import Compute

    network = Network((Dimension(2, "ring", 100.0, 500.0), Dimension(2, "ring", 100.0, 500.0)))
    tasks = tuple(
        task
        for stage in (0, 1)
        for task in (
            Collective("all_reduce", MIB, 1, dimensions=(0,), id=f"ar{stage}", stage=stage),
            Compute(1000.0, id=f"t{stage}", stage=stage),
        )
    )
    both = Instance(network, tasks, stage_npus=(0, 2))
    one = Instance(network, tasks[:2])
    for intra in Intra:
        schedule = simulate(both, ThemisTracker(both).plan, intra)
        alone = simulate(one, baseline_orders(one), intra)
        assert validate(both, schedule) == []
        assert schedule.makespan == alone.makespan  # side by side, as each alone
        assert [c.start_ns for c in schedule.computes] == [0.0, 0.0]
        assert schedule == simulate(both, ThemisTracker(both).plan, intra, engine="python")


def _serial_ends(serial: bool) -> tuple[Instance, dict[tuple[int, int], tuple[int, ...]]]:
    """tests/data/serial_ends.json: two equal rings of 2, two phases at once on each; ``long`` (64 MiB,
    priority 0) runs its chunks on d1 and d0 from 0, ``high`` (1 MiB chunks, priority 1) its chunk A on d1
    then d0 and B on d0 then d1, ``low`` (1 MiB, priority 0) its chunk X on d1 then d0: X waits at 0.
    """
    instance = load("serial_ends")
    if not serial:
        instance = Instance(dataclasses.replace(instance.network, serial_phase_ends=False), instance.tasks)
    return instance, {(0, 0): (1, 0), (0, 1): (0, 1), (1, 0): (1, 0), (1, 1): (0, 1), (2, 0): (1, 0)}


@pytest.mark.parametrize("engine", ["python", "core"])
def test_serial_phase_ends_free_a_place_before_the_next_end_is_queued(engine: Engine) -> None:
    if engine == "core" and not simcore.available():
        pytest.skip("the compiled core is not built")
    # A (d1) and B (d0) start at 0 and end at D together, both reduce-scatters: A started first, so
    # (ASTRA-sim 1.0's proceed_to_next_vnet_baseline, one call per ended phase) A is handled first:
    # its next phase queues on d0 (full: long's chunk and B), then d1, one place free, starts the head
    # of its queue, X (B, though of higher priority, is not queued yet); then B: its next phase queues
    # on d1 (full: long's chunk and X), and d0 starts A. B waits on d1 until X ends at 2 D.
    instance, orders = _serial_ends(True)
    schedule = simulate(instance, orders, "fifo", engine=engine)
    long, a, b, x = schedule.chunks[0], schedule.chunks[2], schedule.chunks[3], schedule.chunks[4]
    d = a.phases[0].end_ns
    assert (a.phases[0].start_ns, b.phases[0].start_ns, b.phases[0].end_ns) == (0.0, 0.0, d)
    assert x.phases[0].duration == d and long.phases[0].end_ns > 3 * d  # X as long as A; long's outlasts it
    assert x.phases[0].start_ns == d and a.phases[1].start_ns == d
    assert b.phases[1].start_ns == 2 * d
    assert validate(instance, schedule) == []
    # handled all at once (the default), B, queued before d1 picks again, takes d1 by its priority
    batch, _ = _serial_ends(False)
    b_then, x_then = simulate(batch, orders, "fifo", engine=engine).chunks[3:5]
    assert b_then.phases[1].start_ns == d and x_then.phases[0].start_ns == b_then.phases[1].end_ns


@pytest.mark.parametrize("engine", ["python", "core"])
def test_serial_phase_ends_handle_a_reduce_scatter_last(engine: Engine) -> None:
    if engine == "core" and not simcore.available():
        pytest.skip("the compiled core is not built")
    # tests/data/serial_rs.json: two equal rings of 2, one phase at a time on each. P (reduce-scatter,
    # priority 1) runs on d0 then d1 and Q (all-gather, twice P's chunk: the same 1 MiB message) on d1
    # then d0, both from 0 (P first); W (priority 0) waits on d1. P and Q end at D together: P, a
    # reduce-scatter, is handled last although it started first. So Q's next phase queues on d0 (busy
    # with P), d1 starts W; then P's next phase queues on d1 (busy with W) and d0 starts Q's.
    instance = load("serial_rs")
    orders = {(0, 0): (0, 1), (1, 0): (1, 0), (2, 0): (1, 0)}
    schedule = simulate(instance, orders, "fifo", engine=engine)
    p, q, w = (chunk.phases for chunk in schedule.chunks)
    d = p[0].end_ns
    assert (p[0].start_ns, q[0].start_ns, q[0].end_ns) == (0.0, 0.0, d)
    assert w[0].start_ns == d and q[1].start_ns == d
    assert p[1].start_ns == w[0].end_ns
    assert validate(instance, schedule) == []
    # handled all at once (the default), P's next phase, queued before d1 picks, takes d1 by its priority
    batch = Instance(dataclasses.replace(instance.network, serial_phase_ends=False), instance.tasks)
    before = simulate(batch, orders, "fifo", engine=engine).chunks
    assert before[0].phases[1].start_ns == d and before[2].phases[0].start_ns == before[0].phases[1].end_ns
