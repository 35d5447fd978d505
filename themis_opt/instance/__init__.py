"""Instance data: the network, its dimensions and the collectives to schedule.

Every class is a frozen dataclass that validates itself on construction and
raises :class:`~themis_opt.errors.InputError` naming the offending field.
Cross-field checks (a collective's dimensions against the network) live in
:class:`~themis_opt.instance.Instance`, which also builds the lookup
tables the rest of the library reads.

One module per concern, every name re-exported here:

* :mod:`~themis_opt.instance.checks`: the input limits (``MAX_*``,
  ``MIN_BANDWIDTH_GBPS``) and the field checks (``check_int``,
  ``check_number``, ``check_enum``, ``check_name``).
* :mod:`~themis_opt.instance.network`: ``Topology``, ``AllReducePhases``, the
  defaults (``DEFAULT_*``), ``Dimension`` and ``Network``.
* :mod:`~themis_opt.instance.tasks`: ``Kind``, ``COLLECTIVE_KINDS``, ``After``,
  ``Collective``, ``Compute``, ``Task`` and ``ChunkClass``.
* :mod:`~themis_opt.instance.core`: ``Instance``: its cross-field and graph
  checks and its cached lookup tables (chunks, orders, active dimensions).

``Algorithm`` and ``Op`` are re-exported from :mod:`themis_opt.algorithms`.
"""

from __future__ import annotations

from themis_opt.algorithms import Algorithm, Op
from themis_opt.instance.checks import (
    MAX_ACTIVE_CHUNKS,
    MAX_BANDWIDTH_GBPS,
    MAX_COLLECTIVES,
    MAX_DIMENSION_SIZE,
    MAX_DIMENSIONS,
    MAX_FLATTENED_NPUS,
    MAX_NPUS,
    MAX_PHASES,
    MAX_SIZE_BYTES,
    MAX_STAGES,
    MAX_TIME_NS,
    MIN_BANDWIDTH_GBPS,
    check_enum,
    check_int,
    check_name,
    check_number,
)
from themis_opt.instance.core import Instance
from themis_opt.instance.network import (
    DEFAULT_ALGORITHM,
    DEFAULT_ALL_TO_ALL_ALGORITHM,
    DEFAULT_ENDPOINT_DELAY_NS,
    AllReducePhases,
    Dimension,
    Network,
    Topology,
)
from themis_opt.instance.tasks import COLLECTIVE_KINDS, After, ChunkClass, Collective, Compute, Kind, Task

__all__ = [
    "COLLECTIVE_KINDS",
    "DEFAULT_ALGORITHM",
    "DEFAULT_ALL_TO_ALL_ALGORITHM",
    "DEFAULT_ENDPOINT_DELAY_NS",
    "MAX_ACTIVE_CHUNKS",
    "MAX_BANDWIDTH_GBPS",
    "MAX_COLLECTIVES",
    "MAX_DIMENSIONS",
    "MAX_DIMENSION_SIZE",
    "MAX_FLATTENED_NPUS",
    "MAX_NPUS",
    "MAX_PHASES",
    "MAX_SIZE_BYTES",
    "MAX_STAGES",
    "MAX_TIME_NS",
    "MIN_BANDWIDTH_GBPS",
    "After",
    "Algorithm",
    "AllReducePhases",
    "ChunkClass",
    "Collective",
    "Compute",
    "Dimension",
    "Instance",
    "Kind",
    "Network",
    "Op",
    "Task",
    "Topology",
    "check_enum",
    "check_int",
    "check_name",
    "check_number",
]
