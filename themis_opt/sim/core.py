"""The simulator's compiled core: the event loop of :mod:`themis_opt.sim.engine` in C, bound with ctypes.

:func:`themis_opt.sim.simulate` and
:func:`~themis_opt.sim.simulate_makespan` run here when they can (fixed
orders, or Themis's planner from a fresh :class:`~themis_opt.policies.ThemisTracker`)
and in Python otherwise; both follow the same rules step for step, so the
makespans and schedules are the same (the tests compare them). The C sources,
``_simcore/`` beside this module, are built into one library when the package is installed
(``setup.py``) and loaded with :mod:`ctypes`; where it could not be built, everything runs in
Python, only slower.

An instance's arrays (tasks, dependencies, collectives, dimensions) and its
phase tables (one per distinct kind, chunk size and order, from
:func:`themis_opt.cost.chunk_phases`) are prepared once and kept while the
instance lives.

For the searches, :mod:`themis_opt.sim.timers` times fixed assignments from snapshots
of the current one's run (and :mod:`themis_opt.search.walk` runs the assignment
search's moves on it in C).
"""

from __future__ import annotations

import ctypes
import importlib.util
import itertools
import logging
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from themis_opt.budget import Deadline, OutOfTime
from themis_opt.cost import PhaseSpec, merges
from themis_opt.instance import Instance, Kind, Op
from themis_opt.orders import Order, Orders, check_order
from themis_opt.schedule import OP_CODES, PhaseColumns
from themis_opt.sim.engine import later_durations
from themis_opt.sim.model import chunk_plan, collective_tails, model_of, offsets, plan_key, task_graph
from themis_opt.sim.queues import SCF_AS_FIFO, queue_policy

logger = logging.getLogger(__name__)

_CUT_OFF = -3  # the core's status when a run stopped at its cutoff
CUTOFF_MARGIN = 1e-9  # relative: the core's running sums of durations may round a little low or high
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
        case Kind.ALL_TO_ALL | Kind.SEND:  # a send's one phase, like an all-to-all's, is not planned
            return 3
        case _ as unreachable:
            assert_never(unreachable)


_P = ctypes.c_void_p
_INT, _DOUBLE = ctypes.c_int, ctypes.c_double
_COLLECTIVE_ARRAYS = (
    "chunks", "first_chunk", "priority", "coll_tail", "kind", "task_of_coll", "active_ptr", "active", "nominal",
)  # fmt: skip
_TABLE_ARRAYS = ("table_ptr", "ph_dim", "ph_dur", "ph_key", "ph_rule", "ph_rest")


class _ModelStruct(ctypes.Structure):
    """The C file's ``Model``: an instance compiled for the core (its arrays' addresses and sizes)."""

    _fields_ = [
        ("num_tasks", _INT),
        *((name, _P) for name in ("is_coll", "which", "issue", "pending_in", "succ_ptr", "succ_task", "succ_lag")),
        ("num_colls", _INT),
        *((name, _P) for name in _COLLECTIVE_ARRAYS),
        ("num_computes", _INT),
        ("compute_dur", _P),
        ("task_of_compute", _P),
        ("num_dims", _INT),
        ("dim_size", _P),
        ("dim_bandwidth", _P),
        ("capacity", _INT),
        ("serial", _INT),
        ("num_stages", _INT),
        ("coll_stage", _P),
        ("compute_stage", _P),
    ]


class _TablesStruct(ctypes.Structure):
    """The C file's ``Tables``: the phase tables."""

    _fields_ = [*((name, _P) for name in _TABLE_ARRAYS), ("max_phases", _INT)]


class _OrdersStruct(ctypes.Structure):
    """The C file's ``Orders``: each chunk's fixed table, or Themis's tables to choose from."""

    _fields_ = [("use_planner", _INT), ("fixed_table", _P), ("perm_ptr", _P), ("perm_table", _P)]


class _OutStruct(ctypes.Structure):
    """The C file's ``Out``: what a run writes."""

    _fields_ = [(name, _P) for name in ("table_of", "starts", "compute_starts", "makespan", "busy", "coll_end")]


