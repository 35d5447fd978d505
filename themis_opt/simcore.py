"""The simulator's compiled core: the event loop of :mod:`themis_opt.simulator` in C.

:func:`themis_opt.simulator.simulate` and
:func:`~themis_opt.simulator.simulate_makespan` run here when they can (fixed
orders, or Themis's planner from a fresh :class:`~themis_opt.policies.ThemisTracker`)
and in Python otherwise; both follow the same rules step for step, so the
makespans and schedules are the same (the tests compare them). The C file,
``_simcore.c``, is built when the package is installed (``setup.py``) and
loaded with :mod:`ctypes`; where it could not be built, everything runs in
Python, only slower.

An instance's arrays (tasks, dependencies, collectives, dimensions) and its
phase tables (one per distinct kind, chunk size and order, from
:func:`themis_opt.cost.chunk_phases`) are prepared once and kept while the
instance lives.
"""

from __future__ import annotations

import ctypes
import importlib.util
import itertools
import logging
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, assert_never

import numpy as np

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.cost import PhaseSpec, chunk_phases, merges
from themis_opt.instance import Collective, Instance, Kind, Op
from themis_opt.methods import Intra
from themis_opt.orders import Order, Orders
from themis_opt.schedule import PhaseColumns

logger = logging.getLogger(__name__)

MAX_PLANNED_DIMS = 5  # Themis in C prepares every order of a collective's dimensions: 5! = 120 at most


def _kind_code(kind: Kind) -> int:
    """The C file's code of ``kind`` (its enum: AR, RS, AG, A2A)."""
    match kind:
        case Kind.ALL_REDUCE:
            return 0
        case Kind.REDUCE_SCATTER:
            return 1
        case Kind.ALL_GATHER:
            return 2
        case Kind.ALL_TO_ALL:
            return 3
        case _ as unreachable:
            assert_never(unreachable)


_P = ctypes.c_void_p
_ARGTYPES: list[Any] = [
    ctypes.c_int, _P, _P, _P, _P, _P, _P, _P,  # tasks
    ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P,  # collectives
    ctypes.c_int, _P, _P,  # computes
    ctypes.c_int, _P, _P, ctypes.c_int,  # dimensions
    _P, _P, _P, _P, _P,  # phase tables
    ctypes.c_int, _P, _P, _P,  # orders
    ctypes.c_int, ctypes.c_double, ctypes.c_int,  # policy, deadline, row width
    _P, _P, _P, _P,  # out
]  # fmt: skip


def _load() -> Any:
    spec = importlib.util.find_spec("themis_opt._simcore")
    if spec is None or spec.origin is None:
        logger.info("the compiled simulator core is not built: the simulator runs in Python")
        return None
    try:
        library = ctypes.CDLL(spec.origin)
    except OSError as error:
        logger.info("the compiled simulator core cannot be loaded (%s): the simulator runs in Python", error)
        return None
    function = library.simulate_core
    function.argtypes = _ARGTYPES
    function.restype = ctypes.c_int
    return function


_CORE: Any = None
_LOADED = False


def _core() -> Any:
    global _CORE, _LOADED
    if not _LOADED:
        _CORE, _LOADED = _load(), True
    return _CORE


def available() -> bool:
    """Whether the compiled core is built and loads (else the simulator runs in Python)."""
    return _core() is not None


def _ptr(array: np.ndarray) -> int:
    return int(array.ctypes.data)


@dataclass
class _Tables:
    """Phase tables in the order they were made, and the arrays the core reads."""

    index: dict[tuple[Kind, int, Order, bool], int] = field(default_factory=dict)
    specs: list[tuple[PhaseSpec, ...]] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    arrays: tuple[np.ndarray, ...] | None = None
    widest: int = 1

    def table(self, instance: Instance, c: int, nbytes: int, order: Order, merged: bool) -> int:
        key = (instance.collectives[c].kind, nbytes, order, merged)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.specs)
            self.specs.append(chunk_phases(instance, c, nbytes, order, merged))
            self.orders.append(order)
            self.widest = max(self.widest, len(self.specs[-1]))
            self.arrays = None
        return found

    def columns(self) -> tuple[np.ndarray, ...]:
        if self.arrays is None:
            phases = [p for table in self.specs for p in table]
            ptr = np.zeros(len(self.specs) + 1, dtype=np.int64)
            ptr[1:] = np.cumsum([len(t) for t in self.specs])
            self.arrays = (
                ptr,
                np.array([p.dim for p in phases], dtype=np.int32),
                np.array([p.duration for p in phases], dtype=np.float64),
                np.array([max(p.bytes_in, p.bytes_out) for p in phases], dtype=np.float64),
                np.array([p.op in (Op.ALL_TO_ALL, Op.ALL_REDUCE) for p in phases], dtype=np.uint8),
            )
        return self.arrays


@dataclass
class _Prepared:
    """One instance's arrays for the core, its phase tables and its chunks' orders' tables."""

    static: tuple[Any, ...]
    tables: _Tables
    by_order: dict[tuple[int, bool], dict[tuple[int, Order], int]]  # (collective, merged) -> (bytes, order) -> table
    planned: tuple[np.ndarray, np.ndarray] | None = None  # every order's table per collective, for Themis
    collective_of: np.ndarray | None = None


