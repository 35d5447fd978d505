"""The instances the benchmarks share: the 4D all-reduces and the 8 collectives issued over time."""

from __future__ import annotations

import dataclasses

from themis_opt.instance import Collective, Dimension, Instance, Network

MIB = 2**20
SHAPES = ((4, 4, 4, 16), (4, 8, 8, 4), (8, 4, 4, 8), (16, 4, 4, 4), (4, 16, 4, 4))
SIZES = (256 * MIB, 512 * MIB, 1024 * MIB, 256 * MIB, 1024 * MIB)


def network(shape: tuple[int, ...]) -> Network:
    """Switches of ``shape`` NPUs at 400, 200, 100 and 50 GB/s, 500 ns a hop."""
    return Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in zip(shape, (400.0, 200.0, 100.0, 50.0))))


def all_reduce(shape: tuple[int, ...], size: int, chunks: int) -> Instance:
    """One all-reduce of ``size`` bytes in ``chunks`` chunks on :func:`network`."""
    name = f"4d-{'x'.join(map(str, shape))}-{size // MIB}MiB-{chunks}c"
    return Instance(network(shape), (Collective("all_reduce", size, chunks),), name)


def eight_collectives(chunks: int = 16, count: int = 8, shape: tuple[int, ...] = (4, 8, 8, 4)) -> Instance:
    """8 all-reduces of 16, 32, 64, 128, 16, ... MiB, 16 chunks each, issued 150 us apart on 4x8x8x4
    (or ``count`` of them, ``chunks`` each, on ``shape``).
    """
    sizes = [(16, 32, 64, 128)[i % 4] for i in range(count)]
    name = "4d-8-collectives"
    if (chunks, count, shape) != (16, 8, (4, 8, 8, 4)):
        name = f"4d-{count}-collectives-{chunks}c-{'x'.join(map(str, shape))}"
    return Instance(
        network(shape),
        tuple(Collective("all_reduce", s * MIB, chunks, issue_ns=150_000.0 * i) for i, s in enumerate(sizes)),
        name,
    )


def first_call(instance: Instance, tag: str) -> Instance:
    """``instance`` under a name of its own (``tag`` added): a solve of it finds none of the answers
    an earlier call cached for an equal instance (the load programs'), so it is timed as a user's
    process would run it.
    """
    return dataclasses.replace(instance, name=f"{instance.name} [{tag}]")
