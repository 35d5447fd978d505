"""The assignment search: valid, never worse than its starts, the same for the same seed."""

from __future__ import annotations

from themis_opt.budget import Deadline
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.localsearch import MIN_EVALUATIONS, default_evaluations, improve_assignment
from themis_opt.policies import baseline_orders, themis_orders
from themis_opt.simulator import simulate
from themis_opt.validator import validate

MIB = 2**20


def _three_dims(chunks: int = 8) -> Instance:
    network = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in zip([4, 8, 4], [200.0, 100.0, 50.0])))
    return Instance(network, (Collective("all_reduce", 256 * MIB, chunks),))


def test_never_worse_than_a_start_and_valid(instance: Instance) -> None:
    starts = [baseline_orders(instance), themis_orders(instance)]
    found = improve_assignment(instance, starts, seed=1, evaluations=60)
    assert found is not None
    assert validate(instance, found) == []
    for orders in starts:
        for intra in ("fifo", "scf"):
            assert found.makespan <= simulate(instance, orders, intra).makespan


def test_same_seed_same_schedule() -> None:
    instance = _three_dims()
    starts = [themis_orders(instance)]
    one = improve_assignment(instance, starts, seed=7, evaluations=80)
    two = improve_assignment(instance, starts, seed=7, evaluations=80)
    assert one is not None and two is not None
    assert one == two


def test_rearranging_beats_the_baseline_order() -> None:
    # one order for every chunk is the baseline; the search finds better assignments
    instance = _three_dims()
    start = baseline_orders(instance)
    found = improve_assignment(instance, [start], seed=0, evaluations=200)
    assert found is not None
    assert found.makespan < min(simulate(instance, start, intra).makespan for intra in ("fifo", "scf"))


def test_an_expired_deadline_times_nothing() -> None:
    instance = _three_dims()
    assert improve_assignment(instance, [themis_orders(instance)], deadline=Deadline.after(-1.0)) is None


def test_keep_counts_only_rearranges() -> None:
    from collections import Counter

    instance = _three_dims()
    start = themis_orders(instance)
    found = improve_assignment(instance, [start], seed=3, evaluations=80, keep_counts=True)
    assert found is not None
    assert validate(instance, found) == []
    assert Counter(found.orders.values()) == Counter(start.values())
    assert found.makespan <= simulate(instance, start, "scf").makespan


def test_stops_once_it_meets_the_target() -> None:
    # a target met by the first schedule timed ends the search there, though better ones exist
    instance = _three_dims()
    start = baseline_orders(instance)
    first = simulate(instance, start, "fifo")
    searched = improve_assignment(instance, [start], seed=0, evaluations=80)
    stopped = improve_assignment(instance, [start], seed=0, evaluations=80, target=first.makespan)
    assert searched is not None and stopped is not None
    assert searched.makespan < first.makespan
    assert stopped == first


def test_default_evaluations_grow_with_the_square_of_a_class() -> None:
    assert default_evaluations(_three_dims(8)) == MIN_EVALUATIONS  # 56 ordered pairs, 560: the floor
    assert default_evaluations(_three_dims(32)) == 10 * 32 * 31
    network = _three_dims().network
    two = Instance(network, tuple(Collective("all_reduce", 256 * MIB, 32, issue_ns=1e3 * i) for i in range(2)))
    assert default_evaluations(two) == 2 * 10 * 32 * 31  # pairs within each class, none across
