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
