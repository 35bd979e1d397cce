"""predict_top_k against a brute-force reference: every candidate scored from the score table, known triples
removed, sorted by (score descending, entity id ascending), the first k kept and -1 / NaN padded."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kgeval import TypeConstraints, predict_top_k
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph

MODELS = {"sliced": TableModel, "full_rows": FullScoreTableModel}


def reference_top_k(table, queries, k, target, known, allowed=None):
    """Python loops over the dense table: the expected (ids, scores) as lists."""
    num_entities = table.shape[0]
    known = {tuple(row) for triples in known for row in triples.tolist()}
    ids, scores = [], []
    for a, b in queries.tolist():
        rows = []
        for e in range(num_entities) if allowed is None else sorted(allowed):
            triple = (a, b, e) if target == "tail" else (e, a, b)
            if triple in known:
                continue
            rows.append((-float(table[triple]), e))
        rows.sort()
        best = rows[:k] + [(math.nan, -1)] * max(0, k - len(rows))
        ids.append([e for _, e in best])
        scores.append([-s if e >= 0 else math.nan for s, e in best])
    return ids, scores


def assert_same(got, expected) -> None:
    (ids, scores), (expected_ids, expected_scores) = got, expected
    assert ids.tolist() == expected_ids
    np.testing.assert_array_equal(scores.numpy(), np.array(expected_scores, dtype=np.float32))


@pytest.mark.parametrize("model_kind", list(MODELS))
@pytest.mark.parametrize("target", ["tail", "head"])
@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force_on_tie_heavy_tables(seed: int, target: str, model_kind: str) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, num_entities=17, num_relations=3, num_triples=25, num_filter=60)
    table = quantised_table(rng, 17, 3, levels=3, inf_fraction=0.1)
    queries = graph.triples[:, :2] if target == "tail" else graph.triples[:, 1:]
    known = [graph.triples, *graph.filter_triples]
    expected = reference_top_k(table, queries, 5, target, known)
    for batch_size, slice_size in [(None, None), (1, 1), (4, 3), (100, 16), (7, 100)]:
        got = predict_top_k(
            MODELS[model_kind](table), queries, k=5, target=target, filter_triples=known,
            batch_size=batch_size, slice_size=slice_size,
        )  # fmt: skip
        assert_same(got, expected)


def test_restricted_candidates_and_padding() -> None:
    graph = random_graph(5, num_entities=12, num_relations=2, num_triples=20, num_filter=40)
    table = quantised_table(5, 12, 2, levels=2)
    allowed = [0, 3, 4, 7, 11]
    queries = graph.triples[:, :2]
    known = [graph.triples, *graph.filter_triples]
    expected = reference_top_k(table, queries, 4, "tail", known, allowed)
    assert any(-1 in row for row in expected[0])  # some queries have fewer than k candidates left: padded
    model = TableModel(table)
    got = predict_top_k(model, queries, k=4, filter_triples=known, restrict_entities_to=allowed, slice_size=2)
    assert_same(got, expected)


def test_without_filter_and_k_beyond_the_candidates() -> None:
    table = quantised_table(2, 6, 2, levels=2)
    queries = torch.tensor([[0, 1], [5, 0]])
    expected = reference_top_k(table, queries, 8, "tail", [])
    assert_same(predict_top_k(TableModel(table), queries, k=8, slice_size=4), expected)


def test_gemm_fast_path_matches_the_models_own_scores() -> None:
    """DistMult with integer embeddings (exact scores, many ties): its GEMM form and its score_t agree exactly."""
    model = DistMult(15, 3, dim=6, seed=0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-2, 3, parameter.shape, generator=torch.Generator().manual_seed(1)))
    graph = random_graph(1, num_entities=15, num_relations=3, num_triples=30, num_filter=50)
    known = [graph.triples, *graph.filter_triples]
    for target, queries in (("tail", graph.triples[:, :2]), ("head", graph.triples[:, 1:])):
        fast = predict_top_k(model, queries, k=6, target=target, filter_triples=known, slice_size=4)
        slow = predict_top_k(model, queries, k=6, target=target, filter_triples=known, fast_path=False)
        assert torch.equal(fast[0], slow[0])
        assert torch.equal(fast[1], slow[1])
        with torch.no_grad():
            entities, relations = model.entity_embeddings.weight, model.relation_embeddings.weight
            table = torch.einsum("hd,rd,td->hrt", entities, relations, entities)
        assert_same(fast, reference_top_k(table, queries, 6, target, known))


def test_nan_among_remaining_candidates_is_an_error_but_not_among_removed_ones() -> None:
    table = torch.zeros(4, 1, 4)
    table[0, 0, 2] = torch.nan
    queries = torch.tensor([[0, 0]])
    with pytest.raises(ValueError, match=r"NaN scores for query row 0 = \[0, 0\]"):
        predict_top_k(TableModel(table), queries, k=2)
    ids, _ = predict_top_k(TableModel(table), queries, k=2, filter_triples=torch.tensor([[0, 0, 2]]))
    assert ids.tolist() == [[0, 1]]


@pytest.mark.parametrize(
    ("queries", "options", "error", "message"),
    [
        (torch.tensor([[0.0, 1.0]]), {}, TypeError, "queries must be an integer tensor, got torch.float32"),
        (torch.tensor([[0, 1, 2]]), {}, ValueError, r"queries must have shape \(n, 2\) with n >= 1, got \(1, 3\)"),
        (torch.tensor([[9, 0]]), {}, ValueError, r"queries row 0 = \[9, 0\] has an id out of range"),
        (torch.tensor([[0, 5]]), {}, ValueError, r"queries row 0 = \[0, 5\] has an id out of range"),
        (torch.tensor([[0, 0]]), {"k": 0}, ValueError, "k must be"),
        (torch.tensor([[0, 0]]), {"target": "time"}, ValueError, "target must be one of"),
    ],
)
def test_bad_input_is_refused(queries, options, error, message) -> None:
    with pytest.raises(error, match=message):
        predict_top_k(TableModel(quantised_table(0, 4, 2)), queries, **options)


@pytest.mark.parametrize("p", [1, 2])
def test_distance_models_report_their_own_scores(p: int) -> None:
    """TransE-L1 (cdist fast path) and TransE-L2 (whose GEMM form ranks 2 q.c - ||c||^2): ids and scores are the
    model's own, as score_t gives them."""
    model = TransE(10, 2, dim=4, p=p, seed=0)
    queries = torch.tensor([[0, 1], [3, 0], [9, 1]])
    ids, scores = predict_top_k(model, queries, k=4)
    with torch.no_grad():
        full = model.score_t(queries)
    for row in range(3):
        order = sorted(range(10), key=lambda e, row=row: (-float(full[row, e]), e))[:4]
        assert ids[row].tolist() == order
        assert torch.equal(scores[row], full[row, order])


