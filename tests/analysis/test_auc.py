"""Each task's ROC-AUC from its rank record (kgeval.analysis.auc) equals scikit-learn's ROC-AUC of the task's own
filtered candidates -- the answer positive, every other candidate the filter leaves negative -- computed here from
the score table, on heavily tied scores, at several batch and slice sizes, filtered and raw."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from kgeval import RankBasedEvaluator
from kgeval.analysis.auc import mean_query_auc, query_auc
from kgeval.records import RankRecords
from tests.helpers.graphs import TableModel, quantised_table, random_graph

E, R = 25, 3


def sklearn_auc(table: torch.Tensor, triples: torch.Tensor, known: torch.Tensor, side: int, filtered: bool) -> list:
    """Per task of ``side`` (0: head, 1: tail), scikit-learn's ROC-AUC of the answer among its candidates."""
    known_set = {tuple(row) for row in known.tolist()}
    scores = table.double().numpy()
    aucs = []
    for h, r, t in triples.tolist():
        if side == 1:
            row, answer = scores[h, r, :], t
            kept = [e for e in range(E) if e == answer or not filtered or (h, r, e) not in known_set]
        else:
            row, answer = scores[:, r, t], h
            kept = [e for e in range(E) if e == answer or not filtered or (e, r, t) not in known_set]
        labels = np.array([e == answer for e in kept])
        aucs.append(roc_auc_score(labels, row[kept]) if len(kept) > 1 else float("nan"))
    return aucs


@pytest.mark.parametrize("filtered", [True, False])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (3, 7), (1, 4)])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_tasks_auc_is_scikit_learns(seed: int, filtered: bool, batch_size: int | None, slice_size: int | None):
    graph = random_graph(seed, E, R, 30, 60)
    table = quantised_table(seed, E, R, levels=3)  # three score levels: ties everywhere
    evaluator = RankBasedEvaluator(filtered=filtered, batch_size=batch_size, slice_size=slice_size)
    results = evaluator.evaluate(TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples,
                                 use_tqdm=False)  # fmt: skip
    records = results.records
    assert records is not None
    filters = graph.filter_triples if isinstance(graph.filter_triples, list) else [graph.filter_triples]
    known = torch.cat([graph.triples, *filters])
    auc = query_auc(records)
    for side in (0, 1):
        order = np.argsort(records.task_index[records.side == side], kind="stable")
        got = auc[records.side == side][order]
        expected = sklearn_auc(table, graph.triples, known, side, filtered)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    means = mean_query_auc(records)
    assert means["both"] == pytest.approx(float(np.nanmean(auc)), abs=1e-12)


def test_ties_count_half_and_the_other_rank_types_count_them_won_or_lost() -> None:
    """One task: 9 candidates, 2 negatives above the answer, 3 tied with it, 3 below."""
    records = RankRecords.from_columns({"head": [0], "relation": [0], "tail": [1], "side": [1], "optimistic": [3],
                                        "pessimistic": [6], "num_candidates": [9]})  # fmt: skip
    assert query_auc(records)[0] == pytest.approx((3 + 3 / 2) / 8)
    assert query_auc(records, "optimistic")[0] == pytest.approx((3 + 3) / 8)
    assert query_auc(records, "pessimistic")[0] == pytest.approx(3 / 8)


def test_a_task_without_negatives_has_no_auc_and_records_without_counts_are_refused() -> None:
    one = RankRecords.from_columns({"head": [0, 0], "relation": [0, 0], "tail": [1, 2], "side": [1, 1],
                                    "optimistic": [1, 1], "pessimistic": [1, 1], "num_candidates": [1, 2]})  # fmt: skip
    auc = query_auc(one)
    assert np.isnan(auc[0]) and auc[1] == 1.0
    assert mean_query_auc(one) == {"tail": 1.0, "both": 1.0}
    bare = RankRecords.from_columns({"head": [0], "relation": [0], "tail": [1], "side": [1], "optimistic": [1],
                                     "pessimistic": [1]})  # fmt: skip
    with pytest.raises(ValueError, match="num_candidates"):
        query_auc(bare)
    with pytest.raises(ValueError, match="rank_type"):
        query_auc(one, "mean")  # type: ignore[arg-type]
