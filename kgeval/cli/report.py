"""``kgeval report``: one self-contained HTML page from saved rank tables (``kgeval evaluate --save-ranks``)."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from kgeval._checks import check_writable_file
from kgeval.audit import audit_dataset
from kgeval.audit.temporal import audit_temporal_dataset
from kgeval.cli._common import BUCKET_REFERENCES, check_ranks_fit, int_at_least, read_groups
from kgeval.datasets import FullyInductiveDataset, InductiveDataset, TemporalDataset, load_dataset
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.records import read_ranks, settings_of, table_provenance
from kgeval.report import labels_from_frames, write_report
from kgeval.results import RankBasedMetricResults

__all__ = ["add_report_arguments", "run_report"]


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``kgeval report``."""
    add = parser.add_argument
    tables = "rank tables (.csv, .csv.gz, .tsv, .parquet) as `kgeval evaluate --save-ranks` writes them, one per model"
    add("--ranks", nargs="+", metavar="PATH", help=tables + " (required)")
    add("--names", nargs="+", metavar="NAME", help="a name per rank table (default: the model each table recorded, "
        "else its file name)")  # fmt: skip
    dataset = ("the evaluated dataset: adds its audit card and the popularity-stratified curves (counted on train); "
               "a table recorded of other data, or whose labels disagree with it, is refused")  # fmt: skip
    add("--dataset", metavar="NAME_OR_FOLDER", help=dataset)
    add("--no-rule-baseline", action="store_true", help="leave the rule-only (recurrency) baseline out of the audit "
        "card")  # fmt: skip
    add("--min-count", type=float, metavar="N", help="floor popularity count of the stratified curves for entities "
        "absent from train (without it the curves are left out where some are)")  # fmt: skip
    add("--title", help="the page title (default: the models, dataset and split the tables recorded)")
    add("--setting", choices=("time-aware", "static", "raw"), default="time-aware",
        help="the filter setting shown of a temporal rank table (default: %(default)s)")  # fmt: skip
    add("--ks", type=int, nargs="+", default=[1, 3, 5, 10], help="k of hits@k (default: 1 3 5 10, as kgeval evaluate)")
    add("--resamples", type=int, default=1000, help="bootstrap resamples of intervals and tests (default: 1000)")
    add("--buckets", choices=("answer", "query_entity", "relation"), help="add the frequency-bucket section: every "
        "bucket's task count, MRR with its interval, Hits@1, Hits@10 and a chart of MRR per bucket, by how often the "
        "answer / query entity / relation occurs in the --bucket-reference triples (needs --dataset)")  # fmt: skip
    add("--bucket-scheme", choices=("kgeval", "libkge"), default="kgeval", help="kgeval: quantile buckets that "
        "never split equal counts; libkge: LibKGE's argument_frequency quartiles (default: %(default)s)")  # fmt: skip
    add("--bucket-reference", choices=tuple(BUCKET_REFERENCES), default="train", help="the dataset triples the "
        "bucket counts come from (default: %(default)s)")  # fmt: skip
    add("--relation-groups", metavar="JSON", help="add the relation-group section: each named group's MRR, Hits@1 "
        'and Hits@10 micro and macro side by side; JSON: {"group name": [relation labels or ids], ...} (labels: '
        "the dataset's, else the tables' relation_label column)")  # fmt: skip
    add("--sampled", type=int_at_least(2), nargs="+", metavar="N", help="add the full-vs-sampled section: the full "
        "MRR and Hits@k beside their estimates among N sampled candidates from the same ranks (hypergeometric and "
        "ULTRA's estimator)")  # fmt: skip
    add("--output", "-o", metavar="HTML", help="the page to write (required)")


