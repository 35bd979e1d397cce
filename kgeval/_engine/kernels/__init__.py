"""Tile kernels as objects -- :data:`SIGN` (CPU, eager), :data:`COMPARE` (any device, eager), :data:`NUMBA` (CPU,
one compiled parallel pass), :data:`TRITON` (CUDA: row counts, and a GEMM fused with the counts for query/candidate
models) -- counting per task the scores above and below its true score, exactly at any row width. Which one counts
a side is decided in :mod:`kgeval._engine.kernels.choice`.

The package holds every counting kernel of the engine: these objects here, and as modules ``choice``,
``numba_loop``, ``triton_counts`` and ``triton_gemm`` (the compiled loops, imported on first use only, never by
this module at import time), ``block_counting`` (a CPU GEMM's blocks counted while in cache) and ``count_threads``
(the threads that count them, measured).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

import torch

from kgeval._engine.scoring import Workspace
from kgeval._machine import eager_chunk_elements, last_level_cache

#: the kernels themselves
KERNELS: tuple[str, ...] = ("sign", "compare", "numba", "triton")

#: one numba kernel call at a time: numba's work-queue threading layer (the fork-safe one where TBB is missing)
#: must not be entered by two threads at once
_NUMBA_LOCK = threading.Lock()


def codes_against(values: torch.Tensor, true_values: torch.Tensor, mark_nan: bool = True) -> torch.Tensor:
    """The comparison code of each value against the true value it broadcasts with: 1 above, 0 equal, -1 below
    (+/-inf compare as ordinary values). A NaN on either side gives NaN, or 0 with ``mark_nan=False`` (for
    callers whose NaN rows are flagged elsewhere). Same dtype as ``values``."""
    codes = (values > true_values).to(values.dtype) - (values < true_values).to(values.dtype)
    if not mark_nan:
        return codes
    return torch.where(torch.isnan(values) | torch.isnan(true_values), torch.nan, codes)


def counts_from_code_sums(total: torch.Tensor, absolute: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(#above, #below) as LongTensors from the sums of codes (#above - #below) and of |codes| (#above + #below),
    exact integers in a floating dtype."""
    total, absolute = total.long(), absolute.long()
    return (absolute + total) // 2, (absolute - total) // 2


