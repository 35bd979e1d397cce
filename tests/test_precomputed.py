"""evaluate_scores: metrics from a positive score and K negatives per task (OGB's y_pred_pos / y_pred_neg),
against a brute-force loop over METRICS.md and, where ogb is installed, OGB's own evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval import evaluate_scores
from tests.helpers.reference import metrics_from_ranks


def brute_force(positive: np.ndarray, negative: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Ranks of METRICS.md by explicit loops, in the reference's layout (head and tail: the same tasks)."""
    optimistic, pessimistic = [], []
    for true, row in zip(positive.tolist(), negative.tolist(), strict=True):
        optimistic.append(1 + sum(score > true for score in row))
        pessimistic.append(1 + sum(score >= true for score in row))
    optimistic, pessimistic = np.array(optimistic), np.array(pessimistic)
    counts = np.full(len(positive), negative.shape[1] + 1)
    side = {"optimistic": optimistic, "pessimistic": pessimistic, "realistic": (optimistic + pessimistic) / 2,
            "num_candidates": counts}  # fmt: skip
    return {"tail": side}


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 30),
    k=st.integers(1, 12),
    levels=st.integers(1, 4),
    infinities=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_against_the_brute_force(n: int, k: int, levels: int, infinities: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    positive = rng.integers(0, levels, n).astype(np.float32)
    negative = rng.integers(0, levels, (n, k)).astype(np.float32)
    if infinities:
        negative[rng.random((n, k)) < 0.2] = np.inf
        positive[rng.random(n) < 0.2] = -np.inf
    results = evaluate_scores(torch.from_numpy(positive), torch.from_numpy(negative), ks=(1, 3))
    expected = metrics_from_ranks(brute_force(positive, negative), ks=(1, 3), targets=("tail",))
    for key, value in results.data.items():
        want = expected[key]
        assert (math.isnan(value) and math.isnan(want)) or value == pytest.approx(want, rel=1e-9, abs=1e-12), key


def test_nan_and_shapes_are_errors() -> None:
    with pytest.raises(ValueError, match="task 1 has a NaN score"):
        evaluate_scores(torch.tensor([1.0, 2.0]), torch.tensor([[0.0], [float("nan")]]))
    with pytest.raises(ValueError, match="one row per positive score"):
        evaluate_scores(torch.tensor([1.0, 2.0]), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="negative_scores must be a 2-d floating-point tensor"):
        evaluate_scores(torch.tensor([1.0]), torch.zeros(1, 4, dtype=torch.long))


def test_ogbs_own_evaluator() -> None:
    """OGB ranks by the mean of the optimistic and pessimistic ranks: kgeval's realistic MRR and hits@k."""
    ogb = pytest.importorskip("ogb.linkproppred")
    rng = np.random.default_rng(0)
    positive = torch.from_numpy(rng.integers(0, 5, 200).astype(np.float32))
    negative = torch.from_numpy(rng.integers(0, 5, (200, 50)).astype(np.float32))
    theirs = ogb.Evaluator(name="ogbl-wikikg2").eval({"y_pred_pos": positive, "y_pred_neg": negative})
    ours = evaluate_scores(positive, negative, ks=(1, 3, 10))
    assert ours["tail.realistic.mrr"] == pytest.approx(float(theirs["mrr_list"].mean()), rel=1e-6)
    for k in (1, 3, 10):
        assert ours[f"tail.realistic.hits@{k}"] == pytest.approx(float(theirs[f"hits@{k}_list"].mean()), rel=1e-6)
