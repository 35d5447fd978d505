"""The compiled core's timers for the searches: many fixed assignments of one instance
(:class:`TableTimer`, resuming from snapshots of a base run) and dimension sequences
(:class:`PhaseGraph`), with no Python object per chunk or phase.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import weakref
from array import array
from collections.abc import Sequence
from typing import Any

from themis_opt.budget import Deadline
from themis_opt.instance import Instance
from themis_opt.orders import Order
from themis_opt.sim.core import (
    _CUT_OFF,
    CUTOFF_MARGIN,
    _checked,
    _prepared,
    c_library,
    pointer,
    policy_code,
)
from themis_opt.sim.model import offsets


class PhaseGraph:
    """The sequence search's graph of phases in arrays: each phase's length and release, and the
    phases before and after it in its chunk (-1: none). :meth:`time` times dimension sequences.
    """

    def __init__(
        self, length: Sequence[float], release: Sequence[float], job_next: Sequence[int], job_prev: Sequence[int]
    ):
        self.size = len(length)
        self._arrays = (array("d", length), array("d", release), array("i", job_next), array("i", job_prev))
        self._pointers = [pointer(a) for a in self._arrays]

    def time(self, sequences: Sequence[Sequence[int]]) -> tuple[float, array[float], array[float]] | None:
        """Makespan, earliest starts and tails of ``sequences`` (each dimension's phases in
        order), as ``_Sequences.time`` in :mod:`themis_opt.search.sequence` computes them;
        ``None`` if they contradict the chunk orders (a cycle).
        """
        library = c_library()
        assert library is not None, "the compiled core is not available"
        flat = array("i", itertools.chain.from_iterable(sequences))
        starts = offsets([len(seq) for seq in sequences])
        head = array("d", [0.0]) * max(self.size, 1)
        tail = array("d", [0.0]) * max(self.size, 1)
        makespan = library.sequence_times(
            self.size, *self._pointers, len(sequences), pointer(starts), pointer(flat), pointer(head), pointer(tail)
        )
        if makespan < 0:
            return None
        return makespan, head, tail


class TableTimer:
    """Makespans of many fixed assignments of one instance: each chunk's order is given by
    the index of its phase table (:meth:`table`), so that a search timing thousands of
    assignments builds no Python object per chunk and the core's arguments are made once.

    A search walking from one assignment to its neighbours makes the current one the
    *base* (:meth:`adopt`): the core keeps snapshots of the base's run, one at the
    release of every collective or so (at most ``snapshots``), and a run that changes
    only collectives released later resumes from the last snapshot before them, with
    the same makespan as a run from the start.

    Parameters
    ----------
    instance
        The instance.
    snapshots
        How many snapshots of the base's run the core keeps at most (``search.snapshots``).
    """

    def __init__(self, instance: Instance, snapshots: int):
        if snapshots < 1:
            raise ValueError(f"snapshots must be at least 1, not {snapshots}")
        self.instance = instance
        self.snapshots = snapshots
        self._prepared = _prepared(instance)
        self._columns: tuple[array[Any], ...] | None = None  # the tables the Core was bound to
        self._makespan = array("d", [0.0, 0.0])
        self._handle: int | None = None  # the core's Core, made at the first run
        self._free: weakref.finalize[Any, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()  # the Core is this process's memory: a copy starts its own
        state.update(_handle=None, _free=None, _columns=None)
        return state

    def table(self, c: int, nbytes: int, order: Order) -> int:
        """The table of a chunk of ``nbytes`` of collective ``c`` taking ``order`` (not checked)."""
        known = self._prepared.by_order.setdefault((c, False, nbytes), {})
        found = known.get(order)
        if found is None:
            found = known[order] = self._prepared.tables.table(self.instance, c, nbytes, order, False)
        return found

    def _bind(self) -> None:
        """Give the Core the instance and its tables (again after a new table was made)."""
        self._columns, struct = self._prepared.tables.bound()
        c_library().core_bind(self._context(), ctypes.byref(self._prepared.model), ctypes.byref(struct))

    def _context(self) -> int:
        if self._handle is None:
            library = c_library()
            handle = library.core_new(self.snapshots)
            if not handle:
                raise MemoryError("the simulator core ran out of memory")
            self._handle = int(handle)
            self._free = weakref.finalize(self, library.core_free, self._handle)
        return self._handle

    def bound(self, intra: str | None = None, deadline: Deadline | None = None) -> int:
        """The Core, bound to the instance's arguments and its tables as they are now (and ready
        for runs under ``intra``; :class:`OutOfTime` if ``deadline`` passes while it gets ready).
        """
        if intra is not None:
            self._prepared.prime(self.instance, intra, deadline or Deadline())
        if self._prepared.tables.columns() is not self._columns or self._handle is None:
            self._bind()
        assert self._handle is not None
        return self._handle

    def makespan(self, tables: array[int], intra: str, deadline: Deadline, cutoff: float = math.inf) -> float:
        """The makespan of ``tables`` (from :meth:`table`) under ``intra``, as
        :func:`~themis_opt.sim.simulate_makespan` gives it; ``math.inf``
        once it is sure to exceed ``cutoff`` (the run stops there: a search
        that would reject it needs no more).

        Raises
        ------
        OutOfTime
            If ``deadline`` passes first.
        """
        handle = self.bound(intra, deadline)
        margin = cutoff + abs(cutoff) * CUTOFF_MARGIN
        out = self._makespan.buffer_info()[0]
        status = c_library().core_run(handle, tables.buffer_info()[0], policy_code(intra), deadline.at, margin, out)
        if status == _CUT_OFF:
            return math.inf
        _checked(status)
        return float(self._makespan[0])

    def adopt(self, tables: array[int], intra: str, deadline: Deadline) -> None:
        """Make ``tables`` under ``intra`` the base that later runs resume from (timed
        again first unless it was the last run, and that run was complete).

        Raises
        ------
        OutOfTime
            If ``deadline`` passes while it is timed again.
        """
        library, tokens, code = c_library(), tables.buffer_info()[0], policy_code(intra)
        if library.core_adopt(self._context(), tokens, code):
            self.makespan(tables, intra, deadline)
            adopted = library.core_adopt(self._handle, tokens, code)
            assert adopted == 0, "a complete run is always adopted"

    def counts(self) -> tuple[int, int, int, int]:
        """Runs, runs that resumed from the base, events handled, and events that resumed
        runs did not handle again (the base's, before the snapshot they resumed from).
        """
        out = array("q", [0, 0, 0, 0])
        if self._handle is not None:
            c_library().core_counts(self._handle, pointer(out))
        return out[0], out[1], out[2], out[3]
