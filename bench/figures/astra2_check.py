"""themis_opt against ASTRA-sim 2.x (analytical, congestion-unaware) on its microbenchmarks and on
all-reduces from its generator on 2D and 3D networks of our own.

    python -m bench.figures.astra2_check --astra PATH/TO/astra-sim [--astra1 PATH/TO/astra-sim-1.0]
        [--binary BIN] [--work DIR] [--stg PATH/TO/symbolic_tensor_graph --stg-python PYTHON] [--only-stg]
        [--own-pp]

``--astra`` is an ASTRA-sim 2.x checkout built as the docs' ASTRA-sim page says (its binary is
``build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware`` unless ``--binary``).
The 2D/3D cases' traces are made with ASTRA-sim's own generator script (``examples/workload/
microbenchmarks/generator_scripts/all_reduce.py``) in ``--work``. Each row: ASTRA-sim's time for
NPU 0 (``sys[0] finished, N cycles``), the baseline's makespan of the imported instance, and the
difference. With ``--astra1`` (an ASTRA-sim 1.0 checkout), its text workloads ResNet-50 (data
parallel), an MLP (hybrid data-model), an MLP (model parallel) and DLRM are converted to traces of
16 NPUs by Chakra's ``chakra_converter Text``, as they are and with their compute times divided by
1000 (the converter writes 1.0's ns as microseconds), and run on the 2D network. Needs the chakra
extra.

With ``--stg`` (a checkout of ASTRA-sim's symbolic_tensor_graph, run by ``--stg-python``, a Python
with its requirements), LLM training traces with communicator groups and pipeline stages
(:data:`STG_CASES`) are generated with its ``main.py``, run in 2.x with their group files
(``--comm-group-configuration``) on square 2D networks (ring x switch) with roofline compute, and
imported with ``--comm-groups``; each row gives the largest ``sys[i] finished`` (the iteration),
the baseline's makespan and both wall times (2.x's run; themis_opt's import and solve, in this
process). ``--only-stg`` runs those alone.

``--own-pp`` runs our own pipeline-parallel LLM workloads alone (:data:`PP_CASES`, 32 NPUs in 2
stages): each written by ``themis-opt workload ... --pp 2``, exported by ``export-astra --version 2
--fit`` and run in 2.x with its group file if any (:func:`own_pp_rows`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from themis_opt.formats.astra import import_astra
from themis_opt.formats.astra.files import IMPLEMENTATION_KEYS
from themis_opt.solving import solve

NETWORKS = {
    "frac": "topology: [ Switch, Ring ]\nnpus_count: [ 8, 4 ]\nbandwidth: [ 400.0, 50.0 ]\n"
    "latency: [ 936.25, 700.3 ]\n",
    "2d": "topology: [ Ring, Switch ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 200.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n",
    "3d": "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 4, 4, 4 ]\n"
    "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 500.0, 500.0, 1000.0 ]\n",
}
# (network, splits, collective-optimization, one algorithm per dimension, chunks at once); "frac": hop
# latencies of fractional ns (a message's latency and bytes are truncated as one sum)
SYSTEMS = [
    ("2d", 16, "localBWAware", ["ring", "ring"], 1),
    ("2d", 64, "baseline", ["ring", "ring"], 1),
    ("2d", 16, "localBWAware", ["direct", "halvingDoubling"], 1),
    ("3d", 16, "localBWAware", ["ring", "ring", "ring"], 1),
    ("3d", 64, "localBWAware", ["ring", "direct", "halvingDoubling"], 1),
    ("3d", 16, "baseline", ["ring", "direct", "ring"], 1),
    ("frac", 16, "localBWAware", ["direct", "ring"], 1),
    ("2d", 16, "localBWAware", ["ring", "ring"], 2),
    ("3d", 64, "localBWAware", ["ring", "direct", "halvingDoubling"], 3),
    ("3d", 16, "localBWAware", ["oneRing"], 1),
    ("3d", 16, "baseline", ["oneDirect"], 2),
    ("3d", 64, "localBWAware", ["oneHalvingDoubling"], 1),
]
FLATTENED = ("oneRing", "oneDirect", "oneHalvingDoubling")  # one ring (...) of every NPU
# symbolic_tensor_graph's main.py options per case: (name, NPUs a side of the square network, options)
STG_MODEL = [
    "--dmodel",
    "2048",
    "--dff",
    "8192",
    "--head",
    "16",
    "--kvhead",
    "16",
    "--seq",
    "1024",
    "--dvocal",
    "32000",
]


def _stg(dp: int, tp: int, pp: int, batch: int, *extra: str) -> list[str]:
    """symbolic_tensor_graph's options for a layout (2 stacks, or 4 with 2 microbatches under pipelining)."""
    stacks = ["--num_stacks", "4", "--micro_batch", "2"] if pp > 1 else ["--num_stacks", "2"]
    layout = ["--dp", str(dp), "--tp", str(tp), "--pp", str(pp), "--batch", str(batch)]
    return [*layout, *stacks, *(extra or ("--model_type", "gpt"))]


