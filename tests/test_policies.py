"""Baseline and Themis orders against orders worked out by hand from the model."""

from __future__ import annotations

from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.policies import baseline_orders, counts_match, spread_orders, themis_orders

MIB = 2**20


def test_baseline_orders(instance: Instance) -> None:
    orders = baseline_orders(instance)
    for (c, _), order in orders.items():
        dims = list(instance.active_dims[c])
        expected = dims[::-1] if instance.collectives[c].kind.value == "all_gather" else dims
        assert list(order) == expected


def test_themis_worked_example(worked: Instance) -> None:
    orders = themis_orders(worked)
    assert [orders[(0, k)] for k in range(4)] == [(0, 1), (1, 0), (0, 1), (0, 1)]


def test_themis_three_dimensions_by_hand() -> None:
    # 4x4x4 switches at 100/50/100 GB/s, six 1 MiB chunks; threshold 1/16 MiB.
    # Loads (MiB, normalised to d0's bandwidth) after each chunk, by hand:
    #  c0: gap 0 -> fallback (0,1,2); loads d0 .75, d1 .375, d2 .046875
    #  c1: list d2,d1,d0; gap .703125 -> diff .9375 -> (2,1,0); loads .796875, .75, .796875
    #  c2: list d1,d2,d0 (stable); gap .046875 -> diff .046875*.5/.75 = .03125 < .0625
    #      -> fallback (0,1,2), list reset; loads 1.546875, 1.125, .84375
    #  c3: list d2,d1,d0; gap .703125 -> (2,1,0); loads 1.59375, 1.5, 1.59375
    #  c4: list d1,d2,d0; diff .09375*.5/.75 = .0625, not below -> (1,2,0); loads 1.640625, 3, 1.78125
    #  c5: list d0,d2,d1; gap 1.359375 -> (0,2,1)
    network = Network(tuple(Dimension(4, "switch", b, 500.0) for b in (100.0, 50.0, 100.0)))
    inst = Instance(network, (Collective("all_reduce", 6 * MIB, 6),))
    orders = themis_orders(inst)
    assert [orders[(0, k)] for k in range(6)] == [(0, 1, 2), (2, 1, 0), (0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1)]


def test_themis_all_gather_by_hand() -> None:
    # sizes 2, 4, 2 at equal bandwidth; a 16 MiB all-gather in 4 chunks: shards of 256 KiB, threshold 16 KiB
    #  c0: gap 0 -> fall back to ascending (0,1,2); the list in dimension order, reversed (d2,d1,d0), is
    #      charged by position as ASTRA-sim does: d2 += .25 (n0 = 2), d1 += .5 x 3, d0 += 2 x 1
    #      -> loads d0 2, d1 1.5, d2 .25
    #  c1: reversed d0,d1,d2; gap 2 - .25 = 1.75 MiB //2 //4 = 224 KiB -> (0,1,2); loads 2.25, 3, 2.25
    #  c2: sorted d0,d2,d1 (stable) reversed d1,d2,d0; gap .75 MiB //4 //2 = 96 KiB -> (1,2,0);
    #      loads d1 3.75, d2 3.25, d0 4.25
    #  c3: reversed d0,d1,d2; gap 1 MiB //2 //4 = 128 KiB -> (0,1,2)
    network = Network(tuple(Dimension(n, "switch", 100.0, 500.0) for n in (2, 4, 2)))
    inst = Instance(network, (Collective("all_gather", 16 * MIB, 4),))
    orders = themis_orders(inst)
    assert [orders[(0, k)] for k in range(4)] == [(0, 1, 2), (0, 1, 2), (1, 2, 0), (0, 1, 2)]


def test_themis_resets_per_issue_time_and_skips_uninvolved() -> None:
    network = Network(
        (Dimension(4, "switch", 100.0, 500.0), Dimension(1, "ring", 100.0, 500.0), Dimension(8, "switch", 50.0, 500.0))
    )
    colls = (Collective("all_reduce", 4 * MIB, 4), Collective("all_reduce", 4 * MIB, 4, issue_ns=5000.0))
    orders = themis_orders(Instance(network, colls))
    # size-1 dimension 1 never appears; each collective starts afresh with the baseline order
    assert all(1 not in order for order in orders.values())
    assert orders[(0, 0)] == (0, 2) and orders[(1, 0)] == (0, 2)
    assert [orders[(0, k)] for k in range(4)] == [orders[(1, k)] for k in range(4)]


def test_spread_orders_interleaves_counts() -> None:
    network = Network(tuple(Dimension(2, "switch", 100.0, 500.0) for _ in range(2)))
    inst = Instance(network, (Collective("all_reduce", 6 * MIB, 6),))
    (cls,) = inst.chunk_classes
    orders = spread_orders(inst, {cls: {(0, 1): 4, (1, 0): 2}})
    sequence = [orders[(0, k)] for k in range(6)]
    assert sequence.count((0, 1)) == 4 and sequence.count((1, 0)) == 2
    assert sequence == [(0, 1), (1, 0), (0, 1), (0, 1), (1, 0), (0, 1)]


def test_counts_match_counts_every_order_of_every_class() -> None:
    network = Network(tuple(Dimension(2, "switch", 100.0, 500.0) for _ in range(2)))
    inst = Instance(network, (Collective("all_reduce", 6 * MIB, 6),))
    (cls,) = inst.chunk_classes
    orders = spread_orders(inst, {cls: {(0, 1): 4, (1, 0): 2}})
    assert counts_match(inst, orders, {cls: {(0, 1): 4, (1, 0): 2}})
    assert counts_match(inst, orders, {cls: {(0, 1): 4, (1, 0): 2, (1, 1): 0}})  # unused orders may be listed
    assert not counts_match(inst, orders, {cls: {(0, 1): 3, (1, 0): 3}})
    assert not counts_match(inst, orders, {cls: {(0, 1): 6}})
