"""The engine's other doors size a model scored through its own methods from its measured memory too
(kgeval._engine.sizes.sizes_for): the tile door (the all-pairs classification protocol, per-example rows) keeps each
call of a model with a known workspace per (query, candidate) within the budget -- measured inside the model -- and
gives what one query at a time gives."""

from __future__ import annotations

import numpy as np

from kgeval.variants import classify_all_pairs, rank_examples
from tests.engine.test_measured_own_methods import KiB, PairWorkspace, _setting

BUDGET = 512 * KiB


def _calls_within_budget(model: PairWorkspace) -> None:
    assert model.calls, "the model was called"
    assert max(rows for rows, _, _ in model.calls) < 20  # lowered from the usual batch of every query
    assert max(peak for _, _, peak in model.calls) <= BUDGET * 3 // 4  # each call, measured inside it


def test_the_all_pairs_protocol_keeps_each_call_within_the_budget() -> None:
    graph, table = _setting(1)
    model = PairWorkspace(table, width=256)
    results = classify_all_pairs(model, graph.triples, known=graph.filter_triples, threshold=0.0,
                                 memory_budget=BUDGET, check_fast_path=False)  # fmt: skip
    _calls_within_budget(model)
    one = classify_all_pairs(PairWorkspace(table, width=4), graph.triples, known=graph.filter_triples,
                             threshold=0.0, batch_size=1)  # fmt: skip
    assert results.to_flat_dict() == one.to_flat_dict()  # every side's AUC, AP and confusion counts


def test_per_example_rows_keep_each_call_within_the_budget() -> None:
    graph, table = _setting(2)
    model = PairWorkspace(table, width=256)
    rows = rank_examples(model, graph.triples, filter_triples=graph.filter_triples, k=3, memory_budget=BUDGET,
                         check_fast_path=False, use_tqdm=False)  # fmt: skip
    _calls_within_budget(model)
    one = rank_examples(PairWorkspace(table, width=4), graph.triples, filter_triples=graph.filter_triples, k=3,
                        batch_size=1, use_tqdm=False)  # fmt: skip
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(rows[column].to_numpy(), one[column].to_numpy(), err_msg=column)
    assert [list(ids) for ids in rows["predicted"]] == [list(ids) for ids in one["predicted"]]
