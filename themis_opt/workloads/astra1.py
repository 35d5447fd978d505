"""ASTRA-sim 1.0's workload loop: a workload (a file's or the zoo's) as a task graph.

A workload is a list of layers, each with forward, input-gradient and
weight-gradient compute times (cycles = ns) and collectives (type and size in
bytes per NPU). :func:`task_graph` turns it into an instance whose tasks follow
ASTRA-sim 1.0's loops (``Workload.cc``; the docs' training-iteration page
numbers the rules):

* DATA: per pass, forward i = 0..L-1; backward i = L-1..0: WG(i), then its
  weight-gradient collective (non-blocking), then IG(i) (not for layer 0).
  Forward(i) of the next pass waits for layer i's collective of this pass.
* MICRO: P copies of layer 0's weight-gradient collective, issued at 0.
* The model-parallel loops (HYBRID_TRANSFORMER and its FWD_IN_BCKWD variant,
  HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED, MODEL): forward(i)
  computes, then runs its collective and waits for it; backward i = L-1..0:
  IG(i), its collective (non-blocking; not for layer 0 but in the
  HYBRID_TRANSFORMER ones), WG(i), its collective (non-blocking; none in
  MODEL); IG(i-1) waits for layer i's input-gradient collective. The
  FWD_IN_BCKWD variant recomputes the forward from the last checkpoint below
  each initiating layer before its IG.
* HYBRID_DLRM (and HYBRID_DLRM_ENHANCED): forward(i) computes and issues
  layer 0's all-to-all (non-blocking, highest priority); after layer
  ``last_bottom`` it waits for it; backward: WG(i) and its collective, IG(i)
  for i > 0, and after IG(last_bottom + 1) layer 0's backward all-to-all,
  which the pass waits for (not in ENHANCED).
* DISTRIBUTED_INFERENCE: forward only, each collective waited for.

A collective is done when its last chunk ends plus its layer's update
delay; whatever waits for it waits that long. Collectives get chunks as
ASTRA-sim's ``preferred-dataset-splits`` and priorities as its
``scheduling-policy`` gives them (``Sys::get_priority``: LIFO counts up,
FIFO down, from one counter read before it moves): forward collectives and
DATA, MICRO and DLRM weight gradients the policy's, input gradients LIFO,
the other weight gradients FIFO, DLRM's all-to-alls the highest. An
all-gather's size in the file is the shard each NPU starts with; the
instance's is its output. A collective with no dimension to run on draws its
priority and is dropped, as in ASTRA-sim. A final zero-length compute task
``end`` waits for the last pass's collectives and compute, so the makespan is
the time of the run. ASTRA-sim's one cycle per workload state change and its
integer nanoseconds are not modelled (well below the tolerance held to).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from themis_opt.cost import group_size, growth, performed
from themis_opt.errors import InputError
from themis_opt.instance import After, Instance, Kind, Network, Op
from themis_opt.workloads.graph import TaskGraph
from themis_opt.workloads.layers import (
    DLRMS,
    HIGHEST_PRIORITY,
    MODEL_PARALLEL,
    TRANSFORMERS,
    UNRUNNABLE_TYPE,
    Workload,
    check_workload,
)


def split_dimensions(network: Network, group: int) -> tuple[Network, tuple[int, ...], tuple[int, ...], int | None]:
    """ASTRA-sim's ``Sys::break_dimension``: (the network, the model-parallel dimensions, the
    data-parallel ones, the dimension split in two or ``None``).

    The model-parallel dimensions are the first ones whose sizes multiply to
    ``group``. Where the product passes ``group`` inside dimension d, d is
    split in two: the first ``group / (product below d)`` of its NPUs (one
    position apart) and the rest (that many positions apart), each a
    dimension of its own with d's bandwidth, topology and algorithms. A
    group of 1 or larger than the network has no model-parallel dimensions.

    Raises
    ------
    InputError
        If ``group`` splits a dimension unevenly (ASTRA-sim 1.0 never ends).
    """
    dims = network.dimensions
    everything = tuple(range(network.num_dims))
    if group == 1 or group > network.num_npus:
        return network, (), everything, None
    below = 1
    for d, dim in enumerate(dims):
        if below * dim.size < group:
            below *= dim.size
            continue
        if below * dim.size == group:
            return network, everything[: d + 1], everything[d + 1 :], None
        inner = group // below
        if group % below or dim.size % inner or dim.carved:
            sizes = "x".join(str(x.size) for x in dims)
            raise InputError(
                "model_parallel_NPU_group",
                f"{group} does not split dimension {d} of {sizes} into whole parts (ASTRA-sim 1.0 never ends)",
            )
        return network.split(d, inner), tuple(range(d + 1)), tuple(range(d + 1, network.num_dims + 1)), d
    raise AssertionError("unreachable: the product reaches every group up to the NPU count")  # pragma: no cover


def all_gather_factor(network: Network, dims: tuple[int, ...]) -> float:
    """What an all-gather over ``dims`` multiplies its shard by."""
    factor = 1.0
    for d in dims:
        algorithm = network.dimensions[d].algorithm_for(Kind.ALL_GATHER)
        factor *= growth(performed(Op.ALL_GATHER, algorithm), group_size(network, Kind.ALL_GATHER, d))
    return factor


def runs_somewhere(network: Network, kind: Kind, dims: tuple[int, ...]) -> bool:
    """Whether a ``kind`` collective over ``dims`` has a dimension to run on (see ``Instance.active_dims``)."""
    if network.flattened(kind):
        return 0 in dims and network.num_npus >= 2
    return any(network.dimensions[d].size >= 2 for d in dims)


# ---------------------------------------------------------------------- graphs


@dataclass(frozen=True)
class Cut:
    """How a workload's collectives are made from its sizes.

    Parameters
    ----------
    chunks
        ASTRA-sim's ``preferred-dataset-splits``.
    astra
        Cut ``size // chunks`` bytes at a time as ASTRA-sim does (the last
        chunk takes what is left, so there may be more chunks); otherwise
        ``chunks`` chunks, the last one taking the remainder.
    policy
        ``LIFO`` or ``FIFO``: ASTRA-sim's ``scheduling-policy``.
    spans
        Per kind, how many dimensions its collectives may use (ASTRA-sim's
        implementation lists: a shorter list leaves the outer dimensions out).
    """

    chunks: int = 64
    astra: bool = False
    policy: str = "LIFO"
    spans: Mapping[Kind, int] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.chunks, bool) or not isinstance(self.chunks, int) or self.chunks < 1:
            raise InputError("chunks", f"must be an integer >= 1, got {self.chunks!r}")
        if self.policy not in ("LIFO", "FIFO"):
            raise InputError("policy", f"must be LIFO or FIFO, got {self.policy!r}")


def task_graph(
    workload: Workload,
    network: Network,
    *,
    passes: int = 2,
    chunks: int = 64,
    policy: str = "LIFO",
    name: str | None = None,
    cut: Cut | None = None,
) -> Instance:
    """The task-graph instance of ``workload`` on ``network`` (see the module's docstring).

    ``cut`` (default: ``chunks`` even chunks, priorities by ``policy``) says
    how collectives are cut and where they may run. A HYBRID_TRANSFORMER
    group that splits a dimension gives the instance a network of one more
    dimension (:func:`split_dimensions`).
    """
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
        raise InputError("passes", f"must be an integer >= 1, got {passes!r}")
    cut = cut or Cut(chunks, policy=policy)
    check_workload(workload)
    everything = tuple(range(network.num_dims))
    model, data = everything, everything
    if workload.parallelism in TRANSFORMERS:
        network, model, data, split = split_dimensions(network, workload.model_parallel_group or 1)
        if split is not None and cut.spans is not None:
            cut = _spans_split(cut, split)
    builder = _Builder(workload, network, cut, model, data)
    for p in range(passes):
        builder.run_pass(p)
    builder.finish()
    metadata = (
        ("parallelism", workload.parallelism),
        ("passes", str(passes)),
        ("workload", workload.name),
        ("iteration_start", builder.first_of_pass.get(passes - 1, "")),
    )
    return builder.graph.instance(network, name or workload.name, metadata)


def _spans_split(cut: Cut, split: int) -> Cut:
    """``cut`` after dimension ``split`` became two: a list that covered it now covers both halves."""
    spans = dict(cut.spans or {})
    for kind, span in spans.items():
        if span <= split:
            raise InputError(
                f"{kind.value}-implementation",
                f"names {span} dimension{'s' if span != 1 else ''}, but the model-parallel group splits "
                f"dimension {split} "
                "(ASTRA-sim 1.0 crashes)",
            )
        spans[kind] = span + 1
    return dataclasses.replace(cut, spans=spans)


class _Builder:
    """Appends a workload's tasks in program order."""

    def __init__(
        self, workload: Workload, network: Network, cut: Cut, model: tuple[int, ...], data: tuple[int, ...]
    ) -> None:
        self.workload = workload
        self.network = network
        self.cut = cut
        self.everything = tuple(range(network.num_dims))
        self.model, self.data = model, data
        self.graph = TaskGraph()
        self.last_compute: str | None = None
        self.counter = 0
        self.first_of_pass: dict[int, str] = {}
        self.last_pass: list[tuple[str, float]] = []
        self.wg_done: dict[int, tuple[str, float]] = {}  # layer -> (its latest weight-gradient collective, delay)
        self.carry: list[After] = []  # what the next pass's first compute waits for (inference's last collective)

    # ------------------------------------------------------------ pieces

    def priority(self, scheme: str) -> int:
        """ASTRA-sim's ``Sys::get_priority``: read the counter, then move it (``None``: the policy's way)."""
        if scheme == "HIGHEST":
            return HIGHEST_PRIORITY
        scheme = self.cut.policy if scheme == "None" else scheme
        value = self.counter
        self.counter += 1 if scheme == "LIFO" else -1
        return value

    def compute(self, task_id: str, duration: float, waits: list[After]) -> str:
        after = ([After(self.last_compute)] if self.last_compute else []) + waits
        self.last_compute = self.graph.compute(task_id, duration, after)
        return task_id

    def scope(self, i: int, part: str) -> tuple[int, ...]:
        """The dimensions layer ``i``'s ``part`` collective runs over (ASTRA-sim's involved dimensions)."""
        parallelism = self.workload.parallelism
        if parallelism == "HYBRID_CUSTOMIZED":
            parallelism = self.workload.layers[i].parallelism or ""
        everything, rest = self.everything, self.everything[1:]
        match parallelism:
            case "DATA" | "MICRO":
                return everything if part == "wg" else ()
            case "HYBRID_DLRM" | "HYBRID_DLRM_ENHANCED":
                top = self.workload.parallelism in DLRMS and i == 0  # layer 0 of a DLRM file: everything
                return everything if part == "wg" or top else ()
            case "MODEL" | "DISTRIBUTED_INFERENCE":
                return () if part == "wg" else everything
            case "HYBRID_DATA_MODEL":
                return rest if part == "wg" else (0,)
            case "HYBRID_MODEL_DATA":
                return (0,) if part == "wg" else rest
            case "HYBRID_TRANSFORMER" | "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
                return self.data if part == "wg" else self.model
            case _:
                return ()

    def collective(self, i: int, part: str, scheme: str, p: int, *, tag: str = "coll") -> After | None:
        """Issue layer ``i``'s ``part`` collective (drawing its priority); what waits for it waits this.

        ``None`` when the layer has none there, or it has no dimension to run on.
        """
        layer = self.workload.layers[i]
        kind: Kind | None = getattr(layer, f"{part}_type")
        if part in layer.unrunnable:
            raise InputError(
                f"layer {layer.name} ({part})", f"{UNRUNNABLE_TYPE} is not a collective ASTRA-sim 1.0 can run"
            )
        if kind is None:
            return None
        prio = self.priority(scheme)
        dims = self.scope(i, part)
        span = self.cut.spans.get(kind) if self.cut.spans is not None else None
        if span is not None:
            dims = tuple(d for d in dims if d < span)
        size: int = getattr(layer, f"{part}_size")
        if not runs_somewhere(self.network, kind, dims):
            return None
        if self.cut.astra and size < self.cut.chunks:
            raise InputError(
                f"layer {layer.name} ({part})",
                f"a {kind.value} of {size} bytes cannot be cut into {self.cut.chunks} chunks "
                "(ASTRA-sim 1.0 never finishes it)",
            )
        if size < 1:  # nothing to move
            return None
        factor = all_gather_factor(self.network, dims) if kind is Kind.ALL_GATHER else 1.0
        task_id = f"{part}_{tag}.{i}.p{p}"
        if self.cut.astra:  # size // splits bytes at a time, as long as some are left
            piece = size // self.cut.chunks
            count = -(-size // piece)
            chunk_bytes: int | None = round(piece * factor)
        else:
            count, chunk_bytes = min(self.cut.chunks, round(size * factor)), None
        total = round(size * factor)
        self.graph.collective(
            task_id,
            kind,
            total,
            count,
            dims,
            [self.last_compute] if self.last_compute else [],
            priority=prio,
            chunk_bytes=None if chunk_bytes == total // count else chunk_bytes,
        )
        done = After(task_id, layer.update_delay)
        self.last_pass.append((task_id, layer.update_delay))
        return done

    def wait_wg(self, p: int, i: int) -> list[After]:
        """Forward(i) waits for layer i's latest weight-gradient collective, plus its delay."""
        if p == 0 or i not in self.wg_done:
            return []
        coll, lag = self.wg_done[i]
        return [After(coll, lag)]

    def weight_gradient(self, p: int, i: int, scheme: str) -> None:
        done = self.collective(i, "wg", scheme, p)
        if done is not None:
            self.wg_done[i] = (done.task, done.lag_ns)

    # ------------------------------------------------------------ loops

    def run_pass(self, p: int) -> None:
        self.last_pass = []
        self.first_of_pass[p] = f"fwd.0.p{p}"
        parallelism = self.workload.parallelism
        if parallelism == "MICRO":
            self.first_of_pass[p] = ""
            self.collective(0, "wg", "None", p)
            return
        if parallelism == "DATA":
            self.data_pass(p)
        elif parallelism in MODEL_PARALLEL:
            self.model_parallel_pass(p)
        elif parallelism in DLRMS:
            self.dlrm_pass(p)
        elif parallelism == "DISTRIBUTED_INFERENCE":
            self.carry = self.forward(p, range(len(self.workload.layers)), self.carry)
        else:  # pragma: no cover - parse_workload admits no other
            raise InputError("parallelism", f"unsupported {parallelism}")

    def data_pass(self, p: int) -> None:
        layers = self.workload.layers
        for i, layer in enumerate(layers):
            self.compute(f"fwd.{i}.p{p}", layer.fwd_compute, self.wait_wg(p, i))
        for i in reversed(range(len(layers))):
            self.compute(f"wg.{i}.p{p}", layers[i].wg_compute, [])
            self.weight_gradient(p, i, "None")
            if i > 0:
                self.compute(f"ig.{i}.p{p}", layers[i].ig_compute, [])

    def forward(self, p: int, layers: range, waits: list[After], *, tag: str = "") -> list[After]:
        """Forward(i) for i in ``layers``: compute, then its collective, waited for; what the next waits for."""
        for i in layers:
            name = f"fwd{tag}.{i}.p{p}"
            self.compute(name, self.workload.layers[i].fwd_compute, self.wait_wg(p, i) + waits)
            done = self.collective(i, "fwd", "None", p, tag=f"coll{tag}")
            waits = [done] if done is not None else []
        return waits

    def model_parallel_pass(self, p: int) -> None:
        workload = self.workload
        layers = workload.layers
        pending = self.forward(p, range(len(layers)), [])
        transformer = workload.parallelism in TRANSFORMERS
        for i in reversed(range(len(layers))):
            if i in workload.initiators:  # recompute from the checkpoint below, then this IG
                start = max(c for c in workload.checkpoints if c < i)
                pending = self.forward(p, range(start, i), pending, tag=f"_re{i}")
            self.compute(f"ig.{i}.p{p}", layers[i].ig_compute, pending)
            pending = []
            if i > 0 or transformer:
                done = self.collective(i, "ig", "LIFO", p)
                pending = [done] if done is not None else []
            self.compute(f"wg.{i}.p{p}", layers[i].wg_compute, [])
            if workload.parallelism != "MODEL":
                self.weight_gradient(p, i, "FIFO")
        if pending:  # layer 0's input-gradient collective ends the pass
            self.compute(f"ig_wait.p{p}", 0.0, pending)

    def dlrm_pass(self, p: int) -> None:
        workload = self.workload
        layers = workload.layers
        bottom = workload.last_bottom or 0
        embedding: After | None = None
        waits: list[After] = []
        for i, layer in enumerate(layers):
            self.compute(f"fwd.{i}.p{p}", layer.fwd_compute, self.wait_wg(p, i) + waits)
            waits = []
            if layer.fwd_type is Kind.ALL_TO_ALL:
                done = self.collective(i, "fwd", "HIGHEST", p, tag="a2a")
                if i == 0:
                    embedding = done
            elif i == bottom and embedding is not None:  # ASTRA-sim waits only where it issues nothing
                waits = [embedding]
        backward: After | None = None
        for i in reversed(range(len(layers))):
            self.compute(f"wg.{i}.p{p}", layers[i].wg_compute, waits)
            waits = []
            self.weight_gradient(p, i, "None")
            if i == 0:
                if backward is not None and workload.parallelism == "HYBRID_DLRM":
                    self.compute(f"ig_wait.p{p}", 0.0, [backward])
                break
            self.compute(f"ig.{i}.p{p}", layers[i].ig_compute, [])
            if i == bottom + 1 and layers[0].ig_type is Kind.ALL_TO_ALL:
                backward = self.collective(0, "ig", "HIGHEST", p, tag="a2a")

    def finish(self) -> None:
        if self.workload.parallelism == "MICRO":
            return
        waits = [After(coll, lag) for coll, lag in self.last_pass]
        self.compute("end", 0.0, waits)
