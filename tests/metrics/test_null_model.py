"""Closed-form null-model moments (METRICS.md, Expectation and variance under the null model).

Checked three ways: against the exact (Fraction) closed forms and the exact enumeration of tests/helpers/reference.py,
against Monte-Carlo estimates over uniformly random ranks (tolerances derived from the sample size), and, for GMR at
scale, against high-precision arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kgeval.metrics import METRICS, summarize
from kgeval.metrics import null_model as nm
from tests.helpers.reference import enumerated_null, null_expectation, null_variance, sampled_null

BASE_METRICS = ("arithmetic_mean_rank", "inverse_harmonic_mean_rank", "geometric_mean_rank", "hits_at_k")
KS = (1, 3, 10)


def closed_form(metric: str, num_candidates, k: int | None = None) -> tuple[float, float]:
    """kgeval's (E, Var) of a plain metric, read off a summary of arbitrary ranks with these num_candidates."""
    summary = summarize(np.ones(len(num_candidates)), num_candidates, ks=KS)
    return METRICS[metric].null_moments(summary, k)


def cases() -> list[tuple[str, int | None]]:
    return [(m, None) for m in BASE_METRICS if m != "hits_at_k"] + [("hits_at_k", k) for k in (*KS, 2)]


# -- harmonic numbers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2])
def test_harmonic_numbers_match_exact_sums(p: int) -> None:
    sizes = [*range(1, 40), 1000, 1023, 1024, 1025, 1030, 5000, 123456]
    function = nm.harmonic_number if p == 1 else nm.second_harmonic_number
    values = function(torch.tensor(sizes)).tolist()
    for c, value in zip(sizes, values, strict=True):
        exact = math.fsum(1.0 / j**p for j in range(1, c + 1))
        assert value == pytest.approx(exact, rel=1e-15), c


def test_single_candidate_terms_are_exact() -> None:
    stats = nm.candidate_statistics(torch.ones(5, dtype=torch.int64), ks=(1, 10))
    assert stats["sum_expected_rank"].item() == 5.0
    assert stats["sum_rank_variance"].item() == 0.0
    assert stats["sum_expected_reciprocal_rank"].item() == 5.0
    assert stats["sum_reciprocal_rank_variance"].item() == 0.0
    assert stats["sum_hits_probability"].tolist() == [5.0, 5.0]
    assert stats["sum_hits_variance"].tolist() == [0.0, 0.0]
    assert nm.geometric_mean_rank_null(np.ones(5, dtype=np.int64)) == (1.0, 0.0)


