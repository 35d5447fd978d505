"""Phase durations against hand computations from the formulas."""

from __future__ import annotations

import math

import pytest

from themis_opt.cost import chunk_phases, phase_duration
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Network, Op

from ..conftest import make

GB = 2**30 / 1e9  # bytes per ns per GB/s
MIB = 2**20


E, L = 10.0, 700.0  # endpoint delay and hop latency of the networks below
X = 3 * MIB  # a phase's input
BW = 100 * GB  # 100 GB/s in bytes per ns


def one(topology: str, algorithm: str, n: int, *, unaware: bool = False, **extra: object) -> Network:
    return Network((Dimension(n, topology, 100.0, L, algorithm, **extra),), E, congestion_unaware=unaware)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("topology", "n", "hops"),
    [("ring", 4, 1), ("switch", 4, 2), ("fully_connected", 8, 1)],
)
def test_a_ring_relays_n_minus_1_messages_at_the_link_bandwidth(topology: str, n: int, hops: int) -> None:
    # one message per step to the next NPU: on a fully-connected dimension it has one link of n - 1
    link = BW / (n - 1) if topology == "fully_connected" else BW
    net = one(topology, "ring", n)
    assert phase_duration(net, 0, Op.REDUCE_SCATTER, X) == pytest.approx((n - 1) * (hops * L + E + X / n / link))
    assert phase_duration(net, 0, Op.ALL_GATHER, X) == pytest.approx((n - 1) * (hops * L + E + X / link))
    assert phase_duration(net, 0, Op.ALL_TO_ALL, X, Algorithm.RING) == pytest.approx(
        n * (n - 1) / 2 * (hops * L + E + X / n / link)
    )


def test_direct_sends_to_everyone_at_once_from_the_farthest_hop() -> None:
    # ring of 8: the farthest NPU is 4 hops away; the 7 messages of x / 8 share the NPU's bandwidth
    assert phase_duration(one("ring", "direct", 8), 0, Op.REDUCE_SCATTER, X) == pytest.approx(
        E + 4 * L + 7 * X / 8 / BW
    )
    # ASTRA-sim's congestion-unaware backend: each message alone at the link's bandwidth
    unaware = one("ring", "direct", 8, unaware=True)
    assert phase_duration(unaware, 0, Op.REDUCE_SCATTER, X) == pytest.approx(E + 4 * L + X / 8 / BW)
    assert phase_duration(unaware, 0, Op.ALL_GATHER, X) == pytest.approx(E + 4 * L + X / BW)
    # a switch: two hops to anyone; fully connected: one link of n - 1 per peer, the same either way
    assert phase_duration(one("switch", "direct", 4, unaware=True), 0, Op.ALL_TO_ALL, X) == pytest.approx(
        E + 2 * L + X / 4 / BW
    )
    for unaware_ in (False, True):
        fc = one("fully_connected", "direct", 8, unaware=unaware_)
        assert phase_duration(fc, 0, Op.REDUCE_SCATTER, X) == pytest.approx(E + L + X / 8 / (BW / 7))


def test_halving_doubling_partners_double_their_distance() -> None:
    # ring of 8: partners 1, 2, 4 apart (hops 1, 2, 4) with x/2, x/4, x/8
    rs = E * 3 + (1 + 2 + 4) * L + (X / 2 + X / 4 + X / 8) / BW
    assert phase_duration(one("ring", "halving_doubling", 8), 0, Op.REDUCE_SCATTER, X) == pytest.approx(rs)
    # the all-gather reverses it from the shard: x, 2x, 4x to partners 4, 2, 1 apart
    ag = E * 3 + (4 + 2 + 1) * L + (X + 2 * X + 4 * X) / BW
    assert phase_duration(one("ring", "halving_doubling", 8), 0, Op.ALL_GATHER, X) == pytest.approx(ag)
    # fully connected: one link each, a seventh of the bandwidth
    fc = E * 3 + 3 * L + (X / 2 + X / 4 + X / 8) / (BW / 7)
    assert phase_duration(one("fully_connected", "halving_doubling", 8), 0, Op.REDUCE_SCATTER, X) == pytest.approx(fc)


