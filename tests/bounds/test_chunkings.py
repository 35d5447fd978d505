"""The bound for every chunking: below every schedule at every mix of the cuts' chunk counts."""

from __future__ import annotations

import random

import pytest

from tests.conftest import load
from themis_opt.bounds.chunkings import every_chunking_bound
from themis_opt.chunking import mixed, rechunked
from themis_opt.solving import solve
from themis_opt.validator import validate

COUNTS = (1, 2, 4, 8)


@pytest.mark.parametrize("name", ["mixed", "graph_2l2p", "two_stages"])
def test_the_bound_holds_at_every_mix_of_counts(name: str) -> None:
    instance = load(name)
    bound = every_chunking_bound(rechunked(instance, 1), [rechunked(instance, c) for c in COUNTS])
    assert bound > 0
    rng = random.Random(name)
    mixes = [[c] * len(instance.collectives) for c in COUNTS]
    mixes += [[rng.choice(COUNTS) for _ in instance.collectives] for _ in range(4)]
    for counts in mixes:
        cut = mixed(instance, counts)
        for method in ("baseline", "themis"):
            result = solve(cut, method, bound_set="formulas")
            assert result.schedule is not None and validate(cut, result.schedule) == []
            assert result.makespan is not None and bound <= result.makespan * (1 + 1e-9), (counts, method)


def test_the_bound_proves_one_chunk_best_where_the_pipeline_decides() -> None:
    # two stages joined by sends: one chunk already runs each collective at its shortest span
    # over every count, so the bound reaches its makespan, and no mix does better
    instance = load("two_stages")
    one = rechunked(instance, 1)
    cuts = [rechunked(instance, c) for c in COUNTS]
    makespan = solve(one, "themis", bound_set="formulas").makespan
    assert makespan is not None
    assert every_chunking_bound(one, cuts) == pytest.approx(makespan, rel=1e-9)


def test_the_bound_refuses_other_tasks() -> None:
    instance = load("mixed")
    cuts = [rechunked(instance, c) for c in COUNTS]
    with pytest.raises(ValueError, match="one chunk"):
        every_chunking_bound(cuts[1], cuts)
    with pytest.raises(ValueError, match="does not hold"):
        every_chunking_bound(rechunked(instance, 1), [rechunked(load("worked"), 2)])
