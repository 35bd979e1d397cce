"""Adjusted and z metrics (METRICS.md, Adjusted metrics) against the brute force of tests/helpers/reference.py."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator, UndefinedMetricWarning
from kgeval.metrics import METRICS, adjusted, summarize
from kgeval.metrics.registry import canonical_name, lookup
from tests.helpers.graphs import TableModel, all_filtered_graph, quantised_table, random_graph, ranks_and_candidates
from tests.helpers.reference import (
    adjusted_keys,
    adjusted_metric,
    canonical_key,
    null_expectation,
    null_variance,
    plain_metric,
    reference_metrics,
    sampled_null,
)

KS = (1, 3, 10)


def kgeval_value(key: str, ranks, num_candidates, ks=KS) -> float:
    info, k = lookup(canonical_name(key))
    return info.function(summarize(ranks, num_candidates, ks=ks), k)


def assert_same(value: float, expected: float, context: object) -> None:
    if math.isnan(expected):
        assert math.isnan(value), context
    else:
        assert value == pytest.approx(expected, rel=1e-9, abs=1e-9), context


@settings(max_examples=150, deadline=None)
@given(ranks_and_candidates(max_n=30, max_candidates=25))
def test_every_adjusted_metric_matches_the_reference(data: tuple[np.ndarray, np.ndarray]) -> None:
    ranks, num_candidates = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for key in adjusted_keys(KS):
            value = kgeval_value(key, ranks, num_candidates)
            assert_same(value, adjusted_metric(key, ranks, num_candidates), (key, ranks, num_candidates))


def test_an_untracked_k_matches_the_reference() -> None:
    ranks, num_candidates = np.array([1.0, 2.5, 6.0, 4.0]), np.array([3, 9, 12, 30])
    for key in ("adjusted_hits_at_5", "z_hits_at_5"):
        assert kgeval_value(key, ranks, num_candidates, ks=(1,)) == pytest.approx(
            adjusted_metric(key, ranks, num_candidates), rel=1e-12
        )


# -- degenerate cases ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [key for key in adjusted_keys(KS) if key != "adjusted_arithmetic_mean_rank"])
def test_single_candidates_give_nan_with_a_warning(key: str) -> None:
    with pytest.warns(UndefinedMetricWarning, match="undefined here"):
        value = kgeval_value(key, np.ones(4), np.ones(4, dtype=np.int64))
    assert math.isnan(value)
    assert math.isnan(adjusted_metric(key, np.ones(4), np.ones(4, dtype=np.int64)))


def test_adjusted_mean_rank_of_single_candidates_is_one() -> None:
    assert (
        kgeval_value("amr", np.ones(3), np.ones(3, dtype=np.int64)) == 1.0 == adjusted_metric("amr", [1] * 3, [1] * 3)
    )


@pytest.mark.parametrize("key", ["adjusted_hits_at_10", "z_hits_at_10"])
def test_hits_with_k_beyond_every_candidate_set_give_nan(key: str) -> None:
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(kgeval_value(key, [1.0, 3.0, 2.5], [4, 10, 7]))


def test_no_tasks_give_nan() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        values = [kgeval_value(key, [], []) for key in adjusted_keys(KS)]
    assert all(math.isnan(value) for value in values)


# -- moments of the adjusted metrics ------------------------------------------------------------------------------
#: the plain metric each adjusted / z metric maps (METRICS.md, Adjusted metrics)
BASE_OF = {
    "adjusted_arithmetic_mean_rank": "arithmetic_mean_rank",
    "adjusted_arithmetic_mean_rank_index": "arithmetic_mean_rank",
    "z_arithmetic_mean_rank": "arithmetic_mean_rank",
    "adjusted_inverse_harmonic_mean_rank": "inverse_harmonic_mean_rank",
    "z_inverse_harmonic_mean_rank": "inverse_harmonic_mean_rank",
    "adjusted_geometric_mean_rank_index": "geometric_mean_rank",
    "z_geometric_mean_rank": "geometric_mean_rank",
    "adjusted_hits_at_k": "hits_at_k",
    "z_hits_at_k": "hits_at_k",
}


def affine_map(key: str, num_candidates: np.ndarray) -> tuple[str, int | None, float, float]:
    """(base, k, a, b) with adjusted = a * base + b, read off the reference at two rank vectors."""
    name, k = canonical_key(key)
    base = BASE_OF[name]
    points = (np.ones(num_candidates.size), num_candidates.astype(np.float64))
    values = [adjusted_metric(key, ranks, num_candidates) for ranks in points]
    bases = [plain_metric(base, ranks, k=k) for ranks in points]
    slope = (values[0] - values[1]) / (bases[0] - bases[1])
    return base, k, slope, values[0] - slope * bases[0]


@pytest.mark.parametrize("key", adjusted_keys(KS))
def test_adjusted_moments_follow_from_the_base_metric(key: str) -> None:
    num_candidates = np.random.default_rng(3).choice([1, 2, 4, 12, 30, 80], size=20)
    base, k, a, b = affine_map(key, num_candidates)
    expectation, variance = lookup(key)[0].null_moments(summarize(np.ones(20), num_candidates, ks=KS), k)
    assert expectation == pytest.approx(a * null_expectation(base, num_candidates, k) + b, rel=1e-9, abs=1e-9)
    assert variance == pytest.approx(a * a * null_variance(base, num_candidates, k), rel=1e-9)
    samples = a * sampled_null(base, num_candidates, k, num_samples=20_000, rng=5) + b
    assert abs(samples.mean() - expectation) <= 5 * math.sqrt(variance / samples.size)


def test_adjusted_metrics_take_their_base_from_the_table() -> None:
    """Each adjusted metric is named by its key and reads its base metric's value, moments and direction from the
    base's own record (one source of truth)."""
    bases = {"arithmetic_mean_rank": ("adjusted_arithmetic_mean_rank", "adjusted_arithmetic_mean_rank_index",
                                      "z_arithmetic_mean_rank"),
             "inverse_harmonic_mean_rank": ("adjusted_inverse_harmonic_mean_rank", "z_inverse_harmonic_mean_rank"),
             "geometric_mean_rank": ("adjusted_geometric_mean_rank_index", "z_geometric_mean_rank"),
             "hits_at_k": ("adjusted_hits_at_k", "z_hits_at_k")}  # fmt: skip
    for base_name, names in bases.items():
        base = METRICS[base_name]
        for name in names:
            metric = METRICS[name].function
            assert isinstance(metric, adjusted.AdjustedMetric)
            assert metric.name == name
            assert (metric.base_value, metric.base_moments) == (base.function, base.null_moments)
            assert metric.base_increasing == base.increasing


