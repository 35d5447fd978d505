"""The assignment and sequence searches: valid, never worse than their starts, the same for the same seed."""

from __future__ import annotations

import dataclasses
import time
from array import array
from multiprocessing.connection import Connection
from typing import Any

import pytest

from themis_opt.budget import Deadline
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.orders import Orders
from themis_opt.policies import baseline_orders, themis_orders
from themis_opt.schedule import Schedule
from themis_opt.search import (
    Strategy,
    default_evaluations,
    improve_assignment,
    improve_sequences,
    improve_sequences_per_start,
    sequences_searchable,
    strategy_for,
)
from themis_opt.search.params import SearchParams
from themis_opt.search.sequence import _Sequences
from themis_opt.search.timer import AssignmentTimer
from themis_opt.sim import retime, sequences_of, simulate
from themis_opt.sim.queues import Intra
from themis_opt.validator import validate

from ..conftest import load

SEARCH = SearchParams()
DESCENT = Strategy(SEARCH.descent_restart_share, 0.0)
ANNEALING = Strategy(SEARCH.annealing_restart_share, SEARCH.annealing_temperature)
SHARED = Strategy(SEARCH.annealing_restart_share, SEARCH.annealing_temperature, shared=True)

MIB = 2**20
NO_LIMITS: dict[str, Any] = {"deadline": Deadline(), "keep_counts": False, "target": None}


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
    per_pair = SEARCH.evaluations_per_pair
    assert 2 * per_pair < SEARCH.min_evaluations < 56 * per_pair
    assert default_evaluations(_three_dims(2)) == SEARCH.min_evaluations  # 2 ordered pairs: the floor
    assert default_evaluations(_three_dims(8)) == per_pair * 8 * 7
    assert default_evaluations(_three_dims(32)) == per_pair * 32 * 31
    network = _three_dims().network
    two = Instance(network, tuple(Collective("all_reduce", 256 * MIB, 32, issue_ns=1e3 * i) for i in range(2)))
    assert default_evaluations(two) == 2 * per_pair * 32 * 31  # pairs within each class, none across


def test_a_hot_search_still_returns_the_best_it_timed() -> None:
    # at a high temperature the moves wander through worse assignments; what it returns is the best timed
    instance = _three_dims()
    start = themis_orders(instance)
    hot = Strategy(restart_share=0.1, temperature=1.0)
    found = improve_assignment(instance, [start], seed=2, evaluations=120, strategy=hot)
    assert found is not None
    assert validate(instance, found) == []
    assert found.makespan <= min(simulate(instance, start, intra).makespan for intra in ("fifo", "scf"))


def test_one_collective_descends_and_several_anneal() -> None:
    instance = _three_dims()
    assert strategy_for(instance) == DESCENT
    coll = instance.collectives[0]
    two = Instance(instance.network, (coll, Collective(coll.kind, coll.size_bytes, coll.chunks, issue_ns=1e5)))
    assert strategy_for(two) == ANNEALING
    start = [baseline_orders(two)]
    assert improve_assignment(two, start, seed=1, evaluations=60) == improve_assignment(
        two, start, seed=1, evaluations=60, strategy=ANNEALING
    )


def test_two_workers_descend_twice_and_return_the_better_seed() -> None:
    instance = _three_dims()
    starts = [baseline_orders(instance)]
    alone = [improve_assignment(instance, starts, seed=s, evaluations=80, strategy=DESCENT) for s in (4, 5)]
    assert alone[0] is not None and alone[1] is not None and alone[0].makespan != alone[1].makespan
    same = dataclasses.replace(DESCENT, split_policies=False)  # both walks under their best restart's policy
    both = improve_assignment(instance, starts, seed=4, evaluations=80, workers=2, strategy=same)
    assert both is not None and validate(instance, both) == []
    assert both == min(alone, key=lambda found: found.makespan)  # type: ignore[union-attr]


def test_two_workers_walk_one_policy_each() -> None:
    import themis_opt.search.assignment as localsearch

    instance = _three_dims()
    starts = [baseline_orders(instance)]
    timer = AssignmentTimer(instance)
    walks = [
        localsearch._search(timer, starts, seed=4 + n, strategy=DESCENT, evaluations=80, walk=Intra(p), **NO_LIMITS)
        for n, p in enumerate(SEARCH.walk_policies)  # tail, then scf
    ]
    assert walks[0] is not None and walks[1] is not None and walks[0] != walks[1]
    both = improve_assignment(instance, starts, seed=4, evaluations=80, workers=2, strategy=DESCENT)
    assert both is not None and validate(instance, both) == []
    assert both == min(walks, key=lambda found: found.makespan)  # type: ignore[union-attr]


