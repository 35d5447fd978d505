"""The event-driven simulator: every chunk's dimension order (and the queue rule) into a timed schedule.

* :mod:`~themis_opt.sim.queues`: the intra-dimension queue policies, a registry;
* :mod:`~themis_opt.sim.model`: an instance's compiled model, what is worked out from it once;
* :mod:`~themis_opt.sim.engine`: the rules, and the engine in Python;
* :mod:`~themis_opt.sim.core`: the same engine in C (``_simcore/``), bound with ctypes;
* :mod:`~themis_opt.sim.dispatch`: :func:`simulate`, which picks the engine;
* :mod:`~themis_opt.sim.retiming`: schedules from fixed orders and fixed sequences (CP-SAT's answers).

The names below are imported on first use, so that reading the queue policies' registry loads
no engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from themis_opt.lazy import lazy_names

if _TYPE_CHECKING:  # pragma: no cover
    from themis_opt.sim.dispatch import Engine as Engine, simulate as simulate, simulate_makespan as simulate_makespan
    from themis_opt.sim.engine import PhaseMemo as PhaseMemo, phase_plan as phase_plan
    from themis_opt.sim.retiming import (
        compute_sequence_of as compute_sequence_of,
        left_shift as left_shift,
        retime as retime,
        sequences_of as sequences_of,
    )

_HOMES = {
    "Engine": "dispatch",
    "simulate": "dispatch",
    "simulate_makespan": "dispatch",
    "PhaseMemo": "engine",
    "phase_plan": "engine",
    "compute_sequence_of": "retiming",
    "left_shift": "retiming",
    "retime": "retiming",
    "sequences_of": "retiming",
}
__all__ = sorted(_HOMES)


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
