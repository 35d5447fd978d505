"""Chrome trace-event export: one slice per phase and per compute task, with its times, on non-overlapping tracks."""

from __future__ import annotations

import json

import pytest

from themis_opt.formats.trace import COMPUTE_TRACK, trace_events
from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Network
from themis_opt.solving import solve
from themis_opt.validator import validate

from ..conftest import DATA, load


def _slices(document: dict[str, object]) -> list[dict[str, object]]:
    events = document["traceEvents"]
    assert isinstance(events, list)
    return [e for e in events if e["ph"] == "X"]


def _check_tracks_do_not_overlap(slices: list[dict[str, object]]) -> None:
    by_track: dict[object, list[tuple[float, float]]] = {}
    for e in slices:
        args = e["args"]
        assert isinstance(args, dict)
        by_track.setdefault((e["pid"], e["tid"]), []).append((args["start_ns"], args["end_ns"]))
    for spans in by_track.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


@pytest.mark.parametrize("name", ["worked", "three_dim", "mixed"])
def test_one_slice_per_phase_with_its_times(name: str) -> None:
    instance = load(name)
    schedule = solve(instance, "themis").schedule
    assert schedule is not None and validate(instance, schedule) == []
    document = json.loads(json.dumps(trace_events(schedule, instance)))  # plain JSON
    slices = _slices(document)
    phases = sorted(
        (chunk.collective, chunk.chunk, p.dim, p.start_ns, p.end_ns) for chunk in schedule.chunks for p in chunk.phases
    )
    assert len(slices) == len(phases)
    index = {(coll.id or f"c{i}"): i for i, coll in enumerate(instance.collectives)}
    seen = sorted(
        (
            index[e["args"]["collective"]],
            e["args"]["chunk"],
            e["tid"] // 1000,
            e["args"]["start_ns"],
            e["args"]["end_ns"],
        )  # type: ignore[index]
        for e in slices
    )
    assert seen == phases
    for e in slices:
        assert e["ts"] == pytest.approx(e["args"]["start_ns"] / 1000)  # type: ignore[index, operator]
        assert e["dur"] == pytest.approx((e["args"]["end_ns"] - e["args"]["start_ns"]) / 1000)  # type: ignore[index, operator]
    _check_tracks_do_not_overlap(slices)
    names = {e["tid"]: e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"}  # type: ignore[index, union-attr]
    assert {e["tid"] for e in slices} <= set(names)


def test_compute_tasks_on_their_own_track() -> None:
    network = Network((Dimension(4, "ring", 100.0, 500.0), Dimension(2, "switch", 50.0, 700.0)))
    tasks = (
        Compute(1000.0, "fwd"),
        Collective("all_reduce", 2**20, 4, id="grad", after=(After("fwd"),)),
        Compute(500.0, "next", after=(After("grad"),)),
    )
    instance = Instance(network, tasks)
    schedule = solve(instance, "baseline").schedule
    assert schedule is not None
    slices = _slices(trace_events(schedule, instance))
    computes = [e for e in slices if e["tid"] == COMPUTE_TRACK]
    assert [(e["name"], e["args"]["start_ns"], e["args"]["end_ns"]) for e in computes] == [  # type: ignore[index]
        ("fwd", 0.0, 1000.0),
        ("next", schedule.makespan - 500.0, schedule.makespan),
    ]


def test_several_chunks_at_once_get_lanes() -> None:
    network = Network((Dimension(4, "ring", 100.0, 500.0),), congestion_unaware=True, active_chunks=2)
    instance = Instance(network, (Collective("all_reduce", 2**20, 4, id="ar"),))
    schedule = solve(instance, "baseline").schedule
    assert schedule is not None
    slices = _slices(trace_events(schedule, instance))
    assert len({e["tid"] for e in slices}) == 2  # two chunks run at once on the one dimension
    _check_tracks_do_not_overlap(slices)


def test_every_bundled_fixture_exports() -> None:
    for path in sorted(DATA.glob("*.json")):
        instance = load(path.stem)
        schedule = solve(instance, "baseline").schedule
        assert schedule is not None
        assert len(_slices(trace_events(schedule, instance))) == sum(len(c.phases) for c in schedule.chunks) + len(
            schedule.computes
        )


def test_without_the_instance_collectives_and_dimensions_go_by_number() -> None:
    instance = load("three_dim")
    schedule = solve(instance, "themis").schedule
    assert schedule is not None
    document = trace_events(schedule, name="r")
    slices = _slices(document)
    assert len(slices) == sum(len(c.phases) for c in schedule.chunks)
    assert all(str(e["name"]).startswith("c") for e in slices)
    names = {e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"}  # type: ignore[index, union-attr]
    assert names == {
        f"dim {d}"
        for d in range(instance.network.num_dims)
        if any(p.dim == d for c in schedule.chunks for p in c.phases)
    }


def test_pipeline_stages_are_processes_of_their_own() -> None:
    instance = load("two_stages")
    schedule = solve(instance, "baseline").schedule
    assert schedule is not None and instance.num_stages == 2
    document = trace_events(schedule, instance)
    slices = _slices(document)
    processes = {e["pid"] for e in document["traceEvents"] if e["name"] == "process_name"}  # type: ignore[index, union-attr]
    assert processes == {0, 1}
    for e in slices:
        if e["cat"] == "compute":
            continue
        collective = next(c for c in instance.collectives if c.id == e["args"]["collective"])  # type: ignore[index]
        assert e["pid"] == collective.stage
    assert {e["pid"] for e in slices if e["cat"] == "compute"} == {t.stage for t in instance.computes}
    _check_tracks_do_not_overlap(slices)
