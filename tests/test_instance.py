"""Instance: derived values."""

from __future__ import annotations

from themis_opt.instance import Collective, Dimension, Instance, Network


def test_origin_is_the_earliest_issue_time() -> None:
    network = Network((Dimension(4, "ring", 100.0, 500.0),))
    tasks = (Collective("all_reduce", 2**20, 2, issue_ns=500.0), Collective("all_gather", 2**20, 2, issue_ns=200.0))
    assert Instance(network, tasks).origin_ns == 200.0


def test_a_chunk_class_hashes_as_its_fields_once_computed_and_after_pickling() -> None:
    import pickle

    from themis_opt.instance import ChunkClass

    a, b = ChunkClass(0, 64, tuple(range(1000))), ChunkClass(0, 64, tuple(range(1000)))
    assert a == b and hash(a) == hash(b) == hash(a) and {a: 1}[b] == 1
    assert ChunkClass(0, 64, (0, 1)) != ChunkClass(1, 64, (0, 1))
    copy = pickle.loads(pickle.dumps(a))
    assert copy == a and hash(copy) == hash(a)
