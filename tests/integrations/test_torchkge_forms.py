"""The fast paths of TorchKGE's models (kgeval.adapters.torchkge): the query/candidate form of TransE, TorusE (L1),
DistMult, HolE, RESCAL, ComplEx and ANALOGY, the per-relation candidate table of TransH, TransR and TransD -- each
chosen (its scorer, no FastPathWarning) and ranking every head and tail task as a brute force over the model's own
``scoring_function`` over every (h, r, t) does, known triples masked, ties included; no form for TorusE's torus
dissimilarities and ConvKB; a subclass redefining ``scoring_function`` keeps it, with a FastPathWarning.

Weights are tie-heavy and exact: every row of every table is a signed one-hot or four signed ones (norm 1 or 2, so
TorchKGE's L2 normalisation gives +-1 or +-0.5 exactly), entities drawn from a few distinct rows; TorusE's values
are multiples of 1/4 (its ``frac`` exact). Every score is then exact in float32 in both the model's arithmetic and
the fast path's, and the ranks must agree tie for tie.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

pytest.importorskip("torchkge")

from torchkge import models as torchkge_models

from kgeval import RankBasedEvaluator
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer
from kgeval._engine.relation_tables import RelationTableScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.triple_scoring import TripleScorer
from kgeval.adapters import scoring_view
from kgeval.adapters.torchkge import TorchKGEScoring
from kgeval.exceptions import FastPathWarning
from tests.helpers.graphs import random_graph
from tests.helpers.reference import reference_ranks
from tests.support.invariance import assert_ranks_match

E, R = 16, 3
GRAPH = random_graph(3, num_entities=E, num_relations=R, num_triples=40, num_filter=60, duplicate_fraction=0.0)
TARGETS = ("head", "tail")


def _model(cls: str, *args) -> Callable[[], torchkge_models.Model]:
    return lambda: getattr(torchkge_models, cls)(*args)


#: name -> (builder, the scorer of its fast path)
CASES: dict[str, tuple[Callable[[], torchkge_models.Model], type]] = {
    "TransE-L1": (_model("TransEModel", 6, E, R, "L1"), L1Scorer),
    "TransE-L2": (_model("TransEModel", 6, E, R, "L2"), GemmScorer),
    "TorusE-L1": (_model("TorusEModel", 6, E, R, "L1"), L1Scorer),
    "DistMult": (_model("DistMultModel", 6, E, R), GemmScorer),
    "HolE": (_model("HolEModel", 6, E, R), GemmScorer),
    "RESCAL": (_model("RESCALModel", 5, E, R), GemmScorer),
    "ComplEx": (_model("ComplExModel", 4, E, R), GemmScorer),
    "ANALOGY": (_model("AnalogyModel", 8, E, R), GemmScorer),
    "TransH": (_model("TransHModel", 6, E, R), RelationTableScorer),
    "TransR": (_model("TransRModel", 6, 4, E, R), RelationTableScorer),
    "TransD": (_model("TransDModel", 6, 4, E, R), RelationTableScorer),
}
#: models without a fast path: their scoring_function
NO_FORM: dict[str, Callable[[], torchkge_models.Model]] = {
    "TorusE-torus_L1": _model("TorusEModel", 6, E, R, "torus_L1"),
    "TorusE-torus_L2": _model("TorusEModel", 6, E, R, "torus_L2"),
    "TorusE-torus_eL2": _model("TorusEModel", 6, E, R, "torus_eL2"),
    "ConvKB": _model("ConvKBModel", 6, 2, E, R),
}


def tie_heavy(model: torchkge_models.Model) -> torchkge_models.Model:
    """Every row of every 2-d parameter a signed one-hot or four signed ones, entity rows from a pool of 5; for
    TorusE multiples of 1/4 (see the module docstring)."""
    generator = torch.Generator().manual_seed(1)
    torus = isinstance(model, torchkge_models.TorusEModel)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() != 2:
                continue
            rows, width = parameter.shape
            if torus:
                values = torch.randint(-7, 8, (rows, width), generator=generator).float() / 4
            else:
                values = torch.zeros(rows, width)
                for row in range(rows):
                    count = 4 if width >= 4 and bool(torch.randint(0, 2, (1,), generator=generator)) else 1
                    columns = torch.randperm(width, generator=generator)[:count]
                    signs = torch.randint(0, 2, (count,), generator=generator).float() * 2 - 1
                    values[row, columns] = signs
            if rows == model.n_ent and "ent" in name:
                values = values[:5][torch.randint(0, 5, (rows,), generator=generator)]
            parameter.copy_(values)
    return model


def build(name: str) -> torchkge_models.Model:
    torch.manual_seed(0)
    builder = CASES[name][0] if name in CASES else NO_FORM[name]
    return tie_heavy(builder().eval())


def table_of(model: torchkge_models.Model) -> torch.Tensor:
    """Every (h, r, t) score of the model's own scoring_function, as an (E, R, E) table."""
    h, r, t = torch.meshgrid(torch.arange(E), torch.arange(R), torch.arange(E), indexing="ij")
    with torch.no_grad():
        return model.scoring_function(h.reshape(-1), t.reshape(-1), r.reshape(-1)).reshape(E, R, E)


