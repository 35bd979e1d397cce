"""kgeval._engine.scoring: which scorer a model gets, and what each scorer's tiles hold."""

from __future__ import annotations

import re
import weakref

import pytest
import torch

from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import FullRowScorer, SlicedScorer, Workspace
from kgeval.adapters import query_candidate_form
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table


class QueryCandidate:
    """A minimal query/candidate model with a configurable similarity."""

    def __init__(self, similarity: str = "dot", query=None, candidates=None) -> None:
        self.kgeval_similarity = similarity
        self._query = query if query is not None else torch.ones(2, 3)
        self._candidates = candidates if candidates is not None else torch.ones(5, 3)

    def kgeval_query(self, batch, target):
        return self._query

    def kgeval_candidates(self, target):
        return self._candidates

    def score_t(self, batch):
        raise AssertionError("the fast path must not call score_t")

    score_h = score_t


def _tile(scorer, queries, start, stop, rows=None):
    scorer.begin(queries)
    scorer.start_slice(start, stop)
    return scorer.block(0, queries.shape[0] if rows is None else int(rows.max()) + 1, rows, Workspace())


def test_scorer_choice() -> None:
    table = quantised_table(0, 5, 2)
    assert isinstance(make_scorer(DistMult(5, 2, dim=3), "tail", 5, None), GemmScorer)
    assert isinstance(make_scorer(TransE(5, 2, dim=3, p=1), "head", 5, None), L1Scorer)
    assert isinstance(make_scorer(DistMult(5, 2, dim=3), "tail", 5, None, fast_path=False), SlicedScorer)
    assert isinstance(make_scorer(TableModel(table), "tail", 5, None), SlicedScorer)
    assert isinstance(make_scorer(FullScoreTableModel(table), "head", 5, None), FullRowScorer)
    assert query_candidate_form(TableModel(table)) is None


def test_unknown_similarity_raises() -> None:
    with pytest.raises(
        ValueError, match=re.escape("model.kgeval_similarity must be one of ('dot', 'l2', 'l1'), got 'cos'")
    ):
        make_scorer(QueryCandidate("cos"), "tail", 5, None)


@pytest.mark.parametrize(
    ("model", "error", "message"),
    [
        (QueryCandidate(candidates=torch.ones(4, 3)), ValueError,
         "model.kgeval_candidates returned shape (4, 3), expected (5, 'd')"),
        (QueryCandidate(candidates=torch.ones(5, 3, dtype=torch.long)), TypeError,
         "model.kgeval_candidates must return a 2-d floating-point tensor, got torch.int64 (5, 3)"),
        (QueryCandidate(query=torch.ones(2, 4)), ValueError,
         "model.kgeval_query returned shape (2, 4), expected (2, 3)"),
    ],
)  # fmt: skip
def test_malformed_query_candidate_output_raises(model, error, message) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        _tile(make_scorer(model, "tail", 5, None), torch.zeros(2, 2, dtype=torch.long), 0, 5)


@pytest.mark.parametrize("similarity", ["dot", "l2", "l1"])
def test_gemm_tiles_order_like_the_similarity(similarity: str) -> None:
    generator = torch.Generator().manual_seed(0)
    query, candidates = torch.randn(3, 4, generator=generator), torch.randn(9, 4, generator=generator)
    scorer = make_scorer(QueryCandidate(similarity, query, candidates), "tail", 9, None)
    tile, owned = _tile(scorer, torch.zeros(3, 2, dtype=torch.long), 2, 7)
    assert owned
    if similarity == "dot":
        expected = query @ candidates[2:7].T
    else:
        expected = -torch.cdist(query, candidates[2:7], p=2.0 if similarity == "l2" else 1.0)
    if similarity == "l2":  # scores 2 q.c - ||c||^2 = ||q||^2 - ||q - c||^2: the same order, shifted per row
        expected = (query * query).sum(1, keepdim=True) - expected**2
    torch.testing.assert_close(tile, expected)


def test_repeated_queries_copy_or_recompute_rows() -> None:
    generator = torch.Generator().manual_seed(1)
    for width in (2, 64):  # narrow rows are recomputed, wide rows copied: the same tile either way
        query, candidates = torch.randn(3, width, generator=generator), torch.randn(6, width, generator=generator)
        scorer = make_scorer(QueryCandidate("dot", query, candidates), "tail", 6, None)
        rows = torch.tensor([0, 0, 1, 2, 2, 2])
        tile, owned = _tile(scorer, torch.zeros(3, 2, dtype=torch.long), 0, 6, rows)
        assert owned
        torch.testing.assert_close(tile, (query @ candidates.T)[rows])


