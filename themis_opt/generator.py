"""Reproducible random instances, in named families.

Every family draws from one ``random.Random(seed)``, so the same family,
count and seed give the same files on every machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from themis_opt.instance import Collective, Dimension, Instance, Kind, Network, Topology

MIB = 2**20
BANDWIDTHS = (25, 50, 100, 200, 400)
TOPOLOGIES = (Topology.RING, Topology.FULLY_CONNECTED, Topology.SWITCH)


def _sizes(rng: random.Random, dims: int, low: int, high: int, max_npus: int) -> list[int]:
    """Powers of two in [low, high] for each dimension, product <= max_npus."""
    choices = [2**e for e in range(low.bit_length() - 1, high.bit_length())]
    while True:
        sizes = [rng.choice(choices) for _ in range(dims)]
        product = 1
        for s in sizes:
            product *= s
        if product <= max_npus:
            return sizes


def _kind(rng: random.Random) -> Kind:
    roll = rng.random()
    return Kind.ALL_REDUCE if roll < 0.8 else Kind.REDUCE_SCATTER if roll < 0.9 else Kind.ALL_GATHER


def _collectives(rng: random.Random, chunk_choices: tuple[int, ...], max_exp: int = 30) -> tuple[Collective, ...]:
    """One collective, or now and then a second one issued later."""
    colls = [Collective(_kind(rng), 2 ** rng.randint(20, max_exp), rng.choice(chunk_choices))]
    if rng.random() < 0.15:
        issue = float(rng.choice((10_000, 50_000, 100_000)))
        colls.append(Collective(_kind(rng), 2 ** rng.randint(20, max_exp), rng.choice(chunk_choices), issue))
    return tuple(colls)


def _network(rng: random.Random, sizes: list[int], topologies: list[Topology], bandwidths: list[float]) -> Network:
    dims = tuple(
        Dimension(n, t, b, float(rng.choice(range(100, 1001, 100)))) for n, t, b in zip(sizes, topologies, bandwidths)
    )
    return Network(dims, 10.0)


def _falling(rng: random.Random, dims: int) -> list[float]:
    """Bandwidths that fall with the dimension (each step halves or quarters)."""
    bandwidths = [float(rng.choice((200, 400)))]
    for _ in range(dims - 1):
        bandwidths.append(max(25.0, bandwidths[-1] / rng.choice((2, 2, 4))))
    if bandwidths[-1] == bandwidths[0]:  # pragma: no cover - the first step always falls
        bandwidths[-1] = bandwidths[0] / 2
    return bandwidths


def homogeneous(rng: random.Random) -> tuple[Network, tuple[Collective, ...]]:
    """Equal bandwidths in every dimension, one topology for all."""
    dims = rng.randint(2, 4)
    sizes = _sizes(rng, dims, 2, 64, 4096)
    topology = rng.choice(TOPOLOGIES)
    bandwidth = float(rng.choice(BANDWIDTHS))
    return _network(rng, sizes, [topology] * dims, [bandwidth] * dims), _collectives(rng, (4, 8, 16, 32, 64, 128))


def heterogeneous(rng: random.Random) -> tuple[Network, tuple[Collective, ...]]:
    """Bandwidths falling with the dimension, as in next-generation platforms."""
    dims = rng.randint(2, 4)
    sizes = _sizes(rng, dims, 2, 64, 4096)
    topologies = [rng.choice(TOPOLOGIES) for _ in range(dims)]
    return _network(rng, sizes, topologies, _falling(rng, dims)), _collectives(rng, (4, 8, 16, 32, 64, 128))


def mixed_topology(rng: random.Random) -> tuple[Network, tuple[Collective, ...]]:
    """Ring, fully-connected and switch dimensions mixed, random bandwidths."""
    dims = rng.randint(2, 4)
    sizes = _sizes(rng, dims, 2, 64, 4096)
    topologies = [TOPOLOGIES[d % 3] for d in range(dims)]
    rng.shuffle(topologies)
    bandwidths = [float(rng.choice(BANDWIDTHS)) for _ in range(dims)]
    return _network(rng, sizes, topologies, bandwidths), _collectives(rng, (4, 8, 16, 32, 64))


def small_exact(rng: random.Random) -> tuple[Network, tuple[Collective, ...]]:
    """Small networks and few chunks: CP-SAT proves these optimal in seconds."""
    dims = rng.randint(2, 3)
    sizes = _sizes(rng, dims, 2, 8, 64)
    topologies = [rng.choice(TOPOLOGIES) for _ in range(dims)]
    bandwidths = _falling(rng, dims) if rng.random() < 0.7 else [float(rng.choice(BANDWIDTHS))] * dims
    kind = _kind(rng)
    chunks = rng.choice((4, 5, 6, 8))
    return _network(rng, sizes, topologies, bandwidths), (Collective(kind, 2 ** rng.randint(20, 26), chunks),)


def many_chunks(rng: random.Random) -> tuple[Network, tuple[Collective, ...]]:
    """128 to 1024 chunks of one large collective."""
    dims = rng.randint(2, 4)
    sizes = _sizes(rng, dims, 2, 64, 4096)
    topologies = [rng.choice(TOPOLOGIES) for _ in range(dims)]
    coll = Collective(_kind(rng), 2 ** rng.randint(27, 30), rng.choice((128, 256, 512, 1024)))
    return _network(rng, sizes, topologies, _falling(rng, dims)), (coll,)


FAMILIES: dict[str, Callable[[random.Random], tuple[Network, tuple[Collective, ...]]]] = {
    "homogeneous": homogeneous,
    "heterogeneous": heterogeneous,
    "mixed-topology": mixed_topology,
    "small-exact": small_exact,
    "many-chunks": many_chunks,
}


def generate(family: str, count: int, seed: int) -> list[Instance]:
    """``count`` instances of ``family``, reproducibly from ``seed``.

    Instances are named ``<family>-s<seed>-<index>``.

    Raises
    ------
    KeyError
        If the family is unknown (the CLI checks first).
    """
    make = FAMILIES[family]
    rng = random.Random(f"{family}:{seed}")
    instances = []
    for index in range(count):
        network, collectives = make(rng)
        instances.append(Instance(network, collectives, f"{family}-s{seed}-{index:03d}"))
    return instances
