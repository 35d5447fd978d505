"""Random runs: instances and training layouts no test wrote, solved by every method and checked.

    python -m bench.random_runs                                   # 100 instances, 40 layouts, seed 0
    python -m bench.random_runs --instances 300 --layouts 0 --seed 1000 --time-limit 1

*Instances* draw 1 to 4 dimensions (2 to 8 NPUs, every topology, 25 to 400 GB/s, message
overheads) and the network's options (congestion-unaware with several active chunks, all-reduce
phase splits, phase delays, integer messages, reduction rates, endpoint delays), then 1 to 20
tasks: collectives of every kind on all or some dimensions, 1 to 16 chunks, sizes that do not
divide, issue times, priorities, computations, dependencies with lags. *Layouts* draw a network
(2 to 4 dimensions, 16 to 1,024 NPUs, in a file with a placeholder task, as a user's) and run
``themis-opt workload`` on a random LLM with random tp, cp (all-gather or ring attention), ep, pp,
microbatches, virtual stages, FSDP or DDP, FSDP's gathers, sequence parallelism and 1 to 8 chunks.

A problem is: a method that raises, returns after more than 1.2 x ``--time-limit`` + 0.5 s, or
returns a schedule the validator rejects or a bound above its makespan; the compiled core and the
Python engine disagreeing on an instance's baseline (fifo and scf); a program
(:func:`~themis_opt.programs.program_of`) that its checker rejects, as ASTRA-sim's folder or (where
MSCCL takes it; of several collectives the first it may take, alone) as MSCCL-IR XML read back, or
whose time is more than 0.2% off the makespan (or 1 ns a message an NPU sends, where that is more:
2.x truncates each message to whole ns) where the docs do not say why (all-to-alls by ``direct`` on
a ring or switch pay each message's latency); a layout ``workload`` refuses with anything but one
line and exit status 2. Each run draws from ``random.Random(seed + i)``; one line per problem, a
summary, exit status 1 if there was any.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from themis_opt.cli import main as cli
from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance, save_instance
from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Network
from themis_opt.policies import baseline_orders
from themis_opt.programs import OpKind, Program, check_program, program_of
from themis_opt.programs.msccl import COLL, as_msccl, read_msccl, write_msccl
from themis_opt.result import Result
from themis_opt.sim import simulate
from themis_opt.solving import solve
from themis_opt.validator import validate

METHODS = ("baseline", "themis", "balanced", "cpsat")
KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
LLMS = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt3-175b", "llama3-405b")
PROGRAM_PHASES = 400  # programs are checked on instances of at most this many phases (a few seconds each)


def random_instance(rng: random.Random, name: str) -> Instance:
    """One instance over the model's features (``InputError`` where the draw is not a valid one)."""
    dims = []
    for _ in range(rng.choice((1, 2, 2, 3, 3, 4))):
        size = rng.choice((2, 3, 4, 4, 8))
        topology = rng.choice(("ring", "fully_connected", "switch") if size != 3 else ("ring", "fully_connected"))
        overhead = {"message_overhead_ns": float(rng.choice((0, 50, 500)))} if rng.random() < 0.3 else {}
        bandwidth = float(rng.choice((25, 50, 100, 200, 400)))
        dims.append(Dimension(size, topology, bandwidth, float(rng.randrange(0, 1001, 100)), **overhead))
    options: dict[str, object] = {}
    if rng.random() < 0.2:
        options["congestion_unaware"] = True
        if rng.random() < 0.5:
            options["active_chunks"] = rng.choice((2, 3))
    if rng.random() < 0.3:
        options["all_reduce_phases"] = rng.choice(("split", "local_bw_aware", "per_dimension"))
    if rng.random() < 0.2:
        options["phase_delay_ns"] = float(rng.choice((10, 100)))
    if rng.random() < 0.2:
        options["integer_messages"] = True
    if rng.random() < 0.2:
        options["reduction_gbps"] = float(rng.choice((100, 1000)))
    if rng.random() < 0.2:
        options["endpoint_delay_ns"] = float(rng.choice((0, 10, 200)))
    network = Network(tuple(dims), **options)  # type: ignore[arg-type]
    tasks: list[Collective | Compute] = []
    for t in range(rng.choice((1, 2, 5, 8, 12, 20))):
        after: tuple[After, ...] = ()
        if t and rng.random() < 0.5:
            before = sorted(rng.sample(range(t), rng.randint(1, min(2, t))))
            after = tuple(After(f"t{j}", float(rng.choice((0, 0, 100)))) for j in before)
        if rng.random() < 0.25:
            duration, issue = float(rng.randrange(100, 50_000)), float(rng.choice((0, 0, 1000)))
            tasks.append(Compute(duration, id=f"t{t}", after=after, issue_ns=issue))
            continue
        on = None
        if len(dims) > 1 and rng.random() < 0.3:
            on = tuple(sorted(rng.sample(range(len(dims)), rng.randint(1, len(dims)))))
        size = rng.choice((1, 4, 16, 64)) * 2**20 + rng.choice((0, 0, 12345))
        tasks.append(
            Collective(
                rng.choice(KINDS),  # type: ignore[arg-type]
                size,
                rng.choice((1, 2, 3, 4, 8, 16)),
                issue_ns=float(rng.choice((0, 0, 5000))),
                dimensions=on,
                id=f"t{t}",
                after=after,
                priority=rng.choice((0, 0, 1)),
            )
        )
    return Instance(network, tuple(tasks), name)


