"""Timed schedules: phases, one chunk's schedule, a whole schedule.

These classes check only their own structure (types, finite numbers); whether
a schedule obeys the model is the validator's job, so that an invalid schedule
can still be built, read and reported on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from themis_opt.errors import InputError
from themis_opt.instance import MAX_DIMENSIONS, Op, check_enum, check_int, check_number


@dataclass(frozen=True)
class Phase:
    """One timed phase of one chunk on one dimension.

    Parameters
    ----------
    dim
        Dimension index.
    op
        Reduce-scatter or all-gather.
    start_ns, end_ns
        When the phase runs.
    bytes_in, bytes_out
        Data held before and after the phase.
    """

    dim: int
    op: Op
    start_ns: float
    end_ns: float
    bytes_in: float
    bytes_out: float

    def __post_init__(self) -> None:
        check_int("dim", self.dim, 0, MAX_DIMENSIONS - 1)  # a dimension of a network
        object.__setattr__(self, "op", check_enum("op", self.op, Op))
        for name in ("start_ns", "end_ns", "bytes_in", "bytes_out"):
            object.__setattr__(self, name, check_number(name, getattr(self, name)))

    @classmethod
    def trusted(cls, dim: int, op: Op, start_ns: float, end_ns: float, bytes_in: float, bytes_out: float) -> Phase:
        """A phase built without the checks, for values the simulator computed
        (the checks cost more than the whole simulation).
        """
        phase = object.__new__(cls)
        phase.__dict__.update(  # the fields set as the frozen class's __init__ sets them, without its checks
            dim=dim, op=op, start_ns=start_ns, end_ns=end_ns, bytes_in=bytes_in, bytes_out=bytes_out
        )
        return phase

    @property
    def duration(self) -> float:
        """``end_ns - start_ns``."""
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class ChunkSchedule:
    """The order and timed phases of one chunk.

    Parameters
    ----------
    collective, chunk
        Which chunk: its collective's index and its index in the collective.
    order
        The dimensions in the order the chunk visits them.
    phases
        Its phases, in execution order.
    """

    collective: int
    chunk: int
    order: tuple[int, ...]
    phases: tuple[Phase, ...]

    def __post_init__(self) -> None:
        check_int("collective", self.collective, 0)
        check_int("chunk", self.chunk, 0)
        if not isinstance(self.order, (tuple, list)):
            raise InputError("order", f"must be a list of dimension indices, got {self.order!r}")
        for index, d in enumerate(self.order):
            check_int(f"order[{index}]", d, 0)
        object.__setattr__(self, "order", tuple(self.order))
        if not isinstance(self.phases, (tuple, list)):
            raise InputError("phases", f"must be a list of phases, got {self.phases!r}")
        for index, phase in enumerate(self.phases):
            if not isinstance(phase, Phase):
                raise InputError(f"phases[{index}]", f"must be a Phase, got {phase!r}")
        object.__setattr__(self, "phases", tuple(self.phases))

    @property
    def end_ns(self) -> float:
        """When the chunk's last phase ends (0 for a chunk without phases)."""
        return max((p.end_ns for p in self.phases), default=0.0)


@dataclass(frozen=True)
class ComputeSchedule:
    """When one compute task runs.

    Parameters
    ----------
    compute
        Its index among the instance's compute tasks.
    start_ns, end_ns
        When it runs on the compute unit.
    """

    compute: int
    start_ns: float
    end_ns: float

    def __post_init__(self) -> None:
        check_int("compute", self.compute, 0)
        for name in ("start_ns", "end_ns"):
            object.__setattr__(self, name, check_number(name, getattr(self, name)))


OP_CODES: tuple[Op, ...] = tuple(Op)  # a phase's operation in numpy columns: its index here


@dataclass(frozen=True)
class PhaseColumns:
    """Every phase of a schedule as numpy columns, in (chunk, phase) order.

    Parameters
    ----------
    collective, chunk, dim
        Each phase's collective, its chunk's index in the collective, its dimension.
    start_ns, end_ns, bytes_in, bytes_out
        When it runs and what it holds before and after.
    op
        Its operation, as its index in :data:`OP_CODES`.
    """

    collective: Any
    chunk: Any
    dim: Any
    start_ns: Any
    end_ns: Any
    bytes_in: Any
    bytes_out: Any
    op: Any


