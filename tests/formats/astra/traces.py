"""Chakra traces for the tests: a ring of 4, a system file, and traces written with mlc-chakra."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from themis_opt.formats.astra.etfiles import TraceNode, write_trace

MIB = 2**20
RING4 = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
}
# one 256 KiB chunk's all-reduce on the ring of 4 (50 GB/s of 2^30 bytes, 500 ns, 10 ns endpoint delay):
# 6 messages of 64 KiB, each floor(500 + 65536 / 53.687) = 1720 ns plus 10 ns, one more 10 ns at the
# start, and the first 3 receipts reduced at 1600 GB/s: 3 x floor(65536 / 1600) = 120 ns each
CHUNK_AR_NS = 10 + 6 * (1720 + 10) + 3 * 120


def trace_files(tmp_path: Path, system: dict[str, Any] | None = None, network: str = RING4) -> tuple[Path, Path]:
    net, sys_file = tmp_path / "net.yml", tmp_path / "sys.json"
    net.write_text(network)
    sys_file.write_text(json.dumps(system or SYSTEM))
    return net, sys_file


def trace_node(
    id: int, type: str, *, data: tuple[int, ...] = (), ctrl: tuple[int, ...] = (), **attrs: Any
) -> TraceNode:
    duration = attrs.pop("duration_micros", 0)
    return TraceNode(id, f"node{id}", type, data, ctrl, duration, tuple(attrs.items()))


def write_traces(tmp_path: Path, nodes: list[TraceNode], npus: int = 4, differ: int | None = None) -> Path:
    """The same graph for every NPU, its ids offset per NPU as the converters write them."""
    for npu in range(npus):
        shift = 100 * npu
        mine = [
            TraceNode(
                n.id + shift,
                n.name,
                n.type,
                tuple(d + shift for d in n.data_deps),
                tuple(d + shift for d in n.ctrl_deps),
                n.duration_micros + (1 if npu == differ and i == 0 else 0),
                n.attrs,
            )
            for i, n in enumerate(nodes)
        ]
        write_trace(tmp_path / f"trace.{npu}.et", mine)
    return tmp_path / "trace"
