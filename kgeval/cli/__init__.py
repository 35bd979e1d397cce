"""The ``kgeval`` command line: ``kgeval <command> [options]`` (also ``python -m kgeval``; the console script is
``kgeval = kgeval.cli:main``).

Commands are registered in :data:`COMMANDS`: each has a function that adds its options to a sub-parser and a
function that runs it and returns the exit status, in a module of this package by the kind of data it serves
(:mod:`~kgeval.cli.triples`, :mod:`~kgeval.cli.temporal`, :mod:`~kgeval.cli.inductive`, :mod:`~kgeval.cli.many`,
:mod:`~kgeval.cli.report`, :mod:`~kgeval.cli.classification`). To add a command, write both there and add one
entry here. Only ``kgeval.__main__`` imports this package; nothing of kgeval below it does.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from kgeval.cli._common import int_at_least, one_line, version
from kgeval.cli.classification import add_classify_arguments, run_classify
from kgeval.cli.many import add_many_arguments, run_many
from kgeval.cli.report import add_report_arguments, run_report
from kgeval.cli.triples import (
    add_audit_arguments,
    add_demo_arguments,
    add_evaluate_arguments,
    add_strat_arguments,
    run_audit,
    run_demo,
    run_evaluate,
    run_strat,
)

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


class Command(NamedTuple):
    """One sub-command: its help line, how to add its options, how to run it (returns the exit status)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """--threads: the CPU threads of a command (every command trains or evaluates; set in :func:`main`)."""
    parser.add_argument("--threads", type=int_at_least(1), default=None,
                        help="CPU threads for PyTorch, at most (default: the cores the machine has free, for the "
                        "demo's training and every evaluation); 1 is fastest for small models on a busy "
                        "machine")  # fmt: skip


#: The sub-commands, by name.
COMMANDS: dict[str, Command] = {
    "demo": Command(
        help="train DistMult on a small dataset (TNTComplEx on a folder of quadruples, a relation-context model on "
        "an inductive folder) and print filtered valid / "
        "test metrics",
        add_arguments=add_demo_arguments,
        run=run_demo,
    ),
    "evaluate": Command(
        help="print the metrics of a saved model on a dataset split, or of a rank table",
        add_arguments=add_evaluate_arguments,
        run=run_evaluate,
    ),
    "evaluate-many": Command(
        help="evaluate one model (the built-in graph-conditioned baseline, a checkpoint, a factory) over many graphs "
        "(transductive, inductive, fully inductive): one row per graph and the group averages, resumable",
        add_arguments=add_many_arguments,
        run=run_many,
    ),
    "audit": Command(
        help="is a number on this dataset worth reporting? leakage, relation pairs, coverage, a rule-only baseline",
        add_arguments=add_audit_arguments,
        run=run_audit,
    ),
    "strat": Command(
        help="popularity-stratified hits@k and MRR (Mohamed et al. 2020) of a checkpoint or exported ranks",
        add_arguments=add_strat_arguments,
        run=run_strat,
    ),
    "classify": Command(
        help="triple classification of a saved model: thresholds fitted on labelled valid triples, accuracy, F1, "
        "ROC-AUC and AP of the labelled test triples (CoDEx's negatives files, or WN11 / FB13's labelled files)",
        add_arguments=add_classify_arguments,
        run=run_classify,
    ),
    "report": Command(
        help="one self-contained HTML page of saved rank tables: headline with intervals, ties, rank charts, per "
        "relation, paired tests",
        add_arguments=add_report_arguments,
        run=run_report,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``kgeval`` argument parser with one sub-parser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="kgeval",
        description="Rank-based link-prediction evaluation of knowledge-graph-embedding models.",
    )
    parser.add_argument("--version", action="version", version=f"kgeval {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub)
        _add_threads_argument(sub)  # every command trains or evaluates
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kgeval`` command line.

    Parameters
    ----------
    argv : sequence of str, default=None
        Arguments without the program name; None reads ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0 on success, 2 for bad input (a one-line ``kgeval <command>: error: ...`` on stderr:
        corrupt data, empty splits, bad checkpoints or rank files, unwritable paths). Usage errors exit through
        argparse (status 2).
    """
    args = build_parser().parse_args(argv)
    if getattr(args, "threads", None) is not None:
        torch.set_num_threads(args.threads)
    shown = warnings.formatwarning
    warnings.formatwarning = _one_line_warning(args.command)
    try:
        return COMMANDS[args.command].run(args)
    except (ValueError, TypeError, OSError) as error:  # bad data, checkpoints or paths: one line, no traceback
        print(f"kgeval {args.command}: error: {one_line(error)}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = shown


def _one_line_warning(command: str) -> Callable[..., str]:
    """A :func:`warnings.formatwarning` for the command line: ``kgeval <command>: <Category>: <message>`` on one
    line, without the Python source line Python's default prints under it (a warning shown on stderr goes through
    it; one recorded by ``warnings.catch_warnings(record=True)`` does not)."""

    def format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                       line: str | None = None) -> str:  # fmt: skip
        return f"kgeval {command}: {category.__name__}: {' '.join(str(message).split())}\n"

    return format_warning
