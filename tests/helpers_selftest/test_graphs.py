"""Self-tests of tests/helpers/graphs.py: graphs, table models, edge cases and strategies."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from tests.helpers.graphs import (
    FullScoreTableModel,
    RandomGraph,
    TableModel,
    all_filtered_graph,
    duplicated_triples_graph,
    edge_cases,
    entity_whitelists,
    graphs_and_tables,
    quantised_table,
    random_graph,
    ranks_and_candidates,
    single_candidate_graph,
    tiny_graphs,
)
from tests.helpers.reference import adjusted_metric, reference_ranks

# ----------------------------------------------------------------------------------------------- random graphs


def test_random_graph_shapes_and_ranges() -> None:
    graph = random_graph(0, 10, 3, 50, 80, duplicate_fraction=0.3)
    assert graph.triples.shape == (50, 3)
    assert graph.triples.dtype == torch.long
    assert [t.shape for t in graph.filter_triples] == [(60, 3), (20, 3)]
    for tensor in [graph.triples, *graph.filter_triples]:
        assert tensor.dtype == torch.long
        assert int(tensor[:, [0, 2]].min()) >= 0
        assert int(tensor[:, [0, 2]].max()) < 10
        assert int(tensor[:, 1].min()) >= 0
        assert int(tensor[:, 1].max()) < 3
    assert len(set(map(tuple, graph.triples.tolist()))) <= 50 - 15  # 15 copies


def test_random_graph_is_deterministic_per_seed() -> None:
    a, b = random_graph(7, 8, 2, 20, 20), random_graph(np.random.default_rng(7), 8, 2, 20, 20)
    assert torch.equal(a.triples, b.triples)
    assert all(torch.equal(x, y) for x, y in zip(a.filter_triples, b.filter_triples, strict=True))
    assert not torch.equal(a.triples, random_graph(8, 8, 2, 20, 20).triples)


def test_filter_triples_share_evaluation_keys() -> None:
    graph = random_graph(1, 30, 2, 40, 200)
    hr = {(h, r) for h, r, _ in graph.triples.tolist()}
    rt = {(r, t) for _, r, t in graph.triples.tolist()}
    rows = torch.cat(graph.filter_triples).tolist()
    shared = sum(1 for h, r, t in rows if (h, r) in hr or (r, t) in rt)
    assert shared / len(rows) > 0.6  # 3 of 4 construction kinds share a key


def test_filtering_matters_on_random_graphs() -> None:
    graph = random_graph(2, 12, 2, 30, 60)
    table = quantised_table(2, 12, 2, levels=3)
    filtered = reference_ranks(table, graph.triples, graph.filter_triples)
    raw = reference_ranks(table, graph.triples, graph.filter_triples, filtered=False)
    assert np.any(filtered["both"]["num_candidates"] < raw["both"]["num_candidates"])
    assert np.any(filtered["both"]["optimistic"] < raw["both"]["optimistic"])


def test_random_graph_validation() -> None:
    with pytest.raises(ValueError, match="duplicate_fraction must be in"):
        random_graph(0, 3, 1, 5, 0, duplicate_fraction=1.0)
    with pytest.raises(ValueError, match="num_entities, num_relations >= 1"):
        random_graph(0, 0, 1, 5, 0)
    with pytest.raises(ValueError, match="has ids outside"):
        RandomGraph(2, 1, torch.tensor([[0, 0, 2]]))
    with pytest.raises(ValueError, match="must be a LongTensor"):
        RandomGraph(2, 1, torch.tensor([[0.0, 0.0, 1.0]]))
    assert random_graph(0, 3, 1, 0, 4).triples.shape == (0, 3)


def test_known_triples() -> None:
    graph = RandomGraph(3, 1, torch.tensor([[0, 0, 1], [0, 0, 1]]), [torch.tensor([[1, 0, 2]])])
    assert graph.known_triples() == {(0, 0, 1), (1, 0, 2)}


# ----------------------------------------------------------------------------------------------- tables


def test_quantised_table_levels_and_infinities() -> None:
    table = quantised_table(0, 20, 3, levels=3, inf_fraction=0.2)
    assert table.shape == (20, 3, 20)
    assert table.dtype == torch.float32
    finite = table[torch.isfinite(table)]
    assert set(finite.unique().tolist()) == {-1.0, 0.0, 1.0}
    inf_share = (~torch.isfinite(table)).float().mean().item()
    assert 0.15 < inf_share < 0.25
    assert (table == math.inf).any()
    assert (table == -math.inf).any()
    assert not table.isnan().any()
    assert quantised_table(0, 4, 1, levels=1).unique().tolist() == [0.0]
    assert quantised_table(0, 2, 1, dtype=torch.float64).dtype == torch.float64
    assert torch.equal(quantised_table(5, 4, 2, levels=4), quantised_table(5, 4, 2, levels=4))


# ----------------------------------------------------------------------------------------------- models


def test_table_model_scores() -> None:
    table = quantised_table(3, 5, 2, levels=5)
    model = TableModel(table)
    hr = torch.tensor([[0, 1], [4, 0]])
    rt = torch.tensor([[1, 2], [0, 3]])
    assert torch.equal(model.score_t(hr), torch.stack([table[0, 1, :], table[4, 0, :]]))
    assert torch.equal(model.score_h(rt), torch.stack([table[:, 1, 2], table[:, 0, 3]]))
    tails = torch.tensor([3, 1])
    assert torch.equal(model.score_t(hr, tails=tails), torch.stack([table[0, 1, tails], table[4, 0, tails]]))
    heads = torch.tensor([2])
    assert model.score_h(rt, heads=heads).shape == (2, 1)
    assert model.score_h(rt, heads=heads)[1, 0] == table[2, 0, 3]
    assert model.score_hrt(torch.tensor([[1, 0, 2]])).item() == table[1, 0, 2]
    assert model.num_score_calls == 5
    assert model.score_calls[0] == ("score_t", 2, 5)
    assert model.score_calls[2] == ("score_t", 2, 2)
    assert model.num_entities == 5
    assert model.num_relations == 2
    assert model.supports_candidates


def test_table_model_returns_copies_and_moves_with_to() -> None:
    model = TableModel(torch.zeros(3, 1, 3))
    scores = model.score_t(torch.tensor([[0, 0]]))
    scores += 1
    assert model.table.abs().sum() == 0
    assert next(model.parameters()).device.type == "cpu"
    model = model.to(torch.float64)
    assert model.table.dtype == torch.float64
    assert "table" in dict(model.named_buffers())


def test_full_score_model_has_no_candidate_keyword() -> None:
    model = FullScoreTableModel(torch.arange(8.0).reshape(2, 2, 2))
    assert not model.supports_candidates
    assert list(inspect.signature(model.score_t).parameters) == ["hr_batch"]
    assert list(inspect.signature(model.score_h).parameters) == ["rt_batch"]
    assert "tails" in inspect.signature(TableModel.score_t).parameters
    with pytest.raises(TypeError):
        model.score_t(torch.tensor([[0, 0]]), tails=torch.tensor([0]))
    assert torch.equal(model.score_h(torch.tensor([[1, 0]])), torch.tensor([[2.0, 6.0]]))


def test_model_input_validation() -> None:
    with pytest.raises(ValueError, match=r"table must have shape \(E, R, E\)"):
        TableModel(torch.zeros(2, 1, 3))
    with pytest.raises(ValueError, match=r"hr_batch must be a LongTensor of shape \(B, 2\)"):
        TableModel(torch.zeros(2, 1, 2)).score_t(torch.tensor([[0, 0, 1]]))


# ----------------------------------------------------------------------------------------------- edge cases


def test_single_candidate_graph() -> None:
    graph, table = single_candidate_graph()
    ranks = reference_ranks(table, graph.triples, graph.filter_triples)
    assert ranks["tail"]["num_candidates"].tolist() == [1, 5, 5]
    assert ranks["head"]["num_candidates"].tolist() == [5, 1, 4]
    assert ranks["tail"]["pessimistic"][0] == 1
    assert ranks["head"]["pessimistic"][1] == 1


def test_all_filtered_graph() -> None:
    graph, table = all_filtered_graph()
    ranks = reference_ranks(table, graph.triples, graph.filter_triples)
    both = ranks["both"]
    assert np.all(both["num_candidates"] == 1)
    assert np.all(both["pessimistic"] == 1)
    assert math.isnan(adjusted_metric("amri", both["realistic"], both["num_candidates"]))


def test_tiny_graphs() -> None:
    graph, table = tiny_graphs()["one_entity"]
    ranks = reference_ranks(table, graph.triples, graph.filter_triples, filtered=False)
    assert ranks["both"]["num_candidates"].tolist() == [1, 1]
    graph, table = tiny_graphs()["two_entities_tie"]
    ranks = reference_ranks(table, graph.triples, graph.filter_triples, filtered=False)
    assert ranks["both"]["realistic"].tolist() == [1.5] * 4
    # filtered: (0,0,1) and (1,0,0) are both evaluated, but neither blocks the other's candidates
    ranks = reference_ranks(table, graph.triples, graph.filter_triples)
    assert ranks["both"]["num_candidates"].tolist() == [2, 2, 2, 2]


def test_duplicated_triples_graph() -> None:
    graph, _ = duplicated_triples_graph()
    rows = graph.triples.tolist()
    assert all(rows.count(row) >= 2 for row in rows)


def test_edge_cases_are_valid_and_rankable() -> None:
    cases = edge_cases()
    assert {"single_candidate", "all_filtered", "duplicated_triples", "one_entity", "all_plus_inf"} <= set(cases)
    for graph, table in cases.values():
        assert table.shape == (graph.num_entities, graph.num_relations, graph.num_entities)
        ranks = reference_ranks(table, graph.triples, graph.filter_triples)
        assert np.all(ranks["both"]["pessimistic"] <= ranks["both"]["num_candidates"])
    graph, table = cases["all_plus_inf"]
    ranks = reference_ranks(table, graph.triples, graph.filter_triples)
    assert np.all(ranks["both"]["optimistic"] == 1)
    assert np.array_equal(ranks["both"]["pessimistic"], ranks["both"]["num_candidates"])


# ----------------------------------------------------------------------------------------------- strategies


@settings(max_examples=80, deadline=None)
@given(graphs_and_tables())
def test_graphs_and_tables_strategy(case) -> None:
    graph, table = case
    assert 1 <= graph.num_entities <= 12
    assert 1 <= graph.num_relations <= 3
    assert table.shape == (graph.num_entities, graph.num_relations, graph.num_entities)
    assert not table.isnan().any()
    assert 1 <= len(graph.triples) <= 20
    RandomGraph(graph.num_entities, graph.num_relations, graph.triples, graph.filter_triples)  # validates


@settings(max_examples=30, deadline=None)
@given(graphs_and_tables(min_entities=3).flatmap(lambda c: entity_whitelists(c[0].num_entities).map(lambda w: (c, w))))
def test_entity_whitelists_strategy(data) -> None:
    (graph, table), whitelist = data
    assert len(set(whitelist.tolist())) == len(whitelist) >= 1
    ranks = reference_ranks(table, graph.triples, graph.filter_triples, restrict_entities_to=whitelist)
    assert np.all(ranks["both"]["num_candidates"] <= len(whitelist) + 1)


@settings(max_examples=50, deadline=None)
@given(ranks_and_candidates())
def test_ranks_and_candidates_strategy(data) -> None:
    ranks, counts = data
    assert ranks.shape == counts.shape
    assert np.all((ranks >= 1) & (ranks <= counts))
    assert np.all((2 * ranks) == np.round(2 * ranks))
