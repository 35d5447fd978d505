"""The package's public names (themis_opt/__init__.py), imported on first use."""

from __future__ import annotations

import subprocess
import sys

# In a fresh interpreter: every submodule imported first, in the order pkgutil lists them, then
# every public name read from the package must be the object its module defines (a submodule
# named like a public name would hide it once imported).
_CHECK = """
import importlib, pkgutil, types
import themis_opt
names = themis_opt.__all__
{first}
for name in names:
    value = getattr(themis_opt, name)
    assert not isinstance(value, types.ModuleType), name
    module = importlib.import_module(themis_opt._exports()[name])
    assert value is getattr(module, name), name
print(len(names))
"""

_EVERY_SUBMODULE = """
for info in pkgutil.walk_packages(themis_opt.__path__, "themis_opt."):
    last = info.name.rsplit(".", 1)[-1]
    if not last.startswith("_") and last not in ("plot", "cluster"):  # _simcore is C; the optional extras
        importlib.import_module(info.name)
"""


def _check(first: str) -> int:
    script = _CHECK.format(first=first)
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, process.stderr
    return int(process.stdout)


def test_every_public_name_is_its_object_after_every_submodule_is_imported() -> None:
    assert _check(_EVERY_SUBMODULE) > 20


def test_every_public_name_is_its_object_whatever_is_read_first() -> None:
    # solve_all's module also holds solve: reading it first must not leave a module as solve
    assert _check("themis_opt.solve_all; themis_opt.load_instance") == _check("")


def _imports() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports (anywhere in it, lazily too)."""
    import ast
    from pathlib import Path

    root = Path(__file__).parent.parent / "themis_opt"
    files = {
        ".".join(("themis_opt", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                submodules = {f"{base}.{alias.name}" for alias in node.names} & files.keys()
                found |= submodules | ({base} if len(submodules) < len(node.names) else set())
        graph[module] = {m for m in found if m in files and m != module}
    return graph


def test_no_module_imports_a_package_that_holds_it() -> None:
    graph = _imports()
    upward = sorted((m, i) for m, imported in graph.items() for i in imported if m.startswith(i + "."))
    assert upward == []


def test_the_package_has_no_import_cycle() -> None:
    graph = _imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        path.append(module)
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                cycles.append([*path[path.index(other) :], other])
            elif other not in state:
                visit(other, path)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert cycles == []


def test_the_package_lists_its_names_and_version() -> None:
    import themis_opt

    assert dir(themis_opt) == sorted([*themis_opt.__all__, "__version__"])
    assert "solve" in themis_opt.__all__ and "Any" not in dir(themis_opt)
    assert themis_opt.__version__.count(".") == 2


def _unit(module: str) -> str:
    """The subpackage or top-level module that holds ``module`` (``themis_opt.sim.core``: ``themis_opt.sim``)."""
    return ".".join(module.split(".")[:2])


def _units() -> dict[str, set[str]]:
    """Each subpackage (or top-level module) and the others it imports."""
    graph: dict[str, set[str]] = {}
    for module, imported in _imports().items():
        graph.setdefault(_unit(module), set()).update(
            _unit(i) for i in imported if _unit(i) != _unit(module) and i != "themis_opt"
        )
    return graph


def test_no_cycle_between_subpackages() -> None:
    import networkx as nx

    graph = nx.DiGraph([(a, b) for a, imported in _units().items() for b in imported])
    assert sorted(nx.simple_cycles(graph)) == []


def test_the_simulator_imports_nothing_above_it() -> None:
    above = {"methods", "bounds", "search", "cpsat", "pipeline", "heuristics", "solving", "formats", "workloads"}
    above |= {"cli", "bench", "report", "plot"}
    assert _units()["themis_opt.sim"] & {f"themis_opt.{name}" for name in above} == set()


def test_no_file_format_runs_the_simulator() -> None:
    # a format may read the queue policies' names and the compiled model's phase plans; no engine
    graph = _imports()
    formats = {m: imported for m, imported in graph.items() if m.startswith("themis_opt.formats")}
    running = {i for imported in formats.values() for i in imported if _unit(i) == "themis_opt.sim"}
    assert running <= {"themis_opt.sim.queues", "themis_opt.sim.model"}


def test_no_private_name_is_imported_across_subpackages() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).parent.parent / "themis_opt"
    crossing = []
    for path in root.rglob("*.py"):
        module = ".".join(("themis_opt", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("themis_opt"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private and _unit(node.module or "") != _unit(module):
                    crossing.append((module, node.module, private))
    assert crossing == []


def test_cpsat_is_set_up_and_run_in_one_place() -> None:
    # one adapter (cpsat/solver.py) constructs CP-SAT's solver and its parameters for every run
    from pathlib import Path

    root = Path(__file__).parent.parent / "themis_opt"
    made = {
        call: sorted(str(p.relative_to(root)) for p in root.rglob("*.py") for _ in range(p.read_text().count(call)))
        for call in ("CpSolver(", "SolveWrapper(", "SatParameters(")
    }
    assert made == {"CpSolver(": [], "SolveWrapper(": ["cpsat/solver.py"], "SatParameters(": ["cpsat/solver.py"]}


def test_no_python_module_is_over_600_lines() -> None:
    from pathlib import Path

    root = Path(__file__).parent.parent / "themis_opt"
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_benchmarks_and_experiments_import_no_private_name_of_the_package() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).parent.parent / "bench"
    private = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("themis_opt"):
                private += [(str(path), a.name) for a in node.names if a.name.startswith("_")]
    assert private == []
