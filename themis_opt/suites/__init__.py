"""The bundled instance suites, shipped inside the package so ``--suite NAME`` works after any install.

The project's ``instances/`` folder is a link to this one.
"""

from __future__ import annotations

from pathlib import Path

from themis_opt.errors import InputError

SUITES = ("quick", "paper", "exact", "astra", "training", "clusters")


def suite_folder(name: str) -> Path:
    """The folder of the bundled suite ``name``."""
    if name not in SUITES:
        raise InputError("suite", f"must be one of {', '.join(SUITES)}, got {name!r}")
    folder = Path(__file__).resolve().parent / name
    if not folder.is_dir():  # pragma: no cover - a broken install
        raise InputError("suite", f"the bundled suite folder {folder} is missing (reinstall themis_opt)")
    return folder
