"""The validator catches every kind of broken schedule."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from themis_opt.instance import Instance
from themis_opt.policies import themis_orders
from themis_opt.schedule import ChunkSchedule, Phase, Schedule
from themis_opt.sim import simulate
from themis_opt.validator import critical_path, precedence_graph, validate

from .conftest import heuristic_schedules, pipelined


def _replace_chunk(schedule: Schedule, index: int, chunk: ChunkSchedule) -> Schedule:
    chunks = list(schedule.chunks)
    chunks[index] = chunk
    return Schedule(tuple(chunks))


def _shift(phase: Phase, delta: float) -> Phase:
    return dataclasses.replace(phase, start_ns=phase.start_ns + delta, end_ns=phase.end_ns + delta)


@pytest.fixture
def valid(instance: Instance) -> Schedule:
    schedule = simulate(instance, themis_orders(instance), "scf")
    assert validate(instance, schedule) == []
    return schedule


def test_shifted_start_is_caught(instance: Instance, valid: Schedule) -> None:
    chunk = valid.chunks[-1]
    phases = list(chunk.phases)
    phases[-1] = dataclasses.replace(phases[-1], start_ns=phases[-1].start_ns - 1000.0)
    broken = _replace_chunk(valid, len(valid.chunks) - 1, dataclasses.replace(chunk, phases=tuple(phases)))
    assert any("lasts" in v for v in validate(instance, broken))


def test_phase_moved_earlier_is_caught(instance: Instance, valid: Schedule) -> None:
    chunk = valid.chunks[1]
    phases = list(chunk.phases)
    phases[1] = _shift(phases[1], phases[0].end_ns - phases[1].start_ns - 1.0)
    broken = _replace_chunk(valid, 1, dataclasses.replace(chunk, phases=tuple(phases)))
    assert any("before phase 0 ends" in v for v in validate(instance, broken))


def test_swapped_phases_on_a_dimension_are_caught(instance: Instance, valid: Schedule) -> None:
    # move the second phase served by a dimension into the first one's slot
    entries = next(e for e in valid.by_dimension().values() if len(e) >= 2)
    (first, _, _), (second, c, k) = entries[0], entries[1]
    index = next(i for i, ch in enumerate(valid.chunks) if (ch.collective, ch.chunk) == (c, k))
    chunk = valid.chunks[index]
    delta = first.start_ns - second.start_ns
    position = chunk.phases.index(second)
    moved = tuple(_shift(p, delta) if i == position else p for i, p in enumerate(chunk.phases))
    broken = _replace_chunk(valid, index, dataclasses.replace(chunk, phases=moved))
    assert any("overlaps" in v for v in validate(instance, broken))


def test_dropped_phase_is_caught(instance: Instance, valid: Schedule) -> None:
    chunk = valid.chunks[0]
    broken = _replace_chunk(valid, 0, dataclasses.replace(chunk, phases=chunk.phases[:-1]))
    assert any("its order needs" in v for v in validate(instance, broken))


def test_changed_order_is_caught(instance: Instance, valid: Schedule) -> None:
    index, chunk = next((i, ch) for i, ch in enumerate(valid.chunks) if len(ch.order) >= 2)
    order = (*chunk.order[1:], chunk.order[0])
    broken = _replace_chunk(valid, index, dataclasses.replace(chunk, order=order))
    assert any("needs" in v for v in validate(instance, broken))


def test_bad_order_missing_and_duplicate_chunks_are_caught(instance: Instance, valid: Schedule) -> None:
    chunk = valid.chunks[0]
    bad = _replace_chunk(valid, 0, dataclasses.replace(chunk, order=(*chunk.order, chunk.order[0])))
    assert any("not a permutation" in v for v in validate(instance, bad))
    dropped = Schedule(valid.chunks[1:])
    assert any("missing from the schedule" in v for v in validate(instance, dropped))
    doubled = Schedule((*valid.chunks, valid.chunks[0]))
    assert any("more than once" in v for v in validate(instance, doubled))
    extra = Schedule((*valid.chunks, dataclasses.replace(chunk, chunk=999)))
    assert any("no such chunk" in v for v in validate(instance, extra))


def test_wrong_bytes_are_caught(instance: Instance, valid: Schedule) -> None:
    chunk = valid.chunks[0]
    phases = list(chunk.phases)
    phases[0] = dataclasses.replace(phases[0], bytes_in=phases[0].bytes_in * 2)
    broken = _replace_chunk(valid, 0, dataclasses.replace(chunk, phases=tuple(phases)))
    assert any("moves" in v for v in validate(instance, broken))


def test_idle_time_shows_on_the_critical_path(worked: Instance) -> None:
    schedule = simulate(worked, themis_orders(worked), "fifo")
    delayed = Schedule(
        tuple(dataclasses.replace(c, phases=tuple(_shift(p, 5000.0) for p in c.phases)) for c in schedule.chunks)
    )
    assert validate(worked, delayed) == []
    length, _ = critical_path(worked, delayed)
    assert length == pytest.approx(schedule.makespan)
    assert delayed.makespan == pytest.approx(schedule.makespan + 5000.0)
    graph = precedence_graph(worked, schedule)
    assert graph.number_of_nodes() == 2 + worked.num_phases


def test_more_phases_at_once_than_a_dimension_has_room_for_are_caught() -> None:
    import dataclasses

    from themis_opt.instance import Collective, Dimension, Network
    from themis_opt.policies import baseline_orders
    from themis_opt.sim import simulate

    network = Network((Dimension(4, "ring", 100.0, 500.0),), congestion_unaware=True, active_chunks=2)
    instance = Instance(network, (Collective("reduce_scatter", 3 * 2**20, 3),))
    schedule = simulate(instance, baseline_orders(instance), "fifo")
    assert validate(instance, schedule) == []
    # the third chunk moved back to 0: three phases at once where two fit
    third = schedule.chunks[2]
    shift = third.phases[0].start_ns
    moved = dataclasses.replace(
        third,
        phases=tuple(
            dataclasses.replace(p, start_ns=p.start_ns - shift, end_ns=p.end_ns - shift) for p in third.phases
        ),
    )
    crowded = dataclasses.replace(schedule, chunks=(*schedule.chunks[:2], moved))
    assert any("while 2 other phases run there" in v for v in validate(instance, crowded))


def _side_by_side() -> Instance:
    """One all-reduce and one compute task on each of two stages, with no dependency."""
    from themis_opt.instance import Collective, Compute, Dimension, Network

    network = Network((Dimension(2, "ring", 100.0, 500.0), Dimension(2, "ring", 100.0, 500.0)))
    tasks = tuple(
        task
        for stage in (0, 1)
        for task in (
            Collective("all_reduce", 2**20, 2, dimensions=(0,), stage=stage, id=f"ar{stage}"),
            Compute(1000.0, stage=stage, id=f"t{stage}"),
        )
    )
    return Instance(network, tasks, stage_npus=(0, 2))


def test_stages_overlap_on_their_own_dimensions_and_units_but_not_within_one() -> None:
    from themis_opt.policies import baseline_orders
    from themis_opt.schedule import ComputeSchedule

    instance = _side_by_side()
    schedule = simulate(instance, baseline_orders(instance), "fifo")
    assert validate(instance, schedule) == []
    # both stages' first phases start at 0 on dimension 0, and both compute tasks at 0
    assert [c.phases[0].start_ns for c in schedule.chunks if c.chunk == 0] == [0.0, 0.0]
    # stage 1's second chunk moved onto its first: they overlap on stage 1's dimension 0
    chunk = schedule.chunks[3]
    delta = schedule.chunks[2].phases[0].start_ns - chunk.phases[0].start_ns
    moved = dataclasses.replace(chunk, phases=tuple(_shift(p, delta) for p in chunk.phases))
    broken = Schedule((*schedule.chunks[:3], moved), schedule.computes)
    assert any(
        v.startswith("stage 1 dim 0: collective 1 chunk") and "overlaps" in v for v in validate(instance, broken)
    )
    late = ComputeSchedule(1, 500.0, 1500.0)
    assert validate(instance, Schedule(schedule.chunks, (schedule.computes[0], late))) == []
    both_on_one = dataclasses.replace(instance, tasks=tuple(dataclasses.replace(t, stage=0) for t in instance.tasks))
    assert any(v.startswith("stage 0 compute unit: compute 0") for v in validate(both_on_one, schedule))


@pytest.mark.parametrize(("spacings", "valid"), [(1, True), (40, False)])
def test_a_length_is_read_to_a_few_float_spacings_where_floats_are_coarse(spacings: int, valid: bool) -> None:
    # issued at 2,000 s, floats are 244 fs apart: an end a spacing further is float rounding (a
    # millionth of the 9 us phase is 38 of them); forty spacings are not
    import math

    from .conftest import four_dims

    instance = four_dims(size=64 * 2**20, chunks=16, issue_ns=2e12)
    schedule = simulate(instance, themis_orders(instance), "scf")
    assert validate(instance, schedule) == []
    chunk = schedule.chunks[0]
    first = chunk.phases[0]
    later = dataclasses.replace(first, end_ns=first.end_ns + spacings * math.ulp(first.end_ns))
    moved = _replace_chunk(schedule, 0, dataclasses.replace(chunk, phases=(later, *chunk.phases[1:])))
    found = validate(instance, moved)
    assert (found == []) is valid
    assert valid or "collective 0 chunk 0 phase 0: lasts" in found[0]


def test_valid_schedules_are_accepted_at_once(monkeypatch: pytest.MonkeyPatch, instance: Instance) -> None:
    # the numpy check accepts every valid schedule of the simulator (core and Python, every policy)
    # without the phase-by-phase pass, which is made to fail here
    import themis_opt.validator as validator

    def not_called(*_: object) -> list[str]:
        raise AssertionError("checked phase by phase")

    monkeypatch.setattr(validator, "_violations", not_called)
    for schedule in heuristic_schedules(instance).values():
        assert validate(instance, schedule) == []
        assert validate(instance, Schedule(schedule.chunks, schedule.computes)) == []  # built, not lazy


def test_pipeline_stages_and_sends_are_accepted_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import themis_opt.validator as validator

    monkeypatch.setattr(validator, "_violations", lambda *_: ["checked phase by phase"])
    instance = pipelined()
    for intra in ("fifo", "scf", "tail"):
        assert validate(instance, simulate(instance, themis_orders(instance), intra)) == []


@settings(max_examples=150, deadline=None)
@given(
    which=st.integers(0, 10_000),
    phase=st.integers(0, 10),
    delta=st.sampled_from([-1e3, -1.0, -1e-6, -1e-9, 0.0, 1e-9, 1e-6, 1.0, 1e3]),
    what=st.sampled_from(["start", "end", "both", "bytes", "dim", "swap"]),
)
def test_the_check_at_once_agrees_with_the_check_phase_by_phase(
    which: int, phase: int, delta: float, what: str
) -> None:
    import themis_opt.validator as validator

    instance = pipelined()
    valid = simulate(instance, themis_orders(instance), "scf")
    index = which % len(valid.chunks)
    chunk = valid.chunks[index]
    p = phase % len(chunk.phases)
    phases = list(chunk.phases)
    old = phases[p]
    if what == "start":
        phases[p] = dataclasses.replace(old, start_ns=old.start_ns + delta)
    elif what == "end":
        phases[p] = dataclasses.replace(old, end_ns=old.end_ns + delta)
    elif what == "both":
        phases[p] = _shift(old, delta)
    elif what == "bytes":
        phases[p] = dataclasses.replace(old, bytes_out=old.bytes_out * (1 + delta * 1e-3))
    elif what == "dim":
        phases[p] = dataclasses.replace(old, dim=(old.dim + 1) % instance.network.num_dims)
    else:
        other = (index + 1) % len(valid.chunks)
        chunks = list(valid.chunks)
        chunks[index], chunks[other] = chunks[other], chunks[index]
        changed = Schedule(tuple(chunks), valid.computes)
    if what != "swap":
        changed = _replace_chunk(valid, index, dataclasses.replace(chunk, phases=tuple(phases)))
        changed = Schedule(changed.chunks, valid.computes)
    assert validate(instance, changed) == validator._violations(instance, changed)
