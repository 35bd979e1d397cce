"""kgeval's ClassificationEvaluator against PyKEEN's own (pykeen.evaluation.ClassificationEvaluator, v1.11.1) on
the same PyKEEN model: all 22 metrics x (head, tail, both) compared key by key, on Nations and UMLS (shipped) and
CoDEx-S (when ../shared/data has it); the pipeline and the streaming interface too."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("pykeen")

from pykeen.evaluation import ClassificationEvaluator as PyKEENClassificationEvaluator
from pykeen.evaluation import Evaluator
from pykeen.models import DistMult, TransE
from pykeen.triples import CoreTriplesFactory

from kgeval.datasets import load_dataset, load_shipped_dataset, shared_data_dir
from kgeval.integrations.pykeen import ClassificationEvaluator, ClassificationMetricResults
from kgeval.variants.classification.pykeen_formulas import PYKEEN_METRICS

pytestmark = [pytest.mark.pykeen]


def dataset(name: str):
    if name in ("nations", "umls"):
        return load_shipped_dataset(name)
    if shared_data_dir() is None or not (shared_data_dir() / "codex-s").exists():
        pytest.skip("CoDEx-S is not in ../shared/data")
    return load_dataset(name)


def pykeen_model(data, cls, seed: int = 0):
    factory = CoreTriplesFactory.create(data.train, num_entities=data.num_entities, num_relations=data.num_relations)
    return cls(triples_factory=factory, embedding_dim=16, random_seed=seed)


def pykeens_results(model, data, triples=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its overflow and zero-division warnings
        return PyKEENClassificationEvaluator().evaluate(model, data.test if triples is None else triples,
                                                        use_tqdm=False, batch_size=256,
                                                        additional_filter_triples=[data.train, data.valid])  # fmt: skip


@pytest.mark.parametrize(
    ("name", "model_class"),
    [("nations", DistMult), ("nations", TransE), ("umls", DistMult), ("umls", TransE),
     pytest.param("codex-s", DistMult, marks=pytest.mark.slow)],  # ~50 s, PyKEEN's time
)  # fmt: skip
def test_the_22_metrics_equal_pykeens_on_every_side(name, model_class):
    """On CoDEx-S the first 200 test triples (PyKEEN takes 5.5 minutes for all 1,828 here; the full comparison is
    in docs/classification.md)."""
    data = dataset(name)
    triples = data.test[:200] if name == "codex-s" else data.test
    model = pykeen_model(data, model_class)
    expected = pykeens_results(model, data, triples).to_flat_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = ClassificationEvaluator().evaluate(model, triples, additional_filter_triples=[data.train, data.valid])
    assert isinstance(got, ClassificationMetricResults)
    assert len(expected) == 66 and set(got.to_flat_dict()) == set(expected)
    for key, value in expected.items():
        assert got.get_metric(key) == pytest.approx(value, rel=1e-12, abs=1e-12), key
    assert all(side.confusion.tied == 0 for side in got.all_pairs.sides.values())  # no tie decided a class


def test_the_fast_path_splits_ties_across_queries_that_pykeen_keeps():
    """DistMult scores (h, r, t) the same from both sides; a matrix multiply rounds them apart: the documented
    reason the all-pairs protocol scores through the model's own methods by default."""
    data = load_shipped_dataset("nations")
    model = pykeen_model(data, DistMult)
    expected = pykeens_results(model, data).get_metric("both.average_precision_score")
    filters = [data.train, data.valid]
    fast = ClassificationEvaluator(fast_path=True).evaluate(model, data.test, additional_filter_triples=filters)
    assert fast.get_metric("both.average_precision_score") != expected


