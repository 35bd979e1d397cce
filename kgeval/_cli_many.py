"""``kgeval evaluate-many``: the built-in graph-conditioned baseline over many graphs in one run -- one row per graph
and the group averages (:func:`kgeval.many.evaluate_many`; docs/inductive.md, "Many graphs in one run")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kgeval._checks import check_writable_file
from kgeval.datasets import shared_data_dir
from kgeval.many import evaluate_many
from kgeval.models.graph_baseline import NeighbourhoodBaseline

__all__ = ["DEFAULT_SETS", "add_many_arguments", "run_many"]

#: the shared inductive sets evaluated when --datasets is not given (those present)
DEFAULT_SETS: tuple[str, ...] = ("ILPC2022-small", "ILPC2022-large", "InGram-NL-0", "InGram-NL-25", "InGram-NL-100",
                                 "InGram-WK-25")  # fmt: skip
#: the models the command builds without a checkpoint
MODELS = {"baseline": NeighbourhoodBaseline}


def add_many_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", choices=tuple(MODELS), default="baseline",
        help="the model: the built-in graph-conditioned baseline (kgeval.models.NeighbourhoodBaseline, no training, "
        "no checkpoint), evaluated zero-shot on each graph (default: baseline)")  # fmt: skip
    add("--datasets", nargs="+", metavar="NAME_OR_PATH",
        help=f"the graphs (shipped or shared names, or folders; triples, inductive or fully inductive); default: "
        f"the shared sets {', '.join(DEFAULT_SETS)} that are present")  # fmt: skip
    add("--split", choices=("test", "valid"), default="test", help="the split of every graph (default: test)")
    add("--validation-filter", choices=("inference", "inference+test"), default="inference",
        help="inductive and fully inductive sets' validation filter: kgeval's and ILPC's (the inference graph) or "
        "InGram's / ULTRA's (with the test triples too)")  # fmt: skip
    add("--json", action="store_true", help="print the table and the averages as one JSON object")
    add("--csv", metavar="PATH", help="also write the per-graph table to PATH (CSV)")
    add("--no-progress", action="store_true", help="hide the progress bar over the graphs")


def run_many(args: argparse.Namespace) -> int:
    """Evaluate the chosen model over the graphs; print the per-graph table and the group averages."""
    if args.csv:
        check_writable_file(args.csv, "--csv")
    names = args.datasets or _present_default_sets()
    if not names:
        raise ValueError(f"no dataset to evaluate: none of the shared sets {', '.join(DEFAULT_SETS)} is present "
                         "(name the shared folder with KGEVAL_SHARED_DATA, or pass --datasets)")  # fmt: skip
    model = MODELS[args.model]
    many = evaluate_many(lambda dataset: model(), names, split=args.split, validation_filter=args.validation_filter,
                         use_tqdm=not (args.no_progress or args.json))  # fmt: skip
    if args.csv:
        many.table.to_csv(args.csv, index=False, float_format="%.17g")
    if args.json:
        print(json.dumps(many.to_dict(), allow_nan=False))
        return 0
    print(f"== {args.model} on {len(many.table)} graph(s), {args.split} split, filtered; pessimistic ranks (the "
          "field's code) beside realistic; tied: share of tasks whose true answer ties another candidate ==")
    print(many.to_text())
    if args.csv:
        print(f"(the per-graph table is in {args.csv})")
    return 0


def _present_default_sets() -> list[str]:
    """The default shared sets found (each absent one named on stderr)."""
    root = shared_data_dir()
    present = [name for name in DEFAULT_SETS if root is not None and (root / name).is_dir()]
    absent = [name for name in DEFAULT_SETS if name not in present]
    if absent and present:
        where = "no shared data folder" if root is None else f"not in {Path(root)}"
        print(f"kgeval evaluate-many: skipped {', '.join(absent)} ({where})", file=sys.stderr)
    return present
