"""kgeval's MacroRankBasedEvaluator against PyKEEN's own: the same score batches streamed, the same model evaluated,
and PyKEEN's pipeline with early stopping, key by key -- the two stated differences checked as such."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

pytest.importorskip("pykeen")

from pykeen.datasets import Nations
from pykeen.evaluation import MacroRankBasedEvaluator as PyKEENMacro
from pykeen.models import DistMult as PyKEENDistMult
from pykeen.pipeline import pipeline

from kgeval.integrations.pykeen import MacroRankBasedEvaluator
from tests.integrations.test_pykeen_streaming import stream

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)
MAD_SCALE = 1.0 / 0.6744897501960817


def assert_pykeens_values(theirs: dict[str, float], ours: dict[str, float]) -> None:
    """Every PyKEEN key has PyKEEN's value (float32 rounding), except the two stated differences: the MAD keeps
    its normal scale, and 1 / median of integer (optimistic / pessimistic) ranks, where the weighted median is one
    of them, is not PyKEEN's integer reciprocal 0."""
    assert set(theirs) <= set(ours)
    compared = 0
    for key, value in theirs.items():
        side, rank_type, name = key.split(".")
        if name == "median_absolute_deviation":
            assert ours[key] == pytest.approx(value * MAD_SCALE, rel=1e-6), key
        elif name == "inverse_median_rank" and value == 0:  # PyKEEN's 1 // median of an integer median
            assert rank_type != "realistic", key
            assert ours[key] == pytest.approx(1.0 / ours[f"{side}.{rank_type}.median_rank"]), key
        else:
            assert ours[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key
            compared += 1
    assert compared >= 0.9 * len(theirs)


@pytest.mark.parametrize("seed", [0, 3])
def test_streamed_macro_metrics_equal_pykeens(seed: int) -> None:
    theirs, ours = PyKEENMacro(), MacroRankBasedEvaluator()
    stream(theirs, seed)
    stream(ours, seed)
    results = ours.finalize()
    assert results.records is None
    assert_pykeens_values(theirs.finalize().to_flat_dict(), results.to_flat_dict())


def test_bootstrap_of_macro_metrics() -> None:
    """finalize_multi resamples the tasks and reports macro metrics of each resample."""
    evaluator = MacroRankBasedEvaluator(clear_on_finalize=False)
    stream(evaluator, 1)
    point = evaluator.finalize().get_metric("both.realistic.inverse_harmonic_mean_rank")
    values = evaluator.finalize_multi(n_boot=10, seed=2)["both.realistic.inverse_harmonic_mean_rank"]
    assert len(set(values)) > 1 and min(values) <= point * 1.5 and max(values) >= point / 1.5


def test_evaluate_equals_pykeens_macro_evaluator() -> None:
    dataset = Nations()
    model = PyKEENDistMult(triples_factory=dataset.training, embedding_dim=8, random_seed=0)
    kwargs = {
        "mapped_triples": dataset.testing.mapped_triples,
        "additional_filter_triples": [dataset.training.mapped_triples, dataset.validation.mapped_triples],
        "use_tqdm": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = PyKEENMacro().evaluate(model, batch_size=64, **kwargs).to_flat_dict()
    ours = MacroRankBasedEvaluator().evaluate(model, **kwargs).to_flat_dict()
    assert_pykeens_values(theirs, ours)
    tails, heads = ours["tail.realistic.inverse_harmonic_mean_rank"], ours["head.realistic.inverse_harmonic_mean_rank"]
    assert np.isfinite(tails) and np.isfinite(heads)


@pytest.mark.slow
def test_pipeline_with_early_stopping() -> None:
    """PyKEEN's pipeline and stopper run with either macro evaluator to the same stop and the same final numbers."""
    runs = {}
    for name, evaluator in (("pykeen", PyKEENMacro), ("kgeval", MacroRankBasedEvaluator)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs[name] = pipeline(
                dataset="Nations",
                model="DistMult",
                model_kwargs={"embedding_dim": 16},
                training_loop="LCWA",
                training_kwargs={"num_epochs": 9, "batch_size": 128, "use_tqdm": False},
                random_seed=1,
                evaluator=evaluator,
                stopper="early",
                stopper_kwargs={"frequency": 3, "patience": 1},
                evaluation_kwargs={"use_tqdm": False},
            )
    assert runs["kgeval"].stopper.best_epoch == runs["pykeen"].stopper.best_epoch
    assert runs["kgeval"].stopper.results == pytest.approx(runs["pykeen"].stopper.results, rel=1e-6)
    theirs, ours = runs["pykeen"].metric_results.to_flat_dict(), runs["kgeval"].metric_results.to_flat_dict()
    assert_pykeens_values(theirs, ours)