@dataclass(frozen=True)
class Schedule:
    """A timed schedule of every chunk and every compute task.

    Parameters
    ----------
    chunks
        One entry per chunk, in (collective, chunk) order.
    computes
        One entry per compute task, in index order (none without them).

    Notes
    -----
    The simulator's compiled core returns schedules made by :meth:`lazy`:
    their chunks (one object per phase) are built on first use; their
    makespan, busy times and collective ends come with them.
    """

    chunks: tuple[ChunkSchedule, ...]
    computes: tuple[ComputeSchedule, ...] = ()

    @classmethod
    def lazy(
        cls,
        build: Callable[[], tuple[ChunkSchedule, ...]],
        computes: tuple[ComputeSchedule, ...],
        makespan: float,
        busy_ns: tuple[float, ...],
        collective_ends: tuple[float, ...],
        columns: Callable[[], PhaseColumns] | None = None,
        orders: Callable[[], dict[tuple[int, int], tuple[int, ...]]] | None = None,
    ) -> Schedule:
        """A schedule whose chunks ``build`` makes when they are first asked for.

        ``makespan``, ``busy_ns`` (per dimension) and ``collective_ends`` must
        be what :attr:`makespan`, :meth:`busy_ns` and :meth:`collective_ends`
        would compute from those chunks, and ``columns`` and ``orders`` (if
        given) what :meth:`columns` and :attr:`orders` would.
        """
        schedule = object.__new__(cls)
        object.__setattr__(schedule, "computes", computes)
        object.__setattr__(schedule, "_build", build)
        object.__setattr__(schedule, "makespan", makespan)  # what the cached property would hold
        object.__setattr__(schedule, "_summary", (busy_ns, collective_ends))
        object.__setattr__(schedule, "_columns", columns)
        object.__setattr__(schedule, "_orders", orders)
        return schedule

    def columns(self) -> PhaseColumns:
        """Every phase as numpy columns (a schedule of the compiled core makes them without a
        Python object per phase). Needs numpy, a dependency of themis_opt.
        """
        import numpy as np

        maker = self.__dict__.get("_columns")
        if maker is not None:
            made: PhaseColumns = maker()
            return made
        rows = [(c.collective, c.chunk, p) for c in self.chunks for p in c.phases]
        return PhaseColumns(
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2].dim for r in rows], dtype=np.int64),
            np.array([r[2].start_ns for r in rows], dtype=np.float64),
            np.array([r[2].end_ns for r in rows], dtype=np.float64),
            np.array([r[2].bytes_in for r in rows], dtype=np.float64),
            np.array([r[2].bytes_out for r in rows], dtype=np.float64),
            np.array([OP_CODES.index(r[2].op) for r in rows], dtype=np.int8),
        )

    def __getattr__(self, name: str) -> Any:
        # only reached for what is not set: the chunks of a lazy schedule
        build = self.__dict__.get("_build")
        if name != "chunks" or build is None:
            raise AttributeError(name)
        chunks = build()
        object.__setattr__(self, "chunks", chunks)
        return chunks

    def __reduce__(self) -> tuple[Any, ...]:
        return (Schedule, (self.chunks, self.computes))

    def __post_init__(self) -> None:
        if not isinstance(self.chunks, (tuple, list)):
            raise InputError("chunks", f"must be a list of chunk schedules, got {self.chunks!r}")
        for index, chunk in enumerate(self.chunks):
            if not isinstance(chunk, ChunkSchedule):
                raise InputError(f"chunks[{index}]", f"must be a ChunkSchedule, got {chunk!r}")
        object.__setattr__(self, "chunks", tuple(self.chunks))
        if not isinstance(self.computes, (tuple, list)):
            raise InputError("computes", f"must be a list of compute schedules, got {self.computes!r}")
        for index, compute in enumerate(self.computes):
            if not isinstance(compute, ComputeSchedule):
                raise InputError(f"computes[{index}]", f"must be a ComputeSchedule, got {compute!r}")
        object.__setattr__(self, "computes", tuple(self.computes))

    @cached_property
    def makespan(self) -> float:
        """End of the last phase or compute task."""
        return max(
            max((chunk.end_ns for chunk in self.chunks), default=0.0),
            max((compute.end_ns for compute in self.computes), default=0.0),
        )

    def collective_ends(self, num_collectives: int) -> tuple[float, ...]:
        """When each collective ends: its last chunk's last phase."""
        summary = self.__dict__.get("_summary")
        if summary is not None and len(summary[1]) == num_collectives:
            known: tuple[float, ...] = summary[1]
            return known
        ends = [0.0] * num_collectives
        for chunk in self.chunks:
            if chunk.collective < num_collectives:
                ends[chunk.collective] = max(ends[chunk.collective], chunk.end_ns)
        return tuple(ends)

    @property
    def compute_busy_ns(self) -> float:
        """Total time the compute unit is busy."""
        return sum(c.end_ns - c.start_ns for c in self.computes)

    @property
    def orders(self) -> dict[tuple[int, int], tuple[int, ...]]:
        """Each chunk's order, keyed by (collective, chunk) (a lazy schedule's without building its chunks)."""
        maker = self.__dict__.get("_orders")
        if maker is not None and "chunks" not in self.__dict__:
            made: dict[tuple[int, int], tuple[int, ...]] = maker()
            return made
        return {(c.collective, c.chunk): c.order for c in self.chunks}

    def by_dimension(self) -> dict[int, list[tuple[Phase, int, int]]]:
        """Per dimension, its phases as (phase, collective, chunk) by start time."""
        per_dim: dict[int, list[tuple[Phase, int, int]]] = {}
        for chunk in self.chunks:
            for phase in chunk.phases:
                per_dim.setdefault(phase.dim, []).append((phase, chunk.collective, chunk.chunk))
        for entries in per_dim.values():
            entries.sort(key=lambda e: (e[0].start_ns, e[0].end_ns, e[1], e[2]))
        return per_dim

    def busy_ns(self, num_dims: int) -> tuple[float, ...]:
        """Total busy time of each of ``num_dims`` dimensions."""
        summary = self.__dict__.get("_summary")
        if summary is not None and len(summary[0]) == num_dims:
            known_busy: tuple[float, ...] = summary[0]
            return known_busy
        busy = [0.0] * num_dims
        for chunk in self.chunks:
            for phase in chunk.phases:
                if phase.dim < num_dims:
                    busy[phase.dim] += phase.duration
        return tuple(busy)

    def busy_share(self, num_dims: int) -> tuple[float, ...]:
        """Per dimension, busy time over makespan."""
        makespan = self.makespan
        return tuple(b / makespan if makespan > 0 else 0.0 for b in self.busy_ns(num_dims))
