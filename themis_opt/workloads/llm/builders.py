"""LLM training iterations as task graphs: the tasks of a model laid out on a network.

:func:`llm_task_graph` lays a model out on a network and writes one or more
training iterations as a task graph; with pipeline stages, each stage runs its
microbatches in the 1F1B order of :func:`one_f_one_b`. The tasks it writes
are those the package's docstring (:mod:`themis_opt.workloads.llm`) lists.
"""

from __future__ import annotations

from collections.abc import Callable

from themis_opt.errors import InputError
from themis_opt.instance import MAX_COLLECTIVES, Instance, Kind, Network
from themis_opt.workloads.llm.blocks import BlockGraph, Blocks, blocks_of, sharded
from themis_opt.workloads.llm.layouts import Layout, fit_network, stage_dims, stage_npus
from themis_opt.workloads.llm.models import LlmConfig, Tensor, parameter_count

MIB = 2**20
BUCKET_BYTES = 25 * MIB  # PyTorch DDP's default bucket_cap_mb
_GATHERS = {"once": "once a pass", "microbatch": "every microbatch"}  # FSDP over microbatches, as the layout says


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
    network, layout, splits = fit_network(network, layout)
    graph = BlockGraph(layout.chunks, layout.sequence_parallel)
    blocks = blocks_of(config, network, layout, graph)
    if layout.pp * layout.virtual_stages > config.layers:
        chunks = f"{layout.pp} stages" + (f" x {layout.virtual_stages} chunks" if layout.virtual_stages > 1 else "")
        raise InputError("pp", f"{config.name} has {config.layers} blocks: {chunks} would leave some empty")
    # at least an attention and an MLP compute task a block, forward and backward, every microbatch:
    # a layout past the task limit is refused before anything is built
    fewest = 4 * config.layers * layout.microbatches * layout.passes
    if fewest > MAX_COLLECTIVES:
        raise InputError("tasks", f"must hold at most {MAX_COLLECTIVES} tasks: this iteration makes {fewest:,} or more")
    sequence = layout.sequence or config.sequence
    waits: list[str] = []  # what a pass waits for: the previous pass's gradients
    staged = stage_dims(network, layout)
    npus = stage_npus(network, staged)
    stage_waits: dict[int, list[str]] = {}
    for p in range(layout.passes):
        if layout.pipelined:
            stage_waits = _pipelined_pass(blocks, f"p{p}.", stage_waits, npus)
            continue
        waits = _one_pass(blocks, f"p{p}.", waits)
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
            f"tp {layout.tp}"
            + (f" x cp {layout.cp}" if layout.cp > 1 else "")
            + (" (ring attention)" if layout.cp_attention == "ring" else "")
            + f" x ep {layout.ep} x dp {layout.dp}"
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
        ("tp_dims", ",".join(map(str, blocks.tp_dims))),
        *((("cp_dims", ",".join(map(str, blocks.cp_dims))),) if layout.cp > 1 else ()),
        ("ep_dims", ",".join(map(str, blocks.ep_dims))),
        ("dp_dims", ",".join(map(str, blocks.dp_dims))),
        ("batch", str(layout.batch)),
        ("sequence", str(sequence)),
        ("passes", str(layout.passes)),
        *pipeline,
        *((("splits", "; ".join(splits)),) if splits else ()),
    )
    name = name or f"{config.name}-{layout.data_parallel}"
    return graph.graph.instance(network, name, metadata, npus if layout.pp > 1 else ())


