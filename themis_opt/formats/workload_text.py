"""ASTRA-sim 1.0's workload files: the text format, read into a
:class:`~themis_opt.workloads.layers.Workload` (layers of compute and collectives).

The first line names the parallelism (with a model-parallel group size for
the transformer ones), the second the number of layers, then one line per
layer: its name, a reserved field, then forward, input-gradient and
weight-gradient compute time (cycles = ns), each with its collective's type
and size in bytes per NPU, and the update delay. How ASTRA-sim 1.0 runs a
workload, as a task graph, is :mod:`themis_opt.workloads.astra1`.
"""

from __future__ import annotations

import math
from pathlib import Path

from themis_opt.errors import InputError
from themis_opt.instance import Kind
from themis_opt.workloads.layers import (
    DLRMS,
    LAYER_PARALLELISMS,
    PARALLELISMS,
    TRANSFORMERS,
    UNRUNNABLE_TYPE,
    Layer,
    Workload,
    check_workload,
)

TYPES = {
    "ALLREDUCE": Kind.ALL_REDUCE,
    "ALLGATHER": Kind.ALL_GATHER,
    "REDUCESCATTER": Kind.REDUCE_SCATTER,
    "ALLTOALL": Kind.ALL_TO_ALL,
}


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
