"""Hostile input, every command: each case must end clean.

    python -m bench.hostile [--only TEXT] [--work DIR] [--memory-gib 8]

Each case runs ``themis-opt`` as a user would (a new process) on files this
script writes under ``--work`` (default: a temporary folder): broken, huge,
cut or contradictory instances, results, ASTRA-sim 1.0 and 2.x files,
communicator groups, Chakra traces, program folders and options. A case ends
clean when the process exits with the status it names (2 with exactly one line
on standard error for bad input, 0 for input that is fine), prints no
traceback, is not killed by a signal, ends within its seconds, changes no
input file and leaves no temporary file behind. Each process runs with an
address-space limit of ``--memory-gib`` (default 8), so a memory bomb shows as
a failure rather than a swapped machine. Cases that need Chakra's protobuf
messages (``pip install -e ".[chakra]"``) are listed as not run without it.
The table goes to standard output; the exit status is 1 if any case is not
clean.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = ROOT / "instances" / "quick" / "homogeneous-s2-000.json"
ERROR, OK, EITHER = (2,), (0,), (0, 2)


@dataclass(frozen=True)
class Case:
    """One command line and what it must end with."""

    surface: str
    name: str
    argv: tuple[str, ...]
    exits: tuple[int, ...] = ERROR
    seconds: float = 60.0
    chakra: bool = False  # needs Chakra's protobuf messages
    interrupt: tuple[int, float] | None = None  # (signal, seconds after the start or the cue) sent to the process
    cue: str | None = None  # with interrupt: the start of a line on stderr (the argv asks --log) it waits for first
    produces: str | None = None  # a file the command must leave behind, whole JSON


@dataclass(frozen=True)
class Outcome:
    case: Case
    code: int
    seconds: float
    problems: tuple[str, ...]


class Files:
    """The inputs the cases read, written once under ``work/in``."""

    def __init__(self, work: Path) -> None:
        self.inputs = work / "in"
        self.outputs = work / "out"
        self.inputs.mkdir(parents=True, exist_ok=True)
        self.outputs.mkdir(parents=True, exist_ok=True)
        self.instance = self.copy(QUICK, "quick.json")
        self.base = json.loads(QUICK.read_text())

    def base_text(self) -> str:
        return QUICK.read_text()

    def copy(self, source: Path, name: str) -> str:
        target = self.inputs / name
        shutil.copyfile(source, target)
        return str(target)

    def text(self, name: str, text: str) -> str:
        path = self.inputs / name
        path.write_text(text)
        return str(path)

    def data(self, name: str, data: bytes) -> str:
        path = self.inputs / name
        path.write_bytes(data)
        return str(path)

    def instance_with(self, name: str, change: Callable[[dict[str, object]], None]) -> str:
        data = json.loads(json.dumps(self.base))
        change(data)
        return self.text(name, json.dumps(data))

    def out(self, name: str) -> str:
        return str(self.outputs / name)


def _set(path: str, value: object) -> Callable[[dict[str, object]], None]:
    """A change that sets the dotted ``path`` (list indices as numbers) to ``value``."""

    def change(data: dict[str, object]) -> None:
        *parents, last = path.split(".")
        node: object = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]  # type: ignore[index]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value  # type: ignore[index]

    return change


def _solved(files: Files, method: str = "themis") -> str:
    """A result file of the quick instance (made before the cases run)."""
    path = files.inputs / f"result-{method}.json"
    if not path.exists():
        subprocess.run(
            [themis_opt(), "solve", files.instance, "--method", method, "--out", str(path)],
            check=True,
            capture_output=True,
        )
    return str(path)


def instance_cases(f: Files) -> list[Case]:
    s = "instance"
    tasks = "tasks.0"
    return [
        Case(s, "empty file", ("solve", f.text("empty.json", ""))),
        Case(s, "not JSON", ("solve", f.text("notjson.json", "{network: }"))),
        Case(s, "a JSON list", ("solve", f.text("list.json", "[1, 2]"))),
        Case(s, "nested 100,000 deep", ("solve", f.text("deep.json", "[" * 100_000 + "]" * 100_000))),
        Case(s, "a number past a double", ("solve", f.instance_with("big.json", _set(f"{tasks}.size_bytes", 1e400)))),
        Case(s, "NaN", ("solve", f.text("nan.json", f.base_text().replace('"chunks": 64', '"chunks": NaN')))),
        Case(s, "negative size", ("solve", f.instance_with("neg.json", _set(f"{tasks}.size_bytes", -1)))),
        Case(s, "0 chunks", ("solve", f.instance_with("c0.json", _set(f"{tasks}.chunks", 0)))),
        Case(s, "10^9 chunks", ("solve", f.instance_with("c9.json", _set(f"{tasks}.chunks", 10**9)))),
        Case(s, "a dimension of 0 NPUs", ("solve", f.instance_with("d0.json", _set("network.dimensions.0.size", 0)))),
        Case(s, "2^40 NPUs", ("solve", f.instance_with("d40.json", _set("network.dimensions.0.size", 2**40)))),
        Case(
            s,
            "a bandwidth of 1e-300",
            ("solve", f.instance_with("bw.json", _set("network.dimensions.0.bandwidth_gbps", 1e-300))),
        ),
        Case(s, "an unknown key", ("solve", f.instance_with("key.json", _set("network.colour", "red")))),
        Case(s, "a duplicated key", ("solve", f.text("dup.json", f.base_text().replace("{", '{"name": "x", ', 1)))),
        Case(s, "a folder", ("solve", str(f.inputs))),
        Case(s, "a missing file", ("solve", str(f.inputs / "missing.json"))),
        Case(s, "bytes that are not UTF-8", ("solve", f.data("latin.json", b'{"name": "\xff\xfe"}'))),
        Case(s, "a BOM first", ("solve", f.data("bom.json", b"\xef\xbb\xbf" + f.base_text().encode())), EITHER),
        Case(s, "a dependency on itself", ("solve", f.instance_with("self.json", _set(f"{tasks}.after", ["c0"])))),
        Case(s, "a dependency on no task", ("solve", f.instance_with("dang.json", _set(f"{tasks}.after", ["zz"])))),
        Case(s, "a negative issue time", ("solve", f.instance_with("iss.json", _set(f"{tasks}.issue_ns", -5)))),
        Case(s, "an unknown kind", ("solve", f.instance_with("kind.json", _set(f"{tasks}.kind", "broadcast")))),
        Case(
            s,
            "an unknown topology",
            ("solve", f.instance_with("topo.json", _set("network.dimensions.0.topology", "mesh"))),
        ),
        Case(s, "a version from the future", ("solve", f.instance_with("v9.json", _set("version", 99)))),
        Case(s, "a gzip file", ("solve", f.data("gz.json", gzip.compress(f.base_text().encode())))),
        Case(s, "10^6 tasks", ("solve", f.instance_with("many.json", _many_tasks(10**6))), seconds=60),
    ]


def _many_tasks(n: int) -> Callable[[dict[str, object]], None]:
    def change(data: dict[str, object]) -> None:
        task = data["tasks"][0]  # type: ignore[index]
        data["tasks"] = [{**task, "id": f"c{i}", "chunks": 1} for i in range(n)]

    return change


def option_cases(f: Files) -> list[Case]:
    s = "options"
    inst = f.instance
    big = f.copy(ROOT / "instances" / "paper" / "paper-4d-r4-fc4-r4-sw16.json", "paper4d.json")
    return [
        Case(s, "--time-limit -1", ("solve", inst, "--time-limit", "-1")),
        Case(s, "--time-limit nan", ("solve", inst, "--time-limit", "nan")),
        Case(s, "--time-limit inf", ("solve", inst, "--time-limit", "inf")),
        Case(s, "--time-limit 0.01", ("solve", inst, "--method", "all", "--time-limit", "0.01"), OK, seconds=3),
        Case(s, "--time-limit 2, every method", ("solve", inst, "--method", "all", "--time-limit", "2"), OK, 4),
        Case(s, "--out equal to the input", ("solve", inst, "--out", inst)),
        Case(s, "--out in a file", ("solve", inst, "--out", inst + "/r.json")),
        Case(s, "--out a folder", ("solve", inst, "--out", str(f.inputs))),
        Case(s, "an unknown method", ("solve", inst, "--method", "magic")),
        Case(s, "--seed -1", ("solve", inst, "--method", "cpsat", "--seed", "-1", "--time-limit", "1"), EITHER, 4),
        Case(s, "--workers 0", ("solve", inst, "--method", "cpsat", "--workers", "0")),
        Case(s, "--intra for cpsat", ("solve", inst, "--method", "cpsat", "--intra", "scf")),
        Case(s, "an unknown command", ("frobnicate",)),
        Case(s, "no arguments", ()),
        Case(s, "chunks --counts 0", ("chunks", inst, "--counts", "0")),
        Case(s, "chunks --counts 2^40", ("chunks", inst, "--counts", str(2**40))),
        Case(s, "chunks --mix cpsat", ("chunks", inst, "--mix", "cpsat")),
        Case(s, "chunks --mix a method not run", ("chunks", inst, "--method", "baseline", "--mix", "themis")),
        Case(s, "chunks --out equal to the input", ("chunks", inst, "--mix", "themis", "--out", inst)),
        Case(s, "chunks --time-limit 0.001 --mix", ("chunks", inst, "--mix", "themis", "--time-limit", "0.001"), OK, 3),
        Case(s, "generate --count -1", ("generate", "--family", "homogeneous", "--count", "-1", "--out", f.out("g"))),
        Case(s, "bench an unknown suite", ("bench", "--suite", "nowhere", "--out", f.out("rows.jsonl"))),
        Case(s, "bench --time-limit 0", ("bench", "--suite", "quick", "--time-limit", "0", "--out", f.out("r0.jsonl"))),
        Case(
            s,
            "Ctrl-C during cpsat keeps its best",
            ("solve", big, "--method", "cpsat", "--time-limit", "60", "--out", f.out("int.json"), "--log"),
            (130,),
            seconds=10,
            interrupt=(signal.SIGINT, 0.5),
            cue="stage assignment search",  # a best schedule exists from here, whatever the machine's pace
            produces=f.out("int.json"),
        ),
        Case(
            s,
            "SIGTERM during every method",
            ("solve", big, "--method", "all", "--time-limit", "60", "--out", f.out("term.json")),
            (143,),
            seconds=10,
            interrupt=(signal.SIGTERM, 4.0),
        ),
    ]


def result_cases(f: Files) -> list[Case]:
    s = "results"
    result = _solved(f)
    data = json.loads(Path(result).read_text())

    def result_with(name: str, change: Callable[[dict[str, object]], None]) -> str:
        copy = json.loads(json.dumps(data))
        change(copy)
        return f.text(name, json.dumps(copy))

    other = f.instance_with("other.json", _set("tasks.0.size_bytes", 2**20))
    far = result_with("far.json", _set("schedule.chunks.0.phases.0.dim", 10**7))
    narrow = f.instance_with("narrow.json", lambda d: d["network"]["dimensions"].pop())  # type: ignore[index]
    return [
        Case(s, "validate: a result of another instance", ("validate", result, "--instance", other), (1, 2)),
        Case(
            s,
            "validate: a cut result",
            ("validate", f.text("cut.json", Path(result).read_text()[:500]), "--instance", f.instance),
        ),
        Case(
            s,
            "validate: makespan NaN",
            ("validate", result_with("nan.json", _set("makespan_ns", "NaN")), "--instance", f.instance),
        ),
        Case(s, "show: a phase on dimension 10^7", ("show", far)),
        Case(
            s,
            "show --trace: an instance that does not fit",
            ("show", result, "--instance", narrow, "--trace", f.out("t.json")),
        ),
        Case(s, "show --instance without --trace", ("show", result, "--instance", f.instance)),
        Case(s, "show: --trace over the result", ("show", result, "--trace", result)),
        Case(s, "show --width 0", ("show", result, "--width", "0")),
        Case(s, "validate: a result that is an instance", ("validate", f.instance, "--instance", f.instance)),
    ]


def astra1_cases(f: Files) -> list[Case]:
    s = "ASTRA-sim 1.0"
    net = {
        "topology-name": "Hierarchical",
        "topologies-per-dim": ["Ring", "Switch"],
        "dimensions-count": 2,
        "units-count": [4, 4],
        "links-count": [2, 1],
        "link-latency": [500, 500],
        "link-bandwidth": [50, 25],
        "dimension-type": ["N", "P"],
        "nic-latency": [0, 0],
        "router-latency": [0, 0],
        "hbm-latency": [500, 500],
        "hbm-bandwidth": [370, 370],
        "hbm-scale": [0, 0],
    }
    system = (
        "scheduling-policy: LIFO\nendpoint-delay: 10\npreferred-dataset-splits: 4\n"
        "all-reduce-implementation: ring_ring\nall-gather-implementation: ring_ring\n"
        "reduce-scatter-implementation: ring_ring\nall-to-all-implementation: direct_direct\n"
        "collective-optimization: localBWAware\n"
    )
    good_net = f.text("v1net.json", json.dumps(net))
    good_sys = f.text("v1sys.txt", system)

    def net_with(name: str, **change: object) -> str:
        return f.text(name, json.dumps({**net, **{k.replace("_", "-"): v for k, v in change.items()}}))

    def run(network: str, sys_file: str, *rest: str) -> tuple[str, ...]:
        return ("import-astra", network, sys_file, *rest, "--out", f.out("imported.json"))

    size = ("--all-reduce", "1MiB")
    micro = "MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {} 5\n"
    return [
        Case(s, "fine", run(good_net, good_sys, *size), OK),
        Case(s, "0 NPUs a dimension", run(net_with("u0.json", units_count=[0, 4]), good_sys, *size)),
        Case(s, "negative NPUs", run(net_with("un.json", units_count=[-4, 4]), good_sys, *size)),
        Case(s, "dimensions-count that disagrees", run(net_with("dc.json", dimensions_count=3), good_sys, *size)),
        Case(s, "a bandwidth of 0", run(net_with("bw0.json", link_bandwidth=[0, 25]), good_sys, *size)),
        Case(s, "an unknown topology", run(net_with("tp.json", topologies_per_dim=["Ring", "Mesh"]), good_sys, *size)),
        Case(s, "lists of other lengths", run(net_with("len.json", link_latency=[500]), good_sys, *size)),
        Case(s, "an empty system file", run(good_net, f.text("sys0.txt", ""), *size)),
        # read as 1.0 reads it, the last counts, and the import notes it
        Case(s, "a system key twice", run(good_net, f.text("sys2.txt", system + "endpoint-delay: 20\n"), *size), OK),
        Case(s, "0 splits", run(good_net, f.text("sp0.txt", system.replace("splits: 4", "splits: 0")), *size)),
        Case(
            s, "10^9 splits", run(good_net, f.text("sp9.txt", system.replace("splits: 4", "splits: 1000000000")), *size)
        ),
        Case(s, "a system line without a colon", run(good_net, f.text("colon.txt", system + "boost-mode 1\n"), *size)),
        Case(s, "a workload of no layers", run(good_net, good_sys, "--workload", f.text("w0.txt", "MICRO\n0\n"))),
        Case(s, "a workload header only", run(good_net, good_sys, "--workload", f.text("wh.txt", "DATA\n"))),
        Case(
            s,
            "more layers than lines",
            run(good_net, good_sys, "--workload", f.text("wl.txt", micro.format(2**20).replace("\n1\n", "\n3\n"))),
        ),
        Case(
            s, "a size of 10^30", run(good_net, good_sys, "--workload", f.text("w30.txt", micro.format("1" + "0" * 30)))
        ),
        Case(
            s,
            "a negative compute time",
            run(good_net, good_sys, "--workload", f.text("wn.txt", micro.format(2**20).replace("-1 5", "-1 -5"))),
        ),
        Case(
            s,
            "an unknown parallelism",
            run(good_net, good_sys, "--workload", f.text("wp.txt", micro.format(2**20).replace("MICRO", "SPATIAL"))),
        ),
        Case(s, "--passes 0", run(good_net, good_sys, *size, "--passes", "0")),
        Case(
            s,
            "--passes 10^9",
            run(good_net, good_sys, "--workload", f.text("wm.txt", micro.format(2**20)), "--passes", str(10**9)),
        ),
        Case(s, "--comm-scale -1", run(good_net, good_sys, *size, "--comm-scale", "-1")),
        Case(s, "--all-reduce 0", run(good_net, good_sys, "--all-reduce", "0")),
        Case(s, "--all-reduce 1ZiB", run(good_net, good_sys, "--all-reduce", "1ZiB")),
        Case(s, "--out over the network file", ("import-astra", good_net, good_sys, *size, "--out", good_net)),
    ]


def astra2_cases(f: Files) -> list[Case]:
    s = "ASTRA-sim 2.x"
    yml = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 50, 25 ]\nlatency: [ 500, 500 ]\n"
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring", "ring"],
        "reduce-scatter-implementation": ["ring", "ring"],
        "all-gather-implementation": ["ring", "ring"],
        "all-to-all-implementation": ["ring", "ring"],
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        "boost-mode": 0,
    }
    good_net = f.text("v2net.yml", yml)
    good_sys = f.text("v2sys.json", json.dumps(system))
    size = ("--all-reduce", "1MiB")

    def run(network: str, sys_file: str, *rest: str) -> tuple[str, ...]:
        return ("import-astra", network, sys_file, *rest, "--out", f.out("imported2.json"))

    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)
    )
    traces = trace_prefix(f)
    groups = f.text("groups.json", json.dumps({"1": [0, 1, 2, 3]}))
    cases = [
        Case(s, "fine", run(good_net, good_sys, *size), OK),
        Case(s, "a YAML alias bomb", run(f.text("bomb.yml", yml + bomb), good_sys, *size)),
        Case(
            s, "a YAML python tag", run(f.text("tag.yml", yml + "x: !!python/object:os.system 'ls'\n"), good_sys, *size)
        ),
        Case(s, "0 NPUs", run(f.text("n0.yml", yml.replace("[ 4, 4 ]", "[ 0, 4 ]")), good_sys, *size)),
        Case(s, "a YAML that is a list", run(f.text("list.yml", "- 1\n- 2\n"), good_sys, *size)),
        Case(
            s, "local-mem-bw -1", run(good_net, f.text("mem.json", json.dumps({**system, "local-mem-bw": -1})), *size)
        ),
        Case(
            s,
            "splits as true",
            run(good_net, f.text("bool.json", json.dumps({**system, "preferred-dataset-splits": True})), *size),
        ),
        Case(
            s,
            "an implementation list too long",
            run(
                good_net, f.text("long.json", json.dumps({**system, "all-reduce-implementation": ["ring"] * 3})), *size
            ),
        ),
        Case(s, "a system that is a list", run(good_net, f.text("syslist.json", "[]"), *size)),
    ]
    if traces is None:
        return cases
    prefix, rank0 = traces
    et = ("--workload", prefix)

    def trace_variant(name: str, data: bytes) -> tuple[str, ...]:
        folder = f.inputs / name
        folder.mkdir(exist_ok=True)
        for r in range(16):
            shutil.copyfile(f"{prefix}.{r}.et", folder / f"w.{r}.et")
        (folder / "w.0.et").write_bytes(data)
        return ("--workload", str(folder / "w"))

    body = Path(rank0).read_bytes()
    cases += [
        Case(s, "traces: fine", run(good_net, good_sys, *et), OK, chakra=True),
        Case(s, "traces: one cut short", run(good_net, good_sys, *trace_variant("cut", body[:-3])), chakra=True),
        Case(
            s, "traces: trailing 0xff", run(good_net, good_sys, *trace_variant("tail", body + b"\xff" * 8)), chakra=True
        ),
        Case(
            s,
            "traces: a length of 2^62",
            run(good_net, good_sys, *trace_variant("len", body + b"\xff" * 8 + b"\x3f")),
            chakra=True,
        ),
        Case(s, "traces: gzip", run(good_net, good_sys, *trace_variant("gz", gzip.compress(body))), chakra=True),
        Case(s, "traces: empty", run(good_net, good_sys, *trace_variant("empty", b"")), chakra=True),
        Case(
            s,
            "traces: random bytes",
            run(good_net, good_sys, *trace_variant("rand", hashlib.sha512(b"x").digest() * 64)),
            chakra=True,
        ),
        Case(s, "traces: a rank missing", run(good_net, good_sys, "--workload", _missing_rank(f, prefix)), chakra=True),
        Case(
            s,
            "groups: an empty group",
            run(good_net, good_sys, *et, "--comm-groups", f.text("g0.json", '{"1": []}')),
            chakra=True,
        ),
        Case(
            s,
            "groups: id 2^31",
            run(good_net, good_sys, *et, "--comm-groups", f.text("g31.json", json.dumps({str(2**31): [0, 1]}))),
            chakra=True,
        ),
        Case(
            s,
            "groups: a rank past the network",
            run(good_net, good_sys, *et, "--comm-groups", f.text("g99.json", '{"1": [0, 99]}')),
            chakra=True,
        ),
        Case(
            s,
            "groups: a rank twice",
            run(good_net, good_sys, *et, "--comm-groups", f.text("gdup.json", '{"1": [0, 0]}')),
            chakra=True,
        ),
        Case(
            s,
            "groups: not an object",
            run(good_net, good_sys, *et, "--comm-groups", f.text("glist.json", "[[0, 1]]")),
            chakra=True,
        ),
        Case(
            s,
            "groups: --groups dimensions without groups",
            run(good_net, good_sys, *et, "--groups", "dimensions"),
            chakra=True,
        ),
        Case(s, "groups: fine but unused", run(good_net, good_sys, *et, "--comm-groups", groups), EITHER, chakra=True),
    ]
    return cases


def trace_prefix(f: Files) -> tuple[str, str] | None:
    """Chakra traces of a 16-NPU all-reduce written by ``export-astra --version 2``; ``None`` without Chakra."""
    if importlib.util.find_spec("chakra") is None:
        return None
    folder = f.inputs / "export2"
    if not folder.exists():
        small = f.instance_with(
            "small.json",
            lambda d: d.update(
                network={
                    "dimensions": [
                        {"name": "a", "size": 4, "topology": "ring", "bandwidth_gbps": 50, "latency_ns": 500},
                        {"name": "b", "size": 4, "topology": "switch", "bandwidth_gbps": 25, "latency_ns": 500},
                    ]
                },
                tasks=[{"id": "c0", "kind": "all_reduce", "size_bytes": 2**20, "chunks": 4}],
            ),
        )
        subprocess.run(
            [themis_opt(), "export-astra", small, "--version", "2", "--out", str(folder)],
            check=True,
            capture_output=True,
        )
    ets = sorted(folder.glob("*.0.et"))
    if not ets:
        return None
    prefix = str(ets[0])[: -len(".0.et")]
    return prefix, str(ets[0])


def _missing_rank(f: Files, prefix: str) -> str:
    folder = f.inputs / "missing-rank"
    folder.mkdir(exist_ok=True)
    for r in range(16):
        if r != 5:
            shutil.copyfile(f"{prefix}.{r}.et", folder / f"w.{r}.et")
    return str(folder / "w")


def workload_cases(f: Files) -> list[Case]:
    s = "workload"
    net = f.instance_with(
        "llmnet.json",
        lambda d: d.update(
            network={
                "dimensions": [
                    {"name": "nv", "size": 8, "topology": "switch", "bandwidth_gbps": 900, "latency_ns": 500},
                    {"name": "rail", "size": 8, "topology": "switch", "bandwidth_gbps": 400, "latency_ns": 1000},
                ]
            },
            tasks=[],
        ),
    )

    def run(*rest: str) -> tuple[str, ...]:
        return ("workload", "llama3-8b", "--network", net, *rest, "--out", f.out("llm.json"))

    return [
        Case(s, "fine", run("--tp", "8"), OK),
        Case(s, "--pp 64 for 32 blocks", run("--pp", "64")),
        Case(s, "--tp 3", run("--tp", "3")),
        Case(s, "--batch 10^9", run("--batch", str(10**9))),
        Case(s, "--seq 10^12", run("--seq", str(10**12))),
        Case(
            s,
            "4096 microbatches x 100 passes",
            (
                "workload",
                "llama3-8b",
                "--network",
                net,
                "--pp",
                "2",
                "--microbatches",
                "4096",
                "--passes",
                "100",
                "--out",
                f.out("big.json"),
            ),
        ),
        Case(s, "--network a folder", ("workload", "llama3-8b", "--network", str(f.inputs), "--out", f.out("x.json"))),
        Case(s, "an unknown model", ("workload", "llama9-1t", "--network", net, "--out", f.out("x.json"))),
        Case(s, "--tp 0", run("--tp", "0")),
        Case(s, "--efficiency 2", run("--efficiency", "2")),
        Case(s, "--chunks 0", run("--chunks", "0")),
        Case(s, "--out over the network", ("workload", "llama3-8b", "--network", net, "--out", net)),
        Case(s, "--cp that the sequence does not divide", run("--tp", "8", "--cp", "8", "--seq", "1001")),
        Case(s, "--cp 3", run("--cp", "3")),
        Case(s, "--cp-attention ring without --cp", run("--cp-attention", "ring")),
        Case(s, "--cp-attention ring over two dimensions", run("--tp", "4", "--cp", "4", "--cp-attention", "ring")),
        Case(s, "--cp-attention ring", run("--tp", "8", "--cp", "2", "--cp-attention", "ring"), OK),
        Case(s, "--virtual-stages without stages", run("--virtual-stages", "2")),
        Case(
            s,
            "--virtual-stages, microbatches not a multiple",
            run("--pp", "2", "--microbatches", "3", "--virtual-stages", "2"),
        ),
        Case(
            s,
            "--virtual-stages x --pp over the blocks",
            run("--pp", "8", "--microbatches", "8", "--virtual-stages", "8"),
        ),
        Case(s, "--fsdp-gathers with ddp", run("--pp", "2", "--fsdp-gathers", "microbatch")),
        Case(s, "a stage split", run("--tp", "4", "--pp", "4", "--data-parallel", "fsdp", "--microbatches", "4"), OK),
    ]


def export_cases(f: Files) -> list[Case]:
    s = "exports"
    result = _solved(f)
    full = f.inputs / "full"
    full.mkdir(exist_ok=True)
    (full / "keep.txt").write_text("mine")

    def ring_all_to_all(data: dict[str, object]) -> None:  # a ring's relayed all-to-all: no program for it
        _set("tasks.0.kind", "all_to_all")(data)
        _set("network.dimensions.0.topology", "ring")(data)
        _set("network.dimensions.0.algorithm", "ring")(data)
        _set("network.dimensions.0.all_to_all_algorithm", "ring")(data)

    a2a = f.instance_with("a2a.json", ring_all_to_all)
    a2a_result = f.inputs / "a2a-result.json"
    if not a2a_result.exists():
        subprocess.run([themis_opt(), "solve", a2a, "--out", str(a2a_result)], check=True, capture_output=True)

    def ring_groups(data: dict[str, object]) -> None:  # rings over communicator groups: no MSCCL program
        _set("tasks.0.group", [0, 1, 64, 65])(data)
        _set("tasks.0.chunks", 2)(data)

    rings = f.instance_with("rings.json", ring_groups)
    rings_result = f.inputs / "rings-result.json"
    if not rings_result.exists():
        subprocess.run([themis_opt(), "solve", rings, "--out", str(rings_result)], check=True, capture_output=True)

    def two_collectives(data: dict[str, object]) -> None:  # MSCCL writes one collective call, named
        tasks = data["tasks"]
        assert isinstance(tasks, list)
        tasks[0]["chunks"] = 2
        tasks.append({**tasks[0], "id": "c1", "issue_ns": 1000})

    two = f.instance_with("two.json", two_collectives)
    two_result = f.inputs / "two-result.json"
    if not two_result.exists():
        subprocess.run([themis_opt(), "solve", two, "--out", str(two_result)], check=True, capture_output=True)
    two_msccl = ("export-program", str(two_result), "--instance", two, "--format", "msccl")
    empty = f.inputs / "empty-folder"
    empty.mkdir(exist_ok=True)
    return [
        Case(s, "export-astra into a folder that holds files", ("export-astra", f.instance, "--out", str(full))),
        Case(s, "export-program --format msccl of two collectives, none named", (*two_msccl, "--out", f.out("p5"))),
        Case(
            s,
            "export-program --format msccl --collective of no such id",
            (*two_msccl, "--collective", "c9", "--out", f.out("p6")),
        ),
        Case(
            s,
            "export-program --collective without --format msccl",
            ("export-program", str(two_result), "--instance", two, "--collective", "c1", "--out", f.out("p7")),
        ),
        Case(
            s,
            "export-program --format msccl of rings over communicator groups",
            ("export-program", str(rings_result), "--instance", rings, "--format", "msccl", "--out", f.out("p4")),
        ),
        Case(s, "export-astra --out the instance", ("export-astra", f.instance, "--out", f.instance)),
        Case(
            s,
            "export-program of a ring's all-to-all",
            ("export-program", str(a2a_result), "--instance", a2a, "--out", f.out("p1")),
        ),
        Case(
            s, "export-program of another instance", ("export-program", result, "--instance", a2a, "--out", f.out("p2"))
        ),
        Case(
            s,
            "export-program --max-steps 0",
            (
                "export-program",
                result,
                "--instance",
                f.instance,
                "--format",
                "msccl",
                "--max-steps",
                "0",
                "--out",
                f.out("p3"),
            ),
        ),
        Case(
            s,
            "export-program into the input folder",
            ("export-program", result, "--instance", f.instance, "--out", str(f.inputs)),
        ),
        Case(s, "check-program of an empty folder", ("check-program", str(empty))),
        Case(s, "check-program of a file", ("check-program", f.instance)),
        Case(s, "check-program: program.json garbage", ("check-program", _garbage_program(f))),
        *_broken_program_cases(f, result),
    ]


def _broken_program_cases(f: Files, result: str) -> list[Case]:
    """Exported programs broken after the export: every dependency of MSCCL's XML dropped, the XML cut in
    half, a Chakra file of the ASTRA-sim folder cut in half, its description stating 10^15 nodes.
    """
    s = "exports"

    def small(data: dict[str, object]) -> None:  # MSCCL's executor takes the quick instance's whole program
        _set("network.dimensions.0.size", 4)(data)
        _set("network.dimensions.0.topology", "fully_connected")(data)
        _set("network.dimensions.0.algorithm", "direct")(data)
        _set("tasks.0.chunks", 4)(data)

    instance = f.instance_with("small.json", small)
    small_result = f.inputs / "small-result.json"
    msccl, astra = f.inputs / "msccl", f.inputs / "astra"
    if not small_result.exists():
        subprocess.run([themis_opt(), "solve", instance, "--out", str(small_result)], check=True, capture_output=True)
    exports = (
        (msccl, (str(small_result), "--instance", instance, "--format", "msccl")),
        (astra, (result, "--instance", f.instance)),
    )
    for folder, argv in exports:
        if not folder.exists():
            command = [themis_opt(), "export-program", *argv, "--out", str(folder)]
            subprocess.run(command, check=True, capture_output=True)
    xml = (msccl / "program.xml").read_text()
    unordered = f.inputs / "msccl-unordered"
    cut_xml, cut_et, huge = f.inputs / "msccl-cut", f.inputs / "astra-cut", f.inputs / "astra-huge"
    for source, target in ((msccl, unordered), (msccl, cut_xml), (astra, cut_et), (astra, huge)):
        if not target.exists():
            shutil.copytree(source, target)
    meta = json.loads((astra / "program.json").read_text())
    (huge / "program.json").write_text(json.dumps({**meta, "nodes": 10**15}))  # more than any memory holds
    (unordered / "program.xml").write_text(re.sub(r'depid="\d+" deps="\d+"', 'depid="-1" deps="-1"', xml))
    (cut_xml / "program.xml").write_text(xml[: len(xml) // 2])
    et = (astra / "program.5.et").read_bytes()
    (cut_et / "program.5.et").write_bytes(et[: len(et) // 2])
    return [
        Case(s, "check-program: MSCCL without its dependencies", ("check-program", str(unordered))),
        Case(s, "check-program: MSCCL XML cut in half", ("check-program", str(cut_xml))),
        Case(s, "check-program: a Chakra file cut in half", ("check-program", str(cut_et))),
        Case(s, "check-program: program.json states 10^15 nodes", ("check-program", str(huge))),
    ]


def _garbage_program(f: Files) -> str:
    folder = f.inputs / "garbage-program"
    folder.mkdir(exist_ok=True)
    (folder / "program.json").write_text('{"npus": -1, "collectives": "x"}')
    return str(folder)


def themis_opt() -> str:
    found = shutil.which("themis-opt")
    if found is None:
        raise SystemExit("themis-opt is not installed: pip install -e .")
    return found


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and a digest of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def run(case: Case, files: Files, memory_gib: float) -> Outcome:
    before = snapshot(files.inputs)
    limit = int(memory_gib * 2**30)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal starts it, whoever started this script

    began = time.perf_counter()
    with subprocess.Popen(
        [themis_opt(), *case.argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        preexec_fn=cap,
        cwd=files.outputs,
    ) as process:
        early = ""  # stderr read while waiting for the cue
        if case.interrupt is not None:
            if case.cue is not None:
                assert process.stderr is not None
                for line in process.stderr:
                    early += line
                    if line.startswith(case.cue):
                        break
            time.sleep(case.interrupt[1])
            process.send_signal(case.interrupt[0])
        try:
            out, err = process.communicate(timeout=case.seconds + 30)
            err = early + err
            code = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            code, err = -9, "(killed: no end)"
    seconds = time.perf_counter() - began
    problems = []
    if code not in case.exits:
        problems.append(f"exit {code}, wanted {'/'.join(map(str, case.exits))}")
    if "Traceback" in out + err:
        problems.append("traceback")
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 2 and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr")
    if seconds > case.seconds:
        problems.append(f"{seconds:.1f} s > {case.seconds:g} s")
    if case.produces is not None:
        try:
            json.loads(Path(case.produces).read_text())
        except (OSError, ValueError) as error:
            problems.append(f"no whole {Path(case.produces).name}: {type(error).__name__}")
    if snapshot(files.inputs) != before:
        problems.append("an input changed")
    temps = [p for p in files.inputs.parent.rglob("*") if p.name.endswith(".tmp") or ".tmp." in p.name]
    if temps:
        problems.append(f"temporary files left: {temps[0].name}")
        for p in temps:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    if problems:
        problems.append(f"stderr: {(lines[-1] if lines else '')[:160]}")
    return Outcome(case, code, seconds, tuple(problems))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only the cases whose surface or name holds this text")
    parser.add_argument("--work", type=Path, help="folder for the cases' files (default: a temporary one)")
    parser.add_argument("--memory-gib", type=float, default=8.0, help="address-space limit a process (default 8)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        files = Files(work)
        makers = (instance_cases, option_cases, result_cases, astra1_cases, astra2_cases, workload_cases, export_cases)
        cases = [c for make in makers for c in make(files) if args.only in f"{c.surface} {c.name}"]
        chakra = importlib.util.find_spec("chakra") is not None
        print("| surface | case | exit | seconds | verdict |")
        print("|---|---|---|---|---|")
        bad = 0
        for case in cases:
            if case.chakra and not chakra:
                print(f"| {case.surface} | {case.name} | | | not run: needs Chakra |")
                continue
            outcome = run(case, files, args.memory_gib)
            bad += bool(outcome.problems)
            verdict = "clean" if not outcome.problems else "NOT CLEAN: " + "; ".join(outcome.problems)
            print(f"| {case.surface} | {case.name} | {outcome.code} | {outcome.seconds:.2f} | {verdict} |", flush=True)
        print(f"\n{len(cases)} cases, {len(cases) - bad} clean", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
