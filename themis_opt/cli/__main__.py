"""``python -m themis_opt.cli``: the ``themis-opt`` command."""

from themis_opt.cli.main import entry

entry()
