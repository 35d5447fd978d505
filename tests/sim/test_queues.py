"""The queue policies' registry: a policy is one entry, read by the engine, the CLI and the methods."""

from __future__ import annotations

import pytest

from themis_opt.errors import InputError
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.methods import method_names
from themis_opt.policies import baseline_orders
from themis_opt.schedule import Schedule
from themis_opt.sim import simulate
from themis_opt.sim.queues import QUEUE_POLICIES, Intra, QueuePolicy, queue_policy
from themis_opt.validator import validate

MIB = 2**20


def _largest_key(priority: int, later: float, tail: float, size: float) -> tuple[float, float]:
    return 0, -size


@pytest.fixture
def largest(monkeypatch: pytest.MonkeyPatch) -> QueuePolicy:
    """A policy added in one place: the largest waiting phase first, in Python only."""
    policy = QueuePolicy("largest", "the largest phase first", _largest_key, c_code=None)
    monkeypatch.setitem(QUEUE_POLICIES, "largest", policy)
    return policy


def _served(schedule: Schedule, dim: int = 0) -> list[int]:
    return [c for _, c, _ in schedule.by_dimension()[dim]]


def test_every_built_in_policy_is_an_entry_the_core_runs() -> None:
    assert [p.value for p in Intra] == list(QUEUE_POLICIES)
    codes = [queue_policy(p).c_code for p in Intra]
    assert sorted(c for c in codes if c is not None) == list(range(len(Intra)))
    assert [p for p in Intra if queue_policy(p).astra] == [Intra.FIFO, Intra.SCF]


def test_an_unknown_policy_is_one_line_naming_them() -> None:
    with pytest.raises(InputError, match=r"intra: must be fifo, scf, tail, got 'lifo'"):
        queue_policy("lifo")
    instance = Instance(Network((Dimension(2, "ring", 100.0, 500.0),)), (Collective("all_reduce", MIB, 1),))
    with pytest.raises(InputError, match="intra"):
        simulate(instance, baseline_orders(instance), "lifo")


def test_a_policy_added_in_one_place_times_schedules(largest: QueuePolicy) -> None:
    # four reduce-scatters of one phase on one dimension, all released at 0: the first starts at
    # once, the others wait and are served largest first
    sizes = [1, 4, 2, 8]
    network = Network((Dimension(4, "switch", 100.0, 500.0),))
    instance = Instance(network, tuple(Collective("reduce_scatter", s * MIB, 1) for s in sizes))
    orders = baseline_orders(instance)
    schedule = simulate(instance, orders, "largest")
    assert validate(instance, schedule) == []
    assert _served(schedule) == [0, 3, 1, 2]
    assert _served(simulate(instance, orders, "fifo")) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="does not run the largest policy"):
        simulate(instance, orders, "largest", engine="core")
    assert "themis-largest" in method_names()


def test_a_policy_added_in_one_place_never_serves_a_smaller_waiting_phase_first(largest: QueuePolicy) -> None:
    network = Network((Dimension(4, "ring", 100.0, 500.0), Dimension(4, "switch", 40.0, 700.0)))
    collectives = tuple(
        Collective("all_reduce", s * MIB, k, issue_ns=i * 20_000.0) for i, (s, k) in enumerate([(8, 4), (3, 2), (5, 3)])
    )
    instance = Instance(network, collectives)
    schedule = simulate(instance, baseline_orders(instance), "largest")
    assert validate(instance, schedule) == []
    arrivals = {}
    for chunk in schedule.chunks:
        ready = instance.collectives[chunk.collective].issue_ns
        for p, phase in enumerate(chunk.phases):
            arrivals[(chunk.collective, chunk.chunk, p)] = (ready, phase)
            ready = phase.end_ns
    passed_over = 0
    for _, a in arrivals.values():
        for b_ready, b in arrivals.values():
            if b_ready <= a.start_ns < b.start_ns and a.dim == b.dim:  # b waited while a started
                assert max(a.bytes_in, a.bytes_out) >= max(b.bytes_in, b.bytes_out)
                passed_over += 1
    assert passed_over > 10
