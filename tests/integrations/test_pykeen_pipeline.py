"""kgeval inside PyKEEN's own machinery: pipeline, early stopper and evaluate()'s PyKEEN keyword arguments.

The same pipeline (same seed, same data, same model) is run with PyKEEN's evaluator and with kgeval's; training is
deterministic on the CPU, so the stopper must see the same validation numbers, stop at the same epoch, and the
final test results must agree key by key with PyKEEN's.
"""

from __future__ import annotations

import io
import logging
import warnings

import pytest
import torch

pytest.importorskip("pykeen")

from pykeen.datasets import Nations
from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator
from pykeen.models import DistMult
from pykeen.pipeline import pipeline

import kgeval
from kgeval.integrations.pykeen import RankBasedEvaluator

pytestmark = [pytest.mark.pykeen, pytest.mark.slow]  # PyKEEN pipelines that train: ~1.5 minutes in all


def run_pipeline(evaluator, **kwargs):
    """A small pipeline with inverse triples and PyKEEN's early stopper (default metric: hits_at_k)."""
    logging.getLogger("pykeen").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pipeline(
            dataset="Nations",
            dataset_kwargs={"create_inverse_triples": True},
            model="DistMult",
            model_kwargs={"embedding_dim": 16},
            training_loop="LCWA",
            training_kwargs={"num_epochs": 30, "batch_size": 128, "use_tqdm": False},
            random_seed=1,
            evaluator=evaluator,
            stopper="early",
            stopper_kwargs={"frequency": 3, "patience": 2, "relative_delta": 0.002},
            evaluation_kwargs={"use_tqdm": False},
            **kwargs,
        )


@pytest.fixture(scope="module")
def pykeen_run():
    return run_pipeline(PyKEENEvaluator)


@pytest.mark.parametrize(
    "evaluator",
    [RankBasedEvaluator, RankBasedEvaluator(), kgeval.RankBasedEvaluator()],
    ids=["integration class", "integration instance", "kgeval instance"],
)
def test_pipeline_and_stopper_give_pykeens_numbers(pykeen_run, evaluator) -> None:
    ours = run_pipeline(evaluator)
    assert ours.stopper.stopped == pykeen_run.stopper.stopped
    assert ours.stopper.best_epoch == pykeen_run.stopper.best_epoch
    assert ours.stopper.results == pytest.approx(pykeen_run.stopper.results, rel=1e-6)  # hits@10 per validation
    theirs = pykeen_run.metric_results.to_flat_dict()
    flat = ours.metric_results.to_flat_dict()
    assert set(theirs) <= set(flat)
    for key, value in theirs.items():
        assert flat[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key  # PyKEEN aggregates in float32


def test_evaluator_kwargs_reach_kgeval() -> None:
    result = run_pipeline(RankBasedEvaluator, evaluator_kwargs={"ks": (1, 10), "filtered": True})
    assert result.metric_results.ks == (1, 10)
    assert "both.realistic.hits_at_3" not in result.metric_results.to_flat_dict()


def test_the_integration_class_is_a_pykeen_evaluator() -> None:
    from pykeen.evaluation import Evaluator, evaluator_resolver

    assert issubclass(RankBasedEvaluator, Evaluator)
    assert isinstance(evaluator_resolver.make(RankBasedEvaluator), RankBasedEvaluator)
    assert RankBasedEvaluator.metric_result_cls.key_to_string("hits@k") == "both.realistic.hits_at_10"  # HPO
    with pytest.raises(ValueError, match="no ranks to finalize"):  # the streaming interface, with nothing streamed
        RankBasedEvaluator().finalize()


@pytest.fixture(scope="module")
def nations() -> Nations:
    return Nations()


@pytest.fixture(scope="module")
def model(nations: Nations) -> DistMult:
    return DistMult(triples_factory=nations.training, embedding_dim=8, random_seed=0)


def test_a_positional_batch_size_fails_loudly(nations: Nations, model: DistMult) -> None:
    """PyKEEN's third positional parameter is batch_size; kgeval's options are keyword-only."""
    with pytest.raises(TypeError):
        kgeval.RankBasedEvaluator().evaluate(model, nations.testing.mapped_triples, 32)  # type: ignore[misc]


def test_pykeens_keyword_arguments_are_accepted(nations: Nations, model: DistMult) -> None:
    triples = nations.testing.mapped_triples
    known = [nations.training.mapped_triples, nations.validation.mapped_triples]
    reference = kgeval.RankBasedEvaluator().evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)
    stream = io.StringIO()
    results = kgeval.RankBasedEvaluator().evaluate(
        model=model,
        mapped_triples=triples,
        batch_size=7,
        slice_size=5,
        device=model.device,
        use_tqdm=True,
        tqdm_kwargs={"desc": "validation pass", "file": stream, "disable": False},  # a StringIO is no terminal
        restrict_entities_to=None,
        restrict_relations_to=None,
        do_time_consuming_checks=False,
        additional_filter_triples=known,
        pre_filtered_triples=True,
        targets=("head", "tail"),
    )
    assert results == reference
    assert "validation pass" in stream.getvalue()


