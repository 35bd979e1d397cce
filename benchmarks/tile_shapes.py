"""What the CPU GEMM of the fast path costs in each tile layout, and what counting as the GEMM goes would cost.

    python benchmarks/tile_shapes.py                      # FB15k-237's shape: 22,850 query rows x 14,541, d = 200
    python benchmarks/tile_shapes.py --rows 5767 --candidates 40943   # WN18RR's

Random vectors of the given shape; each variant scores every query row against every candidate and reports its best
of ``--repeats`` (seconds for all rows):

- ``strided R``: tiles of R rows x all candidates, the GEMM written in 512-column blocks through the tile's row stride
  (kgeval's layout);
- ``contiguous R``: the same blocks, each written into contiguous memory (the floor's layout);
- ``strided R + pass``: as ``strided R``, with one pass over each finished tile before the next (what counting does:
  it evicts the candidate table from the last-level cache);
- ``hot R``: contiguous blocks of R x 512 in one reused buffer, each counted at once against per-task float32
  thresholds by a numba loop (counting as the GEMM goes; ~1.8 tasks per row, as on FB15k-237). The "mm" figure is the
  GEMM's share.

Not a kgeval evaluation: the layouts are measured apart from everything else, to decide between them
(docs/measurements.md, "Where the rest goes").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

#: candidate columns per GEMM call (kgeval._engine.gemm_scoring.CPU_GEMM_COLUMNS)
COLUMNS = 512


def _hot_count():
    """The numba loop of ``hot``: counts of each task's scores above / below its thresholds in one block."""
    import numba
    from numba import njit, prange

    @njit(parallel=True, nogil=True, error_model="numpy")
    def count_block(block, rows, low, high, greater, less):  # pragma: no cover - runs compiled
        tasks = rows.shape[0]
        chunks = min(tasks, numba.get_num_threads())
        for chunk in prange(chunks):
            for i in range(chunk * tasks // chunks, (chunk + 1) * tasks // chunks):
                row, lo, hi = rows[i], low[i], high[i]
                above = np.int32(0)
                below = np.int32(0)
                for j in range(block.shape[1]):
                    score = block[row, j]
                    above += np.int32(score > hi)
                    below += np.int32(score < lo)
                greater[i] += above
                less[i] += below

    return count_block


def best_of(repeats: int, run: Callable[[], float | None]) -> tuple[float, float]:
    """(best wall seconds, best returned seconds) of ``run`` over ``repeats`` calls."""
    wall, part = float("inf"), float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        inner = run()
        wall = min(wall, time.perf_counter() - started)
        part = min(part, inner if inner is not None else wall)
    return wall, part


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=22_850, help="distinct query rows (all sides)")
    parser.add_argument("--candidates", type=int, default=14_541)
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--tasks-per-row", type=float, default=1.8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    candidates = torch.randn(args.candidates, args.dim, generator=generator) * 0.1
    print(f"{args.rows:,} query rows x {args.candidates:,} candidates, d = {args.dim}, "
          f"{torch.get_num_threads()} threads; best of {args.repeats}, seconds for all rows")  # fmt: skip

    def tiles(rows: int) -> tuple[torch.Tensor, int]:
        queries = torch.randn(rows, args.dim, generator=generator) * 0.1
        return queries, max(1, args.rows // rows)

    def scale(rows: int, count: int) -> float:
        return args.rows / (rows * count)

    for rows in (576, 1024, 2048):
        queries, count = tiles(rows)
        factor = scale(rows, count)
        out = torch.zeros(rows * args.candidates)  # every page touched before timing
        strided_tiles(queries, candidates, 1, False, out)  # warm-up: the BLAS's threads and buffers
        strided = best_of(args.repeats, partial(strided_tiles, queries, candidates, count, False, out))[0]
        contiguous = best_of(args.repeats, partial(contiguous_blocks, queries, candidates, count, out))[0]
        with_pass = best_of(args.repeats, partial(strided_tiles, queries, candidates, count, True, out))[1]
        print(f"strided {rows}: {strided * factor:.3f}   contiguous {rows}: {contiguous * factor:.3f}   "
              f"strided {rows} + pass: GEMM {with_pass * factor:.3f}")  # fmt: skip

    count_block = _hot_count()
    for rows in (1024, 2048):
        queries, count = tiles(rows)
        counting = HotCounting(count_block, rows, int(rows * args.tasks_per_row))
        wall, gemm = best_of(args.repeats, partial(counting.run, queries, candidates, count))
        factor = scale(rows, count)
        print(f"hot {rows}: {wall * factor:.3f} (mm {gemm * factor:.3f})")


def strided_tiles(
    queries: torch.Tensor, candidates: torch.Tensor, count: int, with_pass: bool, out: torch.Tensor
) -> float:
    """``count`` tiles of queries x all candidates into ``out`` (rows * candidates elements), in column blocks
    written through the tile's row stride, with a pass over each finished tile when ``with_pass``; returns the
    seconds spent in the GEMMs."""
    tile = out.view(queries.shape[0], candidates.shape[0])
    gemm = 0.0
    for _ in range(count):
        started = time.perf_counter()
        for first in range(0, candidates.shape[0], COLUMNS):
            block = candidates[first : first + COLUMNS]
            torch.mm(queries, block.T, out=tile[:, first : first + len(block)])
        gemm += time.perf_counter() - started
        if with_pass:
            tile.sum()
    return gemm


def contiguous_blocks(queries: torch.Tensor, candidates: torch.Tensor, count: int, flat: torch.Tensor) -> None:
    """``count`` tiles of queries x all candidates into ``flat`` (rows * candidates elements), each column block
    written into contiguous memory."""
    rows = queries.shape[0]
    for _ in range(count):
        for first in range(0, candidates.shape[0], COLUMNS):
            block = candidates[first : first + COLUMNS]
            torch.mm(queries, block.T, out=flat[first * rows : (first + len(block)) * rows].view(rows, -1))


class HotCounting:
    """Column blocks written into one reused buffer and counted at once by ``count_block`` against per-task
    thresholds (``tasks`` tasks over ``rows`` query rows, random thresholds)."""

    def __init__(self, count_block: Callable, rows: int, tasks: int) -> None:
        rng = np.random.default_rng(0)
        self.count_block, self.rows = count_block, rows
        self.task_rows = np.sort(rng.integers(0, rows, tasks))
        self.low = (rng.standard_normal(tasks) * 0.01).astype(np.float32)
        self.high = self.low + np.float32(1e-6)
        self.greater, self.less = np.zeros(tasks, np.int32), np.zeros(tasks, np.int32)
        self.buffer = torch.zeros(rows * COLUMNS)
        self._count(self.buffer.view(rows, COLUMNS))  # compile

    def _count(self, scores: torch.Tensor) -> None:
        self.count_block(scores.numpy(), self.task_rows, self.low, self.high, self.greater, self.less)

    def run(self, queries: torch.Tensor, candidates: torch.Tensor, count: int) -> float:
        """``count`` tiles, counted block by block; returns the seconds spent in the GEMMs."""
        gemm = 0.0
        for _ in range(count):
            for first in range(0, candidates.shape[0], COLUMNS):
                block = candidates[first : first + COLUMNS]
                started = time.perf_counter()
                scores = torch.mm(queries, block.T, out=self.buffer[: self.rows * len(block)].view(self.rows, -1))
                gemm += time.perf_counter() - started
                self._count(scores)
        return gemm


if __name__ == "__main__":
    main()
