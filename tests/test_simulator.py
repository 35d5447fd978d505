"""The simulator: worked-example makespans, the SCF queue, left shifts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis_opt.errors import InputError
from themis_opt.instance import Instance
from themis_opt.policies import baseline_orders, themis_orders
from themis_opt.simulator import ScfQueue, retime, sequences_of, simulate
from themis_opt.validator import critical_path, validate

from .conftest import heuristic_schedules


def test_worked_example_makespans(worked: Instance) -> None:
    assert simulate(worked, baseline_orders(worked), "fifo").makespan == pytest.approx(949740.0)
    assert simulate(worked, themis_orders(worked), "fifo").makespan == pytest.approx(1147316.875)
    assert simulate(worked, themis_orders(worked), "scf").makespan == pytest.approx(981271.25)


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


def _naive(ops: list[tuple[str, float]]) -> list[int]:
    """ASTRA-sim's list insertion, literally: scan to the first item >= key."""
    queue: list[tuple[float, int]] = []
    popped = []
    for item, (op, key) in enumerate(ops):
        if op == "pop":
            if queue:
                popped.append(queue.pop(0)[1])
        elif op == "tail":
            queue.append((key, item))
        else:
            at = next((i for i, (k, _) in enumerate(queue) if k >= key), len(queue))
            queue.insert(at, (key, item))
    return popped + [item for _, item in queue]


@given(st.lists(st.tuples(st.sampled_from(["insert", "insert", "tail", "pop"]), st.integers(1, 6).map(float))))
def test_scf_queue_matches_the_literal_list(ops: list[tuple[str, float]]) -> None:
    queue = ScfQueue()
    popped = []
    for item, (op, key) in enumerate(ops):
        if op == "pop":
            if len(queue):
                popped.append(queue.pop())
        elif op == "tail":
            queue.append(key, item)
        else:
            queue.insert_before_ge(key, item)
    while len(queue):
        popped.append(queue.pop())
    assert popped == _naive(ops)


def test_scf_queue_pop_empty() -> None:
    with pytest.raises(IndexError):
        ScfQueue().pop()


def test_simulation_is_deterministic(instance: Instance) -> None:
    first = simulate(instance, themis_orders(instance), "scf")
    assert simulate(instance, themis_orders(instance), "scf") == first
