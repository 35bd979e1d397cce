"""What one evaluation costs the host: ATen operations (kernel launches on a GPU) and sync ops (host-device
synchronisations on a GPU), counted on CPU tensors, per evaluation and per kgeval function.

    python benchmarks/dispatch.py --dataset FB15k-237                      # full test set, both layouts
    python benchmarks/dispatch.py --dataset WN18RR --triples 2000 --layout masked

A seeded DistMult (d = 200), its test triples filtered by train + valid, ``kernel="eager"``, ``batch_size=10**6``
and ``slice_size`` = the number of entities (one batch of every query of a side, as a GPU's sizing gives). One
evaluator evaluates twice, as a training loop calls it every epoch; the second evaluation is counted (under
kgeval._engine.dispatch_count.DispatchCounter). ``--layout masked`` is the device's path
(``evaluator.device_path = True``: the masked pairs, the eager kernel and the tile sizes of an accelerator),
``sorted`` the CPU's own path. Counts are deterministic: no timing, no repeats.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kgeval import RankBasedEvaluator
from kgeval._engine.dispatch_count import DispatchCounter, format_table
from kgeval.datasets import load_dataset
from kgeval.models import DistMult


def count(dataset: str, triples: int | None, layout: str) -> tuple[DispatchCounter, float]:
    """The counter of the second of two evaluations by one evaluator, and its MRR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset(dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    test = data.test if triples is None else data.test[:triples]
    evaluator = RankBasedEvaluator(kernel="eager", batch_size=10**6, slice_size=data.num_entities)
    evaluator.device_path = layout == "masked"

    def evaluate() -> float:
        results = evaluator.evaluate(model, test, additional_filter_triples=[data.train, data.valid], use_tqdm=False)
        return float(results.get_metric("both.realistic.inverse_harmonic_mean_rank"))

    evaluate()
    with DispatchCounter() as counter:
        mrr = evaluate()
    return counter, mrr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237", help="FB15k-237, WN18RR, or any dataset load_dataset takes")
    parser.add_argument("--triples", type=int, default=None, help="the first N test triples (default: all)")
    parser.add_argument("--layout", choices=("masked", "sorted", "both"), default="both")
    parser.add_argument("--rows", type=int, default=15, help="kgeval functions listed")
    args = parser.parse_args()
    layouts = ("masked", "sorted") if args.layout == "both" else (args.layout,)
    for layout in layouts:
        counter, mrr = count(args.dataset, args.triples, layout)
        size = "all" if args.triples is None else args.triples
        print(f"{args.dataset}, {size} test triples, layout {layout!r} (MRR {mrr:.9f}):")
        print(format_table(counter, args.rows))


if __name__ == "__main__":
    main()