def queries(target: str) -> torch.Tensor:
    return GRAPH.triples[:, :2] if target == "tail" else GRAPH.triples[:, 1:]


@pytest.mark.parametrize("name", list(CASES))
def test_the_fast_path_is_chosen(name: str) -> None:
    model = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        for target in TARGETS:
            scorer = make_scorer(model, target, E, None, probe_queries=queries(target))
            assert type(scorer) is CASES[name][1], target


@pytest.mark.parametrize("sizes", [(1, 1), (3, 4), (None, None)], ids=["1x1", "3x4", "whole"])
@pytest.mark.parametrize("name", list(CASES) + list(NO_FORM))
def test_ranks_equal_a_brute_force_over_the_models_own_scores(name: str, sizes: tuple) -> None:
    model = build(name)
    expected = reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        results = RankBasedEvaluator(batch_size=sizes[0], slice_size=sizes[1]).evaluate(
            model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
        )
    assert_ranks_match(results, expected)
    ties = sum(int((expected[side]["pessimistic"] > expected[side]["optimistic"]).sum()) for side in TARGETS)
    assert ties > 0.1 * 2 * len(GRAPH.triples)  # the weights really tie scores


@pytest.mark.parametrize("name", list(NO_FORM))
def test_models_without_a_form_keep_their_scoring_function(name: str) -> None:
    model = build(name)
    view = scoring_view(model)
    assert type(view) is TorchKGEScoring and view.kgeval_form_refused is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert type(make_scorer(model, "tail", E, None, probe_queries=queries("tail"))) is TripleScorer


@pytest.mark.parametrize("name", list(CASES))
def test_a_subclass_redefining_its_scoring_function_keeps_it(name: str) -> None:
    model = build(name)

    class Negated(type(model)):  # type: ignore[misc]
        def scoring_function(self, h_idx, t_idx, r_idx):
            return -super().scoring_function(h_idx, t_idx, r_idx)

    model.__class__ = Negated
    with pytest.warns(FastPathWarning, match="Negated.scoring_function redefines TorchKGE's scoring"):
        scorer = make_scorer(model, "tail", E, None, probe_queries=queries("tail"))
    assert isinstance(scorer, TripleScorer)
    with pytest.warns(FastPathWarning):
        results = RankBasedEvaluator().evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                                use_tqdm=False)  # fmt: skip
    assert_ranks_match(results, reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples))


@pytest.mark.parametrize("name", ["HolE", "TransD"])
def test_an_unmodified_subclass_keeps_the_fast_path(name: str) -> None:
    model = build(name)
    model.__class__ = type(f"Plain{type(model).__name__}", (type(model),), {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert type(make_scorer(model, "head", E, None, probe_queries=queries("head"))) is CASES[name][1]


def test_a_translation_model_with_another_dissimilarity_has_no_form() -> None:
    model = build("TransH")
    model.dissimilarity = torchkge_models.interfaces.l1_torus_dissimilarity
    view = scoring_view(model)
    assert type(view) is TorchKGEScoring
    model.dissimilarity = torchkge_models.interfaces.l1_dissimilarity
    assert scoring_view(model).kgeval_similarity == "l1"
