"""Sizes of one side's loop -- candidates per slice, tasks per batch, rows per tile -- and out-of-memory retries.

With ``batch_size=None`` the sizes come from a memory budget (a fraction of the free memory on CUDA, fixed sizes
on CPU); an out-of-memory error halves the failing batch and retries it, and the size that worked is remembered
by the evaluator for later calls with the same shapes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import torch

from kgeval._engine.scoring import CandidateScorer

#: score elements one model call may produce on CPU (16 MiB of float32)
CPU_SCORE_BUDGET = 2**22
#: score elements compared at once on CPU: 8 MiB of float32, a last-level-cache tile (best of 2**18 .. 2**22)
CPU_TILE_ELEMENTS = 2**21
#: score elements per tile on CPU for a kernel that counts a tile in one pass reading its rows in place (numba), and
#: for GEMM scorers with any kernel: taller column-blocked GEMMs run nearer the BLAS's peak, which outweighs the eager
#: kernel's passes leaving the cache (FB15k-237, DistMult d = 200, 2 cores, in-process: eager 2.71 -> 1.63 s, numba
#: 1.51 -> 1.04 s with the blocked GEMM; WN18RR even). The slices are still chosen from CPU_TILE_ELEMENTS.
CPU_TALL_TILE_ELEMENTS = 2**23
#: ranking tasks per batch for GEMM scorers on CPU (tiles bound the memory, batches amortise the planning)
CPU_GEMM_BATCH = 1024
#: tile rows below which a GEMM loses efficiency (d = 200: 51-row tiles ran 1.6x slower than 128-row ones on
#: WN18RR's 40,943 entities): wider candidate sets are sliced instead
MIN_TILE_ROWS = 128
#: filtered pairs per batch (each costs ~40 bytes while the batch runs)
MAX_PAIRS = 2**21
#: fraction of the free accelerator memory one batch may use, and bytes per score element budgeted
DEVICE_MEMORY_FRACTION = 0.5
DEVICE_BYTES_PER_SCORE = 16

T = TypeVar("T")


@dataclass(frozen=True)
class Sizes:
    """The sizes of one side's loop."""

    batch_size: int  #: ranking tasks per batch
    slice_size: int  #: candidates per slice
    tile_rows: int  #: task rows per tile
    max_pairs: int  #: filtered pairs per batch (beyond a batch's first task)
    automatic: bool  #: batch size chosen here (then out-of-memory errors are retried)


#: score elements a mixed-slice batch may keep between its two passes on CPU (64 MiB of float32)
CPU_KEEP_BUDGET = 2**24


#: fewest tasks per mixed-slice batch (:func:`for_mixed_slices`): below, rescoring the answer slices that do not fit
#: the keep budget costs less than the many small model calls of smaller batches
MIN_MIXED_BATCH = 16


