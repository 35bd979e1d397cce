"""kgeval.integrations.pykeen: PyKEEN models get the GEMM fast path and rank exactly like PyKEEN's scoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pykeen = pytest.importorskip("pykeen")

from pykeen import models as pykeen_models  # noqa: E402
from pykeen.datasets import Nations  # noqa: E402
from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval.integrations import adapt  # noqa: E402
from kgeval.scoring import GemmScorer, L1Scorer, make_scorer  # noqa: E402

pytestmark = pytest.mark.pykeen

CONFIGS = {
    "DistMult": ("DistMult", {}, "dot"),
    "ComplEx": ("ComplEx", {}, "dot"),
    "RESCAL": ("RESCAL", {}, "dot"),
    "TransE-L1": ("TransE", {"scoring_fct_norm": 1}, "l1"),
    "TransE-L2": ("TransE", {"scoring_fct_norm": 2}, "l2"),
    "RotatE": ("RotatE", {}, "l2"),
}


@pytest.fixture(scope="module")
def nations():
    return Nations()


def _model(nations, name: str, **extra):
    cls, kwargs, _similarity = CONFIGS[name]
    return getattr(pykeen_models, cls)(
        triples_factory=nations.training, embedding_dim=8, random_seed=0, **kwargs, **extra
    )


def _evaluate(model, nations, **kwargs):
    known = [nations.training.mapped_triples, nations.validation.mapped_triples]
    return RankBasedEvaluator(**kwargs).evaluate(model, nations.testing.mapped_triples, known, use_tqdm=False)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_path_ranks_equal_pykeen_scoring(nations, name: str) -> None:
    model = _model(nations, name)
    adapter = adapt(model)
    assert adapter is not None
    assert adapter.kgeval_similarity == CONFIGS[name][2]
    scorer = make_scorer(model, "head", nations.num_entities, None)
    assert isinstance(scorer, L1Scorer if name == "TransE-L1" else GemmScorer)
    fast = _evaluate(model, nations, batch_size=16, slice_size=5)
    own = _evaluate(model, nations, fast_path=False)  # PyKEEN's score_t / score_h with tails= / heads=
    for column in ("optimistic", "pessimistic", "num_candidates", "task_index", "side"):
        np.testing.assert_array_equal(fast.records[column], own.records[column])


@pytest.mark.parametrize("name", ["DistMult", "TransE-L2", "ComplEx"])
def test_integer_embeddings_keep_exact_ties(nations, name: str) -> None:
    model = _model(nations, name)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-1, 2, parameter.shape, generator=generator).to(parameter.dtype))
    fast, own = _evaluate(model, nations), _evaluate(model, nations, fast_path=False)
    assert (fast.records["pessimistic"] > fast.records["optimistic"]).mean() > 0.1  # many ties
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(fast.records[column], own.records[column])


def test_unsupported_models_use_their_own_scoring(nations) -> None:
    assert adapt(pykeen_models.TransH(triples_factory=nations.training, embedding_dim=4, random_seed=0)) is None
    assert adapt(_model(nations, "RotatE")) is not None
    rotate_l1 = _model(nations, "RotatE")
    rotate_l1.interaction.p = 1
    assert adapt(rotate_l1) is None
    inverse = Nations(create_inverse_triples=True)
    assert adapt(pykeen_models.DistMult(triples_factory=inverse.training, embedding_dim=4, random_seed=0)) is None
    assert adapt(torch.nn.Linear(2, 2)) is None


def test_metrics_equal_pykeen_evaluator(nations) -> None:
    model = _model(nations, "DistMult")
    known = [nations.training.mapped_triples, nations.validation.mapped_triples]
    ours = _evaluate(model, nations)
    theirs = PyKEENEvaluator(filtered=True).evaluate(
        model, nations.testing.mapped_triples, additional_filter_triples=known, use_tqdm=False, batch_size=64
    )
    for key in ("both.realistic.inverse_harmonic_mean_rank", "tail.optimistic.hits_at_10", "head.pessimistic.mr"):
        assert ours.get_metric(key) == pytest.approx(theirs.get_metric(key), rel=1e-6)  # PyKEEN sums in float32
