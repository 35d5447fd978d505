"""Making instances: ``workload`` (a training iteration from the zoo, an LLM or a 1.0 workload file) and
``generate`` (random instances of a family).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from themis_opt.cli.options import SEED, int_in, number_in, out_option
from themis_opt.errors import InputError, counted

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.instance import Network

_LLM_ONLY: tuple[str, ...] = ("tp", "cp", "ep", "dp", "data_parallel", "seq", "pp", "microbatches", "stage_dims")
_LLM_ONLY += ("sp", "fsdp_gathers", "virtual_stages", "cp_attention")
_ZOO_ONLY = ("model_parallel", "policy")
_ZOO_SIZES = ("batch", "precision", "peak_tflops", "efficiency", "model_parallel")  # not a workload file's
FIELDS = {  # the option types' fields -> this command's dests, or what stands for a field
    "sequence": "seq",
    "bytes_per_element": "precision",
    "mfu": "efficiency",
    "sequence_parallel": "sp",
    "tp x ep x dp": "--tp x --ep x --dp",
    "tp x ep x dp x pp": "--tp x --ep x --dp x --pp",
    "tp x cp x ep x dp": "--tp x --cp x --ep x --dp",
    "tp x cp x ep x dp x pp": "--tp x --cp x --ep x --dp x --pp",
}
PRECISIONS = {"bf16": 2, "fp16": 2, "fp32": 4}  # bytes an element
DEFAULT_CHUNKS = 4  # per collective where the network's file gives none: the LLM layouts' default (Layout.chunks)


COMMANDS = {  # each command of this family and its line in --help
    "workload": "make a training-iteration task graph from a zoo model or a workload file",
    "generate": "write random instances of a family",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``workload`` and ``generate``."""
    from themis_opt.generator import FAMILIES
    from themis_opt.workloads.llm import LLMS, Layout
    from themis_opt.workloads.zoo import MODELS, ZooOptions

    zoo, llm = ZooOptions(), Layout()
    p = sub.add_parser("workload", help=COMMANDS["workload"])
    p.add_argument(
        "model",
        help=f"a zoo model ({', '.join(MODELS)}; LLMs: {', '.join(LLMS)}) or an ASTRA-sim 1.0 workload file",
    )
    p.add_argument(
        "--network",
        required=True,
        help="an instance file of any version, or one that holds only a network (no tasks): its network is used",
    )
    p.add_argument(
        "--passes", type=int_in(1, 100), default=None, help=f"training passes (default 2; LLMs {llm.passes})"
    )
    p.add_argument(
        "--chunks",
        type=int_in(1, 4096),
        default=None,
        help="chunks per collective (default: the network instance's preferred-dataset-splits or chunk count, "
        f"{DEFAULT_CHUNKS} for a file that holds only a network)",
    )
    p.add_argument(
        "--policy",
        choices=("LIFO", "FIFO"),
        default=None,
        help="collective priorities (default: the network instance's scheduling-policy, else LIFO; LLMs: none)",
    )
    p.add_argument(
        "--batch",
        type=int_in(1, 1_000_000),
        default=None,
        help=f"zoo: samples per NPU (default {zoo.batch}); LLMs: sequences per data-parallel rank, a microbatch's "
        f"with --microbatches (default {llm.batch})",
    )
    p.add_argument(
        "--precision",
        choices=tuple(PRECISIONS),
        default=None,
        help="gradient element size (default: 2 bytes, fp16 for the zoo and bf16 for LLMs)",
    )
    p.add_argument(
        "--peak-tflops",
        type=number_in(0, 1e9),
        default=None,
        help=f"the NPU's peak (default {zoo.peak_tflops:g}; LLMs {llm.peak_tflops:g}, an H100 SXM's dense bf16)",
    )
    p.add_argument(
        "--efficiency",
        "--mfu",
        dest="efficiency",
        type=number_in(0, 1),
        default=None,
        help=f"share of the peak reached, the model FLOPs utilisation (default {zoo.efficiency:g}; LLMs {llm.mfu:g})",
    )
    p.add_argument(
        "--model-parallel",
        type=int_in(1, 2**20),
        default=None,
        help=f"zoo: Transformer-1T's model-parallel group (default {zoo.model_parallel})",
    )
    groups = {"tp": "tensor", "cp": "context", "ep": "expert", "dp": "data"}
    for group, default in (("tp", str(llm.tp)), ("cp", str(llm.cp)), ("ep", str(llm.ep)), ("dp", "the NPUs left")):
        p.add_argument(
            f"--{group}",
            type=int_in(1, 2**20),
            default=None,
            help=f"LLMs: the {groups[group]}-parallel group (default {default})"
            + (
                ": each rank a share of every sequence, its keys and values shared as --cp-attention says"
                if group == "cp"
                else ""
            ),
        )
    p.add_argument(
        "--cp-attention",
        choices=("all-gather", "ring"),
        default=None,
        help="LLMs, --cp > 1: the whole sequence's keys and values all-gathered once projected (the Llama 3 "
        "paper's), or ring attention: each rank's block passed round the group, each step overlapping the "
        f"attention on the block before (default {llm.cp_attention.replace('_', '-')})",
    )
    p.add_argument(
        "--data-parallel",
        choices=("ddp", "fsdp"),
        default=None,
        help="LLMs: gradient all-reduces in 25 MiB buckets, or sharded all-gathers and reduce-scatters "
        f"(default {llm.data_parallel})",
    )
    p.add_argument("--seq", type=int_in(1, 2**24), default=None, help="LLMs: tokens a sequence (default: the model's)")
    p.add_argument(
        "--pp",
        type=int_in(1, 1024),
        default=None,
        help=f"LLMs: pipeline stages, each a stage of the instance, run 1F1B (default {llm.pp})",
    )
    p.add_argument(
        "--microbatches",
        type=int_in(1, 4096),
        default=None,
        help=f"LLMs: microbatches of --batch sequences a pass (default {llm.microbatches})",
    )
    p.add_argument(
        "--virtual-stages",
        type=int_in(1, 1024),
        default=None,
        help="LLMs: model chunks a pipeline stage holds, run in Megatron's interleaved 1F1B (--microbatches a "
        f"multiple of --pp; default {llm.virtual_stages}: plain 1F1B)",
    )
    p.add_argument(
        "--fsdp-gathers",
        choices=("once", "microbatch"),
        default=None,
        help="LLMs, fsdp with --pp or --microbatches: each unit gathered once before the first microbatch and "
        "reduce-scattered after the last (torchtitan's default with pipeline stages), or gathered before every "
        f"forward and backward and reduce-scattered after every backward (default {llm.fsdp_gathers})",
    )
    p.add_argument(
        "--stage-dims",
        type=_dimension_list,
        default=None,
        help="LLMs: the dimensions the pipeline stages take, comma-separated (default: after the tensor-, "
        "context- and expert-parallel groups; a dimension they need part of is split)",
    )
    p.add_argument(
        "--sp",
        action="store_true",
        default=None,
        help="LLMs: sequence parallelism, each tensor-parallel all-reduce a reduce-scatter and an all-gather "
        "(default: off)",
    )
    p.add_argument("--name", default=None, help="the instance's name (default: the model's)")
    out_option(p, "instance JSON file to write")
    p.set_defaults(handler=workload, fields=FIELDS)

    p = sub.add_parser("generate", help=COMMANDS["generate"])
    p.add_argument("--family", required=True, choices=sorted(FAMILIES), help="the family of instances")
    p.add_argument("--count", type=int_in(1, 100_000), default=10, help="how many instances (default 10)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed: the same seed, the same instances (default 0)")
    out_option(p, "folder to write the files to")
    p.set_defaults(handler=generate)


