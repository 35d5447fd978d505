"""Large language models as they are trained now: tensor, expert and data parallelism on a network.

:data:`LLMS` holds five published configurations; :func:`parameter_count`
counts their parameters from the shapes. :func:`llm_task_graph` lays one out
on a network and writes one training iteration (or several) as a task graph:

* the **tensor-parallel** group (``tp`` NPUs) takes the innermost dimensions,
  the **expert-parallel** group (``ep``) the next ones and **data
  parallelism** (``dp``) the rest; each group must be a product of whole
  consecutive dimensions (else :class:`~themis_opt.errors.InputError` naming
  it);
* tensor parallelism (Megatron): a block's parameters and compute are divided
  by ``tp``; per block two all-reduces in the forward pass (after attention,
  after the MLP) and two in the backward, of batch x sequence x hidden x
  bytes, over the tensor-parallel dimensions, each blocking the next
  compute; embeddings, the output layer and the norms are replicated;
* expert parallelism (mixture-of-experts blocks): the experts are divided by
  ``ep``; per block two all-to-alls in the forward pass (dispatch, combine)
  and two in the backward, of batch x sequence x hidden x top-k x bytes,
  over the expert-parallel dimensions;
* a parameter's data-parallel group is every NPU holding the same copy of
  it: the data-parallel dimensions for expert parameters, the expert- and
  data-parallel dimensions together for the others;
* ``ddp`` (PyTorch DistributedDataParallel): weight gradients in buckets of
  25 MiB in the order the backward pass makes them (a tensor larger than
  that is a bucket of its own; expert and other parameters in buckets of
  their own, one per group), each bucket's all-reduce issued when its last
  gradient is computed;
* ``fsdp`` (FullyShardedDataParallel, ZeRO-3): one unit per block and one
  for the embeddings, output layer and final norm; each unit all-gathered
  before its forward and before its backward, and reduce-scattered after its
  backward, with one unit of prefetch either way;
* compute from the shapes: 2 FLOPs a multiply-add, attention scores included
  (4 x tokens x sequence x hidden a block), the backward twice the forward;
  time = FLOPs / (peak x MFU).

The next pass starts when the last one's gradients are all reduced (its
optimizer step).

**Pipeline parallelism** (``pp`` stages, ``microbatches`` of ``batch``
sequences each): the stages take the outermost dimensions (or
``stage_dims``), the other groups the rest, innermost first; the blocks are
shared out in order (the first stages take one more where they do not
divide), the embeddings go with the first stage, the final norm and the
output layer with the last. Each stage is a pipeline stage of the instance
(its NPU: coordinate 0 outside the stage dimensions) and runs the 1F1B
schedule: ``pp - s - 1`` warm-up forwards (at most ``microbatches``), then
one forward and one backward in turn, then the cool-down backwards, each
after the one before; a microbatch's activations go to the next stage and
its activation gradients to the stage before as sends of batch x sequence x
hidden x bytes, each forward waiting for its activations and each backward
for its gradients. A stage all-reduces its gradients in DDP buckets as the
last microbatch's backward makes them. FSDP with pipeline stages or
microbatches is not modelled; a tied output layer's gradients are not
exchanged between the first and last stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from themis_opt.errors import InputError
from themis_opt.instance import Instance, Kind, Network
from themis_opt.workloads.graph import TaskGraph

MIB = 2**20
BUCKET_BYTES = 25 * MIB  # PyTorch DDP's default bucket_cap_mb


@dataclass(frozen=True)
class LlmConfig:
    """A decoder-only transformer's published shape.

    Parameters
    ----------
    name
        The zoo name.
    layers, hidden, heads, kv_heads, ffn, vocab
        Blocks, model width, attention heads, key-value heads (grouped-query
        attention), MLP width, vocabulary.
    sequence
        The training sequence length (the default ``--seq``).
    gated
        A SwiGLU MLP (three matrices) with RMSNorm and no biases (Llama,
        Mixtral); else a GELU MLP (two matrices) with biases and LayerNorm (GPT-3).
    learned_positions
        Learned position embeddings (``sequence`` x ``hidden``).
    tied_output
        The output layer shares the token embedding.
    experts, top_k
        A mixture-of-experts MLP in every block: ``experts`` MLPs, each token
        routed to ``top_k`` of them.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    sequence: int
    gated: bool
    learned_positions: bool = False
    tied_output: bool = False
    experts: int = 1
    top_k: int = 1

    @property
    def moe(self) -> bool:
        """Whether the MLPs are mixtures of experts."""
        return self.experts > 1


