"""Ranked lists a model hands in (kgeval.variants.ranked_lists): against the full evaluation's records (lists taken
from predict_top_k), hand-made lists with ties, filtering and padding, and OGB-LSC's WikiKG90Mv2 evaluator re-written
here from its source (ogb/lsc/wikikg90mv2.py, WikiKG90Mv2Evaluator._calculate_mrr)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, predict_top_k
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.variants.ranked_lists import evaluate_ranked_lists, wikikg90mv2_mrr


def unique_query_test(data) -> torch.Tensor:
    """The test triples whose (h, r) no other test triple shares: their filtered rank is the list's."""
    _, inverse, counts = torch.unique(data.test[:, :2], dim=0, return_inverse=True, return_counts=True)
    return data.test[counts[inverse] == 1]


@pytest.fixture(scope="module")
def setting():
    data = load_shipped_dataset("umls")
    model = DistMult(data.num_entities, data.num_relations, dim=16, seed=0)
    triples = unique_query_test(data)
    records = RankBasedEvaluator().evaluate(model, triples, additional_filter_triples=[data.train, data.valid],
                                            targets=("tail",)).records  # fmt: skip
    ids, scores = predict_top_k(model, triples[:, :2], k=10, target="tail", filter_triples=[data.train, data.valid])
    return data, triples, records, ids, scores


def test_the_lists_metrics_equal_the_full_evaluation_truncated_at_k(setting):
    data, triples, records, ids, scores = setting
    ranks = np.asarray(records["pessimistic"], dtype=np.float64)
    assert np.array_equal(records["optimistic"], records["pessimistic"])  # continuous scores: no tie
    results = evaluate_ranked_lists(ids, triples, scores=scores, filter_triples=[data.train, data.valid],
                                    num_entities=data.num_entities)  # fmt: skip
    assert results.mrr_at_k() == pytest.approx(np.mean(np.where(ranks <= 10, 1 / ranks, 0)), abs=1e-12)
    for k in (1, 3, 10):
        assert results.hits_at_k(k) == pytest.approx(np.mean(ranks <= k), abs=1e-12)
    assert results.share_outside == pytest.approx(np.mean(ranks > 10))
    low, high = results.full_mrr_interval()
    assert low <= float(np.mean(1 / ranks)) <= high and low < high
    # the lists without scores: the order is the ranking
    assert evaluate_ranked_lists(ids, triples).mrr_at_k() == pytest.approx(results.mrr_at_k(), abs=1e-12)


def test_ties_filtering_and_padding_by_hand():
    triples = torch.tensor([[0, 0, 5], [1, 0, 6], [2, 0, 7], [3, 0, 8]])
    lists = torch.tensor([[9, 5, 4, -1], [3, 4, 6, 2], [1, 2, 3, 4], [8, 2, 1, 0]])
    scores = torch.tensor([[3.0, 2.0, 2.0, 0.0], [5.0, 4.0, 4.0, 4.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 1.0]])
    known = torch.tensor([[1, 0, 3], [0, 0, 9]])  # (1, 0, 3) removes row 1's first entry; (0, 0, 9) row 0's
    results = evaluate_ranked_lists(lists, triples, scores=scores, filter_triples=known, num_entities=10)
    ranks = results.ranks
    # row 0: 9 removed -> [5, 4]: 5 ties 4 at 2.0 -> 1 / 2; row 1: 3 removed -> [4, 6, 2] all 4.0 -> 1 / 3
    # row 2: 7 absent; row 3: 8 ties 2 and 1 at 2.0 -> 1 / 3
    assert ranks.optimistic.tolist() == [1, 1, 0, 1] and ranks.pessimistic.tolist() == [2, 3, 0, 3]
    assert ranks.remaining.tolist() == [2, 3, 4, 4]
    assert ranks.num_candidates.tolist() == [9, 9, 10, 10]  # one other known answer for rows 0 and 1
    assert results.mrr_at_k("optimistic") == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert results.mrr_at_k("pessimistic") == pytest.approx((1 / 2 + 1 / 3 + 0 + 1 / 3) / 4)
    assert results.mrr_at_k("realistic") == pytest.approx((1 / 1.5 + 1 / 2 + 0 + 1 / 2) / 4)
    assert results.hits_at_k(1, "optimistic") == 0.75 and results.hits_at_k(1, "pessimistic") == 0.0
    low, high = results.full_mrr_interval("optimistic")
    assert (low, high) == pytest.approx(((3 + 1 / 10) / 4, (3 + 1 / 5) / 4))  # row 2: rank in [5, 10]
    assert results.to_dict()["share_outside"] == 0.25


def test_bad_lists_are_refused():
    triples = torch.tensor([[0, 0, 1], [1, 0, 2]])
    with pytest.raises(ValueError, match="row 1 repeats"):
        evaluate_ranked_lists(torch.tensor([[1, 2], [2, 2]]), triples)
    with pytest.raises(ValueError, match="after its padding"):
        evaluate_ranked_lists(torch.tensor([[1, -1, 3], [2, 3, 4]]), triples)
    with pytest.raises(ValueError, match="shape"):
        evaluate_ranked_lists(torch.tensor([[1, 2]]), triples)
    with pytest.raises(ValueError, match="NaN"):
        evaluate_ranked_lists(torch.tensor([[1, 2], [2, 3]]), triples, scores=[[1.0, float("nan")], [0.0, 0.0]])
    with pytest.raises(ValueError, match="out of range"):
        evaluate_ranked_lists(torch.tensor([[1, 2], [2, 30]]), triples, num_entities=10)
    with pytest.raises(TypeError, match="integer"):
        evaluate_ranked_lists(np.array([[1.0, 2.0], [2.0, 3.0]]), triples)
    with pytest.raises(ValueError, match="k must be"):
        evaluate_ranked_lists(torch.tensor([[1, 2], [2, 3]]), triples).hits_at_k(3)


def ogb_reference(t_pred_top10: np.ndarray, t: np.ndarray) -> float:
    """OGB-LSC's WikiKG90Mv2Evaluator.eval, re-written from its description: duplicates among the ids >= 0 of any
    row set the MRR to 0; else rr = 1 / (column + 1) where the answer is listed, 0 elsewhere, averaged in float32."""
    for row in t_pred_top10:
        listed = row[row >= 0]
        if len(set(listed.tolist())) != len(listed):
            return 0.0
    rr = np.zeros(len(t), dtype=np.float32)
    for i, (row, answer) in enumerate(zip(t_pred_top10, t, strict=True)):
        hits = np.flatnonzero(row == answer)
        if hits.size:
            rr[i] = np.float32(1.0) / (np.float32(hits[0]) + np.float32(1.0))
    return float(torch.from_numpy(rr).mean().item())


def test_wikikg90mv2_mrr_is_ogbs():
    rng = np.random.default_rng(0)
    for trial in range(20):
        n = int(rng.integers(1, 200))
        lists = np.stack([rng.permutation(50)[:10] for _ in range(n)])
        answers = rng.integers(0, 50, n)
        if trial % 5 == 4:
            lists[0, 1] = lists[0, 0]  # a repeated prediction: OGB sets the MRR to 0
        assert wikikg90mv2_mrr(lists, answers) == ogb_reference(lists, answers)
    with pytest.raises(ValueError, match=r"\(n, 10\)"):
        wikikg90mv2_mrr(np.zeros((3, 9), dtype=np.int64), np.zeros(3, dtype=np.int64))