_STRUCTS = (_ModelStruct, _TablesStruct, _OrdersStruct, _OutStruct)  # as core_struct_sizes lists them
_ARGTYPES: list[Any] = [_P, _P, _P, _P, _INT, _DOUBLE, _DOUBLE, _P]  # Core or None, the structs, policy, times, out


_SEQUENCE_ARGTYPES: list[Any] = [ctypes.c_int, _P, _P, _P, _P, ctypes.c_int, _P, _P, _P, _P]


def _load() -> Any:
    spec = importlib.util.find_spec("themis_opt.sim._simcore")
    if spec is None or spec.origin is None:
        logger.info("the compiled simulator core is not built: the simulator runs in Python")
        return None
    try:
        library = ctypes.CDLL(spec.origin)
    except OSError as error:
        logger.info("the compiled simulator core cannot be loaded (%s): the simulator runs in Python", error)
        return None
    library.simulate_core.argtypes = _ARGTYPES
    library.simulate_core.restype = ctypes.c_int
    library.sequence_times.argtypes = _SEQUENCE_ARGTYPES
    library.sequence_times.restype = ctypes.c_double
    library.core_new.argtypes = [ctypes.c_int]
    library.core_new.restype = _P
    library.core_free.argtypes = [_P]
    library.core_free.restype = None
    library.core_adopt.argtypes = [_P, _P, ctypes.c_int]
    library.core_adopt.restype = ctypes.c_int
    library.core_counts.argtypes = [_P, _P]
    library.core_counts.restype = None
    library.core_bind.argtypes = [_P, _P, _P]
    library.core_bind.restype = None
    library.core_struct_sizes.argtypes = [_P]
    library.core_struct_sizes.restype = None
    sizes = array("q", [0] * len(_STRUCTS))
    library.core_struct_sizes(pointer(sizes))
    if list(sizes) != [ctypes.sizeof(struct) for struct in _STRUCTS]:
        logger.info("the compiled simulator core's structs differ from its binding's: the simulator runs in Python")
        return None
    library.core_run.argtypes = [_P, _P, ctypes.c_int, ctypes.c_double, ctypes.c_double, _P]
    library.core_run.restype = ctypes.c_int
    library.core_walk.argtypes = [_P, _P]  # a Walk (themis_opt.search.walk)
    library.core_walk.restype = ctypes.c_int
    return library


_LIBRARY: Any = None
_LOADED = False


def c_library() -> Any:
    """The loaded C library, or ``None`` where it is not built or does not load."""
    global _LIBRARY, _LOADED
    if not _LOADED:
        _LIBRARY, _LOADED = _load(), True
    return _LIBRARY


def _core() -> Any:
    library = c_library()
    return None if library is None else library.simulate_core


def available() -> bool:
    """Whether the compiled core is built and loads (else the simulator runs in Python)."""
    return _core() is not None


def pointer(values: array[Any]) -> int:
    """The address of ``values``' buffer, for the core."""
    return int(values.buffer_info()[0])


def _rule_bits(op: Op) -> int:
    """A phase's rules for the core: bit 0, scf queues it as fifo does (an all-to-all, all-reduce or
    send); bit 1, a reduce-scatter (its last step reduces: ``serial_phase_ends`` handles its end last).
    """
    return int(op in SCF_AS_FIFO) | int(op is Op.REDUCE_SCATTER) << 1


