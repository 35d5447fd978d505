"""Every ``themis-opt`` command and Python example of the README, the docs' home page and the
getting-started page runs from the repository root and exits 0.

Each ```bash block is one test: its ``themis-opt`` lines run in order, in this process (as the
console script's ``main``), in a fresh folder whose ``instances`` is the repository's, so the
files they write never land in the checkout. ``pip install`` lines and the Quick start's two
lines (an install, then every method over the quick suite: ``test_bench`` and ``test_cli`` cover
that) are skipped; a ```python block runs as a script in such a folder.

To keep the suite fast every ``solve`` runs with ``--time-limit`` at most 1 s (a Python
``time_limit=`` too) and ``bench`` at most 0.3 s a run (``CAPS``): the commands are otherwise as
written.
``THEMIS_DOCS_AS_WRITTEN=1`` runs them exactly as written (about a minute more).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from themis_opt.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs/index.md", "docs/getting-started.md")
QUICK_START = (
    "pip install -e . && themis-opt bench --suite quick",
    'pip install -e ".[dev]" && python -m pytest -q',
)
AS_WRITTEN = os.environ.get("THEMIS_DOCS_AS_WRITTEN") == "1"
CAPS = {"solve": 1.0, "bench": 0.3}  # --time-limit at most this here, unless AS_WRITTEN (bench: per run)


def _blocks(document: str, language: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of every fenced block of ``language`` in ``document``."""
    found: list[tuple[int, str]] = []
    start: int | None = None
    lines: list[str] = []
    for number, line in enumerate((ROOT / document).read_text().splitlines(), 1):
        if start is None and line.strip() == f"```{language}":
            start, lines = number, []
        elif start is not None and line.strip() == "```":
            found.append((start, "\n".join(lines)))
            start = None
        elif start is not None:
            lines.append(line)
    return found


def _commands(text: str) -> list[list[str]]:
    """The ``themis-opt`` command lines of a bash block, split as the shell splits them."""
    commands = []
    for line in text.splitlines():
        if line.strip() in QUICK_START or line.lstrip().startswith("pip install"):
            continue
        words = shlex.split(line, comments=True)
        if words and words[0] == "themis-opt":
            commands.append(words[1:])
    return commands


def _capped(argv: list[str]) -> list[str]:
    """``argv`` with its time limit at most its command's cap (a solve or bench)."""
    if AS_WRITTEN or argv[0] not in CAPS:
        return argv
    cap = CAPS[argv[0]]
    if "--time-limit" not in argv:
        return [*argv, "--time-limit", str(cap)]
    at = argv.index("--time-limit") + 1
    return [*argv[:at], str(min(float(argv[at]), cap)), *argv[at + 1 :]]


def _cases(language: str) -> list[object]:
    cases = []
    for document in DOCUMENTS:
        for line, text in _blocks(document, language):
            if language == "python" or _commands(text):
                cases.append(pytest.param(text, id=f"{document}:{line}"))
    return cases