def _dimension_list(text: str) -> tuple[int, ...]:
    """``0,2`` as dimension indices."""
    try:
        dims = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be dimension indices separated by commas, got {text!r}") from None
    if any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"must be dimension indices >= 0, got {text!r}")
    return dims


def workload(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt workload``: with the cyclic garbage collector paused, as the task graph is built
    (hundreds of thousands of objects and no cycle: its passes took a third of 100,000 tasks).
    """
    from themis_opt.budget import gc_paused

    with gc_paused():
        return _workload(args, console)


def _workload(args: argparse.Namespace, console: Console) -> int:
    from themis_opt.formats.native import check_writable, in_file, load_network, save_instance
    from themis_opt.formats.workload_text import parse_workload
    from themis_opt.workloads.astra1 import Cut, task_graph
    from themis_opt.workloads.llm import LLMS
    from themis_opt.workloads.zoo import MODEL_PARALLEL, MODELS, ZooOptions, model_workload

    check_writable(args.out)
    source = load_network(args.network)
    network = source.network
    meta = source.metadata
    chunks = args.chunks
    if chunks is None:  # an ASTRA-sim import's splits, else the file's own collective's, else the layouts'
        chunks = int(meta.get("astra_splits", source.chunks if source.chunks is not None else DEFAULT_CHUNKS))
    if args.model in LLMS:
        return _llm_workload(args, console, network, chunks)
    for name in _LLM_ONLY:
        if getattr(args, name) is not None:
            raise InputError(f"--{name.replace('_', '-')}", f"is for the LLMs ({', '.join(LLMS)}), not {args.model}")
    policy = args.policy or meta.get("astra_scheduling_policy", "LIFO")
    passes = args.passes if args.passes is not None else 2
    given = [name for name in _ZOO_SIZES if getattr(args, name) is not None]
    if args.model not in MODELS and given:  # a workload file gives its own times and sizes
        option = f"--{given[0].replace('_', '-')}"
        raise InputError(option, f"is for the zoo models and LLMs, not a workload file ({args.model})")
    if args.model in MODELS and args.model_parallel is not None and args.model not in MODEL_PARALLEL:
        raise InputError("--model-parallel", f"is for {', '.join(sorted(MODEL_PARALLEL))}, not {args.model}")
    if args.model in MODELS:
        options = ZooOptions(
            **{
                field: value
                for field, value in (
                    ("batch", args.batch),
                    ("bytes_per_element", PRECISIONS.get(args.precision)),
                    ("peak_tflops", args.peak_tflops),
                    ("efficiency", args.efficiency),
                    ("model_parallel", args.model_parallel),
                )
                if value is not None
            }
        )
        workload = model_workload(args.model, options)
    elif Path(args.model).is_file():
        workload = parse_workload(args.model)
    else:
        raise InputError(args.model, f"is neither a zoo model ({', '.join([*MODELS, *LLMS])}) nor a workload file")
    cut = Cut(chunks, astra="astra_splits" in meta and args.model not in MODELS, policy=policy)
    try:
        instance = task_graph(workload, network, passes=passes, cut=cut, name=args.name)
    except InputError as error:  # the file's values, or the option that set them, made it
        if error.path == "model_parallel_NPU_group" and args.model_parallel is not None:
            raise InputError("--model-parallel", error.problem) from None
        raise error if args.model in MODELS else in_file(error, args.model) from None
    save_instance(instance, args.out)
    console.print(
        f"wrote {args.out}: {workload.parallelism}, {counted(len(workload.layers), 'layer')} x "
        f"{counted(passes, 'pass', 'passes')}: {counted(len(instance.computes), 'compute task')}, "
        f"{counted(len(instance.collectives), 'collective')}, {counted(instance.num_phases, 'phase')}"
    )
    for note in workload.notes:
        console.print(f"note: {note}")
    return 0


def _llm_workload(args: argparse.Namespace, console: Console, network: Network, chunks: int) -> int:
    from themis_opt.formats.native import save_instance
    from themis_opt.workloads.llm import LLMS, Layout, llm_task_graph

    for name in _ZOO_ONLY:
        if getattr(args, name) is not None:
            raise InputError(f"--{name.replace('_', '-')}", f"is not for the LLMs ({args.model})")
    tp, cp, ep = args.tp or 1, args.cp or 1, args.ep or 1
    given = {
        field: value
        for field, value in (
            ("data_parallel", args.data_parallel),
            ("batch", args.batch),
            ("sequence", args.seq),
            ("bytes_per_element", PRECISIONS.get(args.precision)),
            ("peak_tflops", args.peak_tflops),
            ("mfu", args.efficiency),
            ("passes", args.passes),
            ("pp", args.pp),
            ("microbatches", args.microbatches),
            ("stage_dims", args.stage_dims),
            ("sequence_parallel", args.sp),
            ("fsdp_gathers", args.fsdp_gathers),
            ("virtual_stages", args.virtual_stages),
            ("cp_attention", args.cp_attention.replace("-", "_") if args.cp_attention else None),
        )
        if value is not None
    }
    if args.fsdp_gathers is not None and not (
        given.get("data_parallel") == "fsdp" and (given.get("pp", 1) > 1 or given.get("microbatches", 1) > 1)
    ):
        raise InputError(
            "--fsdp-gathers", "is for --data-parallel fsdp with --pp or --microbatches: it changes nothing here"
        )
    dp = args.dp if args.dp is not None else max(1, network.num_npus // (tp * cp * ep * (args.pp or 1)))
    layout = Layout(tp=tp, cp=cp, ep=ep, dp=dp, chunks=chunks, **given)  # type: ignore[arg-type]
    instance = llm_task_graph(LLMS[args.model], network, layout, name=args.name)
    save_instance(instance, args.out)
    meta = dict(instance.metadata)
    console.print(
        f"wrote {args.out}: {args.model} ({int(meta['parameters']):,} parameters), {meta['layout']}, "
        f"{counted(layout.passes, 'pass', 'passes')}: {counted(len(instance.computes), 'compute task')}, "
        f"{counted(len(instance.collectives), 'collective')}, {counted(instance.num_phases, 'phase')}"
    )
    for note in filter(None, meta.get("splits", "").split("; ")):
        console.print(f"note: {note} (each part its own queue at the whole dimension's bandwidth)")
    return 0


def generate(args: argparse.Namespace, console: Console) -> int:
    """``themis-opt generate``."""
    from themis_opt.formats.native import check_folder, save_instance
    from themis_opt.generator import generate

    out = Path(args.out)
    check_folder(out)
    for instance in generate(args.family, args.count, args.seed):
        save_instance(instance, out / f"{instance.name}.json")
    console.print(f"wrote {counted(args.count, args.family + ' instance')} to {out}")
    return 0