@dataclass
class _Tables:
    """Phase tables in the order they were made, and the arrays the core reads."""

    index: dict[tuple[Any, ...], int] = field(default_factory=dict)  # plan_key -> table
    specs: list[tuple[PhaseSpec, ...]] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    arrays: tuple[array[Any], ...] | None = None
    widest: int = 1
    struct: _TablesStruct | None = None  # the core's view of arrays (made again with them)

    def table(self, instance: Instance, c: int, nbytes: int, order: Order, merged: bool) -> int:
        key = plan_key(instance, c, nbytes, order, merged)  # one table per plan
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.specs)
            self.specs.append(chunk_plan(instance, c, nbytes, order, merged))
            self.orders.append(order)
            self.widest = max(self.widest, len(self.specs[-1]))
            self.arrays = None
        return found

    def phase_values(self) -> tuple[Any, ...]:
        """Every table's phases' dimensions, durations, bytes in and out and operations (their
        indices in :data:`~themis_opt.schedule.OP_CODES`), as numpy arrays.
        """
        import numpy as np

        phases = [p for table in self.specs for p in table]
        return (
            np.array([p.dim for p in phases], dtype=np.int64),
            np.array([p.duration for p in phases], dtype=np.float64),
            np.array([p.bytes_in for p in phases], dtype=np.float64),
            np.array([p.bytes_out for p in phases], dtype=np.float64),
            np.array([OP_CODES.index(p.op) for p in phases], dtype=np.int8),
        )

    def columns(self) -> tuple[array[Any], ...]:
        if self.arrays is None:
            phases = [p for table in self.specs for p in table]
            self.arrays = (
                offsets([len(t) for t in self.specs]),
                array("i", [p.dim for p in phases]),
                array("d", [p.duration for p in phases]),
                array("d", [max(p.bytes_in, p.bytes_out) for p in phases]),
                array("B", [_rule_bits(p.op) for p in phases]),
                array("d", [rest for table in self.specs for rest in later_durations(table)]),
            )
            self.struct = _TablesStruct(*(pointer(a) for a in self.arrays), self.widest)
        return self.arrays

    def bound(self) -> tuple[tuple[array[Any], ...], _TablesStruct]:
        """The arrays the core reads, and its struct of them (which they must outlive)."""
        arrays = self.columns()
        assert self.struct is not None
        return arrays, self.struct


@dataclass
class _Prepared:
    """One instance's arrays for the core (by the C ``Model``'s field names) and their struct, its
    phase tables and its chunks' orders' tables.
    """

    static: dict[str, array[Any]]
    model: _ModelStruct
    tables: _Tables
    by_order: dict[tuple[int, bool, int], dict[Order, int]]  # (collective, merged, chunk bytes) -> order -> table
    planned: tuple[array[int], array[int]] | None = None  # every order's table per collective, for Themis
    tails_filled: bool = False

    def prime(self, instance: Instance, intra: str, deadline: Deadline) -> None:
        """Fill the collectives' tails (``coll_tail``, in place: the struct and a bound Core keep
        their address) the first time ``intra`` reads them.

        Raises
        ------
        OutOfTime
            If ``deadline`` passes first.
        """
        if queue_policy(intra).reads_tails and not self.tails_filled:
            tails = self.static["coll_tail"]
            address = tails.buffer_info()[0]
            tails[:] = array("d", collective_tails(instance, deadline))
            assert tails.buffer_info()[0] == address, "filled in place"
            self.tails_filled = True


def _prepared(instance: Instance) -> _Prepared:
    """The instance's arrays for the core, kept in its compiled model (this process's only)."""
    local = model_of(instance).local
    found: _Prepared | None = local.get("core")
    if found is None:
        static = _static(instance)
        network = instance.network
        sizes = {
            "num_tasks": len(instance.tasks),
            "num_colls": len(instance.collectives),
            "num_computes": len(instance.computes),
            "num_dims": network.num_dims,
            "capacity": network.active_chunks,
            "serial": int(network.serial_phase_ends),
            "num_stages": instance.num_stages,
        }
        model = _ModelStruct(**sizes, **{name: pointer(a) for name, a in static.items()})
        found = local["core"] = _Prepared(static, model, _Tables(), {})
    return found


def _static(instance: Instance) -> dict[str, array[Any]]:
    """The compiled model's task graph, and what the core reads besides: each collective's kind
    code and its tail (this process's, filled in place when a policy first reads them), each
    collective's and compute task's pipeline stage.
    """
    colls = instance.collectives
    return {
        **task_graph(instance),
        "coll_tail": array("d", [0.0]) * len(colls),
        "kind": array("i", [_kind_code(c.kind) for c in colls]),
        "coll_stage": array("i", [c.stage for c in colls]),
        "compute_stage": array("i", [j.stage for j in instance.computes]),
    }


def plannable(instance: Instance) -> bool:
    """Whether Themis's planner runs in the core for ``instance`` (every collective on at most
    :data:`MAX_PLANNED_DIMS` dimensions).
    """
    return all(len(a) <= MAX_PLANNED_DIMS for a in instance.active_dims)


