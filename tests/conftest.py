"""Shared fixtures: the instances under tests/data and the schedules of every heuristic."""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from themis_opt.cost import chunk_phases
from themis_opt.formats.native import load_instance
from themis_opt.instance import Collective, Compute, Dimension, Instance, Network
from themis_opt.policies import baseline_orders, themis_orders
from themis_opt.schedule import Schedule
from themis_opt.sim import simulate

# The suite draws the same examples on every run, so that a red run can be run again;
# HYPOTHESIS_PROFILE=explore draws new ones.
settings.register_profile("repeat", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeat"))

ROOT = Path(__file__).resolve().parent.parent  # the project
DATA = Path(__file__).parent / "data"
NAMES = ("worked", "three_dim", "mixed", "tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag", "flat_2x")
TINY = ("tiny_rs", "tiny_ar", "tiny_3d", "tiny_ag", "worked")


def load(name: str) -> Instance:
    return load_instance(DATA / f"{name}.json")


@pytest.fixture
def worked() -> Instance:
    return load("worked")


@pytest.fixture
def two_stages() -> Instance:
    """Two pipeline stages (NPUs 0 and 2 of a ring 2 x switch 2) linked by sends; every method's
    makespan is 90165 ns (worked out by hand in tests/sim/test_engine.py).
    """
    return load("two_stages")


def pipelined() -> Instance:
    """Two pipeline stages (NPUs 0 and 8 of a ring 4 x ring 2 x switch 2) passing activations and
    gradients by sends, each all-reducing over its own ring 4 x ring 2, where the orders matter.
    """
    from themis_opt.instance import After

    network = Network(
        (Dimension(4, "ring", 100.0, 500.0), Dimension(2, "ring", 25.0, 500.0), Dimension(2, "switch", 50.0, 1000.0))
    )
    tasks = (
        Compute(1000.0, id="f0"),
        Collective("send", 2**20, 1, group=(0, 8), id="s0", after=(After("f0"),)),
        Collective("all_reduce", 2**22, 4, dimensions=(0, 1), id="ar0a", after=(After("f0"),)),
        Compute(2000.0, id="f1", stage=1, after=(After("s0"),)),
        Collective("send", 2**20, 1, group=(8, 0), id="s1", stage=1, after=(After("f1"),)),
        Collective("all_reduce", 2**23, 4, dimensions=(0, 1), id="ar1", stage=1, after=(After("f1"),)),
        Compute(3000.0, id="b0", after=(After("s1"),)),
        Collective("all_reduce", 2**23, 4, dimensions=(0, 1), id="ar0", after=(After("b0"),)),
    )
    return Instance(network, tasks, "pipelined", stage_npus=(0, 8))


@pytest.fixture(params=NAMES)
def instance(request: pytest.FixtureRequest) -> Instance:
    return load(request.param)


@pytest.fixture(params=TINY)
def tiny(request: pytest.FixtureRequest) -> Instance:
    return load(request.param)


def heuristic_schedules(instance: Instance) -> dict[str, Schedule]:
    """Every policy x intra-dimension policy combination, simulated."""
    return {
        f"{name}-{intra}": simulate(instance, orders, intra)
        for name, orders in (("baseline", baseline_orders(instance)), ("themis", themis_orders(instance)))
        for intra in ("fifo", "scf")
    }


def make(dims: list[tuple[int, str, float]], kind: str = "all_reduce", size: int = 2**20, chunks: int = 1) -> Instance:
    """A one-collective instance from (size, topology, GB/s) triples, latency 500 ns."""
    network = Network(tuple(Dimension(n, t, b, 500.0) for n, t, b in dims))
    return Instance(network, (Collective(kind, size, chunks),))


def four_dims(size: int = 256 * 2**20, chunks: int = 16, issue_ns: float = 0.0) -> Instance:
    """One all-reduce on the benchmarks' 4D switch network: 4x4x4x16 NPUs at 400/200/100/50 GB/s."""
    dims = zip([4, 4, 4, 16], [400.0, 200.0, 100.0, 50.0])
    network = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in dims))
    return Instance(network, (Collective("all_reduce", size, chunks, issue_ns=issue_ns),))


