"""Write the bundled suites under themis_opt/suites/ (instances/ links there; fixed seeds).

    python -m bench.make_suites            # every suite's instances (exact/ without its optima)
    python -m bench.make_suites --optima   # also prove exact/ optima and write optima.json

The exact suite's optima are proven by `solve(..., "cpsat", workers=1, seed=0)`
on this machine; optima.json records the makespan, the time quantum and the
proof time measured here.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from themis_opt.formats.native import load_instance, save_instance
from themis_opt.generator import generate
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.result import Status
from themis_opt.solving import solve

ROOT = Path(__file__).resolve().parent.parent / "themis_opt" / "suites"
GIB = 2**30


def paper() -> list[Instance]:
    """Networks of the kinds the Themis paper studies: 512 to 1024 NPUs,
    bandwidths falling with the dimension, one 1 GiB all-reduce in 64 chunks."""

    def net(*dims: tuple[int, str, float, float]) -> Network:
        return Network(tuple(Dimension(n, t, b, lat) for n, t, b, lat in dims))

    ar = (Collective("all_reduce", GIB, 64),)
    return [
        Instance(net((32, "switch", 400, 500), (32, "switch", 100, 500)), ar, "paper-2d-sw32-sw32"),
        Instance(net((16, "ring", 250, 500), (32, "switch", 50, 500)), ar, "paper-2d-r16-sw32"),
        Instance(net((8, "switch", 200, 500), (8, "switch", 100, 500), (8, "switch", 50, 500)), ar, "paper-3d-sw8x8x8"),
        Instance(
            net((4, "ring", 250, 500), (8, "fully_connected", 200, 500), (32, "switch", 50, 500)),
            ar,
            "paper-3d-r4-fc8-sw32",
        ),
        Instance(
            net((2, "ring", 250, 500), (8, "fully_connected", 200, 500), (8, "ring", 100, 500), (8, "switch", 50, 500)),
            ar,
            "paper-4d-r2-fc8-r8-sw8",
        ),
        Instance(
            net(
                (4, "ring", 300, 500), (4, "fully_connected", 200, 500), (4, "ring", 100, 500), (16, "switch", 50, 500)
            ),
            ar,
            "paper-4d-r4-fc4-r4-sw16",
        ),
    ]


def quick() -> list[Instance]:
    """About ten small instances of every family; the bench over them is fast."""
    worked = Instance(
        Network((Dimension(4, "ring", 100, 500), Dimension(8, "switch", 50, 500))),
        (Collective("all_reduce", 64 * 2**20, 4),),
        "worked-example",
    )
    picks = [worked]
    picks += generate("small-exact", 6, seed=1)[4:6]
    picks += generate("homogeneous", 2, seed=2)
    picks += generate("heterogeneous", 2, seed=2)
    picks += generate("mixed-topology", 2, seed=2)
    picks += [i for i in generate("many-chunks", 6, seed=2) if max(c.chunks for c in i.collectives) <= 256][:1]
    return picks


EXACT = (0, 2, 5, 6, 8, 11)  # small-exact seed 1: some proven by the bound, some by the search


def exact() -> list[Instance]:
    """Small instances that CP-SAT proves optimal within seconds."""
    instances = generate("small-exact", max(EXACT) + 1, seed=1)
    return [instances[i] for i in EXACT]


# ASTRA-sim networks, as data (origins in themis_opt/suites/astra/README.md). Version 1.0 analytical
# networks are (topologies, units-count, links-count, link-bandwidth GB/s, link-latency ns);
# version 2.x networks are (topologies, npus_count, bandwidth GB/s per link, latency ns).
ASTRA_V1 = {
    "astra1-ring-fc-ring-2x8x2": (["Ring", "FullyConnected", "Ring"], [2, 8, 2], [2, 7, 1], [250, 25, 12.5], [500] * 3),
    "astra1-ring-fc-switch-2x8x2": (
        ["Ring", "FullyConnected", "Switch"],
        [2, 8, 2],
        [2, 7, 1],
        [250, 25, 12.5],
        [500] * 3,
    ),
    "astra1-torus3d-4x4x4": (["Ring", "Ring", "Ring"], [4, 4, 4], [2, 2, 2], [32, 16, 16], [1, 1, 1]),
}
ASTRA_V2 = {
    "asplos23-switch-8x8x8": (["Switch"] * 3, [8, 8, 8], [50.0] * 3, [500.0] * 3),
    "libra-ring-fc-ring-switch-4x8x4x32": (
        ["Ring", "FullyConnected", "Ring", "Switch"],
        [4, 8, 4, 32],
        [250.0, 25.0, 100.0, 50.0],
        [500.0] * 4,
    ),
    "libra-ring-fc-switch-16x8x32": (
        ["Ring", "FullyConnected", "Switch"],
        [16, 8, 32],
        [200.0, 25.0, 50.0],
        [500.0] * 3,
    ),
    "equal-2d-ring-switch-16x32": (["Ring", "Switch"], [16, 32], [100.0, 100.0], [500.0] * 2),
    "equal-3d-ring-fc-switch-8x8x8": (
        ["Ring", "FullyConnected", "Switch"],
        [8, 8, 8],
        [100.0, 100.0 / 7, 100.0],
        [500.0] * 3,
    ),
    "equal-4d-ring-fc-ring-switch-4x4x4x8": (
        ["Ring", "FullyConnected", "Ring", "Switch"],
        [4, 4, 4, 8],
        [100.0, 100.0 / 3, 100.0, 100.0],
        [500.0] * 4,
    ),
}


def astra() -> list[Instance]:
    """The ASTRA-sim suite: each network imported through themis_opt.formats.astra (as a user would), with one
    all-reduce of 64 MiB and one of 1 GiB, 64 chunks, the topologies' default algorithms."""
    import tempfile

    from themis_opt.formats.astra import import_astra

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        system = folder / "system.txt"
        system.write_text(
            "scheduling-policy: LIFO\nendpoint-delay: 10\npreferred-dataset-splits: 64\n"
            "inter-dimension-scheduling: themis\nintra-dimension-scheduling: SCF\n"
        )
        files = {}
        for name, (topo, units, links, bw, lat) in ASTRA_V1.items():
            path = folder / f"{name}.json"
            path.write_text(
                json.dumps(
                    {
                        "topology-name": "Hierarchical",
                        "topologies-per-dim": topo,
                        "units-count": units,
                        "links-count": links,
                        "link-bandwidth": bw,
                        "link-latency": lat,
                    }
                )
            )
            files[name] = (path, system)
        system2 = folder / "system.json"
        system2.write_text(
            json.dumps(
                {
                    "endpoint-delay": 10,
                    "preferred-dataset-splits": 64,
                    "inter-dimension-scheduling": "themis",
                    "intra-dimension-scheduling": "SCF",
                }
            )
        )
        for name, (topo, npus, bw, lat) in ASTRA_V2.items():
            path = folder / f"{name}.yml"
            path.write_text(f"topology: {json.dumps(topo)}\nnpus_count: {npus}\nbandwidth: {bw}\nlatency: {lat}\n")
            files[name] = (path, system2)
        for name, (network, sys_file) in files.items():
            for label, size in (("64MiB", 64 * 2**20), ("1GiB", GIB)):
                out.append(import_astra(network, sys_file, all_reduce_bytes=size, name=f"{name}-{label}"))
    return out


