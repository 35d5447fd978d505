"""One transformer block's tasks, as every pass, stage and microbatch writes them.

:class:`BlockGraph` is the task graph under the LLM layouts' rules;
:class:`Blocks` writes a block's forward and backward (attention and MLP, with
tensor, context and expert parallelism) and an FSDP unit's collectives;
:func:`blocks_of` sizes them from the model and the layout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from themis_opt.errors import InputError
from themis_opt.instance import MAX_SIZE_BYTES, MAX_TIME_NS, Kind, Network
from themis_opt.workloads.graph import TaskGraph
from themis_opt.workloads.llm.layouts import Layout, group_dims
from themis_opt.workloads.llm.models import LlmConfig, Tensor, block_tensors, outer_tensors


@dataclass
class BlockGraph:
    """The LLM layouts' rules on top of the task graph: no collective without dimensions or bytes, at most
    a chunk per byte, no compute task shorter than a picosecond.
    """

    chunks: int
    sequence_parallel: bool = False
    graph: TaskGraph = field(default_factory=TaskGraph)

    stage: int = 0  # the pipeline stage the tasks being written run on
    npu: int = 0  # that stage's NPU

    def compute(self, name: str, ns: float, after: list[str]) -> str:
        """A compute task of ``ns`` after ``after``, on the stage being written."""
        return self.graph.compute(name, max(ns, 1e-3), after, stage=self.stage)

    def collective(self, name: str, kind: Kind, size: int, dims: tuple[int, ...], after: list[str]) -> str | None:
        """A collective over ``dims``; ``None`` (nothing to wait for) without dimensions or bytes."""
        if not dims or size < 1:
            return None
        return self.graph.collective(name, kind, size, min(self.chunks, size), dims, after, stage=self.stage)

    def send(self, name: str, size: int, to: int, after: list[str]) -> str:
        """A message of ``size`` bytes from the stage's NPU to NPU ``to`` after ``after``."""
        return self.graph.send(name, max(size, 1), self.npu, to, after, stage=self.stage)

    def tp_sync(self, at: str, what: str, size: int, dims: tuple[int, ...], after: list[str]) -> str | None:
        """The tensor-parallel group's sum of ``what``'s activations: ``{at}ar_{what}``, or with sequence
        parallelism ``{at}rs_{what}`` (to the sequence shards) then ``{at}ag_{what}`` (for the next product).
        """
        if not self.sequence_parallel:
            return self.collective(f"{at}ar_{what}", Kind.ALL_REDUCE, size, dims, after)
        scattered = self.collective(f"{at}rs_{what}", Kind.REDUCE_SCATTER, size, dims, after)
        return self.collective(f"{at}ag_{what}", Kind.ALL_GATHER, size, dims, [scattered] if scattered else after)


def sharded(tensor: Tensor, layout: Layout) -> int:
    """Parameters of ``tensor`` one NPU holds."""
    parameters = tensor.parameters // layout.tp if tensor.split else tensor.parameters
    return parameters // layout.ep if tensor.expert else parameters


def _chain(done: list[str], name: str | None) -> list[str]:
    return [name] if name else done


