"""Command-line interface: ``kgeval <command> [options]`` (also ``python -m kgeval``).

Commands are registered in :data:`COMMANDS`: each has a function that adds its options to a sub-parser and a
function that runs it and returns the exit status. To add a command, write both and add one entry.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


class Command(NamedTuple):
    """One sub-command: its help line, how to add its options, how to run it (returns the exit status)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    """An argparse ``type`` accepting numbers > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


# -- demo ----------------------------------------------------------------------------------------------


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        default="umls",
        metavar="NAME_OR_PATH",
        help="shipped dataset (umls, kinship, nations), a folder of train/valid/test TSV files, or a dataset "
        "name in the shared data folder (default: %(default)s)",
    )
    add = parser.add_argument
    add("--epochs", type=_int_at_least(0), default=10, help="training epochs (default: %(default)s)")
    add("--dim", type=_int_at_least(1), default=64, help="embedding dimension (default: %(default)s)")
    add("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    add("--batch-size", type=_int_at_least(1), default=256, help="training batch size (default: %(default)s)")
    add("--lr", type=_positive_float, default=0.01, help="Adam learning rate (default: %(default)s)")
    add(
        "--threads",
        type=_int_at_least(1),
        default=None,
        help="CPU threads for PyTorch (default: PyTorch's choice); 1 is fastest for these small models "
        "on a busy machine",
    )
    add("--no-progress", action="store_true", help="hide the progress bars")


def _run_demo(args: argparse.Namespace) -> int:
    """Train DistMult, evaluate valid and test in the filtered setting, print the result tables."""
    from kgeval.datasets import load_dataset

    try:
        dataset = load_dataset(args.dataset)
    except (FileNotFoundError, ValueError) as error:
        print(f"kgeval demo: error: {error}", file=sys.stderr)
        return 2

    import torch

    from kgeval import RankBasedEvaluator
    from kgeval.models import DistMult
    from kgeval.training import train_model

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    progress = not args.no_progress
    print(
        f"Dataset {dataset.name}: {dataset.num_entities} entities, {dataset.num_relations} relations, "
        f"{len(dataset.train)} / {len(dataset.valid)} / {len(dataset.test)} train / valid / test triples"
    )

    model = DistMult(dataset.num_entities, dataset.num_relations, dim=args.dim, seed=args.seed)
    start = time.perf_counter()
    losses = train_model(
        model,
        dataset.train,
        num_epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        use_tqdm=progress,
    )
    loss_text = f", loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""
    elapsed = time.perf_counter() - start
    print(f"Trained DistMult (dim={args.dim}) for {args.epochs} epochs in {elapsed:.1f} s{loss_text}")

    evaluator = RankBasedEvaluator(filtered=True, ks=(1, 3, 5, 10))
    runs = (
        ("valid", dataset.valid, [dataset.train, dataset.valid], "train + valid"),
        ("test", dataset.test, [dataset.train, dataset.valid, dataset.test], "train + valid + test"),
    )
    for split, triples, filter_triples, filter_text in runs:
        start = time.perf_counter()
        results = evaluator.evaluate(model, triples, additional_filter_triples=filter_triples, use_tqdm=progress)
        elapsed = time.perf_counter() - start
        print()
        print(f"== {split}: {len(triples)} triples, filtered by {filter_text}, evaluated in {elapsed:.2f} s ==")
        print(results)
    return 0


#: The sub-commands, by name.
COMMANDS: dict[str, Command] = {
    "demo": Command(
        help="train DistMult on a small dataset and print filtered valid / test metrics",
        add_arguments=_add_demo_arguments,
        run=_run_demo,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``kgeval`` argument parser with one sub-parser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="kgeval",
        description="Rank-based link-prediction evaluation of knowledge-graph-embedding models.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub)
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
        The exit status (0 on success). Usage errors exit through argparse (status 2).
    """
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].run(args)
