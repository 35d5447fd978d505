"""The input limits, and the helpers that check one field against them.

Each helper returns the value it checked (a float for a number, an enum member
for its value) or raises :class:`~themis_opt.errors.InputError` naming the field.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

from themis_opt.errors import InputError

# Sane upper limits: input beyond them is rejected on construction with a
# message, instead of overflowing a solver or running for hours.
MAX_DIMENSIONS = 16
MAX_DIMENSION_SIZE = 2**20
MAX_NPUS = 2**40
MAX_BANDWIDTH_GBPS = 1e9
MIN_BANDWIDTH_GBPS = 1e-6
MAX_TIME_NS = 1e15  # latencies, delays and issue times: about 11.6 days
MAX_SIZE_BYTES = 2**50  # 1 PiB per collective
MAX_COLLECTIVES = 2**17  # tasks: every method keeps a 60 s limit on 100,096 tasks (benchmarks page)
MAX_PHASES = 2**20  # chunk phases over the whole instance: the same, on 975,680 phases
MAX_ACTIVE_CHUNKS = 1024  # chunks a dimension runs at once
MAX_FLATTENED_NPUS = 2**16  # a flattened (one_*) algorithm's cost is found by visiting every NPU
MAX_STAGES = 1024  # pipeline stages (NPU classes) of one instance


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` if it is an integer ``>= minimum`` (and ``<= maximum``), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(name, f"must be an integer, got {value!r}")
    if value < minimum:
        raise InputError(name, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InputError(name, f"must be <= {maximum}, got {value}")
    return value


def check_number(
    name: str, value: Any, *, positive: bool = False, minimum: float = 0.0, maximum: float | None = None
) -> float:
    """Return ``value`` as a float if it is a finite number ``>= minimum``
    (``> 0`` when ``positive``) and ``<= maximum``, else raise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(name, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InputError(name, f"must be finite, got {value!r}")
    if positive and value <= 0:
        raise InputError(name, f"must be > 0, got {value!r}")
    if value < minimum:
        raise InputError(name, f"must be >= {minimum:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise InputError(name, f"must be <= {maximum:g}, got {value!r}")
    return float(value)


def check_enum(name: str, value: Any, enum: type[Enum]) -> Any:
    """Return the member of ``enum`` that ``value`` names, else raise."""
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        try:
            return enum(value)
        except ValueError:
            pass
    choices = ", ".join(member.value for member in enum)
    raise InputError(name, f"must be one of {choices}, got {value!r}")


def check_name(name: str, value: Any) -> str:
    """Return ``value`` if it is a string, else raise."""
    if not isinstance(value, str):
        raise InputError(name, f"must be a string, got {value!r}")
    return value
