from __future__ import annotations

from pathlib import Path

import pytest

from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance
from themis_opt.instance import Collective, Dimension, Instance, Kind, Network
from themis_opt.solving import solve
from themis_opt.validator import validate
from themis_opt.workloads.llm import BUCKET_BYTES, LLMS, Layout, LlmConfig, llm_task_graph, parameter_count

from ..conftest import DATA

PUBLISHED = {
    "gpt3-175b": 174_604_259_328,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3-405b": 405_853_388_800,
    "mixtral-8x7b": 46_702_792_704,
}

# two blocks, h 8, 2 heads of 4, one key-value head, SwiGLU 16: a block is q 64 + k 32 + v 32 + o 64 = 192,
# MLP 3 x 8 x 16 = 384, two norms of 8; embedding and output 32 x 8 each, final norm 8
TOY = LlmConfig("toy", 2, 8, 2, 1, 16, 32, 4, True)
TOY_MOE = LlmConfig("toy-moe", 2, 8, 2, 1, 16, 32, 4, True, experts=2, top_k=1)
TOY_WIDE = LlmConfig("toy-wide", 2, 8, 4, 1, 16, 32, 4, True)  # 4 heads: 4 tensor ranks take one each
NET = Network(tuple(Dimension(2, "switch", b, 500.0) for b in (400.0, 100.0, 25.0)))  # 8 NPUs


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_come_out_of_the_shapes(name: str) -> None:
    assert parameter_count(LLMS[name]) == PUBLISHED[name]


def test_the_toy_model_counts_by_hand() -> None:
    assert parameter_count(TOY) == 2 * (192 + 384 + 16) + 256 + 256 + 8
    # the router (8 x 2) and a second expert's MLP
    assert parameter_count(TOY_MOE) == 2 * (192 + 2 * 384 + 16 + 16) + 256 + 256 + 8


def _colls(instance: Instance, part: str) -> list[Collective]:
    return [c for c in instance.collectives if part in c.id]


@pytest.mark.parametrize("data_parallel", ["ddp", "fsdp"])
@pytest.mark.parametrize(("config", "tp", "ep", "dp"), [(TOY, 2, 1, 4), (TOY_WIDE, 4, 1, 2), (TOY_MOE, 2, 2, 2)])
def test_tensor_and_expert_parallel_collectives(
    config: LlmConfig, tp: int, ep: int, dp: int, data_parallel: str
) -> None:
    layout = Layout(tp=tp, ep=ep, dp=dp, data_parallel=data_parallel, batch=3, passes=2)  # type: ignore[arg-type]
    instance = llm_task_graph(config, NET, layout)
    tp_dims = tuple(range({2: 1, 4: 2}[tp]))
    activations = 3 * config.sequence * config.hidden * 2
    for p in range(2):
        for i in range(config.layers):
            ars = [c for c in _colls(instance, f"p{p}.b{i}.ar_") if "bucket" not in c.id]
            assert len(ars) == 4
            assert all(c.kind is Kind.ALL_REDUCE and c.size_bytes == activations for c in ars)
            assert all(c.dimensions == tp_dims for c in ars)
            a2as = _colls(instance, f"p{p}.b{i}.a2a_")
            assert len(a2as) == (4 if config.moe else 0)
            assert all(c.kind is Kind.ALL_TO_ALL and c.dimensions == (1,) for c in a2as)
            assert all(c.size_bytes == activations * config.top_k for c in a2as)
    assert validate(instance, solve(instance, "baseline").schedule) == []  # type: ignore[arg-type]


def _held_bytes(tp: int, ep: int, moe: bool) -> int:
    """By hand: what one NPU holds of the toy models, bf16."""
    experts = 2 * 384 if moe else 384
    router = 16 if moe else 0
    block = (192 + router) // tp + (experts // (tp * ep) if moe else experts // tp) + 16
    return 2 * (2 * block + 256 + 256 + 8)


@pytest.mark.parametrize(("config", "tp", "ep", "dp"), [(TOY, 2, 1, 4), (TOY_MOE, 2, 2, 2)])
def test_fsdp_moves_what_one_npu_holds(config: LlmConfig, tp: int, ep: int, dp: int) -> None:
    instance = llm_task_graph(config, NET, Layout(tp=tp, ep=ep, dp=dp, data_parallel="fsdp"))
    held = _held_bytes(tp, ep, config.moe)
    scattered = [c for c in instance.collectives if c.kind is Kind.REDUCE_SCATTER]
    gathered = [c for c in instance.collectives if c.kind is Kind.ALL_GATHER]
    assert sum(c.size_bytes for c in scattered) == held
    assert sum(c.size_bytes for c in gathered) == 2 * held
    # expert parameters over the data-parallel dimensions, the rest over the expert- and data-parallel ones
    for c in scattered + gathered:
        assert c.dimensions == ((2,) if c.id.endswith(".experts") else (1, 2))


