"""Tile kernels: per ranking task, how many scores of a score tile lie above and below its true score.

A tile holds the scores of some query rows against one candidate slice. For task ``i`` with true score s*_i,
read from tile row ``rows[i]``, a kernel returns::

    greater[i] = #{e in the slice : s_e >  s*_i}
    less[i]    = #{e in the slice : s_e <  s*_i}
    nan[i]     = a NaN among the row's scores, or s*_i is NaN

Counting (kgeval.counting) adds these over the slices and turns them into ranks; the true answer itself lies in
neither count. Three kernels compute them:

- ``"sign"`` (CPU, eager): comparison codes sign(s - s*) in two elementwise passes, whose row sums give
  #greater - #less and (of their absolute values) #greater + #less. An infinite true score makes inf - inf = NaN,
  so such a tile falls back to ``"compare"`` -- a host check, hence CPU only.
- ``"compare"`` (any device, eager): codes (s > s*) - (s < s*), and an explicit NaN check; never synchronises.
- ``"compiled"``: the comparisons and counts fused by ``torch.compile`` into one pass that reads each score once
  (and reads repeated queries' rows in place instead of copying them): about 3x less counting time than
  ``"sign"`` on a CPU, for a one-off compilation of a few seconds per process.

:func:`resolve_kernel` picks one. ``"auto"`` on a CPU starts eager and switches to ``"compiled"`` once the
scores the process has counted eagerly, with those it is about to count, reach :data:`AUTO_COMPILE_AFTER_SCORES`
-- the ski-rental rule: by then the time the eager kernel would lose roughly equals the compilation cost, so
switching never costs more than about twice the best choice made in hindsight, a one-off evaluation of common
size never waits for a compiler, and one with more than that many scores compiles at once. Other devices stay eager
under ``"auto"`` (the compiled kernel is only tested on CPU).
"""

from __future__ import annotations

import functools
import warnings
from typing import Literal

import torch

from kgeval.scoring import Workspace

#: kernels a caller may request: "auto", "eager" (sign on CPU, compare elsewhere) or "compiled"
KernelChoice = Literal["auto", "eager", "compiled"]
KERNEL_CHOICES: tuple[str, ...] = ("auto", "eager", "compiled")
#: the kernels themselves
KERNELS: tuple[str, ...] = ("sign", "compare", "compiled")

#: eager scores (counted and about to be counted) at which "auto" compiles: at ~0.35 ns saved per score on a 2-core
#: CPU, 10**10 scores (~3.5 s) match the compilation cost (2 s with a warm inductor cache, ~7 s cold)
AUTO_COMPILE_AFTER_SCORES = 10**10

#: scores counted by an eager kernel under "auto" in this process (see :func:`resolve_kernel`)
eager_scores_counted = 0


def check_kernel_choice(kernel: str) -> str:
    """``kernel`` if it is one of :data:`KERNEL_CHOICES`, else a ValueError naming them."""
    if kernel not in KERNEL_CHOICES:
        raise ValueError(f"kernel must be one of {KERNEL_CHOICES}, got {kernel!r}")
    return kernel


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


def eager_kernel(device: torch.device) -> str:
    """The eager kernel for a device: "sign" on CPU, "compare" elsewhere."""
    return "sign" if device.type == "cpu" else "compare"


def resolve_kernel(requested: str, device: torch.device, num_scores: int, eager: str | None = None) -> str:
    """The kernel to count ``num_scores`` scores with on ``device``.

    Parameters
    ----------
    requested : {"auto", "eager", "compiled"}
    device : torch.device
    num_scores : int
        Scores about to be counted (tasks x candidates); under "auto" they count towards the switch, and add to
        the eager tally when they are counted eagerly.
    eager : str, optional
        The eager kernel to use (default :func:`eager_kernel` of the device).

    Returns
    -------
    str
        One of :data:`KERNELS`. A requested "compiled" kernel that cannot be compiled here falls back to the eager
        one with a warning (from :func:`compiled_kernel_available`).
    """
    global eager_scores_counted
    check_kernel_choice(requested)
    eager = eager or eager_kernel(device)
    if requested == "compiled":
        return "compiled" if compiled_kernel_available() else eager
    if requested == "auto" and device.type == "cpu":
        if eager_scores_counted + num_scores >= AUTO_COMPILE_AFTER_SCORES and compiled_kernel_available():
            return "compiled"
        eager_scores_counted += num_scores
    return eager


