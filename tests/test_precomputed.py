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


def ragged_brute_force(positive: list[float], negatives: list[list[float]]) -> dict[str, dict[str, np.ndarray]]:
    """Ranks of METRICS.md by explicit loops, each task among its own negatives."""
    optimistic = np.array([1 + sum(s > true for s in row) for true, row in zip(positive, negatives, strict=True)])
    pessimistic = np.array([1 + sum(s >= true for s in row) for true, row in zip(positive, negatives, strict=True)])
    counts = np.array([len(row) + 1 for row in negatives])
    side = {"optimistic": optimistic, "pessimistic": pessimistic, "realistic": (optimistic + pessimistic) / 2,
            "num_candidates": counts}  # fmt: skip
    return {"tail": side}


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 9), min_size=1, max_size=25),
    levels=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    chunk=st.sampled_from([1, 3, 2**22]),
)
def test_ragged_negatives_against_the_brute_force(lengths: list[int], levels: int, seed: int, chunk: int) -> None:
    """A sequence of negative rows (TGB's per-query negatives), each task its own count, across chunk sizes that
    split a task's negatives."""
    rng = np.random.default_rng(seed)
    positive = rng.integers(0, levels, len(lengths)).astype(np.float64)
    negatives = [rng.integers(0, levels, n).astype(np.float16) for n in lengths]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("kgeval.variants.precomputed.CHUNK_ELEMENTS", chunk)
        results = evaluate_scores(torch.from_numpy(positive), [torch.from_numpy(row) for row in negatives])
    records = results.records
    expected = ragged_brute_force(positive.tolist(), [row.astype(np.float64).tolist() for row in negatives])
    for name in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(records[name], expected["tail"][name], err_msg=name)
    want = metrics_from_ranks(expected, ks=(1, 3, 5, 10), targets=("tail",))
    for key, value in results.data.items():
        assert (math.isnan(value) and math.isnan(want[key])) or value == pytest.approx(want[key], rel=1e-9), key


def test_ragged_negatives_are_checked() -> None:
    with pytest.raises(ValueError, match="task 1 has a NaN score"):
        evaluate_scores(torch.tensor([1.0, 2.0]), [torch.zeros(2), torch.tensor([0.0, float("nan")])])
    with pytest.raises(ValueError, match="one 1-d tensor per positive score.*2 positive score.*3 negative row"):
        evaluate_scores(torch.tensor([1.0, 2.0]), [torch.zeros(2)] * 3)
    with pytest.raises(ValueError, match=r"negative_scores\[1\] must be a 1-d floating-point tensor"):
        evaluate_scores(torch.tensor([1.0, 2.0]), [torch.zeros(2), torch.zeros(2, dtype=torch.long)])


def test_tgbs_own_evaluator_per_query() -> None:
    """TGB's Evaluator (temporal link prediction) ranks each query on the mean of the optimistic and pessimistic
    ranks among its own negatives: kgeval's realistic MRR and hits@10 over ragged negatives."""
    tgb = pytest.importorskip("tgb.linkproppred.evaluate")
    rng = np.random.default_rng(1)
    positive = rng.integers(0, 4, 300).astype(np.float32)
    negatives = [rng.integers(0, 4, rng.integers(0, 40)).astype(np.float32) for _ in range(300)]
    evaluator = tgb.Evaluator(name="tkgl-icews", k_value=10)
    theirs = [evaluator.eval({"y_pred_pos": np.array([p]), "y_pred_neg": n[None, :], "eval_metric": ["mrr"]})
              for p, n in zip(positive, negatives, strict=True)]  # fmt: skip
    ours = evaluate_scores(torch.from_numpy(positive), [torch.from_numpy(n) for n in negatives], ks=(10,))
    assert ours["tail.realistic.mrr"] == pytest.approx(np.mean([float(t["mrr"]) for t in theirs]), rel=1e-6)
    assert ours["tail.realistic.hits@10"] == pytest.approx(np.mean([float(t["hits@10"]) for t in theirs]), rel=1e-6)