_PREPARED: dict[int, tuple[weakref.ref[Instance], _Prepared]] = {}


def _prepared(instance: Instance) -> _Prepared:
    key = id(instance)
    entry = _PREPARED.get(key)
    if entry is not None and entry[0]() is instance:
        return entry[1]
    prepared = _Prepared(_static(instance), _Tables(), {})
    _PREPARED[key] = (weakref.ref(instance, lambda _: _PREPARED.pop(key, None)), prepared)
    return prepared


def _static(instance: Instance) -> tuple[Any, ...]:
    tasks = instance.tasks
    index = instance.task_index
    colls = instance.collectives
    is_coll = np.array([isinstance(t, Collective) for t in tasks], dtype=np.uint8)
    which = np.zeros(len(tasks), dtype=np.int32)
    which[is_coll == 1] = np.arange(int(is_coll.sum()))
    which[is_coll == 0] = np.arange(len(tasks) - int(is_coll.sum()))
    successors: list[list[tuple[int, float]]] = [[] for _ in tasks]
    for t, task in enumerate(tasks):
        for dep in task.after:
            successors[index[dep.task]].append((t, dep.lag_ns))
    succ_ptr = np.zeros(len(tasks) + 1, dtype=np.int64)
    succ_ptr[1:] = np.cumsum([len(s) for s in successors])
    succ_task = np.array([t for s in successors for t, _ in s], dtype=np.int32)
    succ_lag = np.array([lag for s in successors for _, lag in s], dtype=np.float64)
    chunks = np.array([c.chunks for c in colls], dtype=np.int32)
    first = np.zeros(len(colls), dtype=np.int32)
    first[1:] = np.cumsum(chunks)[:-1]
    dims = instance.network.dimensions
    active = instance.active_dims
    active_ptr = np.zeros(len(colls) + 1, dtype=np.int64)
    active_ptr[1:] = np.cumsum([len(a) for a in active])
    nominal = [
        c.chunk_bytes // math.prod(dims[d].size for d in active[i]) if c.kind is Kind.ALL_GATHER else c.chunk_bytes
        for i, c in enumerate(colls)
    ]
    arrays = (
        is_coll,
        which,
        np.array([t.issue_ns for t in tasks], dtype=np.float64),
        np.array([len(t.after) for t in tasks], dtype=np.int32),
        succ_ptr,
        succ_task,
        succ_lag,
        chunks,
        first,
        np.array([c.priority for c in colls], dtype=np.int64),
        np.array([_kind_code(c.kind) for c in colls], dtype=np.int32),
        np.flatnonzero(is_coll).astype(np.int32),
        active_ptr,
        np.array([d for a in active for d in a], dtype=np.int32),
        np.array(nominal, dtype=np.int64),
        np.array([t.duration_ns for t in instance.computes], dtype=np.float64),
        np.flatnonzero(is_coll == 0).astype(np.int32),
        np.array([d.size for d in dims], dtype=np.int64),
        np.array([d.bandwidth_gbps for d in dims], dtype=np.float64),
    )
    return arrays


def collective_of_chunks(instance: Instance) -> np.ndarray:
    """Each chunk's collective, in ``instance.chunk_ids`` order."""
    prepared = _prepared(instance)
    if prepared.collective_of is None:
        prepared.collective_of = np.repeat(np.arange(len(instance.collectives)), prepared.static[7])
    return prepared.collective_of


def plannable(instance: Instance) -> bool:
    """Whether Themis's planner runs in the core for ``instance`` (every collective on at most
    :data:`MAX_PLANNED_DIMS` dimensions).
    """
    return all(len(a) <= MAX_PLANNED_DIMS for a in instance.active_dims)


def _planned_tables(instance: Instance, prepared: _Prepared) -> tuple[np.ndarray, np.ndarray]:
    """Per collective, the table of every order of its dimensions (lexicographic), for a chunk and the last."""
    if prepared.planned is None:
        blocks: dict[tuple[Kind, int, int, tuple[int, ...]], int] = {}
        perm_ptr = np.zeros(len(instance.collectives), dtype=np.int64)
        table: list[int] = []
        for c, coll in enumerate(instance.collectives):
            dims = instance.active_dims[c]
            key = (coll.kind, coll.chunk_bytes, coll.last_chunk_bytes, dims)
            if key not in blocks:
                blocks[key] = len(table)
                for nbytes in (coll.chunk_bytes, coll.last_chunk_bytes):
                    for order in itertools.permutations(dims):
                        table.append(prepared.tables.table(instance, c, nbytes, order, False))
            perm_ptr[c] = blocks[key]
        prepared.planned = (perm_ptr, np.array(table, dtype=np.int32))
    return prepared.planned


