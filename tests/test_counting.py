"""The rank rule: counting against a dense brute force, slice by slice, with filtered subtraction."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval.counting import count_above, count_batch, slice_bounds
from kgeval.scoring import FullRowScorer


def test_count_above_ties_and_infinities() -> None:
    scores = torch.tensor([[3.0, 1.0, 2.0, 2.0], [float("inf"), float("-inf"), float("inf"), 0.0]])
    greater, equal = count_above(scores, torch.tensor([2.0, float("inf")]))
    assert greater.tolist() == [1, 0]
    assert equal.tolist() == [2, 2]


def test_slice_bounds_cover_everything() -> None:
    assert slice_bounds(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert slice_bounds(3, 5) == [(0, 3)]


class MatrixModel:
    def __init__(self, scores: torch.Tensor) -> None:
        self.scores = scores

    def score_t(self, batch: torch.Tensor) -> torch.Tensor:
        return self.scores[batch[:, 0]]


@settings(max_examples=100, deadline=None)
@given(data=st.data(), num_rows=st.integers(1, 6), num_candidates=st.integers(1, 9), slice_size=st.integers(1, 9))
def test_count_batch_equals_brute_force(data, num_rows, num_candidates, slice_size) -> None:
    values = st.sampled_from([0.0, 1.0, 2.0, float("inf"), float("-inf")])
    scores = torch.tensor(
        data.draw(
            st.lists(
                st.lists(values, min_size=num_candidates, max_size=num_candidates), min_size=num_rows, max_size=num_rows
            )
        )
    )
    bounds = slice_bounds(num_candidates, slice_size)
    true_slice = data.draw(st.integers(0, len(bounds) - 1))
    start, stop = bounds[true_slice]
    true_positions = torch.tensor(
        data.draw(st.lists(st.integers(start, stop - 1), min_size=num_rows, max_size=num_rows))
    )
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, num_rows - 1), st.integers(-1, num_candidates - 1)), unique=True)
    )
    rows = torch.tensor([r for r, _ in pairs], dtype=torch.long)
    positions = torch.tensor([p for _, p in pairs], dtype=torch.long)
    scorer = FullRowScorer(MatrixModel(scores), "tail", num_candidates, None)
    batch = torch.stack([torch.arange(num_rows), torch.zeros(num_rows, dtype=torch.long)], dim=1)
    counts = count_batch(scorer, batch, true_positions, true_slice, bounds, rows, positions)
    for filtered in (False, True):
        optimistic, pessimistic, candidates = counts.ranks(num_candidates, filtered=filtered)
        for i in range(num_rows):
            true = int(true_positions[i])
            removed = {p for r, p in pairs if r == i and p >= 0 and p != true} if filtered else set()
            others = [scores[i, e] for e in range(num_candidates) if e != true and e not in removed]
            s = scores[i, true]
            assert optimistic[i] == 1 + sum(bool(x > s) for x in others)
            assert pessimistic[i] == 1 + sum(bool(x >= s) for x in others)
            assert candidates[i] == 1 + len(others)