@dataclass(frozen=True)
class Blocks:
    """What every block's tasks need: the groups' dimensions, the tensors, the compute times and the
    bytes each collective moves.

    Parameters
    ----------
    graph
        The graph the tasks go to.
    config, layout
        The model and its layout.
    tp_dims, cp_dims, ep_dims, dp_dims
        The tensor-, context-, expert- and data-parallel groups' dimensions.
    attention, mlp, embeddings, head
        A block's attention and MLP tensors; the embeddings and the output layer (with the final norm).
    qkv_ns, attn_ns, mlp_ns, head_ns
        Forward compute: the query, key and value projections (a task of their own only with context
        parallelism), the whole attention (projections included), the MLP, the output layer.
    activations, dispatch, kv_bytes
        Bytes of a tensor-parallel sum, of an expert dispatch or combine, and of the keys and values a
        context-parallel rank gathers (the whole sequence's).
    cp_next
        With ring attention, how far (in NPU numbers) a rank's next context-parallel rank is: one
        step along the group's first dimension (0: no ring).
    """

    graph: BlockGraph
    config: LlmConfig
    layout: Layout
    tp_dims: tuple[int, ...]
    cp_dims: tuple[int, ...]
    ep_dims: tuple[int, ...]
    dp_dims: tuple[int, ...]
    attention: tuple[Tensor, ...]
    mlp: tuple[Tensor, ...]
    embeddings: tuple[Tensor, ...]
    head: tuple[Tensor, ...]
    qkv_ns: float
    attn_ns: float
    mlp_ns: float
    head_ns: float
    activations: int
    dispatch: int
    kv_bytes: int
    cp_next: int = 0

    @property
    def replica_dims(self) -> tuple[int, ...]:
        """The data-parallel group of the parameters that are not experts': every NPU with the same
        copy (the context-parallel ranks hold the same parameters too).
        """
        return self.cp_dims + self.ep_dims + self.dp_dims

    @property
    def expert_dims(self) -> tuple[int, ...]:
        """The data-parallel group of the experts' parameters."""
        return self.cp_dims + self.dp_dims

    def unit(self, kind: Kind, name: str, tensors: tuple[Tensor, ...], after: list[str]) -> list[str]:
        """FSDP: one unit's all-gathers or reduce-scatters, one per data-parallel group its tensors
        have (the experts' is named ``{name}.experts``).
        """
        found = []
        for suffix, group, expert in (("", self.replica_dims, False), (".experts", self.expert_dims, True)):
            size = sum(sharded(t, self.layout) for t in tensors if t.expert == expert) * self.layout.bytes_per_element
            made = self.graph.collective(f"{name}{suffix}", kind, size, group, after)
            if made:
                found.append(made)
        return found

    def _experts(self, name: str, last: list[str]) -> list[str]:
        """An expert dispatch or combine after ``last``: what comes next waits for it."""
        return _chain(last, self.graph.collective(name, Kind.ALL_TO_ALL, self.dispatch, self.ep_dims, last))

    def forward(self, b: str, last: list[str]) -> tuple[list[str], str]:
        """Block ``b``'s forward after ``last``: what it ends with, and its MLP compute."""
        g = self.graph
        if self.cp_next:
            attn = self._ring_forward(b, g.compute(f"{b}qkv_fwd", self.qkv_ns, last))
        elif self.cp_dims:  # the whole sequence's keys and values, gathered once projected
            qkv = g.compute(f"{b}qkv_fwd", self.qkv_ns, last)
            kv = g.collective(f"{b}ag_kv_fwd", Kind.ALL_GATHER, self.kv_bytes, self.cp_dims, [qkv])
            attn = g.compute(f"{b}attn_fwd", self.attn_ns - self.qkv_ns, [kv] if kv else [qkv])
        else:
            attn = g.compute(f"{b}attn_fwd", self.attn_ns, last)
        last = _chain([attn], g.tp_sync(b, "attn_fwd", self.activations, self.tp_dims, [attn]))
        if self.config.moe:
            last = self._experts(f"{b}a2a_dispatch_fwd", last)
        mlp = g.compute(f"{b}mlp_fwd", self.mlp_ns, last)
        last = [mlp]
        if self.config.moe:
            last = self._experts(f"{b}a2a_combine_fwd", last)
        return _chain(last, g.tp_sync(b, "mlp_fwd", self.activations, self.tp_dims, last)), mlp

    def _ring_forward(self, b: str, qkv: str) -> str:
        """Ring attention's forward after the projections ``qkv``: the attention on each of the ``cp``
        blocks of keys and values in turn, the rank's own first, each block passed on to the next
        rank once it is in hand (``cp - 1`` messages) while the attention on it runs. Its last task.
        """
        g, cp = self.graph, self.layout.cp
        block, part, to = self.kv_bytes // cp, (self.attn_ns - self.qkv_ns) / cp, g.npu + self.cp_next
        ran = here = qkv  # the last step, and what brought the block in hand
        for i in range(cp):
            sent = g.send(f"{b}ring_kv_fwd.{i}", block, to, [here]) if i < cp - 1 else None
            ran = g.compute(f"{b}attn_fwd.{i}", part, list(dict.fromkeys([ran, here])))
            here = sent or here
        return ran

    def _ring_backward(self, b: str, start: list[str], last: list[str]) -> str:
        """Ring attention's backward: the keys and values passed round again from ``start`` (while
        the MLP's backward runs), the attention's backward on each block once it and its gradients'
        sum so far are in hand (after ``last``), that sum then passed on (``cp`` messages: the last
        brings each block's sum home to its rank). Its last task.
        """
        g, cp = self.graph, self.layout.cp
        block, part, to = self.kv_bytes // cp, 2 * (self.attn_ns - self.qkv_ns) / cp, g.npu + self.cp_next
        here, ran = start, last  # what brought the block in hand, and the last step
        summed: list[str] = []  # what brought the sum of the block in hand's gradients
        for i in range(cp):
            sent = [g.send(f"{b}ring_kv_bwd.{i}", block, to, here)] if i < cp - 1 else here
            ran = [g.compute(f"{b}attn_bwd.{i}", part, [*ran, *(here if i else []), *summed])]
            summed = [g.send(f"{b}ring_dkv_bwd.{i}", block, to, ran)]
            here = sent
        return summed[0]

    def backward(
        self, b: str, last: list[str], made: list[tuple[Tensor, str]], then: Callable[[str], object] | None = None
    ) -> tuple[list[str], str]:
        """Block ``b``'s backward after ``last``, adding to ``made`` each tensor whose gradient it makes
        and by what: what it ends with, and its last compute. ``then`` is called with that compute
        once it is written (before the tensor-parallel sum that follows it: the tasks' order is
        the simulator's order of ties).
        """
        g = self.graph
        start = last  # ring attention's blocks go round again from here, while the MLP's backward runs
        # context parallelism: the keys and values gathered again while the MLP's backward runs
        kv = None if self.cp_next else g.collective(f"{b}ag_kv_bwd", Kind.ALL_GATHER, self.kv_bytes, self.cp_dims, last)
        if self.config.moe:
            last = self._experts(f"{b}a2a_combine_bwd", last)
        mlp = g.compute(f"{b}mlp_bwd", 2 * self.mlp_ns, last)
        made += [(t, mlp) for t in reversed(self.mlp)]
        last = [mlp]
        if self.config.moe:
            last = self._experts(f"{b}a2a_dispatch_bwd", last)
        last = _chain(last, g.tp_sync(b, "mlp_bwd", self.activations, self.tp_dims, last))
        if self.cp_next:
            attn = g.compute(f"{b}qkv_bwd", 2 * self.qkv_ns, [self._ring_backward(b, start, last)])
        elif kv is None:
            attn = g.compute(f"{b}attn_bwd", 2 * self.attn_ns, last)
        else:  # the keys' and values' gradients summed back to their ranks before their projections'
            core = g.compute(f"{b}attn_bwd", 2 * (self.attn_ns - self.qkv_ns), [*last, kv])
            summed = g.collective(f"{b}rs_dkv_bwd", Kind.REDUCE_SCATTER, self.kv_bytes, self.cp_dims, [core])
            attn = g.compute(f"{b}qkv_bwd", 2 * self.qkv_ns, [summed] if summed else [core])
        made += [(t, attn) for t in reversed(self.attention)]
        if then is not None:
            then(attn)
        return _chain([attn], g.tp_sync(b, "attn_bwd", self.activations, self.tp_dims, [attn])), attn