def test_keys_and_results_are_pykeens():
    data = load_shipped_dataset("nations")
    model = pykeen_model(data, TransE)
    results = ClassificationEvaluator().evaluate(model, data.test, additional_filter_triples=[data.train])
    assert isinstance(ClassificationEvaluator(), Evaluator)
    assert ClassificationEvaluator.get_normalized_name() == "classification"
    assert sorted(results.to_dict()) == ["both", "head", "tail"]
    assert sorted(results.to_dict()["both"]) == sorted(PYKEEN_METRICS)
    assert results.get_metric("accuracy") == results.get_metric("both.accuracy")
    assert list(results.to_df().columns) == ["Side", "Metric", "Value"]
    # kgeval's own numbers of the same pairs: accuracy is (TP + TN) / n there, TN * TP / n in PyKEEN's
    both = results.all_pairs.sides["both"]
    c = both.confusion
    assert both.metrics()["accuracy"] == (c.tp + c.tn) / c.total
    assert results.get_metric("both.accuracy") == c.tn * c.tp / c.total


def test_the_streaming_interface_equals_evaluate():
    """PyKEEN's evaluation loops hand full rows and masks to process_scores_; finalize gives evaluate's numbers."""
    data = load_shipped_dataset("nations")
    model = pykeen_model(data, TransE)
    known = torch.cat([data.test, data.train, data.valid])
    evaluator = ClassificationEvaluator()
    with torch.no_grad():
        for target, column, predict in (("head", 0, model.score_h), ("tail", 2, model.score_t)):
            rest = [c for c in range(3) if c != column]
            for batch in torch.split(data.test, 50):
                scores = predict(batch[:, rest])
                mask = torch.zeros_like(scores, dtype=torch.bool)
                for row, triple in enumerate(batch.tolist()):
                    for entity in range(data.num_entities):
                        candidate = list(triple)
                        candidate[column] = entity
                        mask[row, entity] = bool(((known == torch.tensor(candidate)).all(dim=1)).any())
                evaluator.process_scores_(batch, target, scores, dense_positive_mask=mask)
    streamed = evaluator.finalize()
    direct = ClassificationEvaluator().evaluate(model, data.test, additional_filter_triples=[data.train, data.valid])
    for key, value in direct.to_flat_dict().items():
        assert streamed.get_metric(key) == pytest.approx(value, rel=1e-12, abs=1e-12), key
    with pytest.raises(ValueError, match="no scores"):
        evaluator.finalize()
    with pytest.raises(KeyError, match="positive mask"):
        evaluator.process_scores_(data.test[:2], "tail", torch.zeros(2, data.num_entities))


def test_training_triples_can_be_left_out_of_both_classes():
    data = load_shipped_dataset("nations")
    model = pykeen_model(data, TransE)
    kept = ClassificationEvaluator().evaluate(model, data.test, additional_filter_triples=[data.train])
    leaving = ClassificationEvaluator(exclude_filter_triples=True)
    left = leaving.evaluate(model, data.test, additional_filter_triples=[data.train])
    both_kept, both_left = kept.all_pairs.sides["both"], left.all_pairs.sides["both"]
    assert both_left.excluded > 0
    assert both_left.num_pairs + both_left.excluded == both_kept.num_pairs
    assert both_left.tally.num_positives < both_kept.tally.num_positives


def test_a_validation_fitted_threshold_and_refusals():
    data = load_shipped_dataset("nations")
    model = pykeen_model(data, TransE)
    results = ClassificationEvaluator(validation_triples=data.valid).evaluate(
        model, data.test, additional_filter_triples=[data.train]
    )
    assert results.all_pairs.threshold_rule == "validation (accuracy)"
    assert not np.isnan(results.all_pairs.sides["both"].threshold)
    with pytest.raises(ValueError, match="restrict_entities_to"):
        ClassificationEvaluator().evaluate(model, data.test, restrict_entities_to=[0, 1])
    with pytest.raises(TypeError, match="unexpected"):
        ClassificationEvaluator().evaluate(model, data.test, colour="blue")


@pytest.mark.slow
def test_the_pipeline_takes_it():
    from pykeen.pipeline import pipeline

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pipeline(dataset="Nations", model="TransE", model_kwargs={"embedding_dim": 8},
                          training_kwargs={"num_epochs": 1, "use_tqdm": False}, random_seed=0,
                          evaluator=ClassificationEvaluator, evaluation_kwargs={"use_tqdm": False})  # fmt: skip
    assert isinstance(result.metric_results, ClassificationMetricResults)
    assert 0 <= result.metric_results.get_metric("both.area_under_the_receiver_operating_characteristic_curve") <= 1