def test_a_double_binary_tree_all_reduces_whatever_the_phase() -> None:
    # 8 NPUs: up the tree 1, 2 apart, to the root 4 apart, and back; x every time; on the way down a node
    # sends to both children at once (sharing the port on a ring, at the link's bandwidth when unaware)
    up = (E + 1 * L + X / BW) + (E + 2 * L + X / BW) + (E + 4 * L + X / BW)
    down_shared = (E + 4 * L + X / BW) + (E + 2 * L + 2 * X / BW) + (E + 1 * L + 2 * X / BW)
    down_unaware = (E + 4 * L + X / BW) + (E + 2 * L + X / BW) + (E + 1 * L + X / BW)
    shared = one("ring", "double_binary_tree", 8)
    for op in (Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.ALL_REDUCE):
        assert phase_duration(shared, 0, op, X) == pytest.approx(up + down_shared)
    unaware = one("ring", "double_binary_tree", 8, unaware=True)
    assert phase_duration(unaware, 0, Op.REDUCE_SCATTER, X) == pytest.approx(up + down_unaware)
    # and keeps its data: a reduce-scatter place gives its whole input to the next phase
    inst = Instance(unaware, (Collective("all_reduce", 8 * MIB, 2),))
    assert [(p.op, p.bytes_in, p.bytes_out) for p in chunk_phases(inst, 0, 4 * MIB, (0,))] == [
        (Op.ALL_REDUCE, 4 * MIB, 4 * MIB),
        (Op.ALL_REDUCE, 4 * MIB, 4 * MIB),
    ]


def test_overheads_add_to_every_message() -> None:
    plain = phase_duration(one("switch", "halving_doubling", 4), 0, Op.REDUCE_SCATTER, X)
    extra = phase_duration(one("switch", "halving_doubling", 4, message_overhead_ns=30.0), 0, Op.REDUCE_SCATTER, X)
    assert extra - plain == pytest.approx(2 * 30.0)


def test_a_dimension_carved_from_a_ring_pays_for_its_far_links() -> None:
    # positions 0-3 of a ring of 8, one apart: three links of one hop, and the link that closes the
    # sub-ring from position 3 back to 0 is 3 hops; a reduce-scatter relays 3 of them, the dearest
    inner = Network((Dimension(4, "ring", 100.0, L, "ring", physical_size=8),), E)
    assert phase_duration(inner, 0, Op.REDUCE_SCATTER, X) == pytest.approx(3 * (E + X / 4 / BW) + (1 + 1 + 3) * L)
    # the outer part, every 4th position of the ring of 8: 2 NPUs 4 hops apart both ways
    outer = Network((Dimension(2, "ring", 100.0, L, "ring", physical_size=8, stride=4),), E)
    assert phase_duration(outer, 0, Op.REDUCE_SCATTER, X) == pytest.approx(E + 4 * L + X / 2 / BW)
    # carved from a fully-connected dimension of 8: each message on one link of 7
    fc = Network((Dimension(4, "fully_connected", 100.0, L, "direct", physical_size=8),), E)
    assert phase_duration(fc, 0, Op.REDUCE_SCATTER, X) == pytest.approx(E + L + X / 4 / (BW / 7))


def test_flattened_algorithms_run_over_every_npu_on_dimension_0() -> None:
    # a ring of 2 (500 ns, 100 GB/s) inside a switch of 2 (1000 ns, 50 GB/s): NPUs 0-1-2-3 relay over
    # links 0->1 and 2->3 (the ring, 1 hop) and 1->2, 3->0 (the switch, 2 hops); 3 steps take the dearest 3
    dims = (
        Dimension(2, "ring", 100.0, 500.0, "one_ring", all_to_all_algorithm="one_direct"),
        Dimension(2, "switch", 50.0, 1000.0),
    )
    net = Network(dims, E)
    ring = E + 500 + X / 4 / BW
    switch = E + 2 * 1000 + X / 4 / (50 * GB)
    inst = Instance(net, (Collective("all_reduce", X, 1), Collective("all_to_all", X, 1)))
    assert inst.active_dims == ((0,), (0,))
    phases = chunk_phases(inst, 0, X, (0,))
    assert [(p.op, p.bytes_in, p.bytes_out) for p in phases] == [
        (Op.REDUCE_SCATTER, X, X / 4),
        (Op.ALL_GATHER, X / 4, X),
    ]
    assert phases[0].duration == pytest.approx(ring + 2 * switch)
    # direct: the switch peers (two of the three) share its 50 GB/s, the ring peer has its own port
    a2a = chunk_phases(inst, 1, X, (0,))[0]
    assert a2a.duration == pytest.approx(E + max(500 + X / 4 / BW, 2 * 1000 + 2 * X / 4 / (50 * GB)))


