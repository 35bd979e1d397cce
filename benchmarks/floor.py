"""How far the fast path is from the GEMM floor, measured in one process, interleaved round by round.

    python benchmarks/floor.py --dataset FB15k-237 --rounds 6
    python benchmarks/floor.py --dataset WN18RR --kernels numba

The floor is the bare GEMM of the distinct queries of each side of the test set -- every distinct (h, r) and (r, t)
query's vector times all candidates, the least any exact full ranking computes -- in the fastest chunk of rows
(blocks of 576 .. 2048 rows x 512 candidates .. all, written into a preallocated output; each shape tried twice,
the fastest kept). Each round runs the floor and a full
filtered kgeval evaluation per kernel (DistMult d = 200, both sides, every metric), one after the other in the same
process; the printed ratio is the median over rounds of kgeval / floor *of the same round*, so that the machine's
drift between rounds (on a shared VM, 10-30%) cancels. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import machine

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult

#: (rows, candidate columns) of the GEMM blocks tried for the floor (None: every candidate); the fastest is kept
SHAPES = tuple((rows, width) for rows in (576, 1024, 2048) for width in (None, 4096, 1024, 512))


def distinct_queries(test: torch.Tensor) -> dict[str, torch.Tensor]:
    """The distinct queries of each side: (h, r) for tails, (r, t) for heads."""
    return {"tail": torch.unique(test[:, [0, 1]], dim=0), "head": torch.unique(test[:, [1, 2]], dim=0)}


def bare_scores(model: Any, target: str, pairs: torch.Tensor, shape: tuple[int, int | None]) -> None:
    """The scores of ``pairs``' query vectors against all candidates of the query/candidate form (cdist for "l1"),
    in blocks of ``shape`` (rows, candidate columns; None: all) written into one preallocated output: the GEMM of
    the form and nothing else."""
    rows, width = shape
    candidates = model.kgeval_candidates(target)
    width = width or candidates.shape[0]
    out = torch.empty(rows * width)
    for start in range(0, len(pairs), rows):
        vectors = model.kgeval_query(pairs[start : start + rows], target)
        for column in range(0, candidates.shape[0], width):
            block = candidates[column : column + width]
            if model.kgeval_similarity == "l1":
                torch.cdist(vectors, block, p=1)
            else:
                torch.matmul(vectors, block.T, out=out[: len(vectors) * len(block)].view(len(vectors), len(block)))


def floor_seconds(model: Any, queries: dict[str, torch.Tensor], shape: tuple[int, int | None]) -> float:
    """Seconds of :func:`bare_scores` of every side's distinct queries in blocks of ``shape``."""
    started = time.perf_counter()
    for target, pairs in queries.items():
        bare_scores(model, target, pairs, shape)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--kernels", nargs="+", default=["eager", "numba"], choices=["eager", "numba"])
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # labels unseen in train: kept, as in every other benchmark
        data = load_dataset(args.dataset)  # a shipped name, a folder, or a folder of the shared data
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
    queries = distinct_queries(data.test)
    known = {"additional_filter_triples": [data.train, data.valid], "use_tqdm": False}
    evaluators = {kernel: RankBasedEvaluator(kernel=kernel) for kernel in args.kernels}
    with torch.inference_mode():
        shape = min(SHAPES, key=lambda shape: min(floor_seconds(model, queries, shape) for _ in range(2)))
        for evaluator in evaluators.values():
            evaluator.evaluate(model, data.test, **known)  # warm-up: numba, the filter index, the allocator
        floors: list[float] = []
        times: dict[str, list[float]] = {kernel: [] for kernel in evaluators}
        for _round in range(args.rounds):
            floors.append(floor_seconds(model, queries, shape))
            for kernel, evaluator in evaluators.items():
                started = time.perf_counter()
                evaluator.evaluate(model, data.test, **known)
                times[kernel].append(time.perf_counter() - started)
    rows = sum(len(pairs) for pairs in queries.values())
    name = Path(args.dataset).name
    print(f"{name}: DistMult d=200, {len(data.test):,} test triples x 2 sides, {data.num_entities:,} entities; "
          f"floor: {rows:,} distinct query rows x all candidates in {shape[0]} x {shape[1] or 'all'} blocks; "
          f"torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; {args.rounds} interleaved rounds")  # fmt: skip
    print(f"machine: {machine()}")
    print(f"floor: median {statistics.median(floors):.3f} s (min {min(floors):.3f})")
    for kernel, seconds in times.items():
        ratios = [kgeval / floor for kgeval, floor in zip(seconds, floors, strict=True)]
        print(f"[{kernel}] kgeval median {statistics.median(seconds):.3f} s (min {min(seconds):.3f}); "
              f"kgeval / floor of the same round: median {statistics.median(ratios):.2f}x "
              f"(range {min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
