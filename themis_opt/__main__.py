"""``python -m themis_opt``: the ``themis-opt`` command."""

from themis_opt.cli.main import entry

entry()
