"""The compiled simulator core against the Python reference: the same schedules, bit for bit."""

from __future__ import annotations

import dataclasses
import math
import pickle
import random
from array import array
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance
from themis_opt.instance import (
    COLLECTIVE_KINDS,
    After,
    AllReducePhases,
    Collective,
    Compute,
    Dimension,
    Instance,
    Network,
)
from themis_opt.policies import ThemisTracker, baseline_orders
from themis_opt.schedule import Schedule
from themis_opt.search.timer import AssignmentTimer
from themis_opt.sim import core as simcore, phase_plan, sequences_of, simulate, simulate_makespan, timers
from themis_opt.sim.queues import Intra
from themis_opt.suites import SUITES, suite_folder
from themis_opt.validator import validate

from ..conftest import DATA

SUITE_FILES = sorted(p for name in SUITES for p in suite_folder(name).glob("*.json")) + sorted(DATA.glob("*.json"))


def test_the_install_built_the_core() -> None:
    assert simcore.available()


def _loads(path: Path) -> bool:
    try:
        load_instance(path)
    except InputError:  # tests/data holds bad files too
        return False
    return True


BUNDLED = [p for p in SUITE_FILES if _loads(p)]


def _instances() -> list[Instance]:
    return [load_instance(path) for path in BUNDLED]


def _both(instance: Instance, planner: bool, intra: Intra, baseline: bool = False) -> tuple[object, object]:
    def orders() -> object:
        return ThemisTracker(instance).plan if planner else baseline_orders(instance)

    python = simulate(instance, orders(), intra, baseline=baseline, engine="python")  # type: ignore[arg-type]
    core = simulate(instance, orders(), intra, baseline=baseline, engine="core")  # type: ignore[arg-type]
    return python, core


def test_every_bundled_suite_is_compared() -> None:
    assert len(BUNDLED) > 50


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_bundled_instance_gets_the_same_schedules(path: Path) -> None:
    instance = load_instance(path)
    # both policies with both planners; on the large task graphs (seconds in Python) two of the four
    pairs = [(i, p) for i in Intra for p in (False, True)]
    if instance.num_phases > 3000:
        pairs = [(Intra.FIFO, False), (Intra.SCF, True)]
    for intra, planner in pairs:
        python, core = _both(instance, planner, intra, baseline=not planner)
        assert core == python, (instance.name, intra, planner)
        assert core.makespan == python.makespan  # type: ignore[attr-defined]


def test_a_lazy_schedule_reads_its_columns_as_its_phases_say(worked: Instance) -> None:
    schedule = simulate(worked, ThemisTracker(worked).plan, Intra.SCF)
    dims = worked.network.num_dims
    # from the columns (the chunks are not built yet), then from the phases
    first = (schedule.makespan, schedule.busy_ns(dims), schedule.collective_ends(len(worked.collectives)))
    rebuilt = pickle.loads(pickle.dumps(schedule))  # a plain schedule: its values come from its phases
    assert rebuilt == schedule
    assert (rebuilt.makespan, rebuilt.busy_ns(dims), rebuilt.collective_ends(len(worked.collectives))) == first
    assert validate(worked, schedule) == []


def test_a_lazy_schedule_gives_its_orders_without_building_its_phases(worked: Instance) -> None:
    schedule = simulate(worked, ThemisTracker(worked).plan, Intra.SCF)
    orders = schedule.orders
    assert "chunks" not in vars(schedule)
    assert orders == {(c.collective, c.chunk): c.order for c in schedule.chunks}  # now built
    assert schedule.orders == orders


def _same_columns(a: Schedule, b: Schedule) -> bool:
    ca, cb = a.columns(), b.columns()
    return all(
        (getattr(ca, f.name) == getattr(cb, f.name)).all() and len(getattr(ca, f.name)) == len(getattr(cb, f.name))
        for f in dataclasses.fields(ca)
    )


def test_the_core_gives_the_phase_columns_the_phases_give(worked: Instance) -> None:
    for instance in (worked, random_task_graph(7)[0], random_task_graph(11)[0]):
        for orders in (baseline_orders(instance), ThemisTracker(instance).plan):
            schedule = simulate(instance, orders, Intra.SCF, engine="core")  # type: ignore[arg-type]
            plain = pickle.loads(pickle.dumps(schedule))  # built from its phases
            assert "_columns" not in plain.__dict__ or plain.__dict__["_columns"] is None
            assert _same_columns(schedule, plain)
            assert len(schedule.columns().dim) == sum(len(c.phases) for c in plain.chunks)


def test_bad_orders_are_refused_as_in_python(worked: Instance) -> None:
    orders = dict(baseline_orders(worked))
    first = next(iter(orders))
    for bad in ((9, 9), None):
        if bad is None:
            del orders[first]
        else:
            orders[first] = bad
        messages = []
        for engine in ("python", "core"):
            with pytest.raises(InputError) as caught:
                simulate(worked, orders, Intra.FIFO, engine=engine)  # type: ignore[arg-type]
            messages.append(str(caught.value))
        assert messages[0] == messages[1]


