"""The distribution of ranks per side and a per-relation MRR chart of a trained DistMult.

Trains kgeval's DistMult on a shipped dataset, evaluates the test split (filtered by train + valid + test) and
draws the two figures of docs/results.md ("Loggers and paper tables"):

    python examples/rank_plots.py                        # writes docs/rank_distribution.png, docs/per_relation_mrr.png
    python examples/rank_plots.py --dataset kinship --epochs 5 --out-dir /tmp
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import train_model


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="umls", help="shipped dataset (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=50, help="DistMult training epochs (default: %(default)s)")
    parser.add_argument("--out-dir", default="docs", help="folder of the PNGs (default: %(default)s)")
    args = parser.parse_args(argv)

    data = load_shipped_dataset(args.dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=64, seed=0)
    train_model(model, data.train, num_epochs=args.epochs, batch_size=256, lr=0.01, seed=0, use_tqdm=False)
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    print(results.to_markdown())

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{args.dataset.upper()} test, DistMult ({args.epochs} epochs)"
    paths = [out_dir / "rank_distribution.png", out_dir / "per_relation_mrr.png"]
    results.plot_ranks(path=str(paths[0]), title=f"{name}: realistic ranks per side")
    results.plot_per_relation("both.mrr", top=20, relation_labels=data.relation_to_id, path=str(paths[1]),
                              title=f"{name}: MRR of the 20 most evaluated relations")  # fmt: skip
    for path in paths:
        print(f"wrote {path}")
    return paths


if __name__ == "__main__":
    main()