def for_mixed_slices(sizes: Sizes, device: torch.device, num_candidates: int) -> Sizes:
    """``sizes`` for batches that mix candidate slices (kgeval._engine.counting: a first pass reads the true scores
    from the answers' slices, counting reads every slice): automatic batches small enough that the scores of every
    answer slice fit the keep budget between the passes, so that each slice is scored once (with 301 tasks over 300k
    entities, batches of 256 scored the model's rows 1.65x over); never below :data:`MIN_MIXED_BATCH` tasks.

    A batch of B tasks has at most B distinct queries and min(B, slices) answer slices of ``slice_size``
    candidates: B fits when B * min(B, slices) * slice_size <= the budget, which holds for B = budget // all
    candidates and for B = sqrt(budget // slice_size) alike. For models' own methods, whose calls cost per row
    scored; a GEMM scorer keeps its tall tiles instead (short GEMMs run far from the BLAS's peak)."""
    if not sizes.automatic:
        return sizes
    budget, width = keep_budget(device), max(1, sizes.slice_size)
    rows = max(MIN_MIXED_BATCH, budget // max(1, num_candidates), math.isqrt(budget // width))
    if rows >= sizes.batch_size:
        return sizes
    return dataclasses.replace(sizes, batch_size=rows, tile_rows=min(sizes.tile_rows, rows))


def keep_budget(device: torch.device) -> int:
    """Score elements a batch may keep to count its answer slices without rescoring them (kgeval._engine.counting):
    a fixed budget on CPU, the score budget elsewhere."""
    return CPU_KEEP_BUDGET if device.type == "cpu" else score_budget(device)


def score_budget(device: torch.device) -> int:
    """Score elements one batch may hold: a fraction of the free memory on CUDA, a fixed budget on CPU."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return max(1, int(free * DEVICE_MEMORY_FRACTION) // DEVICE_BYTES_PER_SCORE)
    return CPU_SCORE_BUDGET


def choose_sizes(
    scorer: CandidateScorer,
    num_tasks: int,
    device: torch.device,
    batch_size: int | None = None,
    slice_size: int | None = None,
) -> Sizes:
    """Batch, slice and tile sizes for one side; the caller's ``batch_size`` / ``slice_size`` win."""
    budget = max(1, score_budget(device) // getattr(scorer, "memory_per_score", 1))
    on_cpu = device.type == "cpu"
    tile = CPU_TILE_ELEMENTS if on_cpu else budget
    num_candidates = scorer.num_candidates
    if slice_size is None:
        if scorer.sizing == "full_rows":
            slice_size = num_candidates
        elif scorer.sizing == "sliced":
            slice_size = min(num_candidates, max(1, budget // 256))
        else:  # GEMM: one slice if a tile of MIN_TILE_ROWS full rows fits, else slices of that many rows
            fits = num_candidates * MIN_TILE_ROWS <= tile
            slice_size = num_candidates if fits else max(1, tile // MIN_TILE_ROWS)
        limit = scorer.max_slice(device)  # a table streamed from host memory: a slice at a time, never all of it
        if limit is not None:
            slice_size = min(slice_size, limit)
    slice_size = min(slice_size, num_candidates)
    automatic = batch_size is None
    if batch_size is None:  # a CPU GEMM: tiles bound the memory, batches amortise the planning
        batch_size = CPU_GEMM_BATCH if scorer.sizing == "gemm" and on_cpu else max(1, budget // slice_size)
    batch_size = max(1, min(batch_size, num_tasks))
    tile_rows = max(1, min(batch_size, tile // slice_size))
    max_pairs = MAX_PAIRS if on_cpu else max(MAX_PAIRS, budget // 4)
    return Sizes(batch_size, slice_size, tile_rows, max_pairs, automatic)


def with_tall_tiles(sizes: Sizes, device: torch.device) -> Sizes:
    """``sizes`` with tiles of :data:`CPU_TALL_TILE_ELEMENTS` on CPU, for a kernel that counts each tile in one pass
    or a GEMM scorer, whose column-blocked GEMMs (kgeval._engine.gemm_scoring.CPU_GEMM_COLUMNS) run nearer the BLAS's
    peak with more rows; unchanged elsewhere, where the budget already sets the tiles. Never shorter than before,
    never more rows than a batch."""
    if device.type != "cpu":
        return sizes
    rows = max(sizes.tile_rows, min(sizes.batch_size, CPU_TALL_TILE_ELEMENTS // sizes.slice_size))
    return dataclasses.replace(sizes, tile_rows=rows)


def shape_key(scorer: CandidateScorer, sizes: Sizes, device: torch.device) -> Hashable:
    """What makes two calls "the same shapes" for the remembered batch sizes of :func:`run_with_retry`."""
    return (str(device), type(scorer).__name__, type(scorer.model).__qualname__, scorer.target,
            scorer.num_candidates, sizes.slice_size, sizes.tile_rows)  # fmt: skip


def run_with_retry(
    ranges: Iterable[tuple[int, int]],
    run: Callable[[int, int], T],
    key: Hashable,
    retry: bool,
    device: torch.device,
    remembered: dict[Hashable, int],
) -> list[T]:
    """``run(begin, end)`` over every range, in order; on out-of-memory halve the range and retry it.

    Parameters
    ----------
    ranges : iterable of (begin, end)
        The planned batches.
    run : callable
        Processes tasks [begin, end) and returns their result; must not keep state from a failed call.
    key : hashable
        Shape key under which a reduced batch size is remembered.
    retry : bool
        False re-raises out-of-memory errors (the caller fixed the batch size).
    device : torch.device
        Its cache is emptied after an out-of-memory error (CUDA).
    remembered : dict
        Batch sizes that worked after a retry, by shape key: read before the first batch, written on a retry
        (the evaluator's own, so a later call with the same shapes starts at the size that worked).

    Returns
    -------
    list
        The results, one per processed range (a retried range yields the results of its parts).
    """
    limit = remembered.get(key) if retry else None
    results: list[T] = []
    for begin, end in ranges:
        pending = [(begin, end)]
        while pending:
            start, stop = pending.pop(0)
            if limit is not None and stop - start > limit:
                pending[:0] = [(start, start + limit), (start + limit, stop)]
                continue
            try:
                results.append(run(start, stop))
            except torch.OutOfMemoryError:
                if not retry or stop - start == 1:
                    raise
                _release(device)
                limit = (stop - start) // 2
                remembered[key] = limit
                pending.insert(0, (start, stop))
    return results


def _release(device: torch.device) -> None:
    """Return cached blocks to the device after an out-of-memory error."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
