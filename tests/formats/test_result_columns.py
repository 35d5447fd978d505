"""A result's schedule written from the simulator's columns is the one written from its phases."""

from __future__ import annotations

import json

from tests.conftest import load
from themis_opt import solve
from themis_opt.formats.native import schedule_to_dict


def test_columns_write_what_the_phases_write() -> None:
    for name in ("worked", "three_dim", "mixed"):
        for method in ("baseline", "themis"):
            schedule = solve(load(name), method=method).schedule
            assert schedule is not None
            from_columns = json.dumps(schedule_to_dict(schedule))  # a lazy schedule: read off its columns
            assert schedule.chunks  # its phases built: written from them now
            assert from_columns == json.dumps(schedule_to_dict(schedule))
