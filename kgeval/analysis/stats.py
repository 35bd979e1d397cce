"""Is model A better than model B? Paired tests and bootstrap intervals from the per-task rank records.

Evaluation triples are resampled, never single ranks (a triple's head and tail tasks together; see
:mod:`kgeval.analysis.resampling`); any reported metric key works. Seeded with numpy's Generator; the Wilcoxon test
needs scipy (the ``stats`` extra), imported only when used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kgeval._checks import check_positive_int
from kgeval.analysis.readings import RecordedResults
from kgeval.analysis.resampling import (
    MEAN_TYPE,
    PairedTasks,
    bootstrap_distribution,
    chunks,
    pair_tasks,
    swapped_differences,
)
from kgeval.keys import format_key

__all__ = ["TESTS", "Comparison", "ConfidenceInterval", "compare", "confidence_interval"]

Test = Literal["permutation", "bootstrap", "wilcoxon"]
TESTS: tuple[str, ...] = ("permutation", "bootstrap", "wilcoxon")


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare`: metric(A) - metric(B), its p-value and a bootstrap interval."""

    key: str  #: the canonical metric key, e.g. ``both.realistic.inverse_harmonic_mean_rank``
    test: str  #: the test that gave ``p_value``
    difference: float  #: metric(A) - metric(B) on all paired tasks
    p_value: float  #: two-sided, for the null hypothesis of no difference
    low: float  #: lower end of the paired-bootstrap percentile interval of the difference
    high: float  #: upper end of that interval
    level: float  #: confidence level of (low, high)
    n: int  #: number of paired evaluation triples (the resampling units)
    n_resamples: int

    def __str__(self) -> str:
        """One readable line, e.g. ``MRR(A) - MRR(B) = +0.0412 (95% CI [+0.0210, +0.0611]), p = 0.0001 ...``."""
        return (
            f"{self.key}: A - B = {self.difference:+.4f} ({self.level:.0%} CI [{self.low:+.4f}, {self.high:+.4f}]), "
            f"p = {self.p_value:.4g} ({self.test}, {self.n:,} paired triples, {self.n_resamples:,} resamples)"
        )


@dataclass(frozen=True)
class ConfidenceInterval:
    """Result of :func:`confidence_interval`: the metric and a bootstrap percentile interval around it."""

    key: str
    estimate: float  #: the metric on all tasks
    low: float
    high: float
    level: float
    n: int  #: number of evaluation triples (the resampling units)
    n_resamples: int

    def __str__(self) -> str:
        return (
            f"{self.key} = {self.estimate:.4f} ({self.level:.0%} CI [{self.low:.4f}, {self.high:.4f}], "
            f"{self.n:,} triples, {self.n_resamples:,} resamples)"
        )


# -- tests and intervals ------------------------------------------------------------------------------------
def permutation_p_value(paired: PairedTasks, difference: float, n_resamples: int, rng: np.random.Generator) -> float:
    """Two-sided p-value of the paired permutation test: swap A and B within random units.

    Every swap pattern is enumerated when 2**U <= n_resamples (exact p-value); otherwise ``n_resamples`` random
    patterns give p = (1 + #as extreme) / (1 + n_resamples), which never under-states p (Phipson & Smyth 2010).
    """
    num_units = paired.num_units
    if np.isnan(difference):
        return float("nan")
    threshold = abs(difference) * (1 - 1e-9)  # the identity pattern must count despite float re-association
    if num_units < 63 and 2**num_units <= n_resamples:
        patterns = (np.arange(2**num_units)[:, None] >> np.arange(num_units)[None, :]) & 1
        return float(np.mean(np.abs(swapped_differences(paired, patterns.astype(bool))) >= threshold))
    extreme = 0
    for start, stop in chunks(n_resamples, num_units):
        swaps = rng.random((stop - start, num_units)) < 0.5
        extreme += int(np.count_nonzero(np.abs(swapped_differences(paired, swaps)) >= threshold))
    return (1 + extreme) / (1 + n_resamples)


def bootstrap_p_value(differences: np.ndarray) -> float:
    """Two-sided p-value from a bootstrap distribution of the difference: twice the smaller tail beyond 0."""
    n = differences.size
    below, above = np.count_nonzero(differences <= 0), np.count_nonzero(differences >= 0)
    return min(1.0, 2 * (1 + min(below, above)) / (1 + n))


