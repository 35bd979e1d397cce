"""What one evaluation costs the host: ATen operations (kernel launches on a GPU) and sync ops (host-device
synchronisations on a GPU), counted on CPU tensors, per evaluation and per kgeval function.

    python benchmarks/dispatch.py --dataset FB15k-237                      # full test set, every path
    python benchmarks/dispatch.py --dataset WN18RR --triples 2000 --path device

A seeded DistMult (d = 200), its test triples filtered by train + valid, ``kernel="eager"``, ``batch_size=10**6``
and ``slice_size`` = the number of entities (one batch of every query of a side, as a GPU's sizing gives). One
evaluator evaluates twice, as a training loop calls it every epoch; the second evaluation is counted (under
kgeval._engine.dispatch_count.DispatchCounter). The paths (``--path``):

- ``device``: the device's path (``evaluator.device_path = True``: the masked pairs, the eager kernel and the tile
  sizes of an accelerator);
- ``device-sorted``: the same with the "sorted" pair layout (``evaluator.pair_layout = "sorted"``: tile segments
  from host offsets, query groups kept once);
- ``cpu``: the CPU's own path (sorted pairs, cache-sized tiles: a fixed cost per tile, so it grows with the work).

Counts are deterministic: no timing, no repeats.
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

#: --path: (device_path, pair_layout)
PATHS = {"device": (True, None), "device-sorted": (True, "sorted"), "cpu": (False, None)}


def count(dataset: str, triples: int | None, path: str) -> tuple[DispatchCounter, float]:
    """The counter of the second of two evaluations by one evaluator, and its MRR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset(dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    test = data.test if triples is None else data.test[:triples]
    evaluator = RankBasedEvaluator(kernel="eager", batch_size=10**6, slice_size=data.num_entities)
    evaluator.device_path, evaluator.pair_layout = PATHS[path]

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
    parser.add_argument("--path", choices=(*PATHS, "all"), default="all")
    parser.add_argument("--rows", type=int, default=15, help="kgeval functions listed")
    args = parser.parse_args()
    for path in PATHS if args.path == "all" else (args.path,):
        counter, mrr = count(args.dataset, args.triples, path)
        size = "all" if args.triples is None else args.triples
        print(f"{args.dataset}, {size} test triples, path {path!r} (MRR {mrr:.9f}):")
        print(format_table(counter, args.rows))


if __name__ == "__main__":
    main()
