"""Every tuning number of the methods, in one frozen object, each with one line of why.

``solve(instance, method, params=SolveParams(...))`` and ``themis-opt solve|bench
--params FILE.toml`` take them; a TOML file names the groups as tables::

    [search]
    evaluations = 5000          # a deterministic stop: the same schedule on any machine

    [pipeline.at_bound]
    enabled = false

How each default was measured is in the changelog, not here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themis_opt.errors import InputError


def knob(
    default: Any,
    why: str,
    low: float | None = None,
    high: float | None = None,
    *,
    integer: bool | None = None,
    choices: tuple[str, ...] = (),
) -> Any:
    """A parameter: its default, one line of why, the range it must lie in (``None``: none) and
    whether it is a whole number (default: as its default is); or, with ``choices``, a nonempty
    sequence of them (a TOML list), kept as a tuple.
    """
    whole = isinstance(default, int) and not isinstance(default, bool) if integer is None else integer
    metadata = {"why": why, "low": low, "high": high, "integer": whole, "choices": choices}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class _Group:
    """A group of parameters: every number checked against its range on construction."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, _Group | Stage) or "why" not in f.metadata:
                continue
            if value is None and f.default is None:
                continue
            if f.metadata["choices"]:
                choices = f.metadata["choices"]
                if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
                    raise InputError(f.name, f"must be a nonempty list of {', '.join(choices)}, got {value!r}")
                for item in value:
                    if item not in choices:
                        raise InputError(f.name, f"must be a list of {', '.join(choices)}, got {item!r} in it")
                object.__setattr__(self, f.name, tuple(value))
                continue
            low, high = f.metadata["low"], f.metadata["high"]
            if isinstance(f.default, bool):
                if not isinstance(value, bool):
                    raise InputError(f.name, f"must be true or false, got {value!r}")
                continue
            integral = f.metadata["integer"]
            ok = isinstance(value, int) if integral else isinstance(value, (int, float))
            if isinstance(value, bool) or not ok or not math.isfinite(value):
                raise InputError(f.name, f"must be {'an integer' if integral else 'a number'}, got {value!r}")
            if (low is not None and value < low) or (high is not None and value > high):
                where = f"from {low:g} to {high:g}" if high is not None else f">= {low:g}"
                raise InputError(f.name, f"must be {where}, got {value!r}")


