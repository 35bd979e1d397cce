"""Relation prediction against entity ranking of the same triples, measured in one run.

Usage::

    python benchmarks/relations.py --dataset FB15k-237

A seeded DistMult (d=200) is evaluated on the test split, filtered by train + valid + test, every metric: once with
``targets=("head", "tail")`` (full entity ranking) and once with ``targets=("relation",)`` (each triple's relation
among all relations, through the model's ``score_r``). Printed: best time of ``--repeats`` calls each, their ratio,
the tasks, the mean num_candidates and the MRR of both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import best_time, seeded_distmult

from kgeval import RankBasedEvaluator


def main() -> None:
    args, data, model = seeded_distmult(__doc__)
    evaluator = RankBasedEvaluator()
    kwargs = data.evaluation_kwargs("test")
    timings = {}
    for name, targets in (("head + tail", ("head", "tail")), ("relation", ("relation",))):
        timings[name] = best_time(
            lambda targets=targets: evaluator.evaluate(model, use_tqdm=False, targets=targets, **kwargs), args.repeats
        )
    print(f"{args.dataset}: {data.num_entities} entities, {data.num_relations} relations, {len(data.test)} test "
          f"triples, DistMult d={args.dim}, {torch.get_num_threads()} threads")  # fmt: skip
    for name, (seconds, results) in timings.items():
        candidates = results.records.num_candidates.mean()
        print(f"{name:>12}: {seconds:.3f} s  tasks {len(results.records)}  mean num_candidates {candidates:.0f}  "
              f"MRR {results['mrr']:.4f}")  # fmt: skip
    ratio = timings["relation"][0] / timings["head + tail"][0]
    print(f"relation / (head + tail) time: {ratio:.3f}x")


if __name__ == "__main__":
    main()
