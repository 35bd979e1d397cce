"""The built-in graph-conditioned baseline (kgeval.models.graph_baseline.NeighbourhoodBaseline) on every shared
inductive set found: entity-inductive (ILPC 2022) and fully inductive (InGram), validation and test, one row each.

    python examples/graph_baseline.py                      # every set under the shared data folder
    python examples/graph_baseline.py InGram-NL-25 --validation-filter inference+test

Realistic, pessimistic and optimistic MRR and Hits@10 side by side, and the share of tasks whose true answer ties
with another candidate (pessimistic > optimistic): the field's papers on these sets report pessimistic ranks.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import on_graphs
from kgeval.datasets import load_inductive_dataset, shared_data_dir
from kgeval.datasets.fully_inductive import is_fully_inductive_folder, load_fully_inductive_folder
from kgeval.datasets.inductive import is_inductive_folder
from kgeval.models.graph_baseline import NeighbourhoodBaseline

SETS = ("ILPC2022-small", "ILPC2022-large", "InGram-NL-0", "InGram-NL-25", "InGram-NL-100", "InGram-WK-25")
COLUMNS = ("dataset", "split", "tasks", "MRR real", "MRR pess", "MRR opt", "H@10 real", "H@10 pess", "tied",
           "seconds")  # fmt: skip


def load(folder: Path) -> Any:
    """A fully inductive (InGram) or entity-inductive (ILPC) folder."""
    if is_fully_inductive_folder(folder):
        return load_fully_inductive_folder(folder)
    if is_inductive_folder(folder):
        return load_inductive_dataset(folder)
    raise ValueError(f"{folder} is neither a fully inductive (train, msg) nor an inductive (train, inference) folder")


def evaluate(data: Any, split: str, validation_filter: str = "inference") -> dict[str, Any]:
    """One row of the table: the baseline on ``split`` of ``data``."""
    kwargs = (data.evaluation_kwargs(split, validation_filter=validation_filter)
              if hasattr(data, "graph") else data.evaluation_kwargs(split))  # fmt: skip
    start = time.perf_counter()
    results = RankBasedEvaluator().evaluate(on_graphs(NeighbourhoodBaseline(), data), **kwargs, use_tqdm=False)
    seconds = time.perf_counter() - start
    records = results.records
    tied = float((records["pessimistic"] > records["optimistic"]).mean())
    return {"dataset": data.name, "split": split, "tasks": len(records["pessimistic"]),
            "MRR real": results["realistic.mrr"], "MRR pess": results["pessimistic.mrr"],
            "MRR opt": results["optimistic.mrr"], "H@10 real": results["realistic.hits@10"],
            "H@10 pess": results["pessimistic.hits@10"], "tied": tied, "seconds": seconds}  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="*", help="folders or shared set names (default: every shared one)")
    parser.add_argument(
        "--validation-filter",
        default="inference",
        choices=("inference", "inference+test"),
        help="fully inductive sets: filter validation by the test triples too (InGram / ULTRA)",
    )
    args = parser.parse_args(argv)
    root = shared_data_dir()
    names = args.datasets or [name for name in SETS if root is not None and (root / name).is_dir()]
    rows = []
    print(" | ".join(COLUMNS))
    for name in names:
        folder = Path(name) if Path(name).is_dir() or root is None else root / name
        data = load(folder)
        for split in ("valid", "test"):
            row = evaluate(data, split, args.validation_filter)
            rows.append(row)
            print(" | ".join(f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS))
    return rows


if __name__ == "__main__":
    main()