class _InProcessTimer:
    """A timer's end of the pipe that times each job here when asked (or has died: ``dead``)."""

    def __init__(self, timer: AssignmentTimer, dead: bool = False) -> None:
        self.timer, self.dead, self.jobs, self.answered = timer, dead, [], 0  # type: ignore[var-annotated]

    def send(self, job: Any) -> None:
        self.jobs.append(job)

    def poll(self, timeout: float | None = None) -> bool:
        return True

    def recv(self) -> float:
        if self.dead:
            raise EOFError
        self.answered += 1
        tokens, policy, cutoff, _ = self.jobs.pop(0)  # the tokens it made are this timer's own
        return self.timer.makespan(array("i", tokens), policy, Deadline(), cutoff)


def _walk(instance: Instance, dead: bool = False, evaluations: int = 80) -> tuple[Schedule | None, int, int]:
    from themis_opt.search.assignment import _search

    timer = AssignmentTimer(instance)
    helper = _InProcessTimer(timer, dead)
    starts = [baseline_orders(instance)]
    found = _search(
        timer, starts, seed=4, strategy=SHARED, evaluations=evaluations, timers=[(None, helper)], **NO_LIMITS
    )
    return found, helper.answered, len(timer.made)


def test_a_shared_walk_with_two_workers_is_one_walk_timed_by_both() -> None:
    # the forked timer gives the walk an in-process timer gives: it depends on the number of timers only
    instance = _three_dims()
    starts = [baseline_orders(instance)]
    expected, answered, _ = _walk(instance)
    assert answered > 20  # the timer timed its share of the candidates
    both = improve_assignment(instance, starts, seed=4, evaluations=80, workers=2, strategy=SHARED)
    assert both is not None and validate(instance, both) == []
    assert both == expected
    assert both.makespan <= min(simulate(instance, starts[0], intra).makespan for intra in ("fifo", "scf"))


def test_a_timer_that_dies_leaves_the_walk_unchanged() -> None:
    # its candidates are timed here instead: the same makespans, so the same walk
    instance = _three_dims()
    assert _walk(instance, dead=True)[0] == _walk(instance)[0]


def test_a_forked_timer_learns_the_orders_drawn_after_it_was_forked() -> None:
    # 3 dimensions and 16 chunks: the walk draws orders no start has, and the timer numbers them alike
    instance = _three_dims(16)
    starts = [baseline_orders(instance)]
    expected, _, made = _walk(instance, evaluations=400)
    assert made > len(set(starts[0].values()))  # orders drawn during the walk, after the timer was forked
    both = improve_assignment(instance, starts, seed=4, evaluations=400, workers=2, strategy=SHARED)
    assert both is not None and validate(instance, both) == []
    assert both == expected


