"""Two filter levels from one pass (``also_filter_triples``): every task's ranks under the narrower filter and under
the wider one equal two separate evaluations and the brute-force reference (METRICS.md "Ranking tasks"), with heavy
ties, across batch / slice sizes, pair layouts, kernels and candidate restrictions; the model is scored once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults, TypeConstraints
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

SIZES = [(1, 1), (3, 4), (5, None), (None, 7), (None, None)]


def _setting(seed: int, num_entities: int = 14, num_relations: int = 3):
    """A tie-heavy score table, evaluation triples, a narrower filter [train] and the wider level's [test]: test
    holds some evaluation triples' other answers, so the two levels' ranks differ."""
    graph = random_graph(seed, num_entities, num_relations, num_triples=25, num_filter=60)
    table = quantised_table(seed, num_entities, num_relations, levels=3)
    train, extra = graph.filter_triples
    rng = np.random.default_rng(seed + 100)
    other_answers = graph.triples.clone()[rng.permutation(graph.triples.shape[0])[:12]]
    other_answers[:6, 2] = torch.from_numpy(rng.integers(0, num_entities, 6))  # another tail of the same (h, r)
    other_answers[6:, 0] = torch.from_numpy(rng.integers(0, num_entities, 6))  # another head of the same (r, t)
    test = torch.cat([extra, other_answers])
    return graph, table, train, test


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
def test_each_level_equals_the_reference_and_a_separate_evaluation(seed, batch_size, slice_size):
    graph, table, train, test = _setting(seed)
    evaluator = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size)
    model = TableModel(table)
    both = evaluator.evaluate(model, graph.triples, additional_filter_triples=[train], also_filter_triples=[test],
                              use_tqdm=False)  # fmt: skip
    narrow = reference_ranks(table, graph.triples, [train])
    wide = reference_ranks(table, graph.triples, [train, test])
    assert both.also_filtered is not None
    assert_same_ranks(both.records, narrow)
    assert_same_ranks(both.also_filtered.records, wide)
    differ = sum(int((narrow[s]["num_candidates"] != wide[s]["num_candidates"]).sum()) for s in ("head", "tail"))
    assert differ > 0  # the setting exercises the second level
    assert both.data == evaluator.evaluate(model, graph.triples, additional_filter_triples=[train],
                                           use_tqdm=False).data  # fmt: skip
    separate = evaluator.evaluate(model, graph.triples, additional_filter_triples=[train, test], use_tqdm=False)
    assert both.also_filtered == separate


@pytest.mark.parametrize("layout", ["sorted", "masked"])
@pytest.mark.parametrize("kernel", ["eager", "numba"])
def test_layouts_and_kernels(layout, kernel):
    pytest.importorskip("numba") if kernel == "numba" else None
    graph, table, train, test = _setting(3, num_entities=20)
    evaluator = RankBasedEvaluator(kernel=kernel, batch_size=4, slice_size=6)
    evaluator.pair_layout = layout
    results = evaluator.evaluate(TableModel(table), graph.triples, additional_filter_triples=[train],
                                 also_filter_triples=test, use_tqdm=False)  # fmt: skip
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, [train]))
    assert_same_ranks(results.also_filtered.records, reference_ranks(table, graph.triples, [train, test]))


def test_raw_too_and_restricted_candidates():
    graph, table, train, test = _setting(4, num_entities=16)
    whitelist = list(range(0, 16, 2)) + [int(e) for e in graph.triples[:, [0, 2]].unique()]
    evaluator = RankBasedEvaluator(filtered="both", batch_size=3, slice_size=5)
    results = evaluator.evaluate(TableModel(table), graph.triples, additional_filter_triples=[train],
                                 also_filter_triples=[test], restrict_entities_to=whitelist,
                                 use_tqdm=False)  # fmt: skip
    whitelist = sorted(set(whitelist))
    expected = {
        "narrow": reference_ranks(table, graph.triples, [train], restrict_entities_to=whitelist),
        "wide": reference_ranks(table, graph.triples, [train, test], restrict_entities_to=whitelist),
        "raw": reference_ranks(table, graph.triples, filtered=False, restrict_entities_to=whitelist),
    }
    assert_same_ranks(results.records, expected["narrow"])
    assert_same_ranks(results.also_filtered.records, expected["wide"])
    assert_same_ranks(results.raw.records, expected["raw"])
    assert results.also_filtered.raw is None  # the raw ranks are held once, by the narrower level's results


def test_type_constraints_group_the_tasks():
    graph, table, train, test = _setting(5, num_entities=12)
    heads = {r: sorted({*range(6), *graph.triples[graph.triples[:, 1] == r, 0].tolist()}) for r in range(3)}
    tails = {r: sorted({*range(6, 12), *graph.triples[graph.triples[:, 1] == r, 2].tolist()}) for r in range(3)}
    constraints = TypeConstraints.from_mappings(heads=heads, tails=tails)
    evaluator = RankBasedEvaluator(batch_size=4)
    kwargs = {"additional_filter_triples": [train], "type_constraints": constraints, "use_tqdm": False}
    results = evaluator.evaluate(TableModel(table), graph.triples, also_filter_triples=[test], **kwargs)
    narrow = evaluator.evaluate(TableModel(table), graph.triples, **kwargs)
    kwargs["additional_filter_triples"] = [train, test]
    wide = evaluator.evaluate(TableModel(table), graph.triples, **kwargs)
    assert results.records.equals(narrow.records)
    assert results.also_filtered.records.equals(wide.records)


def test_one_scoring_pass():
    graph, table, train, test = _setting(6)
    model = TableModel(table)
    evaluator = RankBasedEvaluator(batch_size=5, slice_size=None, fast_path=False)
    evaluator.evaluate(model, graph.triples, additional_filter_triples=[train], use_tqdm=False)
    one_level = list(model.score_calls)
    model.score_calls.clear()
    evaluator.evaluate(model, graph.triples, additional_filter_triples=[train], also_filter_triples=[test],
                       use_tqdm=False)  # fmt: skip
    assert model.score_calls == one_level  # the second level costs no model call


def test_resumed_evaluation_keeps_both_levels(tmp_path):
    graph, table, train, test = _setting(7)
    path = tmp_path / "progress.pt"
    evaluator = RankBasedEvaluator(batch_size=2)
    kwargs = {"additional_filter_triples": [train], "also_filter_triples": [test], "use_tqdm": False}
    whole = evaluator.evaluate(TableModel(table), graph.triples, **kwargs)
    resumed = evaluator.evaluate(TableModel(table), graph.triples, progress_path=path, save_every=0, **kwargs)
    assert resumed == whole and not path.exists()


def test_json_round_trip_and_key_prefix():
    graph, table, train, test = _setting(8)
    results = RankBasedEvaluator(filtered="both").evaluate(
        TableModel(table), graph.triples, additional_filter_triples=[train], also_filter_triples=[test],
        use_tqdm=False,
    )  # fmt: skip
    assert RankBasedMetricResults.from_json(results.to_json()) == results
    flat = results.also_filtered.to_flat_dict(prefix="also_filtered")
    assert flat["also_filtered.both.realistic.inverse_harmonic_mean_rank"] == results.also_filtered.get_metric("mrr")


def test_refusals():
    graph, table, _, test = _setting(9)
    with pytest.raises(ValueError, match="also_filter_triples needs a filtered evaluation"):
        RankBasedEvaluator(filtered=False).evaluate(TableModel(table), graph.triples, also_filter_triples=[test],
                                                    use_tqdm=False)  # fmt: skip
    bad = test.clone()
    bad[0, 0] = 99
    with pytest.raises(ValueError, match=r"also_filter_triples\[0\]"):
        RankBasedEvaluator().evaluate(TableModel(table), graph.triples, also_filter_triples=[bad], use_tqdm=False)
    with pytest.raises(TypeError, match="also_filter_triples"):
        RankBasedEvaluator().evaluate(TableModel(table), graph.triples, also_filter_triples="test", use_tqdm=False)
