"""Instance: derived values."""

from __future__ import annotations

from themis_opt.instance import Collective, Dimension, Instance, Network


def test_origin_is_the_earliest_issue_time() -> None:
    network = Network((Dimension(4, "ring", 100.0, 500.0),))
    tasks = (Collective("all_reduce", 2**20, 2, issue_ns=500.0), Collective("all_gather", 2**20, 2, issue_ns=200.0))
    assert Instance(network, tasks).origin_ns == 200.0