# -- exact closed forms and enumeration ---------------------------------------------------------------------------
@pytest.mark.parametrize(("metric", "k"), cases())
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_forms_match_reference_closed_forms(metric: str, k: int | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    num_candidates = rng.integers(1, [2, 10, 300, 5000][seed % 4], size=int(rng.integers(1, 60)))
    expectation, variance = closed_form(metric, num_candidates, k)
    assert expectation == pytest.approx(null_expectation(metric, num_candidates, k), rel=1e-12)
    assert variance == pytest.approx(null_variance(metric, num_candidates, k), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(("metric", "k"), cases())
@pytest.mark.parametrize("num_candidates", [[1], [4], [1, 1], [2, 7], [1, 2, 3, 4], [5, 5, 3], [3, 1, 6, 2, 2]])
def test_closed_forms_match_enumeration(metric: str, k: int | None, num_candidates: list[int]) -> None:
    expectation, variance = closed_form(metric, num_candidates, k)
    exact_expectation, exact_variance = enumerated_null(metric, num_candidates, k)
    assert expectation == pytest.approx(exact_expectation, rel=1e-12)
    assert variance == pytest.approx(exact_variance, rel=1e-10, abs=1e-15)


# -- Monte-Carlo --------------------------------------------------------------------------------------------------
def assert_moments_agree_with_samples(samples: np.ndarray, expectation: float, variance: float) -> None:
    """Mean and variance of the samples within 5 standard errors of the closed forms.

    SE of the mean: sqrt(Var / N); SE of the sample variance: sqrt((mu_4 - Var^2) / N), mu_4 estimated.
    """
    n = samples.size
    assert abs(samples.mean() - expectation) <= 5 * math.sqrt(variance / n)
    mu4 = float(np.mean((samples - samples.mean()) ** 4))
    assert abs(samples.var() - variance) <= 5 * math.sqrt(max(mu4 - variance**2, 0.0) / n) + 1e-15


@pytest.mark.parametrize(("metric", "k"), cases())
def test_closed_forms_match_monte_carlo(metric: str, k: int | None) -> None:
    num_candidates = np.random.default_rng(7).choice([1, 2, 3, 5, 11, 40, 250], size=25)
    samples = sampled_null(metric, num_candidates, k, num_samples=40_000, rng=11)
    assert_moments_agree_with_samples(samples, *closed_form(metric, num_candidates, k))


# -- GMR at scale -------------------------------------------------------------------------------------------------
def high_precision_gmr(num_candidates: np.ndarray) -> tuple[float, float]:
    """E[GMR] and Var[GMR] with 40 significant digits (prefix sums over j, grouped by distinct C)."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(40):
        n = num_candidates.size
        a = mpmath.mpf(1) / n
        distinct, counts = np.unique(num_candidates, return_counts=True)
        first = second = log_first = log_second = mpmath.mpf(0)
        j = 0
        for c, count in zip(distinct.tolist(), counts.tolist(), strict=True):
            while j < c:
                j += 1
                log_j = mpmath.log(j)
                first += mpmath.exp(a * log_j)
                second += mpmath.exp(2 * a * log_j)
            log_first += count * mpmath.log(first / c)
            log_second += count * mpmath.log(second / c)
        expectation = mpmath.exp(log_first)
        return float(expectation), float(mpmath.exp(log_second) - expectation**2)


@pytest.mark.parametrize(
    ("num_tasks", "max_candidates", "num_distinct"), [(3, 9, 3), (500, 3000, 60), (20_000, 40_000, 25)]
)
def test_gmr_is_exact_at_scale(num_tasks: int, max_candidates: int, num_distinct: int) -> None:
    rng = np.random.default_rng(num_tasks)
    pool = rng.integers(1, max_candidates + 1, size=num_distinct)
    num_candidates = rng.choice(pool, size=num_tasks)
    expectation, variance = nm.geometric_mean_rank_null(num_candidates)
    exact_expectation, exact_variance = high_precision_gmr(num_candidates)
    assert expectation == pytest.approx(exact_expectation, rel=1e-12)
    assert variance == pytest.approx(exact_variance, rel=1e-12)


def test_gmr_with_two_million_candidates_matches_a_plain_two_pass_sum() -> None:
    num_candidates = np.repeat([2_000_000, 1_999_990, 1_234_567], [30_000, 20_000, 10_000])
    a = 1.0 / num_candidates.size
    log_expectation = excess = 0.0
    for c, count in ((2_000_000, 30_000), (1_999_990, 20_000), (1_234_567, 10_000)):
        g = np.expm1(a * np.log(np.arange(1, c + 1, dtype=np.float64)))  # j^a - 1
        mean = math.fsum(g.tolist()) / c
        spread = math.fsum(np.square(g - mean).tolist()) / c
        log_expectation += count * math.log1p(mean)
        excess += count * math.log1p(spread / (1 + mean) ** 2)
    expectation, variance = nm.geometric_mean_rank_null(num_candidates)
    assert expectation == pytest.approx(math.exp(log_expectation), rel=1e-12)
    assert variance == pytest.approx(math.exp(2 * log_expectation) * math.expm1(excess), rel=1e-11)


def test_gmr_moments_are_kept_by_content_and_never_mixed_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank type of a side asks for the same GMR null moments: the second ask is served from the cache, and
    records that differ in one task or in length get their own moments (checked against high precision)."""
    first = np.array([5, 9, 9, 300, 17] * 40)
    changed, longer = first.copy(), np.append(first, 9)
    changed[77] = 10
    calls: list[int] = []
    real_power_moments = nm._power_moments
    monkeypatch.setattr(nm, "_power_moments", lambda *args: calls.append(1) or real_power_moments(*args))
    nm._GMR_NULL_CACHE.clear()
    for records in (first, changed, first.copy(), longer, changed):
        expectation, variance = nm.geometric_mean_rank_null(records)
        exact_expectation, exact_variance = high_precision_gmr(records)
        assert expectation == pytest.approx(exact_expectation, rel=1e-12)
        assert variance == pytest.approx(exact_variance, rel=1e-12)
    assert len(calls) == 3  # first, changed, longer: the repeats come from the cache
    weighted = nm.geometric_mean_rank_null(first, np.arange(1.0, first.size + 1))
    assert weighted != nm.geometric_mean_rank_null(first)  # weights are never served from the unweighted cache


# -- reading the moments off a summary ----------------------------------------------------------------------------
def test_hits_moments_for_an_untracked_k_come_from_the_records() -> None:
    num_candidates = [1, 3, 8, 20, 20]
    tracked = summarize(np.ones(5), num_candidates, ks=(4,))
    untracked = summarize(np.ones(5), num_candidates, ks=(1,))
    assert nm.hits_at_k_moments(untracked, 4) == pytest.approx(nm.hits_at_k_moments(tracked, 4), rel=1e-15)


def test_moments_without_num_candidates_raise() -> None:
    summary = summarize([1.0, 2.0])
    with pytest.raises(
        ValueError,
        match=r"^the null model of arithmetic_mean_rank needs num_candidates, which this summary does not hold$",
    ):
        nm.arithmetic_mean_rank_moments(summary)


def test_gmr_moments_without_records_raise() -> None:
    from kgeval import MetricAccumulator

    accumulator = MetricAccumulator(ks=(1,), keep_records=False)
    accumulator.update(torch.tensor([1]), torch.tensor([2]), torch.tensor([4]))
    with pytest.raises(
        ValueError,
        match=r"^the null model of geometric_mean_rank needs the per-task num_candidates records, which were not "
        r"kept \(keep_records=False\)$",
    ):
        nm.geometric_mean_rank_moments(accumulator.summary("realistic"))


def test_hits_moments_need_k() -> None:
    with pytest.raises(ValueError, match=r"^hits_at_k needs k$"):
        nm.hits_at_k_moments(summarize([1.0], [2]), None)


def test_no_tasks_give_nan_with_a_warning() -> None:
    from kgeval import UndefinedMetricWarning

    with pytest.warns(UndefinedMetricWarning):
        expectation, variance = nm.geometric_mean_rank_null([])
    assert math.isnan(expectation)
    assert math.isnan(variance)
