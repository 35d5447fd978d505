"""Whole-process time of a cheap command: `themis-opt solve --method themis`, and `import themis_opt.cli`.

    python bench/fast_start.py [--repeat 10]

Runs the console script next to this interpreter (not a version manager's
shim, which adds its own start-up) on the 8x8x8 paper instance at 64 chunks
(as bundled) and at 1024 chunks, and `python -c "import themis_opt.cli"`;
prints the median and the best of --repeat runs. Goal (issue 7): at most
0.35 s for the 64-chunk solve.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from themis_opt.suites import suite_folder


def _time(argv: list[str], repeat: int) -> tuple[float, float]:
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), min(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    exe = str(Path(sys.executable).with_name("themis-opt"))
    paper = suite_folder("paper") / "paper-3d-sw8x8x8.json"
    document = json.loads(paper.read_text())
    document["tasks"][0]["chunks"] = 1024
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "paper-3d-sw8x8x8-1024.json"
        big.write_text(json.dumps(document))
        runs = {
            "import themis_opt.cli": [sys.executable, "-c", "import themis_opt.cli"],
            "solve --method themis, 64 chunks": [exe, "solve", str(paper), "--method", "themis"],
            "solve --method themis, 1024 chunks": [exe, "solve", str(big), "--method", "themis"],
            "python -c pass (interpreter alone)": [sys.executable, "-c", "pass"],
        }
        print(f"| command | median (s) | best (s) |  ({args.repeat} runs each)")
        print("|---|---|---|")
        for name, argv in runs.items():
            median, best = _time(argv, args.repeat)
            print(f"| {name} | {median:.3f} | {best:.3f} |", flush=True)


if __name__ == "__main__":
    main()
