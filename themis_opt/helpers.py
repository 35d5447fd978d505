"""Helper processes: forked with this process's state (the instance, its caches), each answer
collected through a pipe by the deadline plus a grace, every helper killed once its answer is no
longer awaited. The searches spread over them (:mod:`themis_opt.search`), and SCIP runs in one
(:mod:`themis_opt.bounds.scip`).
"""

from __future__ import annotations

import math
import multiprocessing
import sys
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from themis_opt.budget import Deadline, die_with_parent


def can_fork() -> bool:
    """Whether helpers may be forked here."""
    # fork: the helper starts in milliseconds with this process's instance and caches; daemonic
    # processes may not have children
    return sys.platform == "linux" and not multiprocessing.current_process().daemon


Helper = tuple[multiprocessing.process.BaseProcess, Connection]


def fork(task: Callable[..., Any], args: tuple[Any, ...], options: dict[str, Any]) -> Helper:
    """A forked process running ``task(*args, **options)``, and the end of the pipe its answer comes through."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_run_helper, args=(send, task, args, options), daemon=True)
    process.start()
    send.close()
    return process, receive


def _run_helper(  # pragma: no cover - runs in the forked process
    send: Connection, task: Callable[..., Any], args: tuple[Any, ...], options: dict[str, Any]
) -> None:
    die_with_parent()
    try:
        found = task(*args, **options)
    except BaseException:  # Ctrl-C reaches the whole process group; the parent stops this process
        found = None
    send.send(found)


def result_of(helper: Helper, deadline: Deadline, grace: float) -> Any:
    """A helper's answer, waiting for it at most ``grace`` seconds past ``deadline`` (then ``None``)."""
    _, receive = helper
    try:
        if receive.poll(None if math.isinf(deadline.at) else deadline.remaining() + grace):
            return receive.recv()
    except (EOFError, OSError):  # the helper died without an answer
        pass
    finally:
        receive.close()
    return None


def stop(helpers: Sequence[Helper]) -> None:
    """Kill the helpers still running (an answer no longer awaited) and reap them all."""
    for process, _ in helpers:
        if process.is_alive():
            process.kill()
        process.join()
