"""themis_opt: optimal scheduling of collective communication on multi-dimensional networks.

The public API, imported on first use so that ``import themis_opt`` (and the
command line) stays fast::

    from themis_opt import load_instance, solve, validate

    instance = load_instance("instances/paper/paper-3d-sw8x8x8.json")
    result = solve(instance, method="themis")
    assert validate(instance, result.schedule) == []
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.bounds import Bounds, compute_bounds
    from themis_opt.errors import InputError
    from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Kind, Network, Topology
    from themis_opt.io import load_instance, load_result, save_instance, save_result
    from themis_opt.methods import METHODS
    from themis_opt.result import Result, Status
    from themis_opt.schedule import Schedule
    from themis_opt.solve import solve
    from themis_opt.validator import validate

_EXPORTS = {
    "After": "instance",
    "Bounds": "bounds",
    "Collective": "instance",
    "Compute": "instance",
    "Dimension": "instance",
    "InputError": "errors",
    "Instance": "instance",
    "Kind": "instance",
    "METHODS": "methods",
    "Network": "instance",
    "Result": "result",
    "Schedule": "schedule",
    "Status": "result",
    "Topology": "instance",
    "compute_bounds": "bounds",
    "load_instance": "io",
    "load_result": "io",
    "save_instance": "io",
    "save_result": "io",
    "solve": "solve",
    "validate": "validator",
}

__all__ = [
    "METHODS",
    "After",
    "Bounds",
    "Collective",
    "Compute",
    "Dimension",
    "InputError",
    "Instance",
    "Kind",
    "Network",
    "Result",
    "Schedule",
    "Status",
    "Topology",
    "compute_bounds",
    "load_instance",
    "load_result",
    "save_instance",
    "save_result",
    "solve",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'themis_opt' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"themis_opt.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