STG_CASES = [
    ("dp16", 4, _stg(16, 1, 1, 32)),
    ("tp16", 4, _stg(1, 16, 1, 2)),
    ("dp4 tp4", 4, _stg(4, 4, 1, 8)),
    ("dp8 tp8", 8, _stg(8, 8, 1, 16)),
    ("dp4 tp4 FSDP", 4, _stg(4, 4, 1, 8, "--model_type", "gpt", "--weight_sharded", "1")),
    (
        "llama, mixed precision, GQA, dp4 tp4",
        4,
        _stg(4, 4, 1, 8, "--model_type", "llama", "--mixed_precision", "1", "--dff", "5632", "--kvhead", "4"),
    ),
    ("pp2 dp2 tp4", 4, _stg(2, 4, 2, 8)),
    ("pp4 dp2 tp2", 4, _stg(2, 2, 4, 8)),
    ("dp16 tp16 (256 NPUs)", 16, _stg(16, 16, 1, 32)),
]
STG_SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "roofline-enabled": 1,
    "peak-perf": 900,
    **{f"{k}-implementation": ["ring", "ring"] for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
}


def astra_run(
    binary: Path, astra: Path, network: Path, system: Path, prefix: Path, groups: Path | None = None
) -> tuple[dict[int, int], float]:
    """ASTRA-sim 2.x's time for each NPU that finished (``sys[i] finished``), ns, and its wall seconds
    (``astra``: the checkout, whose example remote-memory file the run takes).
    """
    memory = astra / "examples/remote_memory/analytical/no_memory_expansion.json"
    return run_binary(binary, memory, network, system, prefix, groups)


