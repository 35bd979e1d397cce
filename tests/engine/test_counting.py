"""_engine.counting and _engine.kernels: comparison codes, every tile kernel, counts, and the kernel choice."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval._engine import kernels
from kgeval._engine.counting import BatchCounts, BatchWork, RowBlock, comparison_codes, count_batch, slice_bounds
from kgeval._engine.kernels import choice, count_tile
from kgeval._engine.scoring import FullRowScorer, Workspace

KERNELS = ["sign", "compare", "numba"]

INF, NAN = float("inf"), float("nan")


def test_comparison_codes_rule() -> None:
    scores = torch.tensor([[3.0, 1.0, 2.0, INF, -INF, NAN], [INF, INF, -INF, 0.0, 1.0, 2.0]])
    codes = comparison_codes(scores, torch.tensor([2.0, INF]))
    expected = torch.tensor([[1.0, -1.0, 0.0, 1.0, -1.0, NAN], [0.0, 0.0, -1.0, -1.0, -1.0, -1.0]])
    assert torch.equal(torch.isnan(codes), torch.isnan(expected))
    assert torch.equal(torch.nan_to_num(codes), torch.nan_to_num(expected))
    assert torch.isnan(comparison_codes(torch.ones(1, 3), torch.tensor([NAN]))).all()


def test_counts_from_greater_and_less() -> None:
    # task 0: 5 candidates, 2 above and 1 below the true score, so 1 tie; task 1: 3 candidates, 1 below
    counts = BatchCounts.from_counts(
        torch.tensor([2, 0]), torch.tensor([1, 1]), torch.tensor([False, True]), torch.tensor([5, 3])
    )
    assert counts.equal.tolist() == [1, 1]
    assert counts.has_nan.tolist() == [False, True]
    optimistic, pessimistic, num_candidates = counts.ranks()
    assert (int(optimistic[0]), int(pessimistic[0]), int(num_candidates[0])) == (3, 4, 5)


def _tile_brute_force(tile: np.ndarray, rows: np.ndarray, true: np.ndarray) -> tuple[list, list, list]:
    greater = [int(np.sum(tile[r] > t)) for r, t in zip(rows, true, strict=True)]
    less = [int(np.sum(tile[r] < t)) for r, t in zip(rows, true, strict=True)]
    nan = [bool(np.isnan(tile[r]).any() or np.isnan(t)) for r, t in zip(rows, true, strict=True)]
    return greater, less, nan


@pytest.mark.parametrize("with_rows", [False, True])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("seed", range(6))
def test_count_tile_matches_brute_force(kernel: str, seed: int, with_rows: bool) -> None:
    rng = np.random.default_rng(seed)
    height, width = int(rng.integers(1, 9)), int(rng.integers(1, 40))
    tile = rng.integers(-2, 3, size=(height, width)).astype(np.float32)
    for value, share in ((INF, 0.1), (-INF, 0.1), (NAN, 0.02 * (seed % 3))):
        tile[rng.random(tile.shape) < share] = value
    rows = rng.integers(0, height, size=int(rng.integers(1, 12))) if with_rows else np.arange(height)
    true = tile[rows, rng.integers(0, width, size=rows.size)]
    true[rng.random(rows.size) < 0.1] = rng.choice([INF, -INF, 3.0, -3.0])
    expected = _tile_brute_force(tile, rows, true)
    tensor = torch.from_numpy(tile)
    greater, less, nan = count_tile(
        tensor.clone(), torch.from_numpy(true), kernel, torch.from_numpy(rows) if with_rows else None,
        owned=True, workspace=Workspace(),
    )  # fmt: skip
    assert nan.tolist() == expected[2]
    clean = [i for i, flagged in enumerate(expected[2]) if not flagged]  # counts of NaN rows are unspecified
    assert [int(greater[i]) for i in clean] == [expected[0][i] for i in clean]
    assert [int(less[i]) for i in clean] == [expected[1][i] for i in clean]


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("with_rows", [False, True])
@pytest.mark.parametrize("chunk_elements", [1, 29, 64, 2**21])
@pytest.mark.parametrize("seed", range(4))
def test_sign_kernel_in_row_chunks_matches_brute_force(
    monkeypatch, seed: int, chunk_elements: int, with_rows: bool, owned: bool
) -> None:
    """The CPU "sign" kernel codes the task rows a chunk at a time (one row per chunk, a row and a part, two rows,
    all at once): every chunk boundary gives the brute-force counts, row maps with repeated rows gather the right
    rows, and a tile it does not own is left as it was."""
    monkeypatch.setattr(kernels, "EAGER_CHUNK_ELEMENTS", chunk_elements)
    rng = np.random.default_rng(100 + seed)
    height, width = int(rng.integers(1, 12)), int(rng.integers(20, 33))
    tile = rng.integers(-2, 3, size=(height, width)).astype(np.float32)  # heavy ties
    for value, share in ((INF, 0.1), (-INF, 0.1), (NAN, 0.03 * (seed % 2))):
        tile[rng.random(tile.shape) < share] = value
    rows = np.sort(rng.integers(0, height, size=int(rng.integers(1, 25)))) if with_rows else np.arange(height)
    true = tile[rows, rng.integers(0, width, size=rows.size)]
    true[rng.random(rows.size) < 0.1] = rng.choice([INF, -INF, NAN, 3.0])
    expected = _tile_brute_force(tile, rows, true)
    tensor = torch.from_numpy(tile.copy())
    greater, less, nan = kernels.SIGN.count(
        tensor, torch.from_numpy(true), torch.from_numpy(rows) if with_rows else None, owned=owned,
        workspace=Workspace(),
    )  # fmt: skip
    assert nan.tolist() == expected[2]
    clean = [i for i, flagged in enumerate(expected[2]) if not flagged]  # counts of NaN rows are unspecified
    assert [int(greater[i]) for i in clean] == [expected[0][i] for i in clean]
    assert [int(less[i]) for i in clean] == [expected[1][i] for i in clean]
    if with_rows or not owned:
        assert np.array_equal(tensor.numpy(), tile, equal_nan=True)


def test_sign_kernel_reads_repeated_queries_rows_in_place() -> None:
    """On CPU the "sign" kernel takes the distinct-query tile and the row map (batches and GEMMs of distinct
    queries, as for the numba kernel); "compare" (every other device) still takes one row per task."""
    assert kernels.SIGN.reads_rows_in_place
    assert not kernels.COMPARE.reads_rows_in_place
    assert kernels.eager_kernel(torch.device("cpu")) is kernels.SIGN


@pytest.mark.parametrize("kernel", KERNELS)
def test_count_tile_leaves_a_tile_it_does_not_own_unchanged(kernel: str) -> None:
    tile = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    copy = tile.clone()
    greater, less, _nan = count_tile(tile, torch.tensor([2.0, 3.0]), kernel, owned=False)
    assert torch.equal(tile, copy)
    assert (greater.tolist(), less.tolist()) == ([1, 0], [1, 2])


@pytest.mark.parametrize("layout", ["column-slice", "transposed", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_count_tile_of_views_and_dtypes(kernel: str, layout: str) -> None:
    """Tiles as the loop hands them over: column slices of a wider score matrix (read in place by the numba
    kernel), a transposed (column-major) tile, half-precision and float64 scores; widths past any vector length."""
    rng = np.random.default_rng(len(layout))
    full = rng.integers(-3, 4, size=(7, 301)).astype(np.float32)  # small integers: heavy ties, exact in float16
    full[rng.random(full.shape) < 0.05] = INF
    rows = rng.integers(0, 7, size=9)
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}.get(layout)
    tensor = torch.from_numpy(full)
    if layout == "column-slice":
        tile, columns = tensor[:, 37:290], slice(37, 290)
    elif layout == "transposed":
        tile, columns = tensor.t().contiguous().t(), slice(None)
    else:
        tile, columns = tensor.to(dtype), slice(None)
    true = full[rows, rng.integers(0, 301, size=rows.size)]
    expected = _tile_brute_force(full[:, columns], rows, true)
    greater, less, nan = count_tile(tile, torch.from_numpy(true).to(tile.dtype), kernel, torch.from_numpy(rows))
    assert (greater.tolist(), less.tolist(), nan.tolist()) == expected
    assert torch.equal(tensor[:, columns].to(tile.dtype), tile)  # not written to


def test_numba_kernel_uses_torch_thread_count() -> None:
    import numba

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        count_tile(torch.zeros(2, 3), torch.zeros(2), "numba")
        assert numba.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_count_tile_float64_and_unknown_kernel() -> None:
    tile = torch.tensor([[1.0, 1.0 + 2**-40, 1.0 - 2**-40]], dtype=torch.float64)
    for kernel in KERNELS:
        greater, less, _nan = count_tile(tile.clone(), torch.tensor([1.0], dtype=torch.float64), kernel)
        assert (int(greater[0]), int(less[0])) == (1, 1), kernel
    with pytest.raises(ValueError, match="kernel must be one of"):
        count_tile(tile, torch.tensor([1.0], dtype=torch.float64), "fast")


def _chooser(requested: str, available: bool = True, loaded: bool = False) -> choice.KernelChooser:
    """A chooser switching after 100 scores, with numba's availability and loading given (the rule, not this
    machine)."""
    return choice.KernelChooser(requested, 100, numba_available=lambda: available, numba_loaded=lambda: loaded)


def test_auto_kernel_switches_to_numba_after_the_eager_budget() -> None:
    """The ski-rental rule: eager until the chooser has counted ``switch_after`` scores, then numba."""
    cpu = torch.device("cpu")
    chooser = _chooser("auto")
    assert chooser.choose(cpu, 60) is kernels.SIGN
    assert chooser.choose(cpu, 39) is kernels.SIGN  # 60 + 39 < 100
    assert chooser.eager_scores_counted == 99
    assert chooser.choose(cpu, 1) is kernels.NUMBA  # 99 + 1 reaches 100
    assert chooser.eager_scores_counted == 99  # numba counting is not tallied
    assert _chooser("auto").choose(cpu, 100) is kernels.NUMBA  # one side that large switches at once
    assert _chooser("auto").choose(torch.device("meta"), 10**6) is kernels.COMPARE  # other devices stay eager
    assert _chooser("eager").choose(cpu, 60) is kernels.SIGN
    assert _chooser("auto", loaded=True).choose(cpu, 1) is kernels.NUMBA  # loaded already: nothing left to pay
    assert _chooser("eager", loaded=True).choose(cpu, 1) is kernels.SIGN
    assert _chooser("numba").choose(cpu, 1) is kernels.NUMBA
    with pytest.warns(RuntimeWarning, match="runs on the CPU only; counting on meta with the eager kernel"):
        assert _chooser("numba").choose(torch.device("meta"), 1) is kernels.COMPARE
    assert _chooser("numba", available=False).choose(cpu, 1) is kernels.SIGN
    assert _chooser("auto", available=False).choose(cpu, 10**6) is kernels.SIGN
    assert choice.KernelChooser(kernels.COMPARE).choose(cpu, 1) is kernels.COMPARE  # a forced kernel object
    with pytest.raises(ValueError, match="kernel must be one of"):
        choice.KernelChooser("fast")


def test_tally_belongs_to_one_chooser() -> None:
    """Two evaluators do not share their ski-rental tally."""
    first, second = _chooser("auto"), _chooser("auto")
    first.choose(torch.device("cpu"), 99)
    assert (first.eager_scores_counted, second.eager_scores_counted) == (99, 0)
    assert second.choose(torch.device("cpu"), 1) is kernels.SIGN


def test_numba_kernel_falls_back_to_eager_with_a_warning(monkeypatch) -> None:
    def broken(*args):
        raise RuntimeError("numba is broken")

    monkeypatch.setattr(kernels, "numba_counts", broken)  # a broken installation, simulated
    choice.numba_kernel_available.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="numba counting kernel is not usable here .numba is broken."):
            assert choice.KernelChooser("numba").choose(torch.device("cpu"), 1) is kernels.SIGN
    finally:
        choice.numba_kernel_available.cache_clear()


def test_numba_kernel_probe_passes_here() -> None:
    """numba is a dependency: its kernel must work wherever kgeval installs (no silent fallback in CI)."""
    assert choice.numba_kernel_available()
    assert choice.numba_is_loaded()


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


@pytest.mark.parametrize("kernel", KERNELS)
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
    work = BatchWork(queries, torch.from_numpy(true_positions), true_slice, bounds, blocks)
    result = count_batch(scorer, work, kernel=kernels.KERNEL_OBJECTS[kernel], workspace=Workspace())
    counts = result.counts
    assert result.raw is None
    greater, equal = _brute_force(scores, true_positions)
    assert counts.greater.tolist() == greater
    assert counts.equal.tolist() == equal
    assert not counts.has_nan.any()


@pytest.mark.parametrize("kernel", KERNELS)
def test_nan_rows_are_flagged(kernel: str) -> None:
    scores = torch.tensor([[1.0, NAN, 0.0], [1.0, 2.0, 0.0], [INF, -INF, NAN], [NAN, 1.0, 1.0]])
    scorer = FullRowScorer(Rows(scores), "tail", 3, None)
    queries = torch.stack([torch.arange(4), torch.zeros(4, dtype=torch.long)], dim=1)
    work = BatchWork(queries, torch.tensor([0, 0, 0, 0]), 0, [(0, 3)], [RowBlock(0, 4, 0, 4)])
    counts = count_batch(scorer, work, kernel=kernels.KERNEL_OBJECTS[kernel]).counts
    assert counts.has_nan.tolist() == [True, False, True, True]
    assert int(counts.greater[1]) == 1


def test_plus_and_minus_infinity_in_one_row_is_not_nan() -> None:
    scores = torch.tensor([[INF, -INF, 0.0, 1.0]])
    scorer = FullRowScorer(Rows(scores), "tail", 4, None)
    work = BatchWork(torch.tensor([[0, 0]]), torch.tensor([2]), 0, [(0, 4)], [RowBlock(0, 1, 0, 1)])
    counts = count_batch(scorer, work).counts
    assert not counts.has_nan.any()
    assert (int(counts.greater[0]), int(counts.equal[0])) == (2, 0)
