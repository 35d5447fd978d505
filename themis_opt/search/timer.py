"""The searches' narrow view of the simulator: many assignments of one instance timed as arrays of tokens."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import themis_opt.sim.timers as timers
from themis_opt.budget import Deadline, gc_paused
from themis_opt.instance import Instance
from themis_opt.orders import Orders, check_order
from themis_opt.schedule import Schedule
from themis_opt.search.params import SearchParams
from themis_opt.sim.dispatch import Engine, core_runs, simulate_makespan
from themis_opt.sim.engine import PhaseMemo, run_python
from themis_opt.sim.queues import Intra


class AssignmentTimer:
    """Times many assignments of one instance's chunks to orders, for the searches.

    Each chunk's order is a small integer, its *token* (:meth:`token`), and an
    assignment an array of tokens in ``instance.chunk_ids`` order, so a search
    copies and swaps arrays rather than dicts of orders. In the compiled core a
    token is the order's phase table, handed to the core as it stands; in
    Python it stands for the order, and the assignment is simulated as
    :func:`simulate_makespan` does. Tokens are numbered in the order they are
    first asked for, so two timers of one instance asked the same orders in
    the same order agree on them.

    Parameters
    ----------
    instance
        The instance.
    engine
        As :func:`simulate`'s.
    snapshots
        How many snapshots of the base's run (:meth:`adopt`) the compiled core keeps at most
        (``search.snapshots``).
    """

    def __init__(self, instance: Instance, engine: Engine = "auto", snapshots: int = SearchParams().snapshots):
        self.instance = instance
        self.engine: Engine = engine
        self._core = timers.TableTimer(instance, snapshots) if core_runs(instance, {}, engine)[0] else None
        self._orders: dict[int, tuple[int, ...]] = {}  # each token's order
        self._known: dict[tuple[int, int, tuple[int, ...]], int] = {}  # (collective, chunk bytes, order) -> token
        self.made: list[tuple[int, int, tuple[int, ...]]] = []  # every (c, k, order) that made a token, in order
        self._memo: PhaseMemo = {}

    def token(self, c: int, k: int, order: Sequence[int] | None) -> int:
        """The token of chunk ``(c, k)`` taking ``order`` (checked as :func:`check_orders` does)."""
        if order is None:
            check_order(self.instance, c, k, order)  # raises: every chunk needs an order
        key = (c, self.instance.collectives[c].bytes_of(k), tuple(order or ()))
        found = self._known.get(key)
        if found is None:
            check_order(self.instance, c, k, order)
            found = self._core.table(c, key[1], key[2]) if self._core is not None else len(self._orders)
            self._known[key] = found
            self._orders[found] = key[2]
            self.made.append((c, k, key[2]))
        return found

    def tokens(self, orders: Orders) -> array[int]:
        """The assignment ``orders`` as tokens."""
        return array("i", [self.token(c, k, orders.get((c, k))) for c, k in self.instance.chunk_ids])

    def orders(self, tokens: Sequence[int]) -> Orders:
        """The orders that ``tokens`` stand for."""
        return {cid: self._orders[x] for cid, x in zip(self.instance.chunk_ids, tokens)}

    def makespan(self, tokens: array[int], intra: Intra, deadline: Deadline, cutoff: float = math.inf) -> float:
        """:func:`simulate_makespan`'s makespan of the assignment ``tokens``; any makespan
        above ``cutoff`` may come back as ``math.inf`` (the compiled core stops as soon as
        it is sure of that: some dimension's work left would end past it).
        """
        if len(tokens) != len(self.instance.chunk_ids):  # the core would read past them
            raise ValueError(f"{len(tokens)} tokens for {len(self.instance.chunk_ids)} chunks")
        if self._core is not None:
            return self._core.makespan(tokens, intra, deadline, cutoff)
        with gc_paused():
            return run_python(self.instance, self.orders(tokens), intra, deadline, self._memo)[0]

    def adopt(self, tokens: array[int], intra: Intra, deadline: Deadline) -> None:
        """Make ``tokens`` under ``intra`` the assignment that later makespans are timed
        from: in the compiled core, a run that changes only collectives released after
        some of the base's snapshots resumes from the last of them (the same makespan,
        less work; see :class:`~themis_opt.sim.timers.TableTimer`). Nothing in Python.

        Raises
        ------
        OutOfTime
            If ``deadline`` passes while ``tokens`` is timed again (when it was not the last run).
        """
        if self._core is not None:
            self._core.adopt(tokens, intra, deadline)

    @property
    def in_core(self) -> timers.TableTimer | None:
        """The compiled core's timer of this instance (what a walk in the core runs on), or ``None``."""
        return self._core

    def counts(self) -> tuple[int, int, int, int]:
        """The compiled core's runs, runs resumed from the base, events handled and events the
        resumed runs did not handle again (see :meth:`themis_opt.sim.timers.TableTimer.counts`); zeros in Python.
        """
        return self._core.counts() if self._core is not None else (0, 0, 0, 0)

    def schedule(self, tokens: Sequence[int], intra: Intra, deadline: Deadline | None = None) -> Schedule:
        """The schedule of the assignment ``tokens`` (simulated again)."""
        orders = self.orders(tokens)
        return simulate_makespan(self.instance, orders, intra, deadline or Deadline(), self._memo, self.engine)[1]()
