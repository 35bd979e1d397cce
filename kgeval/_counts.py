"""What a model declares as a count (entities, relations): a leaf module (torch only), read by kgeval._checks and
by the adapters, which kgeval._checks imports."""

from __future__ import annotations

import operator
from typing import Any

import torch

__all__ = ["declared_count"]


def declared_count(value: Any) -> int | None:
    """A model's declared count as an int (Python or numpy integer, or a one-element integer tensor), or None when
    it declares none or something that is not a count (a float, a bool)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype.is_floating_point:
        value = int(value)
    try:
        count = operator.index(value)
    except TypeError:
        return None
    return count if not isinstance(value, bool) else None
