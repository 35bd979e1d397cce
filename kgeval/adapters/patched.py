"""What a training loop leaves patched on a module, read for an evaluation the way the model's own forward reads it.

- **Attributes a forward pre-hook recomputes** (the hook-based ``torch.nn.utils.weight_norm`` and
  ``spectral_norm``, ``torch.nn.utils.prune``): ``module.weight`` is a plain attribute the hook sets from the
  parameters (``weight_g`` / ``weight_v``, ``weight_orig``, ...) at each call of the module, so after an optimiser
  step it is stale until the next call. A model's own ``score_t`` looks its query rows up first (the hook runs) and
  then reads the table; kgeval's fast path reads the table before any lookup. :func:`recomputed_attributes` runs
  each such hook once (in evaluation mode, without autograd) before anything is scored, so every reader sees the
  table the model's own methods see, and puts the attribute the caller had back after the evaluation.
- **accelerate's mixed-precision forward**: ``Accelerator(mixed_precision=...).prepare(model)`` replaces
  ``model.forward`` on the instance with an autocast wrapper, the original kept as ``model._original_forward``.
  :func:`original_forwards` scores through the original for the evaluation, as ``accelerate.unwrap_model``
  does, and puts the wrapper back after; a wrapper kgeval cannot trace back to the original is a
  :class:`kgeval.exceptions.PrecisionWarning`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.nn.utils.prune import BasePruningMethod
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from kgeval.exceptions import PrecisionWarning, warn_caller

__all__ = ["original_forwards", "recomputed_attributes"]

#: forward pre-hooks of torch that set an attribute of the module from its parameters and nothing else
_RECOMPUTING_HOOKS = (WeightNorm, SpectralNorm, BasePruningMethod)

#: a missing attribute (restored by deleting it)
_MISSING = object()


def _recomputed_name(hook: Any) -> str:
    """The attribute a recomputing hook sets (``weight`` for ``weight_norm(module)``)."""
    return hook._tensor_name if isinstance(hook, BasePruningMethod) else hook.name


def _recomputing_hooks(module: torch.nn.Module) -> list[tuple[torch.nn.Module, Any]]:
    """(submodule, hook) of every recomputing forward pre-hook of ``module`` and of its submodules, in call order.

    A spectral norm of a module in training mode is left out: its hook would run a power iteration, writing its
    ``u`` / ``v`` buffers (kgeval evaluates in eval mode; a module that keeps its training mode keeps it)."""
    found = []
    for submodule in module.modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, _RECOMPUTING_HOOKS) and not (isinstance(hook, SpectralNorm) and submodule.training):
                found.append((submodule, hook))
    return found


@contextmanager
def recomputed_attributes(module: torch.nn.Module) -> Iterator[None]:
    """Every attribute a recomputing forward pre-hook sets (see the module docstring) recomputed from the current
    parameters for the block, as the module's next call would; each attribute's previous value put back after it
    (also when the block raises), so the caller's module is left as it was. Enter it after the module is in eval
    mode (a spectral norm in eval mode divides by its stored estimate, without a power iteration)."""
    hooks = _recomputing_hooks(module)
    saved = [(owner, _recomputed_name(hook), owner.__dict__.get(_recomputed_name(hook), _MISSING))
             for owner, hook in hooks]  # fmt: skip
    try:
        with torch.no_grad():
            for owner, hook in hooks:
                hook(owner, ())
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is _MISSING:
                owner.__dict__.pop(name, None)
            else:
                setattr(owner, name, value)


def _wraps(wrapper: Any, original: Any) -> bool:
    """Whether ``wrapper`` (a bound method or function) leads to ``original``'s function through ``__wrapped__``
    (what ``functools.wraps`` records), as ``accelerate.unwrap_model`` follows it."""
    target = getattr(original, "__func__", original)
    current = getattr(wrapper, "__func__", wrapper)
    for _ in range(32):  # a chain of wrappers is short; a cycle must not hang
        if current is target:
            return True
        current = getattr(current, "__wrapped__", None)
        if current is None:
            return False
    return False


def _autocast_patched(module: torch.nn.Module) -> list[torch.nn.Module]:
    """``module`` and its submodules whose ``forward`` accelerate replaced on the instance (``_original_forward``
    beside it)."""
    return [sub for sub in module.modules() if "_original_forward" in sub.__dict__ and "forward" in sub.__dict__]


@contextmanager
def original_forwards(module: torch.nn.Module, name: str) -> Iterator[None]:
    """Each forward accelerate wrapped in autocast (see the module docstring) replaced by its original for the
    block, the wrapper put back after it. ``name``: how the warning names the model.

    Warns (:class:`kgeval.exceptions.PrecisionWarning`) for a wrapper that does not lead back to
    ``_original_forward``: kgeval cannot tell what it does, so the model is scored through it."""
    patched = _autocast_patched(module)
    swapped = []
    for sub in patched:
        wrapper, original = sub.__dict__["forward"], sub.__dict__["_original_forward"]
        if _wraps(wrapper, original):
            swapped.append((sub, wrapper))
            sub.__dict__["forward"] = original
        else:
            warn_caller(
                f"kgeval: the forward of {name} was replaced on the instance (beside accelerate's "
                "_original_forward) by a function that does not lead back to it, so kgeval scores the model through "
                "it, in whatever precision it computes (accelerate's mixed precision runs it under autocast). For "
                "the float32 ranks, evaluate accelerate.unwrap_model(model)",
                PrecisionWarning,
            )
    try:
        yield
    finally:
        for sub, wrapper in swapped:
            sub.__dict__["forward"] = wrapper