def run_report(args: argparse.Namespace) -> int:
    """Write the report; 0 on success, 2 (with one line on stderr) for a bad file, option or table."""
    missing = [option for option, value in (("--ranks PATH [PATH ...]", args.ranks), ("--output HTML", args.output))
               if not value]  # fmt: skip
    if missing:
        print(f"kgeval report: error: give {' and '.join(missing)}", file=sys.stderr)
        return 2
    if args.names and len(args.names) != len(args.ranks):
        print(f"kgeval report: error: {len(args.ranks)} rank tables but {len(args.names)} --names", file=sys.stderr)
        return 2
    if args.names and len(set(args.names)) != len(args.names):
        print(f"kgeval report: error: model names must differ, got {args.names} (give --names)", file=sys.stderr)
        return 2
    try:
        output = check_writable_file(args.output, "--output", create_folder=True)
        tables = [_shown_rows(read_ranks(path), path, args.setting) for path in args.ranks]
        names = args.names or _names(args.ranks, tables)
        frames = dict(zip(names, tables, strict=True))
        with warnings.catch_warnings():  # metrics the page does not show (adjusted hits@k of few candidates)
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            models = {name: RankBasedMetricResults.from_rank_table(frame, ks=args.ks, source=f"rank table of {name}")
                      for name, frame in frames.items()}  # fmt: skip
        about = {name: table_provenance(frame) for name, frame in frames.items()}
        extra: dict[str, Any] = {"relation_labels": labels_from_frames(frames), "about": about}
        if args.dataset:
            extra.update(_dataset_parts(args, dict(zip(names, args.ranks, strict=True)), frames, models))
        elif args.buckets:
            raise ValueError("--buckets counts the dataset's triples: give --dataset with the rank tables' dataset")
        if args.relation_groups:
            extra["relation_groups"] = read_groups(args.relation_groups)
        if args.sampled:
            extra["sampled"] = args.sampled
        path = write_report(models, output, title=args.title, n_resamples=args.resamples, **extra)
    except (FileNotFoundError, ValueError, TypeError, KeyError, ImportError) as error:
        message = " ".join(str(error).split())
        print(f"kgeval report: error: {message}", file=sys.stderr)
        return 2
    print(f"Wrote the report of {', '.join(names)} to {path}")
    return 0


def _shown_rows(frame: pd.DataFrame, path: str, setting: str) -> pd.DataFrame:
    """The rows of a rank table the page shows: all of a table of triples; of a temporal table (one with a
    ``time`` column) those of ``setting``."""
    if "time" not in frame.columns:
        return frame
    parts = settings_of(frame)
    if "" in parts:  # a temporal table without a setting column: its one setting
        return frame
    if setting not in parts:
        raise ValueError(f"rank table {path} holds the settings {', '.join(parts)}, not {setting} (--setting)")
    return parts[setting]


def _names(paths: list[str], frames: list[pd.DataFrame]) -> list[str]:
    """A name per table: the model it recorded, with the file's name where two tables recorded the same model or
    none was recorded."""
    stems = [Path(path).name.split(".")[0] for path in paths]
    models = [table_provenance(frame).get("model") for frame in frames]
    names = [model or stem for model, stem in zip(models, stems, strict=True)]
    repeated = {name for name in names if names.count(name) > 1}
    names = [f"{name} ({stem})" if name in repeated and model else name
             for name, stem, model in zip(names, stems, models, strict=True)]  # fmt: skip
    if len(set(names)) != len(names):
        raise ValueError(f"model names must differ, got {names} (give --names)")
    return names


def _dataset_parts(args: argparse.Namespace, paths: dict[str, str], frames: dict[str, pd.DataFrame],
                   models: dict[str, RankBasedMetricResults]) -> dict[str, Any]:  # fmt: skip
    """The audit card, popularity triples and relation names of --dataset, after every table was checked to rank
    it (:func:`kgeval.cli._common.check_ranks_fit`: its recorded fingerprint, ids and labels)."""
    dataset = load_dataset(args.dataset)
    if isinstance(dataset, InductiveDataset | FullyInductiveDataset):
        raise ValueError(f"{dataset.name} is inductive data: kgeval report reads its rank tables without --dataset")
    for name, frame in frames.items():
        check_ranks_fit(models[name].records, frame, dataset, paths[name])
    if isinstance(dataset, TemporalDataset):
        audit: Any = audit_temporal_dataset(dataset, baseline=not args.no_rule_baseline)
        popularity = dataset.train[:, :3]
    else:
        audit = audit_dataset(dataset, rule_baseline=not args.no_rule_baseline)
        popularity = dataset.train
    parts = {"audit": audit, "popularity_triples": popularity, "relation_labels": dataset.relation_to_id,
             "min_count": args.min_count}  # fmt: skip
    if args.buckets:  # the counts of --bucket-reference's splits (a temporal split's triples without their times)
        reference = torch.cat([getattr(dataset, split)[:, :3] for split in BUCKET_REFERENCES[args.bucket_reference]])
        sizes = {"num_entities": dataset.num_entities, "num_relations": dataset.num_relations}
        parts["frequency_buckets"] = reference
        parts["bucket_options"] = {"by": args.buckets, "scheme": args.bucket_scheme, **sizes}
    return parts
