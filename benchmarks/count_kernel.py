"""Nanoseconds per score of each counting loop in isolation, on this machine's ISA (or under benchmarks/as_avx2.py).

    python benchmarks/count_kernel.py
    python benchmarks/as_avx2.py python benchmarks/count_kernel.py

- ``blocks in bands``: kgeval._engine.kernels.numba_loop.count_blocks_in_bands on one GEMM block as FB15k-237's batches
  have them (1,024 distinct query rows x 512 candidates, float32, in cache; 1,800 tasks, each counting its query
  row against a band that holds none of its scores) -- the count of the CPU fast path;
- ``rows (numba)``: count_rows over whole rows of a tile of FB15k-237's width (14,541 candidates): 64 rows (3.7 MB,
  in the last-level cache: the loop's own speed) and 1,024 rows (60 MB, read from memory as the tile path reads its
  tiles);
- ``rows (eager)``: the eager kernel's PyTorch operations on the same tiles (its CPU variant, ``sign``).

Each is timed ``--repeats`` times, best kept, on 1 thread and on every thread PyTorch uses; printed as ns per
score (the scores counted: tasks x columns).

Then the compare loop of block counting alone, on one thread, as kgeval compiles it (sums kept in 32 bits) and
written the former way (``above += np.int32(score > high)``, which numba widens to 64-bit lanes): both compiled
here, called in alternation on the same block in cache, ``--repeats`` x 10 times each; the median and the best ns
per score of each, and their ratio. Interleaved in one process, the comparison stands a noisy machine better than
two runs do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import format_table, machine

from kgeval._engine.kernels import count_tile, eager_kernel


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    run()  # compiles (numba) and warms the caches
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def blocks_in_bands(threads: int, rows: int = 1024, width: int = 512, tasks: int = 1800) -> tuple[Callable, int]:
    """One block counted for ``tasks`` tasks (a call as block counting makes it); returns (run, scores counted)."""
    from kgeval._engine.kernels.numba_loop import count_blocks_in_bands

    rng = np.random.default_rng(0)
    buffer = rng.standard_normal(rows * width).astype(np.float32)
    task_rows = rng.integers(0, rows, tasks).astype(np.int64)
    order = np.argsort(task_rows, kind="stable").astype(np.int64)
    low = np.full(tasks, 10.0, dtype=np.float32)  # above every score: all counted "below", nothing kept
    high = np.full(tasks, 10.5, dtype=np.float32)
    none = np.zeros(tasks, dtype=np.int64)
    counts = np.zeros((tasks, 6), dtype=np.int64)
    kept_values = np.empty((tasks, 64), dtype=np.float32)
    kept = np.zeros(tasks, dtype=np.int64)
    true_values = np.full(tasks, np.nan, dtype=np.float32)
    positions = np.zeros(0, dtype=np.int64)
    offsets, firsts, widths = (np.array([value], dtype=np.int64) for value in (0, 0, width))
    answers = np.full(tasks, -1, dtype=np.int64)

    def run() -> None:
        count_blocks_in_bands(buffer, offsets, firsts, widths, order, task_rows, low, high, answers, positions, none,
                              none.astype(np.bool_), none.copy(), np.zeros(0, np.float32), counts, kept_values, kept,
                              true_values, threads)  # fmt: skip

    return run, tasks * width


def compare_loops() -> dict[str, Callable[[np.ndarray, float, float], object]]:
    """The compare loop over every row of a block: kgeval's (32-bit sums) and the widening way, compiled here."""
    import numba

    from kgeval._engine.kernels.numba_loop import outside_band

    @numba.njit(inline="always")
    def widening(scores, low, high):  # pragma: no cover - runs compiled
        above = np.int32(0)
        below = np.int32(0)
        for j in range(scores.shape[0]):
            above += np.int32(scores[j] > high)
            below += np.int32(scores[j] < low)
        return above, below

    def over_rows(band: Callable) -> Callable:
        @numba.njit
        def run(block, low, high):  # pragma: no cover - runs compiled
            total = 0
            for i in range(block.shape[0]):
                above, below = band(block[i], low, high)
                total += above + below
            return total

        return run

    return {"32-bit sums (kgeval)": over_rows(outside_band), "64-bit sums (widening)": over_rows(widening)}


def interleaved(loops: dict[str, Callable], repeats: int) -> list[list[str]]:
    """Each loop over one (1,024 x 512) float32 block, called in alternation; median and best ns per score."""
    block = np.random.default_rng(2).standard_normal((1024, 512)).astype(np.float32)
    low, high = np.float32(10.0), np.float32(10.5)
    times: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():
        loop(block, low, high)  # compile
    for _ in range(repeats):
        for name, loop in loops.items():
            start = time.perf_counter()
            loop(block, low, high)
            times[name].append(time.perf_counter() - start)
    first = statistics.median(next(iter(times.values())))
    return [[name, f"{statistics.median(t) * 1e9 / block.size:.3f}", f"{min(t) * 1e9 / block.size:.3f}",
             f"{statistics.median(t) / first:.2f}x"] for name, t in times.items()]  # fmt: skip


def tile_rows(kernel: str, rows: int = 1024, width: int = 14_541) -> tuple[Callable, int]:
    tile = torch.randn(rows, width, generator=torch.Generator().manual_seed(1))
    true = tile[:, 7].clone()
    return (lambda: count_tile(tile, true, kernel)), rows * width


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    import numba

    print(machine())
    every = torch.get_num_threads()
    table = []
    for threads in sorted({1, every}):
        torch.set_num_threads(threads)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        eager = eager_kernel(torch.device("cpu")).name
        cases = {
            "blocks in bands (numba)": blocks_in_bands(threads),
            "rows (numba), 64 rows in cache": tile_rows("numba", rows=64),
            "rows (numba), 1,024 rows from memory": tile_rows("numba"),
            "rows (eager), 64 rows in cache": tile_rows(eager, rows=64),
            "rows (eager), 1,024 rows from memory": tile_rows(eager),
        }
        for name, (run, scores) in cases.items():
            seconds = best_seconds(run, args.repeats)
            table.append([name, str(threads), f"{seconds * 1e9 / scores:.3f}", f"{seconds * 1e3:.2f}"])
    torch.set_num_threads(every)
    print(format_table(table, ["loop", "threads", "ns / score", "ms per call"]))
    print()
    print(
        format_table(
            interleaved(compare_loops(), args.repeats * 10),
            ["compare loop, 1 thread, interleaved", "median ns / score", "best ns / score", "vs kgeval"],
        )
    )


if __name__ == "__main__":
    main()
