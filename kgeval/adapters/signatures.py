"""How a model's scoring method takes candidate ids (:func:`candidate_argument`): by keyword, positionally, or not
at all -- read from its signature, for the scorers and the adapters that call it."""

from __future__ import annotations

import inspect
from typing import Any, Literal

__all__ = ["candidate_argument"]


def candidate_argument(function: Any, name: str) -> Literal["keyword", "positional"] | None:
    """How ``function(batch, ...)`` takes candidate ids called ``name`` (``tails`` / ``heads`` / ``relations``):
    ``"keyword"`` (a parameter of that name that takes keywords, or ``**kwargs``), ``"positional"`` (a
    positional-only parameter of that name right after the batch), or None (it takes none)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    named = next((p for p in parameters if p.name == name), None)
    if named is not None and named.kind is inspect.Parameter.POSITIONAL_ONLY:
        return "positional" if parameters.index(named) == 1 else None
    if named is not None and named.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
        return "keyword"
    return "keyword" if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters) else None
