"""Training iterations: ASTRA-sim 1.0 workload files (and the model zoo) as task graphs.

A workload is a list of layers, each with forward, input-gradient and
weight-gradient compute times (cycles = ns) and collectives (type and size in
bytes per NPU). :func:`task_graph` turns it into an instance whose tasks follow
ASTRA-sim 1.0's loops (the rules of the project's workloads reference):

* DATA: per pass, forward i = 0..L-1; backward i = L-1..0: WG(i), then its
  weight-gradient collective (non-blocking), then IG(i) (not for layer 0).
  Forward(i) of the next pass waits for layer i's collective of this pass,
  plus the layer's update delay. Compute runs in program order.
* HYBRID_TRANSFORMER: forward(i) computes, then runs its collective over the
  model-parallel dimensions and waits for it; backward i = L-1..0: IG(i), its
  collective (model-parallel, non-blocking), WG(i), its collective (data-
  parallel, non-blocking); IG(i-1) waits for layer i's input-gradient
  collective.
* HYBRID_DLRM: forward(i) computes and issues its all-to-all (if any,
  non-blocking, highest priority); after layer ``last_bottom`` it waits for
  layer 0's forward all-to-all; backward i = L-1..0: WG(i) and its collective;
  IG(i) for i > 0, and after IG(last_bottom + 1) layer 0's backward all-to-all
  (highest priority); the pass ends when that all-to-all is done.
* MICRO: P copies of layer 0's weight-gradient collective, issued at 0.

Collectives get chunks as ASTRA-sim's ``preferred-dataset-splits`` and
priorities as its ``scheduling-policy`` gives them: LIFO, one higher for each
collective issued (in program order), FIFO one lower; all-to-alls of DLRM the
highest; in HYBRID_TRANSFORMER input-gradient collectives draw LIFO and
weight-gradient ones FIFO priorities from one shared counter. An all-gather's
size in the file is the shard each NPU starts with; the instance's is its
output. A final zero-length compute task ``end`` waits for the last pass's
collectives (plus update delays) and compute, so the makespan is the time of
the run. ASTRA-sim's one cycle per workload state change and its integer
nanoseconds are not modelled (well below the tolerance held to).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from themis_opt.errors import InputError
from themis_opt.instance import After, Collective, Compute, Instance, Kind, Network, Task

PARALLELISMS = ("DATA", "HYBRID_TRANSFORMER", "HYBRID_DLRM", "MICRO")
UNSUPPORTED = (
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_CUSTOMIZED",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_DLRM_ENHANCED",
    "DISTRIBUTED_INFERENCE",
)
TYPES = {
    "ALLREDUCE": Kind.ALL_REDUCE,
    "ALLGATHER": Kind.ALL_GATHER,
    "REDUCESCATTER": Kind.REDUCE_SCATTER,
    "ALLTOALL": Kind.ALL_TO_ALL,
}
HIGHEST_PRIORITY = 100_000_000  # ASTRA-sim's SchedulingPolicy::HIGHEST


@dataclass(frozen=True)
class Layer:
    """One layer of a workload: compute times (ns) and collectives (kind or None, bytes as the file gives them)."""

    name: str
    fwd_compute: float
    fwd_type: Kind | None
    fwd_size: int
    ig_compute: float
    ig_type: Kind | None
    ig_size: int
    wg_compute: float
    wg_type: Kind | None
    wg_size: int
    update_delay: float


@dataclass(frozen=True)
class Workload:
    """A parsed workload: its parallelism, layers and header values."""

    parallelism: str
    layers: tuple[Layer, ...]
    model_parallel_group: int | None = None
    last_bottom: int | None = None
    name: str = "workload"


def parse_workload(path: str | Path) -> Workload:
    """Read an ASTRA-sim 1.0 workload file (tokens separated by any white space).

    Raises
    ------
    InputError
        Naming the file, line and token of the first problem.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(str(path), f"cannot be read ({error})") from None
    tokens = [(number, token) for number, line in enumerate(text.splitlines(), 1) for token in line.split()]
    position = 0

    def take(what: str) -> tuple[int, str]:
        nonlocal position
        if position >= len(tokens):
            raise InputError(f"{path}: end of file", f"expected {what}")
        position += 1
        return tokens[position - 1]

    def where(entry: tuple[int, str]) -> str:
        return f"{path}: line {entry[0]}, token {entry[1]!r}"

    def integer(what: str, minimum: int = 0) -> int:
        entry = take(what)
        try:
            value = int(entry[1])
        except ValueError:
            raise InputError(where(entry), f"{what} must be an integer") from None
        if value < minimum:
            raise InputError(where(entry), f"{what} must be >= {minimum}")
        return value

    def number(what: str) -> float:
        entry = take(what)
        try:
            value = float(entry[1])
        except ValueError:
            raise InputError(where(entry), f"{what} must be a number") from None
        if not math.isfinite(value) or value < 0:
            raise InputError(where(entry), f"{what} must be a finite number >= 0")
        return value

    head = take("the parallelism")
    parallelism = head[1]
    if parallelism in UNSUPPORTED:
        raise InputError(
            where(head), f"parallelism {parallelism} is not supported (supported: {', '.join(PARALLELISMS)})"
        )
    if parallelism not in PARALLELISMS:
        raise InputError(where(head), f"unknown parallelism (supported: {', '.join(PARALLELISMS)})")
    group = bottom = None
    if parallelism == "HYBRID_TRANSFORMER":
        take("the model-parallel group label")
        group = integer("the model-parallel group size", 1)
    elif parallelism == "HYBRID_DLRM":
        bottom = integer("the last bottom-MLP layer")
    count = integer("the layer count", 1)
    layers = []
    for _ in range(count):
        name = take("a layer name")[1]
        take("the reserved token")
        parts: list[tuple[float, Kind | None, int]] = []
        for part in ("fwd", "ig", "wg"):
            compute = number(f"{name}'s {part} compute")
            kind = TYPES.get(take(f"{name}'s {part} type")[1])  # NONE or anything else: no collective
            parts.append((compute, kind, integer(f"{name}'s {part} size")))
        (fc, ft, fs), (ic, it, is_), (wc, wt, ws) = parts
        layers.append(Layer(name, fc, ft, fs, ic, it, is_, wc, wt, ws, number(f"{name}'s update delay")))
    if parallelism == "HYBRID_DLRM" and bottom is not None and bottom >= count:
        raise InputError(f"{path}: header", f"last bottom layer {bottom} is not below the layer count {count}")
    return Workload(parallelism, tuple(layers), group, bottom, path.stem)


