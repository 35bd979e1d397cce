"""Few tasks over many candidate slices: each distinct query's candidates are scored once (within 5%), on every
scoring path, and the ranks stay those of the brute-force reference.

With fewer tasks than slices, batches mix the slices of their answers and read the true scores in a first pass;
the answer slices' scores are kept for counting instead of being scored again.
"""

from __future__ import annotations

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import gemm_scoring
from kgeval.models import DistMult
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

NUM_ENTITIES, SLICE = 60, 5  # 12 slices for 20 triples: far fewer tasks than 64 per slice, so batches mix slices
GRAPH = random_graph(2, NUM_ENTITIES, 3, num_triples=20, num_filter=40)
TABLE = quantised_table(2, NUM_ENTITIES, 3, levels=3)


def distinct_queries() -> int:
    """Distinct (h, r) plus distinct (r, t) queries of the evaluated triples."""
    triples = GRAPH.triples
    return len(torch.unique(triples[:, :2], dim=0)) + len(torch.unique(triples[:, 1:], dim=0))


class TriplesOnly(torch.nn.Module):
    """Scores whole triples only, counting them."""

    def __init__(self) -> None:
        super().__init__()
        self.num_entities, self.table, self.scored = NUM_ENTITIES, TABLE, 0

    def score_hrt(self, hrt: torch.Tensor) -> torch.Tensor:
        self.scored += hrt.shape[0]
        return self.table[hrt[:, 0], hrt[:, 1], hrt[:, 2]]


def _evaluate(model):
    """The probes off (``check_fast_path=False``): the loop's calls are counted (the probes' are bounded in
    test_score_stability.py)."""
    return RankBasedEvaluator(slice_size=SLICE, check_fast_path=False).evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )


def test_sliced_model_calls_score_each_query_once() -> None:
    model = TableModel(TABLE)
    results = _evaluate(model)
    scored = sum(rows * columns for _method, rows, columns in model.score_calls)
    assert scored <= 1.05 * distinct_queries() * NUM_ENTITIES
    assert_same_ranks(results.records, reference_ranks(TABLE, GRAPH.triples, GRAPH.filter_triples))


def test_triple_scorers_score_each_query_once() -> None:
    model = TriplesOnly()
    results = _evaluate(model)
    assert model.scored <= 1.05 * distinct_queries() * NUM_ENTITIES
    assert_same_ranks(results.records, reference_ranks(TABLE, GRAPH.triples, GRAPH.filter_triples))


def test_gemm_scores_each_query_once(monkeypatch: pytest.MonkeyPatch) -> None:
    computed = []
    original = gemm_scoring.GemmScorer._scores

    def counting(self, vectors):
        computed.append(vectors.shape[0] * (self._stop - self._start))
        return original(self, vectors)

    monkeypatch.setattr(gemm_scoring.GemmScorer, "_scores", counting)  # instrumentation: counts the GEMM work
    model = DistMult(NUM_ENTITIES, 3, dim=4, seed=0)
    with torch.no_grad():  # integer embeddings: exact scores, so the reference table is exact too
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-2, 3, parameter.shape, generator=torch.Generator().manual_seed(0)))
        entities, relations = model.entity_embeddings.weight, model.relation_embeddings.weight
        table = torch.einsum("hd,rd,td->hrt", entities, relations, entities)
    results = _evaluate(model)
    assert sum(computed) <= 1.05 * distinct_queries() * NUM_ENTITIES
    assert_same_ranks(results.records, reference_ranks(table, GRAPH.triples, GRAPH.filter_triples))
