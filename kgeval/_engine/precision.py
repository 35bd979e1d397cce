"""Full float32 precision for the matrix multiplications of an evaluation: TF32 and reduced-precision matmul
modes that the process enabled (``torch.backends.cuda.matmul.allow_tf32``, ``torch.set_float32_matmul_precision``
or the ``fp32_precision`` backends) are switched off for the block and restored after it, through the same API."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from kgeval.typing import MatmulPrecision

#: the backends whose float32 matmul precision the guard pins to IEEE
_BACKENDS: tuple[Any, ...] = (torch.backends.cuda.matmul, torch.backends.mkldnn.matmul)  # type: ignore[attr-defined]
_EXACT = ("none", "ieee")  # "none": inherit torch.backends.fp32_precision


def _all_exact() -> bool:
    """Every matmul backend computes float32 in IEEE precision (what a process that set nothing does)."""
    inherited = torch.backends.fp32_precision in _EXACT  # type: ignore[attr-defined]
    return all(backend.fp32_precision == "ieee" or (backend.fp32_precision == "none" and inherited)
               for backend in _BACKENDS)  # fmt: skip


@contextmanager
def exact_matmul(mode: MatmulPrecision = "exact") -> Iterator[None]:
    """Inside the block, float32 matrix multiplications run in full precision on every device; the caller's
    settings come back afterwards, also on error. Nothing is touched when they are exact already (the default),
    or with ``mode="inherit"``.

    The settings are saved and restored through the per-backend API (``fp32_precision``), which reads and writes
    the state the legacy calls (``allow_tf32``, ``set_float32_matmul_precision``) set too: after the block both
    APIs read what they read before it. They are process-wide: another thread's matmuls during the block run
    exact too."""
    if mode == "inherit" or _all_exact():
        yield
        return
    saved = [(backend, backend.fp32_precision) for backend in _BACKENDS]
    for backend, _ in saved:
        backend.fp32_precision = "ieee"
    try:
        yield
    finally:
        for backend, value in saved:
            backend.fp32_precision = value
