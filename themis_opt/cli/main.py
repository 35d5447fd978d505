"""``main`` and the console script: the parser of every command, running the one asked for."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from rich.console import Console

from themis_opt.cli import astra, bench, programs, results, solving, workload
from themis_opt.cli.options import Parser, flag, outputs_apart
from themis_opt.errors import InputError
from themis_opt.version import __version__

COMMANDS = (solving, bench, results, workload, astra, programs)  # each registers its commands, in --help's order


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``themis-opt``; given the ``argv`` it will parse, only the command
    asked for gets its options (the others are listed by name: their options' defaults come from
    modules that command does not need to load).
    """
    asked = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    parser = Parser(
        prog="themis-opt",
        description="Schedule collectives on multi-dimensional networks: ASTRA-sim's baseline and Themis, "
        "balanced orders and CP-SAT, with lower bounds.",
        epilog="Run 'themis-opt COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"themis-opt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND", title="commands")
    for family in COMMANDS:
        if asked is None or asked in family.COMMANDS:
            family.register(sub)
        else:
            for name, line in family.COMMANDS.items():
                sub.add_parser(name, help=line)
    return parser


def main(argv: Sequence[str] | None = None, *, started: float | None = None) -> int:
    """Run ``themis-opt``; returns the exit status (0 ok, 1 invalid schedule, 2 bad input, 130 interrupted,
    143 terminated).

    ``--time-limit`` counts from ``started`` (a ``time.perf_counter()``
    reading; default now): loading and printing are stages too.
    """
    started = time.perf_counter() if started is None else started
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    args.started = started
    previous = _on_sigterm()
    try:
        outputs_apart(args)
        code: int = args.handler(args, Console())
        sys.stdout.flush()  # an output the OS refuses fails here, inside the one-line handling below
        return code
    except InputError as error:
        sys.stderr.write(f"themis-opt: error: {_as_options(error, parser, args)}\n")
        return 2
    except MemoryError:  # under an address-space limit (ulimit -v): one line, whatever ran out
        sys.stderr.write(f"themis-opt: error: {args.command}: out of memory (this input needs more than it may take)\n")
        return 2
    except OSError as error:  # standard output refused (a full disk, a closed pipe): one line, no traceback
        where = error.filename or "standard output"
        sys.stderr.write(f"themis-opt: error: {where}: cannot be written ({error.strerror or error})\n")
        return 2
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (Terminated), perhaps after the best so far was kept
        terminated = _terminated(stop)
        sys.stderr.write(f"themis-opt: {'terminated' if terminated else 'interrupted'}\n")
        return 143 if terminated else 130
    finally:
        gc.unfreeze()  # what the command froze (cli.options.read_instance) is collected as before
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it stops as Ctrl-C stops it: every output
    written whole or not at all, no temporary file left behind.
    """


def _terminated(stop: BaseException | None) -> bool:
    """Whether SIGTERM is behind ``stop``: the searches that keep their best raise their own
    interrupt from it, perhaps several deep.
    """
    while stop is not None:
        if isinstance(stop, Terminated):
            return True
        stop = stop.__cause__
    return False


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _on_sigterm() -> Any:
    """Turn SIGTERM into :class:`Terminated` (from the main thread, where handlers can be set); the
    handler it replaces, to put back.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def _as_options(error: InputError, parser: argparse.ArgumentParser, args: argparse.Namespace) -> InputError:
    """``error`` with the library field it names (``tp``) as the command's option (``--tp``)."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = commands.choices[args.command]
    dest = getattr(args, "fields", {}).get(error.path, error.path)
    option = dest if dest.startswith("--") else flag(command, dest)
    return InputError(option, error.problem) if option is not None else error


def _process_age() -> float:
    """Seconds since this process started (Python's own start-up is part of the command), 0 if unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            return max(0.0, float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        return 0.0


def entry() -> NoReturn:  # pragma: no cover - the console script; tests call main()
    """The ``themis-opt`` console script: :func:`main`, then exit with its status.

    The process ends without running native destructors: they took a tenth
    of a second and more after CP-SAT (time a ``--time-limit`` promises), and
    a CP-SAT search stopped from another thread can abort the interpreter's
    teardown. Everything worth keeping (rows, output files) is closed already.
    """
    code = main(started=time.perf_counter() - _process_age())
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
