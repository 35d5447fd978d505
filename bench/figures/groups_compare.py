"""Communicator groups on ASTRA-sim 2.x's LLM traces: 2.x's flat ring against the hierarchical plans.

    python -m bench.figures.groups_compare --traces DIR [DIR ...] --networks NET.yml [NET.yml ...]
        --system SYSTEM.json [--time-limit 20] [--workers W] [--astra BINARY --memory MEMORY.json]
        [--only-aligned] [--write-configs DIR]

Each ``DIR`` holds symbolic_tensor_graph's traces (``workload.N.et``, one per NPU) and their group
file (``workload.json``). Each trace runs on every network of ``--networks`` with as many NPUs; the
system file's implementation lists are cut or extended (the last entry repeated) to the network's
dimensions. Every pair is imported twice, as ``themis-opt import-astra NET SYS --workload
DIR/workload --comm-groups DIR/workload.json --groups as-astra`` and ``--groups dimensions``, and
each instance solved as ``themis-opt solve --method all --time-limit T`` does (one budget of T s:
the bounds first, then baseline, themis-fifo, themis-scf, balanced and cpsat from the best of
them). ``as-astra``'s baseline is ASTRA-sim 2.x's own number (each group smaller than the network
one flat ring over its NPUs); ``dimensions`` runs a group that is exactly some whole dimensions as
a collective over them, which the methods order chunk by chunk.

Printed: a Markdown table (each cell the iteration in ms and its speedup over 2.x's flat ring;
cpsat's gap to its instance's best lower bound, ``*`` proven optimal), then the checks: every
schedule passes the validator, every lower bound of an instance is at most every makespan on it,
and (with ``--astra``, ASTRA-sim 2.x's analytical congestion-unaware binary) 2.x's largest ``sys[i]
finished`` equals the as-astra baseline. ``--only-aligned`` skips a trace on a network where some
group smaller than the network is not whole dimensions (both imports run it as the same ring).
``--write-configs DIR`` writes the networks and the system of the docs and exits: the 2.x check's
square ring x switch networks and system (``bench.figures.astra2_check``'s symbolic_tensor_graph
cases) and two 3D networks of 4 x 4 x 4 (:data:`NETWORKS`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.figures.astra2_check import run_binary
from themis_opt.formats.astra import import_astra
from themis_opt.instance import Instance
from themis_opt.result import Result
from themis_opt.solving import solve_all
from themis_opt.validator import validate

METHODS = ["baseline", "themis-fifo", "themis-scf", "balanced", "cpsat"]
HEURISTICS = METHODS[:-1]
# 64 NPUs as 4 x 4 x 4: a data-parallel group of 16 (STG's fastest-varying rank) spans d0 and d1
NETWORKS = {
    # the 3D network of the docs' ASTRA-sim 2.x examples
    "net_3d_ring_fc_switch.yml": "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 4, 4, 4 ]\n"
    "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 500.0, 500.0, 1000.0 ]\n",
    # a fast first dimension, 8x the bandwidth of the other two (a node's links against scale-out)
    "net_3d_fast_slow_slow.yml": "topology: [ Ring, Switch, Switch ]\nnpus_count: [ 4, 4, 4 ]\n"
    "bandwidth: [ 400.0, 50.0, 50.0 ]\nlatency: [ 500.0, 1000.0, 1000.0 ]\n",
}


@dataclass
class Case:
    """One trace on one network: both imports' results and what the checks found."""

    trace: str
    network: str
    groups: str  # the re-expressed groups' dimensions, with how many collectives each
    flat: list[Result]
    hier: list[Result]
    astra_ns: int | None
    notes: list[str]
    problems: list[str]


def network_sizes(path: Path) -> list[int]:
    """The NPUs per dimension of a 2.x network YAML."""
    import yaml

    return [int(n) for n in yaml.safe_load(path.read_text())["npus_count"]]


def system_for(system: Path, dims: int, work: Path) -> Path:
    """The system file with every implementation list cut or extended to ``dims`` entries."""
    data = json.loads(system.read_text())
    changed = False
    for key, value in data.items():
        if key.endswith("-implementation") and isinstance(value, list) and len(value) != dims:
            data[key] = (value + [value[-1]] * dims)[:dims]
            changed = True
    if not changed:
        return system
    out = work / f"{system.stem}.{dims}d.json"
    out.write_text(json.dumps(data, indent=4))
    return out


