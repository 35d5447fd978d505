"""The assignment search's moves run in the compiled core: what they draw from, their rules and state.

:func:`walk_in_core` runs the loop of moves of
:mod:`themis_opt.search.assignment` in C, drawing from the search's
``random.Random`` (its Mersenne Twister replayed in C), so that the walk is
the Python loop's, draw for draw; the tests compare the two.
"""

from __future__ import annotations

import ctypes
import math
import random
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import themis_opt.sim.core as core
import themis_opt.sim.timers as timers
from themis_opt.budget import Deadline
from themis_opt.result import OPTIMALITY_TOLERANCE
from themis_opt.sim.model import offsets
from themis_opt.sim.queues import Intra

_P = ctypes.c_void_p
_WALK_DOUBLES = (
    "swap_share", "known_share", "temperature", "moves_began", "span", "deadline", "room_factor", "target",
    "origin", "tolerance", "cutoff_margin", "slice",
)  # fmt: skip


class _Walk(ctypes.Structure):
    """The C file's Walk: what a walk's moves draw from, its stopping rules and its state."""

    _fields_ = [
        ("num_classes", ctypes.c_int64),
        *((name, _P) for name in ("class_ptr", "places", "known_ptr", "known", "dims_ptr", "dims", "token_ptr")),
        ("tokens", _P),
        *((name, ctypes.c_int64) for name in ("keep_counts", "policy", "evaluations", "max_draws", "by_clock")),
        ("first", ctypes.c_int64),
        ("moves", ctypes.c_int64),
        ("clock_draws", ctypes.c_int64),
        *((name, ctypes.c_double) for name in _WALK_DOUBLES),
        ("mt", _P),
        ("used", ctypes.c_int64),
        ("draws", ctypes.c_int64),
        ("longest", ctypes.c_double),
        ("current_makespan", ctypes.c_double),
        ("best_makespan", ctypes.c_double),
        *((name, _P) for name in ("current", "best", "candidate")),
        *((name, ctypes.c_int64) for name in ("best_changed", "need_class", "need_chunk")),
        ("need_order", _P),
    ]


MAX_WALK_DIMS = 8  # a walk in C keeps a token for every order of a class's dimensions: 8! = 40,320 at most
MAX_WALK_ORDERS = 1 << 22  # and for all its classes 4 Mi of them (16 MiB) at most: beyond, the Python loop
WALK_SLICE_SECONDS = 0.1  # a walk runs in C this long before it comes back to Python (for Ctrl-C)
CLOCK_DRAWS = 4096  # a walk drawing moves that change nothing looks at the clock this often (both loops)
_WALK_DONE, _WALK_PAUSED, _WALK_NEED_TOKEN, _WALK_OPTIMAL = 0, 1, 2, 3  # core_walk's statuses


def _rank(dims: Sequence[int], order: Sequence[int]) -> int:
    """The lexicographic rank of ``order`` among the permutations of ``dims`` (as the C file's perm_rank)."""
    left, rank = list(range(len(dims))), 0
    for i, d in enumerate(order):
        at = left.index(dims.index(d))
        rank += at * math.factorial(len(dims) - 1 - i)
        left.pop(at)
    return rank


@dataclass(frozen=True)
class MoveDraws:
    """What a walk's moves draw from (see :mod:`themis_opt.search.assignment`), per chunk class:
    its chunks' positions in an assignment, the tokens some start gives it and its collective's
    active dimensions (in the instance's order: a new order is a shuffle of them).
    """

    places: tuple[tuple[int, ...], ...]
    known: tuple[tuple[int, ...], ...]
    dims: tuple[tuple[int, ...], ...]
    keep_counts: bool
    swap_share: float
    known_share: float

    def __post_init__(self) -> None:
        if not len(self.places) == len(self.known) == len(self.dims) or not self.places:
            raise ValueError("a walk needs places, known tokens and dimensions for each of one class or more")
        if any(not p for p in self.places) or any(not k for k in self.known):
            raise ValueError("every class of a walk has a chunk and a known token")
        if not self.fits(self.dims):
            raise ValueError(
                f"a walk in the core takes classes of at most {MAX_WALK_DIMS} dimensions and "
                f"{MAX_WALK_ORDERS} orders of them in all"
            )

    @staticmethod
    def fits(dims: Sequence[Sequence[int]]) -> bool:
        """Whether a walk in the core can draw for classes of these dimensions: at most
        :data:`MAX_WALK_DIMS` each, and at most :data:`MAX_WALK_ORDERS` orders of them in all.
        """
        if max(map(len, dims), default=0) > MAX_WALK_DIMS:
            return False
        return sum(math.factorial(len(d)) for d in dims) <= MAX_WALK_ORDERS

    @property
    def orders(self) -> array[int]:
        """Where each class's tokens by order rank start in the walk's cache, and their total."""
        return offsets([math.factorial(len(d)) for d in self.dims])

    @property
    def arrays(self) -> dict[str, array[int]]:
        """The C file's Walk's arrays (kept alive here while a walk reads them)."""
        found: dict[str, array[int]] | None = self.__dict__.get("_arrays")
        if found is None:
            found = {
                "class_ptr": offsets([len(p) for p in self.places]),
                "places": array("i", [i for p in self.places for i in p]),
                "known_ptr": offsets([len(k) for k in self.known]),
                "known": array("i", [x for k in self.known for x in k]),
                "dims_ptr": offsets([len(d) for d in self.dims]),
                "dims": array("i", [d for ds in self.dims for d in ds]),
                "token_ptr": self.orders,
            }
            object.__setattr__(self, "_arrays", found)
        return found


