"""Shared fixtures: the instances under tests/data and the schedules of every heuristic."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.io import load_instance
from themis_opt.policies import baseline_orders, themis_orders
from themis_opt.schedule import Schedule
from themis_opt.simulator import simulate

DATA = Path(__file__).parent / "data"
NAMES = ("worked", "three_dim", "mixed", "tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag")
TINY = ("tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag", "worked")


def load(name: str) -> Instance:
    return load_instance(DATA / f"{name}.json")


@pytest.fixture
def worked() -> Instance:
    return load("worked")


@pytest.fixture(params=NAMES)
def instance(request: pytest.FixtureRequest) -> Instance:
    return load(request.param)


@pytest.fixture(params=TINY)
def tiny(request: pytest.FixtureRequest) -> Instance:
    return load(request.param)


def heuristic_schedules(instance: Instance) -> dict[str, Schedule]:
    """Every policy x intra-dimension policy combination, simulated."""
    return {
        f"{name}-{intra}": simulate(instance, orders, intra)
        for name, orders in (("baseline", baseline_orders(instance)), ("themis", themis_orders(instance)))
        for intra in ("fifo", "scf")
    }


def make(dims: list[tuple[int, str, float]], kind: str = "all_reduce", size: int = 2**20, chunks: int = 1) -> Instance:
    """A one-collective instance from (size, topology, GB/s) triples, latency 500 ns."""
    network = Network(tuple(Dimension(n, t, b, 500.0) for n, t, b in dims))
    return Instance(network, (Collective(kind, size, chunks),))
