"""One time budget for a whole ``solve`` call, shared out among its stages.

A :class:`Deadline` is a point on ``time.perf_counter()``'s clock. Every
stage (bounds, policies, warm starts, model building, search) asks how much
time it may take and stops at its share with the best it has; a stage that
cannot finish in time raises :class:`OutOfTime`, and its caller reports what
it has (a bound as not computed, a method without a schedule).
"""

from __future__ import annotations

import gc
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


class OutOfTime(Exception):
    """A stage ran out of its share of the time budget."""


@dataclass(frozen=True)
class Deadline:
    """The time by which a call must be done.

    Parameters
    ----------
    at
        A ``time.perf_counter()`` reading; ``math.inf`` means no limit.
    """

    at: float = math.inf

    @staticmethod
    def after(seconds: float | None) -> Deadline:
        """The deadline ``seconds`` from now (``None``: no limit)."""
        return Deadline() if seconds is None else Deadline(time.perf_counter() + seconds)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.perf_counter())

    def left(self) -> float:
        """Seconds left as a limit for the next call: at least a millisecond (a limit must be positive,
        and with none left each method still returns its first schedule).
        """
        return max(1e-3, self.remaining())

    def share(self, fraction: float) -> Deadline:
        """A deadline ``fraction`` of the remaining time from now."""
        if math.isinf(self.at):
            return self
        return Deadline(time.perf_counter() + fraction * self.remaining())

    def cap(self, seconds: float) -> Deadline:
        """The earlier of this deadline and the one ``seconds`` from now."""
        return Deadline(min(self.at, time.perf_counter() + seconds))

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.perf_counter() >= self.at

    def check(self, stage: str) -> None:
        """Raise :class:`OutOfTime` naming ``stage`` if the deadline has passed."""
        if self.expired():
            raise OutOfTime(f"{stage}: out of time")


def run_interruptibly(call: Callable[[], T], stop: Callable[[], None], stop_at: float = math.inf) -> T:
    """Run a solver ``call`` that releases the GIL in a thread of its own, so
    that Ctrl-C reaches this thread at once: then ``stop`` asks the solver to
    stop, and :class:`KeyboardInterrupt` is raised as soon as it has. At
    ``stop_at`` (``time.perf_counter()``) ``stop`` is called too, and the
    solver's answer awaited: CP-SAT overran its own time limit by seconds on
    models of 1,024 phases.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    thread = threading.Thread(target=target, name="themis-opt-solver", daemon=True)
    thread.start()
    stopped = False
    try:
        while thread.is_alive():
            thread.join(0.05)
            if not stopped and time.perf_counter() >= stop_at:
                stop()
                stopped = True
    except KeyboardInterrupt:
        stop()
        thread.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def die_with_parent() -> None:  # pragma: no cover - runs in the worker processes
    """Make this process die with the process that started it (Linux): no worker of a bench or
    helper of a search outlives the command that started it.
    """
    import ctypes
    import os
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def available_workers() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes this process may still take: the memory the system has available, or what an
    address-space limit (``ulimit -v``) leaves of it, the less; ``None`` where neither is known
    (not Linux).
    """
    found: list[int] = []
    try:
        import resource  # POSIX only

        with open("/proc/meminfo", encoding="ascii") as meminfo:
            found += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            with open("/proc/self/status", encoding="ascii") as status:
                held = [int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:")]
            found.append(max(0, limit - sum(held)))
    except (ImportError, OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return min(found) if found else None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: a simulation or a file read allocates millions of objects
    and no cycles, and the collector's passes over them cost a third of its time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
