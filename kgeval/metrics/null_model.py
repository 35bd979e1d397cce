"""The null model of METRICS.md: every task ranked uniformly at random among its own C_i candidates. Additive
per-task terms of MR, MRR and hits@k (:func:`candidate_statistics`, merged like the rank sums), GMR's moments from the
num_candidates records, and the ``*_moments(summary, k)`` closed forms the metric table reads.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence

import numpy as np
import torch

from kgeval.metrics.summary import RankSummary, safe_ratio

__all__ = [
    "EULER_GAMMA",
    "Moments",
    "arithmetic_mean_rank_moments",
    "candidate_statistics",
    "geometric_mean_rank_moments",
    "geometric_mean_rank_null",
    "harmonic_number",
    "hits_at_k_moments",
    "hits_probability",
    "inverse_harmonic_mean_rank_moments",
    "second_harmonic_number",
]

EULER_GAMMA = 0.5772156649015329
#: H_p(C) for C up to this size comes from an exactly summed table, beyond it from (poly)gamma functions
HARMONIC_TABLE_SIZE = 1024
#: longest run of j summed sequentially in the GMR null model (keeps the rounding error of each sum small)
SEGMENT_SIZE = 1024

Moments = tuple[float, float]


@functools.cache
def _harmonic_table(p: int) -> torch.Tensor:
    """H_p(c) for c = 0..HARMONIC_TABLE_SIZE (float64), summed with Neumaier compensation (~1 ulp)."""
    values, total, compensation = [0.0], 0.0, 0.0
    for j in range(1, HARMONIC_TABLE_SIZE + 1):
        term = 1.0 / j**p
        new_total = total + term
        compensation += (total - new_total) + term if abs(total) >= term else (term - new_total) + total
        total = new_total
        values.append(total + compensation)
    return torch.tensor(values, dtype=torch.float64, device="cpu")


def _harmonic(c: torch.Tensor, p: int, tail: torch.Tensor) -> torch.Tensor:
    """H_p(C) from the table for small C, from ``tail`` (the special-function value) for large C."""
    table = _harmonic_table(p).to(c.device)
    small = table[c.clamp(max=HARMONIC_TABLE_SIZE)]
    return torch.where(c <= HARMONIC_TABLE_SIZE, small, tail)


def harmonic_number(c: torch.Tensor) -> torch.Tensor:
    """H(C) = sum_{j=1..C} 1/j for an int tensor C >= 1, float64, exact to ~1 ulp (H(1) == 1 exactly)."""
    return _harmonic(c, 1, torch.special.digamma(c.to(torch.float64) + 1.0) + EULER_GAMMA)


def second_harmonic_number(c: torch.Tensor) -> torch.Tensor:
    """H_2(C) = sum_{j=1..C} 1/j^2 (= pi^2/6 - psi'(C + 1) for large C), float64, ~1 ulp."""
    return _harmonic(c, 2, math.pi**2 / 6.0 - torch.special.polygamma(1, c.to(torch.float64) + 1.0))


def hits_probability(num_candidates: torch.Tensor, ks: Sequence[int]) -> torch.Tensor:
    """p_ik = min(k / C_i, 1): probability of rank <= k under the null model, float64 of shape (n, len(ks))."""
    c = num_candidates.to(torch.float64)
    k_tensor = torch.as_tensor(list(ks), dtype=torch.float64, device=c.device)
    return torch.clamp(k_tensor.unsqueeze(0) / c.unsqueeze(1), max=1.0)


def candidate_statistics(num_candidates: torch.Tensor, ks: Sequence[int]) -> dict[str, torch.Tensor]:
    """Per-batch additive null-model sums over tasks (float64 scalars, hits terms of shape (len(ks),)).

    Parameters
    ----------
    num_candidates : LongTensor of shape (n,)
        C_i >= 1 for each task.
    ks : sequence of int

    Returns
    -------
    dict with ``sum_expected_rank`` = sum (C+1)/2, ``sum_rank_variance`` = sum (C^2-1)/12,
    ``sum_expected_reciprocal_rank`` = sum H(C)/C, ``sum_reciprocal_rank_variance`` = sum (C H_2(C) - H(C)^2)/C^2,
    ``sum_hits_probability`` = sum_i p_i and ``sum_hits_variance`` = sum_i p_i (1 - p_i), p_i = min(k/C_i, 1).
    Every term of a task with C = 1 is exact (expectation 1, variance 0).
    """
    c = num_candidates.to(torch.float64)
    harmonic = harmonic_number(num_candidates)
    probability = hits_probability(num_candidates, ks)
    return {
        "sum_expected_rank": ((c + 1.0) / 2.0).sum(),
        "sum_rank_variance": ((c * c - 1.0) / 12.0).sum(),
        "sum_expected_reciprocal_rank": (harmonic / c).sum(),
        "sum_reciprocal_rank_variance": ((c * second_harmonic_number(num_candidates) - harmonic**2) / (c * c)).sum(),
        "sum_hits_probability": probability.sum(dim=0),
        "sum_hits_variance": (probability * (1.0 - probability)).sum(dim=0),
    }


# -- GMR --------------------------------------------------------------------------------------------------------
def _power_moments(distinct: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    """For r ~ U{1..C} and each C of ``distinct`` (sorted, >= 1): log E[r^a] and log(E[r^2a] / E[r^a]^2).

    Works on g_j = j^a - 1 = expm1(a ln j), computed once for j = 1..max C and cut into segments that end at
    every distinct C and at least every :data:`SEGMENT_SIZE` values. Each segment's mean and sum of squared
    deviations are computed vectorised; the running statistics over j = 1..C are then merged segment by segment
    (Chan et al.'s parallel update), so neither the mean (~a ln C for small a) nor the variance (~a^2) suffers
    cancellation. O(max C) work in total.
    """
    c_max = int(distinct[-1])
    g = np.expm1(a * np.log(np.arange(1, c_max + 1, dtype=np.float64)))
    stops = np.union1d(distinct, np.arange(SEGMENT_SIZE, c_max, SEGMENT_SIZE))
    starts = np.concatenate(([0], stops[:-1]))
    sizes = stops - starts
    means = np.add.reduceat(g, starts) / sizes
    squares = np.add.reduceat(np.square(g - np.repeat(means, sizes)), starts)
    reported = np.isin(stops, distinct)
    log_first, log_ratio = [], []
    count, mean, total_squares = 0, 0.0, 0.0
    for size, segment_mean, segment_squares, report in zip(
        sizes.tolist(), means.tolist(), squares.tolist(), reported.tolist(), strict=True
    ):
        merged = count + size
        delta = segment_mean - mean
        mean += delta * (size / merged)
        total_squares += segment_squares + delta * delta * (count * size / merged)
        count = merged
        if report:
            log_first.append(math.log1p(mean))  # E[r^a] = 1 + mean(g)
            log_ratio.append(math.log1p(total_squares / count / (1.0 + mean) ** 2))  # 1 + Var(g) / E[r^a]^2
    return np.asarray(log_first), np.asarray(log_ratio)


def geometric_mean_rank_null(
    num_candidates: np.ndarray | Sequence[int], weights: np.ndarray | Sequence[float] | None = None
) -> Moments:
    """(E[GMR], Var[GMR]) under the null model, in log space (METRICS.md, Expectation and variance ...).

    E[GMR] = prod_i E[r_i^(1/n)] and Var[GMR] = prod_i E[r_i^(2/n)] - E[GMR]^2
    = E[GMR]^2 * expm1(sum_i log(E[r_i^(2/n)] / E[r_i^(1/n)]^2)); tasks are grouped by distinct C. With weights,
    the weighted GMR exp(sum_i w_i ln r_i / sum_i w_i) has the exponents w_i / sum w in place of 1/n (tasks grouped
    by distinct exponent, then by C).

    Parameters
    ----------
    num_candidates : int array of shape (n,)
        C_i >= 1 of every task.
    weights : float array of shape (n,), optional
        Positive task weights (default: equal).

    Returns
    -------
    expectation, variance : float
        NaN (with an :class:`~kgeval.UndefinedMetricWarning`) when n = 0.
    """
    candidates = np.asarray(num_candidates, dtype=np.int64)
    if candidates.size == 0:
        nan = safe_ratio(math.nan, 0, "the null model of geometric_mean_rank")
        return nan, nan
    if weights is None:
        exponents = np.full(candidates.size, 1.0 / candidates.size)
    else:
        weight_array = np.asarray(weights, dtype=np.float64)
        exponents = weight_array / math.fsum(weight_array.tolist())
    key = None
    if weights is None:  # every rank type of a side has the same num_candidates: computed once, not per metric
        key = (hashlib.blake2b(candidates.tobytes(), digest_size=16).digest(), candidates.size)
        cached = _GMR_NULL_CACHE.get(key)
        if cached is not None:
            return cached
    log_first_terms: list[float] = []
    log_ratio_terms: list[float] = []
    for exponent in np.unique(exponents).tolist():
        distinct, counts = np.unique(candidates[exponents == exponent], return_counts=True)
        log_first, log_ratio = _power_moments(distinct, exponent)
        log_first_terms.extend((counts * log_first).tolist())
        log_ratio_terms.extend((counts * log_ratio).tolist())
    expectation = math.exp(math.fsum(log_first_terms))
    moments = expectation, expectation * expectation * math.expm1(math.fsum(log_ratio_terms))
    if key is not None:
        _GMR_NULL_CACHE[key] = moments
        while len(_GMR_NULL_CACHE) > GMR_NULL_CACHE_SIZE:
            _GMR_NULL_CACHE.pop(next(iter(_GMR_NULL_CACHE)))  # the oldest entry
    return moments


#: unweighted GMR null moments kept, by a 128-bit digest of the num_candidates records (a summary computes them for
#: each of its 3 GMR metrics, and the 3 rank types of a side share the records: 9 computations, ~1 ms each, for
#: one side's results otherwise)
GMR_NULL_CACHE_SIZE = 16
_GMR_NULL_CACHE: dict[tuple[bytes, int], Moments] = {}


# -- closed forms read off a RankSummary ----------------------------------------------------------------------
def _candidate_sum(summary: RankSummary, name: str, metric: str) -> float | np.ndarray:
    if name not in summary.sums:
        raise ValueError(f"the null model of {metric} needs num_candidates, which this summary does not hold")
    return summary.sums[name]


def _mean_moments(summary: RankSummary, sum_mean: float, sum_variance: float, metric: str) -> Moments:
    n = summary.count
    return safe_ratio(sum_mean, n, f"E[{metric}]"), safe_ratio(sum_variance, n * n, f"Var[{metric}]")


def arithmetic_mean_rank_moments(summary: RankSummary, k: int | None = None) -> Moments:
    """(E[MR], Var[MR]) = ((1/n) sum (C_i+1)/2, (1/n^2) sum (C_i^2-1)/12)."""
    metric = "arithmetic_mean_rank"
    mean = float(_candidate_sum(summary, "sum_expected_rank", metric))
    return _mean_moments(summary, mean, float(_candidate_sum(summary, "sum_rank_variance", metric)), metric)


def inverse_harmonic_mean_rank_moments(summary: RankSummary, k: int | None = None) -> Moments:
    """(E[MRR], Var[MRR]) = ((1/n) sum H(C_i)/C_i, (1/n^2) sum (C_i H_2(C_i) - H(C_i)^2)/C_i^2)."""
    metric = "inverse_harmonic_mean_rank"
    mean = float(_candidate_sum(summary, "sum_expected_reciprocal_rank", metric))
    return _mean_moments(summary, mean, float(_candidate_sum(summary, "sum_reciprocal_rank_variance", metric)), metric)


def hits_at_k_moments(summary: RankSummary, k: int | None) -> Moments:
    """(E[H@k], Var[H@k]) = ((1/n) sum p_i, (1/n^2) sum p_i (1 - p_i)), p_i = min(k/C_i, 1)."""
    if k is None:
        raise ValueError("hits_at_k needs k")
    metric = f"hits_at_{k}"
    if k in summary.ks and "sum_hits_probability" in summary.sums:
        index = summary.ks.index(k)
        mean = float(np.asarray(summary.sums["sum_hits_probability"])[index])
        variance = float(np.asarray(summary.sums["sum_hits_variance"])[index])
    else:
        probability = hits_probability(torch.as_tensor(summary.require_num_candidates(metric), device="cpu"), (k,))
        mean, variance = float(probability.sum()), float((probability * (1.0 - probability)).sum())
    return _mean_moments(summary, mean, variance, metric)


def geometric_mean_rank_moments(summary: RankSummary, k: int | None = None) -> Moments:
    """(E[GMR], Var[GMR]) from the num_candidates records (see :func:`geometric_mean_rank_null`)."""
    return geometric_mean_rank_null(summary.require_num_candidates("the null model of geometric_mean_rank"))
