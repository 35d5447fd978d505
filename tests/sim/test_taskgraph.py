"""Task graphs: compute, collectives and dependencies in one instance, traced by hand and checked by brute force."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from themis_opt.bounds import compute_bounds
from themis_opt.cli import main
from themis_opt.cost import phase_duration
from themis_opt.errors import InputError
from themis_opt.formats.native import instance_from_dict, instance_to_dict, load_instance, save_instance
from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Network, Op
from themis_opt.methods import METHODS
from themis_opt.policies import baseline_orders
from themis_opt.result import Status
from themis_opt.schedule import ComputeSchedule, Schedule
from themis_opt.sim import simulate
from themis_opt.solving import solve
from themis_opt.validator import validate

from ..conftest import DATA, brute_force, load

GRAPH = DATA / "graph_2l2p.json"


def test_two_layers_two_passes_by_hand() -> None:
    # Two layers, two passes (DATA rules): compute 100/300/200 ns, 8000-byte all-reduces in 2 chunks on
    # two 2-NPU rings at 1 byte/ns (RS of the 4000-byte chunk 2000 ns on its first dimension, 1000 on
    # its second), forward passes wait 50 ns after their layer's all-reduce. Traced by hand, event by
    # event, with the queue rules; the all-reduces of pass 0 are released at 500 (ar1) and 1000 (ar0).
    instance = load_instance(GRAPH)
    base = solve(instance, "baseline")
    assert base.schedule is not None and validate(instance, base.schedule) == []
    # fifo, order (0, 1) for every chunk: ar1.p0 ends 12500, ar0.p0 16500; fwd0.p1 waits for
    # ar0.p0 + 50; pass 1 repeats pass 0 shifted by 16550
    assert base.schedule.collective_ends(4) == (12500.0, 16500.0, 29050.0, 33050.0)
    assert [c.start_ns for c in base.schedule.computes] == [0, 100, 200, 500, 700, 16550, 16650, 16750, 17050, 17250]
    assert base.makespan == 33050.0
    themis = solve(instance, "themis")
    assert themis.schedule is not None and validate(instance, themis.schedule) == []
    # scf, orders (0, 1) and (1, 0) per all-reduce (loads reset per release): ar0.p0 is done at 10500,
    # before ar1.p0 (12500); fwd1.p1 waits for ar1.p0 + 50 = 12550
    assert {c.order for c in themis.schedule.chunks} == {(0, 1), (1, 0)}
    assert themis.schedule.collective_ends(4) == (12500.0, 10500.0, 24950.0, 22950.0)
    assert [c.start_ns for c in themis.schedule.computes] == [0, 100, 200, 500, 700, 10550, 12550, 12650, 12950, 13150]
    assert themis.makespan == 24950.0


def test_every_method_is_valid_and_bounded_on_a_graph() -> None:
    instance = load_instance(GRAPH)
    bounds = compute_bounds(instance)
    results = [solve(instance, m, time_limit=10, workers=1) for m in METHODS]
    results += [solve(instance, m, intra=i) for m in ("baseline", "themis") for i in ("fifo", "scf")]
    best = max(bounds.best, *(r.lower_bound for r in results))
    for r in results:
        assert r.schedule is not None and validate(instance, r.schedule) == [], r.method
        assert best <= r.makespan * (1 + 1e-12), r.method  # type: ignore[operator]
    cpsat = next(r for r in results if r.method == "cpsat")
    assert cpsat.status is Status.OPTIMAL and cpsat.makespan == 24950.0
    assert bounds.critical_path is not None and bounds.compute is not None


def _one_dim(*tasks: Collective | Compute, topology: str = "ring", n: int = 2) -> Instance:
    return Instance(Network((Dimension(n, topology, 1e9 / 2**30, 0.0),), endpoint_delay_ns=0.0), tasks)


def _service(schedule: Schedule) -> list[int]:
    return [c for _, c, _ in schedule.by_dimension()[0]]


def test_priorities_order_the_queue_as_q2_says() -> None:
    mib = 2**20
    # c0 occupies the dimension; c1 (priority 0) and c2 (priority 5, larger) wait
    tasks = (
        Collective("reduce_scatter", 4 * mib, 1),
        Collective("reduce_scatter", mib, 1, issue_ns=10, priority=0),
        Collective("reduce_scatter", 2 * mib, 1, issue_ns=20, priority=5),
    )
    instance = _one_dim(*tasks)
    # fifo: priority first, then arrival
    assert _service(simulate(instance, baseline_orders(instance), "fifo")) == [0, 2, 1]
    # scf: priority ignored, smallest first
    assert _service(simulate(instance, baseline_orders(instance), "scf")) == [0, 1, 2]
    # an all-to-all under scf is queued as under fifo: by priority, whatever its size
    a2a = _one_dim(
        Collective("reduce_scatter", 4 * mib, 1),
        Collective("all_to_all", mib, 1, issue_ns=10, priority=0),
        Collective("all_to_all", 2 * mib, 1, issue_ns=20, priority=5),
    )
    assert _service(simulate(a2a, baseline_orders(a2a), "scf")) == [0, 2, 1]
    # equal priorities under fifo: arrival order
    same = _one_dim(*(Collective("reduce_scatter", s * mib, 1, issue_ns=t) for s, t in ((4, 0), (2, 10), (1, 20))))
    assert _service(simulate(same, baseline_orders(same), "fifo")) == [0, 1, 2]


@pytest.mark.parametrize(
    ("topology", "algorithm", "steps", "hops", "sent"),
    [("ring", "ring", 6, 1, 1.5), ("switch", "direct", 1, 2, 0.75), ("fully_connected", "direct", 1, 1, 0.75)],
)
def test_all_to_all_phase_cost_per_algorithm(topology: str, algorithm: str, steps: int, hops: int, sent: float) -> None:
    # n = 4: ring n(n-1)/2 = 6 steps of one hop, x (n-1)/2 bytes; direct 1 step, x (n-1)/n bytes
    dim = Dimension(4, topology, 100.0, 500.0, all_to_all_algorithm=algorithm)
    network = Network((dim,), endpoint_delay_ns=10.0)
    x = 2.0**20
    expected = steps * (hops * 500.0 + 10.0) + sent * x / dim.bytes_per_ns
    assert phase_duration(network, 0, Op.ALL_TO_ALL, x) == pytest.approx(expected)
    instance = Instance(network, (Collective("all_to_all", 2**20, 1),))
    schedule = simulate(instance, baseline_orders(instance))
    (phase,) = schedule.chunks[0].phases
    assert phase.bytes_in == phase.bytes_out == x and phase.duration == pytest.approx(expected)


def test_all_to_all_keeps_the_ascending_order_under_every_method() -> None:
    network = Network(tuple(Dimension(n, "ring", b, 100.0) for n, b in ((2, 400.0), (4, 100.0))))
    instance = Instance(network, (Collective("all_to_all", 2**22, 4), Collective("all_reduce", 2**22, 4)))
    for method in METHODS:
        result = solve(instance, method, time_limit=5, workers=1)
        assert result.schedule is not None and validate(instance, result.schedule) == []
        assert {c.order for c in result.schedule.chunks if c.collective == 0} == {(0, 1)}


TINY_GRAPHS = {
    "compute-collective-compute": (
        Compute(700.0, "fwd"),
        Collective("all_reduce", 4000, 2, id="ar", after=(After("fwd"),)),
        Compute(300.0, "upd", after=(After("ar", 40.0),)),
    ),
    "two-collectives-and-a-lag": (
        Compute(500.0, "a"),
        Collective("reduce_scatter", 6000, 2, id="rs", after=(After("a", 100.0),)),
        Collective("all_reduce", 2000, 1, id="ar"),
        Compute(200.0, "b", after=(After("ar"),)),
    ),
}


@pytest.mark.parametrize("name", sorted(TINY_GRAPHS))
def test_cpsat_matches_brute_force_on_tiny_graphs(name: str) -> None:
    network = Network(
        (Dimension(2, "ring", 1e9 / 2**30, 100.0), Dimension(2, "switch", 0.5e9 / 2**30, 50.0)), endpoint_delay_ns=10.0
    )
    instance = Instance(network, TINY_GRAPHS[name], name)
    optimum = brute_force(instance)
    result = solve(instance, "cpsat", time_limit=30, workers=1, quantum_ns=0.5)
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert optimum - 1e-6 <= result.makespan <= optimum * (1 + 1e-4)  # type: ignore[operator]
    for method in METHODS:  # every bound of every method is below the optimum
        assert solve(instance, method, time_limit=10, workers=1).lower_bound <= optimum + 1e-6


def test_version_1_instances_load_unchanged_and_save_as_version_2(tmp_path: Path) -> None:
    for name in ("worked", "mixed", "three_dim"):
        v1 = load(name)
        path = tmp_path / f"{name}.json"
        save_instance(v1, path)
        assert json.loads(path.read_text())["version"] == 2
        v2 = load_instance(path)
        assert v2 == v1
        for method, intra in (("baseline", "fifo"), ("themis", "scf"), ("balanced", None)):
            assert solve(v1, method, intra=intra).schedule == solve(v2, method, intra=intra).schedule


def test_validator_catches_task_graph_violations() -> None:
    instance = load_instance(GRAPH)
    good = solve(instance, "themis").schedule
    assert good is not None
    early = list(good.computes)
    early[5] = ComputeSchedule(5, 0.0, 100.0)  # fwd0.p1 before ar0.p0 has ended, and on top of fwd0.p0
    problems = validate(instance, Schedule(good.chunks, tuple(early)))
    assert any("fwd0.p1" in p and "before it is released" in p for p in problems)
    assert any("compute unit" in p and "overlaps" in p for p in problems)
    short = list(good.computes)
    short[0] = ComputeSchedule(0, 0.0, 50.0)
    assert any("lasts 50" in p for p in validate(instance, Schedule(good.chunks, tuple(short))))
    assert any("missing" in p for p in validate(instance, Schedule(good.chunks, good.computes[:-1])))


def _document() -> dict[str, Any]:
    return json.loads(GRAPH.read_text())


def _mutated(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(_document())
    change(doc)
    return doc


BAD_GRAPHS = [
    (lambda d: d["tasks"][1]["after"].append("nope"), r"tasks\[1\] \(fwd1\.p0\)\.after\[1\]: unknown task id 'nope'"),
    (lambda d: d["tasks"][2].update(id="fwd0.p0"), r"tasks\[2\]\.id: duplicate id 'fwd0\.p0'"),
    (lambda d: d["tasks"][0]["after"].append("wg1.p0"), r"dependency cycle \(each waits for the next\): fwd0\.p0 -> "),
    (
        lambda d: d["tasks"][7]["after"][1].update(lag_ns=-5),
        r"tasks\[7\] \(fwd0\.p1\)\.after\[1\]\.lag_ns: must be >= 0",
    ),
    (lambda d: d["tasks"][0].update(duration_ns="long"), r"tasks\[0\] \(fwd0\.p0\)\.duration_ns: must be a number"),
    (
        lambda d: (
            d["network"]["dimensions"][0].update(
                topology="switch", algorithm="halving_doubling", all_to_all_algorithm="halving_doubling"
            ),
            d["tasks"][3].update(kind="all_to_all"),
        ),
        r"tasks\[3\] \(ar1\.p0\)\.dimensions: an all-to-all cannot run on dimension 0",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD_GRAPHS)
def test_bad_graphs_name_the_task(
    change: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _mutated(change)
    with pytest.raises(InputError, match=message):
        instance_from_dict(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["solve", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


def test_graph_round_trip_keeps_every_field(tmp_path: Path) -> None:
    instance = load_instance(GRAPH)
    again = instance_from_dict(instance_to_dict(instance))
    assert again == instance
    assert instance.tasks[7].after == (After("wg0.p0"), After("ar0.p0", 50.0))
