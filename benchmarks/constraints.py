"""Type-constrained evaluation against the unconstrained one, measured in one run.

Usage::

    python benchmarks/constraints.py --dataset FB15k-237

A seeded DistMult (d=200) is evaluated on the test split, filtered by train + valid + test, both sides, every metric:
once over all entities and once with ``TypeConstraints.from_triples(train)`` (each relation's heads / tails seen in
train). Printed: best time of ``--repeats`` calls each, their ratio, the mean num_candidates and the MRR of both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import best_time, seeded_distmult

from kgeval import RankBasedEvaluator, TypeConstraints


def main() -> None:
    args, data, model = seeded_distmult(__doc__)
    evaluator = RankBasedEvaluator(kernel="eager")
    kwargs = data.evaluation_kwargs("test")
    constraints = TypeConstraints.from_triples(data.train)
    plain, plain_results = best_time(lambda: evaluator.evaluate(model, use_tqdm=False, **kwargs), args.repeats)
    typed, typed_results = best_time(
        lambda: evaluator.evaluate(
            model, use_tqdm=False, type_constraints=constraints, drop_outside_restriction=True, **kwargs
        ),
        args.repeats,
    )
    print(f"{args.dataset}: {data.num_entities} entities, {len(data.test)} test triples, DistMult d={args.dim}, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    for name, seconds, results in (("unconstrained", plain, plain_results), ("constrained", typed, typed_results)):
        candidates = results.records.num_candidates.mean()
        print(f"{name:>14}: {seconds:.2f} s  tasks {results['count']:.0f}  mean num_candidates {candidates:.0f}  "
              f"MRR {results['mrr']:.4f}")  # fmt: skip
    print(f"constrained / unconstrained time: {typed / plain:.2f}x")


if __name__ == "__main__":
    main()