@dataclass(frozen=True)
class BoundsParams(_Group):
    """The lower bounds' time and limits (:mod:`themis_opt.bounds`)."""

    share: float = knob(0.25, "of a searching method's time: the load programs need seconds on many collectives", 0, 1)
    seconds: float = knob(11.0, "and at most this: SCIP reaches its node limit on 8 all-reduces of 16 chunks", 0)
    cheap_share: float = knob(0.5, "of baseline's, themis's and balanced's time for their bounds", 0, 1)
    auto_load_variables: int = knob(
        128, "the load programs by default up to this many order counts: gnmt's 120 take 0.12 s", 0
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
    max_fluid_variables: int = knob(200_000, "the fluid program's variables at most: 16 x 32 chunks has 12,000", 1)
    node_limit: int = knob(20_000, "SCIP's nodes for the integer bound: it proves the suites within them", 1)
    fill_drain_work: float = knob(1.0, "CP-SAT deterministic time for fill-and-drain: a machine-independent stop", 0)
    fill_drain_conflicts: int = knob(20_000, "and at most this many conflicts: the same answer on every machine", 1)
    fill_drain_unit_ns: float = knob(1e-3, "fill-and-drain rounds times down to this: only weakens the bound", 0)
    max_load_variables: int = knob(20_000, "order counts over all chunk classes: beyond, the programs take minutes", 1)
    iteration_share: float = knob(
        0.3, "of the bounds' time for the iteration bound, run first on task graphs: seconds on 563 collectives", 0, 1
    )
    iteration_seconds: float = knob(
        4.0, "and at most this: its cuts converge in about a second on the clusters suite", 0
    )
    iteration_orders: int = knob(
        24, "orders per chunk class the iteration bound tells apart (4 dimensions); beyond, one", 1
    )
    iteration_assignments: int = knob(
        20_000, "integer assignments enumerated per collective for its span alone: 4 chunks on 24 orders, 17,550", 1
    )
    span_phases: int = knob(
        16, "a collective of at most this many phases solved alone by CP-SAT too: 8 and 12 proven in ms, 24 not in s", 0
    )
    span_work: float = knob(0.5, "CP-SAT deterministic time for each collective solved alone: the same everywhere", 0)
    iteration_rounds: int = knob(200, "rounds of cuts of the iteration bound at most: each one per dimension", 1)
    iteration_tolerance: float = knob(
        1e-7, "a cut or a round that raises the program less, relatively, counts as none", 0, 1
    )
    iteration_cuts: int = knob(8, "cuts per dimension and round at most: one a round left the counts shuffling", 1)
    iteration_grid: int = knob(1_500, "release and delivery thresholds of a cut at most: the grid is their product", 2)
    iteration_patience: int = knob(
        5, "rounds without a rise before the cuts stop: past it they only shuffle the counts", 0
    )
    max_iteration_variables: int = knob(
        50_000, "the iteration bound's count variables at most: beyond, not computed", 1
    )
    level_slack: float = knob(2e-4, "how far above the start's value level counts may go, relatively", 0, 1)
    level_credit: float = knob(1e-3, "what an order in use is worth in the level counts, relative to that value", 0, 1)


@dataclass(frozen=True)
class SearchParams(_Group):
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
    annealing_temperature: float = knob(0.0008, "annealing's start, times the best makespan: 0.08% walked best", 0)
    handover_grace: float = knob(0.2, "seconds a caller waits past the deadline for a helper's schedule", 0)
    sequence_temperature: float = knob(0.002, "the sequence search's start, times the best makespan", 0)
    sequence_evaluations_per_phase: int = knob(200, "simulations of a sequence search per phase: about 5 s on 128", 1)
    sequence_patience_per_phase: int = knob(25, "candidates per phase without a new best before a restart", 0)
    random_moves: float = knob(0.05, "share of the sequence moves made anywhere, not on a critical path", 0, 1)
    snapshots: int = knob(64, "of the current assignment's run kept for moves to resume from: one per release", 1)
    swap_share: float = knob(0.6, "of the assignment moves a swap of two chunks' orders, the rest a new order", 0, 1)
    known_share: float = knob(0.8, "of the new orders one a start gives the class: the load programs chose well", 0, 1)
    walk_in_core: bool = knob(True, "the assignment moves drawn and timed in C: the same walk, no Python per move")
    walk_policies: tuple[str, ...] = knob(
        ("tail", "scf"),
        "worker n of several walks under the (n mod length)th: tail led on FSDP iterations, scf never far behind",
        choices=("fifo", "scf", "tail"),
    )
    draws_per_evaluation: int = knob(4, "assignment moves drawn per simulation at most: a no-op is drawn again", 1)
    room_simulations: float = knob(2.0, "x the longest simulation kept at the deadline, to build the best schedule", 0)
    handover_room_simulations: float = knob(
        4.0, "the same in a forked worker, which also sends the schedule: with less, large instances overran", 0
    )


@dataclass(frozen=True)
class CpsatParams(_Group):
    """CP-SAT's model and runs (:mod:`themis_opt.cpsat`)."""

    max_order_literals: int = knob(100_000, "chunks x orders: a larger exact model is not built (windows instead)", 1)
    max_phases: int = knob(20_000, "phases: a larger exact model is not built", 1)
    horizon_quanta: int = knob(100_000, "a coarse quantum is the warm start's makespan over this", 1)
    max_exact_quanta: int = knob(2**32, "an exact quantum is used while the makespan spans at most this many", 1)
    probing_phases: int = knob(1_000, "above this many phases presolve skips probing: it took the whole budget", 1)
    search_share: float = knob(0.9, "of the time left that the search gets, up to probing_phases phases", 0, 1)
    search_share_large: float = knob(0.4, "above: big models overran their limit by seconds", 0, 1)
    window_phases: int = knob(1_500, "phases per window of the large-neighbourhood search", 1)
    window_literals: int = knob(20_000, "order literals per window: a larger collective is never freed", 1)
    window_share: float = knob(0.25, "of the time left for each window", 0, 1)
    window_min_seconds: float = knob(0.5, "a window starts only with more left: building and re-timing it take that", 0)


@dataclass(frozen=True)
class Stage:
    """One stage of the cpsat method (:mod:`themis_opt.pipeline`).

    Parameters
    ----------
    share
        Of the time left when it starts.
    cap
        At most this many seconds (``None``: no cap).
    max_phases, max_literals
        It runs only on instances of at most this many phases and order
        literals (``None``: any).
    enabled
        Whether it runs at all.
    """

    share: float
    cap: float | None = None
    max_phases: int | None = None
    max_literals: int | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.enabled, bool) is False:
            raise InputError("enabled", f"must be true or false, got {self.enabled!r}")
        for name in ("share", "cap", "max_phases", "max_literals"):
            value = getattr(self, name)
            if value is None and name != "share":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InputError(name, f"must be a number > 0, got {value!r}")
            if name == "share" and value > 1:
                raise InputError(name, f"must be at most 1, got {value!r}")
            if name.startswith("max_") and not isinstance(value, int):
                raise InputError(name, f"must be an integer, got {value!r}")

    def __str__(self) -> str:
        parts = [f"share {self.share:g}"]
        parts += [f"cap {self.cap:g} s"] if self.cap is not None else []
        parts += [f"up to {self.max_phases} phases"] if self.max_phases is not None else []
        parts += [f"up to {self.max_literals} order literals"] if self.max_literals is not None else []
        return ", ".join(parts + ([] if self.enabled else ["off"]))


