"""ASTRA-sim's input files in and out.

:func:`import_astra` reads a network file, a system file and, for ASTRA-sim
1.0, a workload file of any parallelism into one instance, timed as
ASTRA-sim times it (:mod:`themis_opt.formats.astra.v1`; 2.x networks and systems
with one all-reduce: :mod:`themis_opt.formats.astra.v2`). :func:`export_astra`
writes the files that make ASTRA-sim run an instance
(:mod:`themis_opt.formats.astra.export`). The network file's suffix tells the
version: ``.json`` for 1.0, ``.yml`` or ``.yaml`` for 2.x.
"""

from themis_opt.formats.astra.export import export_astra
from themis_opt.formats.astra.files import parse_size
from themis_opt.formats.astra.importer import import_astra

__all__ = ["export_astra", "import_astra", "parse_size"]
