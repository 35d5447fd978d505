"""ASTRA-sim 1.0's workload files: the text format, read into a :class:`Workload` (layers of compute and collectives).

The first line names the parallelism (with a model-parallel group size for
the transformer ones), the second the number of layers, then one line per
layer: its name, a reserved field, then forward, input-gradient and
weight-gradient compute time (cycles = ns), each with its collective's type
and size in bytes per NPU, and the update delay. How ASTRA-sim 1.0 runs a
workload, as a task graph, is :mod:`themis_opt.workloads.astra1`.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from themis_opt.errors import InputError
from themis_opt.instance import Kind

PARALLELISMS = (
    "DATA",
    "MICRO",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_CUSTOMIZED",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "DISTRIBUTED_INFERENCE",
)
TRANSFORMERS = ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD")  # model-parallel group from the header
MODEL_PARALLEL = ("MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_CUSTOMIZED", *TRANSFORMERS)
DLRMS = ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")
# HYBRID_CUSTOMIZED layers name their own parallelism; these are the ones ASTRA-sim 1.0 runs per layer
LAYER_PARALLELISMS = (
    "DATA",
    "MICRO",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "MODEL",
    "DISTRIBUTED_INFERENCE",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
)
TYPES = {
    "ALLREDUCE": Kind.ALL_REDUCE,
    "ALLGATHER": Kind.ALL_GATHER,
    "REDUCESCATTER": Kind.REDUCE_SCATTER,
    "ALLTOALL": Kind.ALL_TO_ALL,
}
UNRUNNABLE_TYPE = "ALLREDUCEALLTOALL"  # parsed by ASTRA-sim 1.0, which exits when one is issued
HIGHEST_PRIORITY = 100_000_000  # ASTRA-sim's SchedulingPolicy::HIGHEST


@dataclass(frozen=True)
class Layer:
    """One layer of a workload: compute times (ns) and collectives (kind or None, bytes as the file gives them).

    ``parallelism`` is a HYBRID_CUSTOMIZED layer's own (its 13th token);
    ``unrunnable`` names the parts (``fwd``, ``ig``, ``wg``) whose type is one
    ASTRA-sim parses but cannot run.
    """

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
    parallelism: str | None = None
    unrunnable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workload:
    """A parsed workload: its parallelism, layers and header values.

    ``checkpoints`` and ``initiators`` are HYBRID_TRANSFORMER_FWD_IN_BCKWD's:
    the layers the forward is recomputed from, and the layers whose IG starts
    a recomputation. ``notes`` say what was read as ASTRA-sim reads it but is
    worth knowing (a collective type it does not know, read as none).
    """

    parallelism: str
    layers: tuple[Layer, ...]
    model_parallel_group: int | None = None
    last_bottom: int | None = None
    name: str = "workload"
    checkpoints: tuple[int, ...] = ()
    initiators: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()  # what was read as ASTRA-sim reads it, worth knowing (a type it reads as none)


def parse_workload(path: str | Path) -> Workload:
    """Read an ASTRA-sim 1.0 workload file (tokens separated by any white space).

    Raises
    ------
    InputError
        Naming the file, line and token of the first problem.
    """
    from themis_opt.fileio import read_text

    path = Path(path)
    text = read_text(path)  # at most the input limit
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
    if parallelism not in PARALLELISMS:
        raise InputError(where(head), f"unknown parallelism (ASTRA-sim 1.0 has {', '.join(PARALLELISMS)})")
    group = bottom = None
    checkpoints: list[int] = []
    initiators: list[int] = []
    if parallelism in TRANSFORMERS:
        take("the model-parallel group label")
        group = integer("the model-parallel group size", 1)
    if parallelism == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        take("the checkpoints label")
        checkpoints = [integer("a checkpoint layer") for _ in range(integer("the checkpoint count"))]
        take("the checkpoint initiates label")
        initiators = [integer("an initiating layer") for _ in range(integer("the initiating layer count"))]
    elif parallelism in DLRMS:
        bottom = integer("the last bottom-MLP layer")
    count = integer("the layer count", 1)
    layers = []
    notes: list[str] = []
    for _ in range(count):
        name = take("a layer name")[1]
        take("the reserved token")
        parts: list[tuple[float, Kind | None, int]] = []
        unrunnable = []
        for part in ("fwd", "ig", "wg"):
            compute = number(f"{name}'s {part} compute")
            type_entry = take(f"{name}'s {part} type")
            kind_token = type_entry[1]
            if kind_token == UNRUNNABLE_TYPE:
                unrunnable.append(part)
            elif kind_token not in TYPES and kind_token != "NONE":  # a misspelt type drops a collective
                notes.append(
                    f"{path.name}: line {type_entry[0]}: layer {name}'s {part} type {kind_token!r} is no collective "
                    f"ASTRA-sim 1.0 knows ({', '.join(TYPES)}): none, as ASTRA-sim reads it"
                )
            parts.append((compute, TYPES.get(kind_token), integer(f"{name}'s {part} size")))
        (fc, ft, fs), (ic, it, is_), (wc, wt, ws) = parts
        delay = number(f"{name}'s update delay")
        own = None
        if parallelism == "HYBRID_CUSTOMIZED":
            entry = take(f"{name}'s parallelism (HYBRID_CUSTOMIZED layers name one)")
            own = entry[1]
            if own not in LAYER_PARALLELISMS and (ft or it or wt or unrunnable):
                raise InputError(
                    where(entry),
                    f"layer {name}'s parallelism must be one of {', '.join(LAYER_PARALLELISMS)} "
                    "(ASTRA-sim 1.0 crashes on its collectives otherwise)",
                )
        layers.append(Layer(name, fc, ft, fs, ic, it, is_, wc, wt, ws, delay, own, tuple(unrunnable)))
    if position < len(tokens):
        extra = tokens[position]
        raise InputError(where(extra), f"unexpected after the {count} layers the file announces")
    workload = Workload(
        parallelism, tuple(layers), group, bottom, path.stem, tuple(checkpoints), tuple(initiators), tuple(notes)
    )
    try:
        check_workload(workload)
    except InputError as error:
        raise InputError(f"{path}: {error.path}", error.problem) from None
    return workload


def check_workload(workload: Workload) -> None:
    """Raise :class:`InputError` where ASTRA-sim 1.0 would crash or never end on ``workload``'s header."""
    count = len(workload.layers)
    if workload.parallelism in DLRMS and workload.last_bottom is not None and workload.last_bottom >= count:
        raise InputError("header", f"last bottom layer {workload.last_bottom} is not below the layer count {count}")
    if workload.parallelism != "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        return
    for layer in (*workload.checkpoints, *workload.initiators):
        if layer >= count:
            raise InputError("header", f"checkpoint layer {layer} is not below the layer count {count}")
    for i in workload.initiators:
        below = [c for c in workload.checkpoints if c < i]
        if not below:
            raise InputError("header", f"initiating layer {i} has no checkpoint below it (ASTRA-sim 1.0 crashes)")
        if any(max(below) < j <= i for j in workload.initiators if j != i):
            raise InputError(
                "header",
                f"initiating layer {i} has another initiating layer above its checkpoint {max(below)} "
                "(ASTRA-sim 1.0 recomputes for ever)",
            )