def check(instance: Instance, results: list[Result], label: str) -> list[str]:
    """Every schedule valid, every bound of the instance at most every makespan on it."""
    problems = []
    bounds = {name: v for r in results for name, v in r.bounds.as_dict().items() if v is not None}
    for r in results:
        if r.schedule is None or r.makespan is None:
            problems.append(f"{label} {r.label}: no schedule ({r.status})")
            continue
        for violation in validate(instance, r.schedule)[:3]:
            problems.append(f"{label} {r.label}: invalid: {violation}")
        for name, value in bounds.items():
            if value > r.makespan + 1e-6:
                problems.append(f"{label} {r.label}: bound {name} {value:.0f} ns above the makespan {r.makespan:.0f}")
    return problems


def astra_ns(binary: Path, memory: Path, network: Path, system: Path, trace: Path) -> int | None:
    """ASTRA-sim 2.x's iteration: the largest ``sys[i] finished``, ns."""
    finished, _ = run_binary(binary, memory, network, system, trace / "workload", trace / "workload.json")
    return max(finished.values(), default=None)


def group_summary(flat: Instance, hier: Instance) -> str:
    """Which dimensions the groups smaller than the network were re-expressed over, with counts."""
    counts: Counter[str] = Counter()
    for f, h in zip(flat.collectives, hier.collectives, strict=True):
        if not f.group or f.kind.value == "send":
            continue
        if h.group:
            counts["ring (not whole dimensions)"] += 1
        else:
            dims = h.dimensions if h.dimensions is not None else tuple(range(hier.network.num_dims))
            counts["d" + "+d".join(str(d) for d in dims)] += 1
    whole = sum(1 for f in flat.collectives if not f.group)
    parts = [f"{k} x{n}" for k, n in sorted(counts.items())]
    if whole:
        parts.append(f"all NPUs x{whole}")
    return ", ".join(parts)


def run_case(trace: Path, network: Path, system: Path, args: argparse.Namespace, work: Path) -> Case:
    """Both imports of one trace on one network, every method on each, and the checks."""
    prefix, groups = trace / "workload", trace / "workload.json"
    system = system_for(system, len(network_sizes(network)), work)
    flat = import_astra(network, system, workload=prefix, comm_groups=groups, groups="as-astra")
    hier = import_astra(network, system, workload=prefix, comm_groups=groups, groups="dimensions")
    notes: list[str] = []
    problems: list[str] = []
    flat_results = solve_all(flat, METHODS, time_limit=args.time_limit, workers=args.workers)
    hier_results = solve_all(hier, METHODS, time_limit=args.time_limit, workers=args.workers)
    problems += check(flat, flat_results, "as-astra")
    problems += check(hier, hier_results, "dimensions")
    measured = None
    if args.astra is not None:
        measured = astra_ns(args.astra, args.memory, network, system, trace)
        if measured != flat_results[0].makespan:
            problems.append(f"ASTRA-sim 2.x: {measured} ns, the as-astra baseline {flat_results[0].makespan:.0f} ns")
    return Case(
        trace.name,
        network.stem,
        group_summary(flat, hier),
        flat_results,
        hier_results,
        measured,
        notes,
        problems,
    )


def cell(r: Result, reference: float, gap: bool = False) -> str:
    """The iteration in ms, its speedup over ``reference``; with ``gap``, the gap too (``*`` proven)."""
    assert r.makespan is not None
    star = "*" if r.status.value == "optimal" else ""
    extra = f", {100 * (r.makespan / r.bounds.best - 1):.2f}%" if gap else ""
    return f"{r.makespan / 1e6:.4f}{star} ({reference / r.makespan:.3f}x{extra})"


