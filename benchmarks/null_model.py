"""GMR null model: kgeval's closed form vs PyKEEN's, on realistic and very large candidate sets.

Prints the time of each and kgeval's speed-up (one run each, after a warm-up), plus the relative difference of
E[GMR] and Var[GMR]. Run: ``python benchmarks/null_model.py`` (PyKEEN optional).
"""

from __future__ import annotations

import time

import numpy as np

from kgeval.metrics.null_model import geometric_mean_rank_null


def timed(function, *args):
    function(*args)  # warm-up
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def pykeen_gmr(num_candidates: np.ndarray) -> tuple[float, float]:
    from pykeen.metrics.ranking import GeometricMeanRank

    metric = GeometricMeanRank()
    return metric.expected_value(num_candidates), metric.variance(num_candidates)


def main() -> None:
    rng = np.random.default_rng(0)
    cases = {
        "FB15k-237-like: 40,932 tasks, C = 14,541 - filtered": 14_541 - rng.geometric(0.05, size=40_932) + 1,
        "2M candidates: 40,000 tasks, ~40k distinct C": rng.integers(1, 2_000_001, size=40_000),
    }
    for name, num_candidates in cases.items():
        (expectation, variance), ours = timed(geometric_mean_rank_null, num_candidates)
        line = f"{name}: kgeval {ours * 1e3:.1f} ms"
        try:
            (their_expectation, their_variance), theirs = timed(pykeen_gmr, num_candidates)
        except ImportError:
            print(line + " (PyKEEN not installed)")
            continue
        print(
            f"{line}, PyKEEN {theirs * 1e3:.1f} ms, ratio {theirs / ours:.2f}x; "
            f"rel. diff E {expectation / their_expectation - 1:.1e}, Var {variance / their_variance - 1:.1e}"
        )


if __name__ == "__main__":
    main()