@pytest.fixture
def root_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder that looks like the repository root to the commands: its ``instances`` is the
    repository's; everything written lands in ``tmp_path``.
    """
    (tmp_path / "instances").symlink_to(ROOT / "instances", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _needs_chakra(text: str) -> None:
    if ".yml" in text and "--workload" in text:
        pytest.importorskip(
            "chakra", reason='reading Chakra traces needs the chakra extra (pip install -e ".[chakra]")'
        )


def test_the_documents_hold_the_commands_they_promise() -> None:
    commands = {
        document: [argv for _, text in _blocks(document, "bash") for argv in _commands(text)] for document in DOCUMENTS
    }
    for document in DOCUMENTS:
        assert commands[document], document
    readme = [argv[0] for argv in commands["README.md"]]
    assert {"solve", "show", "bench", "import-astra", "workload"} <= set(readme)
    guide = " ".join(" ".join(argv) for argv in commands["docs/getting-started.md"])
    assert "--method all" in guide and "instances/astra/v1/" in guide and "instances/astra/v2/" in guide
    assert "workload llama3-8b" in guide
    for document in ("README.md", "docs/getting-started.md"):
        assert any("solve_all" in text for _, text in _blocks(document, "python")), document
    # no placeholder is left: every path a command reads exists
    for document, found in commands.items():
        for argv in found:
            for word in argv:
                if word.startswith("instances/"):
                    target = ROOT / word
                    traces = any(target.parent.glob(f"{target.name}.*.et"))
                    assert target.exists() or traces, f"{document}: {word}"


@pytest.mark.parametrize("text", _cases("bash"))
def test_a_bash_block_runs_as_written(text: str, root_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _needs_chakra(text)
    for argv in _commands(text):
        code = main(_capped(argv))
        out, err = capsys.readouterr()
        assert code == 0, f"themis-opt {shlex.join(argv)} exited {code}:\n{err}{out[-2000:]}"


@pytest.mark.parametrize("text", _cases("python"))
def test_a_python_block_runs_as_written(text: str, root_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = text if AS_WRITTEN else re.sub(r"time_limit=[0-9.]+", f"time_limit={CAPS['solve']}", text)
    exec(compile(code, "example", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip()


def _after_blocks(document: str) -> list[tuple[str, list[str]]]:
    """Each bash block's text and the lines after it, up to the next bash block or heading."""
    lines = (ROOT / document).read_text().splitlines()
    found: list[tuple[str, list[str]]] = []
    at = 0
    while at < len(lines):
        if lines[at].strip() != "```bash":
            at += 1
            continue
        end = lines.index("```", at + 1)
        after = end + 1
        while after < len(lines) and lines[after].strip() != "```bash" and not lines[after].startswith("#"):
            after += 1
        found.append(("\n".join(lines[at + 1 : end]), lines[end + 1 : after]))
        at = after
    return found


def _printed(out: str, field: str) -> str:
    """A field of ``solve``'s summary as printed (``makespan   1.2 ms`` -> ``1.2 ms``)."""
    match = re.search(rf"^{field}\s+(\S+(?: \S+)?)\s*$", out, re.MULTILINE)
    assert match, f"solve printed no {field}"
    return match.group(1).split(" (")[0]


def test_the_numbers_the_guide_shows_are_the_ones_its_commands_print(
    root_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a table of methods after solve commands: each heuristic's row (cpsat's depends on the time it
    # is given) shows the makespan and gap its command prints; a --method all table: each heuristic's
    # makespan and speedup (its gap is measured against cpsat's bound, which the time decides)
    checked = 0
    for text, after in _after_blocks("docs/getting-started.md"):
        rows = [line for line in after if line.startswith("| ") and not line.startswith("| method")]
        table = [line for line in after if line.startswith("│ ")]
        if not rows and not table:
            continue
        _needs_chakra(text)
        outputs = []
        for argv in _commands(text):
            assert main(_capped(argv)) == 0
            outputs.append((argv, capsys.readouterr().out))
        solves = [(argv, out) for argv, out in outputs if argv[0] == "solve"]
        if rows:
            assert len(rows) == len(solves), text
            for row, (argv, out) in zip(rows, solves):
                if "cpsat" in argv:
                    continue
                cells = [cell.strip() for cell in row.strip("|").split("|")]
                assert cells[1:3] == [_printed(out, "makespan"), _printed(out, "gap")], (row, shlex.join(argv))
                checked += 1
        for line in table:
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            if cells[0].startswith("cpsat"):
                continue
            found = [x for x in solves[-1][1].splitlines() if x.startswith(f"│ {cells[0]} ")]
            assert found, f"the guide shows a row {cells[0]!r} that solve does not print"
            printed = found[0]
            shown = [cell.strip() for cell in printed.strip("│").split("│")]
            assert [shown[1].rstrip("*"), shown[3]] == [cells[1].rstrip("*"), cells[3]], line
            checked += 1
    assert checked >= 8