def _planned_tables(instance: Instance, prepared: _Prepared) -> tuple[array[int], array[int]]:
    """Per collective, the table of every order of its dimensions (lexicographic), for a chunk and the last."""
    if prepared.planned is None:
        blocks: dict[tuple[Kind, tuple[int, ...], int, int, int, tuple[int, ...]], int] = {}
        perm_ptr = array("q", [0]) * len(instance.collectives)
        table: list[int] = []
        for c, coll in enumerate(instance.collectives):
            dims = instance.active_dims[c]
            key = (coll.kind, coll.group, coll.chunks, coll.chunk_bytes, coll.last_chunk_bytes, dims)
            if key not in blocks:
                blocks[key] = len(table)
                for nbytes in (coll.chunk_bytes, coll.last_chunk_bytes):
                    for order in itertools.permutations(dims):
                        table.append(prepared.tables.table(instance, c, nbytes, order, False))
            perm_ptr[c] = blocks[key]
        prepared.planned = (perm_ptr, array("i", table))
    return prepared.planned


@dataclass(frozen=True)
class CoreRun:
    """What one run of the core found.

    Parameters
    ----------
    makespan
        The last event's time (what :func:`~themis_opt.sim.simulate_makespan` returns).
    schedule_makespan, busy_ns, collective_ends
        The schedule's makespan (its last end), each dimension's busy time and
        each collective's end, as :class:`~themis_opt.schedule.Schedule` computes them.
    table_of, starts, width, compute_starts
        Each chunk's phase table, every phase's start (``width`` per chunk),
        each compute task's start.
    tables
        The phase tables.
    """

    makespan: float
    schedule_makespan: float
    busy_ns: tuple[float, ...]
    collective_ends: tuple[float, ...]
    table_of: array[int]
    starts: array[float]
    width: int
    compute_starts: array[float]
    tables: _Tables

    def orders(self, instance: Instance) -> dict[tuple[int, int], Order]:
        """Each chunk's order."""
        tables = self.tables.orders
        return {cid: tables[x] for cid, x in zip(instance.chunk_ids, self.table_of)}

    def plan(self) -> list[tuple[PhaseSpec, ...]]:
        """Each chunk's phases."""
        specs = self.tables.specs
        return [specs[x] for x in self.table_of]

    def columns(self, instance: Instance) -> PhaseColumns:
        """Every phase as numpy columns, in (chunk, phase) order, with no Python object per phase."""
        import numpy as np

        ptr = np.frombuffer(self.tables.columns()[0], dtype=np.int64)
        dim, duration, bytes_in, bytes_out, op = self.tables.phase_values()
        table_of = np.frombuffer(self.table_of, dtype=np.int32)
        first, count = ptr[table_of], ptr[table_of + 1] - ptr[table_of]
        position = np.arange(self.width)
        inside = position[None, :] < count[:, None]
        index = (first[:, None] + position[None, :])[inside]
        start = np.frombuffer(self.starts, dtype=np.float64).reshape(-1, self.width)[: len(table_of)][inside]
        chunks = np.array([c.chunks for c in instance.collectives], dtype=np.int64)
        collective = np.repeat(np.arange(len(chunks)), chunks)
        chunk = np.arange(len(table_of)) - np.repeat(np.cumsum(chunks) - chunks, chunks)
        return PhaseColumns(
            np.repeat(collective, count),
            np.repeat(chunk, count),
            dim[index],
            start,
            start + duration[index],
            bytes_in[index],
            bytes_out[index],
            op[index],
        )

    def phase_starts(self) -> list[list[float]]:
        """Each chunk's phase starts."""
        starts, width = self.starts.tolist(), self.width
        return [starts[i * width : i * width + len(p)] for i, p in enumerate(self.plan())]


def _outputs(instance: Instance, width: int) -> tuple[array[Any], ...]:
    """The core's out arrays: each chunk's table, every phase's start (``width`` a chunk), each compute
    task's start, the two makespans, each dimension's busy time, each collective's end.
    """
    n = max(len(instance.chunk_ids), 1)
    return (
        array("i", [0]) * n,
        array("d", [0.0]) * (n * width),
        array("d", [0.0]) * max(len(instance.computes), 1),
        array("d", [0.0, 0.0]),
        array("d", [0.0]) * max(instance.network.num_dims, 1),
        array("d", [0.0]) * max(len(instance.collectives), 1),
    )


