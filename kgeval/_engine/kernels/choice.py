"""Which kernel counts a side: the caller's request, checked (:func:`check_kernel_choice`), the probes that tell
whether a compiled kernel works here (:func:`numba_kernel_available`, :func:`triton_kernel_works`), and the
:class:`KernelChooser` an evaluator owns ("auto": the ski-rental rule on CPU, the eager kernel on CUDA, where it
was measured faster than the fused Triton kernel; "triton" by name only).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings
from collections.abc import Callable

import torch

from kgeval._engine import kernels
from kgeval.typing import KERNEL_CHOICES

#: eager scores (counted and about to be counted) at which "auto" switches to numba: at ~0.5 ns saved per score on a
#: 2-core CPU, 10**9 scores (~0.5 s) match the cost of loading numba and the cached kernel (~0.5 s per process;
#: ~2 s the first time, when numba compiles it)
AUTO_NUMBA_AFTER_SCORES = 10**9


def check_kernel_choice(kernel: str) -> str:
    """``kernel`` if it is one of :data:`KERNEL_CHOICES`, else a ValueError naming them."""
    if kernel not in KERNEL_CHOICES:
        raise ValueError(f"kernel must be one of {KERNEL_CHOICES}, got {kernel!r}")
    return kernel


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
    numba is already loaded in the process. On CUDA and other devices it counts with the eager kernel
    (``COMPARE``): on an H200 (FB15k-237, DistMult d = 200) the eager kernel took 12.9x the bare cuBLAS GEMM of
    its tasks and the fused Triton kernel 17.8x, so "auto" never picks ``TRITON``, which stays available by name
    (``"triton"``, after its probe on the device: :func:`triton_kernel_works`).

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
        requested: str | kernels.Kernel = "auto",
        switch_after: int = AUTO_NUMBA_AFTER_SCORES,
        numba_available: Callable[[], bool] | None = None,
        numba_loaded: Callable[[], bool] | None = None,
        triton_works: Callable[[torch.device], bool] | None = None,
    ) -> None:
        self.requested = requested if isinstance(requested, kernels.Kernel) else check_kernel_choice(requested)
        self.switch_after = switch_after
        self.eager_scores_counted = 0
        self._numba_available = numba_available or numba_kernel_available
        self._numba_loaded = numba_loaded or numba_is_loaded
        self._triton_works = triton_works or triton_kernel_works

    def choose(self, device: torch.device, num_scores: int) -> kernels.Kernel:
        """The kernel to count ``num_scores`` scores (tasks x candidates) with on ``device``. A requested numba or
        triton kernel falls back to the eager one with a warning where it cannot run (another device, the library
        missing or failing its probe)."""
        if isinstance(self.requested, kernels.Kernel):
            return self.requested
        eager = kernels.eager_kernel(device)
        if self.requested == "triton":
            if triton_kernel_available(device):
                # a kernel that fails its probe here (which warns) never counts: eager instead, never a wrong rank
                return kernels.TRITON if self._triton_works(device) else eager
            warnings.warn(f"kgeval: the triton counting kernel needs triton and a CUDA device (or TRITON_INTERPRET=1 "
                          f"for CPU tensors); counting on {device} with the eager kernel", RuntimeWarning,
                          stacklevel=2)  # fmt: skip
            return eager
        if self.requested == "numba":
            if device.type != "cpu":
                warnings.warn(f"kgeval: the numba counting kernel runs on the CPU only; counting on {device} with "
                              "the eager kernel", RuntimeWarning, stacklevel=2)  # fmt: skip
                return eager
            return kernels.NUMBA if self._numba_available() else eager
        if self.requested == "auto" and device.type != "cpu":
            # measured on an H200 (FB15k-237, DistMult d = 200, torch 2.11, Triton 3.6): eager 12.9x the bare cuBLAS
            # GEMM of the tasks, the fused Triton kernel 17.8x -- triton only when asked for by name
            return eager
        if self.requested == "auto" and device.type == "cpu":
            due = self.eager_scores_counted + num_scores >= self.switch_after
            if self._numba_loaded() or (due and self._numba_available()):
                return kernels.NUMBA
            self.eager_scores_counted += num_scores
        return eager


@functools.cache
def numba_kernel_available() -> bool:
    """Whether the "numba" kernel works here: one probe runs it (loading its machine code from numba's cache, or
    compiling it on a first use) and checks it against :func:`comparison_counts`, including inf, NaN and a tile
    that is a view into a wider matrix, in float32 whatever the caller's default dtype (the verdict is cached for
    the process). If it fails (numba missing or broken), a warning says so and kgeval counts with its eager
    kernels."""
    inf, nan = float("inf"), float("nan")
    # three rows, seven candidates (a view: the last seven of eight columns), five tasks
    scores = torch.tensor([
        [9.0, 1.0, 2.0, nan, 0.0, 2.0, 3.0, -1.0],
        [9.0, inf, 2.0, 2.0, -inf, 0.5, 2.0, 1.0],
        [9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    ], dtype=torch.float32, device="cpu")[:, 1:]  # fmt: skip
    rows = torch.tensor([0, 1, 2, 1, 1], device="cpu")
    true_scores = torch.tensor([2.0, 2.0, 0.0, inf, -inf], dtype=torch.float32, device="cpu")
    try:
        got = kernels.numba_counts(scores, rows, true_scores)
        expected = kernels.comparison_counts(scores, rows, true_scores)
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
    tile each falls in. If it fails (triton broken here, or products that round by their place in a tile), a
    warning says which check failed and what it means, and kgeval counts eagerly (exact ranks, only slower)."""
    try:
        problem = _triton_probe_problem(device)
    except Exception as error:  # triton missing or failing to compile here: do not use it
        problem = f"running it raised {type(error).__name__}: {error}"
    if problem is None:
        return True
    warnings.warn(f"kgeval: the triton kernel is not usable on {device}: {problem}. kgeval counts with the eager "
                  "kernel instead; the ranks are exact, the evaluation only slower", RuntimeWarning,
                  stacklevel=2)  # fmt: skip
    return False