@dataclass(frozen=True)
class WalkRules:
    """A walk's policy, random numbers, stopping rules and cooling (see :func:`walk_in_core`).

    The temperature of a move is ``temperature`` times the best makespan times
    ``1 - cooled``, where ``cooled`` is ``(used - first) / moves`` or, ``by_clock``,
    the share of ``span`` seconds gone since ``moves_began`` (``time.perf_counter``).
    A move is timed only while the time left is ``room_factor`` times the longest
    simulation or more.
    """

    rng: random.Random
    intra: Intra
    evaluations: int
    max_draws: int
    temperature: float
    by_clock: bool
    first: int
    moves: int
    moves_began: float
    span: float
    deadline: Deadline
    room_factor: float
    target: float | None


@dataclass
class WalkState:
    """A walk's state, read and updated by :func:`walk_in_core`."""

    current: array[int]
    current_makespan: float
    best: array[int]
    best_makespan: float
    used: int
    draws: int
    longest: float


def walk_in_core(
    timer: timers.TableTimer,
    draws: MoveDraws,
    rules: WalkRules,
    state: WalkState,
    make: Callable[[int, int, list[int]], int],
) -> str:
    """Run a search's moves in the core: the loop of
    :func:`themis_opt.search.assignment.improve_assignment`'s moves, draw for draw
    (its random numbers are Python's ``rules.rng``'s, taken from it and given back),
    with no Python per move.

    Parameters
    ----------
    timer
        The compiled core's timer of the instance, its base adopted (the moves resume from it).
    draws
        What the moves draw from.
    rules
        The walk's stopping rules, cooling and policy.
    state
        The walk's state, updated in place: the current assignment and its makespan,
        the best, the simulations and draws so far, the longest simulation.
    make
        Makes the token of a class's chunk taking an order (the class's index, the
        chunk's index in it, the order) when a move draws an order not yet made.

    Returns
    -------
    str
        Why the walk ended: ``"done"`` (its simulations or draws spent), ``"optimal"``
        (a schedule met ``rules.target``) or ``"out of time"``.
    """
    library, n = core.c_library(), len(timer.instance.chunk_ids)
    cache = array("i", [-1]) * draws.orders[-1]
    version, words, gauss = rules.rng.getstate()
    mt = array("I", words)
    current, best, candidate = array("i", state.current), array("i", state.best), array("i", [0]) * max(n, 1)
    need = array("i", [0]) * 64
    walk = _Walk(
        num_classes=len(draws.places),
        **{name: core.pointer(a) for name, a in draws.arrays.items()},
        tokens=core.pointer(cache),
        keep_counts=draws.keep_counts,
        policy=core.policy_code(rules.intra),
        evaluations=rules.evaluations,
        max_draws=rules.max_draws,
        by_clock=rules.by_clock,
        first=rules.first,
        moves=rules.moves,
        clock_draws=CLOCK_DRAWS,
        swap_share=draws.swap_share,
        known_share=draws.known_share,
        temperature=rules.temperature,
        moves_began=rules.moves_began,
        span=rules.span,
        deadline=rules.deadline.at,
        room_factor=rules.room_factor,
        target=-math.inf if rules.target is None else rules.target,
        origin=timer.instance.origin_ns,
        tolerance=OPTIMALITY_TOLERANCE,
        cutoff_margin=core.CUTOFF_MARGIN,
        slice=WALK_SLICE_SECONDS,
        mt=core.pointer(mt),
        used=state.used,
        draws=state.draws,
        longest=state.longest,
        current_makespan=state.current_makespan,
        best_makespan=state.best_makespan,
        current=core.pointer(current),
        best=core.pointer(best),
        candidate=core.pointer(candidate),
        need_order=core.pointer(need),
    )
    try:
        while True:  # back in Python every slice, so that Ctrl-C is seen
            status = library.core_walk(timer.bound(rules.intra, rules.deadline), ctypes.addressof(walk))
            if status == _WALK_PAUSED:
                continue
            if status != _WALK_NEED_TOKEN:
                break
            k = walk.need_class
            order = list(need[: len(draws.dims[k])])
            cache[draws.orders[k] + _rank(draws.dims[k], order)] = make(k, walk.need_chunk, order)
    finally:
        rules.rng.setstate((version, tuple(mt), gauss))
        state.current, state.current_makespan = current, walk.current_makespan
        state.used, state.draws, state.longest = walk.used, walk.draws, walk.longest
        if walk.best_changed:
            state.best, state.best_makespan = best, walk.best_makespan
    if status in (-1, _WALK_DONE, _WALK_OPTIMAL):
        return {-1: "out of time", _WALK_DONE: "done", _WALK_OPTIMAL: "optimal"}[status]
    raise MemoryError("the simulator core ran out of memory")
