"""Logging-friendly exports of RankBasedMetricResults and the record requirement of the per-task views."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.reference import reference_metrics


def _results(keep_records: bool = True) -> tuple[RankBasedMetricResults, dict]:
    rng = np.random.default_rng(0)
    graph = random_graph(rng, 9, 3, 20, 20)
    table = quantised_table(rng, 9, 3)
    evaluator = RankBasedEvaluator(ks=(1, 3), keep_records=keep_records)
    results = evaluator.evaluate(
        TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    return results, reference_metrics(table, graph.triples, graph.filter_triples, ks=(1, 3))


def test_to_flat_dict_with_a_prefix_for_experiment_trackers():
    results, expected = _results()
    flat = results.to_flat_dict(prefix="validation")
    assert len(flat) == len(results.data)
    assert all(key.startswith("validation.") and key.count(".") == 3 for key in flat)
    assert flat["validation.both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(
        expected["both", "realistic", "inverse_harmonic_mean_rank"], rel=1e-12
    )
    assert flat["validation.tail.optimistic.hits_at_3"] == pytest.approx(expected["tail", "optimistic", "hits_at_3"])
    for key, value in flat.items():
        assert value == results.get_metric(key.removeprefix("validation.")) or np.isnan(value)


def test_to_flat_dict_without_a_prefix():
    results, _ = _results()
    flat = results.to_flat_dict()
    assert set(flat) == {key.removeprefix("validation.") for key in results.to_flat_dict(prefix="validation")}
    assert "both.realistic.hits_at_1" in flat
    assert all(isinstance(value, float) for value in flat.values())


def test_views_survive_a_json_round_trip():
    results, _ = _results()
    restored = RankBasedMetricResults.from_json(results.to_json())
    pd.testing.assert_frame_equal(restored.ranks_df(), results.ranks_df())
    pd.testing.assert_frame_equal(restored.per_relation(), results.per_relation())


@pytest.mark.parametrize(
    ("view", "call"),
    [
        ("ranks_df", lambda r: r.ranks_df()),
        ("per_relation", lambda r: r.per_relation()),
        ("macro_average", lambda r: r.macro_average("mrr")),
        ("per_category", lambda r: r.per_category(np.zeros((1, 3), dtype=np.int64))),
    ],
)
def test_views_raise_without_records(view, call):
    results, _ = _results(keep_records=False)
    message = f"{view} needs the per-task rank records; evaluate with keep_records=True"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call(results)
