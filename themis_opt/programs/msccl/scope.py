"""What of a program one MSCCL algorithm holds: one collective (:func:`one_collective`), over one
group's communicator (:func:`communicator`), its data alone and its reductions in order
(:func:`as_msccl`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from themis_opt.errors import InputError
from themis_opt.programs.ir import COLUMNS, OpKind, Program, physical_dims
from themis_opt.programs.msccl.format import COLL
from themis_opt.programs.races import order_reductions


def as_msccl(program: Program, collective: int | None = None) -> Program:
    """``program`` as MSCCL runs it: with ``collective``, that collective's algorithm alone
    (:func:`one_collective`); its data alone (a GPU runtime times its own messages, so no padding),
    each GPU's reductions into the same pieces one after another (an ``rrc`` step reads and writes
    the buffer itself: :func:`~themis_opt.programs.races.order_reductions`), and a collective over
    part of the network as its communicator runs it (:func:`communicator`).
    """
    if collective is not None:
        program = one_collective(program, collective)
    return order_reductions(communicator(program.unpadded()))


def one_collective(program: Program, collective: int) -> Program:
    """The messages of one collective of ``program`` alone, each waiting for the messages of that
    collective it waited for through any other operation (so each dimension serves them in the
    schedule's order): the collective's algorithm as the program's schedule runs it, without what
    the rest of the program adds (computations, issue times, other collectives, the waits between).

    Raises
    ------
    InputError
        ``collective`` is not one of the program's.
    """
    if not 0 <= collective < len(program.collectives):
        raise InputError("collective", f"{collective} is not one of the program's {len(program.collectives)}")
    keep = ((program.collective == collective) & (program.kind != OpKind.COMP)).tolist()
    starts, deps = program.dep_start.tolist(), program.deps.tolist()
    nearest: list[tuple[int, ...]] = [()] * program.num_ops  # per operation, the kept ones it waits for
    waits: list[int] = []
    counts: list[int] = []
    rows: list[int] = []
    for op in range(program.num_ops):  # each rank's rows in order: what an operation waits for comes first
        found: set[int] = set()
        for d in deps[starts[op] : starts[op + 1]]:
            found.update((d,) if keep[d] else nearest[d])
        if keep[op]:
            nearest[op] = (op,)
            rows.append(op)
            waits.extend(sorted(found))
            counts.append(len(found))
        else:
            nearest[op] = tuple(found)
    kept = np.array(rows, dtype=np.int64)
    new_row = np.full(program.num_ops, -1, dtype=np.int64)
    new_row[kept] = np.arange(len(kept))
    columns = {name: getattr(program, name)[kept] for name in COLUMNS}
    columns["collective"] = np.zeros(len(kept), dtype=np.int64)
    return Program(
        links=program.links,
        collectives=(program.collectives[collective],),
        unit_sets=program.unit_sets,
        rank_start=np.searchsorted(kept, program.rank_start),
        **columns,
        dep_start=np.r_[0, np.cumsum(counts, dtype=np.int64)],
        deps=new_row[np.array(waits, dtype=np.int64)],
        active_phases=program.active_phases,
        stages=program.stages,
        exclusive_reductions=program.exclusive_reductions,
    )


def communicator(program: Program) -> Program:
    """A program of one collective over part of the network (some of its dimensions, or one pipeline
    stage's NPUs) as the collective's communicator runs it: the operations of one group of it (the
    NPUs that share its first NPU's coordinates outside the collective's dimensions), each NPU
    numbered by its position in the group (its coordinates on those dimensions, the first varying
    fastest: unit ``u`` of a chunk is rank ``u``'s), on those dimensions alone. Every other group runs
    the same operations among its own NPUs at the same times, so one MSCCL algorithm, chosen by the
    communicator's size, serves them all. Any other program is returned as it is.

    Raises
    ------
    InputError
        The collective runs over communicator groups (one ring a group, which may cross any
        dimension) or over part of a dimension carved into parts (its group's links are not a
        network of their own).
    """
    members = group_of(program)
    if members is None:
        return program
    (coll,) = program.collectives
    position = np.full(program.npus, -1, dtype=np.int64)
    position[members] = np.arange(len(members))
    keep = np.concatenate([np.arange(program.rank_start[r], program.rank_start[r + 1]) for r in members])
    row = np.full(program.num_ops, -1, dtype=np.int64)
    row[keep] = np.arange(len(keep))
    dep_counts = np.diff(program.dep_start)[keep]
    ends = np.cumsum(dep_counts)
    at = np.repeat(program.dep_start[keep] - (ends - dep_counts), dep_counts) + np.arange(ends[-1])
    deps, peer = row[program.deps[at]], program.peer[keep]
    peer = np.where(peer >= 0, position[peer], -1)
    if (deps < 0).any() or ((program.peer[keep] >= 0) & (peer < 0)).any():  # pragma: no cover - program_of's
        raise ValueError("communicator: a group's operations reach beyond the group")
    return Program(
        links=tuple(program.links[d] for d in coll.dims),
        collectives=(replace(coll, dims=tuple(range(len(coll.dims))), stage=0),),
        unit_sets=program.unit_sets,
        rank_start=np.r_[0, np.cumsum(np.diff(program.rank_start)[members])],
        **{name: getattr(program, name)[keep] for name in COLUMNS if name != "peer"},
        peer=peer,
        dep_start=np.r_[0, ends],
        deps=deps,
        active_phases=program.active_phases,
        exclusive_reductions=program.exclusive_reductions,
    )


def group_of(program: Program) -> np.ndarray | None:
    """The NPUs of the first group of a program's one collective over part of the network, ascending
    (their positions in it); ``None`` for any other program (see :func:`communicator`).
    """
    if len(program.collectives) != 1 or program.collectives[0].kind not in COLL:
        return None
    (coll,) = program.collectives
    stage = program.stages[coll.stage] if program.stages else range(program.npus)
    whole = tuple(d for d, link in enumerate(program.links) if link.size > 1)
    if set(whole) <= set(coll.dims) and len(stage) == program.npus:
        return None
    if coll.groups or coll.flat:
        what = "communicator groups" if coll.groups else "a flattened algorithm"
        raise InputError("msccl", f"a collective over part of the network by {what}: no MSCCL program is written")
    if any(0 < len(set(parts) & set(coll.dims)) < len(parts) for parts in physical_dims(program.links)):
        raise InputError("msccl", "a collective over part of a carved dimension: its group is not a network of its own")
    others = [d for d in range(len(program.links)) if d not in coll.dims]
    coords = program.coordinates
    members: np.ndarray = np.flatnonzero((coords[:, others] == coords[min(stage), others]).all(axis=1))
    return members
