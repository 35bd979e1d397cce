"""Results JSON and accumulator states from outside are checked entry by entry; every defect is a ValueError
that names the entry (never a TypeError, OverflowError or RecursionError, never silently accepted)."""

from __future__ import annotations

import json

import pytest
import torch

from kgeval import MetricAccumulator, RankBasedEvaluator, RankBasedMetricResults
from tests.helpers.graphs import TableModel, quantised_table, random_graph


@pytest.fixture(scope="module")
def document() -> dict:
    graph = random_graph(3, num_entities=9, num_relations=2, num_triples=12, num_filter=10)
    results = RankBasedEvaluator(ks=(1, 3)).evaluate(
        TableModel(quantised_table(3, 9, 2)), graph.triples, additional_filter_triples=graph.filter_triples,
        use_tqdm=False,
    )  # fmt: skip
    return json.loads(results.to_json())


def load(document: dict, **changes) -> RankBasedMetricResults:
    return RankBasedMetricResults.from_json(json.dumps({**document, **changes}))


def test_a_valid_document_round_trips(document: dict) -> None:
    assert load(document).to_json() == json.dumps(document)


@pytest.mark.parametrize(
    ("ks", "message"),
    [([0, -5], "ks must be a non-empty sequence of positive integers"), ([1.9], "positive integers"),
     (["1"], "positive integers"), (None, "ks must be")],
)  # fmt: skip
def test_bad_ks(document: dict, ks, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load(document, ks=ks)


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("optimistic", -1, "column 'optimistic' row 0 = -1 is not an integer >= 1"),
        ("optimistic", 1.5, "column 'optimistic' row 0 = 1.5 is not an integer >= 1"),
        ("pessimistic", "x", "column 'pessimistic' row 0 = 'x' is not an integer >= 1"),
        ("num_candidates", 10**30, "column 'num_candidates' row 0 = 1000000000000000000000000000000 is not an"),
        ("side", 3, "side must be 0 \\(head\\), 1 \\(tail\\) or 2 \\(relation\\)"),
        ("task_index", -2, "column 'task_index' row 0 = -2 is not an integer >= -1"),  # -1: unknown
        ("head", True, "column 'head' row 0 = True is not an integer >= -1"),
    ],
)
def test_bad_records(document: dict, column: str, value, message: str) -> None:
    records = {name: list(values) for name, values in document["records"].items()}
    records[column][0] = value
    with pytest.raises(ValueError, match=f"results JSON records: .*{message}"):
        load(document, records=records)


def test_inconsistent_ranks(document: dict) -> None:
    records = {name: list(values) for name, values in document["records"].items()}
    records["optimistic"][0], records["pessimistic"][0] = 3, 2
    with pytest.raises(ValueError, match="optimistic must be <= pessimistic"):
        load(document, records=records)


def test_records_that_disagree_with_the_stored_metrics(document: dict) -> None:
    """The reported case: compare() read the records (+0.61) while get_metric read the stored 0.0."""
    records = {name: list(values) for name, values in document["records"].items()}
    records["optimistic"] = [1] * len(records["optimistic"])
    records["pessimistic"] = [1] * len(records["pessimistic"])
    with pytest.raises(ValueError, match="disagrees with its records"):
        load(document, records=records)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (["both", "realistic", "inverse_harmonic_mean_rank", 7.0], "7.0 lies outside the range \\(0, 1\\]"),
        (["both", "realistic", "mrr", 0.5], "unknown metric 'mrr'"),
        (["both", "realistic", "hits_at_10", 0.5], "'hits_at_10' is not a canonical key reported for ks=\\(1, 3\\)"),
        (["both", "realistic", "no_such_metric", 0.5], "unknown metric 'no_such_metric'"),
        (["both", "realistic", "count", "12"], "must be a number"),
        (["both", "realistic", "count", 10**400], "out of the float range"),
        (["both", "realistic", 5, 1.0], "metric key must be a string"),
        (["both", "realistic", "count"], "malformed metric entry"),
    ],
)
def test_bad_metric_entries(document: dict, entry: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load(document, metrics=[*document["metrics"], entry])


def test_a_deeply_nested_document_is_a_value_error(document: dict) -> None:
    nested: dict = {"format": "kgeval.results/1", "ks": [1]}
    for _ in range(3):
        nested = {"format": "kgeval.results/1", "ks": [1], "raw": nested}
    with pytest.raises(ValueError, match="nested results must not hold raw results"):
        RankBasedMetricResults.from_json(json.dumps(nested))
    with pytest.raises(ValueError, match="not a kgeval results JSON document"):
        RankBasedMetricResults.from_json("[" * 100_000 + "]" * 100_000)


def test_bad_null_model_entries(document: dict) -> None:
    with pytest.raises(ValueError, match="a variance must be >= 0"):
        load(document, null_model=[["both", "arithmetic_mean_rank", 3.0, -1.0]])
    with pytest.raises(ValueError, match="disagrees with its records"):
        load(document, null_model=[["both", "arithmetic_mean_rank", 3.0, 1.0]])


# -- accumulator states --------------------------------------------------------------------------------------
def state() -> dict[str, torch.Tensor]:
    accumulator = MetricAccumulator(ks=(1, 3))
    accumulator.update(torch.tensor([1, 2, 4]), torch.tensor([1, 3, 4]), torch.tensor([5, 5, 6]))
    return accumulator.state_dict()


def test_a_valid_state_loads() -> None:
    accumulator = MetricAccumulator(ks=(1, 3))
    accumulator.load_state_dict(state())
    assert accumulator.compute("optimistic")["arithmetic_mean_rank"] == pytest.approx(7 / 3)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("cat:pessimistic", torch.tensor([1, 1, 4]), "optimistic must be <= pessimistic"),
        ("cat:optimistic", torch.tensor([0, 2, 4]), "column 'optimistic' row 0 = 0 is not an integer >= 1"),
        ("cat:num_candidates", torch.tensor([5, 2, 6]), "pessimistic must be <= num_candidates"),
        ("cat:task_index", torch.tensor([-1, -3, -1]), "column 'task_index' row 1 = -3"),
        ("meta:ks", torch.tensor([1.9]), "positive integers"),
        ("meta:ks", torch.tensor([0, -5]), "positive integers"),
        ("cat:triples", torch.zeros(3, 2, dtype=torch.long), "triples must have shape \\(n, 3\\)"),
    ],
)
def test_bad_states(name: str, value: torch.Tensor, message: str) -> None:
    bad = {**state(), name: value}
    with pytest.raises(ValueError, match=message):
        MetricAccumulator(ks=(1, 3)).load_state_dict(bad)


def test_sums_that_disagree_with_the_records() -> None:
    bad = state()
    bad["sum:optimistic/sum_reciprocal_rank"] = bad["sum:optimistic/sum_reciprocal_rank"] + 0.5
    with pytest.raises(ValueError, match="sum:optimistic/sum_reciprocal_rank disagrees with the records"):
        MetricAccumulator(ks=(1, 3)).load_state_dict(bad)
