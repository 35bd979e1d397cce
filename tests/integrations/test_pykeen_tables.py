"""PyKEEN's distance interactions with a per-relation candidate table (kgeval.adapters.pykeen_tables): each one's
view is recognised, scored through kgeval._engine.relation_tables.RelationTableScorer without a FastPathWarning,
and ranks every task as a brute force over the PyKEEN model's own ``predict`` rows (with and without inverse
triples, at two sizes); the interactions and settings without a table get no view.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from pykeen import models as pykeen_models  # noqa: E402
from pykeen.models import ERModel  # noqa: E402
from pykeen.nn import modules as pykeen_modules  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402

from kgeval._engine.relation_tables import RelationTableScorer  # noqa: E402
from kgeval.adapters.pykeen_tables import TABLES, PyKEENRelationTable, relation_table_form  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from kgeval.protocol import QueryCandidateModel, RelationTableModel  # noqa: E402
from tests.integrations.test_pykeen_forms import (  # noqa: E402
    _factory,
    brute_force,
    chosen_scorers,
    kgeval_ranks,
    split,
)

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)

TARGETS = ("head", "tail")


def _model(cls: str, **kwargs) -> Callable[[TriplesFactory], ERModel]:
    def build(factory: TriplesFactory) -> ERModel:
        return getattr(pykeen_models, cls)(triples_factory=factory, random_seed=0, **kwargs)

    return build


def _scaled(interaction: str, **kwargs) -> Callable[[TriplesFactory], ERModel]:
    """An ERModel of TripleRE / LineaRE (no model class of their own): one entity and three relation vectors."""

    def build(factory: TriplesFactory) -> ERModel:
        return ERModel(triples_factory=factory, interaction=interaction, interaction_kwargs=kwargs,
                       entity_representations_kwargs={"shape": 5},
                       relation_representations_kwargs=[{"shape": 5}] * 3, random_seed=0)  # fmt: skip

    return build


#: name -> (builder, similarity, interaction class name)
CASES: dict[str, tuple[Callable[[TriplesFactory], ERModel], str, str]] = {
    "TransH": (_model("TransH", embedding_dim=5), "l2", "TransHInteraction"),
    "TransH-l1": (_model("TransH", embedding_dim=5, scoring_fct_norm=1), "l1", "TransHInteraction"),
    "TransR": (_model("TransR", embedding_dim=5, relation_dim=3), "l1", "TransRInteraction"),
    "TransR-l2": (_model("TransR", embedding_dim=5, relation_dim=3, scoring_fct_norm=2), "l2", "TransRInteraction"),
    "TransD": (_model("TransD", embedding_dim=5, relation_dim=4), "l2", "TransDInteraction"),
    "PairRE": (_model("PairRE", embedding_dim=5), "l1", "PairREInteraction"),
    "PairRE-l2": (_model("PairRE", embedding_dim=5, p=2), "l2", "PairREInteraction"),
    "SE": (_model("SE", embedding_dim=5), "l1", "SEInteraction"),
    "TripleRE": (_scaled("TripleRE"), "l1", "TripleREInteraction"),
    "TripleRE-no-u": (_scaled("TripleRE", u=None, p=2), "l2", "TripleREInteraction"),
    "LineaRE": (_scaled("LineaRE", p=1), "l1", "LineaREInteraction"),
    "MuRE": (_model("MuRE", embedding_dim=5), "l2", "MuREInteraction"),
    "MuRE-l1": (_model("MuRE", embedding_dim=5, p=1), "l1", "MuREInteraction"),
}


def build(name: str, inverse: bool) -> ERModel:
    """The model with random weights small enough that no projection reaches its clamp (TransR's, TransD's): a
    clamped projection has a fixed norm, and in L1 the distances of such candidates tie exactly in arithmetic
    while float rounding orders them -- PyKEEN's sums one way, the table's another."""
    model = CASES[name][0](_factory(inverse))
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.25 * torch.randn(parameter.shape, generator=generator).to(parameter.dtype))
    return model.eval()


@pytest.fixture(params=[False, True], ids=["plain", "inverse"])
def inverse(request: pytest.FixtureRequest) -> bool:
    return request.param


def test_every_table_interaction_is_covered() -> None:
    assert {interaction for _build, _similarity, interaction in CASES.values()} == set(TABLES)


@pytest.mark.parametrize("name", list(CASES))
def test_the_table_is_recognised_and_chosen(name: str, inverse: bool) -> None:
    model = build(name, inverse)
    _builder, similarity, interaction = CASES[name]
    view = relation_table_form(model)
    assert isinstance(view, PyKEENRelationTable) and view.kind == interaction
    assert isinstance(view, RelationTableModel) and not isinstance(view, QueryCandidateModel)
    assert view.kgeval_similarity == similarity
    for target, scorer in chosen_scorers(view).items():
        assert type(scorer) is RelationTableScorer, target


@pytest.mark.parametrize("sizes", [(3, 4), (None, None)], ids=["3x4", "whole"])
@pytest.mark.parametrize("name", list(CASES))
def test_ranks_equal_a_brute_force_over_the_models_own_scores(name: str, inverse: bool, sizes: tuple) -> None:
    model = build(name, inverse)
    view = relation_table_form(model)
    assert view is not None
    evaluated, known = split()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        got = kgeval_ranks(view, evaluated, known, batch_size=sizes[0], slice_size=sizes[1])
    expected = brute_force(model, evaluated, known)
    for target in TARGETS:
        for field, (mine, theirs) in zip(("optimistic", "pessimistic", "num_candidates"), zip(got[target],
                                         expected[target], strict=True), strict=True):  # fmt: skip
            np.testing.assert_array_equal(mine, theirs, err_msg=f"{name} {target} {field}")


@pytest.mark.parametrize("builder", [
    _model("TorusE", embedding_dim=5),  # the torus distance
    _model("UM", embedding_dim=5),  # no relation: the plain query/candidate form (kgeval.adapters.pykeen)
    _model("TransE", embedding_dim=5),  # likewise
    _model("TransH", embedding_dim=5, scoring_fct_norm=3),  # p = 3
    _model("MuRE", embedding_dim=5, power_norm=False),  # a bias added to the unsquared L2 distance
], ids=["TorusE", "UM", "TransE", "TransH-p3", "MuRE-unsquared"])  # fmt: skip
def test_interactions_and_settings_without_a_table_get_no_view(builder: Callable) -> None:
    assert relation_table_form(builder(_factory(False))) is None


def test_a_subclass_or_a_users_interaction_gets_no_view() -> None:
    class Mine(pykeen_models.TransR):
        def score_t(self, *args, **kwargs):
            return super().score_t(*args, **kwargs)

    assert relation_table_form(Mine(triples_factory=_factory(False), embedding_dim=5, relation_dim=3)) is None

    class MyPairRE(pykeen_modules.PairREInteraction):
        pass

    model = ERModel(triples_factory=_factory(False), interaction=MyPairRE(p=1), entity_representations_kwargs={
        "shape": 5}, relation_representations_kwargs=[{"shape": 5}] * 2)  # fmt: skip
    assert relation_table_form(model) is None
    assert relation_table_form(torch.nn.Linear(2, 2)) is None
