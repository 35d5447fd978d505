"""The instance generator is reproducible and stays inside its ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_opt.cli import main
from themis_opt.formats.native import instance_to_dict
from themis_opt.generator import FAMILIES, generate


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_same_seed_same_instances(family: str) -> None:
    first = generate(family, 5, seed=3)
    assert [instance_to_dict(i) for i in first] == [instance_to_dict(i) for i in generate(family, 5, seed=3)]
    assert [instance_to_dict(i) for i in first] != [instance_to_dict(i) for i in generate(family, 5, seed=4)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_parameters_in_range(family: str) -> None:
    for inst in generate(family, 20, seed=1):
        dims = inst.network.dimensions
        assert 2 <= len(dims) <= 4
        for d in dims:
            assert 2 <= d.size <= 64 and d.size & (d.size - 1) == 0
            assert 25 <= d.bandwidth_gbps <= 400 and 100 <= d.latency_ns <= 1000
        for c in inst.collectives:
            assert 2**20 <= c.size_bytes <= 2**30 and 4 <= c.chunks <= 1024
        if family == "heterogeneous":
            assert dims[-1].bandwidth_gbps < dims[0].bandwidth_gbps
        if family == "homogeneous":
            assert len({d.bandwidth_gbps for d in dims}) == 1
        if family == "many-chunks":
            assert all(c.chunks >= 128 for c in inst.collectives)


def test_cli_files_are_byte_identical(tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert (
            main(
                ["generate", "--family", "mixed-topology", "--count", "4", "--seed", "11", "--out", str(tmp_path / out)]
            )
            == 0
        )
    a = sorted((tmp_path / "a").iterdir())
    b = sorted((tmp_path / "b").iterdir())
    assert [p.name for p in a] == [p.name for p in b]
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b))
