"""Whole-process time of a cheap command: `themis-opt solve --method themis`, and `import themis_opt.cli`.

    python -m bench.figures.fast_start [--repeat 10] [--no-bytecode-cache] [--old 99d703f]

Runs the console script next to this interpreter (not a version manager's
shim, which adds its own start-up) on the 8x8x8 paper instance at 64 chunks
(as bundled) and at 1024 chunks, the first also with the solver-free bounds
alone (``--bounds formulas``: no OR-Tools), and `python -c "import themis_opt.cli"`;
prints the median and the best of --repeat runs, after one untimed run of
each (which writes Python's bytecode cache, as any installed package has it).
``--no-bytecode-cache`` keeps PYTHONDONTWRITEBYTECODE (set on this project's
machines) so that every run compiles every module again. With ``--old REV``
the same commands also run, through ``python -c "from themis_opt.cli import
main; ..."`` in both trees (the console script is this tree's only), in a
``git worktree`` of that commit (its C core built there), side by side.
Goal: the 64-chunk solve no slower than 99d703f's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from themis_opt.suites import suite_folder


def _time(argv: list[str], repeat: int, env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    subprocess.run(argv, check=True, capture_output=True, env=env, cwd=cwd)  # warm-up: the bytecode cache
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env, cwd=cwd)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), min(walls)


LAUNCH = "import sys; from themis_opt.cli import main; sys.exit(main(sys.argv[1:]))"


def _side_by_side(old: str, paper: Path, big: Path, repeat: int, env: dict[str, str]) -> None:
    """The solves through the library's ``main`` in this tree and in a worktree of ``old``."""
    from bench.figures.bound_speed import ROOT, _old_tree

    commands = {
        "solve --method themis, 64 chunks": ["solve", str(paper), "--method", "themis"],
        "solve --method themis --bounds formulas, 64 chunks": [
            *("solve", str(paper), "--method", "themis", "--bounds", "formulas")
        ],
        "solve --method themis --time-limit 0.01, 64 chunks": [
            *("solve", str(paper), "--method", "themis", "--time-limit", "0.01")
        ],
        "solve --method themis, 1024 chunks": ["solve", str(big), "--method", "themis"],
    }
    print(f"\n| command (python -c main) | {old} median (s) | now median (s) | speed-up |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        tree = _old_tree(old, Path(tmp))
        try:
            for name, argv in commands.items():
                times = []
                for root in (tree, ROOT):
                    run_env = {**env, "PYTHONPATH": str(root)}
                    try:  # run from the tree: the current folder comes first on the path
                        times.append(_time([sys.executable, "-c", LAUNCH, *argv], repeat, run_env, root)[0])
                    except subprocess.CalledProcessError:  # an option the old commit does not have
                        times.append(math.nan)
                speedup = f"{times[0] / times[1]:.2f}x" if math.isfinite(times[0]) else "-"
                print(f"| {name} | {times[0]:.3f} | {times[1]:.3f} | {speedup} |", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-bytecode-cache", action="store_true")
    parser.add_argument("--old", default=None, help="also time these commands at this commit, side by side")
    args = parser.parse_args()
    env = dict(os.environ)
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
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
            "solve --method themis --bounds formulas, 64 chunks": [
                *(exe, "solve", str(paper), "--method", "themis", "--bounds", "formulas")
            ],
            "solve --method themis, 1024 chunks": [exe, "solve", str(big), "--method", "themis"],
            "python -c pass (interpreter alone)": [sys.executable, "-c", "pass"],
        }
        cache = "without" if args.no_bytecode_cache else "with"
        print(f"| command | median (s) | best (s) |  ({args.repeat} runs each, {cache} the bytecode cache)")
        print("|---|---|---|")
        for name, argv in runs.items():
            median, best = _time(argv, args.repeat, env)
            print(f"| {name} | {median:.3f} | {best:.3f} |", flush=True)
        if args.old:
            _side_by_side(args.old, paper, big, args.repeat, env)


if __name__ == "__main__":
    main()
