"""Counting each GEMM block while it is still in the cache (CPU, the numba kernel, query/candidate models).

The tile path writes a batch's scores into a tile of many rows x every candidate and counts the tile afterwards; on
CPU that tile is larger than the last-level cache, so the GEMM writes it out to memory and the count reads it back.
Here each GEMM block (the batch's distinct query rows x 512 candidates) goes into one small reused buffer and is
counted at once, before the next block overwrites it -- but a task's true score, which its counts compare with,
lies in one of those blocks, so it is not known while the others are counted. Each task therefore gets a band
[low, high] around an estimate of its true score (the products summed in float64, widened by the bounds on the
GEMM's and the estimate's rounding; ``GemmScorer.score_bands``): a score above ``high`` lies above the true score,
one below ``low`` below it, and the few inside the band (the true score among them) are kept. The true
score itself is copied from its block as it goes by, and so are the scores of the task's filtered positions (its
sorted run, walked alongside the blocks). At the end the kept and the filtered scores are compared with the true
score exactly (kgeval._engine.kernels.numba_loop.resolve_bands).

The result is exact whatever the estimate: if a true score falls outside its band, or more scores fall inside a
band than can be kept, :func:`count_in_cache` returns None and the batch is counted tile by tile instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from kgeval._engine.kernels import Kernel, follow_torch_threads, numba_lock, numba_threads
from kgeval._engine.kernels.count_threads import count_threads
from kgeval._engine.pairs import PairTiles
from kgeval._engine.scoring import CandidateScorer

#: scores kept per task inside its band (its true score among them); a batch with a task beyond it is counted tile
#: by tile (DistMult d = 200: 2.8 per task on average on FB15k-237, at most 12; 6.0 on WN18RR, at most 21)
KEPT_PER_TASK = 64

#: query rows per GEMM block at most (x 512 candidates: 4 MiB of float32; the default batches hold <= 1024 queries)
BLOCK_ROWS = 2048

#: scores (tasks x block columns) one call of the numba kernel counts at least: blocks are added to a call until it
#: has that much work, so that its threads' start-up is amortised. FB15k-237's ~1,800 tasks per batch fill a call
#: with one block, counted while still in the cores' caches (1.03 s against 1.11-1.14 s with two or four per call);
#: WN18RR's ~600 take two
SCORES_PER_CALL = 2**20

#: blocks per call at most (the buffer holds this many)
MAX_BLOCKS_PER_CALL = 8

#: dtypes of the scores the bands are compared in (the numba kernel's)
BAND_DTYPES = (torch.float32, torch.float64)


@dataclass(frozen=True)
class BlockCounts:
    """The counts of a batch from its blocks (LongTensors of shape (B,) unless stated)."""

    greater: torch.Tensor  #: #{candidates : s > s*}, the true answer excluded (it ties with itself)
    less: torch.Tensor  #: #{candidates : s < s*}
    pairs: tuple[torch.Tensor, torch.Tensor] | None  #: the filtered pairs' (#above, #below); None: unfiltered
    fine: tuple[torch.Tensor, torch.Tensor] | None  #: likewise, the finer filter's pairs (None without one)
    true_scores: torch.Tensor  #: (B,) each task's true score, as its block held it (the scores' dtype)


def applies(kernel: Kernel, scorer: CandidateScorer, true_scores_given: bool) -> bool:
    """Whether a begun batch can be counted block by block: the kernel does it (numba), the scorer's blocks are
    GEMMs of its vectors on the CPU that cannot hold NaN or inf (``scorer.counts_in_cache``, e.g.
    kgeval._engine.gemm_scoring.GemmScorer's), in a dtype the kernel compares, and the true answers are among the
    candidates (no true scores given)."""
    if not (kernel.counts_blocks_in_cache and scorer.counts_in_cache) or true_scores_given:
        return False
    return scorer.vector_dtype in BAND_DTYPES  # type: ignore[attr-defined]


def count_in_cache(
    scorer: CandidateScorer,
    task_rows: torch.Tensor,
    true_positions: torch.Tensor,
    pairs: PairTiles | None,
    kept_per_task: int | None = None,
) -> BlockCounts | None:
    """Count a batch block by block (see the module docstring); None when a task's band missed (then nothing is
    returned for any task, and the caller counts the batch tile by tile).

    Parameters
    ----------
    scorer : GemmScorer
        Begun with the batch's distinct queries; ``scorer.product_block`` scores them against candidate blocks,
        ``scorer.score_bands`` gives each task's band.
    task_rows : LongTensor of shape (B,)
        The distinct-query row of each task (CPU).
    true_positions : LongTensor of shape (B,)
        The candidate position of each task's true answer.
    pairs : PairTiles, optional
        The batch's filtered pairs (and query groups); None ranks against every candidate.
    kept_per_task : int, optional
        How many scores inside its band a task may keep (default :data:`KEPT_PER_TASK`).
    """
    from kgeval._engine.kernels.numba_loop import count_blocks_in_bands, resolve_bands

    low, high = (band.numpy() for band in scorer.score_bands(task_rows, true_positions))  # type: ignore[attr-defined]
    runs = _task_runs(pairs, task_rows.numel(), scorer.num_candidates)
    state = _TaskState.empty(task_rows.numel(), kept_per_task or KEPT_PER_TASK, low.dtype, runs)
    rows = task_rows.numpy()
    order = np.argsort(rows, kind="stable")  # tasks by query row: a contiguous range per row block
    sorted_rows = rows[order]
    answers = np.ascontiguousarray(true_positions.numpy())
    num_queries = int(scorer.num_queries)  # type: ignore[attr-defined]
    height = min(num_queries, BLOCK_ROWS)
    width = scorer.block_columns  # type: ignore[attr-defined]
    per_call = max(1, min(MAX_BLOCKS_PER_CALL, SCORES_PER_CALL // max(1, task_rows.numel() * width)))
    groups = _column_groups(scorer.num_candidates, width, per_call)
    buffer = torch.empty(height * width * per_call, dtype=torch.from_numpy(low).dtype, device="cpu")
    available, choice = follow_torch_threads(), count_threads()
    for query_start in range(0, num_queries, height):
        query_stop = min(num_queries, query_start + height)
        begin, end = np.searchsorted(sorted_rows, [query_start, query_stop])
        if begin == end:
            continue
        tasks, local_rows = order[begin:end], rows - query_start  # only these tasks' rows are read
        for firsts, widths in groups:
            threads = choice.next(available)
            started = time.perf_counter()
            offsets = _block_offsets(widths, query_stop - query_start)
            for first, columns, offset in zip(firsts.tolist(), widths.tolist(), offsets.tolist(), strict=True):
                out = buffer[offset : offset + (query_stop - query_start) * columns].view(-1, columns)
                scorer.product_block(query_start, query_stop, first, first + columns, out)  # type: ignore[attr-defined]
            with numba_lock(), numba_threads(threads):
                count_blocks_in_bands(buffer.numpy(), offsets, firsts, widths, tasks, local_rows, low, high, answers,
                                      runs.positions, runs.ends, runs.gathers, state.cursors, state.pair_values,
                                      state.counts, state.kept_values, state.kept, state.true_values,
                                      threads)  # fmt: skip
            choice.record(available, threads, time.perf_counter() - started, (end - begin) * int(widths.sum()))
    failed = np.zeros(task_rows.numel(), dtype=np.bool_)
    with numba_lock(), numba_threads(choice.next(available)):  # the same choice: with one thread, no worker woken
        resolve_bands(low, high, state.true_values, state.kept_values, state.kept, runs.starts, runs.ends,
                      state.pair_values, runs.in_fine, state.counts, failed)  # fmt: skip
    if failed.any():
        return None
    result = torch.from_numpy(state.counts).T
    filtered = (result[2], result[3]) if pairs is not None else None
    fine = (result[4], result[5]) if pairs is not None and pairs.pairs.in_fine is not None else None
    return BlockCounts(result[0], result[1], filtered, fine, torch.from_numpy(state.true_values))


@dataclass(frozen=True)
class _TaskRuns:
    """Each task's filtered positions as one sorted run (numpy; see :func:`_task_runs`)."""

    positions: np.ndarray  #: int64 (P,)
    starts: np.ndarray  #: int64 (B,)
    ends: np.ndarray  #: int64 (B,)
    in_fine: np.ndarray  #: int64 (P,): 1 where the finer filter removes the position too
    gathers: np.ndarray  #: bool (B,): the task copies its run's scores (tasks sharing a run: the first)


