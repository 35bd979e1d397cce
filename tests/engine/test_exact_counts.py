"""Counts stay exact integers where floating-point shortcuts used to break them.

- Rows wider than 2**24 candidates: float32 sums of comparison codes lose integers above 2**24 (the eager
  kernels, and every count on CUDA, summed in float32).
- Flush-to-zero (``torch.set_flush_denormal(True)``): two distinct normal scores whose difference is subnormal
  subtract to 0, which the "sign" kernel read as a tie.

Expectations come from METRICS.md (by hand, or from the brute-force reference, which compares Python floats).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator
from kgeval._engine.kernels import FLOAT32_EXACT_INTEGERS, count_tile
from tests.helpers.graphs import TableModel, graphs_and_tables
from tests.helpers.reference import reference_ranks
from tests.support.invariance import assert_ranks_match

WIDE = FLOAT32_EXACT_INTEGERS + 2  # 2**24 + 2 candidates: 2**24 + 1 is not a float32


@contextmanager
def flush_denormal(enabled: bool) -> Iterator[None]:
    """Flush-to-zero on or off for the block (skips the test where the CPU cannot flush)."""
    if enabled and not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormal numbers to zero")
    try:
        torch.set_flush_denormal(enabled)
        yield
    finally:
        torch.set_flush_denormal(False)


class AnswerFirst:
    """A model with only score_t over ``WIDE`` entities: the true tail scores 1, every other entity 0."""

    num_entities = WIDE

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        scores = torch.zeros(hr_batch.shape[0], WIDE)
        scores[:, 0] = 1.0
        return scores


@pytest.mark.parametrize("kernel", ["sign", "compare"])
def test_a_row_wider_than_2_24_counts_exactly(kernel: str) -> None:
    tile = torch.zeros(1, WIDE)
    tile[0, :3] = 2.0  # three above, WIDE - 4 below, one equal (the true answer's column)
    tile[0, 3] = 1.0
    greater, less, nan = count_tile(tile, torch.tensor([1.0]), kernel)
    assert (int(greater), int(less), bool(nan)) == (3, WIDE - 4, False)


def test_an_evaluation_over_more_than_2_24_candidates_ranks_exactly() -> None:
    """By METRICS.md: the answer alone scores highest, so optimistic = pessimistic = 1 and C = 2**24 + 2."""
    triples = torch.tensor([[5, 0, 0]])
    evaluator = RankBasedEvaluator(kernel="eager", slice_size=WIDE, batch_size=1)
    results = evaluator.evaluate(AnswerFirst(), triples, targets=("tail",), use_tqdm=False)
    assert results.records["optimistic"].tolist() == [1]
    assert results.records["pessimistic"].tolist() == [1]
    assert results.records["num_candidates"].tolist() == [WIDE]
    assert results["tail.hits@1"] == 1.0


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("kernel", ["sign", "compare", "numba"])
def test_distinct_normal_scores_with_a_subnormal_difference(flush: bool, kernel: str) -> None:
    """1.5e-38 > 1.4e-38 (both normal float32); their difference 1e-39 is subnormal."""
    tile = torch.tensor([[1.5e-38, 1.4e-38, 1.4e-38]])
    with flush_denormal(flush):
        greater, less, _nan = count_tile(tile.clone(), torch.tensor([1.4e-38]), kernel, owned=True)
    assert (int(greater), int(less)) == (1, 0)


@settings(max_examples=60, deadline=None)
@given(
    problem=graphs_and_tables(max_entities=10),
    flush=st.booleans(),
    base=st.sampled_from([2.0**-120, -(2.0**-120), 0.0]),
    kernel=st.sampled_from(["eager", "numba"]),
)
def test_tiny_score_differences_rank_exactly_with_and_without_flush_to_zero(problem, flush, base, kernel) -> None:
    """Tie-heavy integer tables mapped to base + level * 2**-140: with base = ±2**-120 every score is a normal
    float32 and distinct scores differ by subnormal amounts (the flush-to-zero trap); with base = 0 the scores are
    subnormal themselves (only without flush-to-zero, which would read them as 0). Exact in float32 (the spacing
    near 2**-120 is 2**-143); the reference compares the same values exactly."""
    assume(not (flush and base == 0.0))
    graph, table = problem
    table = (base + table.double() * 2.0**-140).float()
    with flush_denormal(flush):
        results = RankBasedEvaluator(kernel=kernel, batch_size=3, slice_size=4).evaluate(
            TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
    assert_ranks_match(results, reference_ranks(table, graph.triples, graph.filter_triples))