def _triton_probe_problem(device: torch.device) -> str | None:
    """What the triton kernel got wrong on ``device``, in words, or None when every check passes."""
    inf, nan = float("inf"), float("nan")
    scores = torch.tensor([[1.0, 2.0, nan, 2.0, inf], [-inf, 0.0, 0.0, 3.0, 1.0]], dtype=torch.float32, device=device)
    rows = torch.tensor([0, 1, 1], device=device)
    true_scores = torch.tensor([2.0, 0.0, -inf], dtype=torch.float32, device=device)
    got = kernels.TRITON.counts(scores, rows, true_scores)
    expected = kernels.comparison_counts(scores, rows, true_scores)
    if not all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(got, expected, strict=True)):
        return "its counts of a row of scores above and below a true score differ from PyTorch's comparisons"
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(70, 45, generator=generator, dtype=torch.float32, device="cpu").to(device)
    # 300 rows, each 3 times
    candidates = torch.randn(100, 45, generator=generator, dtype=torch.float32, device="cpu").repeat(3, 1).to(device)
    task_rows = torch.arange(70, device=device)
    answers = torch.randint(0, 300, (70,), generator=generator, device="cpu").to(device)
    true = kernels.TRITON.pick_scores(queries, candidates, task_rows, answers)
    greater, less, _nan = kernels.TRITON.fused_counts(queries, candidates, task_rows, true)
    every = kernels.TRITON.pick_scores(queries, candidates, task_rows.repeat_interleave(300),
                                       torch.arange(300, device=device).repeat(70)).view(70, 300)  # fmt: skip
    if not bool(((every == true[:, None]).sum(dim=1) == 3).all()):
        return ("its matrix products give the same (query, candidate) pair a different score depending on where the "
                "candidate falls in a tile (a true answer's score did not equal that of an identical copy of the "
                "answer), so an answer could be counted above or below itself; this comes from the device's "
                "matrix units, or under Triton's interpreter from the host's BLAS library")  # fmt: skip
    if not (torch.equal(greater, (every > true[:, None]).sum(dim=1))
            and torch.equal(less, (every < true[:, None]).sum(dim=1))):  # fmt: skip
        return "its counts over the candidate tiles differ from counts of the scores it computes for those pairs"
    return None