def test_ddp_reduces_what_one_npu_holds_in_buckets() -> None:
    instance = llm_task_graph(TOY_MOE, NET, Layout(tp=2, ep=2, dp=2))
    buckets = [c for c in instance.collectives if "bucket" in c.id]
    assert sum(c.size_bytes for c in buckets) == _held_bytes(2, 2, True)
    assert {c.dimensions for c in buckets} == {(1, 2), (2,)}
    big = llm_task_graph(LLMS["llama3-8b"], Network((Dimension(8, "switch", 400.0, 900.0),)), Layout(dp=8))
    sizes = [c.size_bytes for c in big.collectives if "bucket" in c.id]
    assert sum(sizes) == 2 * PUBLISHED["llama3-8b"]
    # at most 25 MiB, but a tensor larger than that is a bucket of its own (the embedding, the output, w1 ...)
    assert max(sizes) == 128256 * 4096 * 2 and all(s <= BUCKET_BYTES or s in _tensor_bytes() for s in sizes)


def _tensor_bytes() -> set[int]:
    return {128256 * 4096 * 2, 4096 * 14336 * 2, 4096 * 4096 * 2}


def _after(instance: Instance, task_id: str) -> set[str]:
    task = next(t for t in instance.tasks if (t.id if hasattr(t, "id") else None) == task_id)
    return {dep.task for dep in task.after}


def test_dependencies_by_hand_on_two_blocks_ddp() -> None:
    instance = llm_task_graph(TOY, NET, Layout(tp=2, dp=4, passes=2))
    assert _after(instance, "p0.b0.attn_fwd") == set()
    assert _after(instance, "p0.b0.ar_attn_fwd") == {"p0.b0.attn_fwd"}
    assert _after(instance, "p0.b0.mlp_fwd") == {"p0.b0.ar_attn_fwd"}
    assert _after(instance, "p0.b1.attn_fwd") == {"p0.b0.ar_mlp_fwd"}
    assert _after(instance, "p0.head_fwd") == {"p0.b1.ar_mlp_fwd"}
    assert _after(instance, "p0.head_bwd") == {"p0.head_fwd"}
    assert _after(instance, "p0.b1.mlp_bwd") == {"p0.head_bwd"}
    assert _after(instance, "p0.b1.ar_mlp_bwd") == {"p0.b1.mlp_bwd"}
    assert _after(instance, "p0.b1.attn_bwd") == {"p0.b1.ar_mlp_bwd"}
    assert _after(instance, "p0.b0.mlp_bwd") == {"p0.b1.ar_attn_bwd"}
    buckets = [c.id for c in instance.collectives if c.id.startswith("p0.ar_bucket")]
    # the next pass starts once every gradient is reduced and the backward pass is over
    assert _after(instance, "p1.b0.attn_fwd") == {*buckets, "p0.b0.ar_attn_bwd"}


def test_dependencies_by_hand_on_two_blocks_fsdp() -> None:
    instance = llm_task_graph(TOY, NET, Layout(tp=2, dp=4, data_parallel="fsdp"))
    assert _after(instance, "p0.ag_fwd.root") == set()
    assert _after(instance, "p0.b0.ag_fwd") == set()
    assert _after(instance, "p0.b1.ag_fwd") == {"p0.b0.ag_fwd"}  # prefetched while block 0 computes
    assert _after(instance, "p0.b0.attn_fwd") == {"p0.b0.ag_fwd", "p0.ag_fwd.root"}
    assert _after(instance, "p0.b1.attn_fwd") == {"p0.b0.ar_mlp_fwd", "p0.b1.ag_fwd"}
    assert _after(instance, "p0.ag_bwd.root") == {"p0.head_fwd"}
    assert _after(instance, "p0.head_bwd") == {"p0.head_fwd", "p0.ag_bwd.root"}
    assert _after(instance, "p0.b1.ag_bwd") == {"p0.ag_bwd.root", "p0.head_fwd"}
    assert _after(instance, "p0.b0.ag_bwd") == {"p0.b1.ag_bwd", "p0.head_fwd"}
    assert _after(instance, "p0.b1.rs") == {"p0.b1.attn_bwd"}
    assert _after(instance, "p0.rs.root") == {"p0.head_bwd", "p0.b0.ar_attn_bwd"}


def test_a_third_block_waits_for_the_first_to_compute() -> None:
    three = LlmConfig("toy3", 3, 8, 2, 1, 16, 32, 4, True)
    instance = llm_task_graph(three, NET, Layout(tp=2, dp=4, data_parallel="fsdp"))
    assert _after(instance, "p0.b2.ag_fwd") == {"p0.b1.ag_fwd", "p0.b0.mlp_fwd"}
    assert _after(instance, "p0.b0.ag_bwd") == {"p0.b1.ag_bwd", "p0.head_fwd", "p0.b2.attn_bwd"}


