"""Sphinx configuration of the themis_opt docs.

Build from the project root::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package, even when it is not installed
sys.path.insert(0, str(HERE / "_ext"))  # the local extension that writes the generated tables

import themis_opt  # noqa: E402

project = "themis_opt"
author = "the themis_opt developers"
copyright = "the themis_opt developers"
version = themis_opt.__version__
release = themis_opt.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "tables",  # docs/_ext/tables.py: the parameter and stage tables, from the code
]

source_suffix = {".md": "markdown"}
smartquotes = False  # "--method" stays two hyphens wherever it is written, not an en dash
root_doc = "index"
exclude_patterns = ["_build", "_generated", "_ext", ".gitignore"]

# MyST: anchors for headings down to ###, so that [text](page.md#a-section) resolves.
myst_heading_anchors = 3

# numpy-style docstrings
napoleon_google_docstring = False
napoleon_numpy_docstring = True

autodoc_member_order = "bysource"

html_theme = "furo"
html_title = f"themis_opt {release}"
