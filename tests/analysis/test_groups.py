"""Relation groups (kgeval/analysis/groups.py): a group's micro metrics are those of an evaluation restricted to its
relations (``restrict_relations_to``, whose ranks are those of the full evaluation), its macro metrics the mean of
the per-relation metrics; labels, overlaps and the ``other`` group."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from kgeval import RankBasedEvaluator, RankBasedMetricResults, UndefinedMetricWarning
from kgeval.analysis.groups import OTHER, relation_groups
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult

KS = (1, 3, 10)
#: Nations' 55 relations in three groups (ids), and the rest
GROUPS = {"first": [0, 1, 2, 3, 4], "spread": [5, 17, 29, 41, 53], "one": [30]}


def raises_exactly(error: type[Exception], message: str):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _same(actual: float, expected: float, rel: float = 1e-9) -> bool:
    return (math.isnan(actual) and math.isnan(expected)) or math.isclose(actual, expected, rel_tol=rel, abs_tol=1e-12)


@pytest.fixture(scope="module")
def nations():
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=16, seed=0)
    evaluator = RankBasedEvaluator(ks=KS)

    def evaluate(**options):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            return evaluator.evaluate(model, data.test, additional_filter_triples=[data.train, data.valid],
                                      use_tqdm=False, **options)  # fmt: skip

    return data, evaluate(), evaluate


def test_restrict_relations_to_ranks_as_the_full_evaluation(nations) -> None:
    """What the comparison below relies on: a restricted evaluation's records are the full one's of those relations."""
    _data, results, evaluate = nations
    restricted = evaluate(restrict_relations_to=GROUPS["first"]).records
    full = results.records
    rows = np.isin(full.relation, GROUPS["first"])
    for column in ("head", "relation", "tail", "side", "optimistic", "pessimistic", "num_candidates", "task_index"):
        assert sorted(zip(full.task_index[rows], full.side[rows], full[column][rows], strict=True)) == sorted(
            zip(restricted.task_index, restricted.side, restricted[column], strict=True)
        )


def test_micro_metrics_equal_an_evaluation_restricted_to_the_group(nations) -> None:
    _data, results, evaluate = nations
    table = relation_groups(results, GROUPS, n_resamples=200)
    assert [group.name for group in table.groups] == list(GROUPS)
    for group in table.groups:
        restricted = evaluate(restrict_relations_to=GROUPS[group.name])
        assert set(group.micro) == set(restricted.data)
        assert all(_same(group.micro[key], value) for key, value in restricted.data.items()), group.name
        assert group.num_tasks == len(restricted.records)
        assert group.interval == restricted.confidence_interval("mrr", n_resamples=200, seed=0)


def test_macro_metrics_are_the_mean_of_the_per_relation_metrics(nations) -> None:
    _data, results, _evaluate = nations
    table = relation_groups(results, GROUPS, interval_key=None)
    records = results.records
    for group in table.groups:
        present = [r for r in GROUPS[group.name] if np.any(records.relation == r)]
        assert group.num_evaluated == len(present)
        alone = [RankBasedMetricResults.from_records(records.select(records.relation == r), ks=KS) for r in present]
        for key in group.macro:
            expected = math.fsum(one.data[key] for one in alone) / len(alone)
            assert _same(group.macro[key], expected), (group.name, key)
    per_relation = results.per_relation(("mrr",))
    present = per_relation.index.intersection(GROUPS["first"])
    assert len(present) == table.group("first").num_evaluated < len(GROUPS["first"])  # Nations' test lacks some
    assert _same(table.group("first").get("mrr", "macro"), per_relation.loc[present, "both.mrr"].mean())


def test_labels_and_ids_name_the_same_groups(nations) -> None:
    data, results, _evaluate = nations
    id_to_label = {i: label for label, i in data.relation_to_id.items()}
    by_label = {name: [id_to_label[r] for r in ids] for name, ids in GROUPS.items()}
    by_label["one"] = id_to_label[30]  # a single label is a group of one
    mixed = {**GROUPS, "first": [id_to_label[0], 1, 2, 3, 4, 4]}  # a mix, a repeat counted once
    frames = [
        relation_groups(results, groups, relation_labels=labels, interval_key=None).to_frame(("mrr", "tail.mr"))
        for groups, labels in ((GROUPS, None), (by_label, data.relation_to_id), (mixed, id_to_label))
    ]
    assert frames[0].equals(frames[1]) and frames[0].equals(frames[2])
    assert list(frames[0].columns) == ["num_relations", "num_evaluated", "num_tasks", "micro.mrr", "macro.mrr",
                                       "micro.tail.mr", "macro.tail.mr"]  # fmt: skip


def test_other_holds_the_remaining_evaluated_relations(nations) -> None:
    _data, results, evaluate = nations
    table = relation_groups(results, GROUPS, other=True, interval_key=None)
    assert table.groups[-1].name == OTHER
    grouped = {r for ids in GROUPS.values() for r in ids}
    rest = [int(r) for r in np.unique(results.records.relation) if int(r) not in grouped]
    assert table.group(OTHER).relations == tuple(rest)
    restricted = evaluate(restrict_relations_to=rest)
    assert _same(table.group(OTHER).get("mrr"), restricted["mrr"])
    assert sum(group.num_tasks for group in table.groups) == len(results.records)


def test_overlapping_groups_are_refused_unless_allowed(nations) -> None:
    _data, results, evaluate = nations
    overlapping = {"a": [0, 1, 2], "b": [2, 3]}
    with raises_exactly(ValueError, "relation 2 is in the groups 'a' and 'b': make the groups disjoint, or pass "
                        "allow_overlap=True to count its tasks in each"):  # fmt: skip
        relation_groups(results, overlapping)
    table = relation_groups(results, overlapping, allow_overlap=True, interval_key=None)
    assert _same(table.group("b").get("hits@10"), evaluate(restrict_relations_to=[2, 3])["hits@10"])


def test_a_group_of_no_evaluated_relation_has_no_task(nations) -> None:
    _data, results, _evaluate = nations
    table = relation_groups(results, {"absent": [500]})
    group = table.group("absent")
    assert (group.relations, group.num_evaluated, group.num_tasks, group.interval) == ((500,), 0, 0, None)
    assert math.isnan(group.get("mrr")) and math.isnan(group.get("mrr", "macro"))
    assert math.isnan(table.to_frame().loc["absent", "ci_low"])


@pytest.mark.parametrize(
    ("groups", "options", "message"),
    [
        ({}, {}, "groups must be a non-empty mapping of group name to relations, got {}"),
        ({"a": []}, {}, "group 'a' holds no relation"),
        ({"": [1]}, {}, "group names must be non-empty strings, got ''"),
        ({3: [1]}, {}, "group names must be non-empty strings, got 3"),
        ({"a": [-1]}, {}, "group 'a': relations are ids >= 0 or labels, got -1"),
        ({"a": [1.5]}, {}, "group 'a': relations are ids >= 0 or labels, got 1.5"),
        ({"a": ["blockade"]}, {}, "group 'a' names the relation 'blockade' by label: pass relation_labels"),
        ({"a": ["boycotembargo"]}, {"relation_labels": "labels"},
         "group 'a': no relation is labelled 'boycotembargo'; close labels: boycottembargo"),
        ({"a": ["xyz"]}, {"relation_labels": "labels"}, "group 'a': no relation is labelled 'xyz'"),
        ({"other": [1]}, {"other": True},
         "a group is named 'other', the name other=True gives the remaining relations"),
    ],
)  # fmt: skip
def test_refusals(nations, groups, options, message) -> None:
    data, results, _evaluate = nations
    if options.get("relation_labels") == "labels":
        options = {**options, "relation_labels": data.relation_to_id}
    with raises_exactly(ValueError, message):
        relation_groups(results, groups, **options)


def test_lookups(nations) -> None:
    _data, results, _evaluate = nations
    table = relation_groups(results, GROUPS, interval_key=None)
    with raises_exactly(KeyError, "\"no group 'x'; the groups are ['first', 'spread', 'one']\""):
        table.group("x")
    with raises_exactly(ValueError, "average must be 'micro' or 'macro', got 'weighted'"):
        table.group("one").get("mrr", "weighted")
    with raises_exactly(KeyError, "\"both.realistic.hits_at_5 was not reported for group 'one' (key 'hits@5')\""):
        table.group("one").get("hits@5")


def test_the_results_methods_are_the_functions(nations) -> None:
    """results.relation_groups / results.frequency_buckets hand the results to the analysis functions unchanged."""
    from kgeval.analysis.buckets import frequency_buckets

    data, results, _ = nations
    groups = {"first": [0, 1, 2], "second": [3, 4]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        method, function = results.relation_groups(groups), relation_groups(results, groups)
        assert method.to_frame().equals(function.to_frame())
        by_method = results.frequency_buckets(data.train, by="relation")
        by_function = frequency_buckets(results, data.train, by="relation")
    assert by_method.to_frame(("mrr", "hits@10")).equals(by_function.to_frame(("mrr", "hits@10")))
