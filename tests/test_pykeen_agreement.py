"""kgeval and PyKEEN 1.11's RankBasedEvaluator agree on every metric key both report, on real data.

The same pykeen.models.DistMult (weights copied from a briefly trained kgeval DistMult, so ranks are
meaningful) is evaluated by both with the same filter triples. Skipped when PyKEEN is not installed.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset, shared_data_dir
from kgeval.models import DistMult
from kgeval.models.training import train_model

pykeen_evaluation = pytest.importorskip("pykeen.evaluation")
pykeen_models = pytest.importorskip("pykeen.models")
pykeen_triples = pytest.importorskip("pykeen.triples")

#: PyKEEN 1.11 collapses every k of these into one key, so they are not comparable key by key
COLLIDING_KEYS = ("adjusted_hits_at_k", "z_hits_at_k")


def datasets() -> list:
    names = [pytest.param("umls"), pytest.param("kinship"), pytest.param("nations")]
    folder = shared_data_dir()
    skip = pytest.mark.skipif(folder is None or not (folder / "codex-s").is_dir(), reason="shared data absent")
    names.append(pytest.param(str(folder / "codex-s") if folder else "codex-s", marks=skip, id="codex-s"))
    return names


def pykeen_distmult(data, trained: DistMult):
    factory = pykeen_triples.CoreTriplesFactory.create(
        data.train, num_entities=data.num_entities, num_relations=data.num_relations
    )
    model = pykeen_models.DistMult(triples_factory=factory, embedding_dim=trained.dim, random_seed=0)
    with torch.no_grad():
        model.entity_representations[0]._embeddings.weight.copy_(trained.entity_embeddings.weight)
        model.relation_representations[0]._embeddings.weight.copy_(trained.relation_embeddings.weight)
    return model


@pytest.mark.pykeen
@pytest.mark.parametrize("dataset", datasets())
def test_all_common_keys_agree(dataset: str) -> None:
    data = load_dataset(dataset)
    trained = DistMult(data.num_entities, data.num_relations, dim=32, seed=0)
    train_model(trained, data.train, num_epochs=2 if len(data.train) < 10_000 else 1, seed=0, use_tqdm=False)
    model = pykeen_distmult(data, trained)
    filters = [data.train, data.valid]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = (
            pykeen_evaluation.RankBasedEvaluator(filtered=True)
            .evaluate(model, data.test, additional_filter_triples=filters, use_tqdm=False, batch_size=256)
            .to_flat_dict()
        )
    # fast_path=False: score through PyKEEN's own score_t / score_h, so both evaluators rank the same floats (the
    # GEMM fast path computes the same scores in another summation order, which can flip a near-tie: 1 of 3,656
    # codex-s tasks by one rank)
    evaluator = RankBasedEvaluator(fast_path=False)
    actual = evaluator.evaluate(model, data.test, additional_filter_triples=filters, use_tqdm=False)
    flat = actual.to_flat_dict()
    common = [key for key in expected if key in flat and not key.endswith(COLLIDING_KEYS)]
    assert len(common) >= 144  # every plain metric of every side and rank type
    wrong = {
        key: (flat[key], expected[key])
        for key in common
        if not math.isclose(flat[key], expected[key], rel_tol=1e-6, abs_tol=1e-9)
    }
    assert not wrong, wrong
