"""How to score whole triples with a model (:func:`triple_function`): a ``score_fn``, the model's ``score_hrt``, or
its ``forward(h, r, t)`` -- for models that have no ``score_t`` / ``score_h``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from kgeval.adapters.wrappers import eager_call

__all__ = ["TripleFunction", "triple_function"]

#: scores the triples (heads[i], relations[i], tails[i]) -> FloatTensor of shape (n,) (or (n, 1))
TripleFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def triple_function(model: Any, score_fn: TripleFunction | None = None) -> tuple[TripleFunction, str] | None:
    """How to score whole triples with ``model``: ``score_fn`` when given, else the model's ``score_hrt(hrt)``
    (PyKEEN's name; (n, 3) in, (n,) or (n, 1) out), else its ``forward(h, r, t)`` (PyTorch Geometric's KGE
    models; uncompiled, :func:`kgeval.adapters.wrappers.eager_call`); None when it has none of these. Returns
    the function and its name for error messages."""
    if score_fn is not None:
        if not callable(score_fn):
            raise TypeError(f"score_fn must be callable as score_fn(heads, relations, tails), got {score_fn!r}")
        return score_fn, "score_fn"
    score_hrt = getattr(model, "score_hrt", None)
    if callable(score_hrt):
        return (lambda h, r, t: score_hrt(torch.stack([h, r, t], dim=1))), "score_hrt"
    if (
        isinstance(model, torch.nn.Module)
        and type(model).forward is not torch.nn.Module.forward  # torch's stub, which raises when called
        and _takes_three_positional(model.forward)
    ):
        call = eager_call(model)  # a model compiled in place scores eagerly, as its own forward
        return (lambda h, r, t: call(h, r, t)), "forward"
    return None


def _takes_three_positional(function: Any) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) <= 3 <= len(positional) or any(p.kind is p.VAR_POSITIONAL for p in parameters)
