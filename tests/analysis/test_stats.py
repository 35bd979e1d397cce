"""Tests of analysis.stats: compare and confidence_interval against the brute-force reference, and by simulation."""

from __future__ import annotations

import itertools
import math
import re
import sys

import numpy as np
import pytest

from kgeval import RankBasedEvaluator
from kgeval.analysis.resampling import PairedTasks, bootstrap_distribution
from kgeval.analysis.stats import Comparison, compare, confidence_interval, permutation_p_value
from kgeval.metrics.registry import lookup
from tests.helpers.graphs import TableModel
from tests.helpers.reference import plain_metric
from tests.support.paired import two_models

#: (key as a user writes it, side, rank type, canonical name)
KEYS = [
    ("mrr", "both", "realistic", "inverse_harmonic_mean_rank"),
    ("hits@3", "both", "realistic", "hits_at_3"),
    ("tail.mr", "tail", "realistic", "arithmetic_mean_rank"),
    ("head.optimistic.hits@1", "head", "optimistic", "hits_at_1"),
    ("both.pessimistic.gmr", "both", "pessimistic", "geometric_mean_rank"),
    ("median_rank", "both", "realistic", "median_rank"),
    ("tail.hmr", "tail", "realistic", "harmonic_mean_rank"),
]


@pytest.fixture(scope="module")
def pair():
    return two_models(seed=0)


def reference_value(ranks: dict, side: str, rank_type: str, name: str) -> float:
    return plain_metric(name, ranks[side][rank_type])


@pytest.mark.parametrize(("key", "side", "rank_type", "name"), KEYS)
def test_difference_and_estimate_follow_the_reference(pair, key, side, rank_type, name) -> None:
    (a, b), (ref_a, ref_b) = pair["results"], pair["ranks"]
    expected_a = reference_value(ref_a, side, rank_type, name)
    comparison = compare(a, b, key, n_resamples=200)
    assert comparison.key == f"{side}.{rank_type}.{name}"
    assert comparison.difference == pytest.approx(expected_a - reference_value(ref_b, side, rank_type, name), abs=1e-12)
    assert comparison.n == 30
    interval = a.confidence_interval(key, n_resamples=200)
    assert interval.key == comparison.key
    assert interval.estimate == pytest.approx(expected_a, rel=1e-12)
    assert interval.low <= interval.estimate <= interval.high


@pytest.mark.parametrize(
    ("key", "side", "rank_type", "name"),
    [*KEYS[:3], ("gmr", "both", "realistic", "geometric_mean_rank"), KEYS[5]],
)
def test_exact_permutation_p_value_equals_enumeration(key, side, rank_type, name) -> None:
    """6 triples: n_resamples = 64 = 2**6 enumerates every swap pattern; the reference does the same by loops."""
    data = two_models(seed=3, num_triples=6)
    (a, b), (ref_a, ref_b) = data["results"], data["ranks"]
    tasks = [(s, i) for s in (("head", "tail") if side == "both" else (side,)) for i in range(6)]

    def metric(swapped: tuple[int, ...], model: int) -> float:
        values = []
        for s, i in tasks:
            source = ref_b if swapped[i] != model else ref_a  # model 0 takes B's tasks where swapped, and v.v.
            values.append(source[s][rank_type][i])
        return plain_metric(name, values)

    observed = metric((0,) * 6, 0) - metric((0,) * 6, 1)
    swaps = list(itertools.product((0, 1), repeat=6))
    extreme = sum(abs(metric(s, 0) - metric(s, 1)) >= abs(observed) - 1e-12 for s in swaps)
    assert compare(a, b, key, n_resamples=64).p_value == pytest.approx(extreme / 64, abs=1e-15)


def test_wilcoxon_equals_scipy_on_per_triple_differences(pair) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    (a, b), (ref_a, ref_b) = pair["results"], pair["ranks"]
    per_triple = [(1 / ref["head"]["realistic"] + 1 / ref["tail"]["realistic"]) / 2 for ref in (ref_a, ref_b)]
    expected = scipy_stats.wilcoxon(per_triple[0] - per_triple[1]).pvalue
    assert compare(a, b, "mrr", test="wilcoxon", n_resamples=50).p_value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("test", ["permutation", "bootstrap", "wilcoxon"])
def test_a_model_against_itself_shows_no_difference(pair, test) -> None:
    a = pair["results"][0]
    comparison = compare(a, a, "mrr", test=test, n_resamples=300)
    assert (comparison.difference, comparison.p_value, comparison.low, comparison.high) == (0.0, 1.0, 0.0, 0.0)


