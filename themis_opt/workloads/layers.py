"""ASTRA-sim 1.0's workloads as data: layers of compute and collectives, and the parallelisms that run them.

:mod:`themis_opt.formats.workload_text` reads them from ASTRA-sim 1.0's text files;
:mod:`themis_opt.workloads.astra1` runs them as ASTRA-sim 1.0 does, as a task graph; the model zoo
(:mod:`themis_opt.workloads.zoo`) writes them.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from dataclasses import dataclass

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
