"""Every tuning number of the methods, gathered in one frozen object (:class:`SolveParams`).

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

from themis_opt.bounds.params import BoundsParams
from themis_opt.cpsat.params import CpsatParams
from themis_opt.errors import InputError
from themis_opt.knobs import Knobs, build, knob, walk
from themis_opt.search.params import SearchParams


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
class PipelineParams(Knobs):
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
    probe: Stage = field(
        default=Stage(0.3, cap=5.0, max_literals=4_096, enabled=False),
        metadata={"why": "the exact model before the sequence searches: it may prove the best optimal early"},
    )
    sequence: Stage = field(default=Stage(0.4), metadata={"why": "the order each dimension serves"})
    counts_fixed: Stage = field(
        default=Stage(0.75, cap=20.0, max_literals=4_096),
        metadata={"why": "CP-SAT sequencing with the program's counts fixed"},
    )
    refutation: Stage = field(
        default=Stage(0.3, cap=10.0, max_phases=128, max_literals=4_096),
        metadata={"why": "raise the bound: no assignment that could end by a cap admits a schedule that does"},
    )
    refute_step: float = knob(0.002, "each round's cap above the bound, relative: tens of assignments a round", 0, 1)
    refute_seconds: float = knob(
        1.0, "for CP-SAT to refute one assignment at first (then 4x): most take a tenth of that, a few seconds", 0
    )
    refute_lanes: int = knob(2, "assignments refuted at once, one worker each: one holds up no other", 1)
    refute_growth: float = knob(
        0.125, "the next cap twice as far after a round in under this share of the time left: else as far", 0, 1
    )
    at_bound_lanes: int = knob(2, "assignments asked at the bound at once: one worker each finds as fast as two", 1)
    at_bound_seconds: float = knob(
        2.0, "for each assignment but the program's at first (then 4x): one CP-SAT cannot answer holds up no other", 0
    )
    counts_share: float = knob(0.1, "of a stage's time for the load programs' counts, when not yet known", 0, 1)
    balanced_share: float = knob(0.3, "of balanced's time for each load program", 0, 1)
    balanced_evaluations: int = knob(10_000, "balanced's short search: enough to level its counts' orders", 0)
    balanced_phases: int = knob(
        6_000_000, "and at most this many phases simulated in a walk: a fraction of a second", 0
    )
    balanced_restart_share: float = knob(0.1, "of them restarts, then annealing", 0, 1)
    balanced_temperature: float = knob(0.0015, "annealing's start, times the best makespan", 0)
    balanced_search_share: float = knob(0.5, "of balanced's time left for each walk of its short search, at most", 0, 1)
    balanced_walks: int = knob(2, "walks of it, each later one from the best so far and the losing candidates", 1)
    balanced_reheat_temperature: float = knob(0.003, "the later walks' annealing start, times the best makespan", 0)
    exit_reserve: float = knob(0.3, "seconds of a command's `--time-limit` kept for printing, saving and exit", 0)
    exit_reserve_share: float = knob(0.15, "and at most this share of it: short limits keep most of their time", 0, 1)
    write_seconds_per_phase: float = knob(
        7e-6, "seconds writing one phase of a result file takes, kept from the limit for each file `--out` writes", 0
    )
    report_seconds_per_phase: float = knob(
        5e-7, "seconds the summary or table takes a phase of each result it reports, kept from the limit too", 0
    )
    write_share: float = knob(
        0.8, "of the limit writing and reporting take at most, the methods the rest (`--out` beyond: refused)", 0, 1
    )


@dataclass(frozen=True)
class SolveParams(Knobs):
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
        built: SolveParams = build(cls(), data, where)
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
    defaults: dict[str, Any] = {}
    walk(SolveParams(), lambda name, _, value: defaults.__setitem__(name, value), stages=True)
    found: dict[str, Any] = {}

    def visit(name: str, _: dataclasses.Field[Any], value: Any) -> None:
        if value != defaults[name]:
            found[name] = value

    walk(params, visit, stages=True)
    return found


def parameter_table() -> list[tuple[str, Any, str]]:
    """(dotted name, default, why) of every parameter: the docs' table."""
    rows: list[tuple[str, Any, str]] = []

    def visit(name: str, f: dataclasses.Field[Any], value: Any) -> None:
        rows.append((name, value, f.metadata.get("why", "")))

    walk(SolveParams(), visit)
    return rows


DEFAULT = SolveParams()
