"""The lower bounds' tuning parameters (their time and limits)."""

from __future__ import annotations

from dataclasses import dataclass

from themis_opt.knobs import Knobs, knob


@dataclass(frozen=True)
class BoundsParams(Knobs):
    """The lower bounds' time and limits (:mod:`themis_opt.bounds`)."""

    share: float = knob(0.25, "of a searching method's time: the load programs need seconds on many collectives", 0, 1)
    seconds: float = knob(11.0, "and at most this: below it the node limit, not the clock, ends SCIP", 0)
    cheap_share: float = knob(0.5, "of baseline's, themis's and balanced's time for their bounds", 0, 1)
    auto_load_variables: int = knob(
        128, "the load programs by default up to this many order counts: small programs cost little", 0
    )
    share_all: float = knob(0.3, "of the time of every method in one call: the bounds first, the methods after", 0, 1)
    solver_load: float = knob(0.6, "seconds OR-Tools takes to load, cold: with less left the programs are skipped", 0)
    lp_share: float = knob(0.1, "of the bounds' time for the LP: GLOP needs a fraction of it", 0, 1)
    fill_drain_share: float = knob(
        0.6, "of the bounds' time for fill-and-drain, run first: its counts seed the searches", 0, 1
    )
    integer_headroom: float = knob(
        1e-4, "SCIP runs only if it could raise the LP's bound more, relatively: it spends seconds on less", 0, 1
    )
    fluid_share: float = knob(0.8, "of the bounds' time left after fill-and-drain for the fluid bound, then SCIP", 0, 1)
    fluid_points: int = knob(8, "issue times on the fluid bound's grid, the earliest: the later add time, not bound", 1)
    max_fluid_variables: int = knob(
        200_000, "the fluid program's variables at most: beyond, it needs more than its share", 1
    )
    node_limit: int = knob(20_000, "SCIP's nodes for the integer bound: a stop that is the same on every machine", 1)
    scip_grace: float = knob(0.2, "seconds for SCIP's helper to answer past the deadline: SCIP stops at its own", 0)
    scip_helper_variables: int = knob(
        32,
        "SCIP in a helper process above this many variables: smaller programs end within tens of ms (Ctrl-C waits)",
        0,
    )
    fill_drain_work: float = knob(1.0, "CP-SAT deterministic time for fill-and-drain: a machine-independent stop", 0)
    fill_drain_conflicts: int = knob(20_000, "and at most this many conflicts: the same answer on every machine", 1)
    fill_drain_unit_ns: float = knob(1e-3, "fill-and-drain rounds times down to this: only weakens the bound", 0)
    fill_drain_clause_literals: int = knob(
        1_000_000, "a dimension's least head as a clause per level up to this many literals; a chain above", 1
    )
    max_load_variables: int = knob(20_000, "order counts over all chunk classes: beyond, the programs take minutes", 1)
    every_cut_entries: int = knob(
        100_000,
        "a load program keeps every issue cut up to this many classes over them: beyond, the ones that cannot bind go",
        0,
    )
    iteration_share: float = knob(
        0.3, "of the bounds' time for the iteration bound, run first on task graphs: it sees the graph and orders", 0, 1
    )
    iteration_seconds: float = knob(4.0, "and at most this: its cuts converge well within it", 0)
    iteration_orders: int = knob(
        24, "orders per chunk class the iteration bound tells apart (4 dimensions); beyond, one", 1
    )
    iteration_assignments: int = knob(
        20_000, "integer assignments enumerated per collective for its span alone: 4 chunks on 24 orders fit", 1
    )
    span_phases: int = knob(
        16, "a collective of at most this many phases solved alone by CP-SAT too: larger ones are not proven", 0
    )
    span_work: float = knob(0.5, "CP-SAT deterministic time for each collective solved alone: the same everywhere", 0)
    iteration_rounds: int = knob(200, "rounds of cuts of the iteration bound at most: each one per dimension", 1)
    iteration_tolerance: float = knob(
        1e-7, "a cut or a round that raises the program less, relatively, counts as none", 0, 1
    )
    iteration_cuts: int = knob(8, "cuts per dimension and round at most: one a round left the counts shuffling", 1)
    iteration_phase_jobs: int = knob(
        400, "a dimension's jobs are its phases up to this many, else one per class and order: the cuts' grid grows", 0
    )
    iteration_grid: int = knob(1_500, "release and delivery thresholds of a cut at most: the grid is their product", 2)
    iteration_patience: int = knob(
        5, "rounds without a rise before the cuts stop: past it they only shuffle the counts", 0
    )
    max_iteration_variables: int = knob(
        50_000, "the iteration bound's count variables at most: beyond, not computed", 1
    )
    level_slack: float = knob(2e-4, "how far above the start's value level counts may go, relatively", 0, 1)
    level_credit: float = knob(1e-3, "what an order in use is worth in the level counts, relative to that value", 0, 1)