def test_a_helper_that_dies_leaves_the_own_search(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import themis_opt.search.assignment as localsearch

    search = localsearch._search

    def dying(*args: object, seed: int, **kwargs: object) -> object:
        if seed != 0:  # the forked helper: gone without an answer
            os._exit(3)
        return search(*args, seed=seed, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(localsearch, "_search", dying)
    instance = _three_dims()
    starts = [baseline_orders(instance)]
    found = improve_assignment(instance, starts, seed=0, evaluations=80, workers=2)
    timer = AssignmentTimer(instance)
    first = Intra(SEARCH.walk_policies[0])  # worker 0's walk
    alone = search(timer, starts, seed=0, strategy=DESCENT, evaluations=80, walk=first, **NO_LIMITS)
    assert found == alone


def _in_a_daemon(send: Connection) -> None:
    instance = _three_dims()
    found = improve_assignment(instance, [baseline_orders(instance)], seed=4, evaluations=80, workers=2)
    send.send(None if found is None else found.makespan)


def test_a_daemonic_process_searches_alone() -> None:
    # daemonic processes (a cluster's workers) may not fork helpers: the own seed's search is the answer
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_in_a_daemon, args=(send,), daemon=True)
    process.start()
    assert receive.poll(60)
    makespan = receive.recv()
    process.join()
    instance = _three_dims()
    alone = improve_assignment(instance, [baseline_orders(instance)], seed=4, evaluations=80)
    assert alone is not None and makespan == alone.makespan


@pytest.mark.parametrize("strategy", [DESCENT, ANNEALING, SHARED])
def test_helpers_keep_the_deadline(strategy: Strategy, caplog: pytest.LogCaptureFixture) -> None:
    # 32 chunks, more simulations than a second allows: both searches (or the walk and its timer) stop,
    # and the moves are planned over the time left, not over the simulations
    instance = _three_dims(32)
    t0 = time.perf_counter()
    with caplog.at_level("INFO", logger="themis_opt.search"):
        found = improve_assignment(
            instance,
            [baseline_orders(instance)],
            seed=0,
            evaluations=10**6,
            deadline=Deadline.after(1.0),
            workers=2,
            strategy=strategy,
        )
    assert found is not None and validate(instance, found) == []
    assert time.perf_counter() - t0 < 5.0  # generous: this checks that nothing waits for the helper's full run
    assert "then moves for" in caplog.text


# ------------------------------------------------------------------ sequence search


def _starts(instance: Instance) -> list[Schedule]:
    return [simulate(instance, orders, "fifo") for orders in (baseline_orders(instance), themis_orders(instance))]


def test_sequences_keep_the_orders_are_valid_and_never_worse(instance: Instance) -> None:
    starts = _starts(instance)
    for n, start in enumerate(starts):
        found = improve_sequences(instance, [start], seed=n, evaluations=150)
        assert found is not None and validate(instance, found) == []
        assert found.orders == start.orders
        assert found.makespan <= start.makespan


def test_the_sequence_timing_is_the_left_shift() -> None:
    # every candidate is timed by its own longest-path pass: it must agree with retime, the reference
    instance = _three_dims()
    start = _starts(instance)[1]
    graph = _Sequences(instance, start)
    sequences = {d: list(seq) for d, seq in graph.start.items()}
    checked = 0
    for seq in sequences.values():
        for k in range(len(seq) - 1):
            seq[k], seq[k + 1] = seq[k + 1], seq[k]
            timed = graph.time(sequences)
            if timed is None:  # the swap reverses one chunk's own phases
                seq[k], seq[k + 1] = seq[k + 1], seq[k]
                continue
            exact = retime(instance, start.orders, {e: [graph.where[v] for v in s] for e, s in sequences.items()})
            assert timed[0] == pytest.approx(exact.makespan, rel=1e-12)
            checked += 1
    assert checked > 10


def test_a_sequence_against_a_chunks_order_is_refused() -> None:
    instance = _three_dims()
    start = _starts(instance)[0]
    graph = _Sequences(instance, start)
    # the chunk's reduce-scatter and all-gather on its first dimension, the all-gather put first
    d = next(iter(sequences_of(instance, start)))
    sequences = {e: list(seq) for e, seq in graph.start.items()}
    first, last = graph.start[d].index(0), graph.start[d].index(len(graph.where) // len(instance.chunk_ids) - 1)
    sequences[d][first], sequences[d][last] = sequences[d][last], sequences[d][first]
    assert graph.time(sequences) is None


def test_sequence_search_improves_a_poor_start_and_repeats_itself() -> None:
    instance = _three_dims()
    start = simulate(instance, themis_orders(instance), "fifo")
    one = improve_sequences(instance, [start], seed=5, evaluations=400)
    two = improve_sequences(instance, [start], seed=5, evaluations=400)
    assert one is not None and one == two
    assert one.makespan < start.makespan


def test_sequence_search_restarts_when_stuck() -> None:
    restless = SearchParams(sequence_patience_per_phase=0)  # back to the start after every candidate
    instance = _three_dims()
    start = simulate(instance, themis_orders(instance), "fifo")
    found = improve_sequences(instance, [start], seed=5, evaluations=400, params=restless)
    assert found != improve_sequences(instance, [start], seed=5, evaluations=400)
    assert found is not None and validate(instance, found) == [] and found.makespan <= start.makespan


def test_sequence_search_stops_at_the_target(caplog: pytest.LogCaptureFixture) -> None:
    instance = _three_dims()
    start = _starts(instance)[1]
    with caplog.at_level("INFO", logger="themis_opt.search"):
        found = improve_sequences(instance, [start], seed=0, evaluations=10**6, target=start.makespan)
    assert found is not None and found.makespan <= start.makespan
    assert "sequence search: 1 candidate timed" in caplog.text


def test_two_sequence_workers_give_what_one_gives() -> None:
    # one start per worker at once, or both in this process one after another: the same schedule
    instance = _three_dims()
    starts = _starts(instance)
    alone = improve_sequences(instance, starts, seed=2, evaluations=200, workers=1)
    both = improve_sequences(instance, starts, seed=2, evaluations=200, workers=2)
    assert alone is not None and both == alone
    each = [improve_sequences(instance, [start], seed=2 + n, evaluations=200) for n, start in enumerate(starts)]
    assert both.makespan == min(found.makespan for found in each if found is not None)
    # per start: each start's own search, which keeps that start's orders
    per_start = improve_sequences_per_start(instance, starts, seed=2, evaluations=200, workers=2)
    assert per_start == each
    assert all(found is not None and found.orders == start.orders for found, start in zip(per_start, starts))
    assert all(validate(instance, found) == [] for found in per_start if found is not None)


def test_sequence_helpers_keep_the_deadline() -> None:
    instance = _three_dims(32)
    t0 = time.perf_counter()
    found = improve_sequences(instance, _starts(instance), evaluations=10**9, deadline=Deadline.after(1.0), workers=2)
    assert found is not None and validate(instance, found) == []
    assert time.perf_counter() - t0 < 1.5


def _two_at_once(chunks: int = 6) -> Instance:
    network = Network(
        tuple(Dimension(n, "ring", b, 500.0) for n, b in zip([4, 4], [200.0, 50.0])),
        congestion_unaware=True,
        active_chunks=2,
    )
    collectives = (Collective("all_reduce", 64 * MIB, chunks), Collective("all_reduce", 16 * MIB, 3, issue_ns=2e4))
    return Instance(network, collectives)


def test_with_two_at_once_a_lane_keeps_one_at_a_time_and_the_search_only_shortens() -> None:
    from themis_opt.search.sequence import _Sequences

    instance = _two_at_once()
    assert sequences_searchable(instance)
    start = simulate(instance, themis_orders(instance), "fifo")
    graph = _Sequences(instance, start)
    # each dimension's phases are in two lanes, and timed as lanes the start is no longer than it was
    assert sorted({key // 2 for key in graph.start}) == [0, 1] and len(graph.start) == 4
    timed = graph.time(graph.start)
    assert timed is not None and timed[0] <= start.makespan * (1 + 1e-12)
    assert graph.schedule(instance, graph.start).makespan <= timed[0] * (1 + 1e-12)
    found = improve_sequences(instance, [start], seed=1, evaluations=400)
    assert found is not None and validate(instance, found) == [] and found.makespan <= start.makespan
    assert found.orders == start.orders


def test_task_graphs_and_spent_deadlines_are_not_searched() -> None:
    graph = load("graph_2l2p")
    assert not sequences_searchable(graph)
    assert improve_sequences(graph, [simulate(graph, baseline_orders(graph), "fifo")]) is None
    instance = _three_dims()
    assert sequences_searchable(instance)
    assert improve_sequences(instance, _starts(instance), deadline=Deadline.after(0.0)) is None
    assert improve_sequences(instance, []) is None


def test_lanes_of_one_phase_each_end_the_search() -> None:
    # one chunk's two phases (reduce-scatter, all-gather) in one lane of two: once a move puts
    # them one a lane, no move is left
    network = Network((Dimension(4, "ring", 100.0, 500.0),), congestion_unaware=True, active_chunks=2)
    instance = Instance(network, (Collective("all_reduce", 2 * MIB, 1),))
    start = simulate(instance, baseline_orders(instance), "fifo")
    found = improve_sequences(instance, [start], seed=0, evaluations=500)
    assert found is not None and validate(instance, found) == [] and found.makespan <= start.makespan


def _issued_over_time() -> Instance:
    network = Network((Dimension(4, "switch", 200.0, 500.0), Dimension(4, "switch", 50.0, 700.0)))
    return Instance(network, tuple(Collective("all_reduce", 16 * MIB, 4, issue_ns=30_000.0 * c) for c in range(5)))


def test_moves_resumed_from_the_current_walk_as_full_runs_do() -> None:
    # the core's moves resume from the current assignment's run; Python's run from the start
    from themis_opt.search.assignment import _search

    timers = [AssignmentTimer(_issued_over_time(), engine) for engine in ("core", "python")]
    walks = [
        _search(timer, [baseline_orders(timer.instance)], seed=2, strategy=ANNEALING, evaluations=300, **NO_LIMITS)
        for timer in timers
    ]
    assert walks[0] is not None and walks[0] == walks[1]
    assert validate(timers[0].instance, walks[0]) == []
    runs, resumed, _, skipped = timers[0].counts()
    assert resumed > runs // 2 and skipped > 0


def _moves(
    instance: Instance, in_core: bool, starts: list[Orders], **options: Any
) -> tuple[Schedule | None, tuple[int, int, int, int], int]:
    from themis_opt.search.assignment import _search

    timer = AssignmentTimer(instance)
    params = dataclasses.replace(SEARCH, walk_in_core=in_core)
    found = _search(
        timer, starts, params=params, **{"seed": 3, "strategy": ANNEALING, "evaluations": 400, **NO_LIMITS, **options}
    )
    return found, timer.counts(), len(timer.made)


@pytest.mark.parametrize(
    "case", ["annealing", "hot", "descent", "keep counts", "new orders", "issued over time", "tail"]
)
def test_the_walk_in_the_core_is_the_walk_in_python(case: str, caplog: pytest.LogCaptureFixture) -> None:
    # the same draws, the same simulations (runs and events), the same schedule
    instance = _issued_over_time() if case == "issued over time" else _three_dims(16 if case == "new orders" else 8)
    starts = [themis_orders(instance)] if case == "keep counts" else [baseline_orders(instance)]
    options: dict[str, Any] = {
        "hot": {"strategy": Strategy(0.1, 0.02)},  # many worse moves kept: the Metropolis rule decides often
        "descent": {"strategy": DESCENT},
        "keep counts": {"keep_counts": True},
        "tail": {"walk": Intra.TAIL},
    }.get(case, {})
    with caplog.at_level("INFO", logger="themis_opt.search.assignment"):
        core = _moves(instance, True, starts, **options)
    assert "the moves in the core ended (done)" in caplog.text
    python = _moves(instance, False, starts, **options)
    assert core[0] is not None and validate(instance, core[0]) == []
    assert core == python
    if case == "new orders":  # orders no start has, made while the walk ran in the core
        assert core[2] > len(set(starts[0].values()))


def test_a_walk_in_the_core_stops_at_the_target() -> None:
    instance = _three_dims()
    starts = [baseline_orders(instance)]
    free = _moves(instance, True, starts)
    assert free[0] is not None
    stopped = _moves(instance, True, starts, target=free[0].makespan)
    assert stopped == _moves(instance, False, starts, target=free[0].makespan)
    assert stopped[0] is not None and stopped[0].makespan == free[0].makespan
    assert stopped[1][0] < free[1][0]  # fewer runs: it stopped at the first schedule that met the target


@pytest.mark.parametrize("in_core", [True, False])
def test_a_walk_of_moves_that_change_nothing_keeps_the_deadline(in_core: bool) -> None:
    # keep_counts from a start that gives each class one order: every swap changes nothing, so the
    # walk only draws; it still stops at the deadline, not after its 4 x 10^7 draws
    net = Network((Dimension(4, "switch", 200.0, 500.0), Dimension(4, "switch", 50.0, 500.0)))
    instance = Instance(
        net, (Collective("all_reduce", 64 * MIB, 8), Collective("all_reduce", 64 * MIB, 8, issue_ns=1e4))
    )
    params = dataclasses.replace(SEARCH, walk_in_core=in_core)
    began = time.perf_counter()
    found = improve_assignment(
        instance, [baseline_orders(instance)], evaluations=10**7, deadline=Deadline.after(0.3),
        keep_counts=True, strategy=Strategy(0.1, 0.0), params=params,
    )  # fmt: skip
    assert time.perf_counter() - began < 0.3 + 2.0  # generous: the limits' figures are in bench/
    assert found is not None and validate(instance, found) == []


def test_a_walk_in_the_core_draws_for_at_most_so_many_orders() -> None:
    from themis_opt.search.walk import MAX_WALK_DIMS, MAX_WALK_ORDERS, MoveDraws

    eight = tuple(range(8))
    most = MAX_WALK_ORDERS // 40_320  # 8! orders each
    assert MoveDraws.fits([eight] * most) and not MoveDraws.fits([eight] * (most + 1))
    assert not MoveDraws.fits([tuple(range(MAX_WALK_DIMS + 1))])
    with pytest.raises(ValueError, match="orders of them in all"):
        MoveDraws(((0,),) * (most + 1), ((0,),) * (most + 1), (eight,) * (most + 1), False, 0.6, 0.8)
