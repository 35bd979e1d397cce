"""PyKEEN's streaming evaluator interface on kgeval's evaluator (``process_scores_`` / ``finalize`` and the
bootstrap finalizers): the same score batches give PyKEEN's own ``RankBasedEvaluator``'s ranks task for task and its
metrics, and PyKEEN's own ``LCWAEvaluationLoop`` driving kgeval's evaluator reports PyKEEN's numbers.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

pytest.importorskip("pykeen")

from pykeen.datasets import Nations
from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator
from pykeen.evaluation.evaluation_loop import LCWAEvaluationLoop
from pykeen.models import DistMult as PyKEENDistMult

from kgeval.integrations.pykeen import RankBasedEvaluator
from kgeval.results import RankBasedMetricResults

pytestmark = pytest.mark.pykeen
logging.getLogger("pykeen").setLevel(logging.ERROR)
RANK_TYPES = ("optimistic", "pessimistic", "realistic")


def score_batches(seed: int, batches: int = 4, size: int = 9, width: int = 25):
    """Tie-heavy integer scores with NaN (filtered) entries; the true answer's column is never NaN."""
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        scores = torch.as_tensor(rng.integers(-3, 4, (size, width)), dtype=torch.float32)
        answers = torch.as_tensor(rng.integers(0, width, size))
        scores[torch.as_tensor(rng.random((size, width)) < 0.2)] = torch.nan
        rows = torch.arange(size)
        scores[rows, answers] = torch.as_tensor(rng.integers(-3, 4, size), dtype=torch.float32)
        hrt = torch.as_tensor(rng.integers(0, width, (size, 3)))
        yield hrt, scores, scores[rows, answers].unsqueeze(1)


def stream(evaluator, seed: int) -> None:
    for target in ("head", "tail"):
        for hrt, scores, true in score_batches(seed + (target == "tail")):
            evaluator.process_scores_(hrt, target, scores, true_scores=true)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_ranks_equal_pykeens_task_for_task(seed: int) -> None:
    theirs, ours = PyKEENEvaluator(clear_on_finalize=False), RankBasedEvaluator(clear_on_finalize=False)
    stream(theirs, seed)
    stream(ours, seed)
    records = ours.finalize().records
    for code, target in enumerate(("head", "tail")):
        side = records.side == code
        ours_by_type = {"optimistic": records.optimistic[side], "pessimistic": records.pessimistic[side]}
        ours_by_type["realistic"] = (ours_by_type["optimistic"] + ours_by_type["pessimistic"]) / 2
        for rank_type in RANK_TYPES:
            expected = np.concatenate(theirs.ranks[target, rank_type])
            np.testing.assert_array_equal(ours_by_type[rank_type], expected, err_msg=f"{target} {rank_type}")
        np.testing.assert_array_equal(records.num_candidates[side], np.concatenate(theirs.num_candidates[target]))


@pytest.mark.parametrize("seed", [0, 3])
def test_streamed_metrics_equal_pykeens(seed: int) -> None:
    theirs, ours = PyKEENEvaluator(), RankBasedEvaluator()
    stream(theirs, seed)
    stream(ours, seed)
    expected, got = theirs.finalize().to_flat_dict(), ours.finalize().to_flat_dict()
    shared = [key for key in expected if key in got]
    assert len(shared) >= 0.9 * len(expected)
    # PyKEEN computes its metrics in float32, kgeval in float64: equal to float32 rounding (absolute for the
    # adjusted indices near 0, 1 - a ratio of float32 means)
    np.testing.assert_allclose([got[k] for k in shared], [expected[k] for k in shared], rtol=1e-5, atol=1e-5,
                               equal_nan=True)  # fmt: skip


def test_pykeens_evaluation_loop_drives_kgeval() -> None:
    """LCWAEvaluationLoop scores, filters (NaN) and streams batches; kgeval's evaluator reports PyKEEN's numbers."""
    dataset = Nations()
    model = PyKEENDistMult(triples_factory=dataset.training, embedding_dim=8, random_seed=0)
    known = [dataset.training.mapped_triples, dataset.validation.mapped_triples]
    results = {}
    for name, evaluator in (("pykeen", PyKEENEvaluator()), ("kgeval", RankBasedEvaluator())):
        loop = LCWAEvaluationLoop(triples_factory=dataset.testing, evaluator=evaluator, model=model,
                                  additional_filter_triples=known)  # fmt: skip
        results[name] = loop.evaluate(batch_size=16, use_tqdm=False)
    assert isinstance(results["kgeval"], RankBasedMetricResults)
    keys = ("both.realistic.inverse_harmonic_mean_rank", "tail.optimistic.hits_at_10",
            "head.pessimistic.arithmetic_mean_rank", "both.realistic.adjusted_arithmetic_mean_rank_index")  # fmt: skip
    for key in keys:
        assert results["kgeval"].get_metric(key) == pytest.approx(results["pykeen"].get_metric(key), rel=1e-5)


def test_streaming_refuses_what_it_cannot_rank() -> None:
    evaluator = RankBasedEvaluator()
    hrt, scores, true = next(score_batches(0))
    with pytest.raises(ValueError, match="needs the true scores"):
        evaluator.process_scores_(hrt, "tail", scores)
    with pytest.raises(ValueError, match=r"the true score of the tail task of triple \[.*\] is NaN"):
        evaluator.process_scores_(hrt, "tail", scores, true_scores=torch.full_like(true, torch.nan))
    with pytest.raises(ValueError, match="target must be"):
        evaluator.process_scores_(hrt, "sideways", scores, true_scores=true)
    with pytest.raises(ValueError, match="no ranks to finalize"):
        evaluator.finalize()


def test_finalize_clears_unless_told_not_to() -> None:
    once = RankBasedEvaluator()
    stream(once, 0)
    first = once.finalize()
    with pytest.raises(ValueError, match="no ranks to finalize"):
        once.finalize()
    kept = RankBasedEvaluator(clear_on_finalize=False)
    stream(kept, 0)
    assert kept.finalize().to_flat_dict() == pytest.approx(first.to_flat_dict(), nan_ok=True)
    assert kept.finalize().get_metric("both.count") == first.get_metric("both.count") == 72


def test_bootstrap_finalizers() -> None:
    evaluator = RankBasedEvaluator(clear_on_finalize=False)
    stream(evaluator, 1)
    point = evaluator.finalize().get_metric("both.realistic.inverse_harmonic_mean_rank")
    multi = evaluator.finalize_multi(n_boot=20, seed=5)
    values = multi["both.realistic.inverse_harmonic_mean_rank"]
    assert len(values) == 20 and len(set(values)) > 1  # resampled, not repeated
    assert multi == evaluator.finalize_multi(n_boot=20, seed=5)  # seeded
    assert min(values) <= point * 1.5 and max(values) >= point / 1.5
    center, spread = evaluator.finalize_with_confidence(n_boot=20, seed=5)["both.realistic.inverse_harmonic_mean_rank"]
    assert center == pytest.approx(np.median(values))
    # PyKEEN's own summary, as its evaluator reports it: ci=90 is the range between the 45th and 55th percentiles
    assert spread == pytest.approx(np.percentile(values, 55) - np.percentile(values, 45))
