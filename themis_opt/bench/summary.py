"""The summary per method of a sweep's rows: gaps, speedups over the baseline, proofs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from themis_opt.bench.records import Record
from themis_opt.result import Status


@dataclass(frozen=True)
class MethodSummary:
    """Aggregates of one method over a set of records."""

    method: str
    instances: int
    geomean_speedup: float | None
    mean_gap: float | None
    max_gap: float | None
    mean_utilization: float | None
    optimal: int
    invalid: int


@dataclass(frozen=True)
class Summary:
    """The benchmark's summary."""

    methods: tuple[MethodSummary, ...]
    instances: int
    proven_optimal: int
    themis_loses: dict[str, int]


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(records: Sequence[Record], methods: Sequence[str]) -> Summary:
    """Geometric-mean speedup over baseline, mean and max gap, optimal counts.

    ``proven_optimal`` counts instances where some method's schedule is proven
    optimal; ``themis_loses`` counts, per themis variant, instances where it is
    slower than the baseline.
    """
    per_method = []
    for m in methods:
        ran = [r for r in records if r.outcome(m) is not None]
        outs = [o for r in ran if (o := r.outcome(m)) is not None]
        speedups = [s for r in ran if (s := r.speedup(m)) is not None]
        gaps = [g for r in ran if (g := r.gap(m)) is not None]
        utils = [o.bandwidth_utilization for o in outs if o.bandwidth_utilization is not None]
        per_method.append(
            MethodSummary(
                method=m,
                instances=len(ran),
                geomean_speedup=_geomean(speedups),
                mean_gap=sum(gaps) / len(gaps) if gaps else None,
                max_gap=max(gaps) if gaps else None,
                mean_utilization=sum(utils) / len(utils) if utils else None,
                optimal=sum(1 for o in outs if o.status == Status.OPTIMAL.value),
                invalid=sum(1 for o in outs if not o.valid),
            )
        )
    proven = sum(1 for r in records if any(o.status == Status.OPTIMAL.value for o in r.outcomes))
    loses = {}
    for m in methods:  # without the baseline in the run there is nothing to lose to: none counted
        if m.startswith("themis") and "baseline" in methods:
            loses[m] = sum(1 for r in records if (s := r.speedup(m)) is not None and s < 1 - 1e-12)
    return Summary(tuple(per_method), len(records), proven, loses)