def _float32(value: float) -> float:
    """``value`` as ASTRA-sim's float command-line options hold it."""
    single: float = struct.unpack("f", struct.pack("f", value))[0]
    return single


def scaled(workload: Workload, *, comm: float = 1.0, compute: float = 1.0) -> Workload:
    """``workload`` with sizes times ``comm`` and compute times times ``compute``, truncated to
    whole bytes and cycles as ASTRA-sim's ``--comm-scale`` and ``--compute-scale`` do (update
    delays are not scaled).
    """
    for option, value in (("comm_scale", comm), ("compute_scale", compute)):
        if not (math.isfinite(value) and value > 0):
            raise InputError(option, f"must be a number > 0, got {value!r}")
    if comm == 1 and compute == 1:
        return workload
    c, k = _float32(comm), _float32(compute)
    layers = tuple(
        dataclasses.replace(
            layer,
            fwd_compute=float(math.floor(layer.fwd_compute * k)),
            ig_compute=float(math.floor(layer.ig_compute * k)),
            wg_compute=float(math.floor(layer.wg_compute * k)),
            fwd_size=math.floor(layer.fwd_size * c),
            ig_size=math.floor(layer.ig_size * c),
            wg_size=math.floor(layer.wg_size * c),
        )
        for layer in workload.layers
    )
    return dataclasses.replace(workload, layers=layers)


# ------------------------------------------------------------ model-parallel groups
