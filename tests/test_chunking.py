"""The chunk count as a lever: a sweep's bound holds at every count or size, its best is the best found."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import DATA, load
from themis_opt.chunking import Chunking, like_groups, mixed, rechunked, search_mix, sweep_chunks
from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance
from themis_opt.instance import Collective, Instance
from themis_opt.solving import solve
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


def test_a_mix_gives_like_collectives_one_count_and_beats_every_uniform_count() -> None:
    instance = load("mixed")  # three collectives of different kinds and sizes: three groups
    assert like_groups(instance) == [(0,), (2,), (1,)]
    counts = [1, 2, 4, 8]
    mix = search_mix(instance, counts, ["baseline", "themis"], by="themis", time_limit=10, workers=1)
    uniform = [solve(rechunked(instance, c), "themis", bound_set="formulas").makespan for c in counts]
    themis = mix.result("themis")
    assert themis.makespan is not None and themis.makespan <= min(m for m in uniform if m is not None)
    assert all(n in counts for n in mix.counts) and mix.tried >= len(counts)
    cut = mixed(instance, mix.counts)
    for result in mix.results:
        assert result.schedule is not None and validate(cut, result.schedule) == []
        assert result.makespan is not None and mix.bound <= result.makespan * (1 + 1e-9)
    again = search_mix(instance, counts, ["themis"], by="themis", time_limit=10, workers=1)
    assert again.counts == mix.counts  # deterministic
    with pytest.raises(InputError, match="simulates"):
        search_mix(instance, counts, ["cpsat"], by="cpsat")
    with pytest.raises(InputError, match="methods run"):
        search_mix(instance, counts, ["baseline"], by="themis")
    with pytest.raises(InputError, match="each of the 3 collectives"):
        mixed(instance, [1, 2])


def test_the_shortest_found_anywhere_is_certified_against_the_bound_for_everything_searched() -> None:
    instance = load("mixed")
    sweep = sweep_chunks(instance, [1, 4], ["baseline", "themis"], time_limit=4, workers=1, mix="themis")
    assert sweep.mix is not None
    where, result = sweep.found()
    everything = [r for results in sweep.results for r in results] + list(sweep.mix.results)
    assert result.makespan == min(r.makespan for r in everything if r.makespan is not None)
    # the mix's bound holds at every mix and every count; the counts' bound at the counts alone
    assert sweep.every_bound == sweep.mix.bound <= sweep.bound
    assert all(r.makespan is not None and sweep.every_bound <= r.makespan * (1 + 1e-9) for r in everything)
    cut, same = sweep.shortest(instance)
    assert same is result and cut.name == (f"mixed-c{where.count}" if where is not None else "mixed-mix")
    assert result.schedule is not None and validate(cut, result.schedule) == []


def test_the_cli_searches_a_mix_and_bounds_every_one(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["chunks", str(DATA / "mixed.json"), "--counts", "1,4", "--method", "baseline,themis", "--time-limit", "4"]
    assert main([*argv, "--mix", "themis"]) == 0
    out = capsys.readouterr().out
    assert "searched by themis" in out and "bound for every mix" in out and "themis at that mix" in out
    assert "above the bound for every count and mix" in " ".join(out.split())  # rich wraps lines
    assert main([*argv, "--mix", "cpsat"]) == 2
    assert "--mix: must be one of the methods run" in capsys.readouterr().err
    # no time left for a count: each method still reports its first schedule (was an error naming
    # --time-limit), and the mix, which would overrun the limit, is not searched and says so
    assert main([*argv[:-1], "0.001", "--mix", "themis"]) == 0
    out = capsys.readouterr().out
    assert "themis: best at" in out and "no mix: not searched by themis" in out


def test_counts_that_run_a_little_past_their_shares_still_leave_the_mix_its_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import themis_opt.solving

    solve_all = themis_opt.solving.solve_all
    late = iter([0.025, 0.025])  # each count's solve ends 25 ms past its share, as a loaded machine's do

    def slow(*args: object, **kwargs: object) -> object:
        began = time.perf_counter()
        found = solve_all(*args, **kwargs)  # type: ignore[arg-type]
        end = began + float(kwargs["time_limit"]) + next(late, 0.0)  # type: ignore[arg-type]
        time.sleep(max(0.0, end - time.perf_counter()))
        return found

    monkeypatch.setattr(themis_opt.solving, "solve_all", slow)
    began = time.perf_counter()
    sweep = sweep_chunks(load("mixed"), [1, 4], ["themis"], time_limit=0.4, workers=1, mix="themis")
    # less is left after the counts than twice the slowest of them took, but more than one share
    assert sweep.mix is not None and sweep.mix.result("themis").makespan is not None
    assert time.perf_counter() - began < 0.4 + 0.3
    late = iter([0.4])  # the first count takes the whole limit: nothing is left for the mix
    assert sweep_chunks(load("mixed"), [1, 4], ["themis"], time_limit=0.4, workers=1, mix="themis").mix is None


def test_the_cli_writes_the_cut_of_the_shortest_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cut.json"
    argv = ["chunks", str(DATA / "mixed.json"), "--counts", "1,4", "--method", "themis", "--time-limit", "4"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    sweep = sweep_chunks(load("mixed"), [1, 4], ["themis"], time_limit=4, workers=1)
    best, result = sweep.best("themis")
    written = load_instance(out)
    assert written.name == f"mixed-c{best.count}"
    assert solve(written, "themis", bound_set="formulas").makespan == result.makespan
    assert main([*argv, "--mix", "themis", "--out", str(out)]) == 0
    found = search_mix(load("mixed"), [1, 4], ["themis"], by="themis", time_limit=4, workers=1)
    mix = found.result("themis").makespan
    assert mix is not None and result.makespan is not None and mix < result.makespan  # the mix wins here
    written = load_instance(out)
    assert tuple(c.chunks for c in written.collectives) == found.counts and written.name == "mixed-mix"
    assert main([*argv, "--out", str(DATA / "mixed.json")]) == 2  # an input: refused before any work