def test_device_other_than_the_models_is_refused(nations: Nations, model: DistMult) -> None:
    with pytest.raises(ValueError, match="never moves it"):
        kgeval.RankBasedEvaluator().evaluate(model, nations.testing.mapped_triples, device="meta", use_tqdm=False)
    with pytest.raises(ValueError, match="device must be"):
        kgeval.RankBasedEvaluator().evaluate(model, nations.testing.mapped_triples, device=3.5, use_tqdm=False)


def test_pre_filtered_triples(nations: Nations, model: DistMult) -> None:
    """PyKEEN's pre_filtered_triples=False filters the triples to the restriction; True promises they are."""
    triples = nations.testing.mapped_triples
    allowed = torch.arange(10)
    inside = (triples[:, 0] < 10) & (triples[:, 2] < 10)
    assert 0 < int(inside.sum()) < len(triples)
    evaluator = kgeval.RankBasedEvaluator()
    dropped = evaluator.evaluate(
        model, triples, restrict_entities_to=allowed, pre_filtered_triples=False, use_tqdm=False
    )
    assert dropped.get_metric("count") == 2 * int(inside.sum())
    with pytest.raises(ValueError, match="outside restrict_entities_to"):
        evaluator.evaluate(model, triples, restrict_entities_to=allowed, use_tqdm=False)


def test_the_sampled_evaluator_runs_in_pykeens_pipeline(nations: Nations) -> None:
    """The reported case: pipeline(evaluator=SampledRankBasedEvaluator) failed with "Not subclass of Evaluator"."""
    from pykeen.evaluation import Evaluator

    from kgeval.integrations.pykeen import SampledRankBasedEvaluator

    assert issubclass(SampledRankBasedEvaluator, Evaluator)
    known = [nations.training.mapped_triples, nations.validation.mapped_triples]
    options = {"evaluation_factory": nations.testing, "additional_filter_triples": known, "num_negatives": 7}
    logging.getLogger("pykeen").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pipeline(
            training=nations.training, validation=nations.validation, testing=nations.testing, model="DistMult",
            model_kwargs={"embedding_dim": 8}, training_kwargs={"num_epochs": 2, "use_tqdm": False}, random_seed=2,
            evaluator=SampledRankBasedEvaluator, evaluator_kwargs=options, evaluation_kwargs={"use_tqdm": False},
        )  # fmt: skip
    direct = SampledRankBasedEvaluator(**options).evaluate(result.model, nations.testing.mapped_triples,
                                                           additional_filter_triples=known)  # fmt: skip
    flat, expected = result.metric_results.to_flat_dict(), direct.to_flat_dict()
    assert flat.keys() == expected.keys()
    assert all(flat[key] == pytest.approx(value, nan_ok=True) for key, value in expected.items())
    assert direct.get_metric("both.count") == 2 * nations.testing.num_triples
    with pytest.raises(ValueError, match="do not apply to sampled negatives"):
        SampledRankBasedEvaluator(**options).evaluate(result.model, nations.testing.mapped_triples,
                                                      restrict_entities_to=[0, 1])  # fmt: skip


def test_pykeens_metrics_arguments_are_taken() -> None:
    """The reported case: metrics= / metrics_kwargs= raised a TypeError. PyKEEN's resolver reads them (its errors
    for unknown names), requested hits@k add their k, and every metric is still reported."""
    requested = {"metrics": ["hits@k", "mrr", "adjustedhitsatk"], "metrics_kwargs": [{"k": 7}, None, {"k": 2}]}
    evaluator = RankBasedEvaluator(**requested)
    assert evaluator.ks == (1, 2, 3, 5, 7, 10)
    assert RankBasedEvaluator(metrics="mrr", add_defaults=False).ks == (1, 3, 5, 10)
    with pytest.raises(KeyError, match="Invalid RankBasedMetric name: nonsense"):
        RankBasedEvaluator(metrics=["nonsense"])
