"""The "triton" tile kernel: one Triton program per task reads its row of a score tile once and counts the scores
above and below the task's true score, and the NaNs. Imported only when that kernel is used (triton is the
optional ``gpu`` extra); on CPU tensors it runs under Triton's interpreter (``TRITON_INTERPRET=1``)."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
import triton
import triton.language as tl

#: scores read per step of a program's loop over its row
BLOCK = 1024


@triton.jit
def _count_rows(scores, row_stride, rows, true_scores, greater, less, nans, width, BLOCK: tl.constexpr):
    task = tl.program_id(0)
    row = tl.load(rows + task).to(tl.int64)
    true = tl.load(true_scores + task)
    above = tl.zeros((BLOCK,), dtype=tl.int32)
    below = tl.zeros((BLOCK,), dtype=tl.int32)
    nan = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, width, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        inside = offsets < width
        values = tl.load(scores + row * row_stride + offsets, mask=inside, other=0.0)
        above += ((values > true) & inside).to(tl.int32)
        below += ((values < true) & inside).to(tl.int32)
        nan += ((values != values) & inside).to(tl.int32)
    tl.store(greater + task, tl.sum(above, axis=0))
    tl.store(less + task, tl.sum(below, axis=0))
    tl.store(nans + task, tl.sum(nan, axis=0))


def on_device(tensor: torch.Tensor) -> Any:
    """The context to launch a Triton kernel on ``tensor``'s device: Triton launches on the *current* CUDA device,
    which for a model on ``cuda:1`` is not its tensors' (nothing to set for CPU tensors under the interpreter)."""
    return torch.cuda.device(tensor.device) if tensor.device.type == "cuda" else contextlib.nullcontext()


def triton_counts(
    scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """int32 counts of ``scores[rows]`` above / below the true scores, and of NaN scores, per task (shapes (B,)).

    ``scores`` (R, W) is read in place (any row stride; a column stride other than 1 is made contiguous first);
    the true scores are compared in the tile's dtype."""
    if scores.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        scores = scores.float()  # the interpreter (numpy) has no bfloat16; widening is exact and keeps every comparison
    if scores.shape[1] > 1 and scores.stride(1) != 1:
        scores = scores.contiguous()
    size, width = rows.numel(), scores.shape[1]
    counts = torch.zeros((3, size), dtype=torch.int32, device=scores.device)
    if size and width:
        true = true_scores.to(scores.dtype).contiguous()
        block = min(BLOCK, triton.next_power_of_2(width))
        with on_device(scores):
            _count_rows[(size,)](
                scores, scores.stride(0), rows.contiguous(), true, counts[0], counts[1], counts[2], width, BLOCK=block
            )
    return counts[0], counts[1], counts[2]
