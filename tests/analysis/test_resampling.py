"""Tests of analysis.resampling: triples (not ranks) are resampled, through the registry, matching brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from kgeval.analysis import resampling
from kgeval.analysis.resampling import bootstrap_distribution, chunks, pair_tasks, swapped_differences, task_statistics
from kgeval.metrics import registry
from kgeval.metrics.null_model import candidate_statistics
from kgeval.metrics.registry import MetricInfo, ValueRange
from kgeval.metrics.summary import RankSummary, rank_statistics, safe_ratio
from tests.helpers.reference import adjusted_metric, plain_metric
from tests.support.paired import two_models, with_metric

NUM_TRIPLES = 30


@pytest.fixture(scope="module")
def pair():
    return two_models(seed=0, num_triples=NUM_TRIPLES)


def drawn_units(seed: int, n_resamples: int, num_units: int) -> np.ndarray:
    """The unit draws of bootstrap_distribution with a fresh Generator(seed), when they fit in one chunk."""
    return np.random.default_rng(seed).integers(0, num_units, size=(n_resamples, num_units))


def test_task_statistics_add_up_to_the_accumulator_sums() -> None:
    ranks = np.array([1.0, 2.5, 4.0, 1.0])
    num_candidates = np.array([3, 5, 4, 1])
    matrix, layout = task_statistics(ranks, num_candidates, (1, 3))
    assert matrix.shape == (4, sum(int(np.prod(shape)) for _name, shape in layout))
    expected = {
        **rank_statistics(torch.from_numpy(ranks), (1, 3)),
        **candidate_statistics(torch.from_numpy(num_candidates), (1, 3)),
    }
    offset = 0
    for name, shape in layout:
        width = int(np.prod(shape))
        np.testing.assert_allclose(matrix[:, offset : offset + width].sum(axis=0), np.ravel(expected[name]), rtol=1e-14)
        offset += width


def test_task_statistics_without_vmap_are_the_same(monkeypatch) -> None:
    ranks, num_candidates = np.array([1.0, 2.5, 7.0]), np.array([3, 5, 9])
    expected = task_statistics(ranks, num_candidates, (1, 3))

    def broken_vmap(*args, **kwargs):
        raise RuntimeError("vmap is not supported here")

    monkeypatch.setattr(torch, "vmap", broken_vmap)
    matrix, layout = task_statistics(ranks, num_candidates, (1, 3))
    assert layout == expected[1]
    np.testing.assert_allclose(matrix, expected[0], rtol=1e-15)


@pytest.mark.parametrize(("key", "name"), [("median_rank", "median_rank"), ("h@3", "hits_at_3"), ("gmr", "gmr")])
def test_bootstrap_draws_triples_with_both_of_their_tasks(pair, key: str, name: str) -> None:
    """Resample j draws NUM_TRIPLES triples with replacement; its metric is the reference metric on the head and
    tail tasks of the drawn triples."""
    a = pair["results"][0]
    reference = pair["ranks"][0]
    paired = pair_tasks([a], ["results"], key)
    got = bootstrap_distribution(paired, 20, np.random.default_rng(7))[0]
    for j, units in enumerate(drawn_units(7, 20, NUM_TRIPLES)):
        ranks = [reference[side]["realistic"][u] for u in units for side in ("head", "tail")]
        assert got[j] == pytest.approx(plain_metric(name, ranks), rel=1e-12)


def test_head_tail_and_both_are_resampled_consistently(pair) -> None:
    """With one seed, every resample of both is the mean of the same resample of head and of tail."""
    a = pair["results"][0]
    values = {
        side: bootstrap_distribution(pair_tasks([a], ["results"], f"{side}.mrr"), 300, np.random.default_rng(3))[0]
        for side in ("head", "tail", "both")
    }
    np.testing.assert_allclose(values["both"], (values["head"] + values["tail"]) / 2, rtol=1e-12)


@pytest.mark.parametrize("key", ["mrr", "tail.hits@10", "head.pessimistic.mr"])
def test_mean_type_fast_path_equals_the_registry_path(pair, monkeypatch, key: str) -> None:
    paired = pair_tasks(pair["results"], ["results_a", "results_b"], key)
    swaps = np.random.default_rng(0).random((50, paired.num_units)) < 0.5
    fast = bootstrap_distribution(paired, 200, np.random.default_rng(1)), swapped_differences(paired, swaps)
    monkeypatch.setattr(resampling, "MEAN_TYPE", {})
    assert not paired.mean_type
    slow = bootstrap_distribution(paired, 200, np.random.default_rng(1)), swapped_differences(paired, swaps)
    for got, expected in zip(fast, slow, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


def _adjusted_mrr(summary: RankSummary, k: int | None = None) -> float:
    """(MRR - E[MRR]) / (1 - E[MRR]) from the additive sums, as an adjusted registry metric would compute it."""
    n = summary.count
    expected = float(summary.sums["sum_expected_reciprocal_rank"]) / n
    return safe_ratio(float(summary.sums["sum_reciprocal_rank"]) / n - expected, 1 - expected, "adjusted mrr")


def test_a_registry_metric_on_null_model_sums_is_resampled_through_the_registry(pair, monkeypatch) -> None:
    """Any registry metric works: here an adjusted MRR (the real one when registered, else a stand-in)."""
    name = "adjusted_inverse_harmonic_mean_rank"
    if name not in registry.METRICS:
        info = MetricInfo(name, _adjusted_mrr, ValueRange(), True, "adjusted MRR", needs_candidates=True)
        monkeypatch.setitem(registry.METRICS, name, info)
    reference = pair["ranks"][0]["both"]
    estimate = adjusted_metric(name, reference["realistic"], reference["num_candidates"])
    a = with_metric(pair["results"][0], ("both", "realistic", name), estimate)
    paired = pair_tasks([a], ["results"], name)
    assert paired.observed(0) == pytest.approx(estimate, rel=1e-12)
    got = bootstrap_distribution(paired, 10, np.random.default_rng(5))[0]
    for j, units in enumerate(drawn_units(5, 10, NUM_TRIPLES)):
        tasks = np.concatenate([units, units + NUM_TRIPLES])  # "both" is head tasks then tail tasks
        expected = adjusted_metric(name, reference["realistic"][tasks], reference["num_candidates"][tasks])
        assert got[j] == pytest.approx(expected, rel=1e-12)


def test_chunks_cover_every_resample_in_bounded_blocks() -> None:
    blocks = chunks(10_000, 3_000)
    assert blocks[0] == (0, resampling.CHUNK_ELEMENTS // 3_000)
    assert blocks[-1][1] == 10_000
    assert all(stop == start for (_s, stop), (start, _e) in itertools.pairwise(blocks))
    assert chunks(5, 10**9) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