@pytest.mark.parametrize("test", ["permutation", "bootstrap", "wilcoxon"])
def test_a_clearly_better_model_is_significant(test) -> None:
    a, b = two_models(seed=1, boost_b=3.0)["results"]
    comparison = compare(a, b, "mrr", test=test, n_resamples=500)
    assert comparison.difference < 0
    assert comparison.p_value < 0.01
    assert comparison.high < 0


def test_seeded_and_reproducible(pair) -> None:
    a, b = pair["results"]
    first = compare(a, b, "gmr", n_resamples=300, seed=1)
    assert isinstance(first, Comparison)
    assert compare(a, b, "gmr", n_resamples=300, seed=1) == first
    other = compare(a, b, "gmr", n_resamples=300, seed=2)
    assert (other.low, other.high, other.p_value) != (first.low, first.high, first.p_value)
    assert confidence_interval(a, "mrr", seed=5, n_resamples=300) == a.confidence_interval(
        "mrr", seed=5, n_resamples=300
    )


def test_the_interval_depends_on_the_seed_not_on_the_test(pair) -> None:
    a, b = pair["results"]
    intervals = {test: compare(a, b, "mrr", test=test, n_resamples=300) for test in ("permutation", "bootstrap")}
    assert intervals["permutation"].low == intervals["bootstrap"].low
    assert intervals["permutation"].high == intervals["bootstrap"].high


def test_a_higher_level_gives_a_wider_interval(pair) -> None:
    a = pair["results"][0]
    narrow, wide = (a.confidence_interval("hits@10", level=level, n_resamples=500) for level in (0.8, 0.99))
    assert wide.low <= narrow.low <= narrow.high <= wide.high
    assert (narrow.level, wide.level) == (0.8, 0.99)


# -- errors ---------------------------------------------------------------------------------------------------


def test_results_must_cover_the_same_number_of_tasks(pair) -> None:
    graph, (table_a, _) = pair["graph"], pair["tables"]
    fewer = RankBasedEvaluator(ks=(1, 3, 10)).evaluate(TableModel(table_a), graph.triples[:-1], use_tqdm=False)
    message = "results_a and results_b must cover the same ranking tasks, got 60 and 58 tasks"
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(pair["results"][0], fewer, "mrr")


