"""Our schedules run by ASTRA-sim 2.x: every method's program exported, checked and run as 2.x's
custom collectives, beside 2.x's own (native) baseline on the same network.

    python -m bench.figures.astra_programs --astra PATH/TO/astra-sim [--binary BIN] [--work DIR]
        [--suites quick,astra,paper] [--methods baseline,themis,balanced,cpsat] [--max-npus 1024]
        [--max-nodes 2500000] [--exclude REGEX] [--random N] [--all-to-all N] [--flattened N] [--carved N]
        [--one-dim N] [--seed S]
        [--instances FILE,...] [--json ROWS.json]
    python -m bench.figures.astra_programs --summarise ROWS.json [--time-limit 10] [--iterations NAME,...]

``--astra`` is an ASTRA-sim 2.x checkout built as the docs' ASTRA-sim page says (its binary is
``build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware`` unless ``--binary``).
For every single-collective instance of the suites with at most ``--max-npus`` NPUs, each method
solves it (in this process, ``--time-limit`` seconds for cpsat, one worker), its program is built,
checked and written (``export-program``'s library calls; a program of over ``--max-nodes`` nodes is
built and checked, then left out: 2.x would take minutes and gigabytes) to ``--work``, and 2.x runs the folder from
inside it. A row: the schedule's makespan, ``program_time_ns``, 2.x's largest ``sys[i] finished``
(all NPUs must finish), and the wall times. The native baseline is the instance's ``export-astra
--version 2`` folder, run as it is.

``--random N`` adds N small instances kept aside, drawn with ``--seed``: one to three dimensions
of 2 to 8 NPUs, each a ring, switch or fully-connected one running ring, direct or
halving-doubling, an all-reduce, reduce-scatter or all-gather of 1 to 64 MiB (sometimes bytes that
do not share out evenly) in 1 to 8 chunks. ``--all-to-all N`` adds N direct all-to-alls drawn the
same way (:func:`all_to_all_instances`; every fourth with an all-reduce beside it). ``--flattened
N`` adds N flattened collectives (:func:`flattened_instances`), ``--carved N`` N collectives on
carved dimensions (:func:`carved_instances`), ``--one-dim N`` N on one dimension
(:func:`one_dim_instances`: what 2.x's congestion-aware binary, ``--binary``, takes).

``--summarise`` prints, from the rows a run wrote with ``--json``, one line per instance: 2.x's
native baseline and each exported method's time as 2.x reports it, the speedups 2.x measures
over its own baseline, and whether every program finished at ``program_time_ns``.

``--iterations`` names training iterations of the ``clusters`` suite (task graphs: compute and
collectives), ``--instances`` instance files (pipeline stages among them); each is first made
expressible by 2.x as ``export-astra --fit`` makes it (compute rounded to whole microseconds, one
collective at a time per NPU), then solved, exported and run the same way, the native baseline
being the fitted instance's ``export-astra --version 2``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from themis_opt.errors import InputError
from themis_opt.formats.astra import export_astra
from themis_opt.formats.astra.export import fit_astra_2
from themis_opt.formats.native import load_instance
from themis_opt.instance import Algorithm, Collective, Dimension, Instance, Kind, Network, Topology
from themis_opt.programs import check_program, check_programmable, program_of
from themis_opt.programs.astra import write_program
from themis_opt.solving import solve
from themis_opt.suites import suite_folder

FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def run_folder(binary: Path, folder: Path, args: list[str]) -> tuple[dict[int, int], float]:
    """2.x run from inside ``folder``: each finished NPU's time, ns, and the wall seconds."""
    began = time.perf_counter()
    run = subprocess.run([str(binary), *args], cwd=folder, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    return {int(n): int(t) for n, t in FINISHED.findall(run.stdout + run.stderr)}, seconds


def native(binary: Path, astra: Path, name: str, instance: Instance, work: Path) -> tuple[int | None, float]:
    """2.x's own baseline of the instance (``export-astra --version 2``): its time and wall seconds."""
    folder = work / f"{name}-native"
    try:
        export_astra(instance, 2, folder)
    except InputError as error:
        print(f"  native: not exported ({error})", file=sys.stderr)
        return None, 0.0
    memory = astra / "examples/remote_memory/analytical/no_memory_expansion.json"
    args = [
        "--workload-configuration=workload",
        "--system-configuration=system.json",
        "--network-configuration=network.yml",
        f"--remote-memory-configuration={memory}",
    ]
    if (folder / "comm_groups.json").is_file():  # communicator groups: the export names them there
        args.append("--comm-group-configuration=comm_groups.json")
    times, seconds = run_folder(binary, folder, args)
    shutil.rmtree(folder, ignore_errors=True)
    if len(times) != instance.network.num_npus:
        return None, seconds
    return max(times.values()), seconds


def random_instances(count: int, seed: int) -> list[tuple[str, str, Instance]]:
    """``count`` small instances of the kinds, algorithms and networks the suites do not hold."""
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        dims = []
        for _ in range(rng.randint(1, 3)):
            algorithm = rng.choice([Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING])
            size = rng.choice([2, 4, 8] if algorithm is Algorithm.HALVING_DOUBLING else [2, 3, 4, 5, 8])
            topology = rng.choice(list(Topology))
            dims.append(
                Dimension(
                    size,
                    topology,
                    rng.choice([25.0, 50.0, 100.0, 200.0]),
                    rng.choice([100.0, 500.0, 700.0]),
                    algorithm=algorithm,
                )
            )
        kind = rng.choice([Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER])
        size = rng.choice([1 << 20, 1 << 24, 1 << 26, 3 * 5 * 7 * (1 << 16) + 1])
        coll = Collective(kind, size, rng.randint(1, 8))
        cases.append(("random", f"random-{seed}-{n:02d}", Instance(Network(tuple(dims)), (coll,), name=f"random-{n}")))
    return cases


def all_to_all_instances(count: int, seed: int) -> list[tuple[str, str, Instance]]:
    """``count`` small all-to-alls kept aside, drawn with ``seed``: one to three dimensions of 2 to
    8 NPUs (rings, switches, fully-connected) running direct all-to-alls, 1 to 64 MiB (sometimes
    bytes that do not share out evenly) in 1 to 8 chunks; every fourth with an all-reduce issued
    while it runs.
    """
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        dims = []
        for _ in range(rng.randint(1, 3)):
            topology = rng.choice(list(Topology))
            bandwidth, latency = rng.choice([25.0, 50.0, 100.0, 200.0]), rng.choice([100.0, 500.0, 700.0])
            algorithm = Algorithm.RING if topology is Topology.RING else Algorithm.DIRECT  # any size
            dims.append(
                Dimension(
                    rng.choice([2, 3, 4, 5, 8]),
                    topology,
                    bandwidth,
                    latency,
                    algorithm=algorithm,
                    all_to_all_algorithm=Algorithm.DIRECT,
                )
            )
        size = rng.choice([1 << 20, 1 << 24, 1 << 26, 3 * 5 * 7 * (1 << 16) + 1])
        colls = [Collective(Kind.ALL_TO_ALL, size, rng.randint(1, 8))]
        if n % 4 == 3:
            colls.append(Collective(Kind.ALL_REDUCE, 1 << 22, 2, issue_ns=2_000.0))
        instance = Instance(Network(tuple(dims)), tuple(colls), name=f"all-to-all-{n}")
        cases.append(("random", f"all-to-all-{seed}-{n:02d}", instance))
    return cases


def flattened_instances(count: int, seed: int) -> list[tuple[str, str, Instance]]:
    """``count`` small flattened collectives kept aside, drawn with ``seed``: one to three dimensions
    of 2 to 8 NPUs (rings, switches, fully-connected), ``one_ring``, ``one_direct`` or
    ``one_halving_doubling`` (on 2^k NPUs) on every NPU, an all-reduce, reduce-scatter or all-gather
    of 1 to 64 MiB in 1 to 8 chunks, on networks as 2.x's are imported (a message charged on the
    innermost dimension its NPUs differ in, no congestion).
    """
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        algorithm = rng.choice([Algorithm.ONE_RING, Algorithm.ONE_DIRECT, Algorithm.ONE_HALVING_DOUBLING])
        sizes = [2, 4, 8] if algorithm is Algorithm.ONE_HALVING_DOUBLING else [2, 3, 4, 5, 8]
        dims = [
            Dimension(
                rng.choice(sizes),
                rng.choice(list(Topology)),
                rng.choice([25.0, 50.0, 100.0, 200.0]),
                rng.choice([100.0, 500.0, 700.0]),
                algorithm=algorithm if d == 0 else Algorithm.RING,
                all_to_all_algorithm=Algorithm.DIRECT if d == 0 else Algorithm.RING,
            )
            for d in range(rng.randint(1, 3))
        ]
        kind = rng.choice([Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER])
        coll = Collective(kind, rng.choice([1 << 20, 1 << 24, 1 << 26]), rng.randint(1, 8))
        network = Network(tuple(dims), congestion_unaware=True, innermost_charge=True)
        cases.append(("random", f"flattened-{seed}-{n:02d}", Instance(network, (coll,), name=f"flattened-{n}")))
    return cases


def one_dim_instances(count: int, seed: int) -> list[tuple[str, str, Instance]]:
    """``count`` collectives on one dimension, drawn with ``seed`` (what 2.x's congestion-aware
    backend takes at 518bd51): a ring, switch or fully-connected dimension of 2 to 16 NPUs running
    ring, direct or halving-doubling (2^k NPUs), an all-reduce, reduce-scatter, all-gather or (direct,
    off a ring) all-to-all of 1 to 64 MiB in 1 to 8 chunks.
    """
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        topology = rng.choice(list(Topology))
        algorithm = rng.choice([Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING])
        size = rng.choice([2, 4, 8, 16] if algorithm is Algorithm.HALVING_DOUBLING else [2, 3, 4, 5, 8, 16])
        bandwidth, latency = rng.choice([25.0, 50.0, 100.0, 200.0]), rng.choice([100.0, 500.0, 700.0])
        dim = Dimension(size, topology, bandwidth, latency, algorithm=algorithm, all_to_all_algorithm=Algorithm.DIRECT)
        kinds = [Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER]
        kind = rng.choice(kinds if topology is Topology.RING else [*kinds, Kind.ALL_TO_ALL])
        coll = Collective(kind, rng.choice([1 << 20, 1 << 24, 1 << 26]), rng.randint(1, 8))
        cases.append(("random", f"one-dim-{seed}-{n:02d}", Instance(Network((dim,)), (coll,), name=f"one-dim-{n}")))
    return cases


def carved_instances(count: int, seed: int) -> list[tuple[str, str, Instance]]:
    """``count`` small collectives kept aside on carved dimensions, drawn with ``seed``: one to three
    dimensions as :func:`random_instances` draws them, one of 4 to 16 NPUs carved in two (as a
    model-parallel group is: its first NPUs, then across them), an all-reduce, reduce-scatter or
    all-gather over some of the dimensions, at least one part among them.
    """
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        algorithm = rng.choice([Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING])
        carved = Dimension(
            rng.choice([4, 8, 16] if algorithm is Algorithm.HALVING_DOUBLING else [4, 6, 8, 12, 16]),
            rng.choice(list(Topology)),
            rng.choice([25.0, 50.0, 100.0, 200.0]),
            rng.choice([100.0, 500.0, 700.0]),
            algorithm=algorithm,
        )
        _, _, others = random_instances(1, rng.randrange(1 << 30))[0]
        dims = list(others.network.dimensions[: rng.randint(0, 2)])
        at = rng.randint(0, len(dims))
        dims.insert(at, carved)
        inner = rng.choice([k for k in range(2, carved.size) if carved.size % k == 0])
        if algorithm is Algorithm.HALVING_DOUBLING:
            inner = rng.choice([k for k in (2, 4, 8) if k < carved.size])
        network = Network(tuple(dims)).split(at, inner)
        chosen = {rng.choice((at, at + 1))} | {d for d in range(network.num_dims) if rng.random() < 0.5}
        kind = rng.choice([Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER])
        size = rng.choice([1 << 20, 1 << 24, 1 << 26, 3 * 5 * 7 * (1 << 16) + 1])
        coll = Collective(kind, size, rng.randint(1, 8), dimensions=tuple(sorted(chosen)))
        cases.append(("random", f"carved-{seed}-{n:02d}", Instance(network, (coll,), name=f"carved-{n}")))
    return cases


def estimated_nodes(instance: Instance) -> int:
    """About how many nodes a program of the instance has: every NPU's sends and receives of every phase."""
    total = 0
    for c, coll in enumerate(instance.collectives):
        per_chunk = 0
        for d in instance.active_dims[c]:
            algorithm = instance.network.dimensions[d].algorithm
            n = instance.network.num_npus if algorithm.flattened else instance.network.dimensions[d].size
            halving = algorithm in (Algorithm.HALVING_DOUBLING, Algorithm.ONE_HALVING_DOUBLING)
            steps = (n - 1).bit_length() if halving else n - 1
            per_chunk += 2 * 2 * steps  # a send and a receive a step, reduce-scatter and all-gather
        total += coll.chunks * per_chunk
    return total * instance.network.num_npus


def method_row(
    binary: Path, work: Path, suite: str, name: str, instance: Instance, method: str, time_limit: float, max_nodes: int
) -> dict[str, object]:
    """One method's program of the instance, exported, checked and run by 2.x: its row (printed too)."""
    began = time.perf_counter()
    result = solve(instance, method=method, time_limit=time_limit, workers=1)
    program = program_of(instance, result)
    timing = check_program(program)
    if program.num_ops > max_nodes:
        print(
            f"| {name} | {program.npus} | {result.label} | {result.makespan:.0f} | {timing.time_ns} | "
            f"not run: {program.num_ops} nodes | | | | | |",
            flush=True,
        )
        return {"instance": name, "suite": suite, "method": result.label, "nodes": program.num_ops, "astra_ns": None}
    folder = work / f"{name}-{method}"
    files = write_program(program, folder, time_ns=timing.time_ns, extra={"schedule_makespan_ns": result.makespan})
    ours = time.perf_counter() - began
    size = sum(f.stat().st_size for f in files) / 2**20
    args = [
        "--workload-configuration=workload",
        "--system-configuration=system.json",
        "--network-configuration=network.yml",
        "--remote-memory-configuration=memory.json",
    ]
    times, wall = run_folder(binary, folder, args)
    shutil.rmtree(folder, ignore_errors=True)
    astra = max(times.values()) if len(times) == program.npus else None
    assert result.makespan is not None
    change = (timing.time_ns - result.makespan) / result.makespan
    shown = astra if astra is not None else f"{len(times)} NPUs finished"
    print(
        f"| {name} | {program.npus} | {result.label} | {result.makespan:.0f} | {timing.time_ns} | {shown} | "
        f"{change:+.3%} | {program.num_ops} | {size:.1f} | {ours:.1f} | {wall:.1f} |",
        flush=True,
    )
    return {
        "instance": name,
        "suite": suite,
        "method": result.label,
        "npus": program.npus,
        "makespan_ns": result.makespan,
        "program_ns": timing.time_ns,
        "astra_ns": astra,
        "finished": len(times),
        "nodes": program.num_ops,
        "mib": round(size, 1),
        "ours_s": round(ours, 2),
        "astra_s": round(wall, 2),
    }


def summarise(path: Path) -> None:
    """The docs' table from a run's rows (see the module's docstring)."""
    rows = json.loads(path.read_text())
    methods = ["baseline", "themis", "balanced", "cpsat"]
    by: dict[str, dict[str, dict[str, object]]] = {}
    for row in rows:
        by.setdefault(str(row["instance"]), {})[str(row["method"])] = row
    print(
        "| instance | NPUs | 2.x native baseline | "
        + " | ".join(f"exported {m}" for m in methods)
        + " | 2.x speedup of themis, cpsat | every program's time exact |"
    )
    print("|---|---:|---:|" + "---:|" * len(methods) + "---|---|")
    for name, found in by.items():
        native = found.get("native baseline", {}).get("astra_ns")
        times = [found.get(m, {}).get("astra_ns") for m in methods]
        exact = all(found[m].get("astra_ns") == found[m].get("program_ns") for m in methods if m in found)
        speedups = ", ".join(
            f"{native / t:.3f}x" if isinstance(native, int) and isinstance(t, int) else "-"
            for t in (times[1], times[3])
        )
        npus = next((r.get("npus") for r in found.values() if r.get("npus")), "")
        shown = " | ".join(f"{t:,}" if isinstance(t, int) else "not run" for t in times)
        print(
            f"| {name} | {npus} | {f'{native:,}' if isinstance(native, int) else '-'} | {shown} | {speedups} | "
            f"{'yes' if exact else 'NO'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--astra", type=Path, default=None)
    parser.add_argument("--binary", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--suites", default="quick,astra,paper")
    parser.add_argument("--methods", default="baseline,themis,balanced,cpsat")
    parser.add_argument("--max-npus", type=int, default=1024)
    parser.add_argument("--max-nodes", type=int, default=2_500_000)
    parser.add_argument("--random", type=int, default=0)
    parser.add_argument("--all-to-all", type=int, default=0, help="random all-to-alls kept aside (default 0)")
    parser.add_argument("--flattened", type=int, default=0, help="random flattened collectives kept aside (default 0)")
    parser.add_argument("--carved", type=int, default=0, help="random collectives on carved dimensions (default 0)")
    parser.add_argument("--one-dim", type=int, default=0, help="random collectives on one dimension (default 0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exclude", default=None, help="leave out instances whose name matches this regex")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--iterations", default="", help="clusters-suite iterations to run too, by name")
    parser.add_argument("--instances", default="", help="instance files to run too, fitted as iterations are")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--summarise", type=Path, default=None, help="print the docs' table from these rows")
    args = parser.parse_args()
    if args.summarise is not None:
        summarise(args.summarise)
        return
    if args.astra is None:
        parser.error("--astra is needed to run ASTRA-sim")
    binary = args.binary or args.astra / "build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware"
    work = args.work or Path(tempfile.mkdtemp(prefix="programs-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    print(
        "| instance | NPUs | method | makespan (ns) | program (ns) | ASTRA-sim 2.x (ns) | program - makespan "
        "| nodes | MiB | ours (s) | 2.x (s) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cases: list[tuple[str, str, Instance]] = []
    for suite in filter(None, args.suites.split(",")):
        for path in sorted(suite_folder(suite).glob("*.json")):
            instance = load_instance(path)
            if args.exclude and re.search(args.exclude, path.stem):
                continue
            if len(instance.collectives) == 1 and instance.network.num_npus <= args.max_npus:
                cases.append((suite, path.stem, instance))
    cases += random_instances(args.random, args.seed)
    cases += all_to_all_instances(args.all_to_all, args.seed)
    cases += flattened_instances(args.flattened, args.seed)
    cases += carved_instances(args.carved, args.seed)
    cases += one_dim_instances(args.one_dim, args.seed)
    for name in filter(None, args.iterations.split(",")):
        fitted, _ = fit_astra_2(load_instance(suite_folder("clusters") / f"{name}.json"))
        cases.append(("clusters", name, fitted))
    for path in filter(None, args.instances.split(",")):
        fitted, _ = fit_astra_2(load_instance(path))
        cases.append(("files", Path(path).stem, fitted))
    for suite, name, instance in cases:
        try:
            check_programmable(instance)
        except InputError as error:
            print(f"{name}: skipped ({error})", file=sys.stderr)
            continue
        if estimated_nodes(instance) > args.max_nodes:
            print(f"{name}: skipped (about {estimated_nodes(instance):,} nodes, over --max-nodes)", file=sys.stderr)
            continue
        base_time, base_wall = native(binary, args.astra, name, instance, work)
        rows.append(
            {
                "instance": name,
                "suite": suite,
                "method": "native baseline",
                "astra_ns": base_time,
                "astra_s": round(base_wall, 2),
                "npus": instance.network.num_npus,
            }
        )
        print(
            f"| {name} | {instance.network.num_npus} | 2.x native baseline | | | {base_time} | | | | | "
            f"{base_wall:.1f} |",
            flush=True,
        )
        for method in args.methods.split(","):
            rows.append(method_row(binary, work, suite, name, instance, method, args.time_limit, args.max_nodes))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
