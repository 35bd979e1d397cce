"""``kgeval report``: one self-contained HTML page from saved rank tables (``kgeval evaluate --save-ranks``)."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from kgeval._checks import check_writable_file
from kgeval.audit import audit_dataset
from kgeval.datasets import load_dataset
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.records import read_ranks
from kgeval.report import labels_from_frames, write_report
from kgeval.results import RankBasedMetricResults

__all__ = ["add_report_arguments", "run_report"]


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``kgeval report``."""
    add = parser.add_argument
    tables = "rank tables (.csv, .csv.gz, .tsv, .parquet) as `kgeval evaluate --save-ranks` writes them, one per model"
    add("--ranks", nargs="+", metavar="PATH", help=tables + " (required)")
    add("--names", nargs="+", metavar="NAME", help="a name per rank table (default: the file names)")
    dataset = "the evaluated dataset: adds its audit card and the popularity-stratified curves (counted on train)"
    add("--dataset", metavar="NAME_OR_FOLDER", help=dataset)
    add("--no-rule-baseline", action="store_true", help="leave the rule-only baseline out of the audit card")
    add("--min-count", type=float, metavar="N", help="floor popularity count of the stratified curves for entities "
        "absent from train (without it the curves are left out where some are)")  # fmt: skip
    add("--title", help="the page title")
    add("--ks", type=int, nargs="+", default=[1, 3, 10], help="k of hits@k (default: 1 3 10)")
    add("--resamples", type=int, default=1000, help="bootstrap resamples of intervals and tests (default: 1000)")
    add("--output", "-o", metavar="HTML", help="the page to write (required)")


def run_report(args: argparse.Namespace) -> int:
    """Write the report; 0 on success, 2 (with one line on stderr) for a bad file, option or table."""
    missing = [option for option, value in (("--ranks PATH [PATH ...]", args.ranks), ("--output HTML", args.output))
               if not value]  # fmt: skip
    if missing:
        print(f"kgeval report: error: give {' and '.join(missing)}", file=sys.stderr)
        return 2
    names = args.names or [Path(path).name.split(".")[0] for path in args.ranks]
    if len(names) != len(args.ranks):
        print(f"kgeval report: error: {len(args.ranks)} rank tables but {len(names)} --names", file=sys.stderr)
        return 2
    if len(set(names)) != len(names):
        print(f"kgeval report: error: model names must differ, got {names} (give --names)", file=sys.stderr)
        return 2
    try:
        output = check_writable_file(args.output, "--output")
        frames = {name: read_ranks(path) for name, path in zip(names, args.ranks, strict=True)}
        with warnings.catch_warnings():  # metrics the page does not show (adjusted hits@k of few candidates)
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            models = {name: RankBasedMetricResults.from_rank_table(frame, ks=args.ks, source=f"rank table of {name}")
                      for name, frame in frames.items()}  # fmt: skip
        extra: dict[str, Any] = {"relation_labels": labels_from_frames(frames)}
        if args.dataset:
            dataset = load_dataset(args.dataset, kind="triples")
            extra = {"audit": audit_dataset(dataset, rule_baseline=not args.no_rule_baseline),
                     "popularity_triples": dataset.train, "relation_labels": dataset.relation_to_id,
                     "min_count": args.min_count}  # fmt: skip
        path = write_report(models, output, title=args.title, n_resamples=args.resamples, **extra)
    except (FileNotFoundError, ValueError, TypeError, KeyError, ImportError) as error:
        message = " ".join(str(error).split())
        print(f"kgeval report: error: {message}", file=sys.stderr)
        return 2
    print(f"Wrote the report of {', '.join(names)} to {path}")
    return 0