LLMS: dict[str, LlmConfig] = {
    c.name: c
    for c in (
        LlmConfig("gpt3-175b", 96, 12288, 96, 96, 4 * 12288, 50257, 2048, False, True, True),
        LlmConfig("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, True),
        LlmConfig("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, True),
        LlmConfig("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, True),
        LlmConfig("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, True, experts=8, top_k=2),
    )
}


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor: its name, size, which part of a block holds it, how it is sharded.

    ``split``: divided by the tensor-parallel group (a block's matrices and
    biases; not the norms, embeddings or output layer); ``expert``: one of the
    experts' (also divided by the expert-parallel group).
    """

    name: str
    parameters: int
    split: bool = True
    expert: bool = False
    macs: int = 0  # multiply-adds a token (a matrix's rows x columns; 0 for a norm or an embedding)


def block_tensors(config: LlmConfig) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """One block's tensors: (attention part, MLP part), each in the order the forward pass uses them."""
    h, f = config.hidden, config.ffn
    kv = config.kv_heads * (h // config.heads)
    bias = not config.gated
    norm = 2 * h if bias else h  # LayerNorm: weight and bias; RMSNorm: weight

    def matrix(name: str, rows: int, cols: int, expert: bool = False) -> Tensor:
        return Tensor(name, rows * cols + (cols if bias else 0), expert=expert, macs=rows * cols)

    attention = (
        Tensor("attn_norm", norm, split=False),
        matrix("q", h, h),
        matrix("k", h, kv),
        matrix("v", h, kv),
        matrix("o", h, h),
    )

    def mlp(prefix: str, expert: bool) -> list[Tensor]:
        if config.gated:
            return [
                matrix(f"{prefix}w1", h, f, expert),
                matrix(f"{prefix}w3", h, f, expert),
                matrix(f"{prefix}w2", f, h, expert),
            ]
        return [matrix(f"{prefix}fc1", h, f, expert), matrix(f"{prefix}fc2", f, h, expert)]

    mlp_part: list[Tensor] = [Tensor("mlp_norm", norm, split=False)]
    if config.moe:
        mlp_part.append(Tensor("router", h * config.experts, macs=h * config.experts))
        for e in range(config.experts):
            mlp_part += mlp(f"expert{e}.", True)
    else:
        mlp_part += mlp("", False)
    return attention, tuple(mlp_part)


def outer_tensors(config: LlmConfig) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """The tensors outside the blocks: (embeddings, head: final norm and untied output layer)."""
    h = config.hidden
    embeddings = [Tensor("embedding", config.vocab * h, split=False)]
    if config.learned_positions:
        embeddings.append(Tensor("positions", config.sequence * h, split=False))
    head = [Tensor("final_norm", h if config.gated else 2 * h, split=False)]
    if not config.tied_output:
        head.append(Tensor("output", config.vocab * h, split=False))
    return tuple(embeddings), tuple(head)


def parameter_count(config: LlmConfig) -> int:
    """Every parameter of the model, from its shapes."""
    attention, mlp = block_tensors(config)
    embeddings, head = outer_tensors(config)
    per_block = sum(t.parameters for t in attention + mlp)
    return config.layers * per_block + sum(t.parameters for t in embeddings + head)


@dataclass(frozen=True)
class Layout:
    """How a model is laid out and trained on a network.

    Parameters
    ----------
    tp, ep, dp
        The tensor-, expert- and data-parallel group sizes; their product is
        the network's NPUs.
    data_parallel
        ``ddp`` (gradient all-reduces in buckets) or ``fsdp`` (sharded: all-gathers and reduce-scatters).
    batch
        Sequences per data-parallel rank.
    sequence
        Tokens a sequence (``None``: the model's).
    bytes_per_element
        2 for bf16 or fp16, 4 for fp32.
    peak_tflops, mfu
        The NPU's peak rate and the share of it the compute reaches.
    passes
        Training iterations.
    chunks
        Chunks per collective.
    pp
        Pipeline stages.
    microbatches
        Microbatches of ``batch`` sequences a pass (1F1B with pipeline
        stages, gradient accumulation without).
    stage_dims
        The dimensions the pipeline stages take (``None``: the outermost
        whose sizes multiply to ``pp``).
    sequence_parallel
        Megatron's sequence parallelism: each tensor-parallel all-reduce of
        activations becomes a reduce-scatter to the sequence shards and the
        all-gather the next matrix product needs (the same bytes, two
        collectives each scheduled on its own).
    """

    tp: int = 1
    ep: int = 1
    dp: int = 1
    data_parallel: Literal["ddp", "fsdp"] = "ddp"
    batch: int = 1
    sequence: int | None = None
    bytes_per_element: int = 2
    peak_tflops: float = 989.0
    mfu: float = 0.4
    passes: int = 1
    chunks: int = 4
    pp: int = 1
    microbatches: int = 1
    stage_dims: tuple[int, ...] | None = None
    sequence_parallel: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "ep", "dp", "batch", "passes", "chunks", "pp", "microbatches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(name, f"must be an integer >= 1, got {value!r}")
        if self.sequence is not None and (not isinstance(self.sequence, int) or self.sequence < 1):
            raise InputError("sequence", f"must be an integer >= 1, got {self.sequence!r}")
        if self.data_parallel not in ("ddp", "fsdp"):
            raise InputError("data_parallel", f"must be ddp or fsdp, got {self.data_parallel!r}")
        if self.bytes_per_element not in (2, 4):
            raise InputError("bytes_per_element", f"must be 2 or 4 bytes an element, got {self.bytes_per_element!r}")
        if not (math.isfinite(self.peak_tflops) and self.peak_tflops > 0):
            raise InputError("peak_tflops", f"must be a number > 0, got {self.peak_tflops!r}")
        if not (math.isfinite(self.mfu) and 0 < self.mfu <= 1):
            raise InputError("mfu", f"must be in (0, 1], got {self.mfu!r}")
        if self.stage_dims is not None:
            if not isinstance(self.stage_dims, (tuple, list)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in self.stage_dims
            ):
                raise InputError("stage_dims", f"must be dimension indices, got {self.stage_dims!r}")
            if len(set(self.stage_dims)) != len(self.stage_dims):
                raise InputError("stage_dims", f"names a dimension twice: {list(self.stage_dims)}")
            object.__setattr__(self, "stage_dims", tuple(sorted(self.stage_dims)))
        if not isinstance(self.sequence_parallel, bool):
            raise InputError("sequence_parallel", f"must be true or false, got {self.sequence_parallel!r}")
        if self.sequence_parallel and self.tp == 1:
            raise InputError("sequence_parallel", "shards the tensor-parallel group's activations: needs tp > 1")
        if self.data_parallel == "fsdp" and (self.pp > 1 or self.microbatches > 1):
            raise InputError("data_parallel", "fsdp with pipeline stages or microbatches is not modelled: use ddp")

    @property
    def pipelined(self) -> bool:
        """Whether a pass runs microbatches (pipeline stages, or gradient accumulation)."""
        return self.pp > 1 or self.microbatches > 1

    def ns(self, flops: float) -> float:
        """Compute time of ``flops`` floating-point operations, ns (1 TFLOP/s is 1e3 FLOPs a ns)."""
        return flops / (self.peak_tflops * 1e3 * self.mfu)


def stage_dims(network: Network, layout: Layout) -> tuple[int, ...]:
    """The dimensions the pipeline stages take: ``layout.stage_dims``, or the outermost whose sizes
    multiply to ``pp`` (none for one stage).

    Raises
    ------
    InputError
        If they do not multiply to ``pp``, or name a dimension the network does not have.
    """
    sizes = [d.size for d in network.dimensions]
    shape = "x".join(map(str, sizes))
    if layout.stage_dims is not None:
        outside = [d for d in layout.stage_dims if d >= len(sizes)]
        if outside:
            raise InputError("stage_dims", f"names dimension {outside[0]}, but the network has {len(sizes)}")
        product = math.prod(sizes[d] for d in layout.stage_dims)
        if product != layout.pp:
            raise InputError(
                "stage_dims", f"dimensions {list(layout.stage_dims)} of {shape} hold {product} NPUs, not pp {layout.pp}"
            )
        return layout.stage_dims
    if layout.pp == 1:
        return ()
    dims: list[int] = []
    product = 1
    for d in reversed(range(len(sizes))):
        if product >= layout.pp:
            break
        product *= sizes[d]
        dims.append(d)
    if product != layout.pp:
        raise InputError(
            "pp",
            f"{layout.pp} stages are not a product of whole outermost dimensions of {shape} "
            "(give the stage dimensions)",
        )
    return tuple(sorted(dims))


def stage_npus(network: Network, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Per pipeline stage, its NPU: coordinate 0 outside ``dims``, the stage's index (innermost
    fastest) within them.
    """
    strides = [math.prod(d.size for d in network.dimensions[:k]) for k in range(network.num_dims)]
    npus = []
    for stage in range(math.prod(network.dimensions[d].size for d in dims)):
        npu = 0
        for d in dims:
            stage, at = divmod(stage, network.dimensions[d].size)
            npu += at * strides[d]
        npus.append(npu)
    return tuple(npus)


def group_dims(network: Network, layout: Layout) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The tensor-, expert- and data-parallel groups' dimensions, innermost first, among the dimensions
    the pipeline stages leave (:func:`stage_dims`).

    Raises
    ------
    InputError
        If the groups do not multiply to the network's NPUs, or one is not a
        product of whole consecutive dimensions.
    """
    sizes = [d.size for d in network.dimensions]
    total = layout.tp * layout.ep * layout.dp * layout.pp
    if total != math.prod(sizes):
        if layout.pp > 1:
            raise InputError(
                "tp x ep x dp x pp",
                f"{layout.tp} x {layout.ep} x {layout.dp} x {layout.pp} = {total}, "
                f"but the network has {math.prod(sizes)} NPUs",
            )
        raise InputError(
            "tp x ep x dp",
            f"{layout.tp} x {layout.ep} x {layout.dp} = {total}, but the network has {math.prod(sizes)} NPUs",
        )
    staged = stage_dims(network, layout)
    left = [d for d in range(len(sizes)) if d not in staged]
    groups: list[tuple[int, ...]] = []
    at = 0
    for name, size in (("tp", layout.tp), ("ep", layout.ep), ("dp", layout.dp)):
        dims: list[int] = []
        product = 1
        start = left[at] if at < len(left) else len(sizes)
        while product < size and at < len(left):
            product *= sizes[left[at]]
            dims.append(left[at])
            at += 1
        if product != size:
            raise InputError(
                name,
                f"a group of {size} NPUs is not a product of whole consecutive dimensions of "
                f"{'x'.join(map(str, sizes))} (from dimension {start})",
            )
        groups.append(tuple(dims))
    return groups[0], groups[1], groups[2]


@dataclass
class _Graph:
    """The LLM layouts' rules on top of the task graph: no collective without dimensions or bytes, at most
    a chunk per byte, no compute task shorter than a picosecond.
    """

    chunks: int
    sequence_parallel: bool = False
    graph: TaskGraph = field(default_factory=TaskGraph)

    stage: int = 0  # the pipeline stage the tasks being written run on

    def compute(self, name: str, ns: float, after: list[str]) -> str:
        return self.graph.compute(name, max(ns, 1e-3), after, stage=self.stage)

    def collective(self, name: str, kind: Kind, size: int, dims: tuple[int, ...], after: list[str]) -> str | None:
        """A collective over ``dims``; ``None`` (nothing to wait for) without dimensions or bytes."""
        if not dims or size < 1:
            return None
        return self.graph.collective(name, kind, size, min(self.chunks, size), dims, after, stage=self.stage)

    def tp_sync(self, at: str, what: str, size: int, dims: tuple[int, ...], after: list[str]) -> str | None:
        """The tensor-parallel group's sum of ``what``'s activations: ``{at}ar_{what}``, or with sequence
        parallelism ``{at}rs_{what}`` (to the sequence shards) then ``{at}ag_{what}`` (for the next product).
        """
        if not self.sequence_parallel:
            return self.collective(f"{at}ar_{what}", Kind.ALL_REDUCE, size, dims, after)
        scattered = self.collective(f"{at}rs_{what}", Kind.REDUCE_SCATTER, size, dims, after)
        return self.collective(f"{at}ag_{what}", Kind.ALL_GATHER, size, dims, [scattered] if scattered else after)


def _sharded(tensor: Tensor, layout: Layout) -> int:
    """Parameters of ``tensor`` one NPU holds."""
    parameters = tensor.parameters // layout.tp if tensor.split else tensor.parameters
    return parameters // layout.ep if tensor.expert else parameters


def llm_task_graph(config: LlmConfig, network: Network, layout: Layout, *, name: str | None = None) -> Instance:
    """One or more training iterations of ``config`` laid out as ``layout`` on ``network``.

    Parameters
    ----------
    config
        The model (one of :data:`LLMS`, or any shape).
    network
        The network; its dimensions are shared out by :func:`group_dims`.
    layout
        The parallel groups, data parallelism, batch, precision, compute rate,
        passes and chunks.
    name
        The instance's name (default ``MODEL-ddp`` or ``MODEL-fsdp``).

    Returns
    -------
    Instance
        A task graph (see the module's docstring for its tasks); its metadata
        records the model, its parameters, the layout and each group's dimensions.

    Raises
    ------
    InputError
        If the groups do not fit the network, or the experts do not divide over ``ep``.
    """
    tp_dims, ep_dims, dp_dims = group_dims(network, layout)
    if config.moe and config.experts % layout.ep:
        raise InputError("ep", f"{config.name} has {config.experts} experts: they do not divide over {layout.ep}")
    if not config.moe and layout.ep > 1:
        raise InputError("ep", f"{config.name} has no experts: ep must be 1")
    replica_dims = ep_dims + dp_dims  # the data-parallel group of parameters that are not experts'
    sequence = layout.sequence or config.sequence
    tokens = layout.batch * sequence
    h, e = config.hidden, layout.bytes_per_element
    attention, mlp = block_tensors(config)
    embeddings, head = outer_tensors(config)
    activations = tokens * h * e
    dispatch = activations * config.top_k

    def flops(tensors: tuple[Tensor, ...], routed: bool = False) -> float:
        """Forward FLOPs a NPU spends on the matrices of ``tensors``."""
        total = 0.0
        for t in tensors:  # a token meets top_k of the experts
            share = config.top_k / config.experts if (routed and t.expert) else 1.0
            total += 2.0 * tokens * t.macs * share / layout.tp
        return total

    attn_fwd = layout.ns(flops(attention) + 4.0 * tokens * sequence * h / layout.tp)
    mlp_fwd = layout.ns(flops(mlp, routed=True))
    head_fwd = layout.ns(2.0 * tokens * h * config.vocab)
    graph = _Graph(layout.chunks, layout.sequence_parallel)
    waits: list[str] = []  # what a pass waits for: the previous pass's gradients
    staged = stage_dims(network, layout)
    npus = stage_npus(network, staged)
    stage_waits: dict[int, list[str]] = {}
    for p in range(layout.passes):
        if layout.pipelined:
            stage_waits = _pipelined_pass(
                graph, f"p{p}.", config, layout, stage_waits, (tp_dims, ep_dims, dp_dims, replica_dims),
                (attn_fwd, mlp_fwd, head_fwd), (attention, mlp, embeddings, head), activations, dispatch, npus,
            )  # fmt: skip
            continue
        waits = _one_pass(
            graph, f"p{p}.", config, layout, waits, tp_dims, ep_dims, dp_dims, replica_dims,
            (attn_fwd, mlp_fwd, head_fwd), (attention, mlp, embeddings, head), activations, dispatch,
        )  # fmt: skip
    pipeline = (
        (("pp", str(layout.pp)), ("stage_dims", ",".join(map(str, staged))), ("microbatches", str(layout.microbatches)))
        if layout.pipelined
        else ()
    )
    metadata = (
        ("model", config.name),
        ("parameters", str(parameter_count(config))),
        (
            "layout",
            f"tp {layout.tp} x ep {layout.ep} x dp {layout.dp}"
            + (f" x pp {layout.pp}" if layout.pp > 1 else "")
            + (" (sequence parallel)" if layout.sequence_parallel else "")
            + f", {layout.data_parallel}",
        ),
        ("tp_dims", ",".join(map(str, tp_dims))),
        ("ep_dims", ",".join(map(str, ep_dims))),
        ("dp_dims", ",".join(map(str, dp_dims))),
        ("batch", str(layout.batch)),
        ("sequence", str(sequence)),
        ("passes", str(layout.passes)),
        *pipeline,
    )
    name = name or f"{config.name}-{layout.data_parallel}"
    return graph.graph.instance(network, name, metadata, npus if layout.pp > 1 else ())


def _one_pass(
    graph: _Graph,
    at: str,
    config: LlmConfig,
    layout: Layout,
    waits: list[str],
    tp_dims: tuple[int, ...],
    ep_dims: tuple[int, ...],
    dp_dims: tuple[int, ...],
    replica_dims: tuple[int, ...],
    times: tuple[float, float, float],
    parts: tuple[tuple[Tensor, ...], ...],
    activations: int,
    dispatch: int,
) -> list[str]:
    """One training iteration; returns what the next one waits for."""
    attn_fwd, mlp_fwd, head_fwd = times
    attention, mlp, embeddings, head = parts
    e = layout.bytes_per_element
    fsdp = layout.data_parallel == "fsdp"
    block_units = attention + mlp

    def by_group(tensors: tuple[Tensor, ...]) -> list[tuple[str, tuple[int, ...], int]]:
        """The bytes one NPU holds of ``tensors``, per data-parallel group: (suffix, dims, bytes)."""
        expert = sum(_sharded(t, layout) for t in tensors if t.expert) * e
        other = sum(_sharded(t, layout) for t in tensors if not t.expert) * e
        return [(s, d, b) for s, d, b in (("", replica_dims, other), (".experts", dp_dims, expert)) if b]

    def unit_collectives(kind: Kind, unit: str, tensors: tuple[Tensor, ...], after: list[str]) -> list[str]:
        found = []
        for suffix, dims, size in by_group(tensors):
            made = graph.collective(f"{unit}{suffix}", kind, size, dims, after)
            if made:
                found.append(made)
        return found

    def chain(done: list[str], name: str | None) -> list[str]:
        return [name] if name else done

    layers = config.layers
    gathered_fwd: dict[int, list[str]] = {}  # FSDP: unit -> its forward all-gathers (root: -1)
    fwd_done: dict[int, str] = {}  # unit -> its last forward compute
    if fsdp:
        gathered_fwd[-1] = unit_collectives(Kind.ALL_GATHER, f"{at}ag_fwd.root", embeddings + head, waits)
    # ---------------------------------------------------------------- forward
    last = list(waits)
    for i in range(layers):
        b = f"{at}b{i}."
        needs = list(last)
        if fsdp:  # one unit of prefetch: gathered while the unit before computes, once the one before that is done
            ahead = gathered_fwd[i - 1] if i else list(waits)
            gathered_fwd[i] = unit_collectives(
                Kind.ALL_GATHER, f"{b}ag_fwd", block_units, ahead + ([fwd_done[i - 2]] if i >= 2 else [])
            )
            needs += gathered_fwd[i] + (gathered_fwd[-1] if i == 0 else [])
        attn = graph.compute(f"{b}attn_fwd", attn_fwd, needs)
        last = chain([attn], graph.tp_sync(b, "attn_fwd", activations, tp_dims, [attn]))
        if config.moe:
            last = chain(last, graph.collective(f"{b}a2a_dispatch_fwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        mlp_c = graph.compute(f"{b}mlp_fwd", mlp_fwd, last)
        fwd_done[i] = mlp_c
        last = [mlp_c]
        if config.moe:
            last = chain(last, graph.collective(f"{b}a2a_combine_fwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        last = chain(last, graph.tp_sync(b, "mlp_fwd", activations, tp_dims, last))
    head_f = graph.compute(f"{at}head_fwd", head_fwd, last)
    # ---------------------------------------------------------------- backward
    gradients: list[tuple[Tensor, str]] = []  # tensors in the order their gradients are made, and by what
    reductions: list[str] = []
    gathered_bwd: dict[int, list[str]] = {}
    if fsdp:
        gathered_bwd[layers] = unit_collectives(Kind.ALL_GATHER, f"{at}ag_bwd.root", embeddings + head, [head_f])
    head_b = graph.compute(f"{at}head_bwd", 2 * head_fwd, [head_f, *gathered_bwd.get(layers, [])])
    gradients += [(t, head_b) for t in reversed(head)]
    last = [head_b]
    bwd_done: dict[int, str] = {}  # unit -> its last backward compute
    for i in reversed(range(layers)):
        b = f"{at}b{i}."
        if fsdp:  # prefetch as in the forward pass, downwards
            ahead = [*gathered_bwd[i + 1], head_f] + ([bwd_done[i + 2]] if i + 2 in bwd_done else [])
            gathered_bwd[i] = unit_collectives(Kind.ALL_GATHER, f"{b}ag_bwd", block_units, ahead)
        needs = last + (gathered_bwd[i] if fsdp else [])
        if config.moe:
            needs = chain(needs, graph.collective(f"{b}a2a_combine_bwd", Kind.ALL_TO_ALL, dispatch, ep_dims, needs))
        mlp_b = graph.compute(f"{b}mlp_bwd", 2 * mlp_fwd, needs)
        gradients += [(t, mlp_b) for t in reversed(mlp)]
        last = [mlp_b]
        if config.moe:
            last = chain(last, graph.collective(f"{b}a2a_dispatch_bwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        last = chain(last, graph.tp_sync(b, "mlp_bwd", activations, tp_dims, last))
        attn_b = graph.compute(f"{b}attn_bwd", 2 * attn_fwd, last)
        gradients += [(t, attn_b) for t in reversed(attention)]
        bwd_done[i] = attn_b
        if fsdp:
            reductions += unit_collectives(Kind.REDUCE_SCATTER, f"{b}rs", block_units, [attn_b])
        last = chain([attn_b], graph.tp_sync(b, "attn_bwd", activations, tp_dims, [attn_b]))
    gradients += [(t, last[0] if last else head_b) for t in reversed(embeddings)]
    if fsdp:
        reductions += unit_collectives(Kind.REDUCE_SCATTER, f"{at}rs.root", embeddings + head, [head_b, *last])
    else:
        reductions += _buckets(graph, at, gradients, layout, replica_dims, dp_dims)
    return reductions + last


def one_f_one_b(stages: int, stage: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B schedule of one stage: ("F" or "B", microbatch) in the order it runs them (warm-up
    forwards, one forward and one backward in turn, cool-down backwards).
    """
    warm = min(stages - stage - 1, microbatches)
    order = [("F", m) for m in range(warm)]
    for m in range(warm, microbatches):
        order += [("F", m), ("B", m - warm)]
    order += [("B", m) for m in range(microbatches - warm, microbatches)]
    return order


def _pipelined_pass(
    graph: _Graph,
    at: str,
    config: LlmConfig,
    layout: Layout,
    waits: dict[int, list[str]],
    dims: tuple[tuple[int, ...], ...],
    times: tuple[float, float, float],
    parts: tuple[tuple[Tensor, ...], ...],
    activations: int,
    dispatch: int,
    npus: tuple[int, ...],
) -> dict[int, list[str]]:
    """One training iteration of microbatches on pipeline stages (DDP); returns, per stage, what its next
    iteration waits for.
    """
    tp_dims, ep_dims, dp_dims, replica_dims = dims
    attn_fwd, mlp_fwd, head_fwd = times
    attention, mlp, embeddings, head = parts
    stages, moe = layout.pp, config.moe
    per, extra = divmod(config.layers, stages)

    def chain(done: list[str], name: str | None) -> list[str]:
        return [name] if name else done

    def forward(b: str, last: list[str]) -> list[str]:
        attn = graph.compute(f"{b}attn_fwd", attn_fwd, last)
        last = chain([attn], graph.tp_sync(b, "attn_fwd", activations, tp_dims, [attn]))
        if moe:
            last = chain(last, graph.collective(f"{b}a2a_dispatch_fwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        last = [graph.compute(f"{b}mlp_fwd", mlp_fwd, last)]
        if moe:
            last = chain(last, graph.collective(f"{b}a2a_combine_fwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        return chain(last, graph.tp_sync(b, "mlp_fwd", activations, tp_dims, last))

    def backward(b: str, last: list[str], made: list[tuple[Tensor, str]]) -> list[str]:
        if moe:
            last = chain(last, graph.collective(f"{b}a2a_combine_bwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        mlp_b = graph.compute(f"{b}mlp_bwd", 2 * mlp_fwd, last)
        made += [(t, mlp_b) for t in reversed(mlp)]
        last = [mlp_b]
        if moe:
            last = chain(last, graph.collective(f"{b}a2a_dispatch_bwd", Kind.ALL_TO_ALL, dispatch, ep_dims, last))
        last = chain(last, graph.tp_sync(b, "mlp_bwd", activations, tp_dims, last))
        attn_b = graph.compute(f"{b}attn_bwd", 2 * attn_fwd, last)
        made += [(t, attn_b) for t in reversed(attention)]
        return chain([attn_b], graph.tp_sync(b, "attn_bwd", activations, tp_dims, [attn_b]))

    done: dict[int, list[str]] = {}
    for s in range(stages):
        graph.stage = s
        first, final = s == 0, s == stages - 1
        lo = s * per + min(s, extra)
        blocks = range(lo, lo + per + (1 if s < extra else 0))
        before = list(waits.get(s, []))  # the stage's ops run one after another
        gradients: list[tuple[Tensor, str]] = []
        for op, m in one_f_one_b(stages, s, layout.microbatches):
            mb = f"{at}s{s}.m{m}."
            if op == "F":
                last = before + ([f"{at}s{s - 1}.m{m}.send_fwd"] if not first else [])
                for i in blocks:
                    last = forward(f"{mb}b{i}.", last)
                if final:
                    last = [graph.compute(f"{mb}head_fwd", head_fwd, last)]
                else:
                    graph.graph.send(f"{mb}send_fwd", activations, npus[s], npus[s + 1], last, stage=s)
            else:
                last = before + ([f"{at}s{s + 1}.m{m}.send_bwd"] if not final else [])
                made: list[tuple[Tensor, str]] = []
                if final:
                    last = [graph.compute(f"{mb}head_bwd", 2 * head_fwd, last)]
                    made += [(t, last[0]) for t in reversed(head)]
                for i in reversed(blocks):
                    last = backward(f"{mb}b{i}.", last, made)
                if first:
                    made += [(t, last[0]) for t in reversed(embeddings)]
                else:
                    graph.graph.send(f"{mb}send_bwd", activations, npus[s], npus[s - 1], last, stage=s)
                gradients = made
            before = last
        done[s] = _buckets(graph, f"{at}s{s}.", gradients, layout, replica_dims, dp_dims) + before
    graph.stage = 0
    return done


def _buckets(
    graph: _Graph,
    at: str,
    gradients: list[tuple[Tensor, str]],
    layout: Layout,
    replica_dims: tuple[int, ...],
    dp_dims: tuple[int, ...],
) -> list[str]:
    """DDP: the gradients in buckets of at most :data:`BUCKET_BYTES`, one series per group; each
    bucket's all-reduce waits for the task that made its last gradient.
    """
    made: list[str] = []
    for expert, dims in ((False, replica_dims), (True, dp_dims)):
        buckets: list[tuple[int, str]] = []  # (bytes, the task that made its last gradient)
        size, last = 0, ""
        for tensor, maker in gradients:
            if tensor.expert != expert:
                continue
            nbytes = _sharded(tensor, layout) * layout.bytes_per_element
            if size and size + nbytes > BUCKET_BYTES:
                buckets.append((size, last))
                size = 0
            size, last = size + nbytes, maker
            if size >= BUCKET_BYTES:
                buckets.append((size, last))
                size = 0
        if size:
            buckets.append((size, last))
        series = f"{at}ar_bucket{'.experts' if expert else ''}"
        for n, (nbytes, maker) in enumerate(buckets):
            name = graph.collective(f"{series}{n}", Kind.ALL_REDUCE, nbytes, dims, [maker])
            if name:
                made.append(name)
    return made
