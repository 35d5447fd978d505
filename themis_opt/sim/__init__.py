"""The event-driven simulator: every chunk's dimension order (and the queue rule) into a timed schedule.

* :mod:`~themis_opt.sim.engine`: the rules, and the engine in Python;
* :mod:`~themis_opt.sim.core`: the same engine in C (``_simcore.c``), bound with ctypes;
* :mod:`~themis_opt.sim.dispatch`: :func:`simulate`, which picks the engine;
* :mod:`~themis_opt.sim.retime`: schedules from fixed orders and fixed sequences (CP-SAT's answers).
"""

from themis_opt.sim.dispatch import Engine, simulate, simulate_makespan
from themis_opt.sim.engine import PhaseMemo, phase_plan
from themis_opt.sim.retime import compute_sequence_of, left_shift, retime, sequences_of

__all__ = [
    "Engine",
    "PhaseMemo",
    "compute_sequence_of",
    "left_shift",
    "phase_plan",
    "retime",
    "sequences_of",
    "simulate",
    "simulate_makespan",
]