def random_layout(rng: random.Random, work: Path, name: str) -> list[str]:
    """``themis-opt workload`` arguments for a random layout on a random network written to ``work``."""
    while True:
        sizes = [rng.choice((2, 4, 8, 8, 16)) for _ in range(rng.choice((2, 3, 4)))]
        npus = 1
        for size in sizes:
            npus *= size
        if 16 <= npus <= 1024:
            break
    dims = tuple(
        Dimension(
            size,
            rng.choice(("ring", "switch", "fully_connected") if size <= 8 else ("ring", "switch")),
            float(rng.choice((50, 100, 200, 400, 900))),
            float(rng.choice((100, 500, 1000))),
        )
        for size in sizes
    )
    network = work / f"{name}-network.json"
    save_instance(Instance(Network(dims), (Collective("all_reduce", 2**20, 1),), f"{name}-network"), network)
    model = rng.choice(LLMS)
    tp = rng.choice([d for d in _divisors(npus) if d <= 16])
    args = ["workload", model, "--network", str(network), "--out", str(work / f"{name}.json"), "--tp", str(tp)]
    rest = npus // tp
    if rng.random() < 0.5:
        pp = rng.choice([d for d in _divisors(rest) if d <= 16])
        args += ["--pp", str(pp)]
        rest //= pp
        if pp > 1:
            args += ["--microbatches", str(rng.choice((1, 2, 4, 8)))]
            if rng.random() < 0.3:
                args += ["--virtual-stages", "2"]
    if rng.random() < 0.3:
        cp = rng.choice(_divisors(rest)[:4])
        args += ["--cp", str(cp)]
        rest //= cp
        if rng.random() < 0.5:
            args += ["--cp-attention", "ring"]
    if model == "mixtral-8x7b" and rng.random() < 0.5:
        args += ["--ep", str(rng.choice([d for d in _divisors(rest) if d <= 8]))]
    args += ["--data-parallel", rng.choice(("ddp", "fsdp")), "--chunks", str(rng.choice((1, 2, 4, 8)))]
    if rng.random() < 0.3:
        args += ["--sp"]
    if rng.random() < 0.3:
        args += ["--fsdp-gathers", rng.choice(("once", "microbatch"))]
    return args


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_methods(instance: Instance, limit: float, label: str, programs: bool) -> list[str]:
    """Every method on ``instance``: the problems found (see the module)."""
    problems = []
    for method in METHODS:
        began = time.perf_counter()
        try:
            result = solve(instance, method=method, time_limit=limit, workers=1)
        except Exception as error:
            problems.append(f"{label} {method}: raised {type(error).__name__}: {error}")
            traceback.print_exc(file=sys.stderr)
            continue
        wall = time.perf_counter() - began
        if wall > 1.2 * limit + 0.5:
            problems.append(f"{label} {method}: {wall:.2f} s for a {limit:g} s limit")
        if result.schedule is None:
            continue
        errors = validate(instance, result.schedule)
        if errors:
            problems.append(f"{label} {method}: invalid schedule: {errors[0]}")
        for field in dataclasses.fields(result.bounds):
            value = getattr(result.bounds, field.name)
            if value is not None and value > result.makespan * (1 + 1e-9) + 1e-6:
                problems.append(f"{label} {method}: bound {field.name} {value:.3f} ns above the makespan")
        if programs and method != "balanced":
            problems += _check_program(instance, result, f"{label} {method}")
    return problems