def _checked(status: int) -> None:
    if status == -1:
        raise OutOfTime("simulator: out of time")
    if status != 0:
        raise MemoryError("the simulator core ran out of memory")


def run(
    instance: Instance,
    orders: Orders | None,
    intra: str,
    deadline: Deadline,
    *,
    baseline: bool = False,
) -> CoreRun:
    """Time ``orders`` under ``intra`` in the core.

    Parameters
    ----------
    instance
        The instance.
    orders
        Each chunk's order, keyed by (collective, chunk); ``None``: Themis's
        planner (a fresh :class:`~themis_opt.policies.ThemisTracker`) plans
        each collective when it is released.
    intra
        The intra-dimension policy.
    deadline
        When to stop (checked every 4,096 events).
    baseline
        Cut all-reduces as the baseline does (see :func:`~themis_opt.sim.simulate`).

    Returns
    -------
    CoreRun
        What the run found; :func:`~themis_opt.sim.simulate` makes the
        schedule from it.

    Raises
    ------
    OutOfTime
        If ``deadline`` passes first.
    InputError
        If ``orders`` misses a chunk or gives one an order it cannot take.
    """
    core = _core()
    assert core is not None, "the compiled core is not available"
    prepared = _prepared(instance)
    prepared.prime(instance, intra, deadline)
    tables = prepared.tables
    ids = instance.chunk_ids
    n = len(ids)
    if orders is None:
        perm_ptr, perm_table = _planned_tables(instance, prepared)
        fixed = array("i", [0])
    else:
        perm_ptr, perm_table = array("q", [0]), array("i", [0])
        fixed = _fixed_tables(instance, prepared, orders, baseline)
    _, struct = tables.bound()
    width = tables.widest
    network = instance.network
    out = _outputs(instance, width)
    table_of, starts, compute_starts, makespan, busy, ends = out
    chosen = _OrdersStruct(int(orders is None), pointer(fixed), pointer(perm_ptr), pointer(perm_table))
    written = _OutStruct(*(pointer(a) for a in out))
    refs = (ctypes.byref(prepared.model), ctypes.byref(struct), ctypes.byref(chosen))
    _checked(core(None, *refs, policy_code(intra), deadline.at, math.inf, ctypes.byref(written)))
    return CoreRun(
        makespan[0],
        makespan[1],
        tuple(busy[: network.num_dims]),
        tuple(ends[: len(instance.collectives)]),
        table_of[:n],
        starts,
        width,
        compute_starts[: len(instance.computes)],
        tables,
    )


def _fixed_tables(instance: Instance, prepared: _Prepared, orders: Orders, baseline: bool) -> array[int]:
    """Each chunk's table; each distinct order of a collective is checked once (then kept)."""
    chosen = array("i")
    get = orders.get
    for c, coll in enumerate(instance.collectives):
        merged = merges(instance, c, baseline)
        for ks, nbytes in ((range(coll.chunks - 1), coll.chunk_bytes), ((coll.chunks - 1,), coll.last_chunk_bytes)):
            known = prepared.by_order.setdefault((c, merged, nbytes), {})
            for k in ks:
                order = get((c, k))
                try:
                    x = known.get(order)  # type: ignore[arg-type]
                except TypeError:  # a list: not a key
                    x = None
                if x is None:
                    x = _new_table(instance, prepared, known, c, k, order, nbytes, merged)
                chosen.append(x)
    return chosen


def _new_table(
    instance: Instance,
    prepared: _Prepared,
    known: dict[Order, int],
    c: int,
    k: int,
    order: Sequence[int] | None,
    nbytes: int,
    merged: bool,
) -> int:
    """The table of an order not met before for this collective and size, once it is checked."""
    check_order(instance, c, k, order)
    assert order is not None
    key = tuple(order)
    if key not in known:
        known[key] = prepared.tables.table(instance, c, nbytes, key, merged)
    return known[key]


def policy_code(intra: str) -> int:
    """The C file's code of the policy ``intra``.

    Raises
    ------
    ValueError
        If the compiled core does not run it.
    """
    code = queue_policy(intra).c_code
    if code is None:
        raise ValueError(f"the compiled core does not run the {intra} policy (sim.dispatch.core_runs)")
    return code
