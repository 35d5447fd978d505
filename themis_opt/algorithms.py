"""Collective algorithms: the registry, one entry per algorithm.

An entry holds everything the library knows of one algorithm: the steps its
phases send (what the cost model times; :mod:`themis_opt.cost`), which
receipts it reduces (at a local memory bandwidth), whether it always
all-reduces, runs an all-to-all or needs a power of two (what the instance
checks and the bounds read), and its names in ASTRA-sim's system files
(:mod:`themis_opt.formats.astra`). The instance schema lists the same names
(a test checks it). A new algorithm is one :class:`AlgorithmSpec` here and its
name in :class:`Algorithm`.

A step is ``(hops, messages sent at once, bytes per message per input
byte)``; ``hops(k)`` is the hops between NPUs ``k`` positions apart on the
phase's dimension. A ring is not listed step by step (its steps are relayed
NPU to NPU; the cost model times it as a whole), nor a flattened algorithm
(it runs its ``unflattened`` algorithm over every NPU of the network).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, assert_never


class Op(StrEnum):
    """Operation of one phase on one dimension."""

    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    ALL_REDUCE = "all_reduce"
    SEND = "send"  # a point-to-point message (a collective of kind send)


class Algorithm(StrEnum):
    """Collective algorithm run on one dimension (see :data:`ALGORITHMS`).

    The ``one_*`` algorithms are flattened: they run one ring, direct or
    halving-doubling collective over every NPU of the network as a single
    phase on dimension 0 (ASTRA-sim's ``oneRing``, ``oneDirect``,
    ``oneHalvingDoubling``). ``double_binary_tree`` always all-reduces its
    whole input, whatever the phase asks for.
    """

    RING = "ring"
    DIRECT = "direct"
    HALVING_DOUBLING = "halving_doubling"
    DOUBLE_BINARY_TREE = "double_binary_tree"
    ONE_RING = "one_ring"
    ONE_DIRECT = "one_direct"
    ONE_HALVING_DOUBLING = "one_halving_doubling"

    @property
    def spec(self) -> AlgorithmSpec:
        """Its registry entry."""
        return ALGORITHMS[self]

    @property
    def flattened(self) -> bool:
        """Whether it runs over every NPU of the network as one phase on dimension 0."""
        return ALGORITHMS[self].unflattened is not None

    @property
    def needs_power_of_two(self) -> bool:
        """Whether the NPUs it runs over must be a power of two."""
        return ALGORITHMS[self].power_of_two


Step = tuple[int, int, float]  # hops, messages sent at once, bytes per message per input byte
Steps = Callable[[int, Callable[[int], int], Op], tuple[Step, ...]]  # (NPUs, hops(k), op) -> steps


class Transfer(NamedTuple):
    """One message of one NPU in one step of a phase, in the dimension's coordinates.

    ``blocks`` are the coordinates whose blocks the message carries: block ``b`` of the data an
    NPU holds is the part bound for (reduce-scatter) or coming from (all-gather) the NPUs at
    coordinate ``b`` on this dimension.
    """

    send: bool  # a send to ``peer``, or a receive from it
    peer: int  # the other NPU's coordinate on the dimension
    blocks: tuple[int, ...]


Exchange = tuple[tuple[Transfer, ...], ...]  # the steps of one NPU's part of a phase, each its transfers
Exchanges = Callable[[int, int, Op], Exchange]  # (NPUs n, this NPU's coordinate x, op) -> its steps


@dataclass(frozen=True)
class AlgorithmSpec:
    """One collective algorithm.

    Parameters
    ----------
    algorithm
        Its name in instances.
    astra
        Its name in ASTRA-sim's system files (1.0 and 2.x).
    summary
        What it does, in one line.
    steps
        Its phases' steps (see the module's docstring); ``None`` for a ring
        (relayed) and the flattened algorithms.
    reductions
        The bytes of each received message a reducing phase reduces before
        it sends on, ``(op, NPUs, input bytes) -> sizes`` (ASTRA-sim 2.x's
        packet bundles at ``local-mem-bw``); ``None`` where that is not modelled.
    unflattened
        For a flattened algorithm, what it runs over every NPU of the network.
    power_of_two
        Whether the NPUs it runs over must be a power of two.
    all_reduces
        Whether each of its phases all-reduces its whole input, whatever the
        phase stands for (so its data does not shrink or grow).
    all_to_all
        Whether it can run an all-to-all.
    astra2
        Whether ASTRA-sim 2.x's system files may name it.
    exchanges
        Each NPU's transfers step by step, for a reduce-scatter, all-gather or all-reduce phase
        (and an all-to-all's, where written: direct's); what a program of the phase sends and
        receives (:mod:`themis_opt.programs`); ``None``: no program is written for it.
    """

    algorithm: Algorithm
    astra: str
    summary: str
    steps: Steps | None = None
    reductions: Callable[[Op, int, float], tuple[float, ...]] | None = None
    unflattened: Algorithm | None = None
    power_of_two: bool = False
    all_reduces: bool = False
    all_to_all: bool = True
    astra2: bool = True
    exchanges: Exchanges | None = None

    def performed(self, op: Op) -> Op:
        """What a phase standing for ``op`` does under this algorithm."""
        return Op.ALL_REDUCE if self.all_reduces else op


def _log2(n: int) -> int:
    return int(math.log2(n)) if n & (n - 1) == 0 else 0


def _direct_steps(n: int, hops: Callable[[int], int], op: Op) -> tuple[Step, ...]:
    farthest = max(hops(k) for k in range(1, n))
    per = 1.0 if op is Op.ALL_GATHER else 1 / n
    return ((farthest, n - 1, per),) * (2 if op is Op.ALL_REDUCE else 1)


def _halving_doubling_steps(n: int, hops: Callable[[int], int], op: Op) -> tuple[Step, ...]:
    log = _log2(n)
    scatter = tuple((hops(2**k), 1, 1 / 2 ** (k + 1)) for k in range(log))
    gather = tuple((hops(2**k), 1, n / 2 ** (k + 1)) for k in reversed(range(log)))
    match op:
        case Op.REDUCE_SCATTER:
            return scatter
        case Op.ALL_GATHER:
            return gather
        case Op.ALL_REDUCE:
            return scatter + tuple((h, m, x / n) for h, m, x in gather)
        case Op.ALL_TO_ALL:
            raise ValueError("halving_doubling cannot run an all-to-all")
        case Op.SEND:
            raise ValueError("a send is one message, not an algorithm's steps")
        case _ as unreachable:
            assert_never(unreachable)


def _double_binary_tree_steps(n: int, hops: Callable[[int], int], op: Op) -> tuple[Step, ...]:
    # in-order binary tree under a root with one child: level k's children are 2^(k-1) apart, the
    # root's child n / 2; the whole input goes up and comes down (a node sends to both children at once)
    log = _log2(n)
    levels = [hops(2 ** (k - 1)) for k in range(1, log)]
    root = hops(n // 2)
    up = [(h, 1, 1.0) for h in levels]
    down = [(h, 2, 1.0) for h in reversed(levels)]
    return (*up, (root, 1, 1.0), (root, 1, 1.0), *down)


def _ring_exchanges(n: int, x: int, op: Op) -> Exchange:
    # step s: send block x - s - 1 on to x + 1 (reduce-scatter; x - s for all-gather), receive the
    # one behind it from x - 1; after n - 1 steps NPU x holds block x whole (all of them, gathered)
    after, before = (x + 1) % n, (x - 1) % n
    scatter = tuple(
        (Transfer(True, after, ((x - s - 1) % n,)), Transfer(False, before, ((x - s - 2) % n,))) for s in range(n - 1)
    )
    gather = tuple(
        (Transfer(True, after, ((x - s) % n,)), Transfer(False, before, ((x - s - 1) % n,))) for s in range(n - 1)
    )
    return _by_op(op, scatter, gather)


def _direct_exchanges(n: int, x: int, op: Op) -> Exchange:
    peers = [y for y in range(n) if y != x]
    scatter = (tuple(Transfer(True, y, (y,)) for y in peers) + tuple(Transfer(False, y, (x,)) for y in peers),)
    gather = (tuple(Transfer(True, y, (x,)) for y in peers) + tuple(Transfer(False, y, (y,)) for y in peers),)
    if op is Op.ALL_TO_ALL:  # a scatter's transfers, each block moved, not reduced
        return scatter
    return _by_op(op, scatter, gather)


def _halving_doubling_exchanges(n: int, x: int, op: Op) -> Exchange:
    # scatter step k: the partner 2^k apart gets the blocks that agree with x below bit k and not
    # at it; gather step k (k falling) returns them: the mirror of the registry's steps
    log = _log2(n)

    def agreeing(bits: int, flip: int = 0) -> tuple[int, ...]:
        mask = (1 << bits) - 1
        return tuple(b for b in range(n) if (b ^ x ^ flip) & mask == 0)

    scatter = tuple(
        (
            Transfer(True, x ^ 1 << k, tuple(b for b in agreeing(k) if (b ^ x) >> k & 1)),
            Transfer(False, x ^ 1 << k, agreeing(k + 1)),
        )
        for k in range(log)
    )
    gather = tuple(
        (
            Transfer(True, x ^ 1 << k, agreeing(k + 1)),
            Transfer(False, x ^ 1 << k, tuple(b for b in agreeing(k) if (b ^ x) >> k & 1)),
        )
        for k in reversed(range(log))
    )
    return _by_op(op, scatter, gather)


def _by_op(op: Op, scatter: Exchange, gather: Exchange) -> Exchange:
    match op:
        case Op.REDUCE_SCATTER:
            return scatter
        case Op.ALL_GATHER:
            return gather
        case Op.ALL_REDUCE:
            return scatter + gather
        case _:
            raise ValueError(f"no program is written for a {op.value} phase")


def _only_reducing(reduced: Callable[[int, float], tuple[float, ...]]) -> Callable[[Op, int, float], tuple[float, ...]]:
    """Only reduce-scatter and all-reduce phases reduce."""

    def reductions(op: Op, n: int, x: float) -> tuple[float, ...]:
        return reduced(n, x) if op in (Op.REDUCE_SCATTER, Op.ALL_REDUCE) else ()

    return reductions


ALGORITHMS: dict[Algorithm, AlgorithmSpec] = {
    spec.algorithm: spec
    for spec in (
        AlgorithmSpec(
            Algorithm.RING,
            "ring",
            "n - 1 relayed steps to the next NPU (2 (n - 1) for an all-reduce)",
            # the first n - 1 receipts; an all-reduce's second lap is not reduced
            reductions=_only_reducing(lambda n, x: (x / n,) * (n - 1)),
            exchanges=_ring_exchanges,
        ),
        AlgorithmSpec(
            Algorithm.DIRECT,
            "direct",
            "one step to every other NPU at once (two for an all-reduce)",
            _direct_steps,
            _only_reducing(lambda n, x: (x / n,)),  # the n - 1 receipts reduced at once
            exchanges=_direct_exchanges,
        ),
        AlgorithmSpec(
            Algorithm.HALVING_DOUBLING,
            "halvingDoubling",
            "log2 n steps to partners 1, 2, 4, ... apart, halving (or doubling) the data",
            _halving_doubling_steps,
            # on the next message's size, never after the last receipt
            _only_reducing(lambda n, x: tuple(x / 2**j for j in range(2, _log2(n) + 1))),
            power_of_two=True,
            all_to_all=False,
            exchanges=_halving_doubling_exchanges,
        ),
        AlgorithmSpec(
            Algorithm.DOUBLE_BINARY_TREE,
            "doubleBinaryTree",
            "an all-reduce of the whole input up a binary tree and back down, whatever the phase",
            _double_binary_tree_steps,
            # every node but a leaf reduces the whole input before it sends, up and down the tree;
            # an NPU's phase waits for a leaf's path: 2 log2 n - 1 of them
            lambda op, n, x: (x,) * (2 * _log2(n) - 1),
            power_of_two=True,
            all_reduces=True,
            astra2=False,
        ),
        AlgorithmSpec(
            Algorithm.ONE_RING,
            "oneRing",
            "a ring over every NPU of the network, as one phase on dimension 0",
            unflattened=Algorithm.RING,
        ),
        AlgorithmSpec(
            Algorithm.ONE_DIRECT,
            "oneDirect",
            "direct over every NPU of the network, as one phase on dimension 0",
            unflattened=Algorithm.DIRECT,
        ),
        AlgorithmSpec(
            Algorithm.ONE_HALVING_DOUBLING,
            "oneHalvingDoubling",
            "halving-doubling over every NPU of the network, as one phase on dimension 0",
            unflattened=Algorithm.HALVING_DOUBLING,
            power_of_two=True,
            all_to_all=False,
        ),
    )
}
assert set(ALGORITHMS) == set(Algorithm), "every algorithm has its registry entry"
BY_ASTRA_NAME = {spec.astra: algorithm for algorithm, spec in ALGORITHMS.items()}  # ASTRA-sim's names
