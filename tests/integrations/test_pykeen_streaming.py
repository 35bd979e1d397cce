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


def test_results_are_pykeen_metric_results() -> None:
    """What the PyKEEN-facing evaluators return is a pykeen MetricResults (PyKEEN code checks that) and still
    kgeval's results, from evaluate and finalize alike."""
    from pykeen.evaluation import MetricResults

    import kgeval
    from kgeval.integrations.pykeen import MacroRankBasedEvaluator
    from kgeval.integrations.pykeen import RankBasedMetricResults as FacingResults

    dataset = Nations()
    model = PyKEENDistMult(triples_factory=dataset.training, embedding_dim=8, random_seed=0)
    for evaluator in (RankBasedEvaluator(), MacroRankBasedEvaluator()):
        evaluated = evaluator.evaluate(model, dataset.testing.mapped_triples, use_tqdm=False)
        stream(evaluator, 0)
        for results in (evaluated, evaluator.finalize()):
            assert isinstance(results, MetricResults) and isinstance(results, kgeval.RankBasedMetricResults)
            assert isinstance(results, FacingResults)
    plain = kgeval.RankBasedEvaluator().evaluate(model, dataset.testing.mapped_triples, use_tqdm=False)
    facing = FacingResults.of(plain)
    assert facing == plain and facing.records.equals(plain.records) and FacingResults.of(facing) is facing


def test_create_random() -> None:
    """PyKEEN's classmethod: seeded random results with every metric, optimistic at least as good as pessimistic."""
    results = RankBasedMetricResults.create_random(3)
    assert results == RankBasedMetricResults.create_random(3)
    assert results.get_metric("both.count") == 2000
    assert (
        results.get_metric("both.optimistic.mrr")
        >= results.get_metric("both.realistic.mrr")
        >= results.get_metric("both.pessimistic.mrr")
    )
    assert (results.records.optimistic <= results.records.pessimistic).all()
    assert (results.records.pessimistic <= results.records.num_candidates).all()


def _given_negatives(triples: torch.Tensor, num_entities: int, k: int = 10) -> dict[str, torch.Tensor]:
    """Negatives that never repeat the answer (PyKEEN would count such a negative as a tie with itself)."""
    generator = torch.Generator().manual_seed(0)
    shifts = 1 + torch.randint(0, num_entities - 1, (2, len(triples), k), generator=generator)
    return {"head": (triples[:, 0, None] + shifts[0]) % num_entities,
            "tail": (triples[:, 2, None] + shifts[1]) % num_entities}  # fmt: skip


def test_sampled_streaming_equals_pykeens_sampled_evaluator_in_its_loop() -> None:
    """PyKEEN's LCWAEvaluationLoop (filtered scores set to NaN) drives PyKEEN's SampledRankBasedEvaluator and kgeval's
    with the same negatives: the same ranks and num_candidates, task for task."""
    from pykeen.evaluation import SampledRankBasedEvaluator as PyKEENSampled

    from kgeval.integrations.pykeen import SampledRankBasedEvaluator

    dataset = Nations()
    model = PyKEENDistMult(triples_factory=dataset.training, embedding_dim=8, random_seed=0)
    negatives = _given_negatives(dataset.testing.mapped_triples, dataset.num_entities)
    known = [dataset.training.mapped_triples, dataset.validation.mapped_triples]
    evaluators = {
        "pykeen": PyKEENSampled(dataset.testing, head_negatives=negatives["head"], tail_negatives=negatives["tail"],
                                clear_on_finalize=False),
        "kgeval": SampledRankBasedEvaluator(dataset.testing, head_negatives=negatives["head"],
                                            tail_negatives=negatives["tail"], clear_on_finalize=False),
    }  # fmt: skip
    for evaluator in evaluators.values():
        loop = LCWAEvaluationLoop(triples_factory=dataset.testing, evaluator=evaluator, model=model,
                                  additional_filter_triples=known)  # fmt: skip
        loop.evaluate(batch_size=16, use_tqdm=False)
    theirs, records = evaluators["pykeen"], evaluators["kgeval"].finalize().records
    for code, side in enumerate(("head", "tail")):
        chosen = records.side == code
        assert (records.task_index[chosen] == -1).all()  # streamed batches carry no row numbers: stream order
        np.testing.assert_array_equal(records.optimistic[chosen], np.concatenate(theirs.ranks[side, "optimistic"]))
        np.testing.assert_array_equal(records.pessimistic[chosen], np.concatenate(theirs.ranks[side, "pessimistic"]))
        np.testing.assert_array_equal(records.num_candidates[chosen], np.concatenate(theirs.num_candidates[side]))
    assert (records.num_candidates < 11).any()  # filtered negatives were left out by both


def test_sampled_streaming_equals_sampled_evaluate() -> None:
    """Full score rows streamed to kgeval's sampled evaluator give evaluate()'s ranks with the negatives it draws."""
    from kgeval.integrations.pykeen import SampledRankBasedEvaluator

    dataset = Nations()
    model = PyKEENDistMult(triples_factory=dataset.training, embedding_dim=8, random_seed=0).eval()
    triples = dataset.testing.mapped_triples
    known = [dataset.training.mapped_triples]
    evaluator = SampledRankBasedEvaluator(dataset.testing, num_negatives=7, additional_filter_triples=known, seed=4)
    expected = evaluator.evaluate(model, triples).records
    with torch.inference_mode():
        for start in range(0, len(triples), 50):
            batch = triples[start : start + 50]
            for target, column, scores in (("head", 0, model.predict_h(batch[:, 1:])),
                                           ("tail", 2, model.predict_t(batch[:, :2]))):  # fmt: skip
                true = scores[torch.arange(len(batch)), batch[:, column]].unsqueeze(1)
                evaluator.process_scores_(batch, target, scores, true_scores=true)
    got = evaluator.finalize().records
    for name in ("side", "optimistic", "pessimistic", "num_candidates", "head", "relation", "tail"):
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    with pytest.raises(ValueError, match="heads and tails"):
        evaluator.process_scores_(triples[:2], "relation", torch.zeros(2, 55), true_scores=torch.zeros(2, 1))
    with pytest.raises(ValueError, match="evaluation_factory"):
        SampledRankBasedEvaluator().process_scores_(triples[:2], "tail", torch.zeros(2, 14), torch.zeros(2, 1))
