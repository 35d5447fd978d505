"""ASTRA-sim's files: ``import-astra`` (its network, system and workload into an instance) and ``export-astra``."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from themis_opt.cli.options import force_option, int_in, number_in, out_option, read_instance
from themis_opt.errors import InputError, counted

FIELDS = {"all_reduce_bytes": "all_reduce"}  # the library's fields -> this command's dests


COMMANDS = {  # each command of this family and its line in --help
    "import-astra": "make an instance from ASTRA-sim network, system and workload files",
    "export-astra": "write ASTRA-sim files that run the same case",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import-astra`` and ``export-astra``."""
    p = sub.add_parser("import-astra", help=COMMANDS["import-astra"])
    p.add_argument("network", help="ASTRA-sim 1.0 network .json or 2.x network .yml")
    p.add_argument("system", help="ASTRA-sim system file (1.0 key: value text, or 2.x JSON)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--all-reduce",
        metavar="SIZE",
        help="one all-reduce of SIZE bytes per NPU: 64MiB and 1GiB are 2^20 and 2^30 bytes, 1GB is 10^9",
    )
    what.add_argument(
        "--workload",
        metavar="FILE",
        help="an ASTRA-sim 1.0 workload file (any parallelism), or the prefix of 2.x Chakra traces, "
        'PREFIX.0.et... (needs pip install -e ".[chakra]")',
    )
    p.add_argument(
        "--comm-groups",
        metavar="FILE",
        default=None,
        help="2.x's communicator-group file, {\"id\": [ranks]}, that the traces' pg_name refers to "
        "(ASTRA-sim's --comm-group-configuration; default: none, every collective over every NPU)",
    )
    p.add_argument(
        "--groups",
        choices=("as-astra", "dimensions"),
        default="as-astra",
        help="as-astra: a group smaller than the network runs as 2.x runs it, one ring over its NPUs; "
        "dimensions: a group that is whole dimensions runs over them, so the methods may order its chunks "
        "(default as-astra)",
    )
    p.add_argument("--passes", type=int_in(1, 1000), default=1, help="ASTRA-sim's --num-passes (default 1)")
    for scale, scaled in (("comm", "collective sizes"), ("compute", "compute times"), ("injection", "endpoint-delay")):
        p.add_argument(
            f"--{scale}-scale",
            type=number_in(0, 1e9),
            default=1.0,
            help=f"ASTRA-sim's --{scale}-scale: {scaled} times this, truncated as ASTRA-sim does (default 1)",
        )
    p.add_argument(
        "--ignore-unknown",
        action="store_true",
        help="skip keys ASTRA-sim does not read (default: an unknown key is an error)",
    )
    p.add_argument("--name", default=None, help="the instance's name (default: the network file's stem)")
    out_option(p, "instance JSON file to write")
    p.set_defaults(handler=import_astra, fields=FIELDS)

    p = sub.add_parser("export-astra", help=COMMANDS["export-astra"])
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("--version", type=int, choices=(1, 2), default=1, help="ASTRA-sim 1.0 or 2.x files (default 1)")
    p.add_argument(
        "--method",
        choices=("baseline", "themis"),
        default=None,
        help="scheduling a 1.0 system file asks for (default themis; 2.x always runs the baseline)",
    )
    p.add_argument(
        "--fit",
        action="store_true",
        help="2.x: make the instance expressible first: compute rounded to whole microseconds, collectives cut as "
        "2.x cuts them, each stage's collectives and sends chained in the order 2.x runs them (default: off, "
        "such an instance is an error)",
    )
    out_option(p, "folder to write the files to, whole or not at all: a new or empty one")
    force_option(p)
    p.set_defaults(handler=export_astra)


def import_astra(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt import-astra``."""
    from themis_opt.formats.astra import import_astra, parse_size
    from themis_opt.formats.native import check_writable, save_instance

    check_writable(args.out)
    size = parse_size(args.all_reduce) if args.all_reduce is not None else None
    instance = import_astra(
        args.network,
        args.system,
        all_reduce_bytes=size,
        workload=args.workload,
        passes=args.passes,
        comm_scale=args.comm_scale,
        compute_scale=args.compute_scale,
        injection_scale=args.injection_scale,
        ignore_unknown=args.ignore_unknown,
        name=args.name,
        comm_groups=args.comm_groups,
        groups=args.groups,
    )
    save_instance(instance, args.out)
    meta = dict(instance.metadata)
    console.print(
        f"wrote {args.out}: {counted(len(instance.network.dimensions), 'dimension')}, "
        f"{counted(instance.network.num_npus, 'NPU')}, {counted(len(instance.collectives), 'collective')}; "
        f"the system file asks for {meta['astra_method']} with {meta['astra_intra']}"
    )
    for note in filter(None, meta.get("astra_notes", "").split("; ")):
        console.print(f"note: {note}")
    return 0


def export_astra(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt export-astra``."""
    from themis_opt.fileio import check_new_folder
    from themis_opt.formats.astra import export_astra
    from themis_opt.formats.astra.export import GROUP_FILE, fit_astra_2
    from themis_opt.formats.native import check_folder

    if args.fit and args.version != 2:
        raise InputError("--fit", "makes an instance expressible by ASTRA-sim 2.x: give --version 2")
    check_folder(args.out)
    check_new_folder(args.out, force=args.force)  # before any work
    instance = read_instance(args.instance)
    notes: list[str] = []
    if args.fit:
        instance, notes = fit_astra_2(instance)
    files = export_astra(instance, args.version, args.out, args.method, keep=[args.instance], force=args.force)
    names = [f.name for f in files]
    shown = ", ".join(names) if len(names) <= 5 else f"{', '.join(names[:3])} ... {names[-1]}"
    console.print(f"wrote {counted(len(files), 'file')} to {args.out}: {shown}")
    for note in notes:
        console.print(f"fitted: {note}")
    if any(f.name == GROUP_FILE for f in files):
        console.print(f"run ASTRA-sim 2.x with --comm-group-configuration={Path(args.out) / GROUP_FILE}")
    return 0
