"""gemm_scoring._largest reads a matrix a chunk at a time (a memory-mapped candidate table is never copied whole)
and gives max |v|, or inf as soon as any chunk holds NaN or inf, as the whole-matrix maximum does."""

from __future__ import annotations

import math

import pytest
import torch

from kgeval._engine import gemm_scoring


@pytest.mark.parametrize("chunk", [1, 3, 7, 2**22])
@pytest.mark.parametrize("special", [None, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("row", [0, 5, 12])
def test_chunked_largest_equals_the_whole_matrix(monkeypatch, chunk: int, special: float | None, row: int) -> None:
    monkeypatch.setattr(gemm_scoring, "LARGEST_CHUNK", chunk)
    vectors = torch.randn(13, 3, generator=torch.Generator().manual_seed(row))
    vectors[row, 1] = -7.5  # the largest magnitude, negative
    if special is not None:
        vectors[(row + 4) % 13, 2] = special
    expected = math.inf if special is not None else 7.5
    assert gemm_scoring._largest(vectors) == expected


def test_largest_of_a_memory_mapped_table(tmp_path) -> None:
    """A table read through numpy.memmap (the candidates of a model larger than memory) is read in place."""
    np = pytest.importorskip("numpy")
    table = np.memmap(tmp_path / "table.f32", dtype=np.float32, mode="w+", shape=(1000, 4))
    table[:] = np.linspace(-2, 3, 4000, dtype=np.float32).reshape(1000, 4)
    table.flush()
    mapped = torch.from_numpy(np.memmap(tmp_path / "table.f32", dtype=np.float32, mode="r+", shape=(1000, 4)))
    assert gemm_scoring._largest(mapped) == 3.0
