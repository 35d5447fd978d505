"""balanced's makespan on every instance of the quick and paper suites, here and at another checkout.

    python -m bench.experiments.balanced_suites [--against DIR] [--time-limit 10] [--seed 0]

Each instance is solved with ``solve(instance, "balanced", time_limit=..., seed=...)`` and the
default parameters, in a process of its own (so that no instance warms another's caches). With
``--against DIR`` the same files are also solved by the themis_opt of the checkout ``DIR``
(``PYTHONPATH=DIR``; its compiled core built in place), and the table gives both makespans and
their difference: the check that a change to balanced makes no bundled instance worse. The
bundled files are read from this checkout's suites, so both sides solve the same instances.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SUITES = ("quick", "paper")
# run in a fresh interpreter with the checkout under test first on the path; prints one JSON object
_ONE = """
import json, sys, time
import themis_opt
instance = themis_opt.load_instance(sys.argv[1])
t0 = time.perf_counter()
r = themis_opt.solve(instance, "balanced", time_limit=float(sys.argv[2]), seed=int(sys.argv[3]))
print(json.dumps({"makespan": r.makespan, "bound": r.bounds.best, "wall": time.perf_counter() - t0,
                  "note": r.note, "where": themis_opt.__file__}))
"""


def files() -> list[Path]:
    """Every bundled instance file of ``SUITES``, suite by suite, sorted."""
    root = Path(__file__).resolve().parents[2] / "themis_opt" / "suites"
    return [path for suite in SUITES for path in sorted((root / suite).glob("*.json"))]


def solve_at(checkout: Path, path: Path, time_limit: float, seed: int) -> dict[str, object]:
    """balanced's result on ``path`` by the themis_opt of ``checkout``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, "-c", _ONE, str(path), str(time_limit), str(seed)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
    )
    found: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(found["where"]).startswith(str(checkout.resolve())):
        raise SystemExit(f"{checkout}: themis_opt imported from {found['where']}, not from the checkout")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout to compare with (e.g. main's)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per solve (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="the solve's seed (default 0)")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[2]
    sides = [("here", here)] + ([("against", args.against.resolve())] if args.against else [])
    columns = ["instance", "bound (ns)"]
    for name, _ in sides:
        columns += [f"{name} (ns)", f"{name} gap", f"{name} wall (s)"]
    if args.against:
        columns.append("here - against (ns)")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    worse = []
    for path in files():
        rows = [solve_at(checkout, path, args.time_limit, args.seed) for _, checkout in sides]
        bound = float(rows[0]["bound"])  # type: ignore[arg-type]
        cells = [f"{path.parent.name}/{path.stem}", f"{bound:.1f}"]
        for row in rows:
            makespan = float(row["makespan"])  # type: ignore[arg-type]
            cells += [f"{makespan:.1f}", f"{100 * (makespan / bound - 1):.3f}%", f"{float(row['wall']):.2f}"]  # type: ignore[arg-type]
        if args.against:
            diff = float(rows[0]["makespan"]) - float(rows[1]["makespan"])  # type: ignore[arg-type]
            cells.append(f"{diff:+.1f}")
            if diff > 0:
                worse.append(path.stem)
        print("| " + " | ".join(cells) + " |", flush=True)
    if args.against:
        print(f"\nworse here than against: {', '.join(worse) if worse else 'none'}")


if __name__ == "__main__":
    main()
