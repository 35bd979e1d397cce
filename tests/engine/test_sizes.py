"""kgeval._engine.sizes: sizes from the memory budget, and out-of-memory retries (injected on CPU)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import sizes as batching
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.scoring import FullRowScorer, SlicedScorer
from kgeval.models import DistMult
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

CPU = torch.device("cpu")


def _scorer(kind: type, num_candidates: int):
    """A scorer of the given class for ``num_candidates`` candidates (no model needed for sizing)."""
    scorer = object.__new__(kind)
    scorer.num_candidates = num_candidates
    scorer._candidates = torch.zeros(0, 8)  # a GEMM scorer's table, on the CPU like the loop
    return scorer


# -- sizes --------------------------------------------------------------------------------------------------------
def test_full_rows_fill_the_cpu_budget() -> None:
    sizes = batching.choose_sizes(_scorer(FullRowScorer, 1000), 10**6, CPU)
    assert sizes.slice_size == 1000
    assert sizes.batch_size == batching.CPU_SCORE_BUDGET // 1000
    assert sizes.tile_rows == batching.CPU_TILE_ELEMENTS // 1000
    assert sizes.automatic


def test_gemm_scorer_uses_one_slice_when_a_tile_of_rows_fits() -> None:
    sizes = batching.choose_sizes(_scorer(GemmScorer, 14541), 40000, CPU)
    assert (sizes.slice_size, sizes.batch_size) == (14541, batching.CPU_GEMM_BATCH)
    assert sizes.tile_rows * sizes.slice_size <= batching.CPU_TILE_ELEMENTS


def test_gemm_scorer_slices_large_candidate_sets() -> None:
    sizes = batching.choose_sizes(_scorer(GemmScorer, 2_000_000), 300, CPU)
    assert sizes.slice_size < 2_000_000
    assert sizes.tile_rows >= batching.MIN_TILE_ROWS
    assert sizes.tile_rows * sizes.slice_size <= batching.CPU_TILE_ELEMENTS
    assert sizes.batch_size == 300


def test_sliced_scorer_bounds_each_call() -> None:
    sizes = batching.choose_sizes(_scorer(SlicedScorer, 10**6), 10**5, CPU)
    assert sizes.batch_size * sizes.slice_size <= batching.CPU_SCORE_BUDGET


@pytest.mark.parametrize("num_entities", [75_000, 300_000, 2_000_000])
def test_mixed_slice_batches_keep_every_answer_slice(num_entities: int) -> None:
    """A batch of B tasks keeps at most B query rows x min(B, slices) answer slices between its two passes: the
    batches chosen for mixed slices keep them all within the budget, and are capped only when needed."""
    chosen = batching.choose_sizes(_scorer(SlicedScorer, num_entities), 301, CPU)
    sizes = batching.for_mixed_slices(chosen, CPU, num_entities)
    rows = sizes.batch_size
    assert rows * min(rows * sizes.slice_size, num_entities) <= batching.CPU_KEEP_BUDGET
    assert batching.MIN_MIXED_BATCH <= rows <= chosen.batch_size and sizes.tile_rows <= rows
    fixed = batching.choose_sizes(_scorer(SlicedScorer, num_entities), 301, CPU, batch_size=256)
    assert batching.for_mixed_slices(fixed, CPU, num_entities) == fixed  # the caller's batch size wins


class RowCountingTable(TableModel):
    """Counts the score elements (rows x candidates) it is asked for."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table)
        self.elements = 0

    def _record(self, method: str, batch: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.elements += scores.numel()
        return super()._record(method, batch, scores)


@pytest.mark.parametrize("keep_budget", [10**9, 3000, 300])
def test_few_tasks_over_many_slices_score_each_query_row_once(monkeypatch, keep_budget: int) -> None:
    """A scores-only model with candidate slices, few tasks over many slices (batches mix slices: a first pass
    reads the true scores from the answers' slices): the model is asked for exactly the distinct queries' rows of
    each batch (batches shrink to keep every answer slice; the slice the first pass read last is counted first,
    from the scores still held) -- down to batches of MIN_MIXED_BATCH tasks, below which (a budget of 300 scores)
    slices are scored again; the ranks are the reference's either way."""
    monkeypatch.setattr(batching, "CPU_KEEP_BUDGET", keep_budget)
    graph = random_graph(8, num_entities=200, num_relations=3, num_triples=30, num_filter=40)
    table = quantised_table(8, 200, 3, levels=4)
    model = RowCountingTable(table)
    # the fast path's probes off: the loop's calls are counted (the probes' are bounded in test_score_stability.py),
    # in a second evaluation: the first measured the model's memory per call, which the evaluator keeps
    evaluator = RankBasedEvaluator(slice_size=9, check_fast_path=False)
    for _ in range(2):
        model.elements = 0
        results = evaluator.evaluate(
            model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
        )
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))
    distinct = len(torch.unique(graph.triples[:, :2], dim=0)) + len(torch.unique(graph.triples[:, 1:], dim=0))
    if keep_budget >= batching.MIN_MIXED_BATCH * batching.MIN_MIXED_BATCH * 9:
        assert model.elements == distinct * 200
    else:
        assert model.elements > distinct * 200


def test_callers_sizes_win_and_batches_never_exceed_the_tasks() -> None:
    sizes = batching.choose_sizes(_scorer(FullRowScorer, 50), 7, CPU, batch_size=100, slice_size=60)
    assert (sizes.batch_size, sizes.slice_size, sizes.automatic) == (7, 50, False)


