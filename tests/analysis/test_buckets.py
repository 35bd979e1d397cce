"""Frequency buckets (kgeval/analysis/buckets.py): LibKGE's rule against a plain loop written from its description,
kgeval's rule (equal counts never split, an unseen bucket), every metric of a bucket against the results of its tasks.

The LibKGE reference below follows LibKGE's ``index_frequency_percentiles`` and ``hist_per_frequency_percentile``
(uma-pi1/kge, kge/indexing.py and kge/job/eval_entity_ranking.py) as documented in docs/results.md: subject /
relation / object counts in train, ``sorted(enumerate(counts), key=count)``, slices ``int(begin * n):int(end * n)``;
head tasks by their subject, tail tasks by their object, both by their relation. Metrics by METRICS.md's formulas.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults, UndefinedMetricWarning
from kgeval.analysis.buckets import frequency_buckets, reference_counts
from kgeval.analysis.stats import confidence_interval
from kgeval.datasets import load_dataset, load_shipped_dataset, shared_data_dir
from kgeval.models import DistMult
from kgeval.records import RankRecords
from tests.helpers.rank_records import random_popularity, random_records
from tests.helpers.reference import plain_metric

KS = (1, 3, 10)
#: LibKGE's buckets, written out here independently of kgeval.analysis.buckets.LIBKGE_BUCKETS
LIBKGE_CUTS = (("25%", 0.0, 0.25), ("50%", 0.25, 0.5), ("75%", 0.5, 0.75), ("top", 0.75, 1.0))


def raises_exactly(error: type[Exception], message: str):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _same(actual: float, expected: float, rel: float = 1e-9) -> bool:
    return (math.isnan(actual) and math.isnan(expected)) or math.isclose(actual, expected, rel_tol=rel, abs_tol=1e-12)


def _evaluate(data, dim: int = 16):
    model = DistMult(data.num_entities, data.num_relations, dim=dim, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return RankBasedEvaluator(ks=KS).evaluate(
            model, data.test, additional_filter_triples=[data.train, data.valid], use_tqdm=False
        )


@pytest.fixture(scope="module")
def nations():
    data = load_shipped_dataset("nations")
    return data, _evaluate(data)


@pytest.fixture(scope="module")
def fb15k237():
    shared = shared_data_dir()
    if shared is None or not (shared / "FB15k-237").is_dir():
        pytest.skip("FB15k-237 is not in the shared data folder")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 29 test entities never occur in train: the unseen bucket's tasks
        data = load_dataset("FB15k-237", kind="triples")
    return data, _evaluate(data, dim=32)


# -- LibKGE's rule, as a plain loop -------------------------------------------------------------------------------
def libkge_slices(counts: list[float]) -> dict[str, set[int]]:
    order = [i for i, _count in sorted(enumerate(counts), key=lambda x: x[1])]
    n = len(counts)
    return {name: set(order[int(begin * n) : int(end * n)]) for name, begin, end in LIBKGE_CUTS}


def libkge_reference(records: RankRecords, train, num_entities: int, num_relations: int, rank_type: str):
    """{(role, bucket): ranks} as LibKGE's histograms collect them."""
    subject, obj, relation = [0.0] * num_entities, [0.0] * num_entities, [0.0] * num_relations
    for s, p, o in train.tolist():
        subject[s] += 1
        relation[p] += 1
        obj[o] += 1
    slices = {"subject": libkge_slices(subject), "object": libkge_slices(obj), "relation": libkge_slices(relation)}
    ranks = records.ranks(rank_type).tolist()
    collected: dict[tuple[str, str], list[float]] = {(role, cut[0]): [] for role in slices for cut in LIBKGE_CUTS}
    for i, rank in enumerate(ranks):
        head_task = records.side[i] == 0
        answer_role, answer = ("subject", records.head[i]) if head_task else ("object", records.tail[i])
        for name, _begin, _end in LIBKGE_CUTS:
            if answer in slices[answer_role][name]:
                collected[answer_role, name].append(rank)
            if records.relation[i] in slices["relation"][name]:
                collected["relation", name].append(rank)
    return collected


