"""The fused "triton" kernel of the query/candidate fast path: a Triton program multiplies a block of tasks' query
vectors by blocks of candidate vectors and counts, per task, the candidates scoring above and below the task's true
score, and the NaN scores, without writing a score to memory. Its "pick" form scores chosen (query, candidate) pairs
-- the true answers, the filtered pairs -- by the same tile arithmetic, so every score a count compares is the value
the counting program computes for that column. Imported only when that kernel is used (triton: the ``gpu`` extra);
on CPU tensors it runs under Triton's interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from kgeval._engine.kernels.triton_counts import on_device

#: tasks (and picked pairs) per program; the pick form reads the diagonal of a square tile, so it equals BLOCK_COLUMNS
BLOCK_ROWS = 64
#: candidates per tile
BLOCK_COLUMNS = 64
#: vector dimensions per step of the dot product
BLOCK_DIMS = 32
#: programs per launch from which the candidate axis is split no further (each program then walks several tiles
#: and adds its counts once)
TARGET_PROGRAMS = 2048

#: the dtypes the kernel multiplies (float64 has no Triton dot on every device: it takes the tile path)
FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

_TRITON_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


@triton.jit
def _tile_scores(
    queries,
    query_stride,
    candidates,
    candidate_stride,
    rows,
    row_inside,
    columns,
    column_inside,
    dims,
    SCORE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """Scores (BLOCK_M, BLOCK_N) of query rows ``rows`` against candidate rows ``columns``: float32 products
    accumulated over the dimensions in steps of BLOCK_K (IEEE float32 for float32 inputs), rounded to SCORE. The
    value of an element depends on its two vectors only, not on the rows and columns beside it.

    Compiled, the step is ``tl.dot`` (whose position independence the kernel probe checks on each device).
    Interpreted (INTERPRETED), ``tl.dot`` would be numpy's matmul, i.e. the host's BLAS, whose float32 kernels on
    some CPUs (OpenBLAS on AVX2) round an element differently by its position in the tile; the step is then a
    broadcast product summed over the dimensions, each element in the same order wherever it falls."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, dims, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        k_inside = ks < dims
        a = tl.load(queries + rows[:, None] * query_stride + ks[None, :],
                    mask=row_inside[:, None] & k_inside[None, :], other=0.0)  # fmt: skip
        b = tl.load(candidates + columns[None, :] * candidate_stride + ks[:, None],
                    mask=column_inside[None, :] & k_inside[:, None], other=0.0)  # fmt: skip
        if INTERPRETED:
            acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    return acc.to(SCORE)


