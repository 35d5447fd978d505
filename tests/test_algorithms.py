"""The algorithm registry: one entry per algorithm, read alike by the schema, the cost model and ASTRA-sim's files."""

from __future__ import annotations

import pytest

from themis_opt.algorithms import ALGORITHMS, BY_ASTRA_NAME, Algorithm, Op
from themis_opt.cost import phase_duration
from themis_opt.formats.native import instance_schema
from themis_opt.instance import Dimension, Network


def _schema_enums(node: object) -> list[list[str]]:
    """Every enum in the schema that lists algorithms."""
    found: list[list[str]] = []
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and "one_ring" in node["enum"]:
            found.append(node["enum"])
        for value in node.values():
            found += _schema_enums(value)
    elif isinstance(node, list):
        for value in node:
            found += _schema_enums(value)
    return found


def test_the_schema_lists_every_algorithm_of_the_registry() -> None:
    enums = _schema_enums(instance_schema())
    assert len(enums) == 4  # algorithm, all_to_all_algorithm, reduce_scatter_algorithm, all_gather_algorithm
    assert all(sorted(e) == sorted(a.value for a in ALGORITHMS) for e in enums)


def test_astra_names_are_one_to_one() -> None:
    assert len(BY_ASTRA_NAME) == len(ALGORITHMS)
    assert all(BY_ASTRA_NAME[spec.astra] is a for a, spec in ALGORITHMS.items())


def test_flattened_algorithms_name_what_they_run() -> None:
    for algorithm, spec in ALGORITHMS.items():
        if spec.unflattened is not None:
            assert algorithm.flattened and not spec.unflattened.flattened
            assert spec.steps is None
        else:
            assert not algorithm.flattened


@pytest.mark.parametrize("algorithm", [a for a in Algorithm if not a.flattened and a.spec.steps is not None])
def test_listed_steps_time_a_phase(algorithm: Algorithm) -> None:
    """A phase of a step-listed algorithm costs each step's delay, latency and wire time (one hop, 8 NPUs)."""
    dim = Dimension(8, "fully_connected", 100.0, 50.0, algorithm=algorithm)
    network = Network((dim,), endpoint_delay_ns=10.0, congestion_unaware=True)
    op = algorithm.spec.performed(Op.REDUCE_SCATTER)
    x = 2.0**20
    steps = algorithm.spec.steps
    assert steps is not None
    listed = steps(8, lambda k: 1, op)
    link = dim.bytes_per_ns / (dim.physical_size - 1)
    expected = sum(10.0 + hops * 50.0 + per * x / link for hops, _, per in listed)
    assert phase_duration(network, 0, Op.REDUCE_SCATTER, x, algorithm) == pytest.approx(expected)


def test_double_binary_tree_always_all_reduces() -> None:
    spec = Algorithm.DOUBLE_BINARY_TREE.spec
    assert all(spec.performed(op) is Op.ALL_REDUCE for op in Op)
    assert Algorithm.RING.spec.performed(Op.ALL_GATHER) is Op.ALL_GATHER