TRAINING_NETWORKS = {
    # the paper's falling bandwidths, and an equal-bandwidth network of the same shape
    "sw8x8x8-falling": ((8, "switch", 200.0), (8, "switch", 100.0), (8, "switch", 50.0)),
    "sw8x8x8-equal": ((8, "switch", 100.0), (8, "switch", 100.0), (8, "switch", 100.0)),
}


# per-NPU batches of the training suite: small enough that communication shows (with the zoo's
# default 32, ResNet and GNMT are compute-bound on these networks); the Transformer's one sequence
TRAINING_BATCH = {"resnet50": 4, "resnet152": 4, "gnmt": 4, "dlrm": 32, "transformer1t": 1}


def training() -> list[Instance]:
    """Each zoo model on each training network, one pass, 8 chunks per collective (small enough that
    CP-SAT has a model it can work on; say so where the figures are reported)."""
    from themis_opt.workloads.astra1 import task_graph
    from themis_opt.workloads.zoo import MODELS, ZooOptions, model_workload

    out = []
    for net_name, dims in TRAINING_NETWORKS.items():
        network = Network(tuple(Dimension(n, t, b, 500.0) for n, t, b in dims))
        for model in MODELS:
            workload = model_workload(model, ZooOptions(batch=TRAINING_BATCH[model]))
            out.append(task_graph(workload, network, passes=1, chunks=8, name=f"{model}-{net_name}"))
    return out