def test_cuda_budget_comes_from_free_memory(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**30, 2**34))
    budget = int(2**30 * batching.DEVICE_MEMORY_FRACTION * batching.SCORES_SHARE) // batching.DEVICE_BYTES_PER_SCORE
    assert batching.score_budget(torch.device("cuda")) == budget
    sizes = batching.choose_sizes(_scorer(GemmScorer, 1000), 10**6, torch.device("cuda"))
    assert sizes.batch_size == budget // 1000
    assert sizes.tile_rows == sizes.batch_size  # no cache tiles on an accelerator


# -- retries ------------------------------------------------------------------------------------------------------
def _failing_above(limit: int, calls: list[tuple[int, int]]):
    def run(begin: int, end: int) -> tuple[int, int]:
        calls.append((begin, end))
        if end - begin > limit:
            raise torch.OutOfMemoryError("injected")
        return begin, end

    return run


def test_retry_halves_only_the_failing_batch_and_remembers_the_size() -> None:
    calls: list[tuple[int, int]] = []
    remembered: dict = {}
    results = batching.run_with_retry([(0, 8), (8, 16)], _failing_above(3, calls), "key", True, CPU, remembered)
    assert results == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10), (10, 12), (12, 14), (14, 16)]
    assert calls[:3] == [(0, 8), (0, 4), (0, 2)]  # 8 fails, 4 fails, 2 works; later batches start at 2
    assert remembered == {"key": 2}
    calls.clear()
    batching.run_with_retry([(0, 5)], _failing_above(3, calls), "key", True, CPU, remembered)
    assert calls == [(0, 2), (2, 4), (4, 5)]  # the remembered size: no failure on a later call


def test_fixed_batch_size_re_raises() -> None:
    with pytest.raises(torch.OutOfMemoryError, match=r"^injected$"):
        batching.run_with_retry([(0, 4)], _failing_above(1, []), "key", False, CPU, {})


def test_single_task_that_does_not_fit_re_raises() -> None:
    with pytest.raises(torch.OutOfMemoryError, match=r"^injected$"):
        batching.run_with_retry([(0, 4)], _failing_above(0, []), "key", True, CPU, {})


class OutOfMemoryAbove(TableModel):
    """Raises torch.OutOfMemoryError when asked to score more than ``limit`` queries at once."""

    def __init__(self, table: torch.Tensor, limit: int) -> None:
        super().__init__(table)
        self.limit = limit
        self.failures = 0

    def _record(self, method: str, batch: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if batch.shape[0] > self.limit:
            self.failures += 1
            raise torch.OutOfMemoryError(f"CUDA out of memory (injected: {batch.shape[0]} > {self.limit})")
        return super()._record(method, batch, scores)


def test_evaluation_survives_injected_out_of_memory_errors() -> None:
    graph = random_graph(0, 20, 3, num_triples=60, num_filter=40)
    table = quantised_table(0, 20, 3, levels=3)
    model = OutOfMemoryAbove(table, limit=4)
    evaluator = RankBasedEvaluator()
    results = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))
    assert model.failures > 0
    assert all(size <= 4 for _method, size, _columns in model.score_calls)
    remembered = list(evaluator._state.batch_sizes.values())
    assert remembered
    assert all(size <= 8 for size in remembered)  # 4 distinct queries can need up to 8 tasks
    model.failures = 0
    again = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)
    assert again == results
    assert model.failures <= len(remembered)  # the evaluator's remembered sizes avoid (almost) every failure


def test_explicit_batch_size_does_not_retry() -> None:
    graph = random_graph(0, 20, 3, num_triples=30, num_filter=0)
    model = OutOfMemoryAbove(quantised_table(0, 20, 3), limit=2)
    message = re.escape("CUDA out of memory (injected: ") + r"\d+" + re.escape(" > 2)")
    with pytest.raises(torch.OutOfMemoryError, match=f"^{message}$"):
        RankBasedEvaluator(batch_size=16).evaluate(model, graph.triples, use_tqdm=False)


def test_full_row_models_retry_too() -> None:
    graph = random_graph(1, 15, 2, num_triples=40, num_filter=10)
    table = quantised_table(1, 15, 2, levels=2)

    class FullRowsOutOfMemory(FullScoreTableModel):
        def _record(self, method, batch, scores):
            if batch.shape[0] > 3:
                raise torch.OutOfMemoryError("injected")
            return super()._record(method, batch, scores)

    results = RankBasedEvaluator().evaluate(
        FullRowsOutOfMemory(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


def test_gemm_fast_path_retry() -> None:
    model = DistMult(30, 3, dim=4, seed=0)
    graph = random_graph(2, 30, 3, num_triples=50, num_filter=20)
    expected = RankBasedEvaluator(batch_size=50).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    original = model.kgeval_query

    def query(batch, target):
        if batch.shape[0] > 5:
            raise torch.OutOfMemoryError("injected")
        return original(batch, target)

    model.kgeval_query = query
    results = RankBasedEvaluator().evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(results.records[column], expected.records[column])


@pytest.mark.cuda
def test_a_real_cuda_out_of_memory_error_is_retried_with_smaller_batches() -> None:
    """On a GPU: a model whose scoring of more than 4 queries asks the CUDA allocator for 2**50 bytes (a real
    torch.OutOfMemoryError); the evaluation halves its batches, gives the reference ranks and frees the memory."""
    graph = random_graph(2, 20, 3, num_triples=60, num_filter=40)
    table = quantised_table(2, 20, 3, levels=3)

    class HungryAbove(TableModel):
        def _record(self, method, batch, scores):
            if batch.shape[0] > 4:
                torch.empty(2**50, dtype=torch.uint8, device="cuda")
            return super()._record(method, batch, scores)

    model = HungryAbove(table.cuda())
    results = RankBasedEvaluator().evaluate(
        model, graph.triples.cuda(), additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))
    assert all(size <= 4 for _method, size, _columns in model.score_calls)
