"""Skipping the compiled counting kernel where torch.compile cannot work (no C++ compiler, say).

kgeval itself falls back to its eager kernel there, with a warning; tests that force the compiled kernel skip
instead of failing, and say why.
"""

from __future__ import annotations

import pytest

from kgeval.kernels import compiled_kernel_available


def skip_unless_usable(kernel: str) -> None:
    """Skip the calling test when it needs the compiled kernel and this machine cannot compile it."""
    if kernel == "compiled" and not compiled_kernel_available():
        pytest.skip("torch.compile is not usable on this machine")
