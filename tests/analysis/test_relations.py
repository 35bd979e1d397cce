"""Rank export, per-relation and macro views, relation categories and relation restriction (kgeval/relations.py).

Expected values come from tests/helpers/reference.py (brute force over METRICS.md), never from kgeval itself.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings

from kgeval import RankBasedEvaluator, UndefinedMetricWarning
from kgeval.analysis.relations import CATEGORIES, UNSEEN, relation_categories
from tests.helpers.graphs import TableModel, edge_cases, graphs_and_tables, quantised_table, random_graph
from tests.helpers.reference import (
    RANK_TYPES,
    macro_average_reference,
    per_relation_reference,
    plain_keys,
    plain_metric,
    reference_metrics,
    reference_per_relation_metrics,
    reference_ranks,
)

KS = (1, 3, 10)
RTOL = 1e-9


def _problem(seed: int, num_entities: int = 12, num_relations: int = 4, num_triples: int = 40):
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, num_entities, num_relations, num_triples, 50)
    table = quantised_table(rng, num_entities, num_relations, levels=3, inf_fraction=0.1)
    return graph, table


def _evaluate(graph, table, **kwargs):
    evaluator = RankBasedEvaluator(ks=KS, batch_size=7, slice_size=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return evaluator.evaluate(
            TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False, **kwargs
        )


def raises_exactly(error: type[Exception], message: str):
    """pytest.raises matching the whole message."""
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _close(actual: float, expected: float) -> bool:
    return (math.isnan(actual) and math.isnan(expected)) or math.isclose(actual, expected, rel_tol=RTOL, abs_tol=1e-12)


def _side_frame(frame: pd.DataFrame, side: str) -> pd.DataFrame:
    return frame[frame.side == side].sort_values("task_index", kind="stable")


# -- rank export -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_ranks_df_agrees_with_reference_ranks(seed):
    graph, table = _problem(seed)
    frame = _evaluate(graph, table).ranks_df()
    expected = reference_ranks(table, graph.triples, graph.filter_triples)
    assert len(frame) == 2 * len(graph.triples)
    for side in ("head", "tail"):
        rows = _side_frame(frame, side)
        np.testing.assert_array_equal(rows.task_index, np.arange(len(graph.triples)))
        np.testing.assert_array_equal(rows[["head", "relation", "tail"]].to_numpy(), graph.triples.numpy())
        for column in ("optimistic", "pessimistic", "realistic", "num_candidates"):
            np.testing.assert_array_equal(rows[column].to_numpy(), expected[side][column])


@pytest.mark.parametrize("name", sorted(edge_cases()))
def test_ranks_df_agrees_with_reference_ranks_on_edge_cases(name):
    graph, table = edge_cases()[name]
    frame = _evaluate(graph, table).ranks_df()
    expected = reference_ranks(table, graph.triples, graph.filter_triples)
    for side in ("head", "tail"):
        rows = _side_frame(frame, side)
        for column in ("optimistic", "pessimistic", "realistic", "num_candidates"):
            np.testing.assert_array_equal(rows[column].to_numpy(), expected[side][column])


def test_ranks_df_columns_and_dtypes():
    graph, table = _problem(0)
    frame = _evaluate(graph, table).ranks_df()
    assert list(frame.columns) == [
        "head", "relation", "tail", "side", "optimistic", "pessimistic", "realistic", "num_candidates", "task_index",
    ]  # fmt: skip
    assert list(frame.side.cat.categories) == ["head", "tail", "relation"]
    assert frame.realistic.dtype == np.float64
    assert all(frame[c].dtype == np.int64 for c in ("head", "relation", "tail", "optimistic", "num_candidates"))


def test_ranks_df_tail_only_evaluation():
    graph, table = _problem(1)
    frame = _evaluate(graph, table, targets=("tail",)).ranks_df()
    expected = reference_ranks(table, graph.triples, graph.filter_triples)
    assert set(frame.side) == {"tail"}
    np.testing.assert_array_equal(_side_frame(frame, "tail").realistic.to_numpy(), expected["tail"]["realistic"])


def test_ranks_df_labels_accept_either_direction_and_sequences():
    graph, table = _problem(2)
    results = _evaluate(graph, table)
    entity_names = [f"e{i}" for i in range(graph.num_entities)]
    relation_names = [f"r{i}" for i in range(graph.num_relations)]
    entity_to_id = {name: i for i, name in enumerate(entity_names)}
    by_label = results.ranks_df(entity_to_id, {name: i for i, name in enumerate(relation_names)})
    by_id = results.ranks_df(dict(enumerate(entity_names)), dict(enumerate(relation_names)))
    by_sequence = results.ranks_df(entity_names, relation_names)
    pd.testing.assert_frame_equal(by_label, by_id)
    pd.testing.assert_frame_equal(by_label, by_sequence)
    assert list(by_label.head_label) == [f"e{h}" for h in by_label["head"]]
    assert list(by_label.tail_label) == [f"e{t}" for t in by_label["tail"]]
    assert list(by_label.relation_label) == [f"r{r}" for r in by_label["relation"]]


def test_ranks_df_raises_for_a_missing_label():
    graph, table = _problem(3)
    results = _evaluate(graph, table)
    missing = int(graph.triples[0, 0])
    labels = {i: f"e{i}" for i in range(graph.num_entities) if i != missing}
    with raises_exactly(ValueError, f"entity_labels has no label for id {missing}"):
        results.ranks_df(entity_labels=labels)


def test_ranks_df_raises_for_a_label_mapping_of_the_wrong_type():
    graph, table = _problem(3)
    message = "relation_labels must be a mapping (label -> id or id -> label) or a sequence, got int"
    with raises_exactly(TypeError, message):
        _evaluate(graph, table).ranks_df(relation_labels=42)


def test_ranks_df_raises_for_non_integer_ids():
    graph, table = _problem(3)
    message = "relation_labels must map labels to non-negative integer ids (or back), got id 'x'"
    with raises_exactly(TypeError, message):
        _evaluate(graph, table).ranks_df(relation_labels={"a": "x"})


# -- per relation and macro -----------------------------------------------------------------------------------------
def _reference_from_export(frame: pd.DataFrame, side: str, values) -> dict[int, float]:
    """per_relation_reference on the exported ranks, with ``values`` mapping a rank array to per-task values."""
    head = _side_frame(frame, "head")
    tail = _side_frame(frame, "tail")
    triples = head[["head", "relation", "tail"]].to_numpy()
    return per_relation_reference(triples, values(head.realistic.to_numpy()), values(tail.realistic.to_numpy()), side)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("side", ["head", "tail", "both"])
def test_per_relation_mrr_and_hits_agree_with_brute_force_from_exported_ranks(seed, side):
    graph, table = _problem(seed)
    results = _evaluate(graph, table)
    frame = results.ranks_df()
    view = results.per_relation(("mrr", "hits@10"))
    mrr = _reference_from_export(frame, side, lambda r: 1.0 / r)
    hits = _reference_from_export(frame, side, lambda r: (r <= 10).astype(float))
    assert list(view.index) == sorted(mrr)
    for relation in mrr:
        assert _close(view.loc[relation, f"{side}.mrr"], mrr[relation])
        assert _close(view.loc[relation, f"{side}.hits@10"], hits[relation])


@pytest.mark.parametrize("seed", range(2))
def test_per_relation_every_plain_metric_agrees_with_reference_per_relation_metrics(seed):
    graph, table = _problem(seed)
    results = _evaluate(graph, table)
    names = plain_keys(KS)
    keys = [f"{rank_type}.{name}" for rank_type in RANK_TYPES for name in names]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        view = results.per_relation(keys)
    expected = reference_per_relation_metrics(table, graph.triples, graph.filter_triples, KS)
    for relation, metrics in expected.items():
        for side in ("head", "tail", "both"):
            for rank_type in RANK_TYPES:
                for name in names:
                    actual = view.loc[relation, f"{side}.{rank_type}.{name}"]
                    assert _close(actual, metrics[side, rank_type, name]), (relation, side, rank_type, name)


def test_per_relation_count_is_the_number_of_evaluation_triples():
    graph, table = _problem(4)
    view = _evaluate(graph, table).per_relation("mrr")
    relations, counts = np.unique(graph.triples[:, 1].numpy(), return_counts=True)
    assert dict(zip(view.index, view["count"], strict=True)) == dict(zip(relations, counts, strict=True))


def test_per_relation_key_with_a_side_gives_only_that_side_and_labels_are_added():
    graph, table = _problem(4)
    names = {f"r{i}": i for i in range(graph.num_relations)}
    view = _evaluate(graph, table).per_relation(["tail.mr", "h@1"], relation_labels=names)
    assert list(view.columns) == [
        "count", "relation_label", "tail.mr", "head.h@1", "tail.h@1", "both.h@1",
    ]  # fmt: skip
    assert list(view.relation_label) == [f"r{r}" for r in view.index]


def test_per_relation_hits_at_a_k_the_evaluator_did_not_track():
    graph, table = _problem(5)
    results = _evaluate(graph, table)
    view = results.per_relation("tail.hits@2")
    expected = _reference_from_export(results.ranks_df(), "tail", lambda r: (r <= 2).astype(float))
    for relation, value in expected.items():
        assert _close(view.loc[relation, "tail.hits@2"], value)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    ("key", "side", "values"),
    [
        ("mrr", "both", lambda r: 1.0 / r),
        ("tail.hits@3", "tail", lambda r: (r <= 3).astype(float)),
        ("head.mr", "head", lambda r: r),
    ],
)
def test_macro_average_agrees_with_brute_force(seed, key, side, values):
    graph, table = _problem(seed)
    results = _evaluate(graph, table)
    expected = macro_average_reference(_reference_from_export(results.ranks_df(), side, values))
    assert _close(results.macro_average(key), expected)


def test_macro_average_of_a_rank_type_and_order_statistic():
    graph, table = _problem(6)
    results = _evaluate(graph, table)
    frame = results.ranks_df()
    head, tail = _side_frame(frame, "head"), _side_frame(frame, "tail")
    per_relation = per_relation_reference(
        head[["head", "relation", "tail"]].to_numpy(),
        head.optimistic.to_numpy(),
        tail.optimistic.to_numpy(),
        "both",
        reduce=lambda v: plain_metric("median_rank", v),
    )
    assert _close(results.macro_average("both.best.median_rank"), macro_average_reference(per_relation))


def test_macro_average_differs_from_micro_when_relations_are_unbalanced():
    graph, table = _problem(7, num_relations=3, num_triples=60)
    results = _evaluate(graph, table)
    micro = reference_metrics(table, graph.triples, graph.filter_triples, KS)["both", "realistic", "hits_at_1"]
    assert _close(results.get_metric("hits@1"), micro)
    expected = macro_average_reference(_reference_from_export(results.ranks_df(), "both", lambda r: (r <= 1) * 1.0))
    assert _close(results.macro_average("hits@1"), expected)


def test_per_relation_raises_for_an_unknown_metric():
    graph, table = _problem(0)
    with pytest.raises(KeyError, match="unknown metric 'mrrr'; did you mean"):
        _evaluate(graph, table).per_relation("mrrr")


def test_per_relation_raises_for_a_side_that_was_not_evaluated():
    graph, table = _problem(0)
    results = _evaluate(graph, table, targets=("tail",))
    expected = "side 'head' of key 'head.mrr' was not evaluated; evaluated sides: ('tail', 'both')"
    with raises_exactly(KeyError, f'"{expected}"'):
        results.per_relation("head.mrr")


@settings(max_examples=40, deadline=None)
@given(graphs_and_tables())
def test_property_export_per_relation_and_macro_agree_with_brute_force(problem):
    graph, table = problem
    results = _evaluate(graph, table)
    frame = results.ranks_df()
    expected = reference_ranks(table, graph.triples, graph.filter_triples)
    for side in ("head", "tail"):
        for column in ("optimistic", "pessimistic", "num_candidates"):
            np.testing.assert_array_equal(_side_frame(frame, side)[column].to_numpy(), expected[side][column])
    mrr = _reference_from_export(frame, "both", lambda r: 1.0 / r)
    view = results.per_relation("mrr")
    assert all(_close(view.loc[relation, "both.mrr"], value) for relation, value in mrr.items())
    assert _close(results.macro_average("mrr"), macro_average_reference(mrr))


# -- relation categories ----------------------------------------------------------------------------------------------
def _brute_force_categories(triples, threshold=1.5) -> dict[int, str]:
    tails, heads, facts = defaultdict(set), defaultdict(set), defaultdict(set)
    for h, r, t in {tuple(row) for row in triples.tolist()}:
        tails[h, r].add(t)
        heads[r, t].add(h)
        facts[r].add((h, r, t))
    out = {}
    for r in facts:
        tph = len(facts[r]) / len([key for key in tails if key[1] == r])
        hpt = len(facts[r]) / len([key for key in heads if key[0] == r])
        out[r] = ("1" if hpt < threshold else "N") + "-" + ("1" if tph < threshold else "N")
    return out


def _category_train() -> torch.Tensor:
    rows = [(i, 0, i + 1) for i in range(4)]  # 1-1
    rows += [(0, 1, t) for t in range(1, 5)]  # 1-N: one head, four tails
    rows += [(h, 2, 0) for h in range(1, 5)]  # N-1
    rows += [(h, 3, t) for h in range(2) for t in range(2)]  # N-N: 2 x 2
    rows += [(0, 4, 1), (0, 4, 2), (1, 4, 3), (1, 4, 3)]  # tails per head = 1.5 exactly (duplicate counted once)
    return torch.tensor(rows)


def test_relation_categories_on_hand_built_relations():
    table = relation_categories(_category_train())
    assert dict(table.category) == {0: "1-1", 1: "1-N", 2: "N-1", 3: "N-N", 4: "1-N"}
    assert table.loc[4, "tails_per_head"] == 1.5
    assert table.loc[4, "num_triples"] == 3
    assert table.loc[3, "heads_per_tail"] == 2.0


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("threshold", [1.2, 1.5, 2.0])
def test_relation_categories_agree_with_brute_force(seed, threshold):
    graph = random_graph(seed, 10, 5, 60, 0)
    table = relation_categories(graph.triples, threshold=threshold)
    assert dict(table.category) == _brute_force_categories(graph.triples, threshold)


def test_per_category_pools_the_tasks_of_each_category():
    rng = np.random.default_rng(0)
    train = _category_train()
    evaluated = torch.tensor([[0, 0, 3], [1, 1, 2], [2, 2, 4], [3, 3, 1], [4, 4, 0], [2, 5, 2], [1, 0, 0]])
    table = quantised_table(rng, 6, 6, levels=3)
    results = RankBasedEvaluator(ks=KS).evaluate(
        TableModel(table), evaluated, additional_filter_triples=[train], use_tqdm=False
    )
    view = results.per_category(train, keys=("mrr", "tail.mr"))
    ranks = reference_ranks(table, evaluated, [train])
    category_of = {0: "1-1", 1: "1-N", 2: "N-1", 3: "N-N", 4: "1-N", 5: UNSEEN}
    assert list(view.index) == [c for c in (*CATEGORIES, UNSEEN) if c in category_of.values()]
    for category in view.index:
        relations = [r for r, c in category_of.items() if c == category]
        rows = np.flatnonzero(np.isin(evaluated[:, 1].numpy(), relations))
        pooled = np.concatenate([ranks["head"]["realistic"][rows], ranks["tail"]["realistic"][rows]])
        assert view.loc[category, "count"] == len(rows)
        assert view.loc[category, "num_relations"] == len(relations)
        assert _close(view.loc[category, "both.mrr"], plain_metric("mrr", pooled))
        tail_mr = plain_metric("mr", ranks["tail"]["realistic"][rows])
        assert _close(view.loc[category, "tail.mr"], tail_mr)


def test_relation_categories_raise_for_a_wrong_shape():
    with raises_exactly(ValueError, "triples must be an integer array of shape (m, 3), got int64 (2, 2)"):
        relation_categories(torch.zeros(2, 2, dtype=torch.long))


def test_relation_categories_raise_for_a_non_positive_threshold():
    with raises_exactly(ValueError, "threshold must be a positive number, got 0"):
        relation_categories(_category_train(), threshold=0)


# -- relation restriction -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_restrict_relations_to_equals_evaluating_the_hand_filtered_problem(seed):
    graph, table = _problem(seed, num_relations=5)
    chosen = [1, 3]
    results = _evaluate(graph, table, restrict_relations_to=chosen)
    mask = np.isin(graph.triples[:, 1].numpy(), chosen)
    kept = graph.triples[torch.from_numpy(mask)]
    filters = [graph.triples, *graph.filter_triples]  # the filter set stays the full set
    expected = reference_metrics(table, kept, filters, KS)
    for (side, rank_type, name), value in results.data.items():
        if (side, rank_type, name) in expected:
            assert _close(value, expected[side, rank_type, name]), (side, rank_type, name)
    frame = results.ranks_df()
    assert set(frame.relation) <= set(chosen)
    np.testing.assert_array_equal(_side_frame(frame, "tail").task_index, np.flatnonzero(mask))


def test_restrict_relations_to_gives_the_ranks_of_the_full_evaluation():
    graph, table = _problem(8, num_relations=3)
    full = _evaluate(graph, table).ranks_df()
    restricted = _evaluate(graph, table, restrict_relations_to=torch.tensor([2])).ranks_df()
    expected = full[full.relation == 2].reset_index(drop=True)
    pd.testing.assert_frame_equal(restricted.reset_index(drop=True), expected)


def test_restrict_relations_combined_with_restrict_entities():
    graph, table = _problem(9, num_entities=10, num_relations=3, num_triples=50)
    whitelist = list(range(7))
    triples = graph.triples
    inside = np.isin(triples[:, 0].numpy(), whitelist) & np.isin(triples[:, 2].numpy(), whitelist)
    selected = triples[:, 1].numpy() == 0
    results = _evaluate(
        graph, table, restrict_relations_to={0}, restrict_entities_to=whitelist, drop_outside_restriction=True
    )
    kept = triples[torch.from_numpy(inside & selected)]
    expected = reference_metrics(table, kept, [triples, *graph.filter_triples], KS, restrict_entities_to=whitelist)
    for key in (("both", "realistic", "inverse_harmonic_mean_rank"), ("tail", "optimistic", "hits_at_3")):
        assert _close(results.data[key], expected[key])
    assert results.get_metric("count") == 2 * len(kept)


def test_entity_check_concerns_only_the_selected_relations():
    triples = torch.tensor([[0, 0, 1], [1, 1, 4], [2, 0, 3]])
    table = quantised_table(0, 5, 2)
    results = RankBasedEvaluator(ks=KS).evaluate(
        TableModel(table), triples, restrict_relations_to=[0], restrict_entities_to=[0, 1, 2, 3], use_tqdm=False
    )
    expected = reference_metrics(table, triples[[0, 2]], [triples], KS, restrict_entities_to=[0, 1, 2, 3])
    assert _close(results.get_metric("mrr"), expected["both", "realistic", "inverse_harmonic_mean_rank"])


def test_entity_check_still_raises_inside_the_selected_relations():
    triples = torch.tensor([[0, 0, 1], [1, 1, 4], [2, 0, 4]])
    expected = (
        "mapped_triples row 2 = [2, 0, 4] has a head or tail outside restrict_entities_to; "
        "pass drop_outside_restriction=True to skip such triples"
    )
    with raises_exactly(ValueError, expected):
        RankBasedEvaluator().evaluate(
            TableModel(quantised_table(0, 5, 2)), triples, restrict_relations_to=[0], restrict_entities_to=[0, 1, 2],
            use_tqdm=False,
        )  # fmt: skip


def _evaluate_restricted(relations):
    graph, table = _problem(0)
    return RankBasedEvaluator().evaluate(
        TableModel(table),
        graph.triples,
        additional_filter_triples=graph.filter_triples,
        restrict_relations_to=relations,
        use_tqdm=False,
    )


def test_restrict_relations_to_raises_when_no_triple_is_left():
    message = "no triple of mapped_triples is left to evaluate with restrict_relations_to=[17, 99]"
    with raises_exactly(ValueError, message):
        _evaluate_restricted([99, 17])


def test_restrict_relations_to_raises_when_empty():
    with raises_exactly(ValueError, "restrict_relations_to must not be empty"):
        _evaluate_restricted([])


def test_restrict_relations_to_raises_for_a_negative_id():
    with raises_exactly(ValueError, "restrict_relations_to holds the negative id -1"):
        _evaluate_restricted([0, -1])


def test_restrict_relations_to_raises_for_float_ids():
    with raises_exactly(TypeError, "restrict_relations_to must hold integer ids, got dtype torch.float32"):
        _evaluate_restricted(torch.tensor([1.0]))


def test_restrict_relations_to_raises_for_a_non_iterable():
    with raises_exactly(TypeError, "restrict_relations_to must be a tensor, list or set of relation ids, got int"):
        _evaluate_restricted(3)


def test_both_sides_per_relation_leave_relation_prediction_out() -> None:
    """METRICS.md: "both" pools the head and tail tasks; with relation-prediction tasks in the records, the
    per-relation "both" column and the macro average pooled them too (0.657 where 0.486)."""
    from kgeval import RankBasedMetricResults
    from kgeval.records import RankRecords

    # relation 0: head ranks 1, 3; tail ranks 2, 4; relation-prediction ranks 1, 1 -- relation 1: one of each
    columns = {"head": [0, 1, 0, 1, 0, 1, 2, 2, 2], "relation": [0, 0, 0, 0, 0, 0, 1, 1, 1],
               "tail": [1, 2, 1, 2, 1, 2, 3, 3, 3], "side": [0, 0, 1, 1, 2, 2, 0, 1, 2],
               "optimistic": [1, 3, 2, 4, 1, 1, 2, 5, 1], "pessimistic": [1, 3, 2, 4, 1, 1, 2, 5, 1],
               "num_candidates": [9] * 9, "task_index": [0, 1, 0, 1, 0, 1, 2, 2, 2]}  # fmt: skip
    results = RankBasedMetricResults.from_records(RankRecords.from_columns(columns), ks=(1,))
    frame = results.per_relation(keys=("mrr",))
    relation_0 = (1 / 1 + 1 / 3 + 1 / 2 + 1 / 4) / 4
    relation_1 = (1 / 2 + 1 / 5) / 2
    assert frame.loc[0, "both.mrr"] == pytest.approx(relation_0, rel=1e-12, abs=0)
    assert frame.loc[1, "both.mrr"] == pytest.approx(relation_1, rel=1e-12, abs=0)
    assert frame.loc[0, "relation.mrr"] == 1.0
    assert results.macro_average("mrr") == pytest.approx((relation_0 + relation_1) / 2, rel=1e-12, abs=0)
    assert results.get_metric("both.realistic.mrr") == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 4 + 1 / 2 + 1 / 5) / 6)