def test_worked_example_phase_durations() -> None:
    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)], size=64 * MIB, chunks=4)
    phases = chunk_phases(inst, 0, 16 * MIB, (0, 1))
    assert [p.duration for p in phases] == pytest.approx([118717.5, 71389.375, 71389.375, 118717.5])
    assert [(p.dim, p.op) for p in phases] == [
        (0, Op.REDUCE_SCATTER),
        (1, Op.REDUCE_SCATTER),
        (1, Op.ALL_GATHER),
        (0, Op.ALL_GATHER),
    ]
    assert [p.bytes_in for p in phases] == [16 * MIB, 4 * MIB, 0.5 * MIB, 4 * MIB]
    flipped = chunk_phases(inst, 0, 16 * MIB, (1, 0))
    assert [p.duration for p in flipped] == pytest.approx([276467.5, 16178.4375, 16178.4375, 276467.5])


def test_reduce_scatter_and_all_gather_chunks() -> None:
    dims = [(2, "switch", 100.0), (4, "ring", 50.0)]
    rs = chunk_phases(make(dims, "reduce_scatter"), 0, 8 * MIB, (1, 0))
    assert [(p.dim, p.op, p.bytes_in, p.bytes_out) for p in rs] == [
        (1, Op.REDUCE_SCATTER, 8 * MIB, 2 * MIB),
        (0, Op.REDUCE_SCATTER, 2 * MIB, 1 * MIB),
    ]
    ag = chunk_phases(make(dims, "all_gather"), 0, 8 * MIB, (1, 0))
    # starts from the shard chunk / prod(n) and ends at the chunk size
    assert [(p.dim, p.op, p.bytes_in, p.bytes_out) for p in ag] == [
        (1, Op.ALL_GATHER, 1 * MIB, 4 * MIB),
        (0, Op.ALL_GATHER, 4 * MIB, 8 * MIB),
    ]
    # AG on the ring sends x (n - 1): 3 MiB at 50 GB/s, 3 steps of (500 + 10) ns
    assert ag[0].duration == pytest.approx(3 * 510 + 3 * MIB / (50 * GB))


