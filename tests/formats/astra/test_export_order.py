"""export-astra --version 2: a chain of collectives is one at a time however its tasks are listed."""

from __future__ import annotations

from pathlib import Path

from themis_opt.formats.astra import export_astra
from themis_opt.instance import After, Collective, Dimension, Instance, Kind, Network, Topology


def test_a_chain_listed_backwards_runs_one_at_a_time(tmp_path: Path) -> None:
    # c0 waits for c1, which waits for c2, listed last: c0 never runs beside c2 (it did not pass before)
    network = Network((Dimension(4, Topology.RING, 50, 500),))
    tasks = (
        Collective(Kind.ALL_REDUCE, 1 << 20, 1, id="c0", after=(After("c1"),)),
        Collective(Kind.ALL_REDUCE, 1 << 20, 1, id="c1", after=(After("c2"),)),
        Collective(Kind.ALL_REDUCE, 1 << 20, 1, id="c2"),
    )
    files = export_astra(Instance(network, tasks, name="chain"), 2, tmp_path / "out")
    assert {f.name for f in files} >= {"network.yml", "system.json", "workload.0.et"}