def test_the_metadata_records_the_model_and_layout() -> None:
    meta = dict(llm_task_graph(TOY_MOE, NET, Layout(tp=2, ep=2, dp=2, data_parallel="fsdp")).metadata)
    assert meta["model"] == "toy-moe" and meta["parameters"] == str(parameter_count(TOY_MOE))
    assert meta["layout"] == "tp 2 x ep 2 x dp 2, fsdp"
    assert (meta["tp_dims"], meta["ep_dims"], meta["dp_dims"]) == ("0", "1", "2")


@pytest.mark.parametrize("method", ["baseline", "themis", "balanced", "cpsat"])
def test_every_method_gives_a_valid_schedule(method: str) -> None:
    instance = llm_task_graph(TOY_MOE, NET, Layout(tp=2, ep=2, dp=2, data_parallel="fsdp"))
    result = solve(instance, method, time_limit=1.5, workers=1)
    assert result.schedule is not None and validate(instance, result.schedule) == []


@pytest.mark.parametrize(
    ("layout", "config", "message"),
    [
        (Layout(tp=2, dp=2), TOY, "tp x ep x dp: 2 x 1 x 2 = 4, but the network has 8 NPUs"),
        (Layout(tp=3, dp=1), TOY, "tp x ep x dp"),
        (Layout(tp=2, ep=2, dp=2), TOY, "ep: toy has no experts"),
        (Layout(tp=1, ep=8, dp=1), TOY_MOE, "ep: toy-moe has 2 experts"),
        (Layout(tp=4, dp=2), TOY, "tp: toy's 2 attention heads do not divide over 4 tensor ranks"),
        (Layout(tp=2, dp=1, pp=4), TOY, "pp: toy has 2 blocks: 4 stages would leave some empty"),
        (Layout(tp=2, dp=4, batch=10**6, sequence=10**7), TOY, "batch: 1000000 x 10000000 tokens make compute"),
    ],
)
def test_bad_layouts_name_the_group(layout: Layout, config: LlmConfig, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        llm_task_graph(config, NET, layout)


def test_a_group_that_needs_part_of_a_dimension_splits_it() -> None:
    net = Network((Dimension(4, "ring", 400.0, 500.0), Dimension(2, "switch", 100.0, 500.0)))
    instance = llm_task_graph(TOY, net, Layout(tp=2, dp=4))
    a, b, outer = instance.network.dimensions
    # the ring's first two NPUs for the tensor ranks, the part across them (two apart) for the data
    assert [(d.size, d.physical_size, d.stride) for d in (a, b, outer)] == [(2, 4, 1), (2, 4, 2), (2, 2, 1)]
    meta = dict(instance.metadata)
    assert (meta["tp_dims"], meta["dp_dims"]) == ("0", "1,2")
    assert meta["splits"] == "dimension 0 (d0, 4) split as 2 x 2 for the tp group"
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    odd = Network((Dimension(3, "switch", 400.0, 500.0, "ring"), Dimension(2, "switch", 100.0, 500.0)))
    with pytest.raises(InputError, match=r"^tp: a group of 2 NPUs is not a product of whole consecutive"):
        llm_task_graph(TOY, odd, Layout(tp=2, dp=3))


def test_the_stages_go_after_the_inner_groups_and_split_the_rail() -> None:
    # Llama 3's order: tensor, context, pipeline, data outermost; 4 stages on a rail of 8 split 4 x 2
    rail = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((2, 400.0), (8, 100.0), (2, 25.0))))
    instance = llm_task_graph(LlmConfig("toy4", 4, 8, 2, 1, 16, 32, 4, True), rail, Layout(tp=2, dp=4, pp=4))
    meta = dict(instance.metadata)
    assert (meta["tp_dims"], meta["stage_dims"], meta["dp_dims"]) == ("0", "1", "2,3")
    assert meta["splits"] == "dimension 1 (d1, 8) split as 4 x 2 for the pipeline stages"
    assert instance.stage_npus == (0, 2, 4, 6)
    six = Network(tuple(Dimension(n, "switch", 100.0, 500.0, "ring") for n in (2, 6, 2)))
    with pytest.raises(InputError, match=r"^pp: 4 stages do not fit the dimensions of 2x6x2 after the tensor-"):
        llm_task_graph(LlmConfig("toy4", 4, 8, 2, 1, 16, 32, 4, True), six, Layout(tp=2, dp=3, pp=4))


