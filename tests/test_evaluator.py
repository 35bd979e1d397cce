"""RankBasedEvaluator against the brute-force reference: every metric, side and rank type, on tie-heavy graphs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator, UndefinedMetricWarning
from kgeval.models import DistMult
from tests.helpers.graphs import (
    FullScoreTableModel,
    TableModel,
    edge_cases,
    graphs_and_tables,
    quantised_table,
    random_graph,
)
from tests.helpers.reference import reference_metrics, reference_ranks
from tests.support.invariance import assert_metrics_match, assert_ranks_match, assert_results_equal

MODEL_KINDS = {"sliced": TableModel, "full-row": FullScoreTableModel}


def integer_distmult(
    num_entities: int, num_relations: int, dim: int = 4, seed: int = 0
) -> tuple[DistMult, torch.Tensor]:
    """A DistMult with small integer weights (exact scores through any GEMM) and its (E, R, E) score table."""
    model = DistMult(num_entities, num_relations, dim=dim, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.entity_embeddings.weight.copy_(torch.randint(-1, 2, (num_entities, dim), generator=generator).float())
        model.relation_embeddings.weight.copy_(torch.randint(-1, 2, (num_relations, dim), generator=generator).float())
    e = model.entity_embeddings.weight.detach().double()
    r = model.relation_embeddings.weight.detach().double()
    table = torch.einsum("hd,rd,td->hrt", e, r, e)
    return model, table


def evaluate(model, graph, **kwargs):
    names = ("filtered", "ks", "batch_size", "slice_size", "kernel")
    evaluator_kwargs = {key: kwargs.pop(key) for key in names if key in kwargs}
    evaluator = RankBasedEvaluator(**evaluator_kwargs)
    return evaluator.evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False, **kwargs
    )


@pytest.mark.parametrize("kernel", ["eager", "numba"])
@pytest.mark.parametrize("kind", sorted(MODEL_KINDS))
@pytest.mark.parametrize("filtered", [True, False])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(1, 1), (2, 3), (7, 5), (None, None), (1000, 1000)])
def test_matches_reference(
    kind: str, filtered: bool, batch_size: int | None, slice_size: int | None, kernel: str
) -> None:
    rng = np.random.default_rng(7)
    graph = random_graph(rng, num_entities=13, num_relations=3, num_triples=25, num_filter=40)
    table = quantised_table(rng, 13, 3, levels=3, inf_fraction=0.1)
    model = MODEL_KINDS[kind](table)
    results = evaluate(model, graph, filtered=filtered, batch_size=batch_size, slice_size=slice_size, kernel=kernel)
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples, filtered=filtered))
    assert_metrics_match(results, reference_metrics(table, graph.triples, graph.filter_triples, filtered=filtered))


@pytest.mark.parametrize("kernel", ["eager", "numba"])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(1, 1), (3, 4), (None, None)])
def test_gemm_fast_path_matches_reference(batch_size: int | None, slice_size: int | None, kernel: str) -> None:
    graph = random_graph(3, num_entities=11, num_relations=2, num_triples=30, num_filter=30)
    model, table = integer_distmult(11, 2)
    results = evaluate(model, graph, batch_size=batch_size, slice_size=slice_size, kernel=kernel)
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples))
    assert_metrics_match(results, reference_metrics(table, graph.triples, graph.filter_triples))


def test_fast_path_and_score_methods_agree() -> None:
    graph = random_graph(4, num_entities=20, num_relations=3, num_triples=40, num_filter=60)
    model, _ = integer_distmult(20, 3, dim=3, seed=2)
    fast = RankBasedEvaluator(fast_path=True).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    slow = RankBasedEvaluator(fast_path=False).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    assert_results_equal(fast, slow)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=graphs_and_tables(),
    kind=st.sampled_from(sorted(MODEL_KINDS)),
    filtered=st.booleans(),
    batch_size=st.sampled_from([1, 2, 5, None]),
    slice_size=st.sampled_from([1, 3, None]),
)
def test_random_graphs_match_reference(case, kind, filtered, batch_size, slice_size) -> None:
    graph, table = case
    ks = (1, 2, 5)
    results = evaluate(
        MODEL_KINDS[kind](table), graph, filtered=filtered, ks=ks, batch_size=batch_size, slice_size=slice_size
    )
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples, filtered=filtered))
    assert_metrics_match(
        results, reference_metrics(table, graph.triples, graph.filter_triples, ks=ks, filtered=filtered)
    )


@settings(max_examples=40, deadline=None)
@given(case=graphs_and_tables(min_entities=2), data=st.data(), slice_size=st.sampled_from([1, 2, None]))
def test_entity_restriction_matches_reference(case, data, slice_size) -> None:
    graph, table = case
    whitelist = data.draw(st.lists(st.integers(0, graph.num_entities - 1), min_size=1, unique=True))
    allowed = set(whitelist)
    keep = [i for i, (h, _, t) in enumerate(graph.triples.tolist()) if h in allowed and t in allowed]
    evaluator = RankBasedEvaluator(slice_size=slice_size)
    kwargs = dict(additional_filter_triples=graph.filter_triples, restrict_entities_to=set(whitelist), use_tqdm=False)
    if not keep:
        with pytest.raises(ValueError, match="nothing to evaluate"):
            evaluator.evaluate(TableModel(table), graph.triples, drop_outside_restriction=True, **kwargs)
        return
    results = evaluator.evaluate(TableModel(table), graph.triples, drop_outside_restriction=True, **kwargs)
    kept = graph.triples[keep]
    filters = [*graph.filter_triples, graph.triples]
    expected_ranks = reference_ranks(table, kept, filters, restrict_entities_to=whitelist)
    assert_ranks_match(results, expected_ranks)
    np.testing.assert_array_equal(np.sort(np.unique(results.records["task_index"])), np.asarray(keep, dtype=np.int64))
    assert_metrics_match(results, reference_metrics(table, kept, filters, restrict_entities_to=whitelist))


@pytest.mark.parametrize("name", sorted(edge_cases()))
def test_edge_cases_match_reference(name: str) -> None:
    graph, table = edge_cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # e.g. adjusted metrics when every C is 1
        results = evaluate(TableModel(table), graph)
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples))
    assert_metrics_match(results, reference_metrics(table, graph.triples, graph.filter_triples))


@pytest.mark.parametrize("targets", [("head",), ("tail",), ("tail", "head")])
def test_single_target(targets) -> None:
    graph = random_graph(5, num_entities=9, num_relations=2, num_triples=15, num_filter=10)
    table = quantised_table(np.random.default_rng(5), 9, 2)
    results = evaluate(TableModel(table), graph, targets=targets)
    expected = reference_metrics(table, graph.triples, graph.filter_triples, targets=tuple(sorted(set(targets))))
    assert {side for side, _, _ in results.data} == {*targets, "both"}
    assert_metrics_match(results, expected)


def test_evaluator_is_reusable_and_deterministic() -> None:
    graph = random_graph(6, num_entities=15, num_relations=2, num_triples=30, num_filter=30)
    model = TableModel(quantised_table(np.random.default_rng(6), 15, 2))
    evaluator = RankBasedEvaluator(batch_size=4, slice_size=4)
    first = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
    second = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
    assert first == second


def test_filter_index_is_cached_by_content() -> None:
    graph = random_graph(8, num_entities=15, num_relations=2, num_triples=30, num_filter=30)
    model = TableModel(quantised_table(np.random.default_rng(8), 15, 2))
    evaluator = RankBasedEvaluator()
    evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
    hits = evaluator._state.filter_indices.hits
    copies = [t.clone() for t in graph.filter_triples]
    evaluator.evaluate(model, graph.triples.clone(), additional_filter_triples=copies, use_tqdm=False)
    assert evaluator._state.filter_indices.hits == hits + 1


def test_training_flag_restored_and_model_not_moved() -> None:
    graph = random_graph(9, num_entities=10, num_relations=2, num_triples=10, num_filter=5)
    model = TableModel(quantised_table(np.random.default_rng(9), 10, 2))
    model.train()
    RankBasedEvaluator().evaluate(model, graph.triples, use_tqdm=False)
    assert model.training
    model.eval()
    RankBasedEvaluator().evaluate(model, graph.triples, use_tqdm=False)
    assert not model.training
    assert model.dummy.device.type == "cpu"


def test_progress_bar_counts_tasks(monkeypatch) -> None:
    import kgeval._engine.front

    bars = []

    class RecordingBar:
        def __init__(self, total, disable, **kwargs):
            self.total, self.disable, self.n = total, disable, 0
            bars.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            self.n += n

    monkeypatch.setattr(kgeval._engine.front, "tqdm", RecordingBar)
    graph = random_graph(10, num_entities=10, num_relations=2, num_triples=12, num_filter=5)
    model = TableModel(quantised_table(np.random.default_rng(10), 10, 2))
    RankBasedEvaluator(batch_size=5).evaluate(model, graph.triples, use_tqdm=True)
    RankBasedEvaluator(batch_size=5).evaluate(model, graph.triples, use_tqdm=False)
    assert [(bar.total, bar.n, bar.disable) for bar in bars] == [(24, 24, None), (24, 24, True)]  # None: terminal only


def test_batches_never_exceed_batch_and_slice_size() -> None:
    graph = random_graph(11, num_entities=12, num_relations=2, num_triples=20, num_filter=5)
    model = TableModel(quantised_table(np.random.default_rng(11), 12, 2))
    RankBasedEvaluator(batch_size=3, slice_size=5).evaluate(model, graph.triples, use_tqdm=False)
    assert model.score_calls
    assert all(rows <= 3 and columns <= 5 for _, rows, columns in model.score_calls)


def test_invalid_kernel_raises_and_repr_names_it() -> None:
    with pytest.raises(ValueError, match=r"^kernel must be one of \('auto', 'eager', 'numba', 'triton'\), got 'fast'$"):
        RankBasedEvaluator(kernel="fast")  # type: ignore[arg-type]
    assert "kernel='numba'" in repr(RankBasedEvaluator(kernel="numba"))
