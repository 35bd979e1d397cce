"""Temporal evaluation on ICEWS14: kgeval against the bare GEMM of its distinct queries and against a sort-based
evaluation as the temporal KG field writes it, on the same TNTComplEx and test quadruples.

Usage::

    python benchmarks/temporal.py                       # ../shared/data/ICEWS14, dim 128, 2 rounds
    python benchmarks/temporal.py --dataset ICEWS14s --dim 64 --rounds 3

Contenders (each in its own subprocess, so its peak RSS is its own; best of ``--repeats`` calls; the rounds
interleave the contenders and each ratio is taken within a round, the best round's printed):

- ``kgeval``: ``TemporalRankBasedEvaluator(filtered="time-aware")`` over the test split, filtered by train + valid
  + test, both sides, every metric and rank type.
- ``kgeval-all``: the same with ``filtered="all"``: time-aware, static and raw results from one pass (the time-aware
  MRR printed).
- ``floor``: the bare GEMM of the distinct (h, r, τ) and (r, t, τ) queries of the test split against every entity
  (blocks of 1024 rows, one preallocated output) -- the least an exact full ranking computes.
- ``field``: the field's procedure (RE-GCN / TLogic style, written from their papers): per batch of 1000 queries,
  ``score_t`` / ``score_h`` rows, the other answers known at the query's time (a dict of sets built at the start,
  as their code builds its answer lists) overwritten with -1e7, ``torch.sort`` descending, the answer's position;
  MRR and Hits@{1,3,10} of those ranks (one rank per task: no optimistic / pessimistic / realistic).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    contender,
    load_average,
    machine,
    measure,
    print_rounds,
    run_rounds,
    run_worker,
)

from kgeval import TemporalRankBasedEvaluator
from kgeval.datasets import load_temporal_tsv, shared_data_dir
from kgeval.models import TNTComplEx

#: rows of the floor's GEMM blocks and of the field's score batches
FLOOR_ROWS, FIELD_BATCH = 1024, 1000
#: the field's stand-in score for a filtered answer
FILTERED_SCORE = -10_000_000.0
CONTENDERS = ("kgeval", "kgeval-all", "floor", "field")


def setup(args: argparse.Namespace) -> tuple[Any, Any]:
    """(dataset, TNTComplEx in evaluation mode with every time counted as trained)."""
    folder = Path(args.dataset)
    if not folder.is_dir():
        shared = shared_data_dir()
        if shared is None or not (shared / args.dataset).is_dir():
            raise SystemExit(f"{args.dataset}: neither a folder nor a dataset of the shared data folder")
        folder = shared / args.dataset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_temporal_tsv(folder, unseen="keep")
    model = TNTComplEx(data.num_entities, data.num_relations, data.num_times, dim=args.dim, seed=0).eval()
    model.trained_times[:] = True  # every time scored with its embedding: the full model's cost
    return data, model


def _kgeval(args: argparse.Namespace, setting: str) -> dict[str, Any]:
    data, model = setup(args)
    evaluator = TemporalRankBasedEvaluator(filtered=setting)  # type: ignore[arg-type]
    results: dict[str, Any] = {}

    def run() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = evaluator.evaluate(model, data.test, additional_filter_quadruples=[data.train, data.valid],
                                     use_tqdm=False)  # fmt: skip
        results["mrr"] = got["realistic.mrr"]

    with torch.inference_mode():
        return measure(run, args.repeats) | {"mrr": results["mrr"]}


@contender("kgeval")
def kgeval_contender(args: argparse.Namespace) -> dict[str, Any]:
    return _kgeval(args, "time-aware")


@contender("kgeval-all")
def kgeval_all_contender(args: argparse.Namespace) -> dict[str, Any]:
    return _kgeval(args, "all")


@contender("floor")
def floor_contender(args: argparse.Namespace) -> dict[str, Any]:
    data, model = setup(args)
    test = data.test
    queries = {"tail": torch.unique(test[:, [0, 1, 3]], dim=0), "head": torch.unique(test[:, [1, 2, 3]], dim=0)}
    candidates = model.kgeval_candidates("tail")
    out = torch.empty(FLOOR_ROWS, candidates.shape[0])

    def run() -> None:
        for target, rows in queries.items():
            for start in range(0, len(rows), FLOOR_ROWS):
                vectors = model.kgeval_query(rows[start : start + FLOOR_ROWS], target)
                torch.matmul(vectors, candidates.T, out=out[: len(vectors)])

    with torch.inference_mode():
        return measure(run, args.repeats, rows=sum(len(rows) for rows in queries.values()))


def field_ranks(model: Any, test: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """The field's time-aware filtered ranks of every head and tail task of ``test`` (see the module docstring)."""
    answers: dict[str, dict[tuple[int, int, int], list[int]]] = {"tail": defaultdict(list), "head": defaultdict(list)}
    for h, r, t, tau in known.tolist():
        answers["tail"][(h, r, tau)].append(t)
        answers["head"][(r, t, tau)].append(h)
    ranks = []
    for side, columns, answer_column in (("tail", [0, 1, 3], 2), ("head", [1, 2, 3], 0)):
        for start in range(0, len(test), FIELD_BATCH):
            batch = test[start : start + FIELD_BATCH]
            queries, truth = batch[:, columns], batch[:, answer_column]
            scores = model.score_t(queries) if side == "tail" else model.score_h(queries)
            true_scores = scores[torch.arange(len(batch)), truth].clone()
            rows, entities = [], []
            for i, key in enumerate(queries.tolist()):
                others = answers[side][tuple(key)]
                rows.extend([i] * len(others))
                entities.extend(others)
            scores[torch.tensor(rows, dtype=torch.long), torch.tensor(entities, dtype=torch.long)] = FILTERED_SCORE
            scores[torch.arange(len(batch)), truth] = true_scores
            _, order = torch.sort(scores, dim=1, descending=True)
            ranks.append((order == truth[:, None]).nonzero()[:, 1] + 1)
    return torch.cat(ranks)


@contender("field")
def field_contender(args: argparse.Namespace) -> dict[str, Any]:
    data, model = setup(args)
    known = torch.cat([data.train, data.valid, data.test])
    results: dict[str, Any] = {}

    def run() -> None:
        ranks = field_ranks(model, data.test, known).double()
        results["mrr"] = float((1 / ranks).mean())
        results.update({f"hits@{k}": float((ranks <= k).double().mean()) for k in (1, 3, 10)})

    with torch.inference_mode():
        measured = measure(run, args.repeats)
    return measured | results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ICEWS14")
    parser.add_argument("--dim", type=int, default=128, help="TNTComplEx's complex dimension")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(args)
    argv = ["--dataset", args.dataset, "--dim", str(args.dim), "--repeats", str(args.repeats)]
    print(f"# kgeval temporal benchmark: {args.dataset}, TNTComplEx dim {args.dim}\n\nmachine: {machine()}\n"
          f"load average before: {load_average()}\n")  # fmt: skip
    started = time.time()
    rounds = run_rounds(__file__, CONTENDERS, argv, args.rounds)
    print_rounds(rounds, CONTENDERS, (("kgeval / bare GEMM of the distinct queries", "kgeval", "floor"),
                                      ("kgeval, all three settings / time-aware alone", "kgeval-all", "kgeval"),
                                      ("field's sort-based evaluation / kgeval", "field", "kgeval")))  # fmt: skip
    print(f"\n{time.time() - started:.0f} s in all; load average after: {load_average()}")


if __name__ == "__main__":
    main()
