"""Adjusted and z-scored metrics (METRICS.md, Adjusted metrics; Berrendorf et al. 2020, Hoyt et al. 2022): affine
maps of a plain metric M by its null-model moments, computed with every task's own num_candidates
(:class:`AdjustedMetric`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kgeval.metrics import null_model, plain
from kgeval.metrics.summary import RankSummary, safe_ratio

Kind = Literal["ratio", "index", "z"]

#: the plain metrics with closed-form null moments: value function, moments function, sign (+1: higher is better)
BASES: dict[str, tuple[Callable[[RankSummary, int | None], float], Callable[..., null_model.Moments], int]] = {
    "arithmetic_mean_rank": (plain.arithmetic_mean_rank, null_model.arithmetic_mean_rank_moments, -1),
    "inverse_harmonic_mean_rank": (plain.inverse_harmonic_mean_rank, null_model.inverse_harmonic_mean_rank_moments, 1),
    "geometric_mean_rank": (plain.geometric_mean_rank, null_model.geometric_mean_rank_moments, -1),
    "hits_at_k": (plain.hits_at_k, null_model.hits_at_k_moments, 1),
}


@dataclass(frozen=True)
class AdjustedMetric:
    """A metric of the adjusted family: a callable ``(summary, k) -> float`` like every metric function.

    Parameters
    ----------
    name : str
        Its METRICS.md key (``_at_k`` for the hits family).
    base : str
        The plain metric it adjusts, a key of :data:`BASES`.
    kind : {"ratio", "index", "z"}
        The map (see Notes).

    Notes
    -----
    - ``ratio``: M / E[M] (adjusted_arithmetic_mean_rank);
    - ``index``: (M - E[M]) / (1 - E[M]), 0 when random, 1 when perfect;
    - ``z``: sign (M - E[M]) / sqrt(Var[M]), with sign = -1 for metrics where lower is better.

    Their own moments follow from the map (:meth:`moments`). A zero denominator (every C_i = 1, or k >= every C_i for
    hits@k) gives NaN with an :class:`~kgeval.UndefinedMetricWarning`.
    """

    name: str
    base: str
    kind: Kind

    def _label(self, k: int | None) -> str:
        return self.name.replace("_at_k", f"_at_{k}")

    def __call__(self, summary: RankSummary, k: int | None = None) -> float:
        """The metric's value on ``summary`` (realistic ranks and their num_candidates)."""
        value_of, moments_of, sign = BASES[self.base]
        value = value_of(summary, k)
        expectation, variance = moments_of(summary, k)
        label = self._label(k)
        if self.kind == "ratio":
            return safe_ratio(value, expectation, label)
        if self.kind == "index":
            return safe_ratio(value - expectation, 1.0 - expectation, label)
        return safe_ratio(sign * (value - expectation), _sqrt(variance), label)

    def moments(self, summary: RankSummary, k: int | None = None) -> null_model.Moments:
        """(E, Var) of this metric under the null model, from those of its base metric."""
        expectation, variance = BASES[self.base][1](summary, k)
        label = f"the null model of {self._label(k)}"
        if self.kind == "ratio":
            return safe_ratio(expectation, expectation, label), safe_ratio(variance, expectation**2, label)
        if self.kind == "index":
            scale = 1.0 - expectation
            return abs(safe_ratio(0.0, scale, label)), safe_ratio(variance, scale * scale, label)
        return safe_ratio(0.0, variance, label), safe_ratio(variance, variance, label)


def _sqrt(variance: float) -> float:
    """sqrt of a variance, NaN passing through (a variance is never negative here: every term is >= 0)."""
    return math.sqrt(variance) if variance >= 0 else math.nan


adjusted_arithmetic_mean_rank = AdjustedMetric("adjusted_arithmetic_mean_rank", "arithmetic_mean_rank", "ratio")
adjusted_arithmetic_mean_rank_index = AdjustedMetric(
    "adjusted_arithmetic_mean_rank_index", "arithmetic_mean_rank", "index"
)
adjusted_inverse_harmonic_mean_rank = AdjustedMetric(
    "adjusted_inverse_harmonic_mean_rank", "inverse_harmonic_mean_rank", "index"
)
adjusted_geometric_mean_rank_index = AdjustedMetric(
    "adjusted_geometric_mean_rank_index", "geometric_mean_rank", "index"
)
adjusted_hits_at_k = AdjustedMetric("adjusted_hits_at_k", "hits_at_k", "index")
z_arithmetic_mean_rank = AdjustedMetric("z_arithmetic_mean_rank", "arithmetic_mean_rank", "z")
z_inverse_harmonic_mean_rank = AdjustedMetric("z_inverse_harmonic_mean_rank", "inverse_harmonic_mean_rank", "z")
z_geometric_mean_rank = AdjustedMetric("z_geometric_mean_rank", "geometric_mean_rank", "z")
z_hits_at_k = AdjustedMetric("z_hits_at_k", "hits_at_k", "z")
