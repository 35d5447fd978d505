"""What every command shares: the parser, option types, the options named alike in every command, output checks."""

from __future__ import annotations

import argparse
import gc
import glob
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.instance import Instance
    from themis_opt.params import SolveParams


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line and exit with status 2."""
        sys.stderr.write(f"themis-opt: error: {message}\n")
        raise SystemExit(2)


def number_in(low: float, high: float) -> type:
    """An option type: a number above ``low`` and at most ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not (low < value <= high):
            raise argparse.ArgumentTypeError(f"must be a number > {low:g} and <= {high:g}, got {text}")
        return value

    return parse  # type: ignore[return-value]


def int_in(low: int, high: int) -> type:
    """An option type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be >= {low} and <= {high}, got {value}")
        return value

    return parse  # type: ignore[return-value]


def path(text: str) -> str:
    """A path argument: not empty (an empty one would name the current folder, or nothing)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


SEED = int_in(0, 2**31 - 1)


def solver_options(parser: argparse.ArgumentParser, time_limit: float, scope: str) -> None:
    """``--time-limit`` (its ``scope`` stated), ``--workers``, ``--seed`` and ``--params``."""
    parser.add_argument(
        "--time-limit",
        type=number_in(0, 1e6),
        default=time_limit,
        help=f"seconds {scope} may take, every stage included (default {time_limit:g})",
    )
    parser.add_argument(
        "--workers",
        type=int_in(1, 1024),
        default=None,
        help="CP-SAT worker threads, and local searches at once (default: the cores available)",
    )
    parser.add_argument("--seed", type=SEED, default=0, help="random seed of the searches (default 0)")
    parser.add_argument(
        "--params",
        metavar="FILE",
        default=None,
        help="tuning parameters from a TOML file; an unknown key is an error (default: the built-in ones)",
    )


def methods_option(parser: argparse.ArgumentParser, default: str, also: str = "") -> None:
    """``--method`` (or ``--methods``): a comma-separated list of methods or variants."""
    from themis_opt.methods import method_names

    parser.add_argument(
        "--method",
        "--methods",
        dest="method",
        default=default,
        metavar="METHODS",
        help=f"comma-separated, from {', '.join(method_names())}{also} (default {default})",
    )


def force_option(parser: argparse.ArgumentParser) -> None:
    """``--force``: a command that writes a folder replaces an existing one whole."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing folder of --out whole, once the new one is written (default: off, refused)",
    )


def out_option(parser: argparse.ArgumentParser, what: str, *aliases: str, required: bool = True) -> None:
    """``--out``: every command writes there; missing folders are created."""
    parser.add_argument(
        "--out",
        *aliases,
        dest="out",
        metavar="PATH",
        type=path,
        required=required,
        default=None,
        help=f"{what}; missing folders are created, and the path is checked before any work starts"
        + ("" if required else " (default: nothing written)"),
    )


def bounds_option(parser: argparse.ArgumentParser, default: str) -> None:
    """``--bounds``: which lower bounds every method reports (the same whatever the method)."""
    parser.add_argument(
        "--bounds",
        choices=("auto", "formulas", "full"),
        nargs="?",
        const="full",
        default=default,
        help="the lower bounds every method reports: formulas (no solver: milliseconds), full (also the iteration "
        "bound and the load programs, in the bounds' share of the time) or auto (full on instances of at most "
        f"bounds.auto_load_variables order counts, else formulas and the iteration bound); --bounds alone is full "
        f"(default {default})",
    )


INPUTS = ("instance", "result", "paths", "network", "system", "workload", "model", "rows", "params", "comm_groups")
# the commands whose --out is a file; the others' is a folder
FILE_OUTPUTS = ("solve", "workload", "import-astra", "plot", "bench", "show", "chunks")


def outputs_apart(args: argparse.Namespace) -> None:
    """Every file a command will write, the derived ones included, checked before any work starts:
    an output that is an input file, or another output, would overwrite it; a command that writes
    a file refuses a folder (one that writes a folder writes inside it).
    """
    from themis_opt.fileio import check_apart, check_file_output

    outputs: list[tuple[str, Path]] = []
    for name in ("out", "csv", "trace"):
        value = getattr(args, name, None)
        if value and (name != "out" or args.command in FILE_OUTPUTS):
            check_file_output(f"--{name}", value)
    derived = getattr(args, "files", None)  # a command that writes files named after --out says which
    if derived is not None:
        outputs += derived(args)
    elif args.command in FILE_OUTPUTS:
        outputs += [(f"--{name}", Path(getattr(args, name))) for name in ("out", "csv") if getattr(args, name, None)]
    if getattr(args, "trace", None):
        outputs.append(("--trace", Path(args.trace)))
    inputs: list[str | Path] = []
    for name in INPUTS:
        value = getattr(args, name, None)
        inputs += value if isinstance(value, list) else [value] if isinstance(value, str) else []
    for path in list(inputs):  # a folder of instances (bench), a prefix of Chakra traces (import-astra)
        if Path(path).is_dir():
            inputs += sorted(Path(path).glob("*.json"))
        else:
            inputs += sorted(Path(path).parent.glob(f"{glob.escape(Path(path).name)}.*.et"))
    if getattr(args, "suite", None):
        from themis_opt.suites import suite_folder

        inputs += sorted(suite_folder(args.suite).glob("*.json"))
    check_apart(outputs, inputs)


def params_of(args: argparse.Namespace) -> SolveParams | None:
    """The ``--params`` file's parameters, or ``None`` for the defaults."""
    if args.params is None:
        return None
    from themis_opt.params import SolveParams

    return SolveParams.from_file(args.params)


def flag(parser: argparse.ArgumentParser, field: str) -> str | None:
    """The option of ``parser`` that sets the library's ``field`` (``tp`` -> ``--tp``), if it has one."""
    for action in parser._actions:
        if action.dest == field and action.option_strings:
            return action.option_strings[0]
    return None


def read_instance(path: str) -> Instance:
    """The instance file at ``path``, for a command. Everything made by then, the instance among it,
    is kept out of the cyclic garbage collector's passes until the command ends (``gc.freeze``;
    :func:`~themis_opt.cli.main` unfreezes it): the instance lives that long, and every later pass
    scanned its objects (a tenth of ``solve --method themis`` on 100,000 tasks).
    """
    from themis_opt.formats.native import load_instance

    instance = load_instance(path)
    gc.freeze()
    return instance
