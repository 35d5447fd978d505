"""The instance: a network and its tasks, their cross-field and graph checks, and the lookup
tables (cached on first use) the rest of the library reads.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from themis_opt.errors import InputError
from themis_opt.instance.checks import (
    MAX_COLLECTIVES,
    MAX_PHASES,
    MAX_STAGES,
    MAX_TIME_NS,
    check_int,
    check_name,
    check_number,
)
from themis_opt.instance.network import AllReducePhases, Network
from themis_opt.instance.tasks import After, ChunkClass, Collective, Compute, Kind, Task


def topological(waits: Sequence[Sequence[int]]) -> Sequence[int]:
    """Positions of nodes, each after those it waits for (``waits``: positions); list order where
    every node waits only for nodes before it. Nodes on or behind a cycle are left out.
    """
    if all(max(before, default=-1) < t for t, before in enumerate(waits)):
        return range(len(waits))
    waiting = [len(before) for before in waits]
    users: list[list[int]] = [[] for _ in waits]
    for t, before in enumerate(waits):
        for p in before:
            users[p].append(t)
    ready = [t for t, n in enumerate(waiting) if not n]
    order = []
    while ready:
        t = ready.pop()
        order.append(t)
        for u in users[t]:
            waiting[u] -= 1
            if not waiting[u]:
                ready.append(u)
    return order


@dataclass(frozen=True)
class Instance:
    """A scheduling instance: a network and the tasks that share it.

    Parameters
    ----------
    network
        The network.
    tasks
        Collectives and compute tasks, in list order (which breaks ties: the
        compute unit starts the first listed ready task). Collective ``c`` is
        the c-th collective of the list, compute ``j`` the j-th compute task.
        Unnamed tasks get the ids ``c<index>`` and ``t<index>``.
    name
        A label for results and tables.
    metadata
        Free-form (key, value) strings, kept with the instance: where it came
        from, what an importer read (e.g. the method and intra policy an
        ASTRA-sim system file asks for).
    stage_npus
        With pipeline parallelism, per **stage** (a class of NPUs that run
        the same task graph), the NPU that stands for it: its lowest. Stage
        ``s``'s tasks (``stage = s``) see the network from NPU
        ``stage_npus[s]``: its groups include that NPU and its sends leave
        from it. Each stage has its own dimensions (one queue each) and its
        own compute unit; tasks of different stages share no resource and
        meet only through dependencies (a send's receiver lists it in
        ``after``). ``()``: one stage, NPU 0.
    """

    network: Network
    tasks: tuple[Task, ...]
    name: str = "instance"
    metadata: tuple[tuple[str, str], ...] = ()
    stage_npus: tuple[int, ...] = ()

    def __hash__(self) -> int:
        # computed once: instances key the load programs' caches, and a hash visits every dependency
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.network, self.tasks, self.name, self.metadata, self.stage_npus))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict[str, Any]:
        # a string's hash differs between processes: the kept one stays in this process
        return {key: value for key, value in self.__dict__.items() if key != "_hash"}

    def __post_init__(self) -> None:
        check_name("name", self.name)
        if not isinstance(self.metadata, (tuple, list)) or not all(
            isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
            for entry in self.metadata
        ):
            raise InputError("metadata", f"must be (key, value) string pairs, got {self.metadata!r}")
        object.__setattr__(self, "metadata", tuple(self.metadata))
        if not isinstance(self.network, Network):
            raise InputError("network", f"must be a Network, got {self.network!r}")
        if not isinstance(self.tasks, (tuple, list)):
            raise InputError("tasks", f"must be a list of tasks, got {self.tasks!r}")
        if len(self.tasks) > MAX_COLLECTIVES:
            raise InputError("tasks", f"must hold at most {MAX_COLLECTIVES} tasks, got {len(self.tasks)}")
        named: list[Task] = []
        counts = {Collective: 0, Compute: 0}
        for index, task in enumerate(self.tasks):
            if not isinstance(task, (Collective, Compute)):
                raise InputError(f"tasks[{index}]", f"must be a Collective or a Compute, got {task!r}")
            if not task.id:
                prefix = "c" if isinstance(task, Collective) else "t"
                task = dataclasses.replace(task, id=f"{prefix}{counts[type(task)]}")
            counts[type(task)] += 1
            named.append(task)
        object.__setattr__(self, "tasks", tuple(named))
        if not self.collectives:
            raise InputError("tasks", "must hold at least one collective")
        self._check_graph()
        self._check_stages()
        num_dims = self.network.num_dims
        dims = self.network.dimensions
        for c, coll in enumerate(self.collectives):
            where = self.where(coll)
            if coll.group:
                npus = self.network.num_npus
                if max(coll.group) >= npus:
                    raise InputError(f"{where}.group", f"names NPU {max(coll.group)}, but the network has {npus}")
                if len(coll.group) == npus and coll.kind is not Kind.SEND:
                    raise InputError(f"{where}.group", "is every NPU: give no group (the network's own plan)")
                own = self.stage_npu(coll.stage)
                if coll.kind is Kind.SEND and coll.group[0] != own:
                    raise InputError(
                        f"{where}.group",
                        f"a send of stage {coll.stage} leaves from its NPU {own}, not NPU {coll.group[0]}",
                    )
                if self.stage_npus and own not in coll.group:
                    raise InputError(f"{where}.group", f"must include NPU {own}, which stands for stage {coll.stage}")
            for pos, dim in enumerate(coll.dimensions or ()):
                if dim >= num_dims:
                    raise InputError(
                        f"{where}.dimensions[{pos}]",
                        f"must be < {num_dims} (the network's dimensions), got {dim}",
                    )
            if not self.active_dims[c]:
                if self.network.flattened(coll.kind):
                    raise InputError(
                        f"{where}.dimensions",
                        f"must include dimension 0: a {coll.kind.value} runs flattened over every NPU there",
                    )
                raise InputError(f"{where}.dimensions", "must include a dimension of size >= 2")
            if coll.kind is Kind.ALL_TO_ALL:
                for d in self.active_dims[c]:
                    algorithm = dims[d].all_to_all_algorithm
                    if not algorithm.spec.all_to_all:
                        raise InputError(
                            f"{where}.dimensions",
                            f"an all-to-all cannot run on dimension {d} ({dims[d].name}): "
                            f"its all_to_all_algorithm is {algorithm.value}",
                        )
        if self.num_phases > MAX_PHASES:
            raise InputError(
                "tasks",
                f"hold {self.num_phases} chunk phases in all, more than the {MAX_PHASES} themis_opt schedules "
                "(use fewer chunks)",
            )

    def _check_stages(self) -> None:
        if not isinstance(self.stage_npus, (tuple, list)):
            raise InputError("stage_npus", f"must be a list of NPUs, got {self.stage_npus!r}")
        npus = tuple(self.stage_npus)
        object.__setattr__(self, "stage_npus", npus)
        if len(npus) > MAX_STAGES:
            raise InputError("stage_npus", f"must name at most {MAX_STAGES} stages, got {len(npus)}")
        for k, npu in enumerate(npus):
            check_int(f"stage_npus[{k}]", npu, 0, self.network.num_npus - 1)
        if len(set(npus)) != len(npus):
            raise InputError("stage_npus", f"names an NPU twice: {list(npus)}")
        for i, task in enumerate(self.tasks):
            if task.stage >= self.num_stages:
                raise InputError(
                    f"tasks[{i}] ({task.id}).stage",
                    f"is {task.stage}, but stage_npus names {self.num_stages} stage(s)",
                )

    @property
    def num_stages(self) -> int:
        """How many pipeline stages (NPU classes) the instance has: 1 without ``stage_npus``."""
        return max(1, len(self.stage_npus))

    def stage_npu(self, stage: int) -> int:
        """The NPU that stands for ``stage`` (NPU 0 without ``stage_npus``)."""
        return self.stage_npus[stage] if self.stage_npus else 0

    @property
    def num_lanes(self) -> int:
        """Resources a phase may run on: every stage's dimensions, ``stage * num_dims + dim``."""
        return self.num_stages * self.network.num_dims

    def lane(self, collective: int, dim: int) -> int:
        """The resource a phase of ``collective`` on dimension ``dim`` runs on: its stage's dimension
        (``stage * num_dims + dim``; on one stage, ``dim``).
        """
        return self.collectives[collective].stage * self.network.num_dims + dim

    @cached_property
    def has_sends(self) -> bool:
        """Whether a collective is a point-to-point send."""
        return any(coll.kind is Kind.SEND for coll in self.collectives)

    def stage_part(self, stage: int, issues: tuple[float, ...] | None = None) -> Instance | None:
        """Stage ``stage``'s tasks alone, as a one-stage instance (``None`` if it has no collective):
        dependencies on other stages dropped, each task issued no earlier than ``issues[t]`` (per task
        of this instance, e.g. a lower bound on its release) where given. Its schedules are the
        restrictions of this instance's, so a lower bound of it holds here.
        """
        positions = self.stage_tasks[stage]
        mine = {self.tasks[t].id for t in positions}
        tasks: list[Task] = []
        for t in positions:
            task = self.tasks[t]
            issue = task.issue_ns if issues is None else max(task.issue_ns, issues[t])
            after = tuple(d for d in task.after if d.task in mine)
            tasks.append(_restaged(task, after, issue))
        if not any(isinstance(t, Collective) for t in tasks):
            return None
        own = self.stage_npus[stage : stage + 1]
        return Instance(self.network, tuple(tasks), f"{self.name}/stage{stage}", self.metadata, own)

    @cached_property
    def stage_tasks(self) -> tuple[tuple[int, ...], ...]:
        """Per pipeline stage, the positions in ``tasks`` of its tasks, in order."""
        tasks: list[list[int]] = [[] for _ in range(self.num_stages)]
        for t, task in enumerate(self.tasks):
            tasks[task.stage].append(t)
        return tuple(map(tuple, tasks))

    def where(self, task: Task) -> str:
        """The field path of ``task`` in errors: ``tasks[i] (id)``."""
        return f"tasks[{self.task_index[task.id]}] ({task.id})"

    def _check_graph(self) -> None:
        if len(self.task_index) < len(self.tasks):  # an id stands twice: name its second place
            seen: dict[str, int] = {}
            for i, task in enumerate(self.tasks):
                if task.id in seen:
                    raise InputError(f"tasks[{i}].id", f"duplicate id {task.id!r} (also tasks[{seen[task.id]}])")
                seen[task.id] = i
        preds = self.predecessors
        for i, (task, before) in enumerate(zip(self.tasks, preds)):
            if -1 in before or i in before:
                k = next(k for k, p in enumerate(before) if p in (-1, i))
                what = "a task cannot wait for itself" if before[k] == i else f"unknown task id {task.after[k].task!r}"
                raise InputError(f"tasks[{i}] ({task.id}).after[{k}]", what)
        if len(self.topological_order) < len(self.tasks):  # the tasks of a cycle never come: name one
            cycle = _find_cycle(preds)
            names = " -> ".join(self.tasks[i].id for i in cycle)
            raise InputError(
                f"tasks[{cycle[0]}] ({self.tasks[cycle[0]].id}).after",
                f"dependency cycle (each waits for the next): {names}",
            )

    @cached_property
    def predecessors(self) -> tuple[tuple[int, ...], ...]:
        """Per task, the positions in ``tasks`` of the tasks it waits for, in ``after`` order: the
        dependency graph every part reads (made once, as construction checks it).
        """
        index = self.task_index
        return tuple(tuple([index.get(dep.task, -1) for dep in task.after]) for task in self.tasks)

    @cached_property
    def topological_order(self) -> Sequence[int]:
        """The task positions, each after those it waits for: list order where every task waits only
        for tasks listed before it, as generated graphs do.
        """
        return topological(self.predecessors)

    @cached_property
    def task_index(self) -> dict[str, int]:
        """Each task's position in ``tasks``, by id."""
        return {task.id: i for i, task in enumerate(self.tasks)}

    @cached_property
    def collectives(self) -> tuple[Collective, ...]:
        """The collectives, in list order: collective ``c`` is the c-th."""
        return tuple(t for t in self.tasks if isinstance(t, Collective))

    @cached_property
    def computes(self) -> tuple[Compute, ...]:
        """The compute tasks, in list order: compute ``j`` is the j-th."""
        return tuple(t for t in self.tasks if isinstance(t, Compute))

    @cached_property
    def is_task_graph(self) -> bool:
        """Whether it has compute tasks or dependencies (format version 2 proper)."""
        return bool(self.computes) or any(t.after for t in self.tasks)

    @cached_property
    def active_dims(self) -> tuple[tuple[int, ...], ...]:
        """Per collective, its dimensions of size >= 2 in ascending order.

        These are the dimensions its chunks visit; a chunk's order is a
        permutation of them. A collective of a flattened kind (a ``one_*``
        algorithm) visits dimension 0 alone, if it includes it: its one phase
        there spans every NPU. A collective in a group visits the dimension
        its ring runs on (:meth:`.Network.ring_dim`) alone.
        """
        network = self.network
        dims = network.dimensions
        active: list[tuple[int, ...]] = []
        for coll in self.collectives:
            named = coll.dimensions if coll.dimensions is not None else range(len(dims))
            if coll.group:
                active.append((network.ring_dim(coll.group),))
            elif network.flattened(coll.kind):
                active.append((0,) if 0 in named and network.num_npus >= 2 else ())
            else:
                active.append(tuple(d for d in sorted(named) if d < len(dims) and dims[d].size >= 2))
        return tuple(active)

    @cached_property
    def orders(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per collective, every order its chunks may take, lexicographically
        (only the ascending one for an all-to-all, which is never reordered).
        """
        return tuple(
            (dims,) if coll.kind is Kind.ALL_TO_ALL else tuple(itertools.permutations(dims))
            for coll, dims in zip(self.collectives, self.active_dims)
        )

    def order_count(self, collective: int) -> int:
        """How many orders a chunk of ``collective`` may take, without listing them
        (16! on 16 dimensions: look before enumerating :attr:`orders`).
        """
        if self.collectives[collective].kind is Kind.ALL_TO_ALL:
            return 1
        return math.factorial(len(self.active_dims[collective]))

    @cached_property
    def chunk_classes(self) -> tuple[ChunkClass, ...]:
        """Interchangeable chunks: per collective, the nominal chunks and,
        when its size differs, the last chunk.
        """
        classes = []
        for c, coll in enumerate(self.collectives):
            if coll.last_chunk_bytes == coll.chunk_bytes:
                classes.append(ChunkClass(c, coll.chunk_bytes, tuple(range(coll.chunks))))
            else:
                classes.append(ChunkClass(c, coll.chunk_bytes, tuple(range(coll.chunks - 1))))
                classes.append(ChunkClass(c, coll.last_chunk_bytes, (coll.chunks - 1,)))
        return tuple(classes)

    @cached_property
    def chunk_ids(self) -> tuple[tuple[int, int], ...]:
        """Every chunk as (collective, chunk), in index order."""
        return tuple((c, k) for c, coll in enumerate(self.collectives) for k in range(coll.chunks))

    @property
    def num_chunks(self) -> int:
        """Total number of chunks over all collectives."""
        return len(self.chunk_ids)

    @cached_property
    def origin_ns(self) -> float:
        """The earliest issue time of any task: where every schedule's span starts."""
        return min(task.issue_ns for task in self.tasks)

    @cached_property
    def num_phases(self) -> int:
        """Total number of phases over all chunks."""
        per_dimension = self.network.all_reduce_phases is AllReducePhases.PER_DIMENSION
        return sum(
            coll.chunks
            * len(dims)
            * (2 if coll.kind is Kind.ALL_REDUCE and not per_dimension and not coll.group else 1)
            for coll, dims in zip(self.collectives, self.active_dims)
        )  # a group's collective (a send too) is one phase a chunk on its ring


def _restaged(task: Task, after: tuple[After, ...], issue_ns: float) -> Task:
    """``task`` on stage 0, waiting for ``after`` (some of its own dependencies) and issued at
    ``issue_ns``. A checked task stays valid with fewer dependencies and a later issue, so only the
    new time is checked (copying its fields costs a tenth of constructing it again: 100,000 tasks a
    split).
    """
    moved = object.__new__(type(task))
    moved.__dict__.update(task.__dict__)
    issue_ns = check_number("issue_ns", issue_ns, maximum=MAX_TIME_NS)
    moved.__dict__.update(stage=0, after=after, issue_ns=issue_ns)
    return moved


def _find_cycle(preds: Sequence[Sequence[int]]) -> list[int]:
    """A cycle of the graph whose node i waits for ``preds[i]``: nodes, each waiting
    for the next, ending where it starts; [] if there is none.
    """
    state = [0] * len(preds)  # 0 new, 1 on the stack, 2 done
    for root in range(len(preds)):
        if state[root]:
            continue
        stack = [(root, iter(preds[root]))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state[nxt] == 1:
                return [*path[path.index(nxt) :], nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(preds[nxt])))
                path.append(nxt)
    return []
