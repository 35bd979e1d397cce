"""The query/candidate form of dicee's DistMult, ComplEx, QMult, OMult, Keci and CKeci (kgeval.adapters.dicee): chosen
(GemmScorer, no FastPathWarning) for tails, for heads through reciprocal relations, and for heads through ``score``
where the class allows it; ranking every head and tail task as a brute force over the model's own scores does --
``forward_k_vs_all`` of every (h, r) for tails, ``forward_triples`` of every (h, r, t) for heads without reciprocals,
``forward_k_vs_all`` of every (t, r_inverse) with them -- known triples masked, ties included. A subclass redefining a
scoring method keeps dicee's methods, with a FastPathWarning.

Weights are tie-heavy and exact: entries in {-1, 0, 1}, entities drawn from 5 distinct rows; QMult's relation
quaternions and OMult's relation octonions signed units (their normalisation leaves them). Every score is then an
exact float32 integer in both the model's arithmetic and the form's, and the ranks must agree tie for tie.
"""

from __future__ import annotations

import warnings

import pytest
import torch

dicee_models = pytest.importorskip("dicee.models")

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval._engine.gemm_scoring import GemmScorer  # noqa: E402
from kgeval._engine.scorer_choice import make_scorer  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.dicee import DiceeQueryCandidate, DiceeScoring, with_relation_index  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from tests.helpers.graphs import random_graph  # noqa: E402
from tests.helpers.reference import reference_ranks  # noqa: E402
from tests.support.invariance import assert_ranks_match  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

E, R = 16, 3
GRAPH = random_graph(5, num_entities=E, num_relations=R, num_triples=40, num_filter=60, duplicate_fraction=0.0)
TARGETS = ("head", "tail")

#: name -> (dicee class, embedding_dim, extra args, whether heads without reciprocals have the form)
CASES: dict[str, tuple[str, int, dict, bool]] = {
    "DistMult": ("DistMult", 8, {}, True),
    "ComplEx": ("ComplEx", 8, {}, True),
    "QMult": ("QMult", 8, {}, True),
    "OMult": ("OMult", 16, {}, True),
    "Keci-p0q1": ("Keci", 8, {"p": 0, "q": 1}, False),
    "Keci-p2q2": ("Keci", 10, {"p": 2, "q": 2}, False),  # a constant of the query (its sigma terms)
    "CKeci-p1q1": ("CKeci", 9, {"p": 1, "q": 1}, False),
}


def build(name: str, reciprocal: bool) -> dicee_models.BaseKGE:
    cls, dim, extra, _heads = CASES[name]
    args = {"embedding_dim": dim, "num_entities": E, "num_relations": 2 * R if reciprocal else R, "model": cls,
            "scoring_technique": "KvsAll" if reciprocal else "NegSample", **extra}  # fmt: skip
    if reciprocal:
        args["apply_reciprical_or_noise"] = True
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(dicee_models, cls)(args)
    tie_heavy(model)
    if reciprocal:  # relation r's reverse is r + R
        index = {f"r{r}": r for r in range(R)} | {f"r{r}_inverse": r + R for r in range(R)}
        with_relation_index(model, index)
    return model.eval()


def tie_heavy(model: dicee_models.BaseKGE) -> None:
    """See the module docstring."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-1, 2, parameter.shape, generator=generator).float())
        entities = model.entity_embeddings.weight
        entities.copy_(entities[:5][torch.randint(0, 5, (len(entities),), generator=generator)])
        relations = model.relation_embeddings.weight
        count, dim = relations.shape
        if type(model).__name__ == "QMult":  # one signed unit in each consecutive 4 (its quaternion_normalizer)
            units = torch.zeros(count, dim // 4, 4)
            units.scatter_(2, torch.randint(0, 4, (count, dim // 4, 1), generator=generator), 1.0)
            relations.copy_(units.reshape(count, dim) * _signs((count, dim), generator))
        if type(model).__name__ == "OMult":  # one signed unit among the 8 hsplit parts of each coordinate
            units = torch.zeros(count, 8, dim // 8)
            units.scatter_(1, torch.randint(0, 8, (count, 1, dim // 8), generator=generator), 1.0)
            relations.copy_(units.reshape(count, dim) * _signs((count, dim), generator))


def _signs(shape: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, shape, generator=generator).float() * 2 - 1


def own_tables(model: dicee_models.BaseKGE, reciprocal: bool) -> dict[str, torch.Tensor]:
    """side -> the (E, R, E) table of the scores kgeval's own path ranks that side by (see the module docstring)."""
    with torch.no_grad():
        hr = torch.cartesian_prod(torch.arange(E), torch.arange(R))
        tails = model.forward_k_vs_all(x=hr).reshape(E, R, E)
        if reciprocal:  # heads[h, r, t] = forward_k_vs_all(t, r + R)[h]
            heads = model.forward_k_vs_all(x=torch.stack([hr[:, 0], hr[:, 1] + R], dim=1)).reshape(E, R, E)
            heads = heads.permute(2, 1, 0)
        else:
            hrt = torch.cartesian_prod(torch.arange(E), torch.arange(R), torch.arange(E))
            heads = model.forward_triples(hrt).reshape(E, R, E)
    return {"head": heads, "tail": tails}


