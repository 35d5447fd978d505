"""The iteration metrics of a schedule: what the summary reports beside the makespan."""

from __future__ import annotations

import pytest

from themis_opt import solve
from themis_opt.cost import send_ns
from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Network
from themis_opt.metrics import iteration_metrics
from themis_opt.validator import validate


def _two_stages() -> Instance:
    # stage 0 (NPU 0): forward f0, its activations to stage 1, then backward b0 once stage 1's
    # gradient is back, then a data-parallel all-reduce on dimension 1
    network = Network((Dimension(2, "ring", 100.0, 500.0), Dimension(2, "ring", 100.0, 500.0)))
    tasks = (
        Compute(10_000.0, "f0"),
        Collective("send", 2**20, 1, id="act", group=(0, 1), after=(After("f0"),)),
        Compute(10_000.0, "f1", after=(After("act"),), stage=1),
        Compute(20_000.0, "b1", after=(After("f1"),), stage=1),
        Collective("send", 2**20, 1, id="grad", group=(1, 0), after=(After("b1"),), stage=1),
        Compute(20_000.0, "b0", after=(After("grad"),)),
        Collective("all_reduce", 2**24, 1, dimensions=(1,), id="ar", after=(After("b0"),)),
    )
    return Instance(network, tasks, "two-stages", stage_npus=(0, 1))


def test_the_bubble_is_the_wait_for_the_other_stage() -> None:
    instance = _two_stages()
    result = solve(instance, "baseline")
    assert result.schedule is not None and validate(instance, result.schedule) == []
    metrics = iteration_metrics(instance, result.schedule)
    assert metrics is not None
    # stage 0 ends last (its all-reduce); between f0 and b0 it waits for two sends and stage 1's compute
    send = send_ns(instance.network, 0, 1, 2**20)
    assert metrics.compute_ns == 30_000.0
    assert metrics.bubble_ns == pytest.approx(2 * send + 30_000.0)
    # the rest of the exposed time is the all-reduce after b0, which ends when f0, the bubble and b0 are done
    b0_end = 10_000.0 + metrics.bubble_ns + 20_000.0
    assert metrics.exposed_ns - metrics.bubble_ns == pytest.approx(result.makespan - b0_end)
    assert metrics.exposed_ns > metrics.bubble_ns > 0


def test_no_bubble_is_reported_without_stages() -> None:
    network = Network((Dimension(2, "ring", 100.0, 500.0),))
    tasks = (Compute(1_000.0, "c"), Collective("all_reduce", 2**20, 1, id="ar", after=(After("c"),)))
    instance = Instance(network, tasks, "one-stage")
    result = solve(instance, "baseline")
    assert result.schedule is not None
    metrics = iteration_metrics(instance, result.schedule)
    assert metrics is not None and metrics.bubble_ns is None
