"""Tile kernels as objects -- :data:`SIGN` (CPU, eager), :data:`COMPARE` (any device, eager), :data:`NUMBA` (CPU,
one compiled parallel pass), :data:`TRITON` (CUDA: row counts, and a GEMM fused with the counts for query/candidate
models) -- counting per task the scores above and below its true score, exactly at any row width; and the
:class:`KernelChooser` an evaluator owns, which picks one per side ("auto": the ski-rental rule on CPU, triton on
CUDA once it passed its probe there).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
import warnings
from collections.abc import Callable
from typing import Literal

import torch

from kgeval._engine.scoring import Workspace

#: kernels a caller may request: "auto", "eager" (sign on CPU, compare elsewhere) or "numba" (CPU)
KernelChoice = Literal["auto", "eager", "numba", "triton"]
KERNEL_CHOICES: tuple[str, ...] = ("auto", "eager", "numba", "triton")
#: the kernels themselves
KERNELS: tuple[str, ...] = ("sign", "compare", "numba", "triton")

#: eager scores (counted and about to be counted) at which "auto" switches to numba: at ~0.5 ns saved per score on a
#: 2-core CPU, 10**9 scores (~0.5 s) match the cost of loading numba and the cached kernel (~0.5 s per process;
#: ~2 s the first time, when numba compiles it)
AUTO_NUMBA_AFTER_SCORES = 10**9

#: one numba kernel call at a time: numba's work-queue threading layer (the fork-safe one where TBB is missing)
#: must not be entered by two threads at once
_NUMBA_LOCK = threading.Lock()


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
    (s > s*) - (s < s*), any device, never synchronises)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def count(
        self,
        tile: torch.Tensor,
        true_scores: torch.Tensor,
        rows: torch.Tensor | None = None,
        owned: bool = False,
        nan_free: bool = False,
        workspace: Workspace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if rows is not None:  # the eager kernels count a copy of the task rows
            if workspace is None:
                tile = tile.index_select(0, rows)
            else:
                tile = torch.index_select(tile, 0, rows, out=workspace.tile(rows.numel(), tile.shape[1], tile))
            owned = True
        total, absolute, nan = _eager_sums(tile, true_scores, self.name, owned, nan_free, workspace)
        return (*counts_from_code_sums(total, absolute), nan)


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

    def counts(
        self, scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return numba_counts(scores, rows, true_scores)


class TritonKernel(RowCountingKernel):
    """Triton programs: CUDA, or CPU tensors under Triton's interpreter. For query/candidate models, one program
    multiplies a block of tasks' queries by blocks of candidates and counts, without writing the scores
    (kgeval._engine.triton_gemm); for the scores of other models, one program per task reads its row of a tile
    once, repeated queries' rows in place (kgeval._engine.triton_counts)."""

    name = "triton"
    fuses_gemm = True

    def counts(
        self, scores: torch.Tensor, rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        from kgeval._engine.triton_counts import triton_counts

        return triton_counts(scores, rows, true_scores)

    def fused_counts(
        self, queries: torch.Tensor, candidates: torch.Tensor, task_rows: torch.Tensor, true_scores: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(greater, less, nan) per task (shapes (B,)) for the scores queries[task_rows] @ candidates.T, never
        written to memory; ``true_scores`` from :meth:`pick_scores`."""
        from kgeval._engine.triton_gemm import fused_counts

        above, below, nans = fused_counts(queries, candidates, task_rows, true_scores)
        return above.long(), below.long(), (nans > 0) | torch.isnan(true_scores)

    def pick_scores(
        self, queries: torch.Tensor, candidates: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor
    ) -> torch.Tensor:
        """queries[rows[p]] . candidates[columns[p]] per pair (shape (P,)), bit for bit the value the counts compare
        for that candidate."""
        from kgeval._engine.triton_gemm import pick_scores

        return pick_scores(queries, candidates, rows, columns)


SIGN: Kernel = EagerKernel("sign")
COMPARE: Kernel = EagerKernel("compare")
NUMBA: Kernel = NumbaKernel()
TRITON: Kernel = TritonKernel()
#: every kernel by name
KERNEL_OBJECTS: dict[str, Kernel] = {kernel.name: kernel for kernel in (SIGN, COMPARE, NUMBA, TRITON)}


def eager_kernel(device: torch.device) -> Kernel:
    """The eager kernel for a device: :data:`SIGN` on CPU, :data:`COMPARE` elsewhere."""
    return SIGN if device.type == "cpu" else COMPARE


def triton_kernel_available(device: torch.device) -> bool:
    """Whether the "triton" kernel can count tiles on ``device``: triton is installed, and the device is CUDA or
    the CPU under Triton's interpreter (``TRITON_INTERPRET=1``)."""
    if importlib.util.find_spec("triton") is None:
        return False
    return device.type == "cuda" or (device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")


def numba_is_loaded() -> bool:
    """Whether this process has already loaded the numba kernel and seen it pass its probe (nothing left to pay)."""
    return numba_kernel_available.cache_info().currsize > 0 and numba_kernel_available()


class KernelChooser:
    """Picks the kernel of each side of an evaluation; one per evaluator, holding the ski-rental tally.

    ``"auto"`` on a CPU counts eagerly and switches to numba once the scores this chooser has counted eagerly,
    with those it is about to count, reach ``switch_after`` (by then the eager kernel has lost about what loading
    numba costs, so the choice never costs more than about twice the best one made in hindsight), or at once when
    numba is already loaded in the process. On CUDA it counts with :data:`TRITON` when triton is installed and the
    kernel passed its probe on that device (:func:`triton_kernel_works`), else with :data:`COMPARE`; other devices
    count with :data:`COMPARE`.

    Parameters
    ----------
    requested : {"auto", "eager", "numba", "triton"} or Kernel, default="auto"
        A Kernel object is used as it is (the engine's tests force each kernel that way).
    switch_after : int, default=AUTO_NUMBA_AFTER_SCORES
    numba_available, numba_loaded, triton_works : callable, optional
        Probes of the environment (default :func:`numba_kernel_available`, :func:`numba_is_loaded`,
        :func:`triton_kernel_works`).
    """

    def __init__(
        self,
        requested: str | Kernel = "auto",
        switch_after: int = AUTO_NUMBA_AFTER_SCORES,
        numba_available: Callable[[], bool] | None = None,
        numba_loaded: Callable[[], bool] | None = None,
        triton_works: Callable[[torch.device], bool] | None = None,
    ) -> None:
        self.requested = requested if isinstance(requested, Kernel) else check_kernel_choice(requested)
        self.switch_after = switch_after
        self.eager_scores_counted = 0
        self._numba_available = numba_available or numba_kernel_available
        self._numba_loaded = numba_loaded or numba_is_loaded
        self._triton_works = triton_works or triton_kernel_works

    def choose(self, device: torch.device, num_scores: int) -> Kernel:
        """The kernel to count ``num_scores`` scores (tasks x candidates) with on ``device``. A requested numba
        kernel falls back to the eager one with a warning where it cannot run (another device, numba unusable)."""
        if isinstance(self.requested, Kernel):
            return self.requested
        eager = eager_kernel(device)
        if self.requested == "triton":
            if triton_kernel_available(device):
                return TRITON
            warnings.warn(f"kgeval: the triton counting kernel needs triton and a CUDA device (or TRITON_INTERPRET=1 "
                          f"for CPU tensors); counting on {device} with the eager kernel", RuntimeWarning,
                          stacklevel=2)  # fmt: skip
            return eager
        if self.requested == "numba":
            if device.type != "cpu":
                warnings.warn(f"kgeval: the numba counting kernel runs on the CPU only; counting on {device} with "
                              "the eager kernel", RuntimeWarning, stacklevel=2)  # fmt: skip
                return eager
            return NUMBA if self._numba_available() else eager
        if self.requested == "auto" and device.type == "cuda":
            return TRITON if triton_kernel_available(device) and self._triton_works(device) else eager
        if self.requested == "auto" and device.type == "cpu":
            due = self.eager_scores_counted + num_scores >= self.switch_after
            if self._numba_loaded() or (due and self._numba_available()):
                return NUMBA
            self.eager_scores_counted += num_scores
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
    """:meth:`Kernel.count` of the kernel named ``kernel`` (one of :data:`KERNELS`)."""
    if kernel not in KERNEL_OBJECTS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return KERNEL_OBJECTS[kernel].count(tile, true_scores, rows, owned, nan_free, workspace)


def _eager_sums(
    tile: torch.Tensor, true_scores: torch.Tensor, kernel: str, owned: bool, nan_free: bool, workspace: Workspace | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: the sum of the comparison codes, the sum of their absolute values (exact integers, NaN-free) and
    the NaN flag. ``torch.sign`` maps NaN to 0, so the "sign" kernel finds NaN rows through the row sums of
    s - s* (NaN when a NaN is present -- or +inf and -inf both are, which an exact check then rules out)."""
    column = true_scores.unsqueeze(1)
    dtype = _exact_sum_dtype(tile)
    if kernel == "sign" and _subtraction_is_exact(true_scores):
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
    """:func:`comparison_counts` by the numba loop (kgeval._engine.numba_loop): one parallel pass over the rows
    ``rows`` of a CPU tile, read in place (a slice of a wider score matrix too), without temporaries.

    Float16 / bfloat16 tiles are widened to float32 first (exactly, so no comparison changes)."""
    from kgeval._engine.numba_loop import count_rows

    if scores.dtype not in (torch.float32, torch.float64):
        scores = scores.float()
    if scores.shape[1] > 1 and scores.stride(1) != 1:
        scores = scores.contiguous()
    scores = scores.detach()
    num_rows, width = scores.shape
    counts = torch.zeros((3, rows.numel()), dtype=torch.int32)
    if rows.numel() and width:
        _follow_torch_threads()
        row_stride = scores.stride(0)
        flat = scores.as_strided(((num_rows - 1) * row_stride + width,), (1,))  # every row of the tile, in place
        starts = (rows * row_stride).numpy()
        true = true_scores.detach().to(scores.dtype).contiguous().numpy()
        with _NUMBA_LOCK:
            count_rows(flat.numpy(), starts, width, true, counts[0].numpy(), counts[1].numpy(), counts[2].numpy())
    return counts[0], counts[1], counts[2]


def _follow_torch_threads() -> None:
    """Run numba's parallel loops on as many threads as PyTorch's operations (torch.set_num_threads)."""
    import numba

    wanted = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)


@functools.lru_cache(maxsize=32)
def _identity(size: int, device: torch.device) -> torch.Tensor:
    """arange(size) on a device, kept for the next tile of the same height."""
    return torch.arange(size, device=device)


@functools.cache
def numba_kernel_available() -> bool:
    """Whether the "numba" kernel works here: one probe runs it (loading its machine code from numba's cache, or
    compiling it on a first use) and checks it against :func:`comparison_counts`, including inf, NaN and a tile
    that is a view into a wider matrix. If it fails (numba missing or broken), a warning says so and kgeval counts
    with its eager kernels."""
    inf, nan = float("inf"), float("nan")
    # three rows, seven candidates (a view: the last seven of eight columns), five tasks
    scores = torch.tensor([
        [9.0, 1.0, 2.0, nan, 0.0, 2.0, 3.0, -1.0],
        [9.0, inf, 2.0, 2.0, -inf, 0.5, 2.0, 1.0],
        [9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    ])[:, 1:]  # fmt: skip
    rows = torch.tensor([0, 1, 2, 1, 1])
    true_scores = torch.tensor([2.0, 2.0, 0.0, inf, -inf])
    try:
        got = numba_counts(scores, rows, true_scores)
        expected = comparison_counts(scores, rows, true_scores)
        if all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)):
            return True
        problem: object = "its results differ from the PyTorch computation"
    except Exception as error:  # numba missing, or failing to compile here: do not use it
        problem = error
    warnings.warn(f"kgeval: the numba counting kernel is not usable here ({problem}); counting with the eager "
                  "kernel", RuntimeWarning, stacklevel=2)  # fmt: skip
    return False


@functools.lru_cache(maxsize=8)
def triton_kernel_works(device: torch.device) -> bool:
    """Whether the "triton" kernel gives exact counts on ``device``: one probe (cached per device) checks its row
    counts against :func:`comparison_counts` (ties, +-inf, NaN), and its fused counts against counts of every
    score it picks -- with candidates repeated, so an answer's score must tie with its copies bit for bit, whatever
    tile each falls in. If it fails (triton broken here), a warning says so and "auto" counts eagerly."""
    inf, nan = float("inf"), float("nan")
    try:
        scores = torch.tensor([[1.0, 2.0, nan, 2.0, inf], [-inf, 0.0, 0.0, 3.0, 1.0]], device=device)
        rows, true_scores = torch.tensor([0, 1, 1], device=device), torch.tensor([2.0, 0.0, -inf], device=device)
        got = TRITON.counts(scores, rows, true_scores)
        agree = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(got, comparison_counts(scores, rows, true_scores),
                                                                   strict=True))  # fmt: skip
        generator = torch.Generator().manual_seed(0)
        queries = torch.randn(70, 45, generator=generator).to(device)
        candidates = torch.randn(100, 45, generator=generator).repeat(3, 1).to(device)  # 300 rows, each 3 times
        task_rows = torch.arange(70, device=device)
        answers = torch.randint(0, 300, (70,), generator=generator).to(device)
        true = TRITON.pick_scores(queries, candidates, task_rows, answers)
        greater, less, _nan = TRITON.fused_counts(queries, candidates, task_rows, true)
        every = TRITON.pick_scores(queries, candidates, task_rows.repeat_interleave(300),
                                   torch.arange(300, device=device).repeat(70)).view(70, 300)  # fmt: skip
        agree &= torch.equal(greater, (every > true[:, None]).sum(dim=1))
        agree &= torch.equal(less, (every < true[:, None]).sum(dim=1))
        agree &= bool(((every == true[:, None]).sum(dim=1) == 3).all())
        if agree:
            return True
        problem: object = "its counts differ from the PyTorch computation"
    except Exception as error:  # triton missing or failing to compile here: do not use it
        problem = error
    warnings.warn(f"kgeval: the triton kernel is not usable on {device} ({problem}); counting with the eager "
                  "kernel", RuntimeWarning, stacklevel=2)  # fmt: skip
    return False
