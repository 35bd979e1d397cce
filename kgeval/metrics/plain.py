"""Plain rank-based metrics (METRICS.md, Plain metrics): pure functions of a :class:`RankSummary`.

Each function is named by its METRICS.md key and takes ``(summary, k)``; ``k`` is used by hits_at_k only.
Formulas are those of METRICS.md; this module only states how each is read off the summary.
"""

from __future__ import annotations

import math

import numpy as np

from kgeval.metrics.summary import RankSummary, safe_ratio

__all__ = [
    "MAD_NORMAL_SCALE",
    "arithmetic_mean_rank",
    "count",
    "geometric_mean_rank",
    "harmonic_mean_rank",
    "hits_at_k",
    "inverse_arithmetic_mean_rank",
    "inverse_geometric_mean_rank",
    "inverse_harmonic_mean_rank",
    "inverse_median_rank",
    "median_absolute_deviation",
    "median_rank",
    "standard_deviation",
    "variance",
]

#: 1 / Phi^-1(3/4): scales the median absolute deviation to the standard deviation of a normal distribution
MAD_NORMAL_SCALE = 1.0 / 0.6744897501960817


def hits_at_k(summary: RankSummary, k: int | None) -> float:
    """Fraction of ranks <= k."""
    if k is None:
        raise ValueError("hits_at_k needs k")
    return safe_ratio(summary.hits(k), summary.count, f"hits_at_{k}")


def arithmetic_mean_rank(summary: RankSummary, k: int | None = None) -> float:
    """MR = (1/n) sum r."""
    return safe_ratio(float(summary.sums["sum_rank"]), summary.count, "arithmetic_mean_rank")


def inverse_arithmetic_mean_rank(summary: RankSummary, k: int | None = None) -> float:
    """1 / MR."""
    return safe_ratio(summary.count, float(summary.sums["sum_rank"]), "inverse_arithmetic_mean_rank")


def harmonic_mean_rank(summary: RankSummary, k: int | None = None) -> float:
    """n / sum(1/r)."""
    return safe_ratio(summary.count, float(summary.sums["sum_reciprocal_rank"]), "harmonic_mean_rank")


def inverse_harmonic_mean_rank(summary: RankSummary, k: int | None = None) -> float:
    """MRR = (1/n) sum 1/r."""
    return safe_ratio(float(summary.sums["sum_reciprocal_rank"]), summary.count, "inverse_harmonic_mean_rank")


def geometric_mean_rank(summary: RankSummary, k: int | None = None) -> float:
    """exp((1/n) sum ln r)."""
    mean_log = safe_ratio(float(summary.sums["sum_log_rank"]), summary.count, "geometric_mean_rank")
    return math.exp(mean_log) if not math.isnan(mean_log) else mean_log


def inverse_geometric_mean_rank(summary: RankSummary, k: int | None = None) -> float:
    """1 / GMR."""
    mean_log = safe_ratio(float(summary.sums["sum_log_rank"]), summary.count, "inverse_geometric_mean_rank")
    return math.exp(-mean_log) if not math.isnan(mean_log) else mean_log


def _median(values: np.ndarray, metric: str) -> float:
    if values.size == 0:
        return safe_ratio(float("nan"), 0, metric)
    return float(np.median(values))


def median_rank(summary: RankSummary, k: int | None = None) -> float:
    """Median rank (mean of the two middle values when n is even)."""
    return _median(summary.require_ranks("median_rank"), "median_rank")


def inverse_median_rank(summary: RankSummary, k: int | None = None) -> float:
    """1 / median rank."""
    median = _median(summary.require_ranks("inverse_median_rank"), "inverse_median_rank")
    return 1.0 / median if not math.isnan(median) else median


def variance(summary: RankSummary, k: int | None = None) -> float:
    """Population variance of the ranks (two-pass over the records, no cancellation)."""
    ranks = summary.require_ranks("variance")
    if ranks.size == 0:
        return safe_ratio(float("nan"), 0, "variance")
    return float(np.mean((ranks - ranks.mean()) ** 2))


def standard_deviation(summary: RankSummary, k: int | None = None) -> float:
    """Population standard deviation of the ranks."""
    return math.sqrt(variance(summary))


def median_absolute_deviation(summary: RankSummary, k: int | None = None) -> float:
    """``median(|r - median(r)|)``, scaled to be normal-consistent."""
    ranks = summary.require_ranks("median_absolute_deviation")
    median = _median(ranks, "median_absolute_deviation")
    if math.isnan(median):
        return median
    return float(np.median(np.abs(ranks - median))) * MAD_NORMAL_SCALE


def count(summary: RankSummary, k: int | None = None) -> float:
    """Number of ranking tasks n."""
    return float(summary.count)