def two_issues(several: bool = True) -> Instance:
    """An all-reduce of 32 MiB and (``several``) one of 64 MiB issued 200 us later, 2 chunks each,
    on 3 switch dimensions (4, 8 and 2 NPUs at 100/50/25 GB/s).
    """
    network = Network(tuple(Dimension(n, "switch", b, 500.0) for n, b in ((4, 100.0), (8, 50.0), (2, 25.0))))
    collectives = [Collective("all_reduce", 32 * 2**20, 2)]
    if several:
        collectives.append(Collective("all_reduce", 64 * 2**20, 2, issue_ns=200_000.0))
    return Instance(network, tuple(collectives))


def imported_by(code: str, module: str) -> bool:
    """Whether running ``code`` (Python statements) in a fresh interpreter imports ``module``; the
    code's own failure fails the test.
    """
    import subprocess
    import sys

    check = f"{code}\nimport sys\nsys.exit(3 if {module!r} in sys.modules else 0)\n"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 3), done.stderr
    return done.returncode == 3


def brute_force(instance: Instance) -> float:
    """Optimal makespan of a tiny task graph: every order assignment, every insertion sequence
    of phases and compute tasks (every left-shifted schedule)."""
    tasks = instance.tasks
    index = instance.task_index
    coll_task = [t for t, task in enumerate(tasks) if isinstance(task, Collective)]
    comp_task = [t for t, task in enumerate(tasks) if isinstance(task, Compute)]
    ids = instance.chunk_ids
    best = math.inf
    for assignment in itertools.product(*(instance.orders[c] for c, _ in ids)):
        plans = [
            [(p.dim, p.duration) for p in chunk_phases(instance, c, instance.collectives[c].bytes_of(k), order)]
            for (c, k), order in zip(ids, assignment)
        ]
        chunks_of = {coll_task[c]: [i for i, (cc, _) in enumerate(ids) if cc == c] for c in range(len(coll_task))}

        def dfs(
            nxt: list[int],
            ready: list[float],
            free: dict[Any, float],
            cdone: dict[int, float],
            span: float,
            plans: list[list[tuple[int, float]]] = plans,
            chunks_of: dict[int, list[int]] = chunks_of,
        ) -> None:
            nonlocal best
            if span >= best:
                return
            ends: dict[int, float] = dict(cdone)
            for t, chunks in chunks_of.items():
                if all(nxt[i] == len(plans[i]) for i in chunks):
                    ends[t] = max(ready[i] for i in chunks)

            def released(t: int) -> float | None:
                at = tasks[t].issue_ns
                for dep in tasks[t].after:
                    p = index[dep.task]
                    if p not in ends:
                        return None
                    at = max(at, ends[p] + dep.lag_ns)
                return at

            progressed = False
            for i, plan in enumerate(plans):
                p = nxt[i]
                if p == len(plan):
                    continue
                at = ready[i]
                if p == 0:
                    rel = released(coll_task[ids[i][0]])
                    if rel is None:
                        continue
                    at = max(at, rel)
                progressed = True
                dim, duration = plan[p]
                end = max(at, free.get(dim, 0.0)) + duration
                saved = (ready[i], free.get(dim, 0.0))
                nxt[i], ready[i], free[dim] = p + 1, end, end
                dfs(nxt, ready, free, cdone, max(span, end))
                nxt[i], (ready[i], free[dim]) = p, saved
            for t in comp_task:
                if t in cdone:
                    continue
                rel = released(t)
                if rel is None:
                    continue
                progressed = True
                end = max(rel, free.get("cpu", 0.0)) + tasks[t].duration_ns  # type: ignore[union-attr]
                saved_cpu = free.get("cpu", 0.0)
                free["cpu"] = end
                cdone[t] = end
                dfs(nxt, ready, free, cdone, max(span, end))
                del cdone[t]
                free["cpu"] = saved_cpu
            if (
                not progressed
                and all(nxt[i] == len(plans[i]) for i in range(len(plans)))
                and len(cdone) == len(comp_task)
            ):
                best = span

        dfs([0] * len(plans), [0.0] * len(plans), {}, {}, 0.0)
    return best