def count_tile(
    tile: torch.Tensor,
    true_scores: torch.Tensor,
    kernel: str,
    rows: torch.Tensor | None = None,
    owned: bool = False,
    nan_free: bool = False,
    workspace: Workspace | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Counts of the scores of a tile above and below each task's true score.

    Parameters
    ----------
    tile : FloatTensor of shape (R, W)
        Scores of R query rows against W candidates.
    true_scores : FloatTensor of shape (B,)
    kernel : {"sign", "compare", "compiled"}
    rows : LongTensor of shape (B,), optional
        The tile row of each task; None when task i uses row i (then B == R).
    owned : bool, default=False
        The caller allows the eager kernels to overwrite ``tile``.
    nan_free : bool, default=False
        The tile is known to hold no NaN (the "sign" kernel then skips its NaN check).
    workspace : kgeval.scoring.Workspace, optional
        Scratch memory for the eager kernels.

    Returns
    -------
    greater, less : LongTensor of shape (B,)
    nan : BoolTensor of shape (B,)
    """
    if kernel == "compiled":
        if rows is None:
            rows = _identity(tile.shape[0], tile.device)
        greater, less, nans = _compiled()(tile, rows, true_scores)
        return greater.long(), less.long(), (nans > 0) | torch.isnan(true_scores)
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if rows is not None:  # the eager kernels count a copy of the task rows
        if workspace is None:
            tile = tile.index_select(0, rows)
        else:
            tile = torch.index_select(tile, 0, rows, out=workspace.tile(rows.numel(), tile.shape[1], tile))
        owned = True
    total, absolute, nan = _eager_sums(tile, true_scores, kernel, owned, nan_free, workspace)
    return (*counts_from_code_sums(total, absolute), nan)


def _eager_sums(
    tile: torch.Tensor, true_scores: torch.Tensor, kernel: str, owned: bool, nan_free: bool, workspace: Workspace | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: the sum of the comparison codes, the sum of their absolute values (exact integers, NaN-free) and
    the NaN flag. ``torch.sign`` maps NaN to 0, so the "sign" kernel finds NaN rows through the row sums of
    s - s* (NaN when a NaN is present -- or +inf and -inf both are, which an exact check then rules out)."""
    column = true_scores.unsqueeze(1)
    dtype = torch.float64 if tile.dtype == torch.float64 else torch.float32  # sums <= W < 2**24: exact
    if kernel == "sign" and not bool(torch.isinf(true_scores).any()):
        if owned:
            codes = tile.sub_(column)
        elif workspace is not None:
            codes = torch.sub(tile, column, out=workspace.tile(*tile.shape, tile))
        else:
            codes = tile - column
        nan = torch.zeros(tile.shape[0], dtype=torch.bool, device=tile.device)
        if not nan_free and bool(torch.isnan(codes.sum(dim=1)).any()):
            nan = torch.isnan(codes).any(dim=1)
        codes.sign_()
        return codes.sum(dim=1, dtype=dtype), codes.abs_().sum(dim=1, dtype=dtype), nan
    nan = torch.isnan(tile).any(dim=1) | torch.isnan(true_scores)
    below = tile < column
    codes = tile if owned else workspace.tile(*tile.shape, tile) if workspace is not None else torch.empty_like(tile)
    torch.gt(tile, column, out=codes)
    codes.sub_(below.to(codes.dtype))
    return codes.sum(dim=1, dtype=dtype), codes.abs_().sum(dim=1, dtype=dtype), nan


def comparison_counts(
    scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The "compiled" kernel's computation, before compilation: int32 counts of scores[rows] above / below the
    true scores, and of NaN scores, per task (shapes (B,)). Sums of int32 are exact below 2**31 candidates."""
    selected = scores[rows]
    column = true_scores.unsqueeze(1)
    return (
        (selected > column).sum(dim=1, dtype=torch.int32),
        (selected < column).sum(dim=1, dtype=torch.int32),
        (selected != selected).sum(dim=1, dtype=torch.int32),
    )


@functools.cache
def _compiled():
    """The compiled kernel (compiled lazily, once per process, for dynamic shapes).

    Compilation runs in this process (``compile_threads=1``): inductor's default pool of compiler processes
    each import torch, which on a small machine kept both cores busy for seconds after the compilation had
    finished, and a pool is not allowed in daemonic worker processes anyway."""
    from torch._inductor import config

    compiled = torch.compile(comparison_counts, dynamic=True)

    def run(scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor):
        with config.patch(compile_threads=1):
            return compiled(scores, rows, true_scores)

    return run


@functools.lru_cache(maxsize=32)
def _identity(size: int, device: torch.device) -> torch.Tensor:
    """arange(size) on a device, kept for the next tile of the same height."""
    return torch.arange(size, device=device)


@functools.cache
def compiled_kernel_available() -> bool:
    """Whether ``torch.compile`` works here: one probe compiles the kernel on CPU and checks it against the
    uncompiled computation, including inf and NaN. If it fails (no C++ compiler, an unsupported platform), a
    warning says so and kgeval counts with its eager kernels."""
    inf, nan = float("inf"), float("nan")
    # three rows, seven candidates, five tasks: distinct sizes, so the compiled code assumes no equal sizes
    scores = torch.tensor([
        [1.0, 2.0, nan, 0.0, 2.0, 3.0, -1.0],
        [inf, 2.0, 2.0, -inf, 0.5, 2.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    ])  # fmt: skip
    rows = torch.tensor([0, 1, 2, 1, 1])
    true_scores = torch.tensor([2.0, 2.0, 0.0, inf, -inf])
    try:
        got = _compiled()(scores, rows, true_scores)
        expected = comparison_counts(scores, rows, true_scores)
        if all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)):
            return True
        problem: object = "its results differ from the eager computation"
    except Exception as error:  # any failure of the compiler stack means: do not use it
        problem = error
    warnings.warn(f"kgeval: torch.compile is not usable here ({problem}); counting with the eager kernel",
                  RuntimeWarning, stacklevel=2)  # fmt: skip
    return False
