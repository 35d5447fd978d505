"""A bench row: one instance's :class:`Record` of every method's :class:`Outcome` and the settings that
made it, checked field by field when a rows file is read back.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from themis_opt.errors import InputError
from themis_opt.formats.native import (
    instance_to_dict,
)
from themis_opt.instance import Instance
from themis_opt.methods import method_names
from themis_opt.params import SolveParams, changes
from themis_opt.result import gap

Settings = tuple[tuple[str, ...], float, int, str, str]  # methods, time limit, seed, parameters changed, bounds

BENCH_BOUNDS = "full"  # bench's bound set by default: every bound, in the bounds' own time limit


def settings_of(
    methods: Sequence[str], time_limit: float, seed: int, params: SolveParams | None, bound_set: str = BENCH_BOUNDS
) -> Settings:
    """What a row made with these options records of them."""
    return tuple(methods), time_limit, seed, json.dumps(changes(params or SolveParams()), sort_keys=True), bound_set


@dataclass(frozen=True)
class Outcome:
    """What one method measured on one instance."""

    method: str
    status: str
    makespan_ns: float | None
    runtime_s: float
    bandwidth_utilization: float | None
    valid: bool
    note: str = ""
    iteration_ns: float | None = None
    exposed_ns: float | None = None


@dataclass(frozen=True)
class Record:
    """One instance's row: its description, its best lower bound, each method's outcome.

    ``digest`` identifies the instance by content; ``methods``, ``time_limit_s``,
    ``seed`` and ``bounds`` (the bound set) say how the row was made, ``measured``
    (the UTC date) and ``version`` (themis_opt's) when and by what; ``bound``
    names the best lower bound (the gaps' certificate); ``error`` is set (and
    ``outcomes`` empty) when the instance could not be run at all.
    """

    path: str
    instance: str
    dims: str
    npus: int
    chunks: int
    lower_bound_ns: float
    ideal_ns: float
    outcomes: tuple[Outcome, ...]
    digest: str = ""
    methods: tuple[str, ...] = ()
    time_limit_s: float = 0.0
    seed: int = 0
    error: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    bound: str = ""
    bounds: str = BENCH_BOUNDS
    measured: str = ""
    version: str = ""

    def outcome(self, method: str) -> Outcome | None:
        """The outcome of ``method``, if it ran."""
        return next((o for o in self.outcomes if o.method == method), None)

    def gap(self, method: str) -> float | None:
        """``method``'s makespan over the best lower bound, minus 1."""
        o = self.outcome(method)
        return None if o is None else gap(o.makespan_ns, self.lower_bound_ns)

    def speedup(self, method: str) -> float | None:
        """Baseline makespan over ``method``'s."""
        base, o = self.outcome("baseline"), self.outcome(method)
        if base is None or o is None or not base.makespan_ns or not o.makespan_ns:
            return None
        return base.makespan_ns / o.makespan_ns

    def settings(self) -> Settings:
        """(methods, time limit, seed, parameters changed, bound set): what must match for rows to be compared."""
        return self.methods, self.time_limit_s, self.seed, json.dumps(self.params, sort_keys=True), self.bounds

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self))

    @staticmethod
    def from_dict(data: Any) -> Record:
        """Rebuild a record written by :meth:`to_json`."""
        if not isinstance(data, dict):
            raise InputError("", "a record must be a JSON object")
        _check_fields(Record, data, "")
        outcomes = data["outcomes"]
        if not outcomes and not data.get("error"):
            raise InputError("outcomes", "is empty, and the row names no error")
        for k, outcome in enumerate(outcomes):
            if not isinstance(outcome, dict):
                raise InputError(f"outcomes[{k}]", "must be a JSON object")
            _check_fields(Outcome, outcome, f"outcomes[{k}].")
            if outcome["method"] not in method_names():
                raise InputError(f"outcomes[{k}].method", f"unknown method {outcome['method']!r}")
        for method in data.get("methods", ()):
            if method not in method_names():
                raise InputError("methods", f"unknown method {method!r}")
        return Record(
            **{**data, "outcomes": tuple(Outcome(**o) for o in outcomes), "methods": tuple(data.get("methods", ()))}
        )


def _check_fields(cls: type, data: dict[str, Any], where: str) -> None:
    """Raise :class:`InputError` unless ``data`` gives every field of dataclass ``cls`` without a
    default, no other key, and each value of its field's type (as JSON gives it: a list for a tuple).
    """
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise InputError(f"{where}{unknown[0]}", "is not a field of a benchmark row")
    for name, f in known.items():
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise InputError(f"{where}{name}", "is missing")
            continue
        if not _fits(data[name], hints[name]):
            shown = repr(data[name])
            raise InputError(f"{where}{name}", f"must be {_described(hints[name])}, got {shown[:40]}")


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's type hint."""
    origin = get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, UnionType):
        return any(_fits(value, arg) for arg in get_args(hint))
    if origin is tuple:  # tuple[X, ...]: a JSON list; the outcomes are checked on their own
        return isinstance(value, list) and (
            get_args(hint)[0] is Outcome or all(_fits(v, get_args(hint)[0]) for v in value)
        )
    if origin is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _described(hint: Any) -> str:
    """A type hint in words."""
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return " or ".join(_described(arg) for arg in get_args(hint))
    if origin is tuple:
        return "a list"
    if origin is dict:
        return "an object"
    words = {float: "a number", int: "an integer", str: "a string", bool: "true or false", type(None): "null"}
    return words.get(hint, getattr(hint, "__name__", str(hint)))


def instance_digest(instance: Instance) -> str:
    """A digest of the instance's content (network and tasks, not its name or metadata)."""
    document = instance_to_dict(instance)
    del document["name"]
    document.pop("metadata", None)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def failed_record(path: str, digest: str, settings: Settings, error: str) -> Record:
    """The row of an instance that could not be run: the error, no outcomes."""
    methods, time_limit, seed, params, bound_set = settings
    return Record(
        path,
        Path(path).stem,
        "",
        0,
        0,
        0.0,
        0.0,
        (),
        digest,
        methods,
        time_limit,
        seed,
        error,
        json.loads(params),
        bounds=bound_set,
    )
