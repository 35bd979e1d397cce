"""Adjusted and z-scored metrics (METRICS.md, Adjusted metrics; Berrendorf et al. 2020, Hoyt et al. 2022): affine
maps of a plain metric M by its null-model moments, computed with every task's own num_candidates
(:class:`AdjustedMetric`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kgeval.metrics.naming import with_k
from kgeval.metrics.summary import RankSummary, safe_ratio

__all__ = [
    "AdjustedMetric",
    "Kind",
    "Moments",
    "MomentsFunction",
    "ValueFunction",
]

ValueFunction = Callable[[RankSummary, "int | None"], float]
Moments = tuple[float, float]
MomentsFunction = Callable[[RankSummary, "int | None"], Moments]

Kind = Literal["ratio", "index", "z"]


@dataclass(frozen=True)
class AdjustedMetric:
    """A metric of the adjusted family: a callable ``(summary, k) -> float`` like every metric function.

    Parameters
    ----------
    name : str
        Its METRICS.md key (``_at_k`` for the hits family).
    kind : {"ratio", "index", "z"}
        The map (see Notes).
    base_value, base_moments : callable
        The plain metric M it adjusts and M's (E, Var) under the null model, both ``(summary, k) -> ...``.
    base_increasing : bool
        M's direction (the z-score is negated for metrics where lower is better).

    Notes
    -----
    - ``ratio``: M / E[M] (adjusted_arithmetic_mean_rank);
    - ``index``: (M - E[M]) / (1 - E[M]), 0 when random, 1 when perfect;
    - ``z``: sign (M - E[M]) / sqrt(Var[M]), with sign = -1 for metrics where lower is better.

    Their own moments follow from the map (:meth:`moments`). A zero denominator (every C_i = 1, or k >= every C_i for
    hits@k) gives NaN with an :class:`~kgeval.UndefinedMetricWarning`.
    """

    name: str
    kind: Kind
    base_value: ValueFunction
    base_moments: MomentsFunction
    base_increasing: bool

    def __call__(self, summary: RankSummary, k: int | None = None) -> float:
        """The metric's value on ``summary`` (realistic ranks and their num_candidates)."""
        value = self.base_value(summary, k)
        expectation, variance = self.base_moments(summary, k)
        sign = 1.0 if self.base_increasing else -1.0
        label = with_k(self.name, k)
        if self.kind == "ratio":
            return safe_ratio(value, expectation, label)
        if self.kind == "index":
            return safe_ratio(value - expectation, 1.0 - expectation, label)
        return safe_ratio(sign * (value - expectation), _sqrt(variance), label)

    def moments(self, summary: RankSummary, k: int | None = None) -> Moments:
        """(E, Var) of this metric under the null model, from those of its base metric."""
        expectation, variance = self.base_moments(summary, k)
        label = f"the null model of {with_k(self.name, k)}"
        if self.kind == "ratio":
            return safe_ratio(expectation, expectation, label), safe_ratio(variance, expectation**2, label)
        if self.kind == "index":
            scale = 1.0 - expectation
            return abs(safe_ratio(0.0, scale, label)), safe_ratio(variance, scale * scale, label)
        return safe_ratio(0.0, variance, label), safe_ratio(variance, variance, label)


def _sqrt(variance: float) -> float:
    """sqrt of a variance, NaN passing through (a variance is never negative here: every term is >= 0)."""
    return math.sqrt(variance) if variance >= 0 else math.nan
