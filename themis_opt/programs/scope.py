"""What a program is written for: the instances :func:`~themis_opt.programs.program_of` takes, and
where each task's operations run (its pipeline stage's NPUs; a send's partners).
"""

from __future__ import annotations

import numpy as np

from themis_opt.algorithms import Algorithm, AlgorithmSpec
from themis_opt.errors import InputError
from themis_opt.formats.astra.export_traces import beyond_stage, stage_members
from themis_opt.formats.astra.groups import move, offset, tile_group
from themis_opt.instance import Collective, Instance, Kind, Op
from themis_opt.programs.ir import PROGRAM_KINDS


def runs_over(algorithm: Algorithm) -> AlgorithmSpec:
    """What an algorithm runs over its NPUs: a flattened one's, over every NPU of the network."""
    return algorithm.spec.unflattened.spec if algorithm.spec.unflattened is not None else algorithm.spec


def stage_rows(instance: Instance) -> list[np.ndarray]:
    """Per pipeline stage, the NPUs that run its tasks, ascending (every NPU for one stage).

    Raises
    ------
    InputError
        Stages that do not split the network along whole dimensions (each stage's NPUs those with
        its NPU's coordinates where the stages' NPUs differ).
    """
    try:
        members = stage_members(instance)
    except InputError as error:
        raise InputError("stage_npus", error.problem) from None
    return [np.array(npus, dtype=np.int64) for npus in members]


def send_targets(instance: Instance, send: Collective, rows: np.ndarray) -> np.ndarray:
    """Where each NPU of ``rows`` (the send's stage's) sends: the send's destination moved as far
    from it as the NPU is from the stage's own NPU.
    """
    network = instance.network
    src, dst = send.group
    return np.array([move(network, (dst,), offset(network, src, int(r)))[0] for r in rows], dtype=np.int64)


def check_programmable(instance: Instance) -> None:
    """A one-line error for an instance no program is written for (yet), naming what stands in the way."""
    network = instance.network
    rows = stage_rows(instance)
    stage_of = {int(npu): s for s, npus in enumerate(rows) for npu in npus}
    for c, coll in enumerate(instance.collectives):
        where = instance.where(coll)
        if coll.kind not in PROGRAM_KINDS:
            raise InputError(
                where,
                f"a {coll.kind.value}: programs are written for all-reduce, reduce-scatter, all-gather, all-to-all "
                "and send",
            )
        if coll.kind is Kind.SEND:
            # each NPU of its stage to one of the receiving stage, or (a ring's step: ring attention) to
            # another of its own stage, every one receiving once
            targets = send_targets(instance, coll, rows[coll.stage])
            receiver = rows[stage_of[coll.group[1]]]
            if not np.array_equal(np.sort(targets), receiver) or np.any(targets == rows[coll.stage]):
                raise InputError(
                    where, "a send that does not take each NPU of its stage to a different NPU, each receiving once"
                )
            continue
        if coll.group:
            npus = tuple(int(r) for r in rows[coll.stage])
            if not set(npus).issuperset(coll.group):
                raise InputError(where, f"group {list(coll.group)} reaches beyond stage {coll.stage}'s NPUs")
            try:
                tile_group(network, coll.group, npus)
            except ValueError as error:
                raise InputError(
                    where, f"group {list(coll.group)} moved to NPU {error.args[0]} overlaps another NPU's group"
                ) from None
            continue
        stage = tuple(int(r) for r in rows[coll.stage])
        outside = beyond_stage(instance, c, stage) if instance.num_stages > 1 else None
        if outside is not None:
            raise InputError(
                where, f"runs beyond stage {coll.stage}'s NPUs, to NPU {outside}: a program keeps it there"
            )
        _check_algorithms(instance, c)
    for task in instance.tasks:
        where = instance.where(task)
        if task.issue_ns and not isinstance(task, Collective):
            raise InputError(where, "a computation with an issue time: no program is written for it")
        for dep in task.after:
            if dep.lag_ns:
                raise InputError(where, "a dependency with a lag: no program is written for it")
            other = instance.tasks[instance.task_index[dep.task]]
            to_here = (
                isinstance(other, Collective) and other.kind is Kind.SEND and stage_of[other.group[1]] == task.stage
            )
            if other.stage != task.stage and not to_here:
                raise InputError(
                    where, f"waits for {dep.task} of stage {other.stage}: a stage waits for another through a send"
                )


def _check_algorithms(instance: Instance, c: int) -> None:
    """An error for an algorithm of collective ``c`` no program is written for."""
    network = instance.network
    coll = instance.collectives[c]
    for d in instance.active_dims[c]:
        algorithm = network.dimensions[d].algorithm_for(coll.kind)
        size = network.num_npus if algorithm.flattened else network.dimensions[d].size
        if algorithm.flattened and not network.innermost_charge:
            raise InputError(
                f"network.dimensions[{d}]",
                f"{algorithm.value} on a network that charges a message on the outermost dimension its NPUs "
                "differ in (ASTRA-sim 1.0's rule): 2.x charges the innermost (set innermost_charge)",
            )
        spec = runs_over(algorithm)
        if spec.exchanges is None or spec.all_reduces:
            raise InputError(f"network.dimensions[{d}]", f"{algorithm.value}: no program is written for it")
        if coll.kind is Kind.ALL_TO_ALL:
            try:
                spec.exchanges(size, 0, Op.ALL_TO_ALL)
            except ValueError:
                raise InputError(
                    f"network.dimensions[{d}]",
                    f"{algorithm.value}: no program is written for its all-to-all (direct's is)",
                ) from None