@dataclass(frozen=True)
class PipelineParams(_Group):
    """The stages of the cpsat method, in the order they run (see :mod:`themis_opt.pipeline`)."""

    warm_share: float = knob(0.25, "of the time left for each heuristic after the baseline, which may take all", 0, 1)
    assignment: Stage = field(default=Stage(0.25), metadata={"why": "which chunk takes which order"})
    large_phases: int = knob(
        512, "above this many phases the later stages rarely win: only the assignment search runs", 1
    )
    assignment_large_share: float = knob(0.9, "the assignment search's share above large_phases", 0, 1)
    at_bound: Stage = field(
        default=Stage(0.75, cap=5.0, max_phases=128, max_literals=4_096),
        metadata={"why": "does some optimal assignment of counts admit a schedule at the bound"},
    )
    sequence: Stage = field(default=Stage(0.4), metadata={"why": "the order each dimension serves"})
    counts_fixed: Stage = field(
        default=Stage(0.75, cap=20.0, max_literals=4_096),
        metadata={"why": "CP-SAT sequencing with the program's counts fixed"},
    )
    counts_share: float = knob(0.1, "of a stage's time for the load programs' counts, when not yet known", 0, 1)
    balanced_share: float = knob(0.3, "of balanced's time for each load program", 0, 1)
    balanced_evaluations: int = knob(10_000, "balanced's short search: all paper and 64-chunk 4D within 1%", 0)
    balanced_phases: int = knob(6_000_000, "and at most this many phases simulated in a walk: about 0.6 s", 0)
    balanced_restart_share: float = knob(0.1, "of them restarts, then annealing", 0, 1)
    balanced_temperature: float = knob(0.0015, "annealing's start, times the best makespan", 0)
    balanced_search_share: float = knob(0.5, "of balanced's time left for each walk of its short search, at most", 0, 1)
    balanced_walks: int = knob(2, "walks of it, each later one from the best so far and the losing candidates", 1)
    balanced_reheat_temperature: float = knob(0.003, "the later walks' annealing start, times the best makespan", 0)
    exit_reserve: float = knob(0.3, "seconds of a command's `--time-limit` kept for printing, saving and exit", 0)
    exit_reserve_share: float = knob(0.15, "and at most this share of it: short limits keep most of their time", 0, 1)


@dataclass(frozen=True)
class SolveParams(_Group):
    """Every tuning number of :func:`themis_opt.solve`, grouped; all frozen, all checked.

    Parameters
    ----------
    bounds, search, cpsat, pipeline
        The groups (:class:`BoundsParams`, :class:`SearchParams`,
        :class:`CpsatParams`, :class:`PipelineParams`).
    """

    bounds: BoundsParams = field(default_factory=BoundsParams)
    search: SearchParams = field(default_factory=SearchParams)
    cpsat: CpsatParams = field(default_factory=CpsatParams)
    pipeline: PipelineParams = field(default_factory=PipelineParams)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "params") -> SolveParams:
        """Parameters from nested tables; an unknown key is an error naming it."""
        built: SolveParams = _build(cls(), data, where)
        return built

    @classmethod
    def from_file(cls, path: str | Path) -> SolveParams:
        """Parameters from a TOML file (see the module's docstring)."""
        import tomllib

        from themis_opt.errors import too_many_digits
        from themis_opt.fileio import MAX_PARAMS_BYTES, read_text

        path = Path(path)
        text = read_text(path, MAX_PARAMS_BYTES)  # an endless file is refused at the limit
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise InputError(str(path), f"not valid TOML ({error})") from None
        except RecursionError:
            raise InputError(str(path), "not valid TOML (nested too deeply)") from None
        except ValueError as error:  # an integer of more digits than Python converts
            raise InputError(str(path), f"not valid TOML ({too_many_digits(error)})") from None
        return cls.from_dict(data, str(path))


def changes(params: SolveParams) -> dict[str, Any]:
    """The parameters that differ from the defaults, by dotted name (what a bench row records)."""
    found: dict[str, Any] = {}

    def walk(obj: Any, default: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value, base = getattr(obj, f.name), getattr(default, f.name)
            if isinstance(value, _Group | Stage):
                walk(value, base, f"{prefix}{f.name}.")
            elif value != base:
                found[f"{prefix}{f.name}"] = value

    walk(params, SolveParams(), "")
    return found


def _build(base: Any, data: Any, where: str) -> Any:
    """``base`` with the values of the nested tables ``data``; an unknown key is an error naming it."""
    if not isinstance(data, dict):
        raise InputError(where, f"must be a table, got {data!r}")
    known = [f.name for f in dataclasses.fields(base)]
    changes = {}
    for key, value in data.items():
        if key not in known:
            raise InputError(f"{where}: {key}", f"unknown parameter (known: {', '.join(known)})")
        current = getattr(base, key)
        nested = isinstance(current, _Group | Stage)
        changes[key] = _build(current, value, f"{where}: {key}") if nested else value
    try:
        return dataclasses.replace(base, **changes)
    except InputError as error:
        raise InputError(f"{where}: {error.path}", error.problem) from None


def parameter_table() -> list[tuple[str, Any, str]]:
    """(dotted name, default, why) of every parameter: the docs' table."""
    rows: list[tuple[str, Any, str]] = []

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            name = f"{prefix}{f.name}"
            if isinstance(value, _Group):
                walk(value, f"{name}.")
            else:
                rows.append((name, value, f.metadata.get("why", "")))

    walk(SolveParams(), "")
    return rows


DEFAULT = SolveParams()
