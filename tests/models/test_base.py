"""Every built-in model: its scoring methods against a brute-force loop over its score function, and its
query/candidate form against its own scores."""

from __future__ import annotations

import cmath
import itertools
import math
import re

import pytest
import torch

from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TransE
from kgeval.models.base import QueryCandidateModule

E, R, D = 6, 3, 4

FACTORIES = {
    "DistMult": lambda: DistMult(E, R, dim=D, seed=0),
    "ComplEx": lambda: ComplEx(E, R, dim=D, seed=0),
    "RESCAL": lambda: RESCAL(E, R, dim=D, seed=0),
    "TransE-L1": lambda: TransE(E, R, dim=D, p=1, seed=0),
    "TransE-L2": lambda: TransE(E, R, dim=D, p=2, seed=0),
    "RotatE": lambda: RotatE(E, R, dim=D, seed=0),
}


@pytest.fixture(params=list(FACTORIES))
def model(request) -> QueryCandidateModule:
    return FACTORIES[request.param]()


def _complex_rows(weight: torch.Tensor) -> list[list[complex]]:
    return [[complex(row[2 * i], row[2 * i + 1]) for i in range(len(row) // 2)] for row in weight.tolist()]


def brute_force_score(model: QueryCandidateModule, h: int, r: int, t: int) -> float:
    """The model's score function, written out with Python loops (the definitions in the class docstrings)."""
    entities = model.entity_embeddings.weight
    if isinstance(model, ComplEx):
        e, w = _complex_rows(entities), _complex_rows(model.relation_embeddings.weight)
        return sum(e[h][i] * w[r][i] * e[t][i].conjugate() for i in range(model.dim)).real
    if isinstance(model, RotatE):
        e, phases = _complex_rows(entities), model.relation_phases.weight.tolist()
        return -math.sqrt(sum(abs(e[h][i] * cmath.exp(1j * phases[r][i]) - e[t][i]) ** 2 for i in range(model.dim)))
    e = entities.tolist()
    if isinstance(model, RESCAL):
        m = model.relation_embeddings.weight[r].view(D, D).tolist()
        return sum(e[h][i] * m[i][j] * e[t][j] for i in range(D) for j in range(D))
    w = model.relation_embeddings.weight.tolist()
    if isinstance(model, DistMult):
        return sum(e[h][i] * w[r][i] * e[t][i] for i in range(D))
    differences = [e[h][i] + w[r][i] - e[t][i] for i in range(D)]
    if model.p == 1:
        return -sum(abs(x) for x in differences)
    return -math.sqrt(sum(x * x for x in differences))


def test_score_hrt_matches_brute_force(model: QueryCandidateModule) -> None:
    triples = torch.tensor(list(itertools.product(range(E), range(R), range(E))))
    with torch.no_grad():
        scores = model.score_hrt(triples)
    expected = torch.tensor([brute_force_score(model, *row) for row in triples.tolist()])
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-5)


def test_score_t_and_score_h_match_score_hrt(model: QueryCandidateModule) -> None:
    pairs = torch.tensor(list(itertools.product(range(E), range(R))))
    with torch.no_grad():
        tails, heads = model.score_t(pairs), model.score_h(pairs.flip(1))
        for row, (a, r) in enumerate(pairs.tolist()):
            as_tail = model.score_hrt(torch.tensor([[a, r, e] for e in range(E)]))
            as_head = model.score_hrt(torch.tensor([[e, r, a] for e in range(E)]))
            torch.testing.assert_close(tails[row], as_tail, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(heads[row], as_head, rtol=1e-5, atol=1e-5)


def test_candidate_ids_select_columns(model: QueryCandidateModule) -> None:
    batch = torch.tensor([[0, 1], [5, 2], [3, 0]])
    subset, per_row = torch.tensor([4, 0, 4]), torch.tensor([[1, 2], [0, 0], [5, 3]])
    with torch.no_grad():
        for method, keyword, rows in (("score_t", "tails", batch), ("score_h", "heads", batch.flip(1))):
            score = getattr(model, method)
            full = score(rows)
            torch.testing.assert_close(score(rows, **{keyword: subset}), full[:, subset])
            torch.testing.assert_close(score(rows, **{keyword: per_row}), full.gather(1, per_row))


def test_query_candidate_form_reproduces_the_scores(model: QueryCandidateModule) -> None:
    batch = torch.tensor([[0, 1], [5, 2], [3, 0], [3, 0]])
    with torch.no_grad():
        for target, method, rows in (("tail", "score_t", batch), ("head", "score_h", batch.flip(1))):
            query, candidates = model.kgeval_query(rows, target), model.kgeval_candidates(target)
            assert query.shape[0] == 4
            assert candidates.shape == (E, query.shape[1])
            similarity = model.kgeval_similarity
            if similarity == "dot":
                expected = query @ candidates.T
            else:
                expected = -torch.cdist(query, candidates, p=1.0 if similarity == "l1" else 2.0)
            torch.testing.assert_close(getattr(model, method)(rows), expected)


@pytest.mark.parametrize(
    ("name", "similarity"),
    [("DistMult", "dot"), ("ComplEx", "dot"), ("RESCAL", "dot"), ("TransE-L1", "l1"), ("TransE-L2", "l2"),
     ("RotatE", "l2")],
)  # fmt: skip
def test_similarity(name: str, similarity: str) -> None:
    assert FACTORIES[name]().kgeval_similarity == similarity


def test_seed_reproduces_parameters(model: QueryCandidateModule) -> None:
    name = next(key for key, factory in FACTORIES.items() if type(factory()) is type(model))
    again = FACTORIES[name]()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True))


def test_repr_names_the_sizes(model: QueryCandidateModule) -> None:
    assert f"num_entities={E}, num_relations={R}, dim={D}" in repr(model)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.score_t(torch.tensor([0, 1])), "hr_batch must have shape (B, 2), got (2,)"),
        (lambda m: m.score_h(torch.tensor([[0, 1, 2]])), "rt_batch must have shape (B, 2), got (1, 3)"),
        (lambda m: m.score_hrt(torch.tensor([[0, 1]])), "hrt_batch must have shape (B, 3), got (1, 2)"),
        (lambda m: m.kgeval_query(torch.tensor([[0, 1]]), "both"), "target must be one of {served}, got 'both'"),
        (lambda m: m.kgeval_candidates("middle"), "target must be one of {served}, got 'middle'"),
        (
            lambda m: m.score_t(torch.tensor([[0, 1]]), tails=torch.zeros((2, 2), dtype=torch.long)),
            "candidate ids must have shape (k,) or (1, k), got (2, 2)",
        ),
    ],
)
def test_invalid_inputs(model: QueryCandidateModule, call, message: str) -> None:
    message = message.replace("{served}", str(model.kgeval_targets))
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call(model)