def wilcoxon_p_value(paired: PairedTasks) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the per-triple differences of the per-task values (scipy)."""
    try:
        from scipy import stats as scipy_stats
    except ImportError as error:
        raise ImportError(
            "test='wilcoxon' needs scipy, which is not installed; pip install 'kgeval[stats]' (or scipy)"
        ) from error
    per_unit = paired.per_unit_values()
    differences = per_unit[0] - per_unit[1]
    if not np.any(differences):
        return 1.0
    return float(scipy_stats.wilcoxon(differences).pvalue)


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _check_options(n_resamples: Any, level: Any, seed: Any) -> None:
    check_positive_int(n_resamples, "n_resamples")
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")


def compare(
    results_a: RecordedResults,
    results_b: RecordedResults,
    key: str = "mrr",
    *,
    test: Test = "permutation",
    n_resamples: int = 10_000,
    seed: int | None = 0,
    level: float = 0.95,
) -> Comparison:
    """Compare two evaluations of the same triples: difference, p-value and confidence interval of a metric.

    Parameters
    ----------
    results_a, results_b : RankBasedMetricResults
        With per-task records, over the same ranking tasks (matched by (task_index, side) and triple).
    key : str, default="mrr"
        Any reported metric key (``"tail.hits@10"``, ``"both.pessimistic.mr"``, an adjusted metric, ...).
    test : {"permutation", "bootstrap", "wilcoxon"}, default="permutation"
        ``permutation``: paired permutation test, swapping the two models' tasks of random triples.
        ``bootstrap``: twice the share of paired-bootstrap differences on the far side of 0.
        ``wilcoxon``: signed-rank test of the per-triple differences (needs scipy; mean-type metrics only:
        hits@k, MRR, MR).
    n_resamples : int, default=10_000
        Resamples of the bootstrap interval and of the permutation test.
    seed : int or None, default=0
        Seed of numpy's Generator: the same seed gives the same numbers. The interval depends on the seed only,
        not on ``test``.
    level : float, default=0.95
        Confidence level of the paired-bootstrap percentile interval (low, high) of the difference.

    Returns
    -------
    Comparison
        ``difference`` = metric(A) - metric(B); for a metric where lower is better (MR) a negative difference
        favours A.
    """
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    _check_options(n_resamples, level, seed)
    paired = pair_tasks([results_a, results_b], ("results_a", "results_b"), key)
    if test == "wilcoxon" and not paired.mean_type:
        raise ValueError(
            f"test='wilcoxon' needs a metric that is a mean of per-task values ({', '.join(MEAN_TYPE)}), "
            f"got {paired.info.name}; use test='permutation' or 'bootstrap'"
        )
    interval_seed, test_seed = np.random.SeedSequence(seed).spawn(2)
    difference = paired.observed(0) - paired.observed(1)
    resampled = bootstrap_distribution(paired, n_resamples, np.random.default_rng(interval_seed))
    differences = resampled[0] - resampled[1]
    if test == "permutation":
        p_value = permutation_p_value(paired, difference, n_resamples, np.random.default_rng(test_seed))
    elif test == "bootstrap":
        p_value = bootstrap_p_value(differences)
    else:
        p_value = wilcoxon_p_value(paired)
    low, high = _interval(differences, level)
    name = format_key(results_a.resolve_key(key))
    return Comparison(name, test, difference, p_value, low, high, float(level), paired.num_units, n_resamples)


def confidence_interval(
    results: RecordedResults,
    key: str = "mrr",
    *,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | None = 0,
) -> ConfidenceInterval:
    """Bootstrap percentile interval of a metric, resampling evaluation triples (head and tail together).

    Parameters are those of :func:`compare`; also available as ``results.confidence_interval(...)``.
    """
    _check_options(n_resamples, level, seed)
    paired = pair_tasks([results], ("results",), key)
    interval_seed, _ = np.random.SeedSequence(seed).spawn(2)
    resampled = bootstrap_distribution(paired, n_resamples, np.random.default_rng(interval_seed))[0]
    low, high = _interval(resampled, level)
    name = format_key(results.resolve_key(key))
    return ConfidenceInterval(name, paired.observed(0), low, high, float(level), paired.num_units, n_resamples)
