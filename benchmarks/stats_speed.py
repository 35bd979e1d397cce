"""How long do analysis.stats.compare and confidence_interval take? Prints seconds and ratios, measured in one run.

    python benchmarks/stats_speed.py [--triples 20000] [--resamples 10000]

Two synthetic evaluations of n triples (2n ranking tasks, ranks ~ Geometric(0.2)) are compared with every test.
The vectorised path (hits@k, MRR, MR) is timed against the registry path that any other metric takes (the same
MRR forced through its registry function per resample), on fewer resamples for the slow path.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import numpy as np

from kgeval import RankBasedMetricResults
from kgeval.analysis import resampling
from kgeval.analysis.stats import compare


def synthetic(num_triples: int, seed: int) -> RankBasedMetricResults:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.geometric(0.2, 2 * num_triples), 1000)
    index = np.tile(np.arange(num_triples), 2)
    records = {
        "head": index,
        "relation": np.zeros(2 * num_triples, dtype=np.int64),
        "tail": index,
        "side": np.repeat([0, 1], num_triples),
        "optimistic": ranks,
        "pessimistic": ranks,
        "num_candidates": np.full(2 * num_triples, 1000),
        "task_index": index,
    }
    keys = ("inverse_harmonic_mean_rank", "hits_at_10", "geometric_mean_rank", "median_rank")
    return RankBasedMetricResults(data={("both", "realistic", key): 0.0 for key in keys}, ks=(10,), records=records)


def timed(function, *args, **kwargs) -> float:
    start = time.perf_counter()
    function(*args, **kwargs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=20_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    a, b = synthetic(args.triples, 1), synthetic(args.triples, 2)
    n = args.resamples
    print(f"{args.triples} triples, {n} resamples")
    for key in ("mrr", "hits@10"):
        for test in ("permutation", "bootstrap", "wilcoxon"):
            print(f"  compare {key:<8} {test:<12} {timed(compare, a, b, key, test=test, n_resamples=n):7.2f} s")
    print(f"  confidence_interval mrr         {timed(a.confidence_interval, 'mrr', n_resamples=n):7.2f} s")
    slow_n = max(1, n // 20)
    fast = timed(compare, a, b, "mrr", test="bootstrap", n_resamples=slow_n)
    with mock.patch.object(resampling, "MEAN_TYPE", {}):
        slow = timed(compare, a, b, "mrr", test="bootstrap", n_resamples=slow_n)
    median = timed(compare, a, b, "median_rank", test="bootstrap", n_resamples=slow_n)
    print(f"  {slow_n} resamples: registry path / vectorised path (MRR, bootstrap) = {slow / fast:.1f}x")
    print(f"  {slow_n} resamples: median_rank (records per resample) / vectorised MRR = {median / fast:.1f}x")


if __name__ == "__main__":
    main()
