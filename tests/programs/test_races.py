"""Races: every two accesses of an NPU to the same units, one writing them, ordered by the program's
dependencies; MSCCL's reductions, which read and write the buffer themselves, one after another."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import load
from themis_opt import solve
from themis_opt.cli import main
from themis_opt.errors import InputError
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology
from themis_opt.programs import OpKind, Program, check_program, program_of
from themis_opt.programs.msccl import read_msccl, write_msccl
from themis_opt.programs.races import order_reductions

RACE = "no dependency orders the two"


def _direct(kind: Kind = Kind.REDUCE_SCATTER) -> Program:
    """A direct collective on 3 fully connected NPUs: each receives its unit from both others at once."""
    dim = Dimension(3, Topology.FULLY_CONNECTED, 50.0, 500.0, algorithm=Algorithm.DIRECT)
    instance = Instance(Network((dim,)), (Collective(kind, 3 << 20, 2),), name="direct")
    return program_of(instance, solve(instance, method="baseline")).unpadded()


def test_reductions_at_once_race_only_where_each_writes_the_buffer_itself() -> None:
    program = _direct()
    timing = check_program(program)  # ASTRA-sim's: sums commute, whatever arrives first
    with pytest.raises(InputError, match=f"reduces into units of chunk 0 .* reduces into, and {RACE}"):
        check_program(dataclasses.replace(program, exclusive_reductions=True))
    ordered = order_reductions(program)
    assert ordered.exclusive_reductions and len(ordered.deps) > len(program.deps)
    # each NPU's second reduction into a unit now waits for its first; the time as ASTRA-sim takes it the same
    assert check_program(ordered).time_ns == timing.time_ns
    assert np.array_equal(order_reductions(ordered).deps, ordered.deps)  # nothing left to order


def test_a_dropped_dependency_on_a_receive_is_a_race_though_the_run_checked_computes_right() -> None:
    instance = load("tiny_ar")
    program = program_of(instance, solve(instance, method="themis"))
    outcomes = []
    for op in program.ops_of(0):  # each of NPU 0's dependencies on a receive, dropped in turn
        for k, d in enumerate(program.deps_of(op).tolist()):
            if program.kind[d] != OpKind.RECV:
                continue
            keep = np.ones(len(program.deps), dtype=bool)
            keep[int(program.dep_start[op]) + k] = False
            counts = np.diff(program.dep_start)
            counts[op] -= 1
            dropped = dataclasses.replace(program, dep_start=np.r_[0, np.cumsum(counts)], deps=program.deps[keep])
            try:
                check_program(dropped)
                outcomes.append("passed")  # another chain still orders what it ordered
            except InputError as error:
                outcomes.append("race" if RACE in str(error) else "refused")
    # a join no longer waiting for a receive lets the next step's sends read units before they are
    # received: the order checked still ran them after, and only the race check finds it
    assert "race" in outcomes and "passed" in outcomes, outcomes


def test_an_msccl_folder_whose_reductions_race_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = dataclasses.replace(_direct(Kind.ALL_REDUCE), exclusive_reductions=True)  # not ordered
    write_msccl(program, tmp_path / "racy", time_ns=1)
    assert main(["check-program", str(tmp_path / "racy")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and RACE in err
    ordered = order_reductions(dataclasses.replace(program, exclusive_reductions=False))
    write_msccl(ordered, tmp_path / "ordered", time_ns=check_program(ordered).time_ns)
    assert read_msccl(tmp_path / "ordered").exclusive_reductions
    assert main(["check-program", str(tmp_path / "ordered")]) == 0


def test_msccl_is_written_only_with_its_reductions_ordered(tmp_path: Path) -> None:
    program = _direct(Kind.ALL_REDUCE)
    with pytest.raises(ValueError, match="order_reductions"):
        write_msccl(program, tmp_path / "m", time_ns=check_program(program).time_ns)
    assert not (tmp_path / "m").exists()
