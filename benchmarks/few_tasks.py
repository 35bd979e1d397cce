"""Few tasks over many entities: how many query-rows a model is asked to score, against the distinct queries.

Usage::

    python benchmarks/few_tasks.py --dataset FB15k-237 --triples 472 [--slice-size 2000]

A seeded DistMult is wrapped three ways -- full rows only (``score_t`` / ``score_h``), rows for given candidate
ids (``tails=`` / ``heads=``), whole triples only (``score_hrt``) -- and evaluated on a random subset of the
validation triples (filtered by train + valid, both sides), through the wrappers' methods (``fast_path=False``).
Printed per wrapper: the query-rows scored (scored
cells / candidates), the distinct queries, their ratio (1.00 = every query's candidates scored once) and the
seconds of the evaluation.
"""

from __future__ import annotations

import argparse
import time

import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult


class FullRows(torch.nn.Module):
    def __init__(self, inner: DistMult) -> None:
        super().__init__()
        self.inner, self.num_entities, self.cells = inner, inner.num_entities, 0

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        scores = self.inner.score_t(hr)
        self.cells += scores.numel()
        return scores

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        scores = self.inner.score_h(rt)
        self.cells += scores.numel()
        return scores


class CandidateRows(FullRows):
    def score_t(self, hr: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        scores = self.inner.score_t(hr, tails=tails)
        self.cells += scores.numel()
        return scores

    def score_h(self, rt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        scores = self.inner.score_h(rt, heads=heads)
        self.cells += scores.numel()
        return scores


class Triples(torch.nn.Module):
    def __init__(self, inner: DistMult) -> None:
        super().__init__()
        self.inner, self.num_entities, self.cells = inner, inner.num_entities, 0

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        self.cells += hrt.shape[0]
        return self.inner.score_hrt(hrt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--triples", type=int, default=472)
    parser.add_argument("--slice-size", type=int, default=None)
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    inner = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    chosen = torch.randperm(len(data.valid), generator=torch.Generator().manual_seed(0))[: args.triples]
    valid = data.valid[chosen]
    distinct = len(torch.unique(valid[:, :2], dim=0)) + len(torch.unique(valid[:, 1:], dim=0))
    print(f"{args.dataset}: {len(valid)} validation triples, {distinct} distinct queries, slice_size={args.slice_size}")
    for wrapper in (FullRows, CandidateRows, Triples):
        model = wrapper(inner)
        # the wrappers' own methods: the fast path would take DistMult's vectors from inside them (a delegating
        # module whose form a probe confirms) and never call them
        evaluator = RankBasedEvaluator(slice_size=args.slice_size, fast_path=False)
        started = time.perf_counter()
        evaluator.evaluate(model, valid, additional_filter_triples=[data.train, data.valid], use_tqdm=False)
        seconds = time.perf_counter() - started
        rows = model.cells / data.num_entities
        print(
            f"{wrapper.__name__:>13}: {rows:8.0f} query-rows scored, {rows / distinct:.2f}x the distinct queries, "
            f"{seconds:.2f} s"
        )


if __name__ == "__main__":
    main()
