"""The themis-opt command line: one subcommand per job (``themis-opt --help`` lists them).

Each command family is a module of this package that registers its parsers
and handlers (:data:`COMMANDS`); the library does the work. Bad input (files,
JSON, arguments) prints one line ``themis-opt: error: ...`` to standard
error and exits with status 2; a library error that names one of the
library's fields (``tp``) names the command's option instead (``--tp``).
Modules are imported where a command needs them, so a command that needs no
solver does not load one.
"""

from themis_opt.cli.main import COMMANDS, build_parser, entry, main

__all__ = ["COMMANDS", "build_parser", "entry", "main"]