def test_restricted_candidates_are_columns_of_the_whitelist() -> None:
    table = quantised_table(2, 6, 2, levels=5)
    ids = torch.tensor([1, 4, 5])
    for model in (TableModel(table), FullScoreTableModel(table)):
        scorer = make_scorer(model, "tail", 6, ids)
        assert scorer.num_candidates == 3
        queries = torch.tensor([[0, 1], [3, 0]])
        tile, _owned = _tile(scorer, queries, 1, 3)
        assert torch.equal(tile, table[queries[:, 0], queries[:, 1]][:, ids[1:3]])


def test_nan_free_flags() -> None:
    table = quantised_table(3, 4, 1)
    scorer = make_scorer(FullScoreTableModel(table), "tail", 4, None)
    scorer.begin(torch.tensor([[0, 0]]))
    assert scorer.nan_free
    table[0, 0, 2] = float("nan")
    scorer = make_scorer(FullScoreTableModel(table), "tail", 4, None)
    scorer.begin(torch.tensor([[0, 0]]))
    assert not scorer.nan_free
    huge = QueryCandidate(query=torch.full((2, 3), 1e30), candidates=torch.full((5, 3), 1e30))
    scorer = make_scorer(huge, "tail", 5, None)
    scorer.begin(torch.zeros(2, 2, dtype=torch.long))
    assert not scorer.nan_free  # q . c could overflow
    scorer = make_scorer(QueryCandidate(), "tail", 5, None)
    scorer.begin(torch.zeros(2, 2, dtype=torch.long))
    assert scorer.nan_free


def test_l2_scores_subtract_the_squared_norms_and_bound_them() -> None:
    """ "l2" tiles are 2 q.c - ||c||^2 of the model's own vectors (no extended copy of the table), and a squared norm
    that overflows (||c||^2 = inf in float32, though q . c is small) makes the scores not NaN-free."""
    generator = torch.Generator().manual_seed(3)
    query, candidates = torch.randn(2, 3, generator=generator), torch.randn(5, 3, generator=generator)
    scorer = make_scorer(QueryCandidate("l2", query, candidates), "tail", 5, None)
    tile, _owned = _tile(scorer, torch.zeros(2, 2, dtype=torch.long), 0, 5)
    expected = 2 * query.double() @ candidates.double().T - (candidates.double() ** 2).sum(dim=1)
    torch.testing.assert_close(tile.double(), expected, rtol=1e-6, atol=1e-6)
    assert scorer.nan_free and scorer._candidates is candidates  # read in place
    candidates[4] = torch.tensor([1e20, 0.0, 0.0])  # ||c||^2 = 1e40: inf in float32
    scorer = make_scorer(QueryCandidate("l2", query * 1e-30, candidates), "tail", 5, None)
    scorer.begin(torch.zeros(2, 2, dtype=torch.long))
    assert not scorer.nan_free


def test_workspace_reuses_its_buffer() -> None:
    workspace = Workspace()
    like = torch.zeros(1)
    first = workspace.tile(4, 5, like)
    second = workspace.tile(2, 3, like)
    assert first.shape == (4, 5)
    assert second.shape == (2, 3)
    assert second.data_ptr() == first.data_ptr()
    assert workspace.tile(2, 3, like.double()).dtype == torch.float64


class WatchedScores:
    """Returns fresh score rows and records, at each call, whether the rows it returned before are still alive."""

    def __init__(self, num_entities: int) -> None:
        self.num_entities = num_entities
        self.previous: list[weakref.ref] = []
        self.alive_at_call: list[bool] = []

    def score_t(self, batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        self.alive_at_call.append(any(ref() is not None for ref in self.previous))
        width = self.num_entities if tails is None else tails.numel()
        scores = torch.zeros(batch.shape[0], width)
        self.previous = [weakref.ref(scores)]
        return scores


@pytest.mark.parametrize("scorer_class", [FullRowScorer, SlicedScorer])
def test_held_scores_are_released_before_the_next_model_call(scorer_class) -> None:
    """Two score blocks alive at once made the allocator return memory and fault it in again at every call."""
    model = WatchedScores(6)
    scorer = scorer_class(model, "tail", 6, None)
    for _batch in range(2):
        scorer.begin(torch.zeros(3, 2, dtype=torch.long))
        for start in (0, 3):
            scorer.start_slice(start, start + 3)
    assert model.alive_at_call and not any(model.alive_at_call)
