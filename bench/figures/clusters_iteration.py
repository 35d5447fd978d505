"""cpsat's certified gap on whole LLM training iterations: the clusters suite and kept-aside layouts.

    python -m bench.figures.clusters_iteration                       # 60 s each, 10 + 4 instances
    python -m bench.figures.clusters_iteration --time-limit 5 --sets clusters

Each run is ``themis-opt solve FILE --method cpsat --time-limit T`` in a fresh process (its
default bound set, ``auto``), the result read back from ``--out``: the makespan, the best bound
and its name (the certificate), the gap, the gap to the best of the other bounds but CP-SAT's
(which starts from the best bound it is given): the gap before the iteration bound; and the whole
process's wall time. The ``clusters`` set is the bundled suite (``instances/clusters/``); the
``aside`` set, never used to tune anything, is four more layouts
``themis-opt workload`` makes on the suite's networks:

* ``llama3-8b-fsdp-tp8-hgx``: Llama 3 8B, FSDP, tp 8 x dp 128 on the HGX H100 cluster;
* ``gpt3-175b-fsdp-tp8-hgx``: GPT-3 175B, FSDP, tp 8 x dp 128 on the HGX H100 cluster;
* ``llama3-8b-ddp-tp16-tpu3d``: Llama 3 8B, DDP, tp 16 x dp 4 on the 4x4x4 TPU v4 torus;
* ``gpt3-175b-fsdp-tp4-tpu4d``: GPT-3 175B, FSDP, tp 4 x dp 64 on the 4x4x4x4 TPU v4 tori.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]
CLUSTERS = ROOT / "instances" / "clusters"
HGX = CLUSTERS / "llama3-8b-ddp-tp8-ep1-dp128-hgx-h100-8x32x4.json"
TPU3D = CLUSTERS / "llama3-8b-fsdp-tp4-ep1-dp16-tpu-v4-4x4x4.json"
TPU4D = CLUSTERS / "llama3-8b-ddp-tp4-ep1-dp64-tpu-v4-4x4x4x4.json"
ASIDE = {  # name: (model, network file, tp, data parallelism)
    "llama3-8b-fsdp-tp8-hgx": ("llama3-8b", HGX, 8, "fsdp"),
    "gpt3-175b-fsdp-tp8-hgx": ("gpt3-175b", HGX, 8, "fsdp"),
    "llama3-8b-ddp-tp16-tpu3d": ("llama3-8b", TPU3D, 16, "ddp"),
    "gpt3-175b-fsdp-tp4-tpu4d": ("gpt3-175b", TPU4D, 4, "fsdp"),
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "themis_opt.cli", *args], env=env, capture_output=True, text=True)


def aside(folder: Path) -> dict[str, Path]:
    """The kept-aside instances, written by ``themis-opt workload`` into ``folder``."""
    made = {}
    for name, (model, network, tp, dp) in ASIDE.items():
        path = folder / f"{name}.json"
        options = ["--network", str(network), "--tp", str(tp), "--data-parallel", dp, "--out", str(path)]
        done = _cli("workload", model, *options)
        if done.returncode:
            raise SystemExit(f"{name}: {done.stderr.strip()}")
        made[name] = path
    return made


def measure(path: Path, limit: float, out: Path) -> dict[str, object]:
    """One ``solve --method cpsat`` run: its result's numbers and the process's wall time."""
    began = time.perf_counter()
    done = _cli("solve", str(path), "--method", "cpsat", "--time-limit", f"{limit:g}", "--out", str(out))
    wall = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"{path.name}: exit {done.returncode}: {done.stderr.strip()}")
    result = json.loads(out.read_text())
    # before the iteration bound: every other bound but CP-SAT's, which starts from the best bound given
    others = [v for k, v in result["bounds_ns"].items() if k not in ("iteration", "cpsat") and v is not None]
    return {
        "without": result["makespan_ns"] / max(others) - 1,
        "makespan_ms": result["makespan_ns"] / 1e6,
        "bound_ms": result["lower_bound_ns"] / 1e6,
        "certificate": result["best_bound"],
        "gap": result["gap"],
        "status": result["status"],
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--sets", default="clusters,aside", help="clusters, aside or both (comma-separated)")
    parser.add_argument("--instances", default=None, help="only the instances whose name holds one of these")
    args = parser.parse_args()
    sets = args.sets.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs: list[tuple[str, str, Path]] = []
        if "clusters" in sets:
            runs += [("clusters", p.stem, p) for p in sorted(CLUSTERS.glob("*.json"))]
        if "aside" in sets:
            runs += [("aside", name, p) for name, p in aside(folder).items()]
        if args.instances:
            wanted = args.instances.split(",")
            runs = [r for r in runs if any(w in r[1] for w in wanted)]
        print(f"`themis-opt solve FILE --method cpsat --time-limit {args.time_limit:g}`; load {os.getloadavg()[0]:.2f}")
        print()
        print("| set | instance | cpsat | bound (certificate) | gap | gap without `iteration` | wall |")
        print("|---|---|---|---|---|---|---|")
        for where, name, path in runs:
            row = measure(path, args.time_limit, folder / f"{name}.result.json")
            star = "*" if row["status"] == "optimal" else ""
            print(
                f"| {where} | `{name}` | {row['makespan_ms']:.1f} ms{star} | {row['bound_ms']:.1f} ms "
                f"({row['certificate']}) | {100 * float(row['gap']):.2f}% | {100 * float(row['without']):.2f}% "  # type: ignore[arg-type]
                f"| {row['wall_s']:.1f} s |",
                flush=True,
            )
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
