"""Is model A really better than model B on this test set? Train two DistMult models and compare them.

    python examples/compare_models.py                      # UMLS: trains two models, under a minute on 2 CPU cores
    python examples/compare_models.py --dataset nations

Both models are evaluated on the same test triples (filtered by train + valid + test), keeping the per-task
records; ``kgeval.analysis.stats.compare`` pairs the two models' ranks triple by triple and reports the difference of a
metric, a p-value and a bootstrap confidence interval of the difference.
"""

from __future__ import annotations

import argparse

from kgeval import RankBasedEvaluator
from kgeval.analysis.stats import compare
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import train_model

#: the two models: name -> (embedding dimension, training epochs)
MODELS = {"A": (64, 15), "B": (16, 5)}


def run(dataset: str = "umls", models: dict[str, tuple[int, int]] = MODELS, n_resamples: int = 10_000) -> list:
    """Train and evaluate the two models, print their intervals and the comparisons; returns the comparisons."""
    data = load_shipped_dataset(dataset)
    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    results = {}
    for name, (dim, epochs) in models.items():
        model = DistMult(data.num_entities, data.num_relations, dim=dim, seed=0)
        train_model(model, data.train, num_epochs=epochs, lr=0.05, use_tqdm=False)
        results[name] = evaluator.evaluate(
            model, data.test, additional_filter_triples=[data.train, data.valid], use_tqdm=False
        )
        interval = results[name].confidence_interval("mrr", n_resamples=n_resamples)
        print(
            f"model {name} (DistMult, dim {dim}, {epochs} epochs): test MRR {interval.estimate:.4f} "
            f"[{interval.low:.4f}, {interval.high:.4f}] (95% bootstrap interval over {interval.n} triples)"
        )
    print(f"\nA - B on {dataset} test (paired by triple, {n_resamples} resamples, seed 0):")
    print(f"{'metric':<40} {'test':<12} {'difference':>10} {'95% interval':>20} {'p-value':>8}")
    comparisons = []
    for key in ("mrr", "hits@1", "hits@10", "tail.mr", "gmr"):
        for test in ("permutation", "bootstrap", "wilcoxon"):
            if test == "wilcoxon" and key == "gmr":
                continue  # the Wilcoxon test needs a mean of per-task values (hits@k, MRR, MR)
            c = compare(results["A"], results["B"], key=key, test=test, n_resamples=n_resamples)
            interval = f"[{c.low:+.4f}, {c.high:+.4f}]"
            print(f"{c.key:<40} {c.test:<12} {c.difference:>+10.4f} {interval:>20} {c.p_value:>8.4f}")
            comparisons.append(c)
    return comparisons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="umls", help="shipped dataset: umls, kinship or nations")
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    run(args.dataset, n_resamples=args.resamples)


if __name__ == "__main__":
    main()
