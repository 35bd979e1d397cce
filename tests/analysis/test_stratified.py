"""Tests of kgeval.analysis.stratified: popularity-stratified metrics against METRICS.md's brute-force reference."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.analysis.stratified import (
    DEFAULT_BETAS,
    evaluated_triples,
    popularity_counts,
    strat_curve,
    stratified_metrics,
)
from kgeval.datasets import load_dataset, shared_data_dir
from kgeval.models import DistMult
from kgeval.models.training import train_model
from tests.helpers.rank_records import random_popularity, random_records
from tests.helpers.reference import (
    macro_average_reference,
    per_relation_reference,
    stratified_reference,
)

KS = (1, 3, 10)
NAMES = ("strat_hits_at_1", "strat_hits_at_3", "strat_hits_at_10", "strat_mrr")


# -- the reference, per metric --------------------------------------------------------------------------------


def expected(records: dict[str, np.ndarray], popularity, beta_e, beta_r, rank_type="realistic", min_count=None):
    """Every stratified metric from tests.helpers.reference.stratified_reference, triple by triple."""
    order = np.lexsort((records["side"], records["task_index"]))
    rows = {name: column[order] for name, column in records.items()}
    if rank_type == "realistic":
        ranks = (rows["optimistic"] + rows["pessimistic"]) / 2
    else:
        ranks = rows[rank_type].astype(float)
    triples = np.column_stack([rows["head"], rows["relation"], rows["tail"]])[0::2]
    head, tail = ranks[0::2], ranks[1::2]
    values = [(head <= k, tail <= k) for k in KS] + [(1 / head, 1 / tail)]
    return {
        name: stratified_reference(triples, m_h, m_t, popularity, beta_e, beta_r, min_count)
        for name, (m_h, m_t) in zip(NAMES, values, strict=True)
    }


def assert_close(actual: dict[str, float], wanted: dict[str, float], rel: float = 1e-12) -> None:
    assert list(actual) == list(wanted)
    for name in wanted:
        assert actual[name] == pytest.approx(wanted[name], rel=rel, abs=1e-15), name


# -- against the reference ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("beta_e", "beta_r"), [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (0.5, -0.3), (-1, 1)])
def test_equals_reference_on_random_ranks(seed: int, beta_e: float, beta_r: float) -> None:
    records = random_records(seed)
    popularity = random_popularity(seed, records)
    results = RankBasedMetricResults(data={}, records=records)
    actual = stratified_metrics(results, torch.as_tensor(popularity), beta_e, beta_r, ks=KS)
    assert_close(actual, expected(records, popularity, beta_e, beta_r))


@pytest.mark.parametrize("rank_type", ["optimistic", "pessimistic", "realistic"])
def test_rank_types(rank_type: str) -> None:
    records = random_records(7)
    popularity = random_popularity(7, records)
    results = RankBasedMetricResults(data={}, records=records)
    actual = stratified_metrics(results, popularity, 0.7, -0.4, ks=KS, rank_type=rank_type)
    assert_close(actual, expected(records, popularity, 0.7, -0.4, rank_type))


def test_rank_type_synonyms() -> None:
    results = RankBasedMetricResults(data={}, records=random_records(3))
    popularity = random_popularity(3, results.records)
    assert stratified_metrics(results, popularity, rank_type="BEST") == stratified_metrics(
        results, popularity, rank_type="optimistic"
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 40),
    beta_e=st.floats(-1, 1),
    beta_r=st.floats(-1, 1),
    min_count=st.one_of(st.none(), st.floats(0.5, 20)),
)
def test_property_equals_reference(seed: int, n: int, beta_e: float, beta_r: float, min_count: float | None) -> None:
    records = random_records(seed, n=n, num_entities=6, num_relations=3)
    popularity = random_popularity(seed, records, extra=30)
    if min_count is not None:  # absent items become legal: drop the covering triples
        popularity = popularity[2 * n :]
    results = RankBasedMetricResults(data={}, records=records)
    actual = stratified_metrics(results, [popularity[:5], popularity[5:]], beta_e, beta_r, ks=KS, min_count=min_count)
    assert_close(actual, expected(records, popularity, beta_e, beta_r, min_count=min_count), rel=1e-11)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), beta_e=st.floats(0, 1), beta_r=st.floats(-1, 1))
def test_entity_beta_curve_is_point_symmetric(seed: int, beta_e: float, beta_r: float) -> None:
    """From METRICS.md: w(t) / (w(h) + w(t)) at -β_e is w(h) / (w(h) + w(t)) at β_e, so the mean of the values at
    β_e and -β_e is the value at 0 (for any ranks and popularity)."""
    records = random_records(seed, n=30)
    results = RankBasedMetricResults(data={}, records=records)
    popularity = random_popularity(seed, records)
    plus, minus, zero = (stratified_metrics(results, popularity, b, beta_r) for b in (beta_e, -beta_e, 0.0))
    for name in zero:
        assert (plus[name] + minus[name]) / 2 == pytest.approx(zero[name], rel=1e-12, abs=1e-15)


def test_min_count_is_a_floor_for_present_items_too() -> None:
    records = random_records(11)
    popularity = random_popularity(11, records)
    results = RankBasedMetricResults(data={}, records=records)
    actual = stratified_metrics(results, popularity, 1.0, 1.0, ks=KS, min_count=30)
    assert_close(actual, expected(records, popularity, 1.0, 1.0, min_count=30))
    assert actual != stratified_metrics(results, popularity, 1.0, 1.0, ks=KS)


def test_results_method_and_rank_table_agree() -> None:
    records = random_records(5)
    popularity = random_popularity(5, records)
    results = RankBasedMetricResults(data={}, records=records)
    wanted = stratified_metrics(results, popularity, 0.3, 0.6)
    assert results.stratified(popularity, beta_e=0.3, beta_r=0.6) == wanted
    # a ranks_df-style table: side strings, a realistic column, no task_index, rows in another order
    table = pd.DataFrame(records).drop(columns="task_index").sample(frac=1.0, random_state=0)
    table["side"] = table["side"].map({0: "head", 1: "tail"})
    table["realistic"] = (table["optimistic"] + table["pessimistic"]) / 2
    assert_close(stratified_metrics(table, popularity, 0.3, 0.6), wanted, rel=1e-13)


def test_ranks_df_of_a_real_evaluation(trained) -> None:
    """results.ranks_df() (categorical sides, task_index, labels) gives the values of the results themselves."""
    dataset, results = trained
    table = results.ranks_df(entity_labels=dataset.entity_to_id, relation_labels=dataset.relation_to_id)
    wanted = stratified_metrics(results, dataset.train, 0.8, -0.2, min_count=1)
    assert stratified_metrics(table, dataset.train, 0.8, -0.2, min_count=1) == wanted
    without_index = table.drop(columns="task_index").iloc[::-1]
    assert_close(stratified_metrics(without_index, dataset.train, 0.8, -0.2, min_count=1), wanted, rel=1e-13)


def test_duplicated_triples_pair_without_task_index() -> None:
    records = random_records(1)  # odd seed: half of the triples repeat
    popularity = random_popularity(1, records)
    table = pd.DataFrame(records).drop(columns="task_index")
    got = stratified_metrics(table, popularity, -0.5, 0.5)
    assert_close(got, expected(records, popularity, -0.5, 0.5))


def test_popularity_counts_and_evaluated_triples() -> None:
    entities, relations = popularity_counts([np.array([[0, 1, 2], [2, 1, 2]]), torch.tensor([[3, 0, 0]])], 6, 3)
    assert entities.tolist() == [2, 0, 3, 1, 0, 0]
    assert relations.tolist() == [1, 2, 0]
    records = random_records(2, n=10)
    triples = evaluated_triples(RankBasedMetricResults(data={}, records=records))
    order = np.argsort(records["task_index"][records["side"] == 0])
    heads = records["side"] == 0
    wanted = np.column_stack([records["head"], records["relation"], records["tail"]])[heads][order]
    np.testing.assert_array_equal(triples, wanted)


# -- strat_curve ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vary", ["entity", "relation"])
def test_curve_rows_are_the_metrics_at_each_beta(vary: str) -> None:
    records = random_records(4)
    popularity = random_popularity(4, records)
    results = RankBasedMetricResults(data={}, records=records)
    curve = strat_curve(results, popularity, vary=vary)
    assert list(curve.columns) == ["beta_e", "beta_r", *NAMES]
    assert curve.attrs["vary"] == vary
    varied, fixed = ("beta_e", "beta_r") if vary == "entity" else ("beta_r", "beta_e")
    assert curve[varied].tolist() == list(DEFAULT_BETAS)
    assert (curve[fixed] == 0).all()
    assert curve[varied].iloc[0] == -1
    assert curve[varied].iloc[-1] == 1
    for row in curve.itertuples(index=False):
        wanted = expected(records, popularity, row.beta_e, row.beta_r)
        assert_close({name: getattr(row, name) for name in NAMES}, wanted)


def test_curve_of_several_models() -> None:
    first, second = (RankBasedMetricResults(data={}, records=random_records(seed)) for seed in (0, 2))
    popularity = np.concatenate([random_popularity(0, first.records), random_popularity(2, second.records)])
    curve = strat_curve({"a": first, "b": second}, popularity, betas=[-1, 0, 0.5], vary="relation", ks=(2,))
    assert list(curve.columns) == ["model", "beta_e", "beta_r", "strat_hits_at_2", "strat_mrr"]
    assert curve["model"].tolist() == ["a"] * 3 + ["b"] * 3
    assert curve["beta_r"].tolist() == [-1, 0, 0.5] * 2
    one = stratified_metrics(second, popularity, 0.0, 0.5, ks=(2,))
    assert curve.iloc[5][["strat_hits_at_2", "strat_mrr"]].tolist() == list(one.values())


# -- the paper's lemmas on real data, with ranks from a real evaluation ---------------------------------------


def _real_datasets() -> list:
    names = [pytest.param("umls", id="umls")]
    if shared_data_dir() is not None and (shared_data_dir() / "codex-s").is_dir():
        names.append(pytest.param("codex-s", id="codex-s"))
    else:
        names.append(pytest.param("codex-s", id="codex-s", marks=pytest.mark.skip(reason="no shared codex-s")))
    return names


@pytest.fixture(scope="module", params=_real_datasets())
def trained(request: pytest.FixtureRequest):
    """(dataset, test results) of a DistMult trained briefly (one epoch)."""
    dataset = load_dataset(request.param)
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=32, seed=0)
    train_model(model, dataset.train, num_epochs=1, batch_size=1024, use_tqdm=False)
    evaluator = RankBasedEvaluator(ks=(1, 3, 10))
    results = evaluator.evaluate(
        model, dataset.test, additional_filter_triples=[dataset.train, dataset.valid], use_tqdm=False
    )
    return dataset, results


@pytest.mark.parametrize("rank_type", ["realistic", "optimistic", "pessimistic"])
def test_lemma_1_micro_average(trained, rank_type: str) -> None:
    """β_e = 0, β_r = -1 with relation popularity counted on the evaluated triples: micro hits@k and MRR."""
    dataset, results = trained
    values = stratified_metrics(results, dataset.test, beta_e=0.0, beta_r=-1.0, rank_type=rank_type)
    for k in KS:
        assert values[f"strat_hits_at_{k}"] == pytest.approx(
            results.get_metric(f"both.{rank_type}.hits_at_{k}"), rel=1e-12, abs=1e-15
        )
    assert values["strat_mrr"] == pytest.approx(results.get_metric(f"both.{rank_type}.mrr"), rel=1e-12)


def test_lemma_2_macro_average(trained) -> None:
    """β_e = β_r = 0: macro average over relations of the per-relation mean of (m_h + m_t) / 2."""
    dataset, results = trained
    values = stratified_metrics(results, dataset.train, 0.0, 0.0, min_count=1)
    records = results.records
    head, tail = records["side"] == 0, records["side"] == 1
    assert np.array_equal(records["task_index"][head], records["task_index"][tail])  # both in triple order
    ranks = (records["optimistic"] + records["pessimistic"]) / 2
    triples = np.column_stack([records["head"], records["relation"], records["tail"]])[head]
    per_value = [(ranks <= k) * 1.0 for k in KS] + [1.0 / ranks]
    for name, value in zip(NAMES, per_value, strict=True):
        per_relation = per_relation_reference(triples, value[head], value[tail], side="both")
        assert values[name] == pytest.approx(macro_average_reference(per_relation), rel=1e-12), name


def test_rare_entity_weighting_moves_the_metric(trained) -> None:
    """Not a lemma: a sanity check that β_e changes the value on skewed real data."""
    dataset, results = trained
    curve = strat_curve(results, dataset.train, betas=[-1.0, 1.0], min_count=1)
    assert not math.isclose(curve["strat_mrr"].iloc[0], curve["strat_mrr"].iloc[1], rel_tol=1e-6)


# -- errors -----------------------------------------------------------------------------------------------------


def _results(records: dict[str, np.ndarray] | None = None) -> RankBasedMetricResults:
    return RankBasedMetricResults(data={}, records=random_records(0, n=6) if records is None else records)


def test_error_without_records() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            "the results keep no per-task rank records; evaluate with RankBasedEvaluator(keep_records=True)"
        ),
    ):
        stratified_metrics(RankBasedMetricResults(data={}), np.zeros((1, 3), dtype=int))


def test_error_on_empty_records() -> None:
    empty = {name: column[:0] for name, column in random_records(0).items()}
    with pytest.raises(ValueError, match=r"^the results hold no ranking tasks$"):
        stratified_metrics(_results(empty), np.zeros((1, 3), dtype=int))


@pytest.mark.parametrize(("code", "side"), [(0, "head"), (1, "tail")])
def test_error_on_one_side_only(code: int, side: str) -> None:
    records = random_records(0, n=6)
    one = {name: column[records["side"] == code] for name, column in records.items()}
    message = (
        f"stratified metrics need the head and the tail task of every triple, got {side} tasks only "
        "(evaluate with targets=('head', 'tail'))"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        stratified_metrics(_results(one), random_popularity(0, one))


def test_error_on_unpaired_task() -> None:
    records = {name: column[1:] for name, column in random_records(0, n=6).items()}
    message = (
        "stratified metrics need exactly one head and one tail task per triple; the records pair 11 tasks into "
        "6 triples"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        stratified_metrics(_results(records), random_popularity(0, records))


def test_error_on_different_triples_with_one_task_index() -> None:
    records = random_records(0, n=6)
    records["head"] = np.where(records["side"] == 1, records["head"] + 100, records["head"])
    with pytest.raises(ValueError, match=r"^head and tail tasks with the same task_index belong to different triples$"):
        stratified_metrics(_results(records), random_popularity(0, records))


@pytest.mark.parametrize(("column", "kind"), [("head", "entity"), ("relation", "relation")])
def test_error_on_absent_item(column: str, kind: str) -> None:
    records = random_records(0, n=6)
    popularity = random_popularity(0, records)
    records[column] = records[column].copy()
    records[column][records["task_index"] == 2] = 40
    if column == "head":  # an absent tail entity is counted in the same message
        records["tail"] = records["tail"].copy()
        records["tail"][records["task_index"] == 3] = 41
    number, ids = (2, "[40, 41]") if column == "head" else (1, "[40]")
    message = (
        f"{number} {kind}(s) of the evaluated triples do not occur in popularity_triples (ids {ids}); "
        "pass min_count to give them a floor count"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        stratified_metrics(_results(records), popularity)
    assert set(stratified_metrics(_results(records), popularity, min_count=1)) == set(NAMES)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beta_e": 1.5}, "beta_e must be a number in [-1, 1], got 1.5"),
        ({"beta_r": -1.01}, "beta_r must be a number in [-1, 1], got -1.01"),
        ({"beta_e": float("nan")}, "beta_e must be a number in [-1, 1], got nan"),
        ({"beta_r": True}, "beta_r must be a number in [-1, 1], got True"),
        ({"beta_e": "0"}, "beta_e must be a number in [-1, 1], got '0'"),
        (
            {"rank_type": "median"},
            "rank_type must be one of ['average', 'avg', 'best', 'optimistic', 'pessimistic', "
            "'realistic', 'worst'], got 'median'",
        ),
        ({"min_count": 0}, "min_count must be a number > 0 or None, got 0"),
        ({"min_count": "1"}, "min_count must be a number > 0 or None, got '1'"),
        ({"ks": (0, 3)}, "ks must be a non-empty sequence of positive integers, got (0, 3)"),
    ],
)
def test_error_on_bad_arguments(kwargs: dict, message: str) -> None:
    results = _results()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        stratified_metrics(results, random_popularity(0, results.records), **kwargs)


@pytest.mark.parametrize(
    ("popularity", "message"),
    [
        (np.zeros((4, 2), dtype=int), "popularity_triples must be integer (m, 3) arrays, got int64 of shape (4, 2)"),
        (np.zeros((4, 3)), "popularity_triples must be integer (m, 3) arrays, got float64 of shape (4, 3)"),
        (-np.ones((1, 3), dtype=int), "popularity_triples must hold ids >= 0, got -1"),
    ],
)
def test_error_on_bad_popularity_triples(popularity: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        stratified_metrics(_results(), popularity)


def test_error_on_bad_results_type() -> None:
    with pytest.raises(TypeError, match=r"^results must be RankBasedMetricResults or a rank DataFrame, got dict$"):
        stratified_metrics({"a": 1}, np.zeros((1, 3), dtype=int))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vary": "both"}, "vary must be 'entity' or 'relation', got 'both'"),
        ({"betas": 0.5}, "betas must be a non-empty sequence of numbers in [-1, 1], got 0.5"),
        ({"betas": []}, "betas must be a non-empty sequence of numbers in [-1, 1], got []"),
        ({"betas": [0, 2]}, "every beta must be a number in [-1, 1], got 2"),
    ],
)
def test_curve_errors(kwargs: dict, message: str) -> None:
    results = _results()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        strat_curve(results, random_popularity(0, results.records), **kwargs)


def test_curve_error_on_empty_mapping() -> None:
    with pytest.raises(ValueError, match=r"^results must name at least one model, got an empty mapping$"):
        strat_curve({}, np.zeros((1, 3), dtype=int))
