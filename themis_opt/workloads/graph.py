"""The one task-graph builder: tasks appended in the order the compute unit should prefer them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from themis_opt.errors import InputError
from themis_opt.instance import MAX_COLLECTIVES, After, Collective, Compute, Instance, Kind, Network, Task


def _after(waits: Sequence[After | str]) -> tuple[After, ...]:
    return tuple(w if isinstance(w, After) else After(w) for w in waits)


@dataclass
class TaskGraph:
    """A task graph being written (ASTRA-sim 1.0's workload loop and the LLM layouts write with it).

    Tasks are kept in the order they are added, which is the order the
    compute unit prefers among ready compute tasks.
    """

    tasks: list[Task] = field(default_factory=list)

    def _room(self) -> None:
        """Stop at the instance's task limit, before building more (a layout of too many tasks ran out of
        memory building them all before the limit was checked).
        """
        if len(self.tasks) >= MAX_COLLECTIVES:
            raise InputError("tasks", f"must hold at most {MAX_COLLECTIVES} tasks: this iteration makes more")

    def compute(self, task_id: str, duration_ns: float, after: Sequence[After | str] = (), *, stage: int = 0) -> str:
        """Add a compute task (on ``stage``'s compute unit); returns its id."""
        self._room()
        self.tasks.append(Compute(duration_ns, task_id, after=_after(after), stage=stage))
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
        stage: int = 0,
    ) -> str:
        """Add a collective (on ``stage``'s dimensions); returns its id. ``chunk_bytes``: every chunk's size
        but the last's, where it is not ``size_bytes // chunks``.
        """
        self._room()
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
                stage=stage,
            )
        )
        return task_id

    def send(
        self, task_id: str, size_bytes: int, src: int, dst: int, after: Sequence[After | str] = (), *, stage: int = 0
    ) -> str:
        """Add a send of ``size_bytes`` from NPU ``src`` (``stage``'s) to NPU ``dst``; returns its id."""
        self._room()
        self.tasks.append(
            Collective(Kind.SEND, size_bytes, 1, id=task_id, after=_after(after), group=(src, dst), stage=stage)
        )
        return task_id

    def instance(
        self,
        network: Network,
        name: str,
        metadata: tuple[tuple[str, str], ...] = (),
        stage_npus: tuple[int, ...] = (),
    ) -> Instance:
        """The instance of the tasks so far on ``network`` (``stage_npus``: with pipeline stages)."""
        return Instance(network, tuple(self.tasks), name, metadata, stage_npus)
