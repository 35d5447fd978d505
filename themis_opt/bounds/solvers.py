"""OR-Tools' solvers loaded within a deadline: an import cannot be stopped, so it runs in a thread
of its own and is waited for only until the deadline (:func:`solvers_loaded`).
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
import threading
from typing import Any

from themis_opt.bounds.formulas import BOUNDS
from themis_opt.bounds.params import BoundsParams
from themis_opt.budget import Deadline

logger = logging.getLogger(__name__)

# what the load programs import (GLOP and SCIP; CP-SAT's compiled helper, see themis_opt.cpsat.solver),
# and what the exact model adds (CP-SAT's Python layer, with pandas: most of the time)
_PROGRAM_MODULES = (
    "ortools.linear_solver.pywraplp",
    "ortools.sat.python.cp_model_helper",
    "ortools.util.python.sorted_interval_list",
)
_CPSAT_MODULES = (*_PROGRAM_MODULES, "ortools.sat.python.cp_model")


def _load_solvers(key: str, modules: tuple[str, ...]) -> None:
    try:
        for name in modules:
            importlib.import_module(name)
    except BaseException as error:  # re-raised where the solvers are asked for
        _LOADING[f"{key} error"] = error


_LOADING: dict[str, Any] = {}  # per set of modules, the loading thread and what it raised


def solvers_loaded(deadline: Deadline, params: BoundsParams = BOUNDS, *, cpsat: bool = False) -> bool:
    """Whether OR-Tools' solvers are loaded, loading them until ``deadline`` if need be: those of
    the load programs, and with ``cpsat`` CP-SAT's Python layer for the exact model too.

    Loading the programs' takes about a tenth of a second and CP-SAT's layer half a second more
    (several seconds from a cold disk, right after boot), and an import cannot be stopped: it runs
    in a thread of its own, started only with at least ``params.solver_load`` left, and is waited
    for until ``deadline``; if it is not done by then, ``False`` (the programs and CP-SAT are
    skipped) and it goes on in the background for a later call.
    """
    key, modules = ("cpsat", _CPSAT_MODULES) if cpsat else ("programs", _PROGRAM_MODULES)
    loader: threading.Thread | None = _LOADING.get(key)
    if loader is None:
        if all(name in sys.modules for name in modules):
            return True  # imported by the caller
        if deadline.remaining() < params.solver_load:
            return False
        loader = threading.Thread(target=_load_solvers, args=(key, modules), name=f"load OR-Tools ({key})", daemon=True)
        _LOADING[key] = loader
        loader.start()
    if loader.is_alive():
        loader.join(None if math.isinf(deadline.at) else max(0.0, deadline.remaining()))
        if loader.is_alive():
            logger.info("OR-Tools is still loading at the deadline: its programs are skipped")
            return False
    if f"{key} error" in _LOADING:
        raise _LOADING[f"{key} error"]
    return True
