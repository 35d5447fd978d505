"""A result file written from the simulator's columns is the one written from its phases, byte for byte."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import load
from themis_opt import solve
from themis_opt.formats.native import result_to_dict, save_result
from themis_opt.formats.native.jsonfile import write_json


def test_columns_write_what_the_phases_write(tmp_path: Path) -> None:
    for name in ("worked", "mixed", "merged_baseline", "ring_attention"):  # 4 to 60 chunks, compute, sends
        for method in ("baseline", "themis"):
            result = solve(load(name), method=method)
            assert result.schedule is not None and "chunks" not in result.schedule.__dict__  # lazy: columns
            save_result(result, tmp_path / "fast.json")  # each chunk rendered off the columns
            write_json(tmp_path / "slow.json", result_to_dict(result))  # dicts of the built phases
            assert "chunks" in result.schedule.__dict__
            fast, slow = (tmp_path / "fast.json").read_bytes(), (tmp_path / "slow.json").read_bytes()
            assert fast == slow, (name, method)
            one_a_line = [line for line in fast.decode().splitlines() if line.lstrip().startswith('{"collective"')]
            assert len(one_a_line) == (len(result.schedule.orders) if name != "worked" else 0)