@dataclass(frozen=True)
class CoreRun:
    """What one run of the core found: the makespan, each chunk's table, every start."""

    makespan: float
    table_of: np.ndarray
    starts: np.ndarray  # chunk x phase position
    compute_starts: np.ndarray
    tables: _Tables

    def orders(self, instance: Instance) -> dict[tuple[int, int], Order]:
        """Each chunk's order."""
        tables = self.tables.orders
        return {cid: tables[x] for cid, x in zip(instance.chunk_ids, self.table_of.tolist())}

    def plan(self) -> list[tuple[PhaseSpec, ...]]:
        """Each chunk's phases."""
        specs = self.tables.specs
        return [specs[x] for x in self.table_of.tolist()]

    def columns(self, collective_of: np.ndarray) -> PhaseColumns:
        """Every phase as columns, in (chunk, phase) order (``collective_of``: each chunk's collective)."""
        ptr, dim, duration = self.tables.columns()[:3]
        first = ptr[self.table_of]
        count = ptr[self.table_of + 1] - first
        position = np.arange(self.starts.shape[1])
        inside = position[None, :] < count[:, None]
        index = (first[:, None] + position[None, :])[inside]
        start = self.starts[inside]
        return PhaseColumns(np.repeat(collective_of, count), dim[index], start, start + duration[index])

    def phase_starts(self) -> list[list[float]]:
        """Each chunk's phase starts."""
        rows = self.starts.tolist()
        return [row[: len(p)] for row, p in zip(rows, self.plan())]


def run(
    instance: Instance,
    orders: Orders | None,
    intra: Intra,
    deadline: Deadline,
    *,
    baseline: bool = False,
) -> CoreRun:
    """Time ``orders`` (``None``: Themis's planner) under ``intra`` in the core.

    Raises
    ------
    OutOfTime
        If ``deadline`` passes first.
    """
    core = _core()
    assert core is not None, "the compiled core is not available"
    prepared = _prepared(instance)
    tables = prepared.tables
    ids = instance.chunk_ids
    n = len(ids)
    if orders is None:
        perm_ptr, perm_table = _planned_tables(instance, prepared)
        fixed = np.zeros(1, dtype=np.int32)
    else:
        perm_ptr, perm_table = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32)
        chosen = _fixed_tables(instance, prepared, orders, baseline)
        fixed = np.array(chosen, dtype=np.int32)
    columns = tables.columns()
    width = tables.widest
    table_of = np.zeros(max(n, 1), dtype=np.int32)
    starts = np.zeros((max(n, 1), width), dtype=np.float64)
    compute_starts = np.zeros(max(len(instance.computes), 1), dtype=np.float64)
    makespan = ctypes.c_double(0.0)
    s = prepared.static
    network = instance.network
    # fmt: off
    status = core(
        len(instance.tasks), _ptr(s[0]), _ptr(s[1]), _ptr(s[2]), _ptr(s[3]), _ptr(s[4]), _ptr(s[5]), _ptr(s[6]),
        len(instance.collectives), _ptr(s[7]), _ptr(s[8]), _ptr(s[9]), _ptr(s[10]), _ptr(s[11]), _ptr(s[12]),
        _ptr(s[13]), _ptr(s[14]),
        len(instance.computes), _ptr(s[15]), _ptr(s[16]),
        network.num_dims, _ptr(s[17]), _ptr(s[18]), network.active_chunks,
        *(_ptr(a) for a in columns),
        int(orders is None), _ptr(fixed), _ptr(perm_ptr), _ptr(perm_table),
        _policy_code(intra), deadline.at if not math.isinf(deadline.at) else math.inf, width,
        _ptr(table_of), _ptr(starts), _ptr(compute_starts), ctypes.addressof(makespan),
    )
    # fmt: on
    if status == -1:
        raise OutOfTime("simulator: out of time")
    if status != 0:
        raise MemoryError("the simulator core ran out of memory")
    return CoreRun(makespan.value, table_of[:n], starts[:n], compute_starts[: len(instance.computes)], tables)


_UNSEEN = object()


def _fixed_tables(instance: Instance, prepared: _Prepared, orders: Orders, baseline: bool) -> list[int]:
    """Each chunk's table; each distinct order of a collective is checked once (then kept)."""
    from themis_opt.simulator import check_order

    tables = prepared.tables
    chosen: list[int] = []
    for c, coll in enumerate(instance.collectives):
        merged = merges(instance, c, baseline)
        per = prepared.by_order.setdefault((c, merged), {})
        last: Any = _UNSEEN  # the order object seen last: the chunks of a collective often share one
        x = -1
        for k in range(coll.chunks):
            order = orders.get((c, k))
            nbytes = coll.bytes_of(k)
            if order is not last or k == coll.chunks - 1:
                key = (nbytes, order if isinstance(order, tuple) else tuple(order or ()))
                found = per.get(key)
                if found is None:
                    check_order(instance, c, k, order)
                    found = per[key] = tables.table(instance, c, nbytes, key[1], merged)
                x, last = found, order
            chosen.append(x)
    return chosen


def _policy_code(intra: Intra) -> int:
    match intra:
        case Intra.FIFO:
            return 0
        case Intra.SCF:
            return 1
        case _ as unreachable:
            assert_never(unreachable)