def _split_dimensions(network: Network, group: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(model-parallel dimensions, data-parallel ones): the first dimensions whose sizes multiply to ``group``."""
    product, model = 1, []
    for d, dim in enumerate(network.dimensions):
        if product >= group:
            break
        product *= dim.size
        model.append(d)
    if product != group:
        sizes = "x".join(str(d.size) for d in network.dimensions)
        raise InputError(
            "model_parallel_NPU_group",
            f"{group} is not a product of the first dimensions' sizes ({sizes}); ASTRA-sim would split a dimension",
        )
    rest = tuple(d for d in range(network.num_dims) if d not in model)
    return tuple(model), rest


def task_graph(
    workload: Workload,
    network: Network,
    *,
    passes: int = 2,
    chunks: int = 64,
    policy: str = "LIFO",
    name: str | None = None,
) -> Instance:
    """The task-graph instance of ``workload`` on ``network`` (see the module's docstring)."""
    if passes < 1:
        raise InputError("--passes", f"must be >= 1, got {passes}")
    if chunks < 1:
        raise InputError("--chunks", f"must be >= 1, got {chunks}")
    if policy not in ("LIFO", "FIFO"):
        raise InputError("--policy", f"must be LIFO or FIFO, got {policy!r}")
    builder = _Builder(workload, network, chunks, policy)
    layers = workload.layers
    everything = tuple(range(network.num_dims))
    model, data = everything, everything
    if workload.parallelism == "HYBRID_TRANSFORMER":
        model, data = _split_dimensions(network, workload.model_parallel_group or 1)
    done: dict[int, tuple[str, float]] = {}  # layer -> (collective the next forward waits for, lag)
    for p in range(passes):
        match workload.parallelism:
            case "MICRO":
                layer = layers[0]
                if layer.wg_type is not None:
                    builder.collective(f"{layer.name}.wg.p{p}", layer.wg_type, layer.wg_size, everything, [], lag=0)
                continue
            case "DATA":
                builder.data_pass(p, done, everything)
            case "HYBRID_TRANSFORMER":
                builder.transformer_pass(p, done, model, data)
            case "HYBRID_DLRM":
                builder.dlrm_pass(p, done, everything)
            case other:  # pragma: no cover - parse_workload admits no other
                raise InputError("parallelism", f"unsupported {other}")
    if workload.parallelism != "MICRO":
        builder.finish(passes)
    metadata = (
        ("parallelism", workload.parallelism),
        ("passes", str(passes)),
        ("workload", workload.name),
        ("iteration_start", builder.first_of_pass.get(passes - 1, "")),
    )
    return Instance(network, tuple(builder.tasks), name or workload.name, metadata)


class _Builder:
    """Appends a workload's tasks in program order."""

    def __init__(self, workload: Workload, network: Network, chunks: int, policy: str) -> None:
        self.workload = workload
        self.network = network
        self.chunks = chunks
        self.policy = policy
        self.tasks: list[Task] = []
        self.last_compute: str | None = None
        self.counter = 0
        self.first_of_pass: dict[int, str] = {}
        self.last_pass_collectives: list[tuple[str, float]] = []

    def priority(self, scheme: str) -> int:
        """ASTRA-sim's Sys::get_priority: LIFO counts up, FIFO down, from one counter (post-increment)."""
        value = self.counter
        self.counter += 1 if scheme == "LIFO" else -1
        return value

    def compute(self, task_id: str, duration: float, waits: list[After]) -> str:
        after = ([After(self.last_compute)] if self.last_compute else []) + waits
        self.tasks.append(Compute(duration, task_id, after=tuple(after)))
        self.last_compute = task_id
        return task_id

    def collective(
        self,
        task_id: str,
        kind: Kind,
        size: int,
        dims: tuple[int, ...],
        after: list[str],
        *,
        lag: float,
        priority: int | None = None,
    ) -> str | None:
        npus = math.prod(self.network.dimensions[d].size for d in dims)
        if not dims or npus < 2 or size < 1:
            return None
        total = size * npus if kind is Kind.ALL_GATHER else size  # the file gives the all-gather's shard
        prio = self.priority(self.policy) if priority is None else priority
        self.tasks.append(
            Collective(
                kind,
                total,
                min(self.chunks, total),
                dimensions=dims,
                id=task_id,
                priority=prio,
                after=tuple(After(a) for a in after),
            )
        )
        self.last_pass_collectives.append((task_id, lag))
        return task_id

    def weight_gradient(
        self, p: int, i: int, dims: tuple[int, ...], wg: str, done: dict[int, tuple[str, float]], scheme: str = ""
    ) -> None:
        """Issue layer i's weight-gradient collective after ``wg`` (non-blocking); the next pass's
        forward(i) waits for it plus the layer's update delay.
        """
        layer = self.workload.layers[i]
        if layer.wg_type is None:
            return
        coll = self.collective(
            f"wg_coll.{i}.p{p}",
            layer.wg_type,
            layer.wg_size,
            dims,
            [wg],
            lag=layer.update_delay,
            priority=self.priority(scheme) if scheme else None,
        )
        if coll:
            done[i] = (coll, layer.update_delay)

    def _waits(self, p: int, i: int, done: dict[int, tuple[str, float]]) -> list[After]:
        if p == 0 or i not in done:
            return []
        coll, lag = done[i]
        return [After(coll, lag)]

    def _start_pass(self, p: int) -> None:
        self.last_pass_collectives = []
        self.first_of_pass[p] = f"fwd.0.p{p}"

    def data_pass(self, p: int, done: dict[int, tuple[str, float]], dims: tuple[int, ...]) -> None:
        self._start_pass(p)
        layers = self.workload.layers
        for i, layer in enumerate(layers):
            self.compute(f"fwd.{i}.p{p}", layer.fwd_compute, self._waits(p, i, done))
        for i in reversed(range(len(layers))):
            layer = layers[i]
            wg = self.compute(f"wg.{i}.p{p}", layer.wg_compute, [])
            self.weight_gradient(p, i, dims, wg, done)
            if i > 0:
                self.compute(f"ig.{i}.p{p}", layer.ig_compute, [])

    def transformer_pass(
        self, p: int, done: dict[int, tuple[str, float]], model: tuple[int, ...], data: tuple[int, ...]
    ) -> None:
        self._start_pass(p)
        layers = self.workload.layers
        blocking: list[After] = []
        for i, layer in enumerate(layers):
            fwd = self.compute(f"fwd.{i}.p{p}", layer.fwd_compute, self._waits(p, i, done) + blocking)
            blocking = []
            if layer.fwd_type is not None:
                coll = self.collective(f"fwd_coll.{i}.p{p}", layer.fwd_type, layer.fwd_size, model, [fwd], lag=0)
                blocking = [After(coll)] if coll else []
        pending: list[After] = blocking
        for i in reversed(range(len(layers))):
            layer = layers[i]
            ig = self.compute(f"ig.{i}.p{p}", layer.ig_compute, pending)
            pending = []
            if layer.ig_type is not None:
                coll = self.collective(
                    f"ig_coll.{i}.p{p}",
                    layer.ig_type,
                    layer.ig_size,
                    model,
                    [ig],
                    lag=0,
                    priority=self.priority("LIFO"),
                )
                pending = [After(coll)] if coll else []
            wg = self.compute(f"wg.{i}.p{p}", layer.wg_compute, [])
            self.weight_gradient(p, i, data, wg, done, scheme="FIFO")
        if pending:  # layer 0's input-gradient collective ends the pass
            self.compute(f"ig_wait.p{p}", 0.0, pending)

    def dlrm_pass(self, p: int, done: dict[int, tuple[str, float]], dims: tuple[int, ...]) -> None:
        self._start_pass(p)
        layers = self.workload.layers
        bottom = self.workload.last_bottom or 0
        embedding_fwd: str | None = None
        waits: list[After] = []
        for i, layer in enumerate(layers):
            fwd = self.compute(f"fwd.{i}.p{p}", layer.fwd_compute, self._waits(p, i, done) + waits)
            waits = []
            if layer.fwd_type is Kind.ALL_TO_ALL:
                coll = self.collective(
                    f"fwd_a2a.{i}.p{p}", Kind.ALL_TO_ALL, layer.fwd_size, dims, [fwd], lag=0, priority=HIGHEST_PRIORITY
                )
                if i == 0:
                    embedding_fwd = coll
            if i == bottom and embedding_fwd:
                waits = [After(embedding_fwd)]
        embedding_ig: str | None = None
        for i in reversed(range(len(layers))):
            layer = layers[i]
            wg = self.compute(f"wg.{i}.p{p}", layer.wg_compute, waits)
            waits = []
            self.weight_gradient(p, i, dims, wg, done)
            if i == 0:
                if embedding_ig:
                    self.compute(f"ig_wait.p{p}", 0.0, [After(embedding_ig)])
                break
            ig = self.compute(f"ig.{i}.p{p}", layer.ig_compute, [])
            first = layers[0]
            if i == bottom + 1 and first.ig_type is Kind.ALL_TO_ALL:
                embedding_ig = self.collective(
                    f"ig_a2a.0.p{p}", Kind.ALL_TO_ALL, first.ig_size, dims, [ig], lag=0, priority=HIGHEST_PRIORITY
                )

    def finish(self, passes: int) -> None:
        waits = [After(coll, lag) for coll, lag in self.last_pass_collectives]
        self.compute("end", 0.0, waits)
