"""RankBasedMetricResults: lookup by key grammar, exports (flat, nested, frames, JSON), display, and the record
requirement of the per-task views."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.reference import reference_metrics


@pytest.fixture(scope="module")
def results() -> RankBasedMetricResults:
    graph = random_graph(0, num_entities=12, num_relations=2, num_triples=20, num_filter=20)
    model = TableModel(quantised_table(np.random.default_rng(0), 12, 2, inf_fraction=0.1))
    return RankBasedEvaluator(ks=(1, 10)).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )


def test_get_metric_uses_the_key_grammar(results) -> None:
    assert results.get_metric("mrr") == results.data[("both", "realistic", "inverse_harmonic_mean_rank")]
    assert results.get_metric("tail.best.mr") == results.data[("tail", "optimistic", "arithmetic_mean_rank")]
    assert results.get_metric("h@1") == results.data[("both", "realistic", "hits_at_1")]
    assert results["HEAD.Worst.Hits@10"] == results.data[("head", "pessimistic", "hits_at_10")]


def test_unknown_key_lists_close_matches(results) -> None:
    with pytest.raises(KeyError) as info:
        results.get_metric("inverse_harmonic_mean_rnk")
    message = info.value.args[0]
    assert message.startswith("unknown metric 'inverse_harmonic_mean_rnk'; did you mean inverse_harmonic_mean_rank, ")
    assert message.endswith("?")


def test_unreported_k_is_a_key_error(results) -> None:
    with pytest.raises(KeyError) as info:
        results.get_metric("hits@3")
    assert info.value.args[0] == (
        "both.realistic.hits_at_3 was not reported by this evaluation; reported names close to it: "
        "hits_at_1, hits_at_10, z_hits_at_1, z_hits_at_10, adjusted_hits_at_1"
    )


def test_flat_dict_and_prefix(results) -> None:
    flat = results.to_flat_dict()
    assert flat["both.realistic.hits_at_10"] == results.get_metric("hits@10")
    # PyKEEN's k-less adjusted / z hits@k keys are exported too, with the values for k = 10 (PyKEEN's default)
    k_less = {key for key in flat if key.endswith(("adjusted_hits_at_k", "z_hits_at_k"))}
    assert len(k_less) == 2 * 9 and len(flat) == len(results.data) + len(k_less)
    for key in k_less:
        assert flat[key] == flat[key.removesuffix("k") + "10"]
    prefixed = results.to_flat_dict(prefix="validation")
    assert prefixed == {f"validation.{key}": value for key, value in flat.items()}


def test_nested_dict_and_dataframe(results) -> None:
    nested = results.to_dict()
    assert nested["tail"]["optimistic"]["count"] == 20
    assert nested["both"]["pessimistic"]["z_hits_at_k"] == nested["both"]["pessimistic"]["z_hits_at_10"]
    frame = results.to_df()
    assert list(frame.columns) == ["Side", "Rank_type", "Metric", "Value"]  # PyKEEN's columns
    assert len(frame) == len(results.to_flat_dict())
    row = frame[(frame.Side == "head") & (frame.Rank_type == "realistic") & (frame.Metric == "median_rank")]
    assert row.Value.item() == results.get_metric("head.median_rank")


def test_json_round_trip_is_exact(results) -> None:
    text = results.to_json()
    again = RankBasedMetricResults.from_json(text)
    assert again == results
    assert again.to_json() == text
    lean = RankBasedMetricResults.from_json(results.to_json(include_records=False))
    assert lean.records is None and lean.data == results.data


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not a kgeval results JSON document: Expecting value: line 1 column 1 (char 0)"),
        (json.dumps({"format": "other"}), "not a kgeval results JSON document: expected format 'kgeval.results/1'"),
        (
            json.dumps({"format": "kgeval.results/1", "ks": [1], "metrics": [["up", "realistic", "mrr", 1.0]]}),
            "malformed metric entry in results JSON: ['up', 'realistic', 'mrr', 1.0]",
        ),
    ],
)
def test_from_json_rejects_other_documents(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        RankBasedMetricResults.from_json(text)
    assert str(info.value) == message


def test_str_is_the_headline(results) -> None:
    text = str(results)
    assert text.startswith("40 ranking tasks (20 head, 20 tail), realistic ranks\n")
    assert f"{results.get_metric('mrr'):.4f}" in text
    shown = _table_cells(results.full_table())
    assert text.endswith(f"\n(.full_table() lists {shown} of the {len(results.data)} numbers, .table() every one)")
    assert results.table().size == len(results.data)  # .table() is every one
    assert "mrr=" in repr(results)


def _table_cells(text: str) -> int:
    """The value cells of a printed metric table (rows after the two header lines, the row name left out)."""
    rows = text.splitlines()[2:]
    return sum(len(row.split()) - 1 for row in rows)


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


def _hand_made_results() -> RankBasedMetricResults:
    """Two head and three tail tasks with ties: realistic ranks head (1, 2.5), tail (3, 1, 4.5)."""
    records = {
        "side": np.array([0, 0, 1, 1, 1]),
        "optimistic": np.array([1, 2, 3, 1, 4]),
        "pessimistic": np.array([1, 3, 3, 1, 5]),
        "num_candidates": np.array([10, 10, 10, 10, 10]),
        **{column: np.array([0, 1, 2, 3, 4]) for column in ("head", "relation", "tail")},
    }
    return RankBasedMetricResults.from_records(records, ks=(1, 3))


def test_headline_is_a_flat_dict_for_loggers() -> None:
    """Expected values by hand from METRICS.md's definitions on the realistic ranks."""
    results = _hand_made_results()
    head, tail = np.array([1, 2.5]), np.array([3, 1, 4.5])
    both = np.concatenate([head, tail])
    expected = {}
    for side, ranks in (("", both), ("head/", head), ("tail/", tail)):
        expected.update({f"val/{side}mrr": np.mean(1 / ranks), f"val/{side}hits_at_1": np.mean(ranks <= 1),
                         f"val/{side}hits_at_3": np.mean(ranks <= 3), f"val/{side}mr": np.mean(ranks)})  # fmt: skip
    got = results.headline("val")
    assert list(got) == list(expected)
    assert got == pytest.approx(expected)
    assert got["val/hits@3"] == got["val/hits_at_3"] and got["val/tail/hits@1"] == got["val/tail/hits_at_1"]
    with pytest.raises(KeyError):
        got["val/hits@5"]  # no such k: the old spelling finds only what the new one holds
    assert all(type(value) is float for value in got.values())
    assert results.headline()["mrr"] == got["val/mrr"]
    assert results.headline(rank_type="optimistic")["head/mr"] == pytest.approx(1.5)


def test_headline_tables_in_markdown_and_latex() -> None:
    pytest.importorskip("tabulate")
    pytest.importorskip("jinja2")
    results = _hand_made_results()
    table = results.headline_table()
    assert list(table.columns) == ["both", "head", "tail"] and list(table.index) == ["MRR", "Hits@1", "Hits@3", "MR"]
    markdown = results.to_markdown()
    assert "| MR       | 2.4000 | 1.7500 | 2.8333 |" in markdown
    latex = results.to_latex()
    assert latex.startswith("\\begin{tabular}") and "MR & 2.4000 & 1.7500 & 2.8333 \\\\" in latex