def _one_pass(blocks: Blocks, at: str, waits: list[str]) -> list[str]:
    """One training iteration; returns what the next one waits for."""
    graph, layout = blocks.graph, blocks.layout
    embeddings, head = blocks.embeddings, blocks.head
    fsdp = layout.data_parallel == "fsdp"
    block_units = blocks.attention + blocks.mlp
    layers = blocks.config.layers
    gathered_fwd: dict[int, list[str]] = {}  # FSDP: unit -> its forward all-gathers (root: -1)
    fwd_done: dict[int, str] = {}  # unit -> its MLP's forward compute
    if fsdp:
        gathered_fwd[-1] = blocks.unit(Kind.ALL_GATHER, f"{at}ag_fwd.root", embeddings + head, waits)
    # ---------------------------------------------------------------- forward
    last = list(waits)
    for i in range(layers):
        b = f"{at}b{i}."
        needs = list(last)
        if fsdp:  # one unit of prefetch: gathered while the unit before computes, once the one before that is done
            ahead = gathered_fwd[i - 1] if i else list(waits)
            gathered_fwd[i] = blocks.unit(
                Kind.ALL_GATHER, f"{b}ag_fwd", block_units, ahead + ([fwd_done[i - 2]] if i >= 2 else [])
            )
            needs += gathered_fwd[i] + (gathered_fwd[-1] if i == 0 else [])
        last, fwd_done[i] = blocks.forward(b, needs)
    head_f = graph.compute(f"{at}head_fwd", blocks.head_ns, last)
    # ---------------------------------------------------------------- backward
    gradients: list[tuple[Tensor, str]] = []  # tensors in the order their gradients are made, and by what
    reductions: list[str] = []
    gathered_bwd: dict[int, list[str]] = {}
    if fsdp:
        gathered_bwd[layers] = blocks.unit(Kind.ALL_GATHER, f"{at}ag_bwd.root", embeddings + head, [head_f])
    head_b = graph.compute(f"{at}head_bwd", 2 * blocks.head_ns, [head_f, *gathered_bwd.get(layers, [])])
    gradients += [(t, head_b) for t in reversed(head)]
    last = [head_b]
    bwd_done: dict[int, str] = {}  # unit -> its last backward compute
    for i in reversed(range(layers)):
        b = f"{at}b{i}."
        if fsdp:  # prefetch as in the forward pass, downwards
            ahead = [*gathered_bwd[i + 1], head_f] + ([bwd_done[i + 2]] if i + 2 in bwd_done else [])
            gathered_bwd[i] = blocks.unit(Kind.ALL_GATHER, f"{b}ag_bwd", block_units, ahead)
        then = _scatter(blocks, f"{b}rs", block_units, reductions) if fsdp else None
        last, bwd_done[i] = blocks.backward(b, last + (gathered_bwd[i] if fsdp else []), gradients, then)
    gradients += [(t, last[0] if last else head_b) for t in reversed(embeddings)]
    if fsdp:
        reductions += blocks.unit(Kind.REDUCE_SCATTER, f"{at}rs.root", embeddings + head, [head_b, *last])
    else:
        reductions += _buckets(blocks, at, gradients)
    return reductions + last


