"""Tuning parameters as data: a :func:`knob` is a dataclass field with its default, one line of why
and its range; a :class:`Knobs` group checks every knob on construction.

Each component keeps its own group beside it, in PyVRP's manner (:class:`~themis_opt.bounds.params.BoundsParams`,
:class:`~themis_opt.search.params.SearchParams`, :class:`~themis_opt.cpsat.params.CpsatParams`, the
cpsat stages' :class:`~themis_opt.params.PipelineParams`); :class:`~themis_opt.params.SolveParams`
gathers them, reads TOML files and gives the docs' one table of every parameter.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
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
class Knobs:
    """A group of parameters: every number checked against its range on construction (a nested
    group, or any other dataclass field, is checked by its own class).
    """

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if dataclasses.is_dataclass(value) or "why" not in f.metadata:
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


def walk(obj: Any, visit: Any, prefix: str = "", *, stages: bool = False) -> None:
    """Call ``visit(dotted name, field, value)`` for every parameter of ``obj`` in declaration order,
    nested :class:`Knobs` groups entered (and with ``stages`` every other dataclass value too, such as
    a cpsat stage's settings, field by field).
    """
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Knobs) or (stages and dataclasses.is_dataclass(value)):
            walk(value, visit, f"{prefix}{f.name}.", stages=stages)
        else:
            visit(f"{prefix}{f.name}", f, value)


def build(base: Any, data: Any, where: str) -> Any:
    """``base`` with the values of the nested tables ``data``; an unknown key is an error naming it."""
    if not isinstance(data, dict):
        raise InputError(where, f"must be a table, got {data!r}")
    known = [f.name for f in dataclasses.fields(base)]
    changes = {}
    for key, value in data.items():
        if key not in known:
            raise InputError(f"{where}: {key}", f"unknown parameter (known: {', '.join(known)})")
        current = getattr(base, key)
        nested = dataclasses.is_dataclass(current)
        changes[key] = build(current, value, f"{where}: {key}") if nested else value
    try:
        return dataclasses.replace(base, **changes)
    except InputError as error:
        raise InputError(f"{where}: {error.path}", error.problem) from None
