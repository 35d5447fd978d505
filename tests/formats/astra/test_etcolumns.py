"""Traces as columns: written at once as protobuf would, read back at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from themis_opt.formats.astra.etcolumns import Columns, decode_trace, encode_trace, read_nodes

# a varint's length changes at every one of these: 1 to 9 bytes
EDGES = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**35, 2**49, 2**53 - 1, 2**53, 2**56, 2**63 - 1]


def _columns(values: list[int], seed: int) -> Columns:
    rng = np.random.default_rng(seed)
    n = len(values)
    deps_per = rng.integers(0, 3, n)
    deps_per[0] = 0
    deps = np.concatenate([rng.integers(0, max(i, 1), k) for i, k in enumerate(deps_per)]).astype(np.int64)
    sizes = np.array(values, dtype=np.int64)
    return Columns(
        type=np.full(n, 5, dtype=np.int64),
        dep_start=np.r_[0, np.cumsum(deps_per)],
        deps=deps,
        attrs={"comm_size": sizes, "comm_tag": rng.integers(-1, 2**20, n)},
        lists={"meaning": np.column_stack([sizes[::-1], rng.integers(0, 2**40, n)])},
        durations=rng.integers(0, 2**30, n) * (rng.random(n) < 0.5),
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_a_trace_of_every_varint_length_reads_back_as_written(seed: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    values = EDGES + (rng.integers(0, 2**62, 300) >> rng.integers(0, 62, 300)).tolist()
    columns = _columns(values, seed)
    data = encode_trace(columns)
    # protobuf reads the same nodes from the bytes
    nodes = read_nodes(tmp_path / "t.et", data)
    assert [node.attr[0].int64_val for node in nodes] == values
    read = decode_trace(data, "t.et", ("comm_size", "comm_tag"), {"meaning": 2})
    assert read is not None
    assert read.attrs["comm_size"].tolist() == values and read.deps.tolist() == columns.deps.tolist()
    assert read.lists["meaning"].tolist() == columns.lists["meaning"].tolist()
    assert read.durations.tolist() == columns.durations.tolist()
    assert encode_trace(read) == data
