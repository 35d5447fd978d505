"""Workload files and the model zoo as task graphs: edge by edge against the rules, and timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance
from themis_opt.formats.workload_text import parse_workload
from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Kind, Network
from themis_opt.metrics import iteration_metrics
from themis_opt.policies import ThemisTracker
from themis_opt.solving import solve
from themis_opt.validator import validate
from themis_opt.workloads.astra1 import task_graph
from themis_opt.workloads.layers import HIGHEST_PRIORITY, Workload
from themis_opt.workloads.zoo import ARCHITECTURES, ZooOptions, model_workload, parameters

from ..conftest import DATA

WORKLOADS = DATA / "workloads"
MIB = 2**20
GRAPH = DATA / "graph_2l2p.json"


def _edges(instance: Instance) -> dict[str, tuple[tuple[str, float], ...]]:
    return {t.id: tuple((d.task, d.lag_ns) for d in t.after) for t in instance.tasks}


def _coll(instance: Instance, task_id: str) -> Collective:
    task = instance.tasks[instance.task_index[task_id]]
    assert isinstance(task, Collective)
    return task


def test_data_workload_builds_the_hand_traced_graph() -> None:
    graph = load_instance(GRAPH)
    instance = task_graph(parse_workload(WORKLOADS / "data_2l.txt"), graph.network, passes=2, chunks=2)
    edges = _edges(instance)
    # D1: forward 0..L-1, backward L-1..0: WG, its all-reduce, IG (none for layer 0); compute in program order
    assert [t.id for t in instance.tasks[:7]] == [
        "fwd.0.p0", "fwd.1.p0", "wg.1.p0", "wg_coll.1.p0", "ig.1.p0", "wg.0.p0", "wg_coll.0.p0",
    ]  # fmt: skip
    assert edges["wg_coll.1.p0"] == (("wg.1.p0", 0.0),)
    assert edges["ig.1.p0"] == (("wg.1.p0", 0.0),)
    # D2-D4: forward i of the next pass waits for layer i's all-reduce plus the update delay
    assert edges["fwd.0.p1"] == (("wg.0.p0", 0.0), ("wg_coll.0.p0", 50.0))
    assert edges["fwd.1.p1"] == (("fwd.0.p1", 0.0), ("wg_coll.1.p0", 50.0))
    # D5: the run ends with the last pass's collectives (plus delays) and compute
    assert set(edges["end"]) == {("wg.0.p1", 0.0), ("wg_coll.1.p1", 50.0), ("wg_coll.0.p1", 50.0)}
    # Q1 (LIFO): one priority higher for each collective issued
    assert [c.priority for c in instance.collectives] == [0, 1, 2, 3]
    fifo = task_graph(parse_workload(WORKLOADS / "data_2l.txt"), graph.network, chunks=2, policy="FIFO")
    assert [c.priority for c in fifo.collectives] == [0, -1, -2, -3]
    # under scf priorities play no part: the same times as the hand-traced graph (tests/sim/test_taskgraph.py),
    # plus the last update delay
    themis = solve(instance, "themis")
    assert themis.schedule is not None and validate(instance, themis.schedule) == []
    hand = solve(graph, "themis").schedule
    assert hand is not None
    assert themis.schedule.collective_ends(4) == hand.collective_ends(4)
    assert themis.makespan == 24950.0 + 50.0
    metrics = iteration_metrics(instance, themis.schedule)
    assert metrics is not None
    # the last pass starts with fwd.0.p1 at 10550 (by hand)
    assert metrics.iteration_ns == pytest.approx(25000.0 - 10550.0)
    assert metrics.compute_ns == 2 * (100 + 100 + 300 + 200 + 300)
    assert metrics.exposed_ns == pytest.approx(25000.0 - metrics.compute_ns)


def test_hybrid_transformer_edges_and_priorities() -> None:
    network = Network(tuple(Dimension(2, "ring", 100.0, 100.0) for _ in range(2)))
    instance = task_graph(parse_workload(WORKLOADS / "transformer_2l.txt"), network, passes=2, chunks=4)
    edges = _edges(instance)
    # H1: forward collectives over the model-parallel dimension 0, blocking
    assert _coll(instance, "fwd_coll.0.p0").dimensions == (0,)
    assert _coll(instance, "fwd_coll.0.p0").size_bytes == 100 * 2  # an all-gather's shard times the group
    # a collective is done at its end plus its layer's update delay (5 and 6 here)
    assert edges["fwd.1.p0"] == (("fwd.0.p0", 0.0), ("fwd_coll.0.p0", 5.0))
    assert edges["ig.1.p0"] == (("fwd.1.p0", 0.0), ("fwd_coll.1.p0", 6.0))
    # H2: IG, its collective (model parallel), WG, its collective (data parallel, dimension 1); IG(i-1) waits
    assert _coll(instance, "wg_coll.1.p0").dimensions == (1,)
    assert edges["wg.1.p0"] == (("ig.1.p0", 0.0),)
    assert edges["ig.0.p0"] == (("wg.1.p0", 0.0),)  # layer 1 has no input-gradient collective
    assert edges["ig_coll.0.p0"] == (("ig.0.p0", 0.0),)
    assert edges["ig_wait.p0"] == (("wg.0.p0", 0.0), ("ig_coll.0.p0", 5.0))
    assert edges["fwd.0.p1"] == (("ig_wait.p0", 0.0), ("wg_coll.0.p0", 5.0))
    # Q1: fwd 0, 1 (LIFO); wg(1) FIFO 2; ig(0) LIFO 1; wg(0) FIFO 2: the wg one above the ig one
    prio = {c.id: c.priority for c in instance.collectives if c.id.endswith("p0")}
    assert prio == {"fwd_coll.0.p0": 0, "fwd_coll.1.p0": 1, "wg_coll.1.p0": 2, "ig_coll.0.p0": 1, "wg_coll.0.p0": 2}
    for method in ("baseline", "themis", "balanced"):
        result = solve(instance, method)
        assert result.schedule is not None and validate(instance, result.schedule) == []
    three = Workload("HYBRID_TRANSFORMER", parse_workload(WORKLOADS / "transformer_2l.txt").layers, 3)
    with pytest.raises(InputError, match="3 does not split dimension 1 of 2x2 into whole parts"):
        task_graph(three, network)


def test_hybrid_dlrm_edges_and_priorities() -> None:
    network = Network(tuple(Dimension(2, "ring", 100.0, 100.0) for _ in range(2)))
    instance = task_graph(parse_workload(WORKLOADS / "dlrm_3l.txt"), network, passes=2, chunks=2)
    edges = _edges(instance)
    # H3: the embedding's all-to-all is issued and not waited for until after the last bottom layer (1)
    assert edges["fwd_a2a.0.p0"] == (("fwd.0.p0", 0.0),)
    assert edges["fwd.1.p0"] == (("fwd.0.p0", 0.0),)
    assert edges["fwd.2.p0"] == (("fwd.1.p0", 0.0), ("fwd_a2a.0.p0", 1.0))  # plus the embedding's delay
    # H4: WG(2), its all-reduce, IG(2), then (i = last_bottom + 1) layer 0's backward all-to-all
    assert edges["ig_a2a.0.p0"] == (("ig.2.p0", 0.0),)
    assert edges["ig_wait.p0"] == (("wg.0.p0", 0.0), ("ig_a2a.0.p0", 1.0))
    assert "ig.0.p0" not in edges
    assert _coll(instance, "fwd_a2a.0.p0").priority == HIGHEST_PRIORITY
    assert _coll(instance, "ig_a2a.0.p0").kind is Kind.ALL_TO_ALL
    assert [c.priority for c in instance.collectives if c.id.startswith("wg_coll") and c.id.endswith("p0")] == [0, 1]
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []


def test_micro_runs_copies_of_one_collective() -> None:
    network = Network((Dimension(4, "ring", 100.0, 100.0),))
    instance = task_graph(parse_workload(WORKLOADS / "micro.txt"), network, passes=3, chunks=8)
    assert not instance.computes and len(instance.collectives) == 3
    assert all(c.issue_ns == 0 and not c.after and c.size_bytes == 1048576 for c in instance.collectives)
    assert [c.priority for c in instance.collectives] == [0, 1, 2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PIPELINE\n1\n", "line 1, token 'PIPELINE': unknown parallelism"),
        (
            "HYBRID_TRANSFORMER_FWD_IN_BCKWD g: 1 c: 1 2 i: 1 1\n3\n" + "l -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n" * 3,
            "initiating layer 1 has no checkpoint below it",
        ),
        (
            "HYBRID_CUSTOMIZED\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 0 HYBRID_TRANSFORMER\n",
            "layer l's parallelism must be one of DATA",
        ),
        ("DATA\n1\nl0 -1 10 NONE 0 20 NONE 0 30 ALLREDUCE 8 0 extra\n", "token 'extra': unexpected after the 1 layers"),
        ("DATA\ntwo\n", "line 2, token 'two': the layer count must be an integer"),
        ("DATA\n1\nl0 -1 10 NONE 0 20 NONE 0 slow ALLREDUCE 8 0\n", "line 3, token 'slow': l0's wg compute"),
        ("DATA\n2\nl0 -1 10 NONE 0 20 NONE 0 30 ALLREDUCE 8 0\n", "end of file: expected a layer name"),
        ("HYBRID_DLRM 5\n2\n" + "l -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n" * 2, "last bottom layer 5"),
    ],
)
def test_bad_workloads_name_file_line_and_token(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_workload(bad)
    argv = ["workload", str(bad), "--network", str(GRAPH), "--out", str(tmp_path / "i.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and err.count("\n") == 1


def test_zoo_parameter_totals_and_layer_counts() -> None:
    assert parameters("resnet50") == 25_557_032
    assert parameters("resnet152") == 60_192_808
    assert abs(parameters("transformer1t") / 1.0e12 - 1) < 0.01
    assert {m: len(f()) for m, f in ARCHITECTURES.items()} == {
        "resnet50": 54, "resnet152": 156, "gnmt": 20, "dlrm": 9, "transformer1t": 129,
    }  # fmt: skip
    workload = model_workload("resnet50", ZooOptions(batch=16, bytes_per_element=4))
    assert sum(layer.wg_size for layer in workload.layers) == 25_557_032 * 4
    conv1 = workload.layers[0]
    # 2 k^2 cin cout Hout Wout per sample = 2*49*3*64*112*112 FLOPs, at 100 TFLOP/s x 0.5
    assert conv1.fwd_compute == pytest.approx(2 * 49 * 3 * 64 * 112 * 112 * 16 / 50e3)
    assert conv1.ig_compute == conv1.wg_compute == conv1.fwd_compute


@pytest.mark.parametrize("model", ["resnet50", "gnmt", "dlrm", "transformer1t"])
def test_zoo_models_become_valid_task_graphs(model: str, tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    argv = ["workload", model, "--network", str(DATA / "tiny_3d.json"), "--passes", "1", "--chunks", "2"]
    if model == "transformer1t":  # the one zoo model with a model-parallel group
        argv += ["--model-parallel", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    instance = load_instance(out)
    assert instance.is_task_graph and instance.computes
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []


def _graph(tmp_path: Path, text: str, network: Network, **options: object) -> Instance:
    path = tmp_path / "w.txt"
    path.write_text(text)
    return task_graph(parse_workload(path), network, **options)  # type: ignore[arg-type]


TWO_BY_TWO = Network(tuple(Dimension(2, "ring", 100.0, 100.0) for _ in range(2)))
LAYER = "l{i} -1 {f} {ft} 64 {g} {it} 64 {w} {wt} 64 {d}"


def _layers(*parts: tuple[str, str, str]) -> str:
    return "\n".join(
        LAYER.format(i=i, f=10 + i, g=20 + i, w=30 + i, d=i + 1, ft=ft, it=it, wt=wt)
        for i, (ft, it, wt) in enumerate(parts)
    )


def test_model_parallelism_blocks_on_forward_and_input_gradient_collectives(tmp_path: Path) -> None:
    text = "MODEL\n2\n" + _layers(("ALLGATHER", "ALLREDUCE", "ALLREDUCE"), ("ALLGATHER", "ALLREDUCE", "ALLREDUCE"))
    instance = _graph(tmp_path, text, TWO_BY_TWO, passes=1, chunks=1)
    edges = _edges(instance)
    assert edges["fwd.1.p0"] == (("fwd.0.p0", 0.0), ("fwd_coll.0.p0", 1.0))
    assert edges["ig.1.p0"] == (("fwd.1.p0", 0.0), ("fwd_coll.1.p0", 2.0))
    assert edges["ig.0.p0"] == (("wg.1.p0", 0.0), ("ig_coll.1.p0", 2.0))
    # MODEL issues no weight gradients and no input gradient for layer 0; fwd and ig run over every dimension
    assert {c.id for c in instance.collectives} == {"fwd_coll.0.p0", "fwd_coll.1.p0", "ig_coll.1.p0"}
    assert all(c.dimensions == (0, 1) for c in instance.collectives)
    # priorities: the forwards the policy's (LIFO: 0, 1), the input gradient LIFO (2)
    assert [c.priority for c in instance.collectives] == [0, 1, 2]


@pytest.mark.parametrize(
    ("parallelism", "model", "data"), [("HYBRID_DATA_MODEL", (0,), (1,)), ("HYBRID_MODEL_DATA", (1,), (0,))]
)
def test_hybrid_data_model_loops_put_model_and_data_on_dimensions(
    parallelism: str, model: tuple[int, ...], data: tuple[int, ...], tmp_path: Path
) -> None:
    text = f"{parallelism}\n2\n" + _layers(
        ("ALLGATHER", "ALLREDUCE", "ALLREDUCE"), ("ALLGATHER", "ALLREDUCE", "ALLREDUCE")
    )
    instance = _graph(tmp_path, text, TWO_BY_TWO, passes=2, chunks=1)
    dims = {c.id: c.dimensions for c in instance.collectives}
    assert dims["fwd_coll.0.p0"] == model and dims["ig_coll.1.p0"] == model and dims["wg_coll.0.p0"] == data
    assert "ig_coll.0.p0" not in dims  # as HYBRID_TRANSFORMER, but no input gradient for layer 0
    # the next pass's forward waits for the layer's weight gradient, plus its delay
    assert ("wg_coll.0.p0", 1.0) in _edges(instance)["fwd.0.p1"]
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []


def test_customized_layers_name_their_own_parallelism(tmp_path: Path) -> None:
    text = (
        "HYBRID_CUSTOMIZED\n3\n"
        "a -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 0 DATA\n"
        "b -1 1 ALLGATHER 64 1 ALLREDUCE 64 1 NONE 0 0 MODEL\n"
        "c -1 1 ALLGATHER 64 1 ALLREDUCE 64 1 ALLREDUCE 64 0 HYBRID_MODEL_DATA\n"
    )
    instance = _graph(tmp_path, text, TWO_BY_TWO, passes=1, chunks=1)
    dims = {c.id: c.dimensions for c in instance.collectives}
    assert dims == {
        "fwd_coll.1.p0": (0, 1),
        "fwd_coll.2.p0": (1,),
        "ig_coll.2.p0": (1,),
        "wg_coll.2.p0": (0,),
        "ig_coll.1.p0": (0, 1),
        "wg_coll.0.p0": (0, 1),
    }


def test_forward_in_backward_recomputes_from_the_checkpoint(tmp_path: Path) -> None:
    text = "HYBRID_TRANSFORMER_FWD_IN_BCKWD g: 2 c: 1 0 i: 1 2\n3\n" + _layers(
        ("ALLREDUCE", "NONE", "ALLREDUCE"), ("ALLREDUCE", "NONE", "ALLREDUCE"), ("ALLREDUCE", "NONE", "ALLREDUCE")
    )
    instance = _graph(tmp_path, text, TWO_BY_TWO, passes=1, chunks=1)
    order = [t.id for t in instance.tasks]
    # IG(2) initiates: the forward of layers 0 and 1 again (collectives waited for), then IG(2)
    i = order.index("fwd_re2.0.p0")
    assert order[i : i + 5] == ["fwd_re2.0.p0", "fwd_coll_re2.0.p0", "fwd_re2.1.p0", "fwd_coll_re2.1.p0", "ig.2.p0"]
    assert _edges(instance)["ig.2.p0"] == (("fwd_re2.1.p0", 0.0), ("fwd_coll_re2.1.p0", 2.0))
    assert _coll(instance, "fwd_coll_re2.0.p0").dimensions == (0,)


def test_dlrm_enhanced_does_not_wait_for_the_backward_all_to_all(tmp_path: Path) -> None:
    text = (WORKLOADS / "dlrm_3l.txt").read_text().replace("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")
    instance = _graph(tmp_path, text, TWO_BY_TWO, passes=2, chunks=2)
    assert "ig_wait.p0" not in {t.id for t in instance.tasks}
    assert _edges(instance)["fwd.0.p1"] == (("wg.0.p0", 0.0),)  # layer 0 has no weight gradient


def test_inference_runs_forward_passes_only(tmp_path: Path) -> None:
    text = "DISTRIBUTED_INFERENCE\n2\n" + _layers(("ALLREDUCE", "ALLREDUCE", "ALLREDUCE"), ("NONE", "NONE", "NONE"))
    instance = _graph(tmp_path, text, TWO_BY_TWO, passes=2, chunks=1)
    assert [t.id for t in instance.tasks] == [
        "fwd.0.p0", "fwd_coll.0.p0", "fwd.1.p0", "fwd.0.p1", "fwd_coll.0.p1", "fwd.1.p1", "end",
    ]  # fmt: skip
    assert _edges(instance)["fwd.1.p0"] == (("fwd.0.p0", 0.0), ("fwd_coll.0.p0", 1.0))


def test_a_group_inside_a_dimension_splits_it_as_astra_does(tmp_path: Path) -> None:
    network = Network((Dimension(2, "ring", 100.0, 100.0), Dimension(8, "ring", 50.0, 100.0)))
    text = "HYBRID_TRANSFORMER g: 8\n1\n" + _layers(("ALLREDUCE", "ALLREDUCE", "ALLREDUCE"))
    instance = _graph(tmp_path, text, network, passes=1, chunks=1)
    dims = instance.network.dimensions
    # the 8 of dimension 1 become its first 4 (one apart) and the 2 groups of them (4 apart)
    assert [(d.size, d.physical_size, d.stride) for d in dims] == [(2, 2, 1), (4, 8, 1), (2, 8, 4)]
    assert all(d.bandwidth_gbps == 50.0 for d in dims[1:])
    assert _coll(instance, "fwd_coll.0.p0").dimensions == (0, 1)
    assert _coll(instance, "wg_coll.0.p0").dimensions == (2,)
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []


def test_themis_plans_from_the_loads_before_once_the_npu_has_waited() -> None:
    # ASTRA-sim's NPU 0 no longer plans first once the NPU has waited for a collective, so the
    # collective after the wait sees the loads the one before left. Two all-gathers of 37632 and 65536
    # bytes per NPU on 4x4x4 rings at 64, 32 and 32 GB/s, 4 chunks, the second after waiting for the
    # first: ASTRA-sim 1.0 (instrumented) planned exactly these orders
    network = Network(tuple(Dimension(4, "ring", b, 1.0) for b in (64.0, 32.0, 32.0)))
    tasks = (
        Compute(10.0, "f0"),
        Collective("all_gather", 37632 * 64, 4, id="a", after=(After("f0"),)),
        Compute(10.0, "f1", after=(After("a"),)),
        Collective("all_gather", 65536 * 64, 4, id="b", after=(After("f1"),)),
    )
    instance = Instance(network, tasks)
    tracker = ThemisTracker(instance)
    assert tracker.plan(0, 10.0) == [(0, 1, 2), (0, 1, 2), (2, 0, 1), (1, 0, 2)]
    assert tracker.plan(1, 99.0, waited=True) == [(2, 1, 0), (2, 0, 1), (1, 0, 2), (2, 1, 0)]
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    orders = {(c.collective, c.chunk): c.order for c in result.schedule.chunks}
    assert [orders[(1, k)] for k in range(4)] == [(2, 1, 0), (2, 0, 1), (1, 0, 2), (2, 1, 0)]
    # without the wait, a fresh plan: the first chunk falls back to ascending
    assert ThemisTracker(instance).plan(1, 99.0)[0] == (0, 1, 2)


@pytest.mark.parametrize(
    ("model", "option", "value"),
    [
        ("resnet50", "--model-parallel", "2"),  # resnet50 is data-parallel only
        (str(DATA / "workloads" / "data_2l.txt"), "--batch", "4"),  # a file gives its own sizes
        (str(DATA / "workloads" / "data_2l.txt"), "--precision", "fp32"),
        (str(DATA / "workloads" / "data_2l.txt"), "--peak-tflops", "5"),
    ],
)
def test_an_option_that_would_change_nothing_is_an_error(
    model: str, option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["workload", model, "--network", str(DATA / "tiny_3d.json"), option, value]
    assert main([*argv, "--out", str(tmp_path / "w.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"themis-opt: error: {option}: ") and err.count("\n") == 1
    assert not (tmp_path / "w.json").exists()


def test_an_error_in_what_a_workload_file_makes_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (DATA / "workloads" / "data_2l.txt").read_text().splitlines()
    fields = text[-1].split()
    fields[-2] = "9" * 30  # the weight-gradient all-reduce: far beyond any size an instance takes
    path = tmp_path / "w.txt"
    path.write_text("\n".join([*text[:-1], " ".join(fields)]) + "\n")
    argv = ["workload", str(path), "--network", str(DATA / "tiny_3d.json"), "--out", str(tmp_path / "w.json")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(f"themis-opt: error: {path}: ")


def test_a_misspelt_collective_type_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.txt"
    path.write_text((WORKLOADS / "data_2l.txt").read_text().replace("ALLREDUCE", "ALLREDUCE_", 1))
    workload = parse_workload(path)
    assert workload.layers[0].wg_type is None and workload.layers[1].wg_type is Kind.ALL_REDUCE  # as ASTRA-sim
    assert workload.notes == (
        "w.txt: line 3: layer layer0's wg type 'ALLREDUCE_' is no collective ASTRA-sim 1.0 knows (ALLREDUCE, "
        "ALLGATHER, REDUCESCATTER, ALLTOALL): none, as ASTRA-sim reads it",
    )
    argv = ["workload", str(path), "--network", str(DATA / "tiny_3d.json"), "--out", str(tmp_path / "w.json")]
    assert main(argv) == 0 and "note: w.txt: line 3: layer layer0's wg type 'ALLREDUCE_'" in capsys.readouterr().out
