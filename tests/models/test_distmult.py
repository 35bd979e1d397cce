"""Tests of kgeval.models.DistMult against brute-force loops over its score function."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

from kgeval.models import DistMult

NUM_ENTITIES, NUM_RELATIONS, DIM = 7, 3, 5


@pytest.fixture
def model() -> DistMult:
    return DistMult(NUM_ENTITIES, NUM_RELATIONS, dim=DIM, seed=1)


def _brute_force_score(model: DistMult, h: int, r: int, t: int) -> float:
    """sum_i h_i r_i t_i with a Python loop over the dimensions."""
    e, w = model.entity_embeddings.weight.tolist(), model.relation_embeddings.weight.tolist()
    return sum(e[h][i] * w[r][i] * e[t][i] for i in range(model.dim))


@pytest.fixture
def all_triples() -> torch.Tensor:
    """Every (h, r, t), shape (E * R * E, 3)."""
    grid = itertools.product(range(NUM_ENTITIES), range(NUM_RELATIONS), range(NUM_ENTITIES))
    return torch.tensor(list(grid))


def test_attributes(model: DistMult) -> None:
    assert (model.num_entities, model.num_relations, model.dim) == (NUM_ENTITIES, NUM_RELATIONS, DIM)
    assert model.entity_embeddings.weight.shape == (NUM_ENTITIES, DIM)
    assert model.relation_embeddings.weight.shape == (NUM_RELATIONS, DIM)
    assert model.kgeval_similarity == "dot"
    assert "num_entities=7, num_relations=3, dim=5" in repr(model)


def test_score_hrt_matches_brute_force(model: DistMult, all_triples: torch.Tensor) -> None:
    with torch.no_grad():
        scores = model.score_hrt(all_triples)
    assert scores.shape == (len(all_triples),)
    expected = torch.tensor([_brute_force_score(model, *triple) for triple in all_triples.tolist()])
    torch.testing.assert_close(scores, expected)


def test_score_t_and_score_h_match_score_hrt(model: DistMult) -> None:
    hr = torch.tensor([[h, r] for h in range(NUM_ENTITIES) for r in range(NUM_RELATIONS)])
    with torch.no_grad():
        tail_scores, head_scores = model.score_t(hr), model.score_h(hr.flip(1))  # (r, t) with t := h
        assert tail_scores.shape == head_scores.shape == (len(hr), NUM_ENTITIES)
        for row, (a, r) in enumerate(hr.tolist()):
            for e in range(NUM_ENTITIES):
                expected_tail = model.score_hrt(torch.tensor([[a, r, e]]))[0]
                expected_head = model.score_hrt(torch.tensor([[e, r, a]]))[0]
                torch.testing.assert_close(tail_scores[row, e], expected_tail)
                torch.testing.assert_close(head_scores[row, e], expected_head)


@pytest.mark.parametrize("side", ["tail", "head"])
def test_candidate_subset_equals_full_columns(model: DistMult, side: str) -> None:
    batch = torch.tensor([[0, 1], [2, 0], [6, 2], [1, 1]])
    if side == "head":
        batch = batch.flip(1)
    score = model.score_t if side == "tail" else model.score_h
    keyword = "tails" if side == "tail" else "heads"
    with torch.no_grad():
        full = score(batch)
        subset = torch.tensor([5, 0, 3, 3])  # any order, repeats allowed
        torch.testing.assert_close(score(batch, **{keyword: subset}), full[:, subset])
        per_row = torch.tensor([[6, 1], [0, 0], [2, 4], [3, 5]])
        torch.testing.assert_close(score(batch, **{keyword: per_row}), full.gather(1, per_row))


def test_gemm_fast_path_equals_score_t_and_score_h(model: DistMult) -> None:
    generator = torch.Generator().manual_seed(0)
    batch = torch.stack(
        [
            torch.randint(NUM_ENTITIES, (20,), generator=generator),
            torch.randint(NUM_RELATIONS, (20,), generator=generator),
        ],
        dim=1,
    )
    with torch.no_grad():
        for target, score, pairs in (("tail", model.score_t, batch), ("head", model.score_h, batch.flip(1))):
            query, candidates = model.kgeval_query(pairs, target), model.kgeval_candidates(target)
            assert query.shape == (20, DIM)
            assert candidates.shape == (NUM_ENTITIES, DIM)
            torch.testing.assert_close(query @ candidates.T, score(pairs))


def test_seed_makes_initialisation_reproducible() -> None:
    first, second = DistMult(5, 2, dim=4, seed=3), DistMult(5, 2, dim=4, seed=3)
    other = DistMult(5, 2, dim=4, seed=4)
    for a, b, c in zip(first.parameters(), second.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
        assert not torch.equal(a, c)


def test_xavier_uniform_bounds() -> None:
    model = DistMult(50, 10, dim=8, seed=0)
    for weight in (model.entity_embeddings.weight, model.relation_embeddings.weight):
        bound = (6 / sum(weight.shape)) ** 0.5
        assert weight.abs().max() <= bound


def test_gradients_flow() -> None:
    model = DistMult(4, 2, dim=3, seed=0)
    model.score_t(torch.tensor([[0, 1]])).sum().backward()
    assert model.entity_embeddings.weight.grad is not None
    assert model.relation_embeddings.weight.grad is not None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.score_t(torch.tensor([0, 1])), "hr_batch must have shape (B, 2), got (2,)"),
        (lambda m: m.score_h(torch.tensor([[0, 1, 2]])), "rt_batch must have shape (B, 2), got (1, 3)"),
        (lambda m: m.score_hrt(torch.tensor([[0, 1]])), "hrt_batch must have shape (B, 3), got (1, 2)"),
        (
            lambda m: m.kgeval_query(torch.tensor([[0, 1]]), "middle"),
            "target must be one of ('head', 'tail', 'relation'), got 'middle'",
        ),
        (lambda m: m.kgeval_candidates("both"), "target must be one of ('head', 'tail', 'relation'), got 'both'"),
        (
            lambda m: m.score_t(torch.tensor([[0, 1]]), tails=torch.zeros((2, 2), dtype=torch.long)),
            "candidate ids must have shape (k,) or (1, k), got (2, 2)",
        ),
    ],
)
def test_invalid_inputs(model: DistMult, call, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call(model)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_entities": 0}, "num_entities must be a positive int, got 0"),
        ({"num_relations": 2.0}, "num_relations must be a positive int, got 2.0"),
        ({"dim": True}, "dim must be a positive int, got True"),
    ],
)
def test_invalid_sizes(kwargs: dict, message: str) -> None:
    arguments = {"num_entities": 3, "num_relations": 2, "dim": 4, **kwargs}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        DistMult(**arguments)
