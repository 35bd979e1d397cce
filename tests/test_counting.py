"""kgeval.counting: comparison codes, both kernels, and counts from code sums."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval.counting import BatchCounts, RowBlock, comparison_codes, count_batch, slice_bounds
from kgeval.scoring import FullRowScorer, Workspace

INF, NAN = float("inf"), float("nan")


def test_comparison_codes_rule() -> None:
    scores = torch.tensor([[3.0, 1.0, 2.0, INF, -INF, NAN], [INF, INF, -INF, 0.0, 1.0, 2.0]])
    codes = comparison_codes(scores, torch.tensor([2.0, INF]))
    expected = torch.tensor([[1.0, -1.0, 0.0, 1.0, -1.0, NAN], [0.0, 0.0, -1.0, -1.0, -1.0, -1.0]])
    assert torch.equal(torch.isnan(codes), torch.isnan(expected))
    assert torch.equal(torch.nan_to_num(codes), torch.nan_to_num(expected))
    assert torch.isnan(comparison_codes(torch.ones(1, 3), torch.tensor([NAN]))).all()


def test_counts_from_sums() -> None:
    # codes of two tasks: [1, 1, -1, 0(true), 0] and [-1, 0(true), NaN]
    sums = torch.tensor([[1.0, NAN], [3.0, 1.0]], dtype=torch.float64)
    counts = BatchCounts.from_sums(sums, torch.tensor([5, 3]))
    assert counts.greater[0] == 2
    assert counts.equal[0] == 1
    assert counts.has_nan.tolist() == [False, True]
    optimistic, pessimistic, num_candidates = counts.ranks()
    assert (int(optimistic[0]), int(pessimistic[0]), int(num_candidates[0])) == (3, 4, 5)


class Rows:
    """A model whose score_t returns fixed rows (the query's first id picks the row)."""

    def __init__(self, scores: torch.Tensor) -> None:
        self.scores = scores
        self.num_entities = scores.shape[1]

    def score_t(self, batch: torch.Tensor) -> torch.Tensor:
        return self.scores[batch[:, 0]].clone()


def _brute_force(scores: np.ndarray, true_positions: np.ndarray) -> tuple[list[int], list[int]]:
    greater = [int(np.sum(row > row[p])) for row, p in zip(scores, true_positions, strict=True)]
    equal = [int(np.sum(row == row[p])) - 1 for row, p in zip(scores, true_positions, strict=True)]
    return greater, equal


@pytest.mark.parametrize("kernel", ["sign", "compare"])
@pytest.mark.parametrize("seed", range(5))
def test_count_batch_matches_brute_force(kernel: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(-2, 3, size=(6, 13)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.15] = INF
    scores[rng.random(scores.shape) < 0.15] = -INF
    slice_size = int(rng.integers(1, 14))
    bounds = slice_bounds(13, slice_size)
    true_slice = int(rng.integers(0, len(bounds)))
    start, stop = bounds[true_slice]
    true_positions = rng.integers(start, stop, size=6)
    blocks = [RowBlock(0, 2, 0, 2), RowBlock(2, 6, 2, 6)]
    scorer = FullRowScorer(Rows(torch.from_numpy(scores)), "tail", 13, None)
    queries = torch.stack([torch.arange(6), torch.zeros(6, dtype=torch.long)], dim=1)
    counts, raw = count_batch(
        scorer, queries, torch.from_numpy(true_positions), true_slice, bounds, blocks, kernel=kernel,
        workspace=Workspace(),
    )  # fmt: skip
    assert raw is None
    greater, equal = _brute_force(scores, true_positions)
    assert counts.greater.tolist() == greater
    assert counts.equal.tolist() == equal
    assert not counts.has_nan.any()


@pytest.mark.parametrize("kernel", ["sign", "compare"])
def test_nan_rows_are_flagged(kernel: str) -> None:
    scores = torch.tensor([[1.0, NAN, 0.0], [1.0, 2.0, 0.0], [INF, -INF, NAN], [NAN, 1.0, 1.0]])
    scorer = FullRowScorer(Rows(scores), "tail", 3, None)
    queries = torch.stack([torch.arange(4), torch.zeros(4, dtype=torch.long)], dim=1)
    counts, _ = count_batch(
        scorer, queries, torch.tensor([0, 0, 0, 0]), 0, [(0, 3)], [RowBlock(0, 4, 0, 4)], kernel=kernel
    )
    assert counts.has_nan.tolist() == [True, False, True, True]
    assert int(counts.greater[1]) == 1


def test_plus_and_minus_infinity_in_one_row_is_not_nan() -> None:
    scores = torch.tensor([[INF, -INF, 0.0, 1.0]])
    scorer = FullRowScorer(Rows(scores), "tail", 4, None)
    counts, _ = count_batch(scorer, torch.tensor([[0, 0]]), torch.tensor([2]), 0, [(0, 4)], [RowBlock(0, 1, 0, 1)])
    assert not counts.has_nan.any()
    assert (int(counts.greater[0]), int(counts.equal[0])) == (2, 0)
