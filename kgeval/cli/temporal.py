"""The command line on temporal data (a dataset folder of quadruples): ``kgeval demo`` trains TNTComplEx and prints
the time-aware, static and raw numbers side by side with the recurrency baseline's; ``kgeval evaluate`` ranks a
TNTComplEx checkpoint under the three settings; ``kgeval audit`` prints the temporal evaluation card."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import pandas as pd

from kgeval._display import all_or_nothing_note
from kgeval.audit.temporal import audit_temporal_dataset
from kgeval.cli._common import count_of, metrics_document, provenance, refuse_options, with_provenance
from kgeval.datasets.temporal import TemporalDataset
from kgeval.models.checkpoint import save_checkpoint
from kgeval.models.temporal import RecurrencyBaseline, TNTComplEx
from kgeval.models.training import Threads, train_model
from kgeval.records import table_provenance, write_ranks
from kgeval.variants.temporal import TemporalRankBasedEvaluator, TemporalRankBasedMetricResults

__all__ = [
    "evaluate_temporal_table",
    "print_temporal",
    "run_temporal_audit",
    "run_temporal_demo",
    "run_temporal_evaluate",
    "settings_frame",
    "temporal_evaluation",
]


def settings_frame(results: dict[str, TemporalRankBasedMetricResults]) -> pd.DataFrame:
    """One row per (model, filter setting), the realistic headline of both sides pooled as columns (MRR and
    Hits@k, the MR left out): ``results`` maps a model's name to its ``filtered="all"`` results
    (:meth:`TemporalRankBasedMetricResults.headline_table` of each, turned)."""
    frame = pd.concat({name: got.headline_table().T.drop(columns="MR") for name, got in results.items()})
    frame.index.names = ["model", "filter"]
    frame.columns.name = None
    return frame


def _print_frame(frame: pd.DataFrame) -> None:
    print(frame.to_string(float_format=lambda value: f"{value:.4f}"))


#: the hits@k of the command line's temporal evaluations (their table's columns)
TEMPORAL_KS = (1, 3, 10)


def temporal_evaluation(model: Any, dataset: TemporalDataset, split: str, use_tqdm: bool) -> Any:
    """``model`` ranked on ``split`` under the three filter settings (known: train + valid, + test for test)."""
    evaluator = TemporalRankBasedEvaluator(filtered="all", ks=TEMPORAL_KS)
    return evaluator.evaluate(model, **dataset.evaluation_kwargs(split), use_tqdm=use_tqdm)


def run_temporal_demo(args: argparse.Namespace, dataset: TemporalDataset) -> int:
    """Train TNTComplEx on the train split, then print valid and test under the three settings beside the
    recurrency baseline."""
    progress = not args.no_progress
    print(f"Dataset {dataset.name} (temporal): {dataset.num_entities} entities, {dataset.num_relations} relations, "
          f"{dataset.num_times} times, {len(dataset.train)} / {len(dataset.valid)} / {len(dataset.test)} train / "
          "valid / test quadruples")  # fmt: skip
    model = TNTComplEx(dataset.num_entities, dataset.num_relations, dataset.num_times, dim=args.dim, seed=args.seed)
    start = time.perf_counter()
    threads: Threads = "free" if args.threads is None else None  # --threads, set by kgeval.cli.main, wins
    losses = train_model(model, dataset.train, num_epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                         seed=args.seed, use_tqdm=progress, threads=threads)  # fmt: skip
    loss_text = f", loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""
    print(f"Trained TNTComplEx (dim={args.dim}) for {count_of(args.epochs, 'epoch')} in "
          f"{time.perf_counter() - start:.1f} s"
          f"{loss_text}")  # fmt: skip
    model.eval()
    unseen = int((~model.trained_times[dataset.test[:, 3]]).sum())
    if unseen:
        print(f"{unseen} of {len(dataset.test)} test quadruples are at times it never trained on (a forecasting "
              "split): TNTComplEx scores those with its time-independent part")  # fmt: skip
    if args.save_checkpoint:
        save_checkpoint(model, args.save_checkpoint, dataset)
        print(f"Saved the model and what its data was ({dataset.name}) to {args.save_checkpoint}")
    for split, known in (("valid", "train + valid"), ("test", "train + valid + test")):
        start = time.perf_counter()
        baseline = RecurrencyBaseline.before(dataset, split)
        results = {
            "TNTComplEx": temporal_evaluation(model, dataset, split, progress),
            "recurrency": temporal_evaluation(baseline, dataset, split, progress),
        }
        print(f"\n== {split}: {len(getattr(dataset, split))} quadruples, filtered by {known}, realistic ranks, both "
              f"sides; the recurrency baseline single-step; {time.perf_counter() - start:.2f} s ==")  # fmt: skip
        frame = settings_frame(results)
        _print_frame(frame)
        for (name, setting), row in frame.iterrows():
            hits = {int(column.split("@")[1]): row[column] for column in frame.columns if column.startswith("Hits@")}
            note = all_or_nothing_note(f"{name}, {setting}", row["MRR"], hits)
            if note:
                print(note)
    print("\nReport time-aware (other answers true at the query's time removed); static removes answers of any "
          "time, raw none (docs/temporal.md).")  # fmt: skip
    return 0


def check_fits(model: Any, dataset: TemporalDataset) -> None:
    """The model's declared entity, relation and time counts equal the dataset's (ValueError naming both)."""
    for name in ("num_entities", "num_relations", "num_times"):
        count = getattr(model, name, None)
        expected = getattr(dataset, name)
        if isinstance(count, int) and count != expected:
            raise ValueError(f"the checkpoint's model has {name}={count}, the dataset {dataset.name} {expected}: it "
                             "was trained on other data")  # fmt: skip


def run_temporal_evaluate(args: argparse.Namespace, dataset: TemporalDataset, model: Any) -> int:
    """Print a temporal model's numbers on a split under the three filter settings (a table, or JSON); with
    --save-ranks also write their rank table (every setting's rows, with times, labels and provenance)."""
    check_fits(model, dataset)
    refuse_options(args, "temporal", {"ks": [1, 3, 5, 10], "targets": ["head", "tail"], "full": False,
                                      "progress_file": None})  # fmt: skip
    results = temporal_evaluation(model, dataset, args.split, not args.no_progress and not args.json)
    known = ["train", "valid"] if args.split == "valid" else ["train", "valid", "test"]
    source = {"checkpoint": args.checkpoint, "model": type(model).__name__, "dataset": dataset.name,
              "split": args.split, "filtered_by": known, "targets": ["head", "tail"]}  # fmt: skip
    extra = {}
    if getattr(args, "save_ranks", None):
        about = provenance(type(model).__name__, dataset, args.split, known, "time-aware")
        frame = with_provenance(results.ranks_df(dataset.entity_to_id, dataset.relation_to_id, dataset.time_to_id),
                                about)  # fmt: skip
        extra["ranks_file"] = str(write_ranks(frame, args.save_ranks))
    title = f"== {dataset.name} {args.split}, filtered by {' + '.join(known)}, realistic ranks, both sides =="
    return print_temporal(results, source, title, args.json, type(model).__name__, **extra)


def print_temporal(results: TemporalRankBasedMetricResults, source: dict[str, Any], title: str, as_json: bool,
                   name: str, **extra: Any) -> int:  # fmt: skip
    """Print temporal results: their settings' table under ``title``, or the ``--json`` document of every protocol
    (:func:`kgeval.cli._common.metrics_document`: the time-aware metrics, static and raw in ``other_settings``)."""
    if as_json:
        others = {setting: got for setting, got in results.settings().items() if setting != results.setting}
        document = metrics_document(source, results.setting, results.ks, results, others, **extra)
        print(json.dumps(document, allow_nan=False))
        return 0
    print(title)
    _print_frame(settings_frame({name: results}))
    if "ranks_file" in extra:
        print(f"(the per-task ranks of every setting are in {extra['ranks_file']})")
    return 0


def evaluate_temporal_table(args: argparse.Namespace, frame: pd.DataFrame) -> int:
    """``kgeval evaluate --ranks`` of a temporal rank table (one with a ``time`` column): the settings it holds,
    as a checkpoint's evaluation prints them."""
    results = TemporalRankBasedMetricResults.from_rank_table(frame, ks=args.ks, source=f"rank table {args.ranks}")
    about = table_provenance(frame.drop(columns="setting", errors="ignore"))
    source = {"ranks": args.ranks, **about}
    recorded = ", ".join(f"{key} {value}" for key, value in about.items() if key in ("model", "dataset", "split"))
    title = f"== temporal ranks of {args.ranks}{f' ({recorded})' if recorded else ''}, realistic ranks, both sides =="
    return print_temporal(results, source, title, args.json, about.get("model", "ranks"))


def run_temporal_audit(args: argparse.Namespace, dataset: TemporalDataset, model: Any,
                       results: TemporalRankBasedMetricResults | None = None) -> int:  # fmt: skip
    """Print the temporal evaluation card (Markdown, or JSON), of a model or of the results of a rank table."""
    report = audit_temporal_dataset(dataset, baseline=not args.no_baseline, model=model, results=results)
    print(report.to_json() if args.json else report.to_markdown(), end="\n" if args.json else "")
    return 0
