"""Evaluate a model inside a plain PyTorch training loop with kgeval (the README's usage example).

Run: python examples/quickstart.py
"""

from __future__ import annotations

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import train_model


def main() -> None:
    data = load_shipped_dataset("umls")
    model = DistMult(data.num_entities, data.num_relations, dim=64, seed=0)
    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    for epoch in range(1, 6):
        train_model(model, data.train, num_epochs=1, seed=epoch, use_tqdm=False)  # one epoch of training
        # validation: the evaluated triples are always filtered; add the other known triples (train)
        results = evaluator.evaluate(model, data.valid, additional_filter_triples=[data.train], use_tqdm=False)
        print(f"epoch {epoch}: MRR {results.get_metric('mrr'):.4f}  tail hits@10 {results.get_metric('tail.h@10'):.4f}")
    # final test report: filter train + valid (+ test, which is always included)
    test = evaluator.evaluate(model, data.test, additional_filter_triples=[data.train, data.valid], use_tqdm=False)
    print(test)


if __name__ == "__main__":
    main()