def test_a_part_of_a_dimension_splits_again_for_the_next_group() -> None:
    # tp 2 takes half the first dimension, ep 4 the other half and 2 of the rail; the stages then
    # take 4 of the rail's other part (8 NPUs, 2 apart), which is split again: 16 = 2 x 4 x 2
    rail = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((4, 400.0), (16, 100.0), (2, 25.0))))
    moe = LlmConfig("toy-moe4", 4, 8, 2, 1, 16, 32, 4, True, experts=4, top_k=1)
    instance = llm_task_graph(moe, rail, Layout(tp=2, ep=4, dp=4, pp=4))
    dims = instance.network.dimensions
    assert [(d.size, d.physical_size, d.stride) for d in dims] == [
        (2, 4, 1), (2, 4, 2), (2, 16, 1), (4, 16, 2), (2, 16, 8), (2, 2, 1)
    ]  # fmt: skip
    assert [d.name for d in dims] == ["d0a", "d0b", "d1a", "d1ba", "d1bb", "d2"]
    meta = dict(instance.metadata)
    assert (meta["tp_dims"], meta["ep_dims"], meta["stage_dims"], meta["dp_dims"]) == ("0", "1,2", "3", "4,5")
    assert instance.stage_npus == (0, 8, 16, 24)
    result = solve(instance, "themis")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    with pytest.raises(InputError, match=r"^dimension 3: cannot be split: 3 does not divide its 4 NPUs"):
        instance.network.split(3, 3)


def test_the_workload_command_lays_out_an_llm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    network = str(DATA / "tiny_3d.json")  # 2 x 4 x 2
    argv = ["workload", "mixtral-8x7b", "--network", network, "--tp", "2", "--ep", "4", "--seq", "64"]
    assert main([*argv, "--data-parallel", "fsdp", "--chunks", "2", "--out", str(out)]) == 0
    meta = dict(load_instance(out).metadata)
    assert meta["layout"] == "tp 2 x ep 4 x dp 2, fsdp" and meta["parameters"] == str(PUBLISHED["mixtral-8x7b"])
    assert meta["sequence"] == "64" and "46,702,792,704 parameters" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["llama3-8b", "--tp", "3"], "--tp x --ep x --dp: 3 x 1 x 5 = 15, but the network has 16 NPUs"),
        (["llama3-8b", "--model-parallel", "2"], "--model-parallel: is not for the LLMs (llama3-8b)"),
        (["resnet50", "--tp", "2"], "--tp: is for the LLMs"),
        (["resnet50", "--data-parallel", "fsdp"], "--data-parallel: is for the LLMs"),
        (["llama3-8b", "--mfu", "1.5"], "--efficiency"),
        (["llama3-8b", "--sp"], "--sp: shards the tensor-parallel group's activations: needs tp > 1"),
        (["resnet50", "--sp"], "--sp: is for the LLMs"),
        (["resnet50", "--cp", "2"], "--cp: is for the LLMs"),
        (["llama3-8b", "--cp", "3"], "--tp x --cp x --ep x --dp: 1 x 3 x 1 x 5 = 15, but the network has 16 NPUs"),
        (["llama3-8b", "--fsdp-gathers", "once", "--data-parallel", "fsdp"], "--fsdp-gathers: is for --data-parallel"),
        (["llama3-8b", "--cp-attention", "ring"], "--cp-attention: passes the keys and values round the context"),
        (["resnet50", "--cp-attention", "ring"], "--cp-attention: is for the LLMs"),
        (["llama3-8b", "--fsdp-gathers", "microbatch", "--pp", "2"], "--fsdp-gathers: is for --data-parallel fsdp"),
    ],
)
def test_the_workload_command_refuses_what_does_not_apply(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["workload", *options, "--network", str(DATA / "tiny_3d.json"), "--out", str(tmp_path / "o.json")]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


def test_the_1f1b_schedule_warms_up_alternates_and_cools_down() -> None:
    from themis_opt.workloads.llm import one_f_one_b

    assert one_f_one_b(3, 0, 4) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1), ("B", 2), ("B", 3)]
    assert one_f_one_b(3, 2, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]
    assert one_f_one_b(4, 0, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]  # fewer microbatches than warm-up


