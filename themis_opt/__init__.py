"""themis_opt: optimal scheduling of collective communication on multi-dimensional networks.

The public API, imported on first use so that ``import themis_opt`` (and the
command line) stays fast::

    from themis_opt import load_instance, solve, validate

    instance = load_instance("instances/paper/paper-3d-sw8x8x8.json")
    result = solve(instance, method="themis")
    assert validate(instance, result.schedule) == []
"""

from __future__ import annotations

from functools import cache as _cache
from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING, Any as _Any

from themis_opt.version import __version__ as __version__

if _TYPE_CHECKING:  # pragma: no cover - the public API, listed once: __getattr__ reads this block
    from themis_opt.bounds import compute_bounds as compute_bounds
    from themis_opt.errors import InputError as InputError
    from themis_opt.formats.astra import export_astra as export_astra, import_astra as import_astra
    from themis_opt.formats.native import (
        load_instance as load_instance,
        load_result as load_result,
        save_instance as save_instance,
        save_result as save_result,
    )
    from themis_opt.formats.workload_text import parse_workload as parse_workload
    from themis_opt.generator import generate as generate
    from themis_opt.instance import (
        After as After,
        Algorithm as Algorithm,
        AllReducePhases as AllReducePhases,
        Collective as Collective,
        Compute as Compute,
        Dimension as Dimension,
        Instance as Instance,
        Kind as Kind,
        Network as Network,
        Topology as Topology,
    )
    from themis_opt.methods import METHODS as METHODS
    from themis_opt.metrics import iteration_metrics as iteration_metrics
    from themis_opt.params import SolveParams as SolveParams
    from themis_opt.result import Bounds as Bounds, Result as Result, Status as Status
    from themis_opt.schedule import Schedule as Schedule
    from themis_opt.solving import solve as solve, solve_all as solve_all
    from themis_opt.validator import validate as validate
    from themis_opt.workloads.astra1 import task_graph as task_graph
    from themis_opt.workloads.zoo import model_workload as model_workload


@_cache
def _exports() -> dict[str, str]:
    """Each public name and its module, read from the ``TYPE_CHECKING`` block above."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "_TYPE_CHECKING")
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


__all__ = sorted(_exports())  # the names of the block above


def __getattr__(name: str) -> _Any:
    if name not in _exports():
        raise AttributeError(f"module 'themis_opt' has no attribute {name!r}")
    value = getattr(_import_module(_exports()[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*__all__, "__version__"]