def blocks_of(config: LlmConfig, network: Network, layout: Layout, graph: BlockGraph) -> Blocks:
    """The blocks of ``config`` laid out as ``layout`` on ``network``.

    Raises
    ------
    InputError
        If the groups do not fit the network; the attention heads or the MLP's columns do not
        divide over ``tp``, the sequence over ``cp``, or the experts over ``ep``; or a task would
        be larger than a task may be.
    """
    tp_dims, cp_dims, ep_dims, dp_dims = group_dims(network, layout)
    for part, count in (("attention heads", config.heads), ("MLP columns", config.ffn)):
        if count % layout.tp:
            raise InputError("tp", f"{config.name}'s {count} {part} do not divide over {layout.tp} tensor ranks")
    if config.moe and config.experts % layout.ep:
        raise InputError("ep", f"{config.name} has {config.experts} experts: they do not divide over {layout.ep}")
    if not config.moe and layout.ep > 1:
        raise InputError("ep", f"{config.name} has no experts: ep must be 1")
    sequence = layout.sequence or config.sequence
    if sequence % layout.cp:
        raise InputError("cp", f"{sequence} tokens a sequence do not divide over {layout.cp} context ranks")
    tokens = layout.batch * sequence // layout.cp  # a rank's: its share of each sequence
    h, e = config.hidden, layout.bytes_per_element
    attention, mlp = block_tensors(config)
    embeddings, head = outer_tensors(config)

    def flops(tensors: tuple[Tensor, ...], routed: bool = False) -> float:
        """Forward FLOPs a NPU spends on the matrices of ``tensors``."""
        total = 0.0
        for t in tensors:  # a token meets top_k of the experts
            share = config.top_k / config.experts if (routed and t.expert) else 1.0
            total += 2.0 * tokens * t.macs * share / layout.tp
        return total

    # the scores and their product with the values: a rank's queries against the whole sequence's keys
    attn_ns = layout.ns(flops(attention) + 4.0 * tokens * sequence * h / layout.tp)
    qkv_ns = layout.ns(flops(tuple(t for t in attention if t.name in ("q", "k", "v"))))
    mlp_ns = layout.ns(flops(mlp, routed=True))
    head_ns = layout.ns(2.0 * tokens * h * config.vocab)
    activations = tokens * h * e
    dispatch = activations * config.top_k
    # keys and values of the whole sequence, of the key-value heads a tensor rank holds (one at least)
    kv_bytes = layout.batch * sequence * 2 * max(config.kv_heads // layout.tp, 1) * (h // config.heads) * e
    longest = 2 * max(attn_ns, mlp_ns, head_ns)  # a backward compute task: twice its forward
    if longest > MAX_TIME_NS or max(dispatch, kv_bytes) > MAX_SIZE_BYTES:
        what = (
            f"compute tasks of {longest:.3g} ns"
            if longest > MAX_TIME_NS
            else f"activations of {max(dispatch, kv_bytes):.3g} bytes"
        )
        raise InputError(
            "batch",
            f"{layout.batch} x {sequence} tokens make {what}, above what a task may hold "
            f"({MAX_TIME_NS:g} ns, {MAX_SIZE_BYTES} bytes): a smaller batch or sequence",
        )
    ring = layout.cp_attention == "ring" and bool(cp_dims)
    if ring and len(cp_dims) > 1:  # a ring over several dimensions crosses the outer ones at some ranks only
        raise InputError(
            "cp_attention",
            f"ring passes the blocks round one dimension: the context-parallel group takes {len(cp_dims)} "
            f"({', '.join(map(str, cp_dims))}): the all-gather form, or a group that fits one",
        )
    cp_next = math.prod(d.size for d in network.dimensions[: cp_dims[0]]) if ring else 0
    return Blocks(
        graph, config, layout, tp_dims, cp_dims, ep_dims, dp_dims, attention, mlp, embeddings, head,
        qkv_ns, attn_ns, mlp_ns, head_ns, activations, dispatch, kv_bytes, cp_next,
    )  # fmt: skip