def test_the_core_stops_at_the_deadline() -> None:
    network = Network((Dimension(8, "ring", 100.0, 500.0), Dimension(8, "switch", 50.0, 700.0)))
    instance = Instance(network, (Collective("all_reduce", 2**30, 20_000),))
    with pytest.raises(OutOfTime):
        simulate(instance, ThemisTracker(instance).plan, Intra.SCF, Deadline.after(0.0), engine="core")


def test_a_used_tracker_runs_in_python(worked: Instance) -> None:
    tracker = ThemisTracker(worked)
    tracker.plan(0, 0.0)
    with pytest.raises(RuntimeError, match="fresh ThemisTracker"):
        simulate(worked, tracker.plan, Intra.FIFO, engine="core")
    simulate(worked, tracker.plan, Intra.FIFO)  # auto: Python


def random_task_graph(seed: int) -> tuple[Instance, int]:
    """A small random task graph (any kind, priorities, compute tasks, dependencies with lags) and a
    number that picks the policies."""
    rng = random.Random(seed)
    num_dims = rng.randint(1, 3)
    capacity = rng.choice([1, 1, 2])
    topologies = [rng.choice(["ring", "switch", "fully_connected"]) for _ in range(num_dims)]
    dims = tuple(
        Dimension(
            rng.choice([2, 4]) if topology == "switch" else rng.randint(2, 4),  # halving-doubling: powers of 2
            topology,
            float(rng.choice([25, 50, 100, 200])),
            float(rng.choice([0, 300, 700])),
        )
        for topology in topologies
    )
    network = Network(
        dims,
        congestion_unaware=capacity > 1 or rng.random() < 0.3,
        active_chunks=capacity,
        all_reduce_phases=rng.choice(list(AllReducePhases)),
    )
    # pipeline stages: each its own lanes, compute unit and planner (some may get no task, or no compute)
    stages = rng.choice([1, 1, 2, 3]) if network.num_npus >= 3 else rng.choice([1, 2])
    stage_npus = tuple(sorted(rng.sample(range(network.num_npus), stages))) if stages > 1 else ()
    tasks: list[Collective | Compute] = []
    for t in range(rng.randint(1, 7)):
        stage = rng.randrange(len(stage_npus) or 1)
        after = tuple(After(f"t{u}", float(rng.choice([0, 0, 1000]))) for u in range(t) if rng.random() < 0.3)
        issue = float(rng.choice([0, 0, 2000, 5000]))
        if t and rng.random() < 0.3:  # the first task is a collective: every instance has one
            tasks.append(Compute(float(rng.randint(1, 20) * 1000), f"t{t}", issue, after, stage=stage))
        else:
            kind = rng.choice(COLLECTIVE_KINDS)
            tasks.append(
                Collective(
                    kind,
                    rng.choice([2**16, 2**20, 3 * 2**20 + 5]),
                    rng.randint(1, 6),
                    issue,
                    id=f"t{t}",
                    priority=rng.randint(0, 2),
                    after=after,
                    stage=stage,
                )
            )
    return Instance(network, tuple(tasks), stage_npus=stage_npus), rng.randint(0, 3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_random_task_graphs_get_the_same_valid_schedules(seed: int) -> None:
    instance, which = random_task_graph(seed)
    intra = Intra.SCF if which & 1 else Intra.FIFO
    python, core = _both(instance, planner=bool(which & 2), intra=intra, baseline=not which & 2)
    assert core == python
    assert validate(instance, core) == []  # type: ignore[arg-type]
    makespan, build = simulate_makespan(instance, baseline_orders(instance), intra, Deadline(), {})
    assert makespan == simulate(instance, baseline_orders(instance), intra, engine="python").makespan
    assert build() == simulate(instance, baseline_orders(instance), intra, engine="python")


def _phase_graph(instance: Instance, schedule: Schedule) -> tuple[timers.PhaseGraph, list[list[int]], list[float]]:
    plan = phase_plan(instance, schedule.orders)
    offset, length, release, job_next, job_prev = [], [], [], [], []
    for i, (c, _) in enumerate(instance.chunk_ids):
        offset.append(len(length))
        for p, spec in enumerate(plan[i]):
            node = len(length)
            length.append(spec.duration)
            release.append(instance.collectives[c].issue_ns)
            job_prev.append(node - 1 if p else -1)
            job_next.append(node + 1 if p + 1 < len(plan[i]) else -1)
    sequences = [[offset[i] + p for i, p in seq] for seq in sequences_of(instance, schedule).values()]
    starts = [phase.start_ns for chunk in schedule.chunks for phase in chunk.phases]
    return timers.PhaseGraph(length, release, job_next, job_prev), sequences, starts


def test_the_phase_graph_times_a_simulated_schedule_as_the_simulator_did() -> None:
    for instance in _instances():
        if instance.is_task_graph or instance.network.active_chunks > 1:
            continue
        schedule = simulate(instance, baseline_orders(instance), Intra.FIFO)
        graph, sequences, starts = _phase_graph(instance, schedule)
        timed = graph.time(sequences)
        assert timed is not None
        makespan, head, tail = timed
        assert makespan == schedule.makespan and list(head) == starts
        assert all(h + t <= makespan * (1 + 1e-12) for h, t in zip(head, tail))


def test_the_phase_graph_finds_a_cycle() -> None:
    instance = Instance(Network((Dimension(4, "ring", 100.0, 500.0),)), (Collective("all_reduce", 2**20, 1),))
    graph, sequences, _ = _phase_graph(instance, simulate(instance, baseline_orders(instance)))
    assert graph.time(sequences) is not None
    assert graph.time([list(reversed(sequences[0]))]) is None  # the all-gather before the reduce-scatter


def _moved(timers: list[AssignmentTimer], instance: Instance, tokens: array[int], rng: random.Random) -> array[int]:
    """``tokens`` with one or two chunks given a random order (each timer asked for it alike)."""
    moved = tokens[:]
    movable = [i for i, (c, _) in enumerate(instance.chunk_ids) if instance.order_count(c) > 1]
    for _ in range(rng.choice([1, 1, 2]) if movable else 0):
        i = rng.choice(movable)
        c, k = instance.chunk_ids[i]
        order = rng.sample(instance.active_dims[c], len(instance.active_dims[c]))
        moved[i] = timers[0].token(c, k, order)
        assert all(timer.token(c, k, order) == moved[i] for timer in timers[1:])
    return moved


def _walk_resumed(instance: Instance, intra: Intra, seed: int, snapshots: int, steps: int) -> tuple[int, int]:
    """A walk of moves timed from its base and from the start, each makespan compared; the
    runs and runs resumed."""
    rng = random.Random(seed)
    resumed, fresh = AssignmentTimer(instance, "core", snapshots), AssignmentTimer(instance, "core")
    current = _moved([resumed, fresh], instance, resumed.tokens(baseline_orders(instance)), rng)
    resumed.adopt(current, intra, Deadline())
    for _ in range(steps):
        candidate = _moved([resumed, fresh], instance, current, rng)
        cutoff = (
            math.inf if rng.random() < 0.5 else fresh.makespan(current, intra, Deadline()) * rng.uniform(0.98, 1.02)
        )
        got = resumed.makespan(candidate, intra, Deadline(), cutoff)
        expected = fresh.makespan(candidate, intra, Deadline())
        assert got == expected or (got == math.inf and expected > cutoff)
        if rng.random() < 0.4:
            resumed.adopt(candidate, intra, Deadline())
            current = candidate
    runs, resumes, _, _ = resumed.counts()
    return runs, resumes


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
@example(774)  # the base adopted again after a run of another assignment: its resume points are kept
@example(7890383)
def test_a_run_resumed_from_its_base_times_as_a_run_from_the_start(seed: int) -> None:
    instance, which = random_task_graph(seed)
    _walk_resumed(instance, Intra.SCF if which & 1 else Intra.FIFO, seed, random.Random(seed).choice([1, 2, 64]), 20)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_a_run_resumed_under_tail_times_as_a_run_from_the_start(seed: int) -> None:
    instance, _ = random_task_graph(seed)  # tail reads the collectives' tails, which compute tasks make
    _walk_resumed(instance, Intra.TAIL, seed, random.Random(seed).choice([1, 2, 64]), 20)


@pytest.mark.parametrize("intra", list(Intra))
def test_moves_from_the_base_resume_and_skip_work(intra: Intra) -> None:
    # collectives issued over time: a move of a later one resumes from a snapshot past the earlier ones'
    network = Network((Dimension(4, "switch", 200.0, 500.0), Dimension(4, "ring", 50.0, 700.0)))
    collectives = tuple(Collective("all_reduce", 2**22, 4, issue_ns=20_000.0 * c, id=f"c{c}") for c in range(6))
    instance = Instance(network, collectives)
    runs, resumes = _walk_resumed(instance, intra, 0, 64, 60)
    assert resumes > runs // 2


def test_groups_whose_rings_share_a_dimension_keep_their_own_costs() -> None:
    # both rings start on d0; the second's crosses d1 too, so its phases are longer
    network = Network((Dimension(4, "ring", 200.0, 500.0), Dimension(4, "switch", 25.0, 1000.0)))
    tasks = (
        Collective("all_reduce", 2**20, 4, group=(0, 1, 2, 3)),
        Collective("all_reduce", 2**20, 4, group=(0, 1, 5, 4)),
    )
    instance = Instance(network, tasks)
    for planner in (False, True):
        python, core = _both(instance, planner, Intra.FIFO)
        assert core == python
        assert validate(instance, core) == []  # type: ignore[arg-type]
