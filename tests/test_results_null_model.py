"""RankBasedMetricResults: null-model moments (expected / variance), rank-type errors, null model in JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.reference import null_expectation, null_variance

KS = (1, 3, 10)


def evaluate(keep_records: bool = True) -> RankBasedMetricResults:
    rng = np.random.default_rng(4)
    graph = random_graph(rng, 25, 3, 30, 90)
    table = quantised_table(rng, 25, 3, levels=4)
    evaluator = RankBasedEvaluator(ks=KS, keep_records=keep_records)
    return evaluator.evaluate(
        TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )


@pytest.fixture(scope="module")
def results() -> RankBasedMetricResults:
    return evaluate()


def side_candidates(results: RankBasedMetricResults, side: str) -> np.ndarray:
    records = results.records
    if side == "both":
        return records["num_candidates"]
    return records["num_candidates"][records["side"] == ("head", "tail").index(side)]


@pytest.mark.parametrize("side", ["head", "tail", "both"])
@pytest.mark.parametrize("metric", ["mr", "mrr", "gmr", "hits_at_1", "hits_at_3", "hits_at_10"])
def test_expected_and_variance_match_the_reference(results: RankBasedMetricResults, side: str, metric: str) -> None:
    num_candidates = side_candidates(results, side)
    assert results.expected(f"{side}.{metric}") == pytest.approx(null_expectation(metric, num_candidates), rel=1e-12)
    assert results.variance(f"{side}.{metric}") == pytest.approx(null_variance(metric, num_candidates), rel=1e-11)


def test_null_model_does_not_depend_on_the_rank_type(results: RankBasedMetricResults) -> None:
    assert results.expected("tail.optimistic.mrr") == results.expected("tail.realistic.mrr")
    assert results.variance("worst.hits@3") == results.variance("hits_at_3")


@pytest.mark.parametrize(
    ("metric", "expected"),
    [("amr", 1.0), ("amri", 0.0), ("amrr", 0.0), ("agmri", 0.0), ("ah@3", 0.0), ("zmr", 0.0), ("zh@10", 0.0)],
)
def test_adjusted_metrics_have_their_random_value_as_expectation(
    results: RankBasedMetricResults, metric: str, expected: float
) -> None:
    assert results.expected(metric) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("metric", ["zmr", "zmrr", "zgmr", "zh@1"])
def test_z_scores_have_unit_variance(results: RankBasedMetricResults, metric: str) -> None:
    assert results.variance(metric) == pytest.approx(1.0, rel=1e-12)


def test_adjusted_variance_is_the_scaled_base_variance(results: RankBasedMetricResults) -> None:
    expectation, variance = results.expected("mr"), results.variance("mr")
    assert results.variance("amri") == pytest.approx(variance / (expectation - 1) ** 2, rel=1e-12)
    assert results.variance("amr") == pytest.approx(variance / expectation**2, rel=1e-12)


def test_adjusted_metrics_of_other_rank_types_use_the_same_null_model(results: RankBasedMetricResults) -> None:
    """PyKEEN reports the adjusted family for every rank type: the formula on those ranks, the same null model."""
    for rank_type in ("optimistic", "pessimistic"):
        mr = results.get_metric(f"both.{rank_type}.mr")
        assert results.get_metric(f"both.{rank_type}.amri") == pytest.approx(
            1 - (mr - 1) / (results.expected("mr") - 1), rel=1e-12
        )
        hits = results.get_metric(f"tail.{rank_type}.hits@10")
        assert results.get_metric(f"tail.{rank_type}.zh@10") == pytest.approx(
            (hits - results.expected("tail.hits@10")) / results.variance("tail.hits@10") ** 0.5, rel=1e-12
        )
    assert results.expected("tail.worst.zh@10") == results.expected("tail.zh@10") == 0.0


def test_metrics_without_a_closed_form_have_no_moments(results: RankBasedMetricResults) -> None:
    with pytest.raises(KeyError) as error:
        results.variance("head.median_rank")
    assert error.value.args[0] == "median_rank has no closed-form null-model moments in these results (side head)"


def test_without_records_the_gmr_null_model_is_not_reported() -> None:
    results = evaluate(keep_records=False)
    assert results.expected("mrr") == pytest.approx(evaluate().expected("mrr"), rel=1e-15)
    with pytest.raises(KeyError) as error:
        results.expected("gmr")
    assert error.value.args[0] == (
        "geometric_mean_rank has no closed-form null-model moments in these results (side both)"
    )
    assert not any(
        key in ("adjusted_geometric_mean_rank_index", "z_geometric_mean_rank") for _s, _r, key in results.data
    )


def test_every_side_has_null_moments_for_every_adjusted_key(results: RankBasedMetricResults) -> None:
    adjusted = {key for (_side, rank_type, key) in results.data if key.startswith(("adjusted_", "z_"))}
    assert {f"z_hits_at_{k}" for k in KS} | {f"adjusted_hits_at_{k}" for k in KS} <= adjusted
    for side in ("head", "tail", "both"):
        assert all((side, key) in results.null_model for key in adjusted)


def test_json_round_trip_keeps_the_null_model(results: RankBasedMetricResults) -> None:
    again = RankBasedMetricResults.from_json(results.to_json())
    assert again == results
    assert again.expected("gmr") == results.expected("gmr")
    assert again.variance("tail.zh@3") == results.variance("tail.zh@3")
    changed = dict(results.null_model)
    changed[("both", "arithmetic_mean_rank")] = (0.0, 0.0)
    assert RankBasedMetricResults(results.data, results.ks, results.records, changed) != results


def test_results_without_a_null_model_still_load(results: RankBasedMetricResults) -> None:
    document = json.loads(results.to_json(include_records=False))
    del document["null_model"]
    loaded = RankBasedMetricResults.from_json(json.dumps(document))
    assert loaded.null_model == {}
    assert math.isfinite(loaded.get_metric("amri"))


def test_malformed_null_model_entries_are_rejected(results: RankBasedMetricResults) -> None:
    document = json.loads(results.to_json(include_records=False))
    document["null_model"] = [["middle", "arithmetic_mean_rank", 1.0, 2.0]]
    with pytest.raises(
        ValueError,
        match=r"^malformed null_model entry in results JSON: \['middle', 'arithmetic_mean_rank', 1.0, 2.0\]$",
    ):
        RankBasedMetricResults.from_json(json.dumps(document))