def expected_ranks(model: dicee_models.BaseKGE, reciprocal: bool) -> dict:
    tables = own_tables(model, reciprocal)
    return {side: reference_ranks(tables[side], GRAPH.triples, GRAPH.filter_triples)[side] for side in TARGETS}


def comparable_targets(name: str, reciprocal: bool) -> tuple[str, ...]:
    """The sides whose own scores are a function of the triple: not the heads of Keci with p > 0 without
    reciprocals (its forward_triples sums the e_1..e_p terms over every tail of the batch: dicee's
    ``einsum('brp, erp -> b')``)."""
    return ("tail",) if not reciprocal and CASES[name][2].get("p", 0) > 0 else TARGETS


def queries(target: str) -> torch.Tensor:
    return GRAPH.triples[:, :2] if target == "tail" else GRAPH.triples[:, 1:]


@pytest.fixture(params=[False, True], ids=["negsample", "reciprocal"])
def reciprocal(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.mark.parametrize("name", list(CASES))
def test_the_form_is_chosen(name: str, reciprocal: bool) -> None:
    model = build(name, reciprocal)
    view = scoring_view(model)
    assert type(view) is DiceeQueryCandidate
    served = TARGETS if reciprocal or CASES[name][3] else ("tail",)
    assert tuple(view.kgeval_targets) == served
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        for target in served:
            scorer = make_scorer(model, target, E, None, probe_queries=queries(target))
            assert type(scorer) is GemmScorer, target


@pytest.mark.parametrize("sizes", [(1, 1), (3, 4), (None, None)], ids=["1x1", "3x4", "whole"])
@pytest.mark.parametrize("name", list(CASES))
def test_ranks_equal_a_brute_force_over_the_models_own_scores(name: str, reciprocal: bool, sizes: tuple) -> None:
    model = build(name, reciprocal)
    expected = expected_ranks(model, reciprocal)
    targets = comparable_targets(name, reciprocal)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        results = RankBasedEvaluator(batch_size=sizes[0], slice_size=sizes[1]).evaluate(
            model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, targets=targets, use_tqdm=False
        )
    assert tuple(results.targets) == targets
    assert_ranks_match(results, expected)
    ties = sum(int((expected[side]["pessimistic"] > expected[side]["optimistic"]).sum()) for side in targets)
    assert ties > 0.1 * len(targets) * len(GRAPH.triples)  # the weights really tie scores


@pytest.mark.parametrize("name", ["DistMult", "Keci-p2q2"])
def test_a_subclass_redefining_its_scoring_keeps_dicees_methods(name: str, reciprocal: bool) -> None:
    model = build(name, reciprocal)

    class Negated(type(model)):  # type: ignore[misc]
        def forward_k_vs_all(self, x):
            return -super().forward_k_vs_all(x)

    model.__class__ = Negated
    view = scoring_view(model)
    assert type(view) is DiceeScoring
    with pytest.warns(FastPathWarning, match="Negated.forward_k_vs_all redefines dicee's scoring"):
        scorer = make_scorer(model, "tail", E, None, probe_queries=queries("tail"))
    assert type(scorer) is not GemmScorer
    targets = comparable_targets(name, reciprocal)
    with pytest.warns(FastPathWarning):
        results = RankBasedEvaluator().evaluate(
            model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, targets=targets, use_tqdm=False
        )
    assert_ranks_match(results, expected_ranks(model, reciprocal))


def test_an_unmodified_subclass_keeps_the_form() -> None:
    model = build("QMult", False)
    model.__class__ = type("PlainQMult", (type(model),), {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert type(make_scorer(model, "head", E, None, probe_queries=queries("head"))) is GemmScorer


def test_other_dicee_models_have_no_form() -> None:
    args = {
        "embedding_dim": 8,
        "num_entities": E,
        "num_relations": R,
        "model": "TransE",
        "scoring_technique": "NegSample",
    }
    view = scoring_view(dicee_models.TransE(args).eval())
    assert type(view) is DiceeScoring and view.kgeval_form_refused is None
