"""The chunk count as a lever: a sweep's bound holds at every count or size, its best is the best found."""

from __future__ import annotations

import pytest

from tests.conftest import DATA, load
from themis_opt.chunking import Chunking, rechunked, sweep_chunks
from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.instance import Collective, Instance
from themis_opt.validator import validate


def test_a_sweep_bounds_every_count_and_finds_the_best() -> None:
    instance = load("worked")
    sweep = sweep_chunks(instance, [1, 2, 4, 8], ["baseline", "themis", "cpsat"], time_limit=4, workers=1)
    for choice, results in zip(sweep.choices, sweep.results):
        cut = rechunked(instance, choice)
        assert all(c.chunks == choice.count for c in cut.collectives)
        for result in results:
            assert result.schedule is not None and validate(cut, result.schedule) == []
            assert result.makespan is not None and sweep.bound <= result.makespan * (1 + 1e-9)
    for method in sweep.methods:
        _, best = sweep.best(method)
        column = sweep.methods.index(method)
        assert best.makespan == min(r[column].makespan for r in sweep.results)
        assert sweep.gap(method) >= -1e-9
    # one chunk cannot pipeline over the dimensions; the best count of the sweep is not 1 here
    assert (sweep.best("cpsat")[0].count or 0) > 1


def test_a_chunk_size_gives_each_collective_its_own_count() -> None:
    worked = load("worked")
    (big,) = worked.collectives
    two = Instance(worked.network, (big, Collective("all_reduce", 3 * 2**20, 1, id="small")), "two")
    cut = rechunked(two, Chunking(size=2**20))
    assert [c.chunks for c in cut.collectives] == [big.size_bytes // 2**20, 3] and cut.name == "two-s1048576"
    sweep = sweep_chunks(two, [Chunking(size=2**20), Chunking(size=16 * 2**20)], ["themis"], time_limit=2, workers=1)
    assert [c.label for c in sweep.choices] == ["1 MiB", "16 MiB"]
    for choice, (result,) in zip(sweep.choices, sweep.results):
        assert result.schedule is not None and validate(rechunked(two, choice), result.schedule) == []
        assert result.makespan is not None and sweep.bound <= result.makespan * (1 + 1e-9)
    with pytest.raises(InputError, match="not both or neither"):
        Chunking(count=2, size=2)


def test_bad_counts_are_refused() -> None:
    with pytest.raises(InputError, match="twice"):
        sweep_chunks(load("worked"), [2, 2])
    with pytest.raises(InputError, match=">= 1"):
        sweep_chunks(load("worked"), [0])
    with pytest.raises(InputError, match="at least one"):
        sweep_chunks(load("worked"), [])


def test_the_cli_prints_each_count_and_the_bound_for_all(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["chunks", str(DATA / "worked.json"), "--counts", "2,4", "--method", "baseline,themis", "--time-limit", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bound for every count" in out and "baseline: best at" in out
    assert main([*argv[:3], "2,x", *argv[4:]]) == 2
    assert "--counts: must be whole numbers" in capsys.readouterr().err
    assert main([*argv[:3], "0", *argv[4:]]) == 2
    assert "--counts: must be >= 1" in capsys.readouterr().err
    assert main([*argv[:2], "--sizes", "1MiB,8MiB", *argv[4:]]) == 0
    out = capsys.readouterr().out
    assert "chunk size" in out and "best at chunks of" in out and "8 MiB" in out