def check_libkge(data, results) -> None:
    rank_type = "realistic"
    expected = libkge_reference(results.records, data.train, data.num_entities, data.num_relations, rank_type)
    for by, roles in (("answer", {"subject": "head", "object": "tail"}), ("relation", {"relation": "both"})):
        table = frequency_buckets(results, data.train, by=by, scheme="libkge", num_entities=data.num_entities,
                                  num_relations=data.num_relations, interval_key=None)  # fmt: skip
        assert [bucket.label for bucket in table.buckets] == [name for name, _b, _e in LIBKGE_CUTS]
        named = table.libkge_metrics("filtered", rank_type)
        for bucket in table.buckets:
            assert bucket.num_tasks == sum(len(expected[role, bucket.label]) for role in roles)
            for role, side in roles.items():
                ranks = expected[role, bucket.label]
                for metric, key in [("mean_rank", "mr"), ("mean_reciprocal_rank", "mrr")] + [
                    (f"hits_at_{k}", f"hits@{k}") for k in KS
                ]:
                    want = plain_metric(key, ranks)
                    assert _same(bucket.get(f"{side}.{rank_type}.{key}"), want), (by, bucket.label, side, key)
                    assert _same(named[f"{metric}_filtered_{role}_{bucket.label}"], want)


def test_libkge_buckets_equal_a_loop_over_libkges_rule_on_nations(nations) -> None:
    check_libkge(*nations)


@pytest.mark.slow
def test_libkge_buckets_equal_a_loop_over_libkges_rule_on_fb15k237(fb15k237) -> None:
    check_libkge(*fb15k237)


