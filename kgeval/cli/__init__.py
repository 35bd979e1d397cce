"""The ``kgeval`` command line (``kgeval = kgeval.cli:main``)."""

from kgeval.cli.triples import COMMANDS, Command, build_parser, main

__all__ = ["COMMANDS", "Command", "build_parser", "main"]