def test_the_relation_form_is_served_where_a_model_has_one() -> None:
    """Relation prediction's fast path: DistMult, ComplEx, RESCAL, TransE; RotatE has none (its relations are
    ranked by expanding triples in score_r)."""
    served = {name: "relation" in factory().kgeval_targets for name, factory in FACTORIES.items()}
    assert served == {"DistMult": True, "ComplEx": True, "RESCAL": True, "TransE-L1": True, "TransE-L2": True,
                      "RotatE": False}  # fmt: skip
    with pytest.raises(ValueError, match=re.escape("target must be one of ('head', 'tail'), got 'relation'")):
        RotatE(3, 2, dim=2).kgeval_candidates("relation")


@pytest.mark.parametrize("p", [0, 3, True, 2.0])
def test_transe_norm_must_be_1_or_2(p) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(f'p must be 1 or 2, got {p!r}')}$"):
        TransE(3, 2, dim=2, p=p)


@pytest.mark.parametrize("factory", [ComplEx, RESCAL, RotatE])
def test_invalid_sizes(factory) -> None:
    with pytest.raises(ValueError, match=r"^dim must be a positive int, got 0$"):
        factory(3, 2, dim=0)


@pytest.mark.parametrize("triples", [[[0, 0, 1], [2, 1, 3], [4, 2, 5]], [[0, 0, 1], [2, 0, 3], [4, 2, 5], [1, 2, 0]]])
def test_rescal_queries_per_query_and_per_relation(triples) -> None:
    """One relation per query takes the batched products, repeated relations one GEMM per relation."""
    model = RESCAL(E, R, dim=D, seed=0)
    batch = torch.tensor(triples)
    with torch.no_grad():
        scores = model.score_hrt(batch)
        tails, heads = model.score_t(batch[:, :2]), model.score_h(batch[:, 1:])
    rows = torch.arange(len(triples))
    for got in (scores, tails[rows, batch[:, 2]], heads[rows, batch[:, 0]]):
        torch.testing.assert_close(got, torch.tensor([brute_force_score(model, *row) for row in triples]))
