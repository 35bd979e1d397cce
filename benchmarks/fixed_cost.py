"""The fixed cost of an evaluation: what a small evaluation -- an early stopper's, every epoch -- pays besides its GEMM.

    python benchmarks/fixed_cost.py --dataset FB15k-237

For each size (10 and 1,000 test triples by default), a DistMult (d = 200) is evaluated filtered by the whole
dataset (train + valid + test), both sides, every metric, with one evaluator reused as a training loop reuses it:
the median of ``--repeats`` calls after a first one. Printed beside it: the bare GEMM of the same tasks' distinct
queries against every entity (into a preallocated output), and the difference -- the fixed cost; then the cost of
``RankBasedEvaluator.score_signature`` (the probe that identifies a model where results are resumed or combined).
``--profile`` adds cProfile's largest cumulative entries of one call.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import format_table, machine, median_seconds

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult


def bare_gemm(model: DistMult, triples: torch.Tensor, out: torch.Tensor) -> None:
    """Every distinct (h, r) and (r, t) query of ``triples`` times every entity, written into ``out`` (allocated
    once, outside the timing)."""
    for target, columns in (("tail", [0, 1]), ("head", [1, 2])):
        with torch.no_grad():
            queries = model.kgeval_query(torch.unique(triples[:, columns], dim=0), target)
            candidates = model.kgeval_candidates(target)
            torch.matmul(queries, candidates.T, out=out[: len(queries) * len(candidates)].view(len(queries), -1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset(args.dataset)
    print(machine())
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    known = [data.train, data.valid, data.test]
    rows = []
    for size in args.sizes:
        triples = data.test[:size]
        evaluator = RankBasedEvaluator()

        def evaluate(triples: torch.Tensor = triples, evaluator: RankBasedEvaluator = evaluator) -> None:
            evaluator.evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)

        seconds = median_seconds(evaluate, args.repeats)
        out = torch.empty(2 * size * data.num_entities)
        gemm = median_seconds(lambda triples=triples, out=out: bare_gemm(model, triples, out), args.repeats)
        rows.append([str(size), f"{seconds * 1e3:.1f} ms", f"{gemm * 1e3:.1f} ms", f"{(seconds - gemm) * 1e3:.1f} ms"])
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(evaluate)
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(25)
            print(f"--- {size} triples ---\n{text.getvalue()}")
    print(f"{args.dataset}, DistMult d=200, filtered by train + valid + test, both sides, the evaluator reused; "
          f"median of {args.repeats} calls")  # fmt: skip
    print(format_table(rows, ["test triples", "evaluation", "bare GEMM", "fixed cost"]))
    signature = getattr(RankBasedEvaluator, "score_signature", None)
    if signature is not None:  # the identity probe of resumed and combined results (absent from older checkouts)
        evaluator = RankBasedEvaluator()
        seconds = median_seconds(lambda: evaluator.score_signature(model, data.test[:10]), args.repeats)
        print(f"score_signature (two queries per side against every entity, the model's own methods): "
              f"{seconds * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