# -- end to end through the evaluator -----------------------------------------------------------------------------
def evaluate(table, graph, **kwargs):
    evaluator = RankBasedEvaluator(ks=KS)
    return evaluator.evaluate(
        TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False, **kwargs
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("restrict", [False, True])
def test_evaluator_reports_the_reference_adjusted_metrics(seed: int, restrict: bool) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, 30, 3, 40, 120)
    table = quantised_table(rng, 30, 3, levels=4, inf_fraction=0.05)
    whitelist = None
    if restrict:
        whitelist = sorted({*graph.triples[:, 0].tolist(), *graph.triples[:, 2].tolist(), *range(0, 30, 3)})
    results = evaluate(table, graph, restrict_entities_to=whitelist)
    expected = reference_metrics(table, graph.triples, graph.filter_triples, ks=KS, restrict_entities_to=whitelist)
    for (side, rank_type, key), value in expected.items():
        if key in adjusted_keys(KS):
            assert_same(results.get_metric(f"{side}.{rank_type}.{key}"), value, (side, key))


def test_evaluator_reports_nan_with_a_warning_when_every_candidate_is_filtered() -> None:
    graph, table = all_filtered_graph()
    with pytest.warns(UndefinedMetricWarning):
        results = RankBasedEvaluator(ks=KS).evaluate(
            TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
    assert math.isnan(results.get_metric("amri"))
    assert math.isnan(results.get_metric("zmrr"))
    assert math.isnan(results.get_metric("tail.ah@3"))
    assert results.get_metric("amr") == 1.0


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_evaluator_adjusted_metrics_on_random_tie_heavy_graphs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(2, 15)), 2, int(rng.integers(1, 15)), int(rng.integers(0, 30)))
    table = quantised_table(rng, graph.num_entities, 2, levels=int(rng.integers(1, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = RankBasedEvaluator(ks=KS).evaluate(
            TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
    expected = reference_metrics(table, graph.triples, graph.filter_triples, ks=KS)
    for (side, rank_type, key), value in expected.items():
        if key in adjusted_keys(KS):
            assert_same(results.get_metric(f"{side}.{rank_type}.{key}"), value, (side, key))


def test_merged_accumulators_give_the_adjusted_values_of_one() -> None:
    from kgeval import MetricAccumulator

    rng = np.random.default_rng(9)
    num_candidates = rng.integers(1, 200, size=90)
    optimistic = rng.integers(1, num_candidates + 1)
    pessimistic = rng.integers(optimistic, num_candidates + 1)
    tensors = [torch.from_numpy(a) for a in (optimistic, pessimistic, num_candidates)]
    whole = MetricAccumulator(ks=KS)
    whole.update(*tensors)
    parts = [MetricAccumulator(ks=KS) for _ in range(3)]
    for part, rows in zip(parts, np.array_split(rng.permutation(90), 3), strict=True):
        part.update(*(tensor[torch.from_numpy(rows)] for tensor in tensors))
    merged = parts[2].merge(parts[0], parts[1]).compute("realistic")
    expected = whole.compute("realistic")
    for key in adjusted_keys(KS):
        assert merged[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-14), key
