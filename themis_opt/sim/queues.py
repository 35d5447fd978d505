"""The intra-dimension queue policies: which waiting phase a free dimension serves next.

A policy is one :class:`QueuePolicy` in :data:`QUEUE_POLICIES` (its name, one line of docs, its
heap key or ASTRA-sim's smallest-chunk-first rule, and its case in the compiled core) and, if the
compiled core runs it, that case in ``_simcore/loop.c``. The Python engine, the compiled core's
binding, the command line's ``--intra`` and the result files read the registry; nothing else
names a policy. :mod:`themis_opt.sim.engine` states the rules in full.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from themis_opt.errors import InputError
from themis_opt.instance import Op

SCF_AS_FIFO = frozenset({Op.ALL_TO_ALL, Op.ALL_REDUCE, Op.SEND})
"""The phases smallest-chunk-first queues as fifo does (behind those of its collective's priority or
higher), as ASTRA-sim queues an all-to-all's and an all-reduce's; the Python engine and the
compiled core's rule bits read it.
"""

HeapKey = Callable[[int, float, float, float], tuple[float, float]]
"""A heap policy's key of a waiting phase, least first (ties by arrival), from the phase's
collective's priority, the durations of its chunk's later phases, its collective's tail in the
task graph and its size ``max(bytes_in, bytes_out)``.
"""


class Intra(StrEnum):
    """The built-in intra-dimension policies (:data:`QUEUE_POLICIES` holds their rules).

    ``fifo`` and ``scf`` are ASTRA-sim's; ``tail`` (the longest tail first) is this project's,
    for the searches.
    """

    FIFO = "fifo"
    SCF = "scf"
    TAIL = "tail"


@dataclass(frozen=True)
class QueuePolicy:
    """One intra-dimension policy.

    Parameters
    ----------
    name
        What users type (``--intra``, ``themis-NAME``).
    summary
        One line for the docs and ``--help``.
    key
        A heap policy's key (:data:`HeapKey`); ``None`` for ASTRA-sim's smallest-chunk-first
        insertion rule (:class:`~themis_opt.sim.engine.ScfQueue`), the one sequence rule.
    c_code
        Its case in the compiled core (``_simcore/queues.h``'s ``enum``), ``None`` where only the Python
        engine runs it.
    reads_tails
        Whether its key reads the phases' tails (the chunk's later durations and the collective's
        tail), which the simulator then works out first.
    astra
        Whether ASTRA-sim has it (the fidelity tests compare those).
    """

    name: str
    summary: str
    key: HeapKey | None
    c_code: int | None
    reads_tails: bool = False
    astra: bool = False


def _fifo_key(priority: int, later: float, tail: float, size: float) -> tuple[float, float]:
    return -priority, 0.0


def _tail_key(priority: int, later: float, tail: float, size: float) -> tuple[float, float]:
    return 0, -(later + tail)


#: Every queue policy by name: the built-in ones (:class:`Intra`), and any a caller adds.
QUEUE_POLICIES: dict[str, QueuePolicy] = {
    p.name: p
    for p in (
        QueuePolicy("fifo", "priority first, then arrival (ASTRA-sim's)", _fifo_key, 0, astra=True),
        QueuePolicy("scf", "smallest chunk first (ASTRA-sim's)", None, 1, astra=True),
        QueuePolicy(
            "tail", "the longest tail first (this project's, for the searches)", _tail_key, 2, reads_tails=True
        ),
    )
}
assert {p.value for p in Intra} <= set(QUEUE_POLICIES)


def queue_policy(name: str) -> QueuePolicy:
    """The policy called ``name``.

    Raises
    ------
    InputError
        If no policy has that name.
    """
    found = QUEUE_POLICIES.get(name) if isinstance(name, str) else None
    if found is None:
        raise InputError("intra", f"must be {policy_names()}, got {name!r}")
    return found


def policy_names(joiner: str = ", ") -> str:
    """The policies' names, joined (for messages)."""
    return joiner.join(QUEUE_POLICIES)
