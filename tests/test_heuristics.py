"""The heuristics' own rules, where solve does not show them."""

from __future__ import annotations

from typing import Any

import pytest

from themis_opt import heuristics
from themis_opt.budget import OutOfTime
from themis_opt.instance import Instance
from themis_opt.methods import Intra
from themis_opt.params import BoundsParams, PipelineParams, SolveParams
from themis_opt.validator import validate


def test_balanced_out_of_time_among_its_stand_ins_keeps_both_notes(worked: Instance, monkeypatch: Any) -> None:
    timed = []
    simulate = heuristics.simulate

    def first_only(*args: Any, **kwargs: Any) -> Any:
        if timed:
            raise OutOfTime("simulator: out of time")
        timed.append(args[1])
        return simulate(*args, **kwargs)

    monkeypatch.setattr(heuristics, "simulate", first_only)
    # no load program fits and no short search: the stand-ins alone, the first of them timed
    params = SolveParams(bounds=BoundsParams(max_load_variables=1), pipeline=PipelineParams(balanced_evaluations=0))
    schedule, policy, note = heuristics.balanced_schedule(worked, params=params)
    assert len(timed) == 1 and policy is Intra.FIFO
    assert note.startswith("balanced: the load programs gave no order counts")
    assert note.endswith("; out of time before every candidate was timed")
    assert validate(worked, schedule) == []


def test_balanced_with_nothing_timed_runs_out_of_time(worked: Instance, monkeypatch: Any) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise OutOfTime("simulator: out of time")

    monkeypatch.setattr(heuristics, "simulate", never)
    with pytest.raises(OutOfTime):
        heuristics.balanced_schedule(worked, params=SolveParams(bounds=BoundsParams(max_load_variables=1)))
