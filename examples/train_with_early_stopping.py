"""Train DistMult on a shipped dataset in a plain PyTorch loop, early-stopped by kgeval, then report the test set.

    python examples/train_with_early_stopping.py                  # UMLS, up to 60 epochs
    python examples/train_with_early_stopping.py --dataset nations --max-epochs 20

Validation (the early-stopping signal) filters train + valid; the final test filters train + valid + test
(kgeval.datasets.scenarios): test triples play no part in choosing the epoch.
"""

from __future__ import annotations

import argparse

import torch

from kgeval import EarlyStopper, RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import train_epoch


def main(dataset: str = "umls", max_epochs: int = 60, dim: int = 64, seed: int = 0, verbose: bool = True) -> dict:
    """Train, stop early, evaluate the test split; returns the stopper and the test results."""
    torch.manual_seed(seed)
    data = load_shipped_dataset(dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=dim, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    stopper = EarlyStopper(
        evaluator,
        model,
        **data.evaluation_kwargs("valid"),  # mapped_triples=valid, additional_filter_triples=[train, valid]
        metric="mrr",  # larger is better, read from the metric table (for "mr" it would be lower)
        patience=3,  # evaluations without improvement
        frequency=2,  # evaluate every second epoch
    )
    generator = torch.Generator().manual_seed(seed)
    for epoch in range(1, max_epochs + 1):
        loss = train_epoch(model, data.train, optimizer, batch_size=256, generator=generator)
        stop = stopper.should_stop(epoch)
        if verbose and stopper.history and stopper.history[-1].epoch == epoch:
            print(f"epoch {epoch:3d}  loss {loss:.4f}  valid MRR {stopper.history[-1].value:.4f}")
        if stop:
            if verbose:
                print(f"stopped at epoch {epoch}; restored the weights of epoch {stopper.best_epoch}")
            break

    test = evaluator.evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    if verbose:
        print(f"\nbest epoch {stopper.best_epoch}: valid MRR {stopper.best_metric:.4f}\n")
        print(test)
        print(f"\nmacro MRR over relations: {test.macro_average('mrr'):.4f}")
        print(test.per_category(data.train, keys=("mrr", "hits@10")).round(4).to_string())
        worst = test.per_relation(("mrr",), relation_labels=data.relation_to_id).nsmallest(5, "both.mrr")
        print(worst.round(4).to_string())
    return {"stopper": stopper, "test": test, "model": model}


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="umls", choices=("umls", "kinship", "nations"))
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _parse()
    main(arguments.dataset, arguments.max_epochs, arguments.dim, arguments.seed)
