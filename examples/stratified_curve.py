"""Popularity-stratified MRR and hits@10 over β for a trained DistMult and a popularity baseline.

Trains kgeval's DistMult on a shipped dataset, evaluates it and a baseline that ranks every candidate by its
popularity in the training triples, and draws the stratified metrics as β_e and β_r go from -1 (weight popular
items) to 1 (weight rare items). The baseline's score is propped up by popular answers and falls as rare ones gain
weight; the figures of docs/results.md come from this script:

    python examples/stratified_curve.py                      # writes docs/stratified_curve_{entity,relation}.png
    python examples/stratified_curve.py --dataset kinship --epochs 20 --out-dir /tmp
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from kgeval import RankBasedEvaluator
from kgeval.analysis.stratified import plot_strat_curve, strat_curve
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import train_model


class PopularityModel:
    """Scores every candidate entity by its popularity in the training triples, whatever the query."""

    def __init__(self, train: torch.Tensor, num_entities: int) -> None:
        self.num_entities = num_entities
        self.counts = torch.bincount(train[:, [0, 2]].reshape(-1), minlength=num_entities).float()

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self.counts.expand(len(hr_batch), -1)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self.counts.expand(len(rt_batch), -1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="umls", help="shipped dataset (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=50, help="DistMult training epochs (default: %(default)s)")
    parser.add_argument("--out-dir", default="docs", help="folder of the PNGs (default: %(default)s)")
    args = parser.parse_args()

    data = load_shipped_dataset(args.dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=64, seed=0)
    train_model(model, data.train, num_epochs=args.epochs, batch_size=256, lr=0.01, seed=0, use_tqdm=False)
    baseline = PopularityModel(data.train, data.num_entities)

    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    filters = [data.train, data.valid]
    results = {
        f"DistMult ({args.epochs} epochs)": evaluator.evaluate(
            model, data.test, additional_filter_triples=filters, use_tqdm=False
        ),
        "popularity baseline": evaluator.evaluate(
            baseline, data.test, additional_filter_triples=filters, use_tqdm=False
        ),
    }
    for name, one in results.items():
        print(f"{name}: micro MRR {one.get_metric('mrr'):.4f}, hits@10 {one.get_metric('hits@10'):.4f}")

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for vary in ("entity", "relation"):
        curve = strat_curve(results, data.train, betas=[-1.0, -0.5, 0.0, 0.5, 1.0], vary=vary)
        print(f"\nvarying β of the {vary} popularity (popularity counted on {args.dataset} train):")
        print(curve.drop(columns=["strat_hits_at_1", "strat_hits_at_3"]).to_string(index=False, float_format="%.4f"))
        path = out_dir / f"stratified_curve_{vary}.png"
        plot_strat_curve(
            results,
            data.train,
            vary=vary,
            metrics=["strat_mrr", "strat_hits_at_10"],
            path=str(path),
            title=f"{args.dataset.upper()} test, popularity-stratified metrics ({vary} β varies)",
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