def test_libkge_splits_equal_counts_by_id_and_kgeval_keeps_them_together() -> None:
    # 8 entities, each the head of 2 and the tail of 2 triples: one count for all, which LibKGE's rule cuts into 4
    train = np.array([(e, 0, (e + 1) % 8) for e in range(8)] * 2)
    tails = np.arange(8)
    columns = {"head": (tails + 7) % 8, "relation": np.zeros(8, dtype=np.int64), "tail": tails,
               "side": np.ones(8, dtype=np.int8), "optimistic": tails + 1, "pessimistic": tails + 1,
               "num_candidates": np.full(8, 8), "task_index": np.arange(8)}  # fmt: skip
    records = RankRecords.from_columns(columns)
    libkge = frequency_buckets(records, train, scheme="libkge", interval_key=None)
    assert [(b.label, b.low, b.high, b.num_tasks) for b in libkge.buckets] == [
        ("25%", 2, 2, 2), ("50%", 2, 2, 2), ("75%", 2, 2, 2), ("top", 2, 2, 2)]  # fmt: skip
    assert libkge.bucket("25%").get("tail.mr") == 1.5  # ids 0 and 1 (ranks 1, 2): the first two of the id order
    kgeval = frequency_buckets(records, train, interval_key=None)
    assert [(b.label, b.low, b.high, b.num_tasks) for b in kgeval.buckets] == [("unseen", 0, 0, 0), ("1-4", 1, 4, 8)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("by", ["answer", "query_entity", "relation"])
def test_kgeval_buckets_are_count_ranges_cut_at_lower_quantiles(seed: int, by: str) -> None:
    records = RankRecords.from_columns(random_records(seed, n=80))
    reference = random_popularity(seed, random_records(seed, n=80))[: 60 + 10 * seed]  # some items unseen
    num_buckets = 2 + seed % 4
    table = frequency_buckets(records, reference, by=by, num_buckets=num_buckets, interval_key=None)
    entity = [0] * 100
    relation = [0] * 100
    for h, r, t in reference.tolist():
        entity[h] += 1
        entity[t] += 1
        relation[r] += 1
    items = {
        "answer": np.where(records.side == 0, records.head, records.tail),
        "query_entity": np.where(records.side == 0, records.tail, records.head),
        "relation": records.relation,
    }[by]
    counts = [(relation if by == "relation" else entity)[i] for i in items.tolist()]
    seen = sorted(c for c in counts if c > 0)
    cuts = {min(c for c in seen if sum(x <= c for x in seen) >= j * len(seen) / num_buckets)
            for j in range(1, num_buckets)}  # fmt: skip
    assert [b.high for b in table.buckets[1:]] == sorted(cuts | {max(seen)})
    assert table.buckets[0].label == "unseen" and table.buckets[0].num_tasks == counts.count(0)
    lows = [b.low for b in table.buckets]
    assert lows == [0, 1, *(b.high + 1 for b in table.buckets[1:-1])]  # contiguous ranges: no count in two
    assert sum(b.num_tasks for b in table.buckets) == len(records)
    for bucket in table.buckets:
        assert bucket.num_tasks == sum(bucket.low <= c <= bucket.high for c in counts)


def test_every_metric_of_a_bucket_is_that_of_its_tasks(nations) -> None:
    data, results = nations
    table = frequency_buckets(results, data.train, by="query_entity", n_resamples=200, seed=3)
    counts = reference_counts(data.train)["entity"]
    records = results.records
    query = np.where(records.side == 0, records.tail, records.head)
    for bucket in table.buckets[1:]:
        rows = (counts[query] >= bucket.low) & (counts[query] <= bucket.high)
        alone = RankBasedMetricResults.from_records(records.select(rows), ks=KS)
        assert set(bucket.metrics) == set(alone.data)
        assert all(_same(bucket.metrics[key], value, 1e-12) for key, value in alone.data.items())
        interval = confidence_interval(alone, "mrr", n_resamples=200, seed=3)
        assert bucket.interval == interval


def test_unseen_bucket_holds_the_tasks_of_entities_absent_from_the_reference(nations) -> None:
    data, results = nations
    dropped = {3, 7}  # every train triple of entities 3 and 7 left out: they become unseen
    train = data.train.numpy()
    reference = train[~np.isin(train[:, 0], list(dropped)) & ~np.isin(train[:, 2], list(dropped))]
    table = frequency_buckets(results, reference, by="answer", interval_key=None)
    records = results.records
    answers = np.where(records.side == 0, records.head, records.tail)
    expected = [i for i, answer in enumerate(answers.tolist()) if answer in dropped]
    unseen = table.bucket("unseen")
    assert unseen.num_tasks == len(expected) > 0
    alone = RankBasedMetricResults.from_records(records.select(np.array(expected)), ks=KS)
    assert _same(unseen.get("mrr"), alone["mrr"], 1e-12)
    assert _same(unseen.get("tail.hits@10"), alone["tail.hits@10"], 1e-12)


@pytest.mark.slow
def test_unseen_bucket_on_fb15k237(fb15k237) -> None:
    data, results = fb15k237
    seen = set(data.train[:, 0].tolist()) | set(data.train[:, 2].tolist())
    records = results.records
    answers = np.where(records.side == 0, records.head, records.tail).tolist()
    table = frequency_buckets(results, data.train, interval_key=None)
    assert table.bucket("unseen").num_tasks == sum(answer not in seen for answer in answers) > 0


def test_fixed_edges_list_every_bucket(nations) -> None:
    data, results = nations
    table = frequency_buckets(results, data.train, by="relation", edges=(10, 50, 1000), interval_key=None)
    expected = [("unseen", 0, 0), ("1-9", 1, 9), ("10-49", 10, 49), ("50-999", 50, 999), ("1000+", 1000, None)]
    assert [(b.label, b.low, b.high) for b in table.buckets] == expected
    assert table.bucket("1000+").num_tasks == 0 and math.isnan(table.bucket("1000+").get("mrr"))
    frame = table.to_frame(("mrr", "tail.hits@10"))
    assert list(frame.columns) == ["low", "high", "num_tasks", "mrr", "tail.hits@10"]
    assert frame["num_tasks"].sum() == len(results.records)


def test_results_records_and_rank_tables_give_the_same_table(nations) -> None:
    data, results = nations
    frames = [
        frequency_buckets(source, data.train, ks=KS, n_resamples=100).to_frame(("mrr", "head.pessimistic.mr"))
        for source in (results, results.records, results.ranks_df())
    ]
    pd.testing.assert_frame_equal(frames[0], frames[1])
    pd.testing.assert_frame_equal(frames[0], frames[2])


def test_bucket_lookups() -> None:
    records = RankRecords.from_columns(random_records(0))
    table = frequency_buckets(records, random_popularity(0, random_records(0)), interval_key=None)
    assert len(table) == len(table.buckets) and table.interval_key is None
    labels = [b.label for b in table.buckets]
    with raises_exactly(KeyError, f"\"no bucket 'x'; the buckets are {labels}\""):
        table.bucket("x")
    with raises_exactly(KeyError, "\"both.realistic.hits_at_7 was not reported for this bucket (key 'hits@7')\""):
        table.buckets[1].get("hits@7")
    with raises_exactly(ValueError, "libkge_metrics needs a table of scheme='libkge', got scheme='kgeval'"):
        table.libkge_metrics()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"by": "head"}, "by must be one of ('answer', 'query_entity', 'relation'), got 'head'"),
        ({"scheme": "pykeen"}, "scheme must be one of ('kgeval', 'libkge'), got 'pykeen'"),
        ({"scheme": "libkge", "by": "query_entity"},
         "LibKGE buckets tasks by their answer or relation only; by='query_entity' is kgeval's"),
        ({"scheme": "libkge", "edges": (3,)},
         "edges and num_buckets choose kgeval's buckets; scheme='libkge' cuts at 25 / 50 / 75 %"),
        ({"scheme": "libkge", "num_entities": 5},
         "num_entities=5, but the records or the reference triples hold the id 11"),
        ({"edges": (1, 5)}, "edges must be strictly increasing integers >= 2 (a bucket starts at 1), got [1, 5]"),
        ({"edges": (5, 5)}, "edges must be strictly increasing integers >= 2 (a bucket starts at 1), got [5, 5]"),
        ({"edges": ()}, "edges must be a non-empty sequence of integers, got ()"),
        ({"edges": (2.5,)}, "edges must be a non-empty sequence of integers, got (2.5,)"),
        ({"num_buckets": 0}, "num_buckets must be a positive integer, got 0"),
    ],
)  # fmt: skip
def test_refusals(options: dict, message: str) -> None:
    records = RankRecords.from_columns(random_records(0))
    with raises_exactly(ValueError, message):
        frequency_buckets(records, random_popularity(0, random_records(0)), **options)


