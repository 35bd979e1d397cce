"""Weighted rank-based metrics (METRICS.md, Weighted and macro-weighted metrics): every task i carries a weight
w_i > 0 and each metric averages over tasks with the normalised weights v_i = w_i / sum_j w_j instead of 1/n.

- hits@k = sum v_i [r_i <= k]; MR = sum v_i r_i; MRR = sum v_i / r_i; GMR = exp(sum v_i ln r_i); the inverse and
  harmonic forms are their reciprocals;
- median rank: the weighted median (the smallest rank whose cumulative normalised weight reaches 1/2, the mean of
  it and the next when the cumulative weight equals 1/2 exactly); MAD: the weighted median of ``|r_i - median|``,
  scaled to the normal distribution like the unweighted MAD;
- the null model: E[M] = sum v_i E[x_i] and Var[M] = sum v_i^2 Var[x_i] for the means (MR, MRR, hits@k), and
  E[GMR] = prod E[r_i^(v_i)] for GMR (:func:`kgeval.metrics.null_model.geometric_mean_rank_null`); the adjusted and
  z metrics apply their usual maps to these moments;
- count, variance and standard deviation stay unweighted (they describe the tasks, as PyKEEN's weighted evaluation
  reports them).

Equal weights give the unweighted metrics. :func:`weighted_metrics` computes every metric kgeval reports.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from kgeval.exceptions import UndefinedMetricWarning, quieted
from kgeval.metrics import null_model, plain
from kgeval.metrics.adjusted import AdjustedMetric
from kgeval.metrics.registry import MetricInfo, reported_keys
from kgeval.metrics.summary import RankSummary, safe_ratio
from kgeval.typing import RankType

__all__ = ["WeightedRanks", "frequency_denominators", "frequency_weights", "weighted_metrics", "weighted_null_model"]

Moments = tuple[float, float]


@dataclass(frozen=True)
class WeightedRanks:
    """One (side, rank type)'s tasks with their weights.

    Attributes
    ----------
    ranks : float64 array of shape (n,)
    num_candidates : int64 array of shape (n,)
    weights : float64 array of shape (n,)
        Positive; normalised to sum to 1 where read (:attr:`normalised`).
    ks : tuple of int
    """

    ranks: np.ndarray
    num_candidates: np.ndarray
    weights: np.ndarray
    ks: tuple[int, ...]
    #: int64 (n,) c_i with weights_i = 1 / c_i (the macro weights), or None: then the median's test for a cumulative
    #: weight of exactly 1/2 is made in exact fractions, where float sums of 1/3's miss it
    weight_denominators: np.ndarray | None = None

    @classmethod
    def of_reciprocals(
        cls, ranks: np.ndarray, num_candidates: np.ndarray, denominators: np.ndarray, ks: tuple[int, ...]
    ) -> WeightedRanks:
        """Tasks weighing 1 / ``denominators`` (int64 (n,): the macro weights), kept exact for the median."""
        return cls(ranks, num_candidates, 1.0 / denominators.astype(np.float64), ks, denominators)

    def __post_init__(self) -> None:
        n = self.ranks.shape[0]
        if self.num_candidates.shape != (n,) or self.weights.shape != (n,):
            raise ValueError("ranks, num_candidates and weights must have the same shape (n,)")
        if n and not (np.all(np.isfinite(self.weights)) and np.all(self.weights > 0)):
            raise ValueError("weights must be positive and finite")

    @property
    def count(self) -> int:
        """Number of tasks n."""
        return int(self.ranks.shape[0])

    @functools.cached_property
    def normalised(self) -> np.ndarray:
        """v_i = w_i / sum_j w_j (float64, shape (n,)); computed once, read by every metric and moment."""
        return self.weights / math.fsum(self.weights.tolist())

    def mean(self, values: np.ndarray, metric: str) -> float:
        """sum v_i values_i, NaN with a warning when there are no tasks."""
        if self.count == 0:
            return safe_ratio(math.nan, 0, metric)
        return math.fsum((self.normalised * values).tolist())

    def median(self, values: np.ndarray, metric: str) -> float:
        """The weighted median of ``values`` (see the module docstring), NaN with a warning when empty."""
        if self.count == 0:
            return safe_ratio(math.nan, 0, metric)
        order = np.argsort(values, kind="stable")
        sorted_values = values[order]
        cumulative = np.cumsum(self.weights[order])
        cumulative /= cumulative[-1]
        index, half = self._crossing(order, cumulative)
        if half and index + 1 < sorted_values.size:
            return float((sorted_values[index] + sorted_values[index + 1]) / 2.0)
        return float(sorted_values[index])

    def _crossing(self, order: np.ndarray, cumulative: np.ndarray) -> tuple[int, bool]:
        """(the first position of ``order`` whose cumulative normalised weight reaches 1/2, whether it equals 1/2
        exactly). Float sums decide, except within :data:`_HALF_TOLERANCE` of 1/2 where the weights are known
        reciprocals of integers: there the sums are compared as exact fractions."""
        if self.weight_denominators is None:
            index = int(np.searchsorted(cumulative, 0.5))
            return index, bool(cumulative[index] == 0.5)
        near = np.flatnonzero(np.abs(cumulative - 0.5) <= _HALF_TOLERANCE)
        signs = np.where(cumulative < 0.5, -1, 1)  # float verdicts, sure away from 1/2
        if near.size:
            denominators = self.weight_denominators[order]
            total = _reciprocal_sum(denominators)
            for position in near.tolist():
                prefix = _reciprocal_sum(denominators[: position + 1])
                signs[position] = (2 * prefix > total) - (2 * prefix < total)
        index = int(np.flatnonzero(signs >= 0)[0])
        return index, bool(signs[index] == 0)

    def as_summary(self) -> RankSummary:
        """The unweighted summary of the same tasks (for the metrics that stay unweighted)."""
        return RankSummary(ks=self.ks, sums={"count": self.count}, ranks=self.ranks, num_candidates=self.num_candidates)


# -- values -----------------------------------------------------------------------------------------------------
def _hits_at_k(data: WeightedRanks, k: int | None) -> float:
    if k is None:
        raise ValueError("hits_at_k needs k")
    return data.mean((data.ranks <= k).astype(np.float64), f"hits_at_{k}")


def _arithmetic_mean_rank(data: WeightedRanks, k: int | None = None) -> float:
    return data.mean(data.ranks, "arithmetic_mean_rank")


def _inverse_harmonic_mean_rank(data: WeightedRanks, k: int | None = None) -> float:
    return data.mean(1.0 / data.ranks, "inverse_harmonic_mean_rank")


def _geometric_mean_rank(data: WeightedRanks, k: int | None = None) -> float:
    mean_log = data.mean(np.log(data.ranks), "geometric_mean_rank")
    return math.exp(mean_log) if not math.isnan(mean_log) else mean_log


def _median_rank(data: WeightedRanks, k: int | None = None) -> float:
    return data.median(data.ranks, "median_rank")


def _reciprocal(function: Callable[[WeightedRanks, int | None], float]) -> Callable[[WeightedRanks, int | None], float]:
    def reciprocal(data: WeightedRanks, k: int | None = None) -> float:
        value = function(data, k)
        return 1.0 / value if not math.isnan(value) else value

    return reciprocal


def _median_absolute_deviation(data: WeightedRanks, k: int | None = None) -> float:
    median = data.median(data.ranks, "median_absolute_deviation")
    if math.isnan(median):
        return median
    return data.median(np.abs(data.ranks - median), "median_absolute_deviation") * plain.MAD_NORMAL_SCALE


def _unweighted(function: Callable[[RankSummary, int | None], float]) -> Callable[[WeightedRanks, int | None], float]:
    def unweighted(data: WeightedRanks, k: int | None = None) -> float:
        return function(data.as_summary(), k)

    return unweighted


#: the weighted counterpart of each plain metric function
VALUES: dict[Callable, Callable[[WeightedRanks, int | None], float]] = {
    plain.hits_at_k: _hits_at_k,
    plain.arithmetic_mean_rank: _arithmetic_mean_rank,
    plain.inverse_arithmetic_mean_rank: _reciprocal(_arithmetic_mean_rank),
    plain.inverse_harmonic_mean_rank: _inverse_harmonic_mean_rank,
    plain.harmonic_mean_rank: _reciprocal(_inverse_harmonic_mean_rank),
    plain.geometric_mean_rank: _geometric_mean_rank,
    plain.inverse_geometric_mean_rank: _reciprocal(_geometric_mean_rank),
    plain.median_rank: _median_rank,
    plain.inverse_median_rank: _reciprocal(_median_rank),
    plain.median_absolute_deviation: _median_absolute_deviation,
    plain.count: _unweighted(plain.count),
    plain.variance: _unweighted(plain.variance),
    plain.standard_deviation: _unweighted(plain.standard_deviation),
}


# -- null-model moments -----------------------------------------------------------------------------------------
def _mean_moments(data: WeightedRanks, expected: np.ndarray, variances: np.ndarray, metric: str) -> Moments:
    """(sum v_i E[x_i], sum v_i^2 Var[x_i])."""
    if data.count == 0:
        nan = safe_ratio(math.nan, 0, f"the null model of {metric}")
        return nan, nan
    v = data.normalised
    return math.fsum((v * expected).tolist()), math.fsum((v * v * variances).tolist())


def _arithmetic_mean_rank_moments(data: WeightedRanks, k: int | None = None) -> Moments:
    c = data.num_candidates.astype(np.float64)
    return _mean_moments(data, (c + 1.0) / 2.0, (c * c - 1.0) / 12.0, "arithmetic_mean_rank")


def _inverse_harmonic_mean_rank_moments(data: WeightedRanks, k: int | None = None) -> Moments:
    counts = torch.from_numpy(data.num_candidates.astype(np.int64))
    harmonic = null_model.harmonic_number(counts).numpy()
    second = null_model.second_harmonic_number(counts).numpy()
    c = data.num_candidates.astype(np.float64)
    variances = (c * second - harmonic**2) / (c * c)
    return _mean_moments(data, harmonic / c, variances, "inverse_harmonic_mean_rank")


def _hits_at_k_moments(data: WeightedRanks, k: int | None) -> Moments:
    if k is None:
        raise ValueError("hits_at_k needs k")
    probability = np.minimum(k / data.num_candidates.astype(np.float64), 1.0)
    return _mean_moments(data, probability, probability * (1.0 - probability), f"hits_at_{k}")


def _geometric_mean_rank_moments(data: WeightedRanks, k: int | None = None) -> Moments:
    return null_model.geometric_mean_rank_null(data.num_candidates, data.weights)


#: the weighted counterpart of each closed-form null-model moments function
MOMENTS: dict[Callable, Callable[[WeightedRanks, int | None], Moments]] = {
    null_model.hits_at_k_moments: _hits_at_k_moments,
    null_model.arithmetic_mean_rank_moments: _arithmetic_mean_rank_moments,
    null_model.inverse_harmonic_mean_rank_moments: _inverse_harmonic_mean_rank_moments,
    null_model.geometric_mean_rank_moments: _geometric_mean_rank_moments,
}


def _weighted_adjusted(metric: AdjustedMetric) -> AdjustedMetric:
    """The same adjusted metric over the weighted value and moments of its base metric."""
    # the same formula over another record type (WeightedRanks in place of RankSummary): structurally reused
    value, moments = VALUES[metric.base_value], MOMENTS[metric.base_moments]
    return dataclasses.replace(metric, base_value=value, base_moments=moments)  # type: ignore[arg-type]


def _value_function(info: MetricInfo) -> Callable[[WeightedRanks, int | None], float]:
    if isinstance(info.function, AdjustedMetric):
        return _weighted_adjusted(info.function)  # type: ignore[return-value]
    return VALUES[info.function]


def _moments_function(info: MetricInfo) -> Callable[[WeightedRanks, int | None], Moments] | None:
    if isinstance(info.function, AdjustedMetric):
        return _weighted_adjusted(info.function).moments  # type: ignore[return-value]
    return MOMENTS.get(info.null_moments) if info.null_moments is not None else None


def weighted_metrics(data: WeightedRanks, rank_type: RankType) -> dict[str, float]:
    """Every metric kgeval reports for ``rank_type`` (key -> value), weighted (see the module docstring);
    ``data.ranks`` must be of that rank type."""
    return {key: _value_function(info)(data, k) for key, info, k in reported_keys(data.ks, rank_type)}


def weighted_null_model(data: WeightedRanks) -> dict[str, Moments]:
    """(E, Var) under the null model of every weighted metric with a closed form (key -> moments); undefined
    moments are NaN without a second warning (the metric's own value already warned)."""
    out = {}
    with quieted(UndefinedMetricWarning):
        for key, info, k in reported_keys(data.ks, "realistic"):
            moments = _moments_function(info)
            if moments is not None:
                out[key] = moments(data, k)
    return out


#: how close to 1/2 a float cumulative weight must be for the exact test (float sums of n weights err by ~n 1e-16)
_HALF_TOLERANCE = 1e-9


def _reciprocal_sum(denominators: np.ndarray) -> Fraction:
    """sum 1 / c_i exactly, grouped by the distinct c (few: the sizes of the query groups)."""
    distinct, counts = np.unique(denominators, return_counts=True)
    return sum((Fraction(int(n), int(c)) for c, n in zip(distinct, counts, strict=True)), Fraction(0))


def frequency_denominators(keys: np.ndarray) -> np.ndarray:
    """The number of rows equal to each row of an int array of shape (n, m) (int64, shape (n,)): the denominators
    of :func:`frequency_weights`."""
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)].astype(np.int64)


def frequency_weights(keys: np.ndarray) -> np.ndarray:
    """1 / (number of rows equal to each row) for an int array of shape (n, m): each distinct key's rows weigh 1 in
    all (float64, shape (n,))."""
    return 1.0 / frequency_denominators(keys).astype(np.float64)
