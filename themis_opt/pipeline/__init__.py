"""The cpsat method: its stages, in order, each with its share of the time left, its cap and when it runs.

Every stage after the first runs only while the best schedule is not proven optimal:

1. **warm start**: the best of the heuristics and of the caller's schedule;
   the baseline may take all the time left, each other heuristic
   ``warm_share`` of it;
2. **assignment search**: ``assignment`` of the time left
   (``assignment_large_share`` above ``large_phases`` phases), when more is
   left than the warm start took;
3. **at the bound**: ``at_bound`` (at most 5 s), up to 128 phases and 4,096
   order literals;
4. **probe** (off by default): ``probe`` (at most 5 s), the exact model, up to
   4,096 order literals;
5. **refutation**: ``refutation`` (at most 10 s), one collective of up to 128
   phases and 4,096 order literals: it raises the bound, and the schedules
   its questions find may be the best;
6. **sequence search**: ``sequence``, up to ``large_phases`` phases,
   collectives only;
7. **windows**: all the time left, when the exact model is too large (it
   ends the method);
8. **counts fixed**: ``counts_fixed`` (at most 20 s), up to ``large_phases``
   phases and 4,096 order literals;
9. **full model**: all the time left (it ends the method).

The shares, caps and limits are :class:`~themis_opt.params.PipelineParams`
(a stage is switched off with ``enabled = false``); :data:`STAGES` is the
table the method runs, and :func:`describe` gives it as data. Where the
baseline's merged all-reduce phase is shorter than the split ones every other
stage works with (a double binary tree on the last dimension), the baseline's
schedule is kept when it is better, and CP-SAT's own bound, which holds for
split schedules, is dropped.
"""

from __future__ import annotations

from themis_opt.pipeline.context import Context
from themis_opt.pipeline.stages import (
    assignment_search,
    at_bound,
    counts_fixed,
    full_model,
    probe,
    refutation,
    sequence_search,
    spread,
    warm_start,
    windows,
)
from themis_opt.pipeline.table import STAGES, StageSpec, describe, run_cpsat, run_stages

__all__ = [
    "STAGES",
    "Context",
    "StageSpec",
    "assignment_search",
    "at_bound",
    "counts_fixed",
    "describe",
    "full_model",
    "probe",
    "refutation",
    "run_cpsat",
    "run_stages",
    "sequence_search",
    "spread",
    "warm_start",
    "windows",
]