def table(cases: list[Case]) -> list[str]:
    """The Markdown table of every case."""
    lines = [
        "| trace | network | groups as dimensions | 2.x (as-astra baseline) | as-astra, cpsat | "
        "hierarchical baseline | themis-fifo | themis-scf | balanced | cpsat (gap) | best bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        ref = c.flat[0].makespan
        assert ref is not None
        f = {r.label: r for r in c.flat}
        h = {r.label: r for r in c.hier}
        best = h["cpsat"].bounds
        lines.append(
            f"| {c.trace} | {c.network} | {c.groups} | {ref / 1e6:.4f} | {cell(f['cpsat'], ref, True)} | "
            + " | ".join(cell(h[m], ref) for m in HEURISTICS)
            + f" | {cell(h['cpsat'], ref, True)} | {best.best / 1e6:.4f} ({best.best_name}) |"
        )
    return lines


def machine() -> str:
    """Where and when: the date, the machine, the load."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ortools = version("ortools")
    except PackageNotFoundError:  # pragma: no cover
        ortools = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, OR-Tools {ortools}; load average {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", nargs="+", type=Path, help="trace folders (workload.N.et, workload.json)")
    parser.add_argument("--networks", nargs="+", type=Path, help="2.x network YAMLs, paired by NPU count")
    parser.add_argument("--system", type=Path, help="2.x system JSON")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per solve --method all (20)")
    parser.add_argument("--workers", type=int, default=None, help="CP-SAT workers (default: every core)")
    parser.add_argument("--astra", type=Path, default=None, help="ASTRA-sim 2.x's analytical binary, to check")
    parser.add_argument("--memory", type=Path, default=None, help="2.x's remote-memory JSON (with --astra)")
    parser.add_argument(
        "--only-aligned",
        action="store_true",
        help="skip a trace on a network where some group smaller than it is not whole dimensions",
    )
    parser.add_argument("--write-configs", type=Path, default=None, help="write the docs' networks and system, exit")
    args = parser.parse_args()
    if args.write_configs is not None:
        write_configs(args.write_configs)
        return
    if not (args.traces and args.networks and args.system):
        parser.error("give --traces, --networks and --system (or --write-configs)")
    if args.astra is not None and args.memory is None:
        parser.error("--astra needs --memory (ASTRA-sim's no_memory_expansion.json)")
    sizes = {net: network_sizes(net) for net in args.networks}
    began = time.perf_counter()
    print(f"<!-- {' '.join(['python -m bench.figures.groups_compare', *sys.argv[1:]])} -->")
    print(f"<!-- started {machine()} -->")
    cases: list[Case] = []
    with tempfile.TemporaryDirectory() as tmp:
        for trace in args.traces:
            npus = len(list(trace.glob("workload.*.et")))
            nets = [n for n in args.networks if _product(sizes[n]) == npus]
            if not nets:
                print(f"<!-- {trace}: no network of {npus} NPUs -->", file=sys.stderr)
            for net in nets:
                if args.only_aligned and not aligned(trace, net):
                    print(f"{trace.name} on {net.stem}: skipped (a group is not whole dimensions)", file=sys.stderr)
                    continue
                t0 = time.perf_counter()
                case = run_case(trace, net, args.system, args, Path(tmp))
                print(f"{trace.name} on {net.stem}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                cases.append(case)
    print()
    print("\n".join(table(cases)))
    print()
    schedules = sum(len(c.flat) + len(c.hier) for c in cases)
    problems = [f"{c.trace} on {c.network}: {p}" for c in cases for p in c.problems]
    print(f"Checks: {schedules} schedules, {len(problems)} problems.")
    for p in problems:
        print(f"* {p}")
    if args.astra is not None:
        same = sum(1 for c in cases if c.astra_ns == c.flat[0].makespan)
        print(f"ASTRA-sim 2.x's own iteration equals the as-astra baseline on {same} of {len(cases)}.")
    for c in cases:
        h_best = c.hier[-1].bounds.best
        flat_ns = c.flat[0].makespan
        assert flat_ns is not None
        if flat_ns < h_best:
            print(f"* {c.trace} on {c.network}: 2.x's flat ring is below every hierarchical schedule's bound")
        for note in c.notes:
            print(f"* {c.trace} on {c.network}: {note}")
    print(f"\n<!-- finished {machine()}; {time.perf_counter() - began:.0f} s -->")


def write_configs(folder: Path) -> None:
    """The docs' networks and system: the 2.x check's square ones, the 3D ones of :data:`NETWORKS`."""
    from bench.figures.astra2_check import STG_SYSTEM

    folder.mkdir(parents=True, exist_ok=True)
    files = {
        f"net_{k}x{k}.yml": f"topology: [ Ring, Switch ]\nnpus_count: [ {k}, {k} ]\nbandwidth: [ 100.0, 50.0 ]\n"
        "latency: [ 500.0, 1000.0 ]\n"
        for k in (4, 8, 16)
    }
    files.update(NETWORKS)
    files["sys_roofline.json"] = json.dumps(STG_SYSTEM, indent=4) + "\n"
    for name, text in files.items():
        (folder / name).write_text(text)
        print(folder / name)


def aligned(trace: Path, network: Path) -> bool:
    """Whether every group of the trace's group file is the whole network or exactly whole dimensions
    (every NPU that differs from its first only in those, and no other)."""
    sizes = network_sizes(network)
    npus = _product(sizes)
    for ranks in json.loads((trace / "workload.json").read_text()).values():
        if len(ranks) in (1, npus):
            continue
        coords = [_coords(r, sizes) for r in ranks]
        varying = [d for d in range(len(sizes)) if len({c[d] for c in coords}) > 1]
        if len(ranks) != _product([sizes[d] for d in varying]):
            return False
    return True


def _coords(npu: int, sizes: list[int]) -> list[int]:
    out = []
    for n in sizes:
        out.append(npu % n)
        npu //= n
    return out


def _product(sizes: list[int]) -> int:
    out = 1
    for n in sizes:
        out *= n
    return out


if __name__ == "__main__":
    main()
