"""The local searches' tuning parameters."""

from __future__ import annotations

from dataclasses import dataclass

from themis_opt.knobs import Knobs, knob


@dataclass(frozen=True)
class SearchParams(Knobs):
    """The local searches (:mod:`themis_opt.search`)."""

    evaluations: int | None = knob(
        None, "simulations per search: a deterministic stop (default: the rule below, or the time)", 1, integer=True
    )
    evaluations_per_pair: int = knob(
        600, "per ordered pair of interchangeable chunks: swaps grow with a class's square", 1
    )
    min_evaluations: int = knob(2400, "at least: a class of a few chunks still gets restarts and moves", 1)
    descent_restart_share: float = knob(0.5, "one collective: restarts for half the simulations, then a descent", 0, 1)
    annealing_restart_share: float = knob(0.1, "several collectives: restarts for a tenth, then annealing", 0, 1)
    annealing_temperature: float = knob(0.0008, "annealing's start, times the best makespan", 0)
    handover_grace: float = knob(0.2, "seconds a caller waits past the deadline for a helper's schedule", 0)
    sequence_temperature: float = knob(0.002, "the sequence search's start, times the best makespan", 0)
    sequence_evaluations_per_phase: int = knob(
        200, "simulations of a sequence search per phase: its moves grow with the phases", 1
    )
    sequence_patience_per_phase: int = knob(25, "candidates per phase without a new best before a restart", 0)
    random_moves: float = knob(0.05, "share of the sequence moves made anywhere, not on a critical path", 0, 1)
    snapshots: int = knob(64, "of the current assignment's run kept for moves to resume from: one per release", 1)
    swap_share: float = knob(0.6, "of the assignment moves a swap of two chunks' orders, the rest a new order", 0, 1)
    known_share: float = knob(0.8, "of the new orders one a start gives the class: the load programs chose well", 0, 1)
    walk_in_core: bool = knob(True, "the assignment moves drawn and timed in C: the same walk, no Python per move")
    walk_policies: tuple[str, ...] = knob(
        ("tail", "scf"),
        "worker n of several walks under the (n mod length)th: each policy leads on some instances",
        choices=("fifo", "scf", "tail"),
    )
    draws_per_evaluation: int = knob(4, "assignment moves drawn per simulation at most: a no-op is drawn again", 1)
    room_simulations: float = knob(2.0, "x the longest simulation kept at the deadline, to build the best schedule", 0)
    handover_room_simulations: float = knob(
        4.0, "the same in a forked worker, which also sends the schedule: with less, large instances overran", 0
    )
