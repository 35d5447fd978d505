"""LLM training iterations as task graphs: the tasks of a model laid out on a network.

:func:`llm_task_graph` lays a model out on a network and writes one or more
training iterations as a task graph; with pipeline stages, each stage runs its
microbatches in the 1F1B order of :func:`one_f_one_b`. The tasks it writes
are those the package's docstring (:mod:`themis_opt.workloads.llm`) lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from themis_opt.errors import InputError
from themis_opt.instance import MAX_SIZE_BYTES, MAX_TIME_NS, Instance, Kind, Network
from themis_opt.workloads.graph import TaskGraph
from themis_opt.workloads.llm.layouts import Layout, group_dims, stage_dims, stage_npus
from themis_opt.workloads.llm.models import LlmConfig, Tensor, block_tensors, outer_tensors, parameter_count

MIB = 2**20
BUCKET_BYTES = 25 * MIB  # PyTorch DDP's default bucket_cap_mb
_GATHERS = {"once": "once a pass", "microbatch": "every microbatch"}  # FSDP over microbatches, as the layout says


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


def _unit_collectives(
    graph: _Graph,
    layout: Layout,
    dims: tuple[tuple[int, ...], tuple[int, ...]],
    kind: Kind,
    unit: str,
    tensors: tuple[Tensor, ...],
    after: list[str],
) -> list[str]:
    """FSDP: one unit's all-gathers or reduce-scatters, one per data-parallel group its tensors have
    (``dims``: the group of the parameters that are not experts', the experts' group; the experts'
    collective is named ``{unit}.experts``).
    """
    found = []
    for suffix, group, expert in (("", dims[0], False), (".experts", dims[1], True)):
        size = sum(_sharded(t, layout) for t in tensors if t.expert == expert) * layout.bytes_per_element
        made = graph.collective(f"{unit}{suffix}", kind, size, group, after)
        if made:
            found.append(made)
    return found


def llm_task_graph(config: LlmConfig, network: Network, layout: Layout, *, name: str | None = None) -> Instance:
    """One or more training iterations of ``config`` laid out as ``layout`` on ``network``.

    Parameters
    ----------
    config
        The model (one of :data:`~themis_opt.workloads.llm.LLMS`, or any shape).
    network
        The network; its dimensions are shared out by :func:`~themis_opt.workloads.llm.group_dims`.
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
        If the groups do not fit the network; the attention heads or the MLP's columns do not
        divide over ``tp``, or the experts over ``ep``; or there are more stages than blocks.
    """
    tp_dims, ep_dims, dp_dims = group_dims(network, layout)
    if layout.pp * layout.virtual_stages > config.layers:
        chunks = f"{layout.pp} stages" + (f" x {layout.virtual_stages} chunks" if layout.virtual_stages > 1 else "")
        raise InputError("pp", f"{config.name} has {config.layers} blocks: {chunks} would leave some empty")
    for part, count in (("attention heads", config.heads), ("MLP columns", config.ffn)):
        if count % layout.tp:
            raise InputError("tp", f"{config.name}'s {count} {part} do not divide over {layout.tp} tensor ranks")
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
    longest = 2 * max(attn_fwd, mlp_fwd, head_fwd)  # a backward compute task: twice its forward
    if longest > MAX_TIME_NS or dispatch > MAX_SIZE_BYTES:
        what = f"compute tasks of {longest:.3g} ns" if longest > MAX_TIME_NS else f"activations of {dispatch:.3g} bytes"
        raise InputError(
            "batch",
            f"{layout.batch} x {sequence} tokens make {what}, above what a task may hold "
            f"({MAX_TIME_NS:g} ns, {MAX_SIZE_BYTES} bytes): a smaller batch or sequence",
        )
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
        (
            ("pp", str(layout.pp)),
            ("stage_dims", ",".join(map(str, staged))),
            ("microbatches", str(layout.microbatches)),
            *((("virtual_stages", str(layout.virtual_stages)),) if layout.virtual_stages > 1 else ()),
        )
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
            + (f" ({layout.virtual_stages} chunks a stage)" if layout.virtual_stages > 1 else "")
            + (" (sequence parallel)" if layout.sequence_parallel else "")
            + f", {layout.data_parallel}"
            + (
                f" (gathered {_GATHERS[layout.fsdp_gathers]})"
                if layout.data_parallel == "fsdp" and layout.pipelined
                else ""
            ),
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
    fsdp = layout.data_parallel == "fsdp"
    block_units = attention + mlp

    def unit_collectives(kind: Kind, unit: str, tensors: tuple[Tensor, ...], after: list[str]) -> list[str]:
        return _unit_collectives(graph, layout, (replica_dims, dp_dims), kind, unit, tensors, after)

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


def pipeline_order(stages: int, stage: int, microbatches: int, virtual: int = 1) -> list[tuple[str, int, int]]:
    """One stage's ops in the order it runs them: ("F" or "B", model chunk, microbatch). One chunk a
    stage: 1F1B (:func:`one_f_one_b`). Several (``virtual``): Megatron's interleaved 1F1B, whose
    forwards take ``stages`` microbatches through each chunk in turn (backwards through the chunks
    in reverse), after ``2 (stages - stage - 1) + (virtual - 1) stages`` warm-up forwards.
    """
    if virtual == 1:
        return [(op, 0, m) for op, m in one_f_one_b(stages, stage, microbatches)]
    total, group = microbatches * virtual, stages * virtual

    def chunk_and_microbatch(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k % group) // stages
        return (chunk if forward else virtual - 1 - chunk), (k // group) * stages + k % stages

    warm = min(2 * (stages - stage - 1) + (virtual - 1) * stages, total)
    order = [("F", *chunk_and_microbatch(k, True)) for k in range(warm)]
    for k in range(total - warm):
        order += [("F", *chunk_and_microbatch(warm + k, True)), ("B", *chunk_and_microbatch(k, False))]
    order += [("B", *chunk_and_microbatch(k, False)) for k in range(total - warm, total)]
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
    """One training iteration of microbatches on pipeline stages (or one stage: gradient accumulation),
    DDP or FSDP; returns, per stage, what its next iteration waits for.
    """
    tp_dims, ep_dims, dp_dims, replica_dims = dims
    attn_fwd, mlp_fwd, head_fwd = times
    attention, mlp, embeddings, head = parts
    stages, moe = layout.pp, config.moe

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

    fsdp = layout.data_parallel == "fsdp"
    once = layout.fsdp_gathers == "once"
    last_mb = layout.microbatches - 1

    def unit(kind: Kind, name: str, tensors: tuple[Tensor, ...], after: list[str]) -> list[str]:
        return _unit_collectives(graph, layout, (replica_dims, dp_dims), kind, name, tensors, after)

    virtual = layout.virtual_stages
    chunks_of = stages * virtual  # the model chunks, in order: chunk v of stage s is chunk v * stages + s
    per, extra = divmod(config.layers, chunks_of)

    def blocks_of(j: int) -> list[int]:
        lo = j * per + min(j, extra)
        return list(range(lo, lo + per + (1 if j < extra else 0)))

    def name(s: int, v: int, m: int) -> str:
        return f"{at}s{s}.m{m}." if virtual == 1 else f"{at}s{s}.v{v}.m{m}."

    done: dict[int, list[str]] = {}
    for s in range(stages):
        graph.stage = s
        before = list(waits.get(s, []))  # the stage's ops run one after another
        started = before  # what the op before started from: an op's gathers begin as it begins
        gradients: list[tuple[Tensor, str]] = []  # each chunk's, as its last microbatch's backward makes them
        reductions: list[str] = []
        for op, v, m in pipeline_order(stages, s, layout.microbatches, virtual):
            j = v * stages + s
            first, final = j == 0, j == chunks_of - 1
            blocks = blocks_of(j)
            root = (embeddings if first else ()) + (head if final else ())
            mb = name(s, v, m)
            order = blocks if op == "F" else blocks[::-1]
            gathering = fsdp and (m == 0 if once and op == "F" else not once)
            tag = "fwd" if op == "F" else "bwd"
            root_g = unit(Kind.ALL_GATHER, f"{mb}ag_{tag}.root", root, started) if gathering else []
            ahead = root_g or started  # the last gathers made
            ran: list[list[str]] = []  # what each block run so far ended with
            if op == "F":
                # the chunk before's output: the stage before's, or the last stage's previous chunk's
                last = before + ([f"{name((j - 1) % stages, (j - 1) // stages, m)}send_fwd"] if not first else [])
                for k, i in enumerate(order):
                    # one unit of prefetch: a unit is gathered once the one before it is and the block
                    # two before it has run
                    g = (
                        unit(
                            Kind.ALL_GATHER, f"{mb}ag_fwd.b{i}", attention + mlp, ahead + (ran[k - 2] if k >= 2 else [])
                        )
                        if gathering
                        else []
                    )
                    ahead = g or ahead
                    last = forward(f"{mb}b{i}.", last + g + (root_g if k == 0 else []))
                    ran.append(last)
                if final:
                    last = [graph.compute(f"{mb}head_fwd", head_fwd, last + root_g)]
                else:
                    to = npus[(j + 1) % stages]
                    graph.graph.send(f"{mb}send_fwd", activations, npus[s], to, last, stage=s)
            else:
                last = before + ([f"{name((j + 1) % stages, (j + 1) // stages, m)}send_bwd"] if not final else [])
                scatter = fsdp and (m == last_mb or not once)  # kept gradients are reduced after the last microbatch
                made: list[tuple[Tensor, str]] = []
                if final:
                    last = [graph.compute(f"{mb}head_bwd", 2 * head_fwd, last + root_g)]
                    made += [(t, last[0]) for t in reversed(head)]
                for k, i in enumerate(order):
                    g = (
                        unit(
                            Kind.ALL_GATHER, f"{mb}ag_bwd.b{i}", attention + mlp, ahead + (ran[k - 2] if k >= 2 else [])
                        )
                        if gathering
                        else []
                    )
                    ahead = g or ahead
                    last = backward(f"{mb}b{i}.", last + g, made)
                    ran.append(last)
                    if scatter:
                        reductions += unit(Kind.REDUCE_SCATTER, f"{mb}rs.b{i}", attention + mlp, [made[-1][1]])
                if first:
                    made += [(t, last[0]) for t in reversed(embeddings)]
                else:
                    to = npus[(j - 1) % stages]
                    graph.graph.send(f"{mb}send_bwd", activations, npus[s], to, last, stage=s)
                if scatter:
                    reductions += unit(Kind.REDUCE_SCATTER, f"{mb}rs.root", root, [made[-1][1]] if made else last)
                if m == last_mb:
                    gradients += made
            started, before = before, last
        if not fsdp:
            reductions = _buckets(graph, f"{at}s{s}.", gradients, layout, replica_dims, dp_dims)
        done[s] = reductions + before
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
