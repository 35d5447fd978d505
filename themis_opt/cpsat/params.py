"""CP-SAT's model's and runs' tuning parameters."""

from __future__ import annotations

from dataclasses import dataclass

from themis_opt.knobs import Knobs, knob


@dataclass(frozen=True)
class CpsatParams(Knobs):
    """CP-SAT's model and runs (:mod:`themis_opt.cpsat`)."""

    max_order_literals: int = knob(100_000, "chunks x orders: a larger exact model is not built (windows instead)", 1)
    max_phases: int = knob(20_000, "phases: a larger exact model is not built", 1)
    horizon_quanta: int = knob(100_000, "a coarse quantum is the warm start's makespan over this", 1)
    max_exact_quanta: int = knob(2**32, "an exact quantum is used while the makespan spans at most this many", 1)
    probing_phases: int = knob(1_000, "above this many phases presolve skips probing: it took the whole budget", 1)
    search_share: float = knob(0.9, "of the time left that the search gets, up to probing_phases phases", 0, 1)
    search_share_large: float = knob(0.4, "above: big models overran their limit by seconds", 0, 1)
    search_reserve_large: float = knob(
        10.0, "seconds a big model's search leaves at most, if more than its share: it overran by 2 to 6 s", 0
    )
    window_phases: int = knob(1_500, "phases per window of the large-neighbourhood search", 1)
    window_literals: int = knob(20_000, "order literals per window: a larger collective is never freed", 1)
    window_share: float = knob(0.25, "of the time left for each window", 0, 1)
    window_min_seconds: float = knob(0.5, "a window starts only with more left: building and re-timing it take that", 0)