def _check_program(instance: Instance, result: Result, label: str) -> list[str]:
    try:
        program = program_of(instance, result)
    except InputError:  # a documented limit of the writers, named in one line
        return []
    try:
        timing = check_program(program)
    except InputError as error:
        return [f"{label}: its program is rejected: {error}"]
    off = abs(timing.time_ns - result.makespan) / result.makespan
    direct = (
        not instance.network.congestion_unaware
        and any(c.kind.value == "all_to_all" for c in instance.collectives)
        and any(
            d.topology.value != "fully_connected" and d.all_to_all_algorithm.value == "direct"
            for d in instance.network.dimensions
        )
    )
    # 2.x truncates each message to whole ns: about 1 ns a message on the longest path (docs: Programs)
    sends = np.bincount(program.rank[program.kind == OpKind.SEND], minlength=program.npus).max(initial=0)
    if off > max(0.002, sends / result.makespan) and not direct:
        return [f"{label}: its program takes {timing.time_ns:.1f} ns against {result.makespan:.1f} ns"]
    return _check_msccl(program, label)


def _check_msccl(program: Program, label: str) -> list[str]:
    """The program as MSCCL-IR XML, where MSCCL takes it, read back and proved as the executor runs it:
    of several collectives, the first all-reduce, reduce-scatter or all-gather alone.
    """
    several = len(program.collectives) > 1
    first = next((c for c, coll in enumerate(program.collectives) if coll.kind in COLL), None)
    with tempfile.TemporaryDirectory() as folder:
        try:
            # a collective over part of the network: its communicator's
            ordered = as_msccl(program, first if several else None)
            write_msccl(ordered, Path(folder) / "m", time_ns=check_program(ordered).time_ns)
        except InputError:  # not one collective MSCCL runs, or over an executor's limit: named in one line
            return []
        try:
            check_program(read_msccl(Path(folder) / "m"))
        except InputError as error:
            return [f"{label}: its MSCCL program is rejected: {error}"]
    return []


def check_engines(instance: Instance, label: str) -> list[str]:
    """The compiled core and the Python engine on the baseline's orders, fifo and scf."""
    problems = []
    for intra in ("fifo", "scf"):
        core = simulate(instance, baseline_orders(instance), intra, engine="core")
        python = simulate(instance, baseline_orders(instance), intra, engine="python")
        if abs(core.makespan - python.makespan) > 1e-6 * max(1.0, core.makespan):
            problems.append(f"{label}: the core {core.makespan} ns, the Python engine {python.makespan} ns ({intra})")
    return problems


def run_workload(args: list[str]) -> tuple[int, str]:
    """``themis-opt`` in this process: its exit status and standard error."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli(args)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return code, err.getvalue().strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=100, help="random instances (default 100)")
    parser.add_argument("--layouts", type=int, default=40, help="random training layouts (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="the first draw's seed (default 0)")
    parser.add_argument("--time-limit", type=float, default=2.0, help="seconds per method (default 2)")
    args = parser.parse_args(argv)
    problems: list[str] = []
    counts = {"instances": 0, "invalid draws": 0, "layouts": 0, "refused layouts": 0}
    for i in range(args.instances):
        seed = args.seed + i
        try:
            instance = random_instance(random.Random(seed), f"random-{seed}")
        except InputError:
            counts["invalid draws"] += 1
            continue
        counts["instances"] += 1
        found = check_methods(instance, args.time_limit, f"instance {seed}", instance.num_phases <= PROGRAM_PHASES)
        problems += found + check_engines(instance, f"instance {seed}")
        print(f"instance {seed}: {instance.num_phases} phases, {len(found)} problems", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.layouts):
            seed = args.seed + i
            argv_ = random_layout(random.Random(seed), Path(folder), f"layout-{seed}")
            code, err = run_workload(argv_)
            if code != 0:
                counts["refused layouts"] += 1
                if code != 2 or len(err.splitlines()) != 1:
                    problems.append(f"layout {seed}: exit {code}, {len(err.splitlines())} lines: {' '.join(argv_)}")
                continue
            counts["layouts"] += 1
            instance = load_instance(argv_[argv_.index("--out") + 1])
            found = check_methods(instance, args.time_limit, f"layout {seed}", programs=False)
            problems += found
            print(f"layout {seed}: {len(instance.tasks)} tasks, {len(found)} problems", file=sys.stderr, flush=True)
    for line in problems:
        print(line)
    print(", ".join(f"{n} {what}" for what, n in counts.items()) + f": {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
