"""Wall time of `themis-opt bench --suite quick` with --jobs 1, --jobs 2 and --scheduler local:2.

    python -m bench.figures.cluster_time [--methods baseline,themis-scf,balanced,cpsat] [--time-limit 5]

Each configuration runs once in a fresh process (interpreter start, and for
local:2 the cluster's start, included), writing its rows to a temporary file.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="baseline,themis-scf,balanced,cpsat")
    parser.add_argument("--time-limit", default="5")
    args = parser.parse_args()
    exe = str(Path(sys.executable).with_name("themis-opt"))
    configs = {
        "--jobs 1": ["--jobs", "1"],
        "--jobs 2": ["--jobs", "2"],
        "--scheduler local:2": ["--scheduler", "local:2"],
    }
    print(f"quick suite, methods {args.methods}, time limit {args.time_limit} s")
    print("| backend | wall time (s) |")
    print("|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in configs.items():
            out = Path(tmp) / f"{name.replace(' ', '_')}.jsonl"
            argv = [exe, "bench", "--suite", "quick", "--methods", args.methods, "--time-limit", args.time_limit]
            t0 = time.perf_counter()
            subprocess.run([*argv, *extra, "--out", str(out)], check=True, capture_output=True)
            print(f"| {name} | {time.perf_counter() - t0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