def run_binary(
    binary: Path, memory: Path, network: Path, system: Path, prefix: Path, groups: Path | None = None
) -> tuple[dict[int, int], float]:
    """:func:`astra_run` with the remote-memory file given."""
    import time

    began = time.perf_counter()
    run = subprocess.run(
        [
            str(binary),
            f"--workload-configuration={prefix}",
            *([f"--comm-group-configuration={groups}"] if groups is not None else []),
            f"--system-configuration={system}",
            f"--network-configuration={network}",
            f"--remote-memory-configuration={memory}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - began
    found = re.findall(r"sys\[(\d+)\] finished, (\d+) cycles", run.stdout + run.stderr)
    return {int(npu): int(t) for npu, t in found}, seconds


def astra_time(binary: Path, astra: Path, network: Path, system: Path, prefix: Path) -> int:
    """ASTRA-sim 2.x's time for NPU 0, ns."""
    times, _ = astra_run(binary, astra, network, system, prefix)
    if 0 not in times:
        raise RuntimeError(f"ASTRA-sim printed no time for {prefix}")
    return times[0]


def stg_rows(binary: Path, astra: Path, stg: Path, python: str, work: Path) -> None:
    """The table of :data:`STG_CASES`: each generated, run in 2.x and imported with its groups."""
    import time

    print("| trace | NPUs | ASTRA-sim 2.x (ns) | themis_opt baseline (ns) | difference | 2.x wall s | ours s |")
    print("|---|---|---|---|---|---|---|")
    system = work / "stg-system.json"
    system.write_text(json.dumps(STG_SYSTEM))
    for name, side, options in STG_CASES:
        folder = work / ("stg-" + re.sub(r"\W+", "-", name))
        folder.mkdir(parents=True, exist_ok=True)
        network = folder / "network.yml"
        network.write_text(
            f"topology: [ Ring, Switch ]\nnpus_count: [ {side}, {side} ]\nbandwidth: [ 100.0, 50.0 ]\n"
            "latency: [ 500.0, 1000.0 ]\n"
        )
        argv = [python, "main.py", "--output_dir", str(folder), "--output_name", "workload.%d.et", *STG_MODEL, *options]
        subprocess.run(argv, cwd=stg, check=True, capture_output=True)
        finished, astra_seconds = astra_run(
            binary, astra, network, system, folder / "workload", folder / "workload.json"
        )
        times = list(finished.values())
        astra_ns = max(times) if len(times) == side * side else None
        began = time.perf_counter()
        try:
            instance = import_astra(network, system, workload=folder / "workload", comm_groups=folder / "workload.json")
            ours = solve(instance, "baseline", intra="fifo", time_limit=600).makespan
            cell = f"{ours:.0f}"
            diff = f"{100 * (ours / astra_ns - 1):+.4f}%" if ours is not None and astra_ns else ""
        except Exception as error:  # reported in the table
            cell, diff = "", f"not imported: {str(error)[:90]}"
        ours_seconds = time.perf_counter() - began
        shown = astra_ns if astra_ns is not None else f"{len(times)} of {side * side} NPUs finished"
        print(
            f"| {name} | {side * side} | {shown} | {cell} | {diff} | {astra_seconds:.2f} | {ours_seconds:.2f} |",
            flush=True,
        )


def row(name: str, binary: Path, astra: Path, network: Path, system: Path, prefix: Path) -> None:
    """One line of the table: ASTRA-sim's time, ours, the difference."""
    astra_ns = astra_time(binary, astra, network, system, prefix)
    ours = solve(import_astra(network, system, workload=prefix), "baseline").makespan
    assert ours is not None
    print(f"| {name} | {astra_ns} | {ours:.0f} | {100 * (ours / astra_ns - 1):.3f}% |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--astra", type=Path, required=True)
    parser.add_argument("--astra1", type=Path)
    parser.add_argument("--binary", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--stg", type=Path, help="a checkout of symbolic_tensor_graph")
    parser.add_argument("--stg-python", default=sys.executable, help="the Python that runs it (default: this one)")
    parser.add_argument("--only-stg", action="store_true", help="run the symbolic_tensor_graph cases alone")
    parser.add_argument(
        "--own-pp",
        action="store_true",
        help="run our own --pp workloads alone (workload, export-astra --fit)",
    )
    args = parser.parse_args()
    astra = args.astra.resolve()
    binary = args.binary or astra / "build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware"
    work = (args.work or Path(tempfile.mkdtemp(prefix="astra2-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.own_pp:
        own_pp_rows(binary, astra, work)
        return
    if args.stg is not None:
        stg_rows(binary, astra, args.stg.resolve(), args.stg_python, work)
        if args.only_stg:
            return
    examples = astra / "examples"
    print("| case | ASTRA-sim 2.x (ns) | themis_opt baseline (ns) | difference |")
    print("|---|---|---|---|")
    system = examples / "system/native_collectives/Ring_4chunks.json"
    for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for npus in (4, 8, 16):
            network = examples / f"network/analytical/Ring_{npus}npus.yml"
            prefix = examples / f"workload/microbenchmarks/{kind}/{npus}npus_1MB/{kind}"
            row(f"{kind}, Ring {npus}, 1 MiB", binary, astra, network, system, prefix)
    network = work / "2d.yml"
    network.write_text(NETWORKS["2d"])
    for algorithm in FLATTENED:  # the 16-NPU microbenchmarks on ring 4 x switch 4, flattened
        spec = {**json.loads(system.read_text()), **{k: [algorithm] for k in IMPLEMENTATION_KEYS.values()}}
        spec["local-mem-bw"] = 1600
        flat = work / f"system-{algorithm}.json"
        flat.write_text(json.dumps(spec))
        for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            if kind == "all_to_all" and algorithm == "oneHalvingDoubling":
                continue  # ASTRA-sim 2.x exits: no halving-doubling all-to-all
            prefix = examples / f"workload/microbenchmarks/{kind}/16npus_1MB/{kind}"
            row(f"{kind}, 2d {algorithm}, 1 MiB", binary, astra, network, flat, prefix)
    generator = examples / "workload/microbenchmarks/generator_scripts/all_reduce.py"
    env = {**os.environ, "PYTHONPATH": str(astra)}
    for npus in (16, 32, 64):
        for mib in (64, 1024):
            args_ = ["--npus-count", str(npus), "--coll-size", str(mib)]
            subprocess.run([sys.executable, str(generator), *args_], cwd=work, env=env, check=True)
    for n, (net, splits, optimization, algorithms, at_once) in enumerate(SYSTEMS):
        network = work / f"{net}.yml"
        network.write_text(NETWORKS[net])
        spec = {
            "scheduling-policy": "LIFO",
            "endpoint-delay": 10,
            "active-chunks-per-dimension": at_once,
            "preferred-dataset-splits": splits,
            "collective-optimization": optimization,
            "local-mem-bw": 1600,
            **{f"{k}-implementation": algorithms for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
        }
        system = work / f"system{n}.json"
        system.write_text(json.dumps(spec))
        npus = {"2d": 16, "3d": 64, "frac": 32}[net]
        for mib in (64, 1024):
            prefix = work / f"all_reduce/{npus}npus_{mib}MB/all_reduce"
            name = f"{net} {'/'.join(algorithms)}, {optimization}, {splits} splits, {at_once} at once, {mib} MiB"
            row(name, binary, astra, network, system, prefix)
    network = examples / "network/analytical/HGX-H100-validated.yml"
    system = examples / "system/native_collectives/HGX-H100-validated.json"
    for mib in (64, 1024):  # ASTRA-sim's own validated configuration: 2 chunks at once
        subprocess.run(
            [sys.executable, str(generator), "--npus-count", "8", "--coll-size", str(mib)],
            cwd=work,
            env=env,
            check=True,
        )
        prefix = work / f"all_reduce/8npus_{mib}MB/all_reduce"
        row(f"HGX-H100-validated, {mib} MiB", binary, astra, network, system, prefix)
    for data_parallel in ("ddp", "fsdp"):
        prefix = llm_case(work, work / "2d.yml", work / "system0.json", data_parallel)
        name = f"llama3-8b, tp 4 x dp 4 ({data_parallel}), seq 256, 2d ring/ring"
        row(name, binary, astra, prefix.parent / "network.yml", prefix.parent / "system.json", prefix)
    if args.astra1 is not None:
        network, system = work / "2d.yml", work / "system0.json"
        for workload in WORKLOADS:
            for scale in (1, 1000):
                prefix = convert(args.astra1 / "inputs/workload" / f"{workload}.txt", scale, work)
                name = f"{workload}, 2d ring/ring, compute / {scale}"
                row(name, binary, astra, network, system, prefix)


def llm_case(work: Path, network: Path, system: Path, data_parallel: str) -> Path:
    """An LLM layout made expressible by ASTRA-sim 2.x (:func:`~themis_opt.formats.astra.export.fit_astra_2`)
    and exported with ``export_astra``: Llama 3 8B, tensor parallel 4 (the first dimension) x data
    parallel 4 (the second), sequences of 256, one pass, cut into the system file's splits. Returns
    the traces' prefix.
    """
    from themis_opt.formats.astra.export import export_astra, fit_astra_2
    from themis_opt.formats.astra.v2 import read_network, read_system
    from themis_opt.workloads.llm import LLMS, Layout, llm_task_graph

    base = import_astra(network, system, all_reduce_bytes=2**20)
    splits = read_system(system, len(read_network(network))).splits
    layout = Layout(tp=4, dp=4, data_parallel=data_parallel, sequence=256, chunks=splits)  # type: ignore[arg-type]
    fitted, _ = fit_astra_2(llm_task_graph(LLMS["llama3-8b"], base.network, layout, name="llama3-8b-2x"))
    export_astra(fitted, 2, work / f"llm-{data_parallel}")
    return work / f"llm-{data_parallel}" / "workload"


# our own --pp workloads on PP_NETWORK (ring 4 x switch 4 x ring 2: 32 NPUs, the stages on the last
# dimension) with PP_SYSTEM: (name, ``themis-opt workload llama3-8b`` options besides --pp 2)
PP_NETWORK = (
    "topology: [ Ring, Switch, Ring ]\nnpus_count: [ 4, 4, 2 ]\nbandwidth: [ 200.0, 50.0, 25.0 ]\n"
    "latency: [ 500.0, 1000.0, 2000.0 ]\n"
)
PP_SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 16,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    **{f"{k}-implementation": ["ring"] * 3 for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
}
PP_CASES = [
    ("tp 4 x dp 4 x pp 2, 2 microbatches, seq 256", ["--tp", "4", "--microbatches", "2", "--seq", "256"]),
    ("tp 4 x dp 4 x pp 2, 4 microbatches, seq 256", ["--tp", "4", "--microbatches", "4", "--seq", "256"]),
    ("tp 4 x dp 4 x pp 2, 8 microbatches, seq 1024", ["--tp", "4", "--microbatches", "8", "--seq", "1024"]),
    ("tp 16 x pp 2, 4 microbatches, seq 512", ["--tp", "16", "--microbatches", "4", "--seq", "512"]),
    (
        "tp 4 x cp 4 x pp 2, ring attention, 2 microbatches, seq 1024",
        ["--tp", "4", "--cp", "4", "--cp-attention", "ring", "--microbatches", "2", "--seq", "1024"],
    ),
]


def own_pp_rows(binary: Path, astra: Path, work: Path) -> None:
    """The table of :data:`PP_CASES`: each made by ``themis-opt workload llama3-8b ... --pp 2``, exported
    by ``export-astra --version 2 --fit``, run in 2.x (with its group file, if written) and imported
    again; the iteration is the largest ``sys[i] finished``, against the baseline (fifo) of the
    re-imported instance, of the exported (fitted) one and of the workload as written (whose
    collectives and sends may run beside each other, which 2.x never does).
    """
    from themis_opt.formats.astra.export import fit_astra_2
    from themis_opt.formats.native import load_instance

    cli = [sys.executable, "-m", "themis_opt.cli"]
    folder = work / "own-pp"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "network.yml").write_text(PP_NETWORK)
    (folder / "system.json").write_text(json.dumps(PP_SYSTEM))
    net = folder / "network.json"
    argv = ["import-astra", str(folder / "network.yml"), str(folder / "system.json"), "--all-reduce", "1MiB"]
    subprocess.run([*cli, *argv, "--out", str(net)], check=True, capture_output=True)
    print(
        "| llama3-8b | ASTRA-sim 2.x (ns) | re-imported | difference | exported (fitted) | difference "
        "| as `workload` wrote it | difference |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n, (name, options) in enumerate(PP_CASES):
        written, out = folder / f"w{n}.json", folder / f"case{n}"
        # the two stages on the last dimension (the default would split the switch after tp 4)
        workload = ["workload", "llama3-8b", "--network", str(net), "--pp", "2", "--stage-dims", "2", *options]
        workload += ["--out", str(written)]
        subprocess.run([*cli, *workload], check=True, capture_output=True)
        export = ["export-astra", str(written), "--version", "2", "--fit", "--out", str(out)]
        subprocess.run([*cli, *export], check=True, capture_output=True)
        groups = out / "comm_groups.json"
        given = groups if groups.exists() else None
        finished, _ = astra_run(binary, astra, out / "network.yml", out / "system.json", out / "workload", given)
        astra_ns = max(finished.values()) if len(finished) == 32 else None
        again = import_astra(out / "network.yml", out / "system.json", workload=out / "workload", comm_groups=given)
        original = load_instance(written)
        ours = [
            solve(instance, "baseline", intra="fifo", time_limit=600).makespan
            for instance in (again, fit_astra_2(original)[0], original)
        ]
        shown = astra_ns if astra_ns is not None else f"{len(finished)} of 32 NPUs finished"
        cells = [f"{t:.0f} | {100 * (t / astra_ns - 1):+.3f}%" if t and astra_ns else f"{t} | " for t in ours]
        print(f"| {name} | {shown} | {' | '.join(cells)} |", flush=True)


WORKLOADS = ("Resnet50_DataParallel", "MLP_HybridParallel_Data_Model", "MLP_ModelParallel", "DLRM_HybridParallel")


def convert(text: Path, scale: int, work: Path) -> Path:
    """``text`` with its compute times divided by ``scale``, as Chakra traces of 16 NPUs."""
    lines = text.read_text().split("\n")
    for n in range(2, len(lines)):
        fields = lines[n].split()
        if len(fields) >= 12:
            for column in (2, 5, 8):
                fields[column] = str(int(fields[column]) // scale)
            lines[n] = "\t".join(fields)
    scaled = work / f"{text.stem}_{scale}.txt"
    scaled.write_text("\n".join(lines))
    prefix = work / f"{text.stem}_{scale}"
    argv = ["chakra_converter", "Text", "--input", str(scaled), "--output", str(prefix), "--num-npus", "16"]
    subprocess.run([*argv, "--num-passes", "1"], check=True, capture_output=True)
    return prefix


if __name__ == "__main__":
    main()