def test_results_must_cover_the_same_triples(pair) -> None:
    graph, (table_a, _) = pair["graph"], pair["tables"]
    triples = graph.triples.clone()
    triples[0] = triples[0].flip(0)
    other = RankBasedEvaluator(ks=(1, 3, 10)).evaluate(TableModel(table_a), triples, use_tqdm=False)
    head, relation, tail = graph.triples[0].tolist()
    message = (
        "results_a and results_b must cover the same ranking tasks, matched by (task_index, side) and triple; "
        f"first difference (task_index, side, head, relation, tail): (0, 0, {head}, {relation}, {tail}) in "
        f"results_a, (0, 0, {tail}, {relation}, {head}) in results_b"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(pair["results"][0], other, "mrr")


def test_records_are_required(pair) -> None:
    graph, (table_a, _) = pair["graph"], pair["tables"]
    sums_only = RankBasedEvaluator(keep_records=False).evaluate(TableModel(table_a), graph.triples, use_tqdm=False)
    message = "results has no per-task records; evaluate with keep_records=True to resample it"
    with pytest.raises(ValueError, match=re.escape(message)):
        sums_only.confidence_interval("mrr")


def test_results_must_be_results(pair) -> None:
    message = "results_b must be a RankBasedMetricResults, got dict"
    with pytest.raises(TypeError, match=re.escape(message)):
        compare(pair["results"][0], {}, "mrr")  # type: ignore[arg-type]


def test_unknown_test(pair) -> None:
    message = "test must be one of ('permutation', 'bootstrap', 'wilcoxon'), got 't-test'"
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(*pair["results"], "mrr", test="t-test")  # type: ignore[arg-type]


def test_wilcoxon_needs_a_mean_of_per_task_values(pair) -> None:
    message = (
        "test='wilcoxon' needs a metric that is a mean of per-task values (hits_at_k, arithmetic_mean_rank, "
        "inverse_harmonic_mean_rank), got geometric_mean_rank; use test='permutation' or 'bootstrap'"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(*pair["results"], "gmr", test="wilcoxon")


def test_wilcoxon_without_scipy_says_what_to_install(pair, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "scipy", None)
    message = "test='wilcoxon' needs scipy, which is not installed; pip install 'kgeval[stats]' (or scipy)"
    with pytest.raises(ImportError, match=re.escape(message)):
        compare(*pair["results"], "mrr", test="wilcoxon", n_resamples=10)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n_resamples": 0}, "n_resamples must be a positive integer, got 0"),
        ({"level": 1.5}, "level must be a number in (0, 1), got 1.5"),
        ({"seed": -1}, "seed must be a non-negative integer or None, got -1"),
    ],
)
def test_options_are_checked(pair, options, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(*pair["results"], "mrr", **options)


def test_an_unreported_key_is_a_key_error(pair) -> None:
    with pytest.raises(KeyError, match="hits_at_7 was not reported"):
        compare(*pair["results"], "hits@7")


# -- simulation: nominal error rates --------------------------------------------------------------------------


def synthetic_pair(values_a: np.ndarray, values_b: np.ndarray) -> PairedTasks:
    """An MRR-type PairedTasks straight from per-task values of shape (U, tasks per unit) of two models."""
    info, _ = lookup("inverse_harmonic_mean_rank")
    units, tasks = values_a.shape
    counts = np.full(units, float(tasks))
    sums = np.stack([np.stack([counts, values.sum(axis=1)], axis=1) for values in (values_a, values_b)])
    empty = np.empty((2, 0))
    return PairedTasks(
        info=info,
        k=None,
        ks=(1,),
        ranks=empty,
        num_candidates=empty.astype(np.int64),
        unit_of_task=np.empty(0, dtype=np.int64),
        unit_tasks=np.zeros((units, 1), dtype=np.int64),
        unit_sums=sums,
        layout=(("count", ()), ("sum_reciprocal_rank", ())),
    )


def reciprocal_ranks(rng: np.random.Generator, p, shape) -> np.ndarray:
    """1 / r with r ~ Geometric(p) on {1, 2, ...}: skewed, tied values, like real reciprocal ranks."""
    return 1.0 / rng.geometric(p, size=shape)


def test_permutation_false_positive_rate_is_nominal() -> None:
    """Two models identical in distribution (exchangeable within each triple, correlated through the triple's
    difficulty); 1000 data sets of 50 triples x 2 tasks, 199 random swaps each. The test is valid, so the rate
    is at most alpha up to Monte-Carlo error (sd 0.0069 at alpha = 0.05); ties make it slightly conservative.
    Accepted: within about 3.5 sd (0.025-0.075 at 0.05, 0.06-0.14 at 0.1)."""
    p_values = []
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        difficulty = rng.uniform(0.1, 0.9, size=(50, 1))
        paired = synthetic_pair(reciprocal_ranks(rng, difficulty, (50, 2)), reciprocal_ranks(rng, difficulty, (50, 2)))
        p_values.append(permutation_p_value(paired, paired.observed(0) - paired.observed(1), 199, rng))
    p_values = np.asarray(p_values)
    assert 0.025 <= np.mean(p_values <= 0.05) <= 0.075
    assert 0.06 <= np.mean(p_values <= 0.10) <= 0.14


def test_bootstrap_interval_covers_the_true_difference_at_the_nominal_rate() -> None:
    """400 data sets of 100 triples x 2 tasks; A's ranks ~ Geometric(0.3), B's ~ Geometric(0.4), so the true
    MRR difference is known exactly. Coverage sd is 0.015 (level 0.9) and 0.011 (0.95); accepted within about
    3.3 sd (a long run of 2000 data sets gave 0.90 and 0.95)."""
    ranks = np.arange(1, 10_000)
    truth = sum(math.fsum(p * (1 - p) ** (ranks - 1) / ranks) * sign for p, sign in ((0.3, 1), (0.4, -1)))
    covered = {0.9: 0, 0.95: 0}
    for seed in range(400):
        rng = np.random.default_rng(seed)
        paired = synthetic_pair(reciprocal_ranks(rng, 0.3, (100, 2)), reciprocal_ranks(rng, 0.4, (100, 2)))
        resampled = bootstrap_distribution(paired, 1000, rng)
        differences = resampled[0] - resampled[1]
        for level in covered:
            low, high = np.quantile(differences, [(1 - level) / 2, (1 + level) / 2])
            covered[level] += int(low <= truth <= high)
    assert 0.85 <= covered[0.9] / 400 <= 0.95
    assert 0.91 <= covered[0.95] / 400 <= 0.99