def test_context_parallel_ranks_gather_the_keys_and_values_and_share_the_compute() -> None:
    one = llm_task_graph(TOY, NET, Layout(tp=2, dp=4, batch=2))
    two = llm_task_graph(TOY, NET, Layout(tp=2, cp=2, dp=2, batch=2))
    meta = dict(two.metadata)
    assert meta["layout"] == "tp 2 x cp 2 x ep 1 x dp 2, ddp" and (meta["tp_dims"], meta["cp_dims"]) == ("0", "1")
    ids = {c.id: c for c in two.collectives}
    gather, scatter = ids["p0.b0.ag_kv_fwd"], ids["p0.b0.rs_dkv_bwd"]
    # the whole sequence's keys and values: 2 sequences x 4 tokens x (k, v) x one head of 4 x 2 bytes
    assert (gather.kind, gather.size_bytes, gather.dimensions) == (Kind.ALL_GATHER, 2 * 4 * 2 * 4 * 2, (1,))
    assert (scatter.kind, scatter.size_bytes) == (Kind.REDUCE_SCATTER, gather.size_bytes)
    assert _after(two, "p0.b0.attn_fwd") == {"p0.b0.ag_kv_fwd"} and _after(two, "p0.b0.ag_kv_fwd") == {"p0.b0.qkv_fwd"}
    assert _after(two, "p0.b0.qkv_bwd") == {"p0.b0.rs_dkv_bwd"}
    assert "p0.b1.ag_kv_bwd" in _after(two, "p0.b1.attn_bwd")  # gathered again while the MLP's backward runs
    # each rank computes its half of every sequence against the whole sequence's keys: half the work
    took = {t.id: t.duration_ns for t in two.computes}
    whole = {t.id: t.duration_ns for t in one.computes}
    assert took["p0.b0.qkv_fwd"] + took["p0.b0.attn_fwd"] == pytest.approx(whole["p0.b0.attn_fwd"] / 2)
    assert took["p0.b0.mlp_fwd"] == pytest.approx(whole["p0.b0.mlp_fwd"] / 2)
    # the context-parallel ranks hold the same parameters: their gradients are reduced over cp and dp
    assert {c.dimensions for c in two.collectives if "bucket" in c.id} == {(1, 2)}
    result = solve(two, "themis")
    assert result.schedule is not None and validate(two, result.schedule) == []
    with pytest.raises(InputError, match="cp: 4 tokens a sequence do not divide over 8 context ranks"):
        llm_task_graph(TOY, NET, Layout(cp=8))