def test_records_without_what_buckets_need_are_refused() -> None:
    columns = random_records(0)
    reference = random_popularity(0, columns)
    without = RankRecords.from_columns({k: v for k, v in columns.items() if k != "num_candidates"})
    with raises_exactly(ValueError, "frequency buckets need the records' num_candidates column"):
        frequency_buckets(without, reference)
    with raises_exactly(ValueError, "reference_triples must be integer arrays of shape (m, 3), got int64 (4, 2)"):
        frequency_buckets(RankRecords.from_columns(columns), np.zeros((4, 2), dtype=np.int64))
    relation_only = RankRecords.from_columns({**columns, "side": np.full(len(columns["side"]), 2, dtype=np.int8)})
    with raises_exactly(ValueError, "frequency buckets need head or tail tasks; the records hold none"):
        frequency_buckets(relation_only, reference)


def test_ilpc2022_small_test_entities_are_all_unseen_in_its_training_graph() -> None:
    """ILPC2022-small's test entities are new (no entity shared with the training graph): counted against the
    training triples -- translated into the inference graph's ids by label -- every answer lands in the unseen
    bucket, while its relations, shared, are seen."""
    from kgeval.datasets import load_dataset, shared_data_dir

    if shared_data_dir() is None or not (shared_data_dir() / "ILPC2022-small").exists():
        pytest.skip("ILPC2022-small is not in ../shared/data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset("ILPC2022-small")
    label_of = {i: label for label, i in data.training_entity_to_id.items()}
    to_inference = data.inference_entity_to_id
    translated = [(to_inference[label_of[h]], r, to_inference[label_of[t]]) for h, r, t in data.train.tolist()
                  if label_of[h] in to_inference and label_of[t] in to_inference]  # fmt: skip
    reference = torch.tensor(translated, dtype=torch.int64).reshape(-1, 3)
    test = data.test.numpy()
    n = len(test)
    ranks = np.random.default_rng(0).integers(1, 50, 2 * n)
    records = RankRecords.from_columns({
        "head": np.concatenate([test[:, 0], test[:, 0]]), "relation": np.concatenate([test[:, 1], test[:, 1]]),
        "tail": np.concatenate([test[:, 2], test[:, 2]]), "side": np.repeat([0, 1], n).astype(np.int8),
        "optimistic": ranks, "pessimistic": ranks, "num_candidates": np.full(2 * n, 100),
    })  # fmt: skip
    sizes = {"num_entities": len(to_inference), "num_relations": len(data.relation_to_id)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answers = frequency_buckets(records, reference, **sizes)
        relations = frequency_buckets(records, data.train, by="relation", **sizes)
    assert data.shared_entities == 0 and reference.shape[0] == 0
    assert answers.bucket("unseen").num_tasks == 2 * n
    assert relations.bucket("unseen").num_tasks < 2 * n
