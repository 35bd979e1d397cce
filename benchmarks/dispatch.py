"""What one evaluation costs the host: ATen operations (kernel launches on a GPU) and sync ops (host-device
synchronisations on a GPU), counted on CPU tensors, per evaluation and per kgeval function.

    python benchmarks/dispatch.py --dataset FB15k-237                      # full test set, every path
    python benchmarks/dispatch.py --dataset WN18RR --triples 2000 --path device

A seeded DistMult (d = 200), its test triples filtered by train + valid, ``kernel="eager"``, ``batch_size=10**6``
and ``slice_size`` = the number of entities (one batch of every query of a side, as a GPU's sizing gives). One
evaluator evaluates twice, as a training loop calls it every epoch; the second evaluation is counted (under
kgeval._engine.dispatch_count.DispatchCounter). ``--model transr-table`` counts a seeded TransR-like model
(:class:`TransRTable`, entity d = 200, relation d = 100) through its per-relation candidate table
(kgeval._engine.relation_tables: ops per relation of a tile, not per query), ``--model transr-own`` the same model
through its own score_t / score_h (``fast_path=False``: one call per batch, every candidate transformed per query).
The paths (``--path``):

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

import torch

from kgeval import RankBasedEvaluator
from kgeval._engine.dispatch_count import DispatchCounter, format_table
from kgeval.datasets import load_dataset
from kgeval.models import DistMult

#: --path: (device_path, pair_layout)
PATHS = {"device": (True, None), "device-sorted": (True, "sorted"), "cpu": (False, None)}
#: --model: the models counted
MODELS = ("distmult", "transr-table", "transr-own")


class TransRTable(torch.nn.Module):
    """A seeded TransR-like model, -||h M_r + r - t M_r||^2, with its own score_t / score_h (every candidate
    projected for every query, as a training loop scores) and its per-relation candidate table
    (kgeval.protocol.RelationTableModel: t M_r per relation, the query h M_r + r)."""

    kgeval_similarity = "l2"

    def __init__(self, num_entities: int, num_relations: int, dim: int = 200, relation_dim: int = 100,
                 seed: int = 0) -> None:  # fmt: skip
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.num_entities, self.num_relations = num_entities, num_relations
        self.entities = torch.nn.Parameter(torch.randn(num_entities, dim, generator=generator) / dim**0.5)
        self.vectors = torch.nn.Parameter(torch.randn(num_relations, relation_dim, generator=generator) / 10)
        self.matrices = torch.nn.Parameter(torch.randn(num_relations, dim, relation_dim, generator=generator)
                                           / dim**0.5)  # fmt: skip

    def _scores(self, entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
        matrices = self.matrices[relation]
        query = torch.einsum("be,bed->bd", self.entities[entity], matrices)
        candidates = torch.einsum("ne,bed->bnd", self.entities, matrices)
        vector = self.vectors[relation].unsqueeze(1)
        heads, tails = (query.unsqueeze(1), candidates) if target == "tail" else (candidates, query.unsqueeze(1))
        return -(heads + vector - tails).square().sum(-1)

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._scores(hr_batch[:, 0], hr_batch[:, 1], "tail")

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._scores(rt_batch[:, 1], rt_batch[:, 0], "head")

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        entity, relation = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        projected = torch.einsum("be,bed->bd", self.entities[entity], self.matrices[relation])
        return projected + self.vectors[relation] if target == "tail" else projected - self.vectors[relation]

    def kgeval_relation_candidates(self, relation: int, target: str, entities: torch.Tensor) -> torch.Tensor:
        return self.entities[entities] @ self.matrices[relation]


def count(dataset: str, triples: int | None, path: str, model_name: str = "distmult") -> tuple[DispatchCounter, float]:
    """The counter of the second of two evaluations by one evaluator, and its MRR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset(dataset)
    if model_name == "distmult":
        model: torch.nn.Module = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    else:
        model = TransRTable(data.num_entities, data.num_relations, seed=0)
    test = data.test if triples is None else data.test[:triples]
    evaluator = RankBasedEvaluator(kernel="eager", batch_size=10**6, slice_size=data.num_entities,
                                   fast_path=model_name != "transr-own")  # fmt: skip
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
    parser.add_argument("--model", choices=MODELS, default="distmult")
    args = parser.parse_args()
    for path in PATHS if args.path == "all" else (args.path,):
        counter, mrr = count(args.dataset, args.triples, path, args.model)
        size = "all" if args.triples is None else args.triples
        print(f"{args.dataset}, {size} test triples, {args.model}, path {path!r} (MRR {mrr:.9f}):")
        print(format_table(counter, args.rows))


if __name__ == "__main__":
    main()