@triton.jit
def _count_kernel(
    queries,
    query_stride,
    candidates,
    candidate_stride,
    task_rows,
    true_scores,
    greater,
    less,
    nans,
    num_tasks,
    num_candidates,
    columns_per_program,
    dims,
    SCORE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    tasks = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # 64-bit: no wrap past 2**31
    task_inside = tasks < num_tasks
    rows = tl.load(task_rows + tasks, mask=task_inside, other=0).to(tl.int64)
    true = tl.load(true_scores + tasks, mask=task_inside, other=0.0)
    above = tl.zeros((BLOCK_M,), dtype=tl.int32)
    below = tl.zeros((BLOCK_M,), dtype=tl.int32)
    nan = tl.zeros((BLOCK_M,), dtype=tl.int32)
    first = tl.program_id(1) * columns_per_program
    for start in range(first, first + columns_per_program, BLOCK_N):
        columns = start + tl.arange(0, BLOCK_N)
        column_inside = columns < num_candidates
        scores = _tile_scores(queries, query_stride, candidates, candidate_stride, rows, task_inside,
                              columns.to(tl.int64), column_inside, dims, SCORE, BLOCK_M, BLOCK_N, BLOCK_K,
                              INTERPRETED)  # fmt: skip
        inside = task_inside[:, None] & column_inside[None, :]
        above += tl.sum(((scores > true[:, None]) & inside).to(tl.int32), axis=1)
        below += tl.sum(((scores < true[:, None]) & inside).to(tl.int32), axis=1)
        nan += tl.sum(((scores != scores) & inside).to(tl.int32), axis=1)
    tl.atomic_add(greater + tasks, above, mask=task_inside)
    tl.atomic_add(less + tasks, below, mask=task_inside)
    tl.atomic_add(nans + tasks, nan, mask=task_inside)


@triton.jit
def _pick_kernel(
    queries,
    query_stride,
    candidates,
    candidate_stride,
    pair_rows,
    pair_columns,
    picked,
    num_pairs,
    dims,
    SCORE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    pairs = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # 64-bit: pairs can pass 2**31
    inside = pairs < num_pairs
    rows = tl.load(pair_rows + pairs, mask=inside, other=0).to(tl.int64)
    columns = tl.load(pair_columns + pairs, mask=inside, other=0).to(tl.int64)
    scores = _tile_scores(queries, query_stride, candidates, candidate_stride, rows, inside, columns, inside, dims,
                          SCORE, BLOCK_M, BLOCK_N, BLOCK_K, INTERPRETED)  # fmt: skip
    diagonal = tl.arange(0, BLOCK_M)[:, None] == tl.arange(0, BLOCK_N)[None, :]
    values = tl.sum(tl.where(diagonal, scores, tl.zeros_like(scores)), axis=1)  # x + 0 + ... + 0 == x exactly
    tl.store(picked + pairs, values.to(SCORE), mask=inside)


def _operands(queries: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """The vectors as the kernel reads them (rows contiguous) and the dtype of the scores.

    Under the interpreter (numpy has no bfloat16) bfloat16 vectors are widened to float32: exact, and every
    product of two bfloat16 values is exact in float32, as in the compiled kernel's float32 accumulation; the
    scores are still compared in float32 there rather than rounded to bfloat16."""
    if queries.dtype not in FUSED_DTYPES or candidates.dtype != queries.dtype:
        raise TypeError(f"the fused kernel multiplies {FUSED_DTYPES} vectors of one dtype, got "
                        f"{queries.dtype} and {candidates.dtype}")  # fmt: skip
    if queries.dtype == torch.bfloat16 and _interpreted(queries):
        queries, candidates = queries.float(), candidates.float()
    if queries.shape[1] != candidates.shape[1]:
        raise ValueError(f"queries have {queries.shape[1]} dimensions, candidates {candidates.shape[1]}")
    return _rows_contiguous(queries), _rows_contiguous(candidates), queries.dtype


def fused_counts(
    queries: torch.Tensor, candidates: torch.Tensor, task_rows: torch.Tensor, true_scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """int32 counts, per task, of the candidates scoring above / below its true score, and of NaN scores.

    Parameters
    ----------
    queries : FloatTensor of shape (U, d)
    candidates : FloatTensor of shape (N, d)
        A score is queries[u] . candidates[n], computed as :func:`pick_scores` computes it.
    task_rows : LongTensor of shape (B,)
        The query row of each task.
    true_scores : FloatTensor of shape (B,)
        In the dtype of :func:`pick_scores`' output.

    Returns
    -------
    greater, less, nans : IntTensor of shape (B,)
    """
    queries, candidates, dtype = _operands(queries, candidates)
    size, num_candidates = task_rows.numel(), candidates.shape[0]
    counts = torch.zeros((3, size), dtype=torch.int32, device=queries.device)
    if size and num_candidates:
        row_programs = triton.cdiv(size, BLOCK_ROWS)
        column_tiles = triton.cdiv(num_candidates, BLOCK_COLUMNS)
        column_programs = min(column_tiles, max(1, TARGET_PROGRAMS // row_programs))
        columns_per_program = triton.cdiv(column_tiles, column_programs) * BLOCK_COLUMNS
        column_programs = triton.cdiv(num_candidates, columns_per_program)
        with on_device(queries):
            _count_kernel[(row_programs, column_programs)](
                queries, queries.stride(0), candidates, candidates.stride(0), task_rows.contiguous(),
                true_scores.to(dtype).contiguous(), counts[0], counts[1], counts[2], size, num_candidates,
                columns_per_program, queries.shape[1], SCORE=_TRITON_DTYPES[dtype], BLOCK_M=BLOCK_ROWS,
                BLOCK_N=BLOCK_COLUMNS, BLOCK_K=BLOCK_DIMS, INTERPRETED=_interpreted(queries),
            )  # fmt: skip
    return counts[0], counts[1], counts[2]


def pick_scores(
    queries: torch.Tensor, candidates: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor
) -> torch.Tensor:
    """The scores queries[rows[p]] . candidates[columns[p]] (shape (P,)) exactly as :func:`fused_counts` computes
    them in its tiles: the same program code and block shapes, read off the diagonal of a tile of the pairs.

    The dtype is the vectors' (float32 for bfloat16 under the interpreter)."""
    queries, candidates, dtype = _operands(queries, candidates)
    size = rows.numel()
    picked = torch.empty(size, dtype=dtype, device=queries.device)
    if size:
        with on_device(queries):
            _pick_kernel[(triton.cdiv(size, BLOCK_ROWS),)](
                queries, queries.stride(0), candidates, candidates.stride(0), rows.contiguous(), columns.contiguous(),
                picked, size, queries.shape[1], SCORE=_TRITON_DTYPES[dtype], BLOCK_M=BLOCK_ROWS,
                BLOCK_N=BLOCK_COLUMNS, BLOCK_K=BLOCK_DIMS, INTERPRETED=_interpreted(queries),
            )  # fmt: skip
    return picked


def _rows_contiguous(vectors: torch.Tensor) -> torch.Tensor:
    """The matrix with a unit column stride (any row stride), copied only when needed."""
    return vectors if vectors.shape[1] <= 1 or vectors.stride(1) == 1 else vectors.contiguous()


def _interpreted(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
