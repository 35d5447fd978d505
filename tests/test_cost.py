"""Phase durations against hand computations from the formulas."""

from __future__ import annotations

import math

import pytest

from themis_opt.cost import chunk_phases, phase_duration
from themis_opt.instance import Dimension, Network, Op

from .conftest import make

GB = 2**30 / 1e9  # bytes per ns per GB/s
MIB = 2**20


@pytest.mark.parametrize(
    ("topology", "algorithm", "n", "steps", "hops"),
    [
        ("ring", "ring", 4, 3, 1),
        ("ring", "direct", 4, 1, 1),
        ("ring", "halving_doubling", 8, 3, 1),
        ("fully_connected", "direct", 8, 1, 1),
        ("fully_connected", "ring", 8, 7, 1),
        ("fully_connected", "halving_doubling", 4, 2, 1),
        ("switch", "halving_doubling", 16, 4, 2),
        ("switch", "ring", 4, 3, 2),
        ("switch", "direct", 4, 1, 2),
    ],
)
def test_duration_by_algorithm_and_topology(topology: str, algorithm: str, n: int, steps: int, hops: int) -> None:
    net = Network((Dimension(n, topology, 100.0, 700.0, algorithm),), endpoint_delay_ns=10.0)
    x = 3 * MIB
    rs = phase_duration(net, 0, Op.REDUCE_SCATTER, x)
    ag = phase_duration(net, 0, Op.ALL_GATHER, x)
    assert rs == pytest.approx(steps * (hops * 700 + 10) + x * (n - 1) / n / (100 * GB), rel=1e-12)
    assert ag == pytest.approx(steps * (hops * 700 + 10) + x * (n - 1) / (100 * GB), rel=1e-12)


def test_worked_example_phase_durations() -> None:
    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)], size=64 * MIB, chunks=4)
    phases = chunk_phases(inst, 0, 16 * MIB, (0, 1))
    assert [p.duration for p in phases] == pytest.approx([118717.5, 71389.375, 71389.375, 118717.5])
    assert [(p.dim, p.op) for p in phases] == [
        (0, Op.REDUCE_SCATTER),
        (1, Op.REDUCE_SCATTER),
        (1, Op.ALL_GATHER),
        (0, Op.ALL_GATHER),
    ]
    assert [p.bytes_in for p in phases] == [16 * MIB, 4 * MIB, 0.5 * MIB, 4 * MIB]
    flipped = chunk_phases(inst, 0, 16 * MIB, (1, 0))
    assert [p.duration for p in flipped] == pytest.approx([276467.5, 16178.4375, 16178.4375, 276467.5])


def test_reduce_scatter_and_all_gather_chunks() -> None:
    dims = [(2, "switch", 100.0), (4, "ring", 50.0)]
    rs = chunk_phases(make(dims, "reduce_scatter"), 0, 8 * MIB, (1, 0))
    assert [(p.dim, p.op, p.bytes_in, p.bytes_out) for p in rs] == [
        (1, Op.REDUCE_SCATTER, 8 * MIB, 2 * MIB),
        (0, Op.REDUCE_SCATTER, 2 * MIB, 1 * MIB),
    ]
    ag = chunk_phases(make(dims, "all_gather"), 0, 8 * MIB, (1, 0))
    # starts from the shard chunk / prod(n) and ends at the chunk size
    assert [(p.dim, p.op, p.bytes_in, p.bytes_out) for p in ag] == [
        (1, Op.ALL_GATHER, 1 * MIB, 4 * MIB),
        (0, Op.ALL_GATHER, 4 * MIB, 8 * MIB),
    ]
    # AG on the ring sends x (n - 1): 3 MiB at 50 GB/s, 3 steps of (500 + 10) ns
    assert ag[0].duration == pytest.approx(3 * 510 + 3 * MIB / (50 * GB))


def test_sizes_are_real_numbers() -> None:
    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)])
    phases = chunk_phases(inst, 0, 1000, (0, 1))
    assert phases[1].bytes_out == pytest.approx(1000 / 32)
    assert not math.isclose(phases[1].bytes_out, 1000 // 32)