def test_type_constraints_give_each_query_its_relations_candidates() -> None:
    rng = np.random.default_rng(4)
    graph = random_graph(rng, num_entities=14, num_relations=3, num_triples=20, num_filter=30)
    table = quantised_table(rng, 14, 3, levels=3)
    heads = {0: [1, 2, 3, 5], 2: [0, 7, 8, 9, 13]}  # relation 1 unconstrained
    tails = {1: [4, 6], 2: [2, 3, 11]}
    constraints = TypeConstraints.from_mappings(heads=heads, tails=tails)
    known = [graph.triples, *graph.filter_triples]
    whitelist = list(range(12))
    for target, queries, sets in (("tail", graph.triples[:, :2], tails), ("head", graph.triples[:, 1:], heads)):
        relation_column = 1 if target == "tail" else 0
        expected_ids, expected_scores = [], []
        for row in range(queries.shape[0]):
            allowed = sets.get(int(queries[row, relation_column]))
            allowed = whitelist if allowed is None else sorted(set(allowed) & set(whitelist))
            one = reference_top_k(table, queries[row : row + 1], 3, target, known, allowed)
            expected_ids += one[0]
            expected_scores += one[1]
        got = predict_top_k(
            TableModel(table), queries, k=3, target=target, filter_triples=known, restrict_entities_to=whitelist,
            type_constraints=constraints, slice_size=2,
        )  # fmt: skip
        assert_same(got, (expected_ids, expected_scores))