def _scatter(blocks: Blocks, name: str, tensors: tuple[Tensor, ...], into: list[str]) -> Callable[[str], None]:
    """FSDP: a unit's reduce-scatters after the compute that made its last gradient, added to ``into``."""

    def scatter(done: str) -> None:
        into.extend(blocks.unit(Kind.REDUCE_SCATTER, name, tensors, [done]))

    return scatter


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
    blocks: Blocks, at: str, waits: dict[int, list[str]], npus: tuple[int, ...]
) -> dict[int, list[str]]:
    """One training iteration of microbatches on pipeline stages (or one stage: gradient accumulation),
    DDP or FSDP; returns, per stage, what its next iteration waits for.
    """
    graph, layout = blocks.graph, blocks.layout
    attention, mlp, embeddings, head = blocks.attention, blocks.mlp, blocks.embeddings, blocks.head
    stages = layout.pp
    activations = blocks.activations
    fsdp = layout.data_parallel == "fsdp"
    once = layout.fsdp_gathers == "once"
    last_mb = layout.microbatches - 1
    unit = blocks.unit

    virtual = layout.virtual_stages
    chunks_of = stages * virtual  # the model chunks, in order: chunk v of stage s is chunk v * stages + s
    per, extra = divmod(blocks.config.layers, chunks_of)

    def held(j: int) -> list[int]:
        """The blocks of model chunk ``j``."""
        lo = j * per + min(j, extra)
        return list(range(lo, lo + per + (1 if j < extra else 0)))

    def name(s: int, v: int, m: int) -> str:
        return f"{at}s{s}.m{m}." if virtual == 1 else f"{at}s{s}.v{v}.m{m}."

    done: dict[int, list[str]] = {}
    for s in range(stages):
        graph.stage, graph.npu = s, npus[s]
        before = list(waits.get(s, []))  # the stage's ops run one after another
        started = before  # what the op before started from: an op's gathers begin as it begins
        gradients: list[tuple[Tensor, str]] = []  # each chunk's, as its last microbatch's backward makes them
        reductions: list[str] = []
        for op, v, m in pipeline_order(stages, s, layout.microbatches, virtual):
            j = v * stages + s
            first, final = j == 0, j == chunks_of - 1
            indices = held(j)
            root = (embeddings if first else ()) + (head if final else ())
            mb = name(s, v, m)
            order = indices if op == "F" else indices[::-1]
            gathering = fsdp and (m == 0 if once and op == "F" else not once)
            tag = "fwd" if op == "F" else "bwd"
            root_g = unit(Kind.ALL_GATHER, f"{mb}ag_{tag}.root", root, started) if gathering else []
            ahead = root_g or started  # the last gathers made
            ran: list[list[str]] = []  # what each block run so far ended with

            def gather(called: str, after: list[str], gathering: bool = gathering) -> list[str]:
                """A block's unit gathered after ``after`` (one unit of prefetch: after the gathers
                before it and the block two before it), if this op gathers.
                """
                return unit(Kind.ALL_GATHER, called, attention + mlp, after) if gathering else []

            if op == "F":
                # the chunk before's output: the stage before's, or the last stage's previous chunk's
                last = before + ([f"{name((j - 1) % stages, (j - 1) // stages, m)}send_fwd"] if not first else [])
                for k, i in enumerate(order):
                    g = gather(f"{mb}ag_fwd.b{i}", ahead + (ran[k - 2] if k >= 2 else []))
                    ahead = g or ahead
                    last, _ = blocks.forward(f"{mb}b{i}.", last + g + (root_g if k == 0 else []))
                    ran.append(last)
                if final:
                    last = [graph.compute(f"{mb}head_fwd", blocks.head_ns, last + root_g)]
                else:
                    to = npus[(j + 1) % stages]
                    graph.graph.send(f"{mb}send_fwd", activations, npus[s], to, last, stage=s)
            else:
                last = before + ([f"{name((j + 1) % stages, (j + 1) // stages, m)}send_bwd"] if not final else [])
                scatter = fsdp and (m == last_mb or not once)  # kept gradients are reduced after the last microbatch
                made: list[tuple[Tensor, str]] = []
                if final:
                    last = [graph.compute(f"{mb}head_bwd", 2 * blocks.head_ns, last + root_g)]
                    made += [(t, last[0]) for t in reversed(head)]
                for k, i in enumerate(order):
                    g = gather(f"{mb}ag_bwd.b{i}", ahead + (ran[k - 2] if k >= 2 else []))
                    ahead = g or ahead
                    then = _scatter(blocks, f"{mb}rs.b{i}", attention + mlp, reductions) if scatter else None
                    last, _ = blocks.backward(f"{mb}b{i}.", last + g, made, then)
                    ran.append(last)
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
            reductions = _buckets(blocks, f"{at}s{s}.", gradients)
        done[s] = reductions + before
    graph.stage, graph.npu = 0, npus[0]
    return done


def _buckets(blocks: Blocks, at: str, gradients: list[tuple[Tensor, str]]) -> list[str]:
    """DDP: the gradients in buckets of at most :data:`BUCKET_BYTES`, one series per group; each
    bucket's all-reduce waits for the task that made its last gradient.
    """
    layout = blocks.layout
    made: list[str] = []
    for expert, dims in ((False, blocks.replica_dims), (True, blocks.expert_dims)):
        buckets: list[tuple[int, str]] = []  # (bytes, the task that made its last gradient)
        size, last = 0, ""
        for tensor, maker in gradients:
            if tensor.expert != expert:
                continue
            nbytes = sharded(tensor, layout) * layout.bytes_per_element
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
            name = blocks.graph.collective(f"{series}{n}", Kind.ALL_REDUCE, nbytes, dims, [maker])
            if name:
                made.append(name)
    return made