def test_ring_attention_passes_each_block_round_while_the_attention_on_it_runs() -> None:
    net = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((2, 400.0), (4, 100.0), (2, 25.0))))
    gathered = llm_task_graph(TOY, net, Layout(tp=2, cp=4, dp=2, batch=2, sequence=1024))
    ring = llm_task_graph(TOY, net, Layout(tp=2, cp=4, dp=2, batch=2, sequence=1024, cp_attention="ring"))
    assert dict(ring.metadata)["layout"] == "tp 2 x cp 4 (ring attention) x ep 1 x dp 2, ddp"
    whole = next(c for c in gathered.collectives if c.id == "p0.b0.ag_kv_fwd").size_bytes
    ids = {c.id: c for c in ring.collectives}
    assert not any("ag_kv" in i or "rs_dkv" in i for i in ids)
    # a rank's block, a quarter of the sequence's keys and values, to the next rank: 2 NPUs on, in dimension 1
    forward = [c for i, c in ids.items() if i.startswith("p0.b0.ring_kv_fwd.")]
    assert len(forward) == 3 and all(c.kind is Kind.SEND for c in forward)
    assert {(c.size_bytes, c.group) for c in forward} == {(whole // 4, (0, 2))}
    # each step waits for the step before and its block, which goes on to the next rank meanwhile
    assert _after(ring, "p0.b0.attn_fwd.0") == {"p0.b0.qkv_fwd"}
    assert _after(ring, "p0.b0.attn_fwd.2") == {"p0.b0.attn_fwd.1", "p0.b0.ring_kv_fwd.1"}
    assert _after(ring, "p0.b0.ring_kv_fwd.2") == {"p0.b0.ring_kv_fwd.1"}
    assert _after(ring, "p0.b0.ar_attn_fwd") == {"p0.b0.attn_fwd.3"}
    # backward: the blocks round again (3 messages), each block's gradients' sum after it (4: the last home)
    assert sum(i.startswith("p0.b0.ring_kv_bwd.") for i in ids) == 3
    assert sum(i.startswith("p0.b0.ring_dkv_bwd.") for i in ids) == 4
    assert _after(ring, "p0.b0.attn_bwd.1") == {"p0.b0.attn_bwd.0", "p0.b0.ring_kv_bwd.0", "p0.b0.ring_dkv_bwd.0"}
    assert _after(ring, "p0.b0.qkv_bwd") == {"p0.b0.ring_dkv_bwd.3"}
    # the same compute as the gathered form's, cut in four
    took = {t.id: t.duration_ns for t in ring.computes}
    other = {t.id: t.duration_ns for t in gathered.computes}
    assert sum(took[f"p0.b0.attn_fwd.{i}"] for i in range(4)) == pytest.approx(other["p0.b0.attn_fwd"])
    assert sum(took[f"p0.b0.attn_bwd.{i}"] for i in range(4)) == pytest.approx(other["p0.b0.attn_bwd"])
    for instance in (gathered, ring):
        result = solve(instance, "themis")
        assert result.schedule is not None and validate(instance, result.schedule) == []
    with pytest.raises(InputError, match=r"^cp_attention: passes the keys and values round .*: needs cp > 1"):
        Layout(cp_attention="ring")
    # one ring round one dimension: a group over two (2 of dimension 0, 2 of 1) is refused
    with pytest.raises(
        InputError, match=r"^cp_attention: ring passes the blocks round one dimension: .* takes 2 \(0, 1\)"
    ):
        llm_task_graph(TOY, net, Layout(cp=4, dp=4, batch=2, sequence=1024, cp_attention="ring"))


def test_the_interleaved_1f1b_schedule_is_megatrons() -> None:
    from themis_opt.workloads.llm import pipeline_order

    # 2 stages x 2 chunks, 4 microbatches: stage 0 warms up with 2 (2 - 0 - 1) + (2 - 1) 2 = 4 forwards,
    # two microbatches through chunk 0, then chunk 1; its backwards start from the last chunk
    assert pipeline_order(2, 0, 4, 2) == [
        ("F", 0, 0), ("F", 0, 1), ("F", 1, 0), ("F", 1, 1), ("F", 0, 2), ("B", 1, 0), ("F", 0, 3), ("B", 1, 1),
        ("F", 1, 2), ("B", 0, 0), ("F", 1, 3), ("B", 0, 1), ("B", 1, 2), ("B", 1, 3), ("B", 0, 2), ("B", 0, 3),
    ]  # fmt: skip
    for stage in range(4):
        ops = pipeline_order(4, stage, 8, 3)
        assert sorted(ops) == sorted((op, v, m) for op in "FB" for v in range(3) for m in range(8))
    assert pipeline_order(3, 1, 4) == [("F", 0, 0), ("F", 0, 1), ("B", 0, 0), ("F", 0, 2), ("B", 0, 1),
                                       ("F", 0, 3), ("B", 0, 2), ("B", 0, 3)]  # fmt: skip


def test_interleaved_stages_hold_chunks_in_turn_and_shrink_the_bubble() -> None:
    four = LlmConfig("toy4", 4, 8, 2, 1, 16, 32, 4, True)  # four blocks: two chunks of one on each of two stages
    makespans = {}
    for virtual in (1, 2):
        layout = Layout(tp=2, dp=2, pp=2, microbatches=4, virtual_stages=virtual, batch=64)
        instance = llm_task_graph(four, NET, layout)
        result = solve(instance, "themis")
        assert result.schedule is not None and validate(instance, result.schedule) == []
        makespans[virtual] = result.makespan
    # chunk 1 of stage 0 holds block 2 and waits for chunk 0 of stage 1 (block 1); the last stage sends
    # its chunk 0's output back to stage 0
    assert {t.stage for t in instance.tasks if ".b2." in t.id} == {0} and {
        t.stage for t in instance.tasks if ".b1." in t.id
    } == {1}
    assert "p0.s1.v0.m0.send_fwd" in _after(instance, "p0.s0.v1.m0.b2.attn_fwd")
    assert "p0.s0.v1.m0.send_bwd" in _after(instance, "p0.s1.v0.m0.b1.mlp_bwd")
    assert dict(instance.metadata)["virtual_stages"] == "2"
    assert makespans[2] < makespans[1]
    with pytest.raises(InputError, match="virtual_stages: interleaves the microbatches"):
        Layout(pp=2, microbatches=3, virtual_stages=2)
    with pytest.raises(InputError, match="pp: toy has 2 blocks: 2 stages x 2 chunks would leave some empty"):
        llm_task_graph(TOY, NET, Layout(tp=2, dp=2, pp=2, microbatches=2, virtual_stages=2))


def test_pipeline_stages_follow_the_tensor_group_and_send_activations() -> None:
    # 8 NPUs: tp on dimension 0, the two stages on 1 (NPUs 0 and 2), dp on 2; toy's two blocks, one a stage
    layout = Layout(tp=2, dp=2, pp=2, microbatches=3)
    instance = llm_task_graph(TOY, NET, layout)
    assert instance.stage_npus == (0, 2) and instance.num_stages == 2
    sends = [c for c in instance.collectives if c.kind is Kind.SEND]
    assert len(sends) == 2 * 3  # one activation forward and one gradient back a microbatch
    assert {(c.stage, c.group) for c in sends} == {(0, (0, 2)), (1, (2, 0))}
    assert all(
        c.size_bytes == 1 * 4 * 8 * 2 and instance.active_dims[instance.collectives.index(c)] == (1,) for c in sends
    )
    assert {t.stage for t in instance.tasks if ".b0." in t.id} == {0} and {
        t.stage for t in instance.tasks if ".b1." in t.id
    } == {1}
    assert _after(instance, "p0.s1.m1.b1.attn_fwd") == {"p0.s0.m1.send_fwd", "p0.s1.m0.b1.ar_attn_bwd"}
    assert _after(instance, "p0.s0.m0.b0.mlp_bwd") == {"p0.s0.m1.b0.ar_mlp_fwd", "p0.s1.m0.send_bwd"}
    buckets = [c for c in instance.collectives if "bucket" in c.id]
    assert [(c.id, c.stage, c.dimensions) for c in buckets] == [
        ("p0.s0.ar_bucket0", 0, (2,)),
        ("p0.s1.ar_bucket0", 1, (2,)),
    ]
    meta = dict(instance.metadata)
    assert meta["layout"] == "tp 2 x ep 1 x dp 2 x pp 2, ddp" and (meta["pp"], meta["stage_dims"]) == ("2", "1")
    assert llm_task_graph(TOY, NET, Layout(tp=2, dp=2, pp=2, stage_dims=(0,))).stage_npus == (0, 1)


@pytest.mark.parametrize("method", ["baseline", "themis", "balanced", "cpsat"])
def test_every_method_gives_a_valid_schedule_on_pipeline_stages(method: str) -> None:
    instance = llm_task_graph(TOY, NET, Layout(tp=2, dp=2, pp=2, microbatches=2, passes=2))
    result = solve(instance, method, time_limit=3, workers=1)
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.lower_bound <= result.makespan  # type: ignore[operator]


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (Layout(tp=2, dp=2, pp=4), "tp x ep x dp x pp: 2 x 1 x 2 x 4 = 16, but the network has 8 NPUs"),
        (Layout(tp=2, dp=2, pp=2, stage_dims=(0, 1)), "stage_dims: dimensions [0, 1] of 2x2x2 hold 4 NPUs, not pp 2"),
        (Layout(tp=2, dp=2, pp=2, stage_dims=(5,)), "stage_dims: names dimension 5, but the network has 3"),
    ],
)
def test_bad_pipelines_are_refused(layout: Layout, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        llm_task_graph(TOY, NET, layout)
    with pytest.raises(InputError, match="fsdp_gathers: is for fsdp with pipeline stages or microbatches"):
        Layout(pp=2, fsdp_gathers="microbatch")


def test_fsdp_on_pipeline_stages_gathers_once_and_reduces_after_the_last_microbatch() -> None:
    # toy's two blocks one a stage; the stages' data-parallel group is dimension 2 (tp 0, stages 1)
    instance = llm_task_graph(TOY, NET, Layout(tp=2, dp=2, pp=2, microbatches=3, data_parallel="fsdp"))
    ids = {c.id: c for c in instance.collectives}
    gathers = sorted(i for i in ids if ".ag_" in i)
    assert gathers == ["p0.s0.m0.ag_fwd.b0", "p0.s0.m0.ag_fwd.root", "p0.s1.m0.ag_fwd.b1", "p0.s1.m0.ag_fwd.root"]
    assert sorted(i for i in ids if ".rs." in i) == [
        "p0.s0.m2.rs.b0", "p0.s0.m2.rs.root", "p0.s1.m2.rs.b1", "p0.s1.m2.rs.root",
    ]  # fmt: skip
    assert {(ids[i].stage, ids[i].dimensions) for i in gathers} == {(0, (2,)), (1, (2,))}
    # block 0 holds 192 + 384 + 16 parameters, a tensor rank half of the matrices' 576 and both norms
    assert ids["p0.s0.m0.ag_fwd.b0"].size_bytes == (576 // 2 + 16) * 2
    assert _after(instance, "p0.s0.m0.b0.attn_fwd") == {"p0.s0.m0.ag_fwd.b0", "p0.s0.m0.ag_fwd.root"}
    assert _after(instance, "p0.s1.m2.rs.b1") == {"p0.s1.m2.b1.attn_bwd"}
    assert not any("bucket" in i for i in ids)
    assert dict(instance.metadata)["layout"] == "tp 2 x ep 1 x dp 2 x pp 2, fsdp (gathered once a pass)"


def test_fsdp_gathered_every_microbatch_moves_more() -> None:
    layouts = {
        g: Layout(tp=2, dp=2, pp=2, microbatches=3, data_parallel="fsdp", fsdp_gathers=g)
        for g in ("once", "microbatch")
    }
    once, each = (llm_task_graph(TOY, NET, layouts[g]) for g in ("once", "microbatch"))
    ids = {c.id for c in each.collectives}
    # every microbatch: gathered before each forward and backward, reduced after each backward
    assert sum(".ag_" in i for i in ids) == 2 * 2 * 3 * 2 and sum(".rs." in i for i in ids) == 2 * 3 * 2
    assert _after(each, "p0.s1.m1.ag_bwd.b1") == {"p0.s1.m1.ag_bwd.root"}
    # an op's gathers begin when the op before it begins: stage 1 runs F0 B0 F1 B1 F2 B2, and B0 begins
    # once F0 has ended (its output layer's forward)
    assert _after(each, "p0.s1.m1.ag_fwd.root") == {"p0.s1.m0.head_fwd"}
    for instance in (once, each):
        result = solve(instance, "themis")
        assert result.schedule is not None and validate(instance, result.schedule) == []
    assert solve(each, "baseline").makespan > solve(once, "baseline").makespan


def test_the_workload_command_lays_out_pipeline_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    network = str(DATA / "tiny_3d.json")  # 2 x 4 x 2
    argv = ["workload", "llama3-8b", "--network", network, "--tp", "2", "--pp", "2", "--microbatches", "2"]
    assert main([*argv, "--seq", "64", "--stage-dims", "2", "--out", str(out)]) == 0
    instance = load_instance(out)
    assert instance.stage_npus == (0, 8) and dict(instance.metadata)["layout"] == "tp 2 x ep 1 x dp 4 x pp 2, ddp"
    assert "tp 2 x ep 1 x dp 4 x pp" in capsys.readouterr().out
    assert main([*argv[:-4], "--pp", "3", "--out", str(out)]) == 2
    assert "--tp x --ep x --dp x --pp: 2 x 1 x 2 x 3 = 12" in capsys.readouterr().err


@pytest.mark.parametrize("pp", [1, 2])
def test_sequence_parallelism_splits_each_tensor_parallel_all_reduce(pp: int) -> None:
    plain = llm_task_graph(TOY, NET, Layout(tp=2, dp=4 // pp, pp=pp, batch=3))
    sp = llm_task_graph(TOY, NET, Layout(tp=2, dp=4 // pp, pp=pp, batch=3, sequence_parallel=True))
    by_id = {c.id: c for c in sp.collectives}
    ars = [c for c in plain.collectives if ".ar_attn_" in c.id or ".ar_mlp_" in c.id]
    assert len(ars) == 4 * TOY.layers  # two forward, two backward a block (one microbatch)
    for ar in ars:
        rs, ag = by_id[ar.id.replace(".ar_", ".rs_")], by_id[ar.id.replace(".ar_", ".ag_")]
        assert (rs.kind, ag.kind) == (Kind.REDUCE_SCATTER, Kind.ALL_GATHER)
        assert rs.size_bytes == ag.size_bytes == ar.size_bytes and rs.dimensions == ag.dimensions == ar.dimensions
        assert [a.task for a in ag.after] == [rs.id] and rs.after == ar.after  # the all-gather follows
    assert not any(".ar_attn_" in c.id or ".ar_mlp_" in c.id for c in sp.collectives)
    assert "sequence parallel" in dict(sp.metadata)["layout"]
    for method in ("baseline", "themis"):
        assert validate(sp, solve(sp, method).schedule) == []  # type: ignore[arg-type]


def test_sequence_parallelism_needs_a_tensor_parallel_group() -> None:
    with pytest.raises(InputError, match=r"sequence_parallel: .* needs tp > 1"):
        Layout(dp=8, sequence_parallel=True)


def test_the_network_may_come_from_a_file_that_holds_only_a_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from themis_opt.formats.native import instance_to_dict

    document = instance_to_dict(Instance(NET, (Collective("all_reduce", 2**20, 64),), "net"))
    del document["tasks"]
    alone, empty, first = tmp_path / "alone.json", tmp_path / "empty.json", tmp_path / "first.json"
    alone.write_text(json.dumps(document))
    empty.write_text(json.dumps({**document, "tasks": []}))
    first.write_text(json.dumps({"format": document["format"], "version": 1, "network": document["network"]}))
    made = []
    for network in (alone, empty, first):  # the first format's file without collectives too
        out = tmp_path / f"{network.stem}-it.json"
        assert main(["workload", "llama3-8b", "--network", str(network), "--tp", "2", "--out", str(out)]) == 0
        made.append(load_instance(out))
    assert made[0].tasks == made[1].tasks == made[2].tasks and made[0].network == NET
    assert {c.chunks for c in made[0].collectives if c.size_bytes >= 4} == {4}  # the layouts' default, not 64
    broken = {**document, "network": {**document["network"], "dimensions": []}}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    argv = ["workload", "llama3-8b", "--network", str(tmp_path / "broken.json"), "--out", str(tmp_path / "x")]
    assert main(argv) == 2
    assert "broken.json: network" in capsys.readouterr().err
    (tmp_path / "wrong.json").write_text(json.dumps({**document, "tasks": 0}))  # not a list: not "no tasks"
    argv = ["workload", "llama3-8b", "--network", str(tmp_path / "wrong.json"), "--out", str(tmp_path / "x")]
    assert main(argv) == 2
    assert "wrong.json: tasks" in capsys.readouterr().err


def test_a_layout_of_too_many_tasks_stops_at_the_limit_before_building_them_all() -> None:
    # 50,000 microbatches x 100 passes would be tens of millions of tasks: building stops at the limit
    with pytest.raises(InputError, match="tasks: must hold at most 131072 tasks: this iteration makes 40,000,000"):
        llm_task_graph(TOY, NET, Layout(tp=2, dp=2, pp=2, microbatches=50_000, passes=100))
    # past the estimate, a graph stops as it is built
    from themis_opt.workloads.graph import TaskGraph

    graph = TaskGraph()
    with pytest.raises(InputError, match="tasks: must hold at most 131072 tasks: this iteration makes more"):
        for i in range(200_000):
            graph.compute(f"c{i}", 1.0, [])
    assert len(graph.tasks) == 131_072