def test_sizes_are_real_numbers() -> None:
    inst = make([(4, "ring", 100.0), (8, "switch", 50.0)])
    phases = chunk_phases(inst, 0, 1000, (0, 1))
    assert phases[1].bytes_out == pytest.approx(1000 / 32)
    assert not math.isclose(phases[1].bytes_out, 1000 // 32)


def test_astra_2x_truncates_a_message_as_one_sum() -> None:
    # a ring of 4 at 50 GB/s (53.687 bytes per ns), 700.3 ns a hop: a 1 MiB reduce-scatter sends
    # 3 messages of 256 KiB, each floor(700.3 + 4882.8) = 5583 ns, not floor(700.3) + floor(4882.8) = 5582
    from themis_opt.cost import phase_duration
    from themis_opt.instance import Dimension, Network, Op

    dims = (Dimension(4, "ring", 50.0, 700.3),)
    whole_sum = Network(dims, 10.0, congestion_unaware=True, integer_message_sums=True)
    parts = Network(dims, 10.0, congestion_unaware=True, integer_messages=True)
    assert phase_duration(whole_sum, 0, Op.REDUCE_SCATTER, 2**20) == 3 * (10 + 5583)
    assert phase_duration(parts, 0, Op.REDUCE_SCATTER, 2**20) == 3 * (10 + 5582)


def test_a_groups_ring_follows_its_slowest_chain_of_receipts() -> None:
    """A ring whose links alternate 1 and 2 hops (NPUs 0, 2, 1, 3 of a ring of 4), as ASTRA-sim 2.x
    times it: 34,360 ns for an all-reduce of 1 MiB in 4 splits (measured, 518bd51, 2026-12-04), where the
    ring 0, 1, 2, 3 of 1 hop a link takes 28,360 ns.
    """
    from themis_opt.instance import Collective, Dimension, Instance, Network
    from themis_opt.solving import solve

    dims = (Dimension(4, "ring", 100.0, 500.0), Dimension(4, "switch", 50.0, 1000.0))
    network = Network(dims, congestion_unaware=True, integer_message_sums=True, innermost_charge=True,
                      reduction_gbps=1600.0)  # fmt: skip
    for group, expected in (((0, 2, 1, 3), 34_360.0), ((0, 1, 2, 3), 28_360.0)):
        instance = Instance(network, (Collective("all_reduce", 2**20, 4, group=group),))
        assert solve(instance, "baseline").makespan == expected


def _two_d(ring: int, switch: int, active_chunks: int = 1) -> Network:
    """ASTRA-sim 2.x's ring (100 GB/s, 500 ns a hop) x switch (50 GB/s, 1000 ns) network, as imported."""
    dims = (Dimension(ring, "ring", 100.0, 500.0), Dimension(switch, "switch", 50.0, 1000.0))
    return Network(dims, congestion_unaware=True, integer_message_sums=True, innermost_charge=True,
                   reduction_gbps=1600.0, active_chunks=active_chunks)  # fmt: skip


# The ring 0, 1, 2, 3 of a ring of 8 (the data-parallel group of dp 4 on 8 x 8): three links of 1 hop, one
# (3 to 0) of 3. An all-reduce of 1 MiB in 4 chunks sends messages of 64 KiB: floor(500 + 65536 / 107.374)
# = 1110 ns a hop away, floor(1500 + 610.35) = 2110 ns over 3 hops. Each chunk adds 10 + 6 x 10 ns of
# delays and 3 reductions of 3 x floor(65536 / 1600) = 120 ns: 430 ns. An NPU starts the next chunk as soon as
# it has finished the last, so its chain of receipts runs back along the ring through all 4 x 6 = 24 steps,
# every link 6 times: 4 x 430 + 6 x (3 x 1110 + 2110) = 34,360 ns, on every NPU. Each chunk alone lasts its
# dearest 6 links (4 x 1110 + 2 x 2110 + 430 = 9,090 ns; 36,360 for 4).
DP4_AR_NS = 4 * 430 + 6 * (3 * 1110 + 2110)


def test_a_groups_chunks_chain_on_without_an_npu_waiting_for_the_others() -> None:
    """ASTRA-sim 2.x (518bd51, measured 2026-12-04): 34,360 ns (above); with 2 chunks at once 17,180 ns,
    two chains of 2 chunks (2 x 430 + 3 x 5440).
    """
    from themis_opt.cost import group_ring_ns
    from themis_opt.solving import solve

    instance = Instance(_two_d(8, 2), (Collective("all_reduce", MIB, 4, group=(0, 1, 2, 3)),))
    assert group_ring_ns(instance.network, (0, 1, 2, 3), Op.ALL_REDUCE, MIB / 4) == 9090.0  # a chunk alone
    (phase,) = chunk_phases(instance, 0, MIB // 4, (0,))
    assert phase.duration == DP4_AR_NS / 4  # each chunk an equal share of the chain
    assert solve(instance, "baseline").makespan == DP4_AR_NS == 34_360
    two = Instance(_two_d(8, 2, active_chunks=2), instance.collectives)
    assert solve(two, "baseline").makespan == 2 * 430 + 3 * (3 * 1110 + 2110) == 17_180


def test_a_groups_chain_lasts_until_its_last_npu_ends() -> None:
    """The ring 0, 1, 2 of a ring of 6: links of 1, 1 and 2 hops. An all-reduce of 1.5 MiB in 4 chunks:
    messages of 128 KiB, floor(500 + 1220.7) = 1720 ns, floor(1000 + 1220.7) = 2220 ns; each chunk
    10 + 4 x 10 + 2 x 3 x floor(131072 / 1600) = 536 ns. 16 receipts: 5 times round the ring, then one more
    link, which for NPU 0 is the dear one: 4 x 536 + 5 x (2 x 1720 + 2220) + 2220 = 32,664 ns. ASTRA-sim 2.x
    (measured): NPU 0 finishes at 32,664, NPUs 1 and 2 at 32,164.
    """
    from themis_opt.solving import solve

    instance = Instance(_two_d(6, 2), (Collective("all_reduce", 3 * MIB // 2, 4, group=(0, 1, 2)),))
    assert solve(instance, "baseline").makespan == 4 * 536 + 5 * (2 * 1720 + 2220) + 2220 == 32_664


def test_group_collectives_cut_differently_keep_their_own_shares() -> None:
    # two all-reduces on the ring 0, 1, 2, 3 of a ring of 8, in chunks of 256 KiB: 4, then 5 of them. The
    # second's chain: 30 receipts, 7 times round the ring then its dearest 2 links:
    # 5 x 430 + 7 x 5440 + (2110 + 1110) = 43,450 ns; its chunks are not the first's (34,360 / 4 each)
    from themis_opt.instance import After
    from themis_opt.solving import solve
    from themis_opt.validator import validate

    group = (0, 1, 2, 3)
    first = Collective("all_reduce", MIB, 4, id="first", group=group)
    second = Collective("all_reduce", 5 * MIB // 4, 5, id="second", after=(After("first"),), group=group)
    instance = Instance(_two_d(8, 2), (first, second))
    assert [p.duration for p in chunk_phases(instance, 1, MIB // 4, (0,))] == [43_450 / 5]
    result = solve(instance, "baseline")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    assert result.makespan == DP4_AR_NS + 5 * 430 + 7 * 5440 + 2110 + 1110 == 34_360 + 43_450


def test_a_last_chunk_of_another_size_takes_what_it_adds_to_the_chain() -> None:
    from themis_opt.cost import group_chain_ns

    # 3 chunks of 256 KiB, the last 400 bytes more: each of the 3 a third of their own chain, the last the rest
    group = (0, 1, 2, 3)
    instance = Instance(_two_d(8, 2), (Collective("all_reduce", MIB + 400, 4, chunk_bytes=MIB // 4, group=group),))
    (regular,) = chunk_phases(instance, 0, MIB // 4, (0,))
    (last,) = chunk_phases(instance, 0, MIB // 4 + 400, (0,))
    three = group_chain_ns(instance.network, group, Op.ALL_REDUCE, (MIB / 4,) * 3)
    assert regular.duration == three / 3
    whole = group_chain_ns(instance.network, group, Op.ALL_REDUCE, (MIB / 4,) * 3 + (MIB / 4 + 400,))
    assert last.duration == whole - three
    assert 3 * regular.duration + last.duration == pytest.approx(whole)


@pytest.mark.parametrize(("dst", "ns"), [(5, 10265.0), (2, 10765.0), (8, 21531.0)])
def test_a_send_costs_one_message_in_the_lowest_dimension_the_npus_differ_in(dst: int, ns: float) -> None:
    # ASTRA-sim 2.x's hand check m5 on its 4x4 network (ring 100 GB/s 500 ns, switch 50 GB/s 1000 ns):
    # 1 MiB from NPU 0 costs floor(hops x latency + bytes / bandwidth) where the NPUs first differ
    from themis_opt.cost import send_ns

    network = Network(
        (Dimension(4, "ring", 100.0, 500.0), Dimension(4, "switch", 50.0, 1000.0)), integer_message_sums=True
    )
    assert send_ns(network, 0, dst, 2.0**20) == ns
    instance = Instance(network, (Collective("send", 2**20, 1, group=(0, dst)),))
    (phase,) = chunk_phases(instance, 0, 2**20, instance.active_dims[0])
    assert (phase.op, phase.duration, phase.bytes_out) == (Op.SEND, ns, 2.0**20)