@dataclass(frozen=True)
class _TaskState:
    """What the numba kernels accumulate per task across the blocks of a batch (numpy arrays)."""

    counts: np.ndarray  #: int64 (B, 6): above, below; the pairs' above, below; the finer filter's above, below
    kept_values: np.ndarray  #: (B, kept_per_task) scores inside the band
    kept: np.ndarray  #: int64 (B,): how many fell inside (may exceed the capacity)
    true_values: np.ndarray  #: (B,) the true scores, NaN until read
    pair_values: np.ndarray  #: (P,) the scores of the runs' positions
    cursors: np.ndarray  #: int64 (B,): each task's next position in its run

    @classmethod
    def empty(cls, size: int, kept_per_task: int, dtype: np.dtype, runs: _TaskRuns) -> _TaskState:
        return cls(
            counts=np.zeros((size, 6), dtype=np.int64),
            kept_values=np.empty((size, kept_per_task), dtype=dtype),
            kept=np.zeros(size, dtype=np.int64),
            true_values=np.full(size, np.nan, dtype=dtype),
            pair_values=np.empty(runs.positions.shape[0], dtype=dtype),
            cursors=runs.starts.copy(),
        )


def _column_groups(num_candidates: int, width: int, per_call: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The candidate blocks counted per kernel call: (first columns, widths), int64, ``per_call`` blocks of
    ``width`` columns at a time (the last one narrower)."""
    firsts = np.arange(0, num_candidates, width, dtype=np.int64)
    widths = np.minimum(firsts + width, num_candidates) - firsts
    return [(firsts[g : g + per_call], widths[g : g + per_call]) for g in range(0, len(firsts), per_call)]


def _block_offsets(widths: np.ndarray, rows: int) -> np.ndarray:
    """Where each block of ``rows`` x ``widths[b]`` scores starts in the buffer, one after the other (int64)."""
    offsets = np.zeros(len(widths), dtype=np.int64)
    np.cumsum(widths[:-1] * rows, out=offsets[1:])
    return offsets


def _task_runs(pairs: PairTiles | None, size: int, num_candidates: int) -> _TaskRuns:
    """Each task's filtered positions as one sorted run. The expanded pairs come first, sorted by (task row,
    position); a query group's tasks all point at one run of the group's positions, which its first task gathers
    (they share a query row)."""
    empty = np.zeros(0, dtype=np.int64)
    zeros = np.zeros(size, dtype=np.int64)
    if pairs is None:
        return _TaskRuns(empty, zeros, zeros.copy(), empty, np.zeros(size, dtype=np.bool_))
    batch = pairs.pairs
    rows, positions = batch.rows, batch.positions
    in_fine = batch.in_fine.long() if batch.in_fine is not None else torch.zeros_like(positions)
    if positions.numel() > 1:
        same_row = rows[1:] == rows[:-1]
        if bool(((positions[1:] < positions[:-1]) & same_row).any()):  # a whitelist's order: sort each run
            order = torch.argsort(rows * num_candidates + positions, stable=True)
            positions, in_fine = positions[order], in_fine[order]
    per_task = torch.bincount(rows, minlength=size)
    ends = torch.cumsum(per_task, 0)
    starts = ends - per_task
    gathers = torch.ones(size, dtype=torch.bool, device=rows.device)
    parts, fine_parts = [positions], [in_fine]
    offset = positions.numel()
    for group in pairs.groups or ():
        group_positions = group.positions
        if group_positions.numel() > 1 and bool((group_positions[1:] < group_positions[:-1]).any()):
            group_positions = torch.sort(group_positions).values
        starts[group.row_start : group.row_stop] = offset
        offset += group_positions.numel()
        ends[group.row_start : group.row_stop] = offset
        gathers[group.row_start + 1 : group.row_stop] = False  # one query row: its first task gathers for all
        parts.append(group_positions)
        fine_parts.append(torch.zeros_like(group_positions))
    as_numpy = [np.ascontiguousarray(torch.cat(part).numpy(), dtype=np.int64) for part in (parts, fine_parts)]
    return _TaskRuns(as_numpy[0], starts.numpy(), ends.numpy(), as_numpy[1], gathers.numpy())
