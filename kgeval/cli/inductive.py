"""The command line on inductive data (a folder of ``train``, ``inference``, ``inference_validation``,
``inference_test``): ``kgeval demo`` trains the relation-context baseline on the training graph and ranks validation
and test over the inference graph beside the rule-only baseline; ``kgeval evaluate`` ranks an inductive model of
another library (a PyKEEN ``InductiveNodePiece`` saved whole, with ``--trust-checkpoint``); ``kgeval audit`` prints
the inductive evaluation card."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from kgeval.audit.inductive import audit_inductive_dataset
from kgeval.cli._common import count_of, json_header, refuse_options
from kgeval.datasets.inductive import InductiveDataset
from kgeval.evaluator import RankBasedEvaluator
from kgeval.models.inductive import RelationContextDistMult
from kgeval.models.training import Threads, train_model

__all__ = ["run_inductive_audit", "run_inductive_demo", "run_inductive_evaluate"]

#: the filter each split is ranked with, in words
_KNOWN = {"valid": "inference graph + valid", "test": "inference graph + valid + test"}


def run_inductive_demo(args: argparse.Namespace, dataset: InductiveDataset) -> int:
    """Train :class:`RelationContextDistMult` on the training graph (sampled negatives), then print validation and
    test ranked over the inference graph's entities."""
    if args.save_checkpoint:
        raise ValueError("--save-checkpoint does not apply to the inductive demo yet: its model is rebuilt from the "
                         "dataset's graphs (kgeval.models.RelationContextDistMult.for_dataset)")  # fmt: skip
    progress = not args.no_progress
    print(f"Dataset {dataset.name} (inductive): training graph {dataset.num_training_entities} entities / "
          f"{len(dataset.train)} triples, inference graph {dataset.num_inference_entities} entities / "
          f"{len(dataset.inference)} triples, {dataset.num_relations} relations, {len(dataset.valid)} / "
          f"{len(dataset.test)} valid / test triples")  # fmt: skip
    model = RelationContextDistMult.for_dataset(dataset, dim=args.dim, seed=args.seed)
    start = time.perf_counter()
    threads: Threads = "free" if args.threads is None else None  # --threads, set by kgeval.cli.main, wins
    losses = train_model(model, dataset.train, num_epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                         num_negatives=16, seed=args.seed, use_tqdm=progress, threads=threads)  # fmt: skip
    loss_text = f", loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""
    print(f"Trained RelationContextDistMult (dim={args.dim}, 16 sampled negatives) on the training graph for "
          f"{count_of(args.epochs, 'epoch')} in {time.perf_counter() - start:.1f} s{loss_text}")  # fmt: skip
    model.eval()
    evaluator = RankBasedEvaluator(ks=(1, 3, 5, 10))
    for split in ("valid", "test"):
        start = time.perf_counter()
        results = evaluator.evaluate(model, **dataset.evaluation_kwargs(split), use_tqdm=progress)
        print(f"\n== {split}: {len(getattr(dataset, split))} triples over the inference graph's "
              f"{dataset.num_inference_entities} entities, filtered by {_KNOWN[split]}, evaluated in "
              f"{time.perf_counter() - start:.2f} s ==")  # fmt: skip
        print(results.summary())
        if args.full:
            print()
            print(results.full_table())
    report = audit_inductive_dataset(dataset)
    print(f"\nRule-only baseline on test (training-graph relation pairs applied to the inference graph): MRR "
          f"{report.rule_mrr:.4f}, Hits@10 {report.rule_hits_at_10:.4f}; the organisers' published test MRRs: "
          "InductiveNodePiece 0.0381, InductiveNodePieceGNN 0.1326 on ILPC2022-small (docs/inductive.md)")  # fmt: skip
    return 0


def run_inductive_evaluate(args: argparse.Namespace, dataset: InductiveDataset, model: Any) -> int:
    """Print an inductive model's metrics on a split, ranked over the inference graph (a table, or JSON)."""
    refuse_options(args, "inductive", {"progress_file": None, "unseen": None})  # the folder drops rows itself
    use_tqdm = not args.no_progress and not args.json
    targets = tuple(getattr(args, "targets", ("head", "tail")))
    results = RankBasedEvaluator(ks=tuple(args.ks)).evaluate(model, **dataset.evaluation_kwargs(args.split),
                                                             targets=targets, use_tqdm=use_tqdm)  # fmt: skip
    saved = None
    if getattr(args, "save_ranks", None):  # ids and labels of the inference graph
        saved = str(results.save_ranks(args.save_ranks, dataset.inference_entity_to_id, dataset.relation_to_id))
    if args.json:
        source = {"checkpoint": args.checkpoint, "model": type(model).__name__, "dataset": dataset.name,
                  "split": args.split, "filtered_by": _KNOWN[args.split].split(" + "),
                  "mode": dataset.evaluation_kwargs(args.split)["mode"], "targets": list(targets)}  # fmt: skip
        document = {**json_header(source, "filtered", args.ks), **({"ranks_file": saved} if saved else {}),
                    "metrics": {key: (None if value != value else value)
                                for key, value in results.to_flat_dict().items()}}  # fmt: skip
        print(json.dumps(document, allow_nan=False))
        return 0
    print(f"== {dataset.name} {args.split} over the inference graph, filtered by {_KNOWN[args.split]} ==")
    print(results.summary())
    if getattr(args, "full", False):
        print(results.full_table())
    if saved:
        print(f"(the per-task ranks are in {saved})")
    return 0


def run_inductive_audit(args: argparse.Namespace, dataset: InductiveDataset, model: Any) -> int:
    """Print the inductive evaluation card (Markdown, or JSON)."""
    report = audit_inductive_dataset(dataset, rule_baseline=not args.no_baseline, model=model,
                                     threshold=args.threshold)  # fmt: skip
    print(report.to_json() if args.json else report.to_markdown(), end="\n" if args.json else "")
    return 0