class Kernel:
    """Counts, per task, the scores of a tile above and below the task's true score, and flags NaN.

    For task i with true score s*_i read from tile row ``rows[i]``: greater[i] = #{e : s_e > s*_i}, less[i] =
    #{e : s_e < s*_i}, nan[i] = a NaN in the row or s*_i is NaN (the true answer lies in neither count).
    """

    name: str
    #: the kernel reads repeated queries' rows of a distinct-query tile in place (batches then count queries)
    reads_rows_in_place: bool = False
    #: the kernel multiplies query and candidate vectors itself (:meth:`fused_counts`, :meth:`pick_scores`)
    fuses_gemm: bool = False
    #: the kernel counts each block of a CPU GEMM while it is in cache (kgeval._engine.kernels.block_counting)
    counts_blocks_in_cache: bool = False

    def count(
        self,
        tile: torch.Tensor,
        true_scores: torch.Tensor,
        rows: torch.Tensor | None = None,
        owned: bool = False,
        nan_free: bool = False,
        workspace: Workspace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(greater, less, nan), each of shape (B,), for a tile (R, W) and true scores (B,).

        ``rows``: the tile row of each task (None: row i, B == R); ``owned``: the kernel may overwrite ``tile``;
        ``nan_free``: the tile is known to hold no NaN; ``workspace``: scratch memory for eager kernels."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<kgeval kernel {self.name!r}>"


class EagerKernel(Kernel):
    """PyTorch operations: comparison codes summed per row ("sign": sign(s - s*), two passes, CPU; "compare":
    (s > s*) - (s < s*), any device, never synchronises).

    With ``reads_rows_in_place`` (the CPU "sign" kernel) it takes the distinct-query tile and the row map, like
    the numba kernel, and codes the task rows :data:`EAGER_CHUNK_ELEMENTS` at a time: each chunk of rows is copied
    (repeated queries' rows gathered) into one scratch buffer small enough to stay in the last-level cache through
    the passes over it. Tiles of distinct queries keep the GEMM at its full height however many tasks share a
    query (FB15k-237, DistMult d = 200, 2 cores, `benchmarks/ab_trees.py`: 1.40 -> 1.10 s for the whole evaluation)."""

    def __init__(self, name: str, reads_rows_in_place: bool = False) -> None:
        self.name = name
        self.reads_rows_in_place = reads_rows_in_place

    def count(
        self,
        tile: torch.Tensor,
        true_scores: torch.Tensor,
        rows: torch.Tensor | None = None,
        owned: bool = False,
        nan_free: bool = False,
        workspace: Workspace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        chunk = EAGER_CHUNK_ELEMENTS if self.reads_rows_in_place else None  # elsewhere: every task row at once
        return _count_in_chunks(self.name, tile, true_scores, rows, owned, nan_free, workspace or Workspace(), chunk)


class RowCountingKernel(Kernel):
    """Kernels that count a task's row of a (distinct-query) tile in place, given the row map: the int32 counts of
    above / below / NaN come from :meth:`counts`."""

    reads_rows_in_place = True

    def counts(
        self, scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def count(
        self,
        tile: torch.Tensor,
        true_scores: torch.Tensor,
        rows: torch.Tensor | None = None,
        owned: bool = False,
        nan_free: bool = False,
        workspace: Workspace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if rows is None:
            rows = _identity(tile.shape[0], tile.device)
        greater, less, nans = self.counts(tile.detach(), rows, true_scores.detach())
        return greater.long(), less.long(), (nans > 0) | torch.isnan(true_scores)


class NumbaKernel(RowCountingKernel):
    """One parallel loop compiled by numba (CPU): reads each score once, repeated queries' rows in place."""

    name = "numba"
    counts_blocks_in_cache = True

    def counts(
        self, scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return numba_counts(scores, rows, true_scores)


class TritonKernel(RowCountingKernel):
    """Triton programs: CUDA, or CPU tensors under Triton's interpreter. For query/candidate models, one program
    multiplies a block of tasks' queries by blocks of candidates and counts, without writing the scores
    (kgeval._engine.kernels.triton_gemm); for the scores of other models, one program per task reads its row of a tile
    once, repeated queries' rows in place (kgeval._engine.kernels.triton_counts)."""

    name = "triton"
    fuses_gemm = True

    def counts(
        self, scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        from kgeval._engine.kernels.triton_counts import triton_counts

        return triton_counts(scores, rows, true_scores)

    def fused_counts(
        self, queries: torch.Tensor, candidates: torch.Tensor, task_rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(greater, less, nan) per task (shapes (B,)) for the scores queries[task_rows] @ candidates.T, never
        written to memory; ``true_scores`` from :meth:`pick_scores`."""
        from kgeval._engine.kernels.triton_gemm import fused_counts

        above, below, nans = fused_counts(queries, candidates, task_rows, true_scores)
        return above.long(), below.long(), (nans > 0) | torch.isnan(true_scores)

    def pick_scores(
        self, queries: torch.Tensor, candidates: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor
    ) -> torch.Tensor:
        """queries[rows[p]] . candidates[columns[p]] per pair (shape (P,)), bit for bit the value the counts compare
        for that candidate."""
        from kgeval._engine.kernels.triton_gemm import pick_scores

        return pick_scores(queries, candidates, rows, columns)


SIGN: Kernel = EagerKernel("sign", reads_rows_in_place=True)
COMPARE: Kernel = EagerKernel("compare")
NUMBA: Kernel = NumbaKernel()
TRITON: TritonKernel = TritonKernel()
#: every kernel by name
KERNEL_OBJECTS: dict[str, Kernel] = {kernel.name: kernel for kernel in (SIGN, COMPARE, NUMBA, TRITON)}


def eager_kernel(device: torch.device) -> Kernel:
    """The eager kernel for a device: :data:`SIGN` on CPU, :data:`COMPARE` elsewhere."""
    return SIGN if device.type == "cpu" else COMPARE


def count_tile(
    tile: torch.Tensor,
    true_scores: torch.Tensor,
    kernel: str,
    rows: torch.Tensor | None = None,
    owned: bool = False,
    nan_free: bool = False,
    workspace: Workspace | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:meth:`Kernel.count` of the kernel named ``kernel`` (one of :data:`KERNELS`)."""
    if kernel not in KERNEL_OBJECTS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return KERNEL_OBJECTS[kernel].count(tile, true_scores, rows, owned, nan_free, workspace)


#: score elements the chunked eager count codes at once (CPU): a quarter of this machine's last-level cache, so that
#: each chunk of task rows stays there through its passes (kgeval._machine; 2**21 with 32 MiB of L3)
EAGER_CHUNK_ELEMENTS = eager_chunk_elements(last_level_cache())


def _count_in_chunks(
    kernel: str,
    tile: torch.Tensor,
    true_scores: torch.Tensor,
    rows: torch.Tensor | None,
    owned: bool,
    nan_free: bool,
    workspace: Workspace,
    chunk_elements: int | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(greater, less, nan) of :meth:`EagerKernel.count`, coding the task rows (``tile[rows]``, or the tile's rows)
    ``chunk_elements`` scores at a time (None: all at once) in ``workspace``; the tile is overwritten only when
    ``owned`` and there is no row map."""
    size, width = true_scores.numel(), tile.shape[1]
    step = max(1, size if chunk_elements is None else chunk_elements // max(1, width))
    exact = kernel == "sign" and _subtraction_is_exact(true_scores)  # one host check per tile, not per chunk
    sums = torch.empty((2, size), dtype=_exact_sum_dtype(tile), device=tile.device)  # exact: |sums| <= width
    nan = torch.empty(size, dtype=torch.bool, device=tile.device)
    for start in range(0, size, step):
        stop = min(size, start + step)
        if rows is None:
            part, part_owned = tile[start:stop], owned
        else:  # a copy of the chunk's task rows, which the passes may overwrite
            part = torch.index_select(tile, 0, rows[start:stop], out=workspace.tile(stop - start, width, tile))
            part_owned = True
        total, absolute, nan[start:stop] = _eager_sums(
            part, true_scores[start:stop], exact, part_owned, nan_free, workspace
        )
        sums[0, start:stop], sums[1, start:stop] = total, absolute
    return (*counts_from_code_sums(sums[0], sums[1]), nan)


def _eager_sums(
    tile: torch.Tensor, true_scores: torch.Tensor, exact: bool, owned: bool, nan_free: bool, workspace: Workspace
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: the sum of the comparison codes, the sum of their absolute values (exact integers, NaN-free) and
    the NaN flag; the codes are written over ``tile`` when ``owned``, else into ``workspace``. ``exact``: the
    "sign" kernel and :func:`_subtraction_is_exact` of the true scores -- then the codes are sign(s - s*).
    ``torch.sign`` maps NaN to 0, so that path finds NaN rows through the row sums of s - s* (NaN when a NaN is
    present -- or +inf and -inf both are, which an exact check then rules out)."""
    column = true_scores.unsqueeze(1)
    dtype = _exact_sum_dtype(tile)
    if exact:
        buffer = None if owned else workspace.tile(len(tile), tile.shape[1], tile)
        codes = tile.sub_(column) if buffer is None else torch.sub(tile, column, out=buffer)
        nan = torch.zeros(tile.shape[0], dtype=torch.bool, device=tile.device)
        if not nan_free and bool(torch.isnan(codes.sum(dim=1)).any()):
            nan = torch.isnan(codes).any(dim=1)
        codes.sign_()
        return codes.sum(dim=1, dtype=dtype), codes.abs_().sum(dim=1, dtype=dtype), nan
    nan = torch.isnan(tile).any(dim=1) | torch.isnan(true_scores)
    below = tile < column
    codes = tile if owned else workspace.tile(len(tile), tile.shape[1], tile)
    torch.gt(tile, column, out=codes)
    codes.sub_(below.to(codes.dtype))
    return codes.sum(dim=1, dtype=dtype), codes.abs_().sum(dim=1, dtype=dtype), nan


#: float32 holds every integer up to 2**24 exactly: wider rows sum their codes in float64 (exact up to 2**53)
FLOAT32_EXACT_INTEGERS = 2**24

#: |true score| from which s - s* cannot underflow for any s != s*, even when the CPU flushes subnormal results to
#: zero: a difference below the smallest normal number (2**-126 in float32, whose arithmetic float16 and bfloat16
#: tiles also go through; 2**-1022 in float64) needs both operands below about 2**-101 (2**-969 in float64)
_SUBTRACTION_SAFE_FROM = {torch.float64: 2.0**-960}
_SUBTRACTION_SAFE_FROM_DEFAULT = 2.0**-100


def _exact_sum_dtype(tile: torch.Tensor) -> torch.dtype:
    """The dtype whose sums of a tile row's comparison codes (integers of magnitude <= the width) are exact."""
    if tile.dtype == torch.float64 or tile.shape[1] > FLOAT32_EXACT_INTEGERS:
        return torch.float64
    return torch.float32


def _subtraction_is_exact(true_scores: torch.Tensor) -> bool:
    """Whether sign(s - s*) equals the comparison of s with s* for every score s of a tile, whatever the CPU's
    flush-to-zero mode: every true score is finite (inf - inf is NaN) and 0 or of magnitude at least
    :data:`_SUBTRACTION_SAFE_FROM` (then s - s* never underflows to 0 for s != s*). A host check (CPU only)."""
    safe_from = _SUBTRACTION_SAFE_FROM.get(true_scores.dtype, _SUBTRACTION_SAFE_FROM_DEFAULT)
    magnitude = true_scores.abs()
    return bool(((magnitude == 0) | ((magnitude >= safe_from) & ~torch.isinf(magnitude))).all())


def comparison_counts(
    scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What the "numba" kernel computes, in PyTorch operations (the reference its probe checks it against):
    int32 counts of scores[rows] above / below the true scores, and of NaN scores, per task (shapes (B,))."""
    selected = scores[rows]
    column = true_scores.unsqueeze(1)
    return (
        (selected > column).sum(dim=1, dtype=torch.int32),
        (selected < column).sum(dim=1, dtype=torch.int32),
        (selected != selected).sum(dim=1, dtype=torch.int32),
    )


def numba_counts(
    scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`comparison_counts` by the numba loop (kgeval._engine.kernels.numba_loop): one parallel pass over the rows
    ``rows`` of a CPU tile, read in place (a slice of a wider score matrix too), without temporaries.

    Float16 / bfloat16 tiles are widened to float32 first (exactly, so no comparison changes)."""
    from kgeval._engine.kernels.numba_loop import count_rows

    if scores.dtype not in (torch.float32, torch.float64):
        scores = scores.float()
    if scores.shape[1] > 1 and scores.stride(1) != 1:
        scores = scores.contiguous()
    scores = scores.detach()
    num_rows, width = scores.shape
    counts = torch.zeros((3, rows.numel()), dtype=torch.int32, device="cpu")
    if rows.numel() and width:
        follow_torch_threads()
        row_stride = scores.stride(0)
        flat = scores.as_strided(((num_rows - 1) * row_stride + width,), (1,))  # every row of the tile, in place
        starts = (rows * row_stride).numpy()
        true = true_scores.detach().to(scores.dtype).contiguous().numpy()
        with _NUMBA_LOCK:
            count_rows(flat.numpy(), starts, width, true, counts[0].numpy(), counts[1].numpy(), counts[2].numpy())
    return counts[0], counts[1], counts[2]


def numba_lock() -> threading.Lock:
    """The lock every numba kernel call holds (:data:`_NUMBA_LOCK`)."""
    return _NUMBA_LOCK


def follow_torch_threads() -> int:
    """Run numba's parallel loops on as many threads as PyTorch's operations (torch.set_num_threads); returns how
    many."""
    import numba

    wanted = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)
    return wanted


@contextlib.contextmanager
def numba_threads(threads: int) -> Iterator[None]:
    """numba's parallel loops on ``threads`` threads of this thread's for the block (1: the calling thread alone,
    no worker woken), as many as before afterwards."""
    import numba

    before = numba.get_num_threads()
    if before == threads:
        yield
        return
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(before)


@functools.lru_cache(maxsize=32)
def _identity(size: int, device: torch.device) -> torch.Tensor:
    """arange(size) on a device, kept for the next tile of the same height."""
    return torch.arange(size, device=device)
