"""Whether a float resolves a schedule's times, and what a method's result says when it does not.

Every limit of an instance can hold while their ratios cannot: a makespan of
4.6e20 ns has a float spacing of 65,536 ns, and a phase of 30 µs then cannot
be placed at its own length. The methods' arithmetic is right, the numbers
are not representable, and the validator rejects the schedule. A scan of the
schedule's times (fast: no cost model) finds the phases and compute tasks
whose end a float resolves more coarsely than the validator's tolerance of
their length; only then is the schedule validated in full (as long as the
simulation that made it), and a schedule that fails is marked
``invalid``, never ``optimal``.
"""

from __future__ import annotations

import dataclasses
import math

from themis_opt.instance import Instance
from themis_opt.result import Result, Status
from themis_opt.schedule import Schedule
from themis_opt.validator import ABS_TOL_NS, REL_TOL, RESOLVED, SPACINGS, validate

# A span is at risk when the float spacing at its end is above this share of the validator's
# tolerance for its length: end - start is then off by up to one spacing, and sums made it further.
RISK_SHARE = 0.25
# Seconds the validator takes per phase, with room: a schedule at risk is validated only if that
# fits the time left.
VALIDATE_S_PER_PHASE = 50e-6


def at_risk(schedule: Schedule) -> tuple[float, float] | None:
    """The (end, length) in ns of the first span of ``schedule`` whose end a float resolves too
    coarsely for the validator to accept its length, or ``None`` when every span is resolved.
    """
    # no span ends after the makespan, and every span's tolerance is at least ABS_TOL_NS: below
    # this makespan every end is resolved finely enough (no need to look at the phases)
    if math.ulp(schedule.makespan) <= RISK_SHARE * ABS_TOL_NS:
        return None
    import numpy as np

    columns = schedule.columns()  # numpy columns: a lazy schedule keeps its phases unbuilt
    computes = schedule.computes
    start = np.concatenate([columns.start_ns, np.array([c.start_ns for c in computes], dtype=np.float64)])
    end = np.concatenate([columns.end_ns, np.array([c.end_ns for c in computes], dtype=np.float64)])
    # a span of no length is exact: start + 0 is start; one whose length the validator takes within
    # SPACINGS float spacings at its end (they are small beside it: here with a factor 2 to spare) is safe
    spacing, length = np.spacing(np.abs(end)), end - start
    risky = (
        (end != start)
        & (spacing > RISK_SHARE * (REL_TOL * length + ABS_TOL_NS))
        & (2 * SPACINGS * spacing > RESOLVED * length)
    )
    if not risky.any():
        return None
    first = int(np.argmax(risky))
    return float(end[first]), float(end[first] - start[first])


def checked(instance: Instance, result: Result, seconds_left: float = math.inf) -> Result:
    """``result``, or where floats do not resolve its schedule and the validator rejects it, the
    same result marked :attr:`~themis_opt.result.Status.INVALID` with the first violation as its note.

    A schedule at risk whose validation would not fit in ``seconds_left``
    (:data:`VALIDATE_S_PER_PHASE`) is not validated, and is never ``optimal``:
    ``feasible``, with a note.
    """
    if result.schedule is None:
        return result
    risk = at_risk(result.schedule)
    if risk is None:
        return result
    end, length = risk
    if instance.num_phases * VALIDATE_S_PER_PHASE > seconds_left:
        note = (
            f"not validated in the time left, and a float resolves its times coarsely (a span of {length:g} ns "
            f"ending at {end:g} ns): not claimed optimal"
        )
        status = Status.FEASIBLE if result.status is Status.OPTIMAL else result.status
        return dataclasses.replace(result, status=status, note=f"{result.note}; {note}" if result.note else note)
    violations = validate(instance, result.schedule)
    if not violations:
        return result
    note = (
        f"invalid: a float cannot resolve this instance's times (a span of {length:g} ns ending at {end:g} ns; "
        f"{len(violations)} violations, the first: {violations[0]})"
    )
    return dataclasses.replace(result, status=Status.INVALID, note=f"{result.note}; {note}" if result.note else note)
