"""Which of the suites' single collectives MSCCL can run: each method's program written as MSCCL-IR
XML within the MSCCL executor's limits (or refused with the limit named), read back and proved.

    python -m bench.figures.msccl_limits [--suites quick,astra,paper,exact] [--methods baseline,themis]
        [--max-npus 512] [--max-steps 64]

A row: the instance, its collective, the method, and either the XML's size, channels, the write
and check seconds and the read-back program's time over the program's (its steps timed as
messages), or the limit that refused it.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from themis_opt.errors import InputError
from themis_opt.formats.native import load_instance
from themis_opt.programs import check_program, program_of
from themis_opt.programs.msccl import COLL, XML, as_msccl, read_msccl, write_msccl
from themis_opt.solving import solve
from themis_opt.suites import suite_folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default="quick,astra,paper,exact")
    parser.add_argument("--methods", default="baseline,themis")
    parser.add_argument("--max-npus", type=int, default=512)
    parser.add_argument("--max-steps", type=int, default=64)
    args = parser.parse_args()
    print(
        "| instance | NPUs | collective | method | MSCCL | XML MiB | channels | write (s) | read and check (s) "
        "| read back / ours |"
    )
    print("|---|---:|---|---|---|---:|---:|---:|---:|---:|")
    work = Path(tempfile.mkdtemp(prefix="msccl-"))
    for suite in args.suites.split(","):
        for path in sorted(p for p in suite_folder(suite).glob("*.json") if p.name != "optima.json"):
            instance = load_instance(path)
            colls = instance.collectives
            if len(colls) != 1 or colls[0].kind not in COLL or instance.network.num_npus > args.max_npus:
                continue
            row = f"| {path.stem} | {instance.network.num_npus} | {colls[0].kind.value} | "
            for method in args.methods.split(","):
                result = solve(instance, method=method, time_limit=5, workers=1)
                try:
                    program = as_msccl(program_of(instance, result))
                except InputError as error:
                    print(f"{row}{method} | no program: {error.problem} | | | | | |")
                    continue
                timing = check_program(program)
                folder = work / f"{path.stem}-{method}"
                began = time.perf_counter()
                try:
                    write_msccl(program, folder, time_ns=timing.time_ns, max_steps=args.max_steps)
                except InputError as error:
                    seconds = time.perf_counter() - began
                    print(f"{row}{method} | refused: {error.problem} | | | {seconds:.1f} | | |")
                    continue
                written = time.perf_counter() - began
                text = (folder / XML).read_text()
                channels = int(re.search(r'nchannels="(\d+)"', text).group(1))  # type: ignore[union-attr]
                began = time.perf_counter()
                back = check_program(read_msccl(folder)).time_ns
                checked = time.perf_counter() - began
                size = len(text.encode()) / 2**20
                print(
                    f"{row}{method} | written, proved | {size:.1f} | {channels} | "
                    f"{written:.1f} | {checked:.1f} | {back / timing.time_ns:.3f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