# today's clusters (themis_opt/suites/clusters/README.md says where each number comes from):
# (size, topology, per-NPU GB/s, latency ns) per dimension, innermost first
CLUSTERS = {
    "hgx-h100-8x32x4": ((8, "switch", 400.0, 936.25), (32, "switch", 50.0, 2_000.0), (4, "switch", 25.0, 4_000.0)),
    "tpu-v4-4x4x4": ((4, "ring", 100.0, 1_000.0), (4, "ring", 100.0, 1_000.0), (4, "ring", 100.0, 1_000.0)),
    "tpu-v4-4x4x4x4": (
        (4, "ring", 100.0, 1_000.0),
        (4, "ring", 100.0, 1_000.0),
        (4, "ring", 100.0, 1_000.0),
        (4, "switch", 25.0, 10_000.0),
    ),
}
# (cluster, model, layout): tensor parallelism inside the fastest dimensions, then context and
# experts, pipeline stages on the outermost dimension, data parallelism over the rest (a group that
# needs part of a dimension splits it: the context-parallel rail)
CLUSTER_LAYOUTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("hgx-h100-8x32x4", "llama3-8b", {"tp": 8, "dp": 128}),
    ("hgx-h100-8x32x4", "llama3-70b", {"tp": 8, "dp": 128, "data_parallel": "fsdp"}),
    ("hgx-h100-8x32x4", "mixtral-8x7b", {"ep": 8, "dp": 128, "data_parallel": "fsdp"}),
    ("tpu-v4-4x4x4", "llama3-8b", {"tp": 4, "dp": 16, "data_parallel": "fsdp"}),
    ("tpu-v4-4x4x4", "mixtral-8x7b", {"tp": 4, "ep": 4, "dp": 4, "data_parallel": "fsdp"}),
    ("tpu-v4-4x4x4", "gpt3-175b", {"tp": 16, "dp": 4, "data_parallel": "fsdp"}),
    ("tpu-v4-4x4x4x4", "llama3-8b", {"tp": 4, "dp": 64}),
    ("tpu-v4-4x4x4x4", "llama3-70b", {"tp": 16, "dp": 16, "data_parallel": "fsdp"}),
    ("hgx-h100-8x32x4", "llama3-70b", {"tp": 8, "dp": 32, "pp": 4, "microbatches": 8}),
    ("tpu-v4-4x4x4x4", "llama3-8b", {"tp": 4, "dp": 16, "pp": 4, "microbatches": 8}),
    ("hgx-h100-8x32x4", "llama3-70b", {"tp": 8, "dp": 32, "data_parallel": "fsdp", "pp": 4, "microbatches": 8}),
    ("hgx-h100-8x32x4", "llama3-8b", {"tp": 8, "cp": 4, "dp": 32, "data_parallel": "fsdp"}),
    ("tpu-v4-4x4x4x4", "llama3-8b", {"tp": 4, "dp": 16, "pp": 4, "microbatches": 8, "virtual_stages": 2}),
)


def cluster_name(cluster: str, model: str, layout: dict[str, Any]) -> str:
    """``llama3-8b-fsdp-tp8-cp4-ep1-dp32-pp4-mb8-v2-hgx-h100-8x32x4``: the layout's degrees, those at
    their defaults left out but tp, ep and dp (the suite's first names had them)."""
    parts = [model, layout.get("data_parallel", "ddp"), f"tp{layout.get('tp', 1)}"]
    parts += [f"cp{layout['cp']}"] if layout.get("cp", 1) > 1 else []
    parts += [f"ep{layout.get('ep', 1)}", f"dp{layout.get('dp', 1)}"]
    if layout.get("pp", 1) > 1:
        parts += [f"pp{layout['pp']}", f"mb{layout['microbatches']}"]
    parts += [f"v{layout['virtual_stages']}"] if layout.get("virtual_stages", 1) > 1 else []
    return "-".join([*parts, cluster])


def clusters() -> list[Instance]:
    """LLM training iterations on today's clusters: one pass, 4 chunks per collective, batch 1, bf16,
    989 TFLOP/s at 40% (the workload command's defaults), sequence 2048 (so that the compute of one
    iteration stays near the communication's)."""
    from themis_opt.workloads.llm import LLMS, Layout, llm_task_graph

    out = []
    for cluster, model, layout in CLUSTER_LAYOUTS:
        network = Network(tuple(Dimension(n, t, b, lat) for n, t, b, lat in CLUSTERS[cluster]))
        # the stages on the outermost dimension, as the suite was made (before the default put them inside)
        outermost = (len(CLUSTERS[cluster]) - 1,) if layout.get("pp", 1) > 1 else None
        name = cluster_name(cluster, model, layout)
        out.append(
            llm_task_graph(LLMS[model], network, Layout(sequence=2048, stage_dims=outermost, **layout), name=name)
        )
    return out


def write(folder: str, instances: list[Instance]) -> None:
    out = ROOT / folder
    out.mkdir(parents=True, exist_ok=True)
    for inst in instances:
        save_instance(inst, out / f"{inst.name}.json")


def prove_optima() -> None:
    optima = {}
    for path in sorted((ROOT / "exact").glob("*.json")):
        if path.name == "optima.json":
            continue
        inst = load_instance(path)
        start = time.perf_counter()
        result = solve(inst, "cpsat", workers=1, seed=0, time_limit=60)
        elapsed = time.perf_counter() - start
        if result.status is not Status.OPTIMAL or result.makespan is None:
            raise SystemExit(f"{path.name}: not proven optimal ({result.status.value})")
        quantum = result.stats.quantum_ns if result.stats else None
        optima[inst.name] = {
            "makespan_ns": result.makespan,
            "lower_bound_ns": result.lower_bound,
            "proof_time_s": round(elapsed, 3),
            "proven_by": "cpsat search" if result.stats else "lower bound met by a heuristic",
            "quantum_ns": quantum,
            "num_phases": inst.num_phases,
        }
        print(f"{inst.name}: {result.makespan:.3f} ns in {elapsed:.2f} s")
    (ROOT / "exact" / "optima.json").write_text(json.dumps(optima, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optima", action="store_true", help="prove the exact suite's optima")
    args = parser.parse_args()
    write("quick", quick())
    write("paper", paper())
    write("exact", exact())
    write("astra", astra())
    write("training", training())
    write("clusters", clusters())
    if args.optima:
        prove_optima()


if __name__ == "__main__":
    main()
