"""The one task-graph builder: tasks appended in the order the compute unit should prefer them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from themis_opt.instance import After, Collective, Compute, Instance, Kind, Network, Task


def _after(waits: Sequence[After | str]) -> tuple[After, ...]:
    return tuple(w if isinstance(w, After) else After(w) for w in waits)


@dataclass
class TaskGraph:
    """A task graph being written (ASTRA-sim 1.0's workload loop and the LLM layouts write with it).

    Tasks are kept in the order they are added, which is the order the
    compute unit prefers among ready compute tasks.
    """

    tasks: list[Task] = field(default_factory=list)

    def compute(self, task_id: str, duration_ns: float, after: Sequence[After | str] = ()) -> str:
        """Add a compute task; returns its id."""
        self.tasks.append(Compute(duration_ns, task_id, after=_after(after)))
        return task_id

    def collective(
        self,
        task_id: str,
        kind: Kind,
        size_bytes: int,
        chunks: int,
        dimensions: tuple[int, ...],
        after: Sequence[After | str] = (),
        *,
        priority: int = 0,
        chunk_bytes: int | None = None,
    ) -> str:
        """Add a collective; returns its id. ``chunk_bytes``: every chunk's size but the last's, where it is
        not ``size_bytes // chunks``.
        """
        self.tasks.append(
            Collective(
                kind,
                size_bytes,
                chunks,
                dimensions=dimensions,
                id=task_id,
                priority=priority,
                after=_after(after),
                chunk_bytes=chunk_bytes,  # type: ignore[arg-type]  # None: the instance's default cut
            )
        )
        return task_id

    def instance(self, network: Network, name: str, metadata: tuple[tuple[str, str], ...] = ()) -> Instance:
        """The instance of the tasks so far on ``network``."""
        return Instance(network, tuple(self.tasks), name, metadata)
