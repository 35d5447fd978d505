"""How a model is laid out on a network: the parallel groups, the pipeline stages and their dimensions.

:class:`Layout` holds the group sizes, the data parallelism and the training
settings; :func:`fit_network` splits the dimensions a group needs part of;
:func:`stage_dims` gives the pipeline stages their dimensions (after the
tensor-, context- and expert-parallel groups, or ``stage_dims``) and
:func:`stage_npus` each stage its NPU;
:func:`group_dims` gives the tensor-, context-, expert- and data-parallel groups theirs,
innermost first, among the dimensions the stages leave. What each group
exchanges is in the package's docstring (:mod:`themis_opt.workloads.llm`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from themis_opt.errors import InputError
from themis_opt.instance import Network


@dataclass(frozen=True)
class Layout:
    """How a model is laid out and trained on a network.

    Parameters
    ----------
    tp, ep, dp
        The tensor-, expert- and data-parallel group sizes; with ``cp`` and
        ``pp`` their product is the network's NPUs.
    cp
        The context-parallel group: each of its ranks holds a share of every
        sequence and gathers the whole sequence's keys and values for its
        queries' attention (Llama 3's all-gather context parallelism).
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
        The dimensions the pipeline stages take (``None``: after the
        tensor-, context- and expert-parallel groups' dimensions).
    sequence_parallel
        Megatron's sequence parallelism: each tensor-parallel all-reduce of
        activations becomes a reduce-scatter to the sequence shards and the
        all-gather the next matrix product needs (the same bytes, two
        collectives each scheduled on its own).
    virtual_stages
        Model chunks a pipeline stage holds (Megatron's interleaved 1F1B:
        ``pp x virtual_stages`` chunks of blocks, chunk v of stage s the
        ``v pp + s``-th); 1: plain 1F1B.
    fsdp_gathers
        FSDP over microbatches: ``once`` (torchtitan's default with pipeline
        stages: each unit gathered before the first microbatch's forward and
        kept, its gradients accumulated and reduce-scattered after the last
        microbatch's backward) or ``microbatch`` (gathered before every
        forward and every backward, reduce-scattered after every backward: the
        least memory, the most traffic).
    cp_attention
        How the context-parallel ranks share the keys and values: ``all_gather`` (the Llama 3
        paper's: the whole sequence's gathered once projected, their gradients reduce-scattered) or
        ``ring`` (ring attention: each rank's block passed to the next rank ``cp - 1`` times, each
        step overlapping the attention on the block before it; in the backward the blocks and their
        gradients' sums go round together).
    """

    tp: int = 1
    cp: int = 1
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
    fsdp_gathers: Literal["once", "microbatch"] = "once"
    virtual_stages: int = 1
    cp_attention: Literal["all_gather", "ring"] = "all_gather"

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "ep", "dp", "batch", "passes", "chunks", "pp", "microbatches", "virtual_stages"):
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
        if self.virtual_stages > 1 and (self.pp == 1 or self.microbatches % self.pp):
            raise InputError(
                "virtual_stages",
                f"interleaves the microbatches over the stages in groups of pp: needs pp > 1 and microbatches a "
                f"multiple of it, got pp {self.pp} and {self.microbatches} microbatches",
            )
        if self.cp_attention not in ("all_gather", "ring"):
            raise InputError("cp_attention", f"must be all_gather or ring, got {self.cp_attention!r}")
        if self.cp_attention == "ring" and self.cp == 1:
            raise InputError(
                "cp_attention", "passes the keys and values round the context-parallel ranks: needs cp > 1"
            )
        if self.fsdp_gathers not in ("once", "microbatch"):
            raise InputError("fsdp_gathers", f"must be once or microbatch, got {self.fsdp_gathers!r}")
        if self.fsdp_gathers == "microbatch" and not (self.data_parallel == "fsdp" and self.pipelined):
            raise InputError(
                "fsdp_gathers", "is for fsdp with pipeline stages or microbatches: it changes nothing here"
            )

    @property
    def pipelined(self) -> bool:
        """Whether a pass runs microbatches (pipeline stages, or gradient accumulation)."""
        return self.pp > 1 or self.microbatches > 1

    def ns(self, flops: float) -> float:
        """Compute time of ``flops`` floating-point operations, ns (1 TFLOP/s is 1e3 FLOPs a ns)."""
        return flops / (self.peak_tflops * 1e3 * self.mfu)


def stage_dims(network: Network, layout: Layout) -> tuple[int, ...]:
    """The dimensions the pipeline stages take: ``layout.stage_dims``, or, innermost first, the
    tensor-, context- and expert-parallel groups' dimensions, then those whose sizes multiply to
    ``pp`` (none for one stage): the order of the Llama 3 paper, data parallelism outermost.

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
    _, placed, splits = fit_network(network, layout)  # the one placement rule
    if splits:
        raise InputError(
            "pp",
            f"{layout.pp} stages are not a product of whole dimensions of {shape} after the tensor-, context- and "
            "expert-parallel groups (fit_network splits the dimensions, or give the stage dimensions)",
        )
    assert placed.stage_dims is not None
    return placed.stage_dims


def _groups(network: Network, layout: Layout) -> list[tuple[str, int]]:
    """The groups' names and sizes (tensor, context, expert, data, stages), checked to multiply to the
    network's NPUs (the error names cp and pp where they are used).
    """
    given = [("tp", layout.tp), ("cp", layout.cp), ("ep", layout.ep), ("dp", layout.dp), ("pp", layout.pp)]
    named = [(n, v) for n, v in given if n not in ("cp", "pp") or v > 1]
    total, npus = math.prod(v for _, v in given), network.num_npus
    if total != npus:
        raise InputError(
            " x ".join(n for n, _ in named),
            f"{' x '.join(str(v) for _, v in named)} = {total}, but the network has {npus} NPUs",
        )
    return given


def fit_network(network: Network, layout: Layout) -> tuple[Network, Layout, tuple[str, ...]]:
    """``network`` with each dimension that a group or the stages need only part of split in two, a
    part so split again (:meth:`~themis_opt.instance.Network.split`), the layout's ``stage_dims``
    renumbered to match, and a line for each split. Innermost first, the tensor-, context- and
    expert-parallel groups, then the stages (unless ``stage_dims`` places them), then the
    data-parallel group; a dimension a group ends inside gives it its first part, the next group
    the part across.

    Raises
    ------
    InputError
        If the groups do not multiply to the network's NPUs, or the stages do not fit the dimensions
        the groups inside them leave, whole or split (a group that does not is refused by
        :func:`group_dims`).
    """
    given = _groups(network, layout)
    notes: list[str] = []

    def split(d: int, inner: int, why: str) -> None:
        nonlocal network, layout
        dim = network.dimensions[d]
        notes.append(
            f"dimension {d} ({dim.name or f'd{d}'}, {dim.size}) split as {inner} x {dim.size // inner} for {why}"
        )
        network = network.split(d, inner)
        if layout.stage_dims is not None:
            layout = dataclasses.replace(layout, stage_dims=tuple(x + (x > d) for x in layout.stage_dims))

    if layout.stage_dims is None and layout.pp > 1:  # the stages next, after the groups inside them
        at, stages = 0, []
        for name, size in (*given[:3], ("pp", layout.pp)):
            product = 1
            while product < size and at < network.num_dims:
                n = network.dimensions[at].size
                if product * n > size and size % product == 0 and n % (size // product) == 0:
                    split(at, size // product, "the pipeline stages" if name == "pp" else f"the {name} group")
                product *= network.dimensions[at].size
                if name == "pp":
                    stages.append(at)
                at += 1
        if math.prod(network.dimensions[d].size for d in stages) != layout.pp:
            shape = "x".join(str(d.size) for d in network.dimensions)
            raise InputError(
                "pp",
                f"{layout.pp} stages do not fit the dimensions of {shape} after the tensor-, context- and "
                "expert-parallel groups, whole or split in two (give the stage dimensions)",
            )
        layout = dataclasses.replace(layout, stage_dims=tuple(stages))
    staged = set(stage_dims(network, layout))
    at = 0
    for name, size in given[:4]:
        product = 1
        while product < size:
            left = [d for d in range(network.num_dims) if d not in staged]
            if at >= len(left):
                break
            d = left[at]
            n = network.dimensions[d].size
            if product * n > size and size % product == 0 and n % (size // product) == 0:
                split(d, size // product, f"the {name} group")
                staged = {x + (x > d) for x in staged}
            product *= network.dimensions[d].size
            at += 1
    return network, layout, tuple(notes)


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


def group_dims(
    network: Network, layout: Layout
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The tensor-, context-, expert- and data-parallel groups' dimensions, innermost first (tensor
    innermost, then context, expert and data), among the dimensions the pipeline stages leave
    (:func:`stage_dims`).

    Raises
    ------
    InputError
        If the groups do not multiply to the network's NPUs, or one is not a
        product of whole consecutive dimensions.
    """
    sizes = [d.size for d in network.dimensions]
    groups_given = _groups(network, layout)
    staged = stage_dims(network, layout)
    left = [d for d in range(len(sizes)) if d not in staged]
    groups: list[tuple[int, ...]] = []
    at = 0
    for name, size in groups_given[:4]:
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
    return groups[0], groups[1], groups[2], groups[3]
