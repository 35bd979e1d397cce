"""How to score whole triples with a model (:func:`triple_function`): a ``score_fn``, the model's ``score_hrt``, or
its ``forward(h, r, t)`` -- for models that have no ``score_t`` / ``score_h``.

A ``forward`` scores triples only where the model's class wrote one: torch's stub (``nn.Module.forward``) and
Lightning's (``LightningModule.forward(*args, **kwargs)``, which calls the stub) score nothing, and a module whose
``forward`` only passes ``*args`` on while it holds a scoring model is a holder, named as such in the error
(:func:`kgeval.adapters.wrappers.held_models_hint`), never called as a scorer. TorchScript modules (``jit.script`` /
``jit.trace``) and ``torch.fx`` graphs score through their compiled ``forward``; a ``torch.export`` module does
too, unless it was exported for one fixed batch size, which is refused with the fix.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch

from kgeval.adapters import scores_itself
from kgeval.adapters.wrappers import delegate_of, eager_call

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
    parameters = _forward_parameters(model)
    if parameters is None or not _takes_three_positional(parameters):
        return None
    if _passes_arguments_on(parameters) and delegate_of(model, scores_itself) is not None:
        return None  # a holder: its forward hands its arguments to the model it holds (or to nothing)
    _refuse_fixed_batch(model)
    call = eager_call(model)  # a model compiled in place scores eagerly, as its own forward
    return (lambda h, r, t: call(h, r, t)), "forward"


def _stub_forwards() -> tuple[Any, ...]:
    """The ``forward`` functions of the base classes that define one without scoring anything: torch's, and
    Lightning's (of whichever Lightning package the program loaded)."""
    stubs: list[Any] = [torch.nn.Module.forward]
    for name in ("lightning.pytorch.core.module", "pytorch_lightning.core.module"):
        module = sys.modules.get(name)
        lightning_module = getattr(module, "LightningModule", None) if module is not None else None
        if lightning_module is not None:
            stubs.append(vars(lightning_module).get("forward"))
    return tuple(stubs)


def _forward_parameters(model: Any) -> list[inspect.Parameter] | None:
    """The parameters of the ``forward`` that ``model``'s class wrote (looked up in the class dictionaries, without
    running descriptors such as TorchScript's), or None for a non-module, a stub ``forward`` or an unreadable one."""
    if not isinstance(model, torch.nn.Module):
        return None
    definer = next((cls for cls in type(model).__mro__ if "forward" in vars(cls)), None)
    if definer is None or vars(definer)["forward"] in _stub_forwards():
        return None
    try:
        forward = model.forward
    except (AttributeError, RuntimeError):  # a scripted module without a forward
        return None
    try:
        return list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        return _schema_parameters(forward)


def _schema_parameters(method: Any) -> list[inspect.Parameter] | None:
    """The parameters of a TorchScript method (a traced module's ``forward`` has no Python signature, only its
    schema), ``self`` left out; None when it has no schema either."""
    schema = getattr(method, "schema", None)
    if schema is None:
        return None
    parameters = []
    for argument in schema.arguments[1:]:
        kind = inspect.Parameter.KEYWORD_ONLY if argument.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = None if argument.has_default_value() else inspect.Parameter.empty
        parameters.append(inspect.Parameter(argument.name, kind, default=default))
    return parameters


def _takes_three_positional(parameters: list[inspect.Parameter]) -> bool:
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) <= 3 <= len(positional) or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _passes_arguments_on(parameters: list[inspect.Parameter]) -> bool:
    """Whether a ``forward`` names no argument of its own (``forward(*args, **kwargs)``)."""
    return all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)


def fixed_batch_size(model: Any) -> int | None:
    """The batch size a ``torch.export`` module was exported for, when its first input's first dimension is static
    (its graph's placeholders carry their example shapes, symbolic where exported as dynamic); None otherwise."""
    graph = getattr(model, "graph", None)
    if not isinstance(model, torch.fx.GraphModule) or graph is None:
        return None
    for node in graph.nodes:
        if node.op != "placeholder":
            continue
        example = node.meta.get("val")
        shape = getattr(example, "shape", None)
        if shape is None or len(shape) == 0:
            return None
        return shape[0] if isinstance(shape[0], int) else None
    return None


def _refuse_fixed_batch(model: Any) -> None:
    size = fixed_batch_size(model)
    if size is not None:
        raise TypeError(
            f"{type(model).__name__} was exported (torch.export) for batches of exactly {size} triples, and kgeval "
            "scores batches of (queries x candidates) triples of other sizes through its forward: export it with a "
            "dynamic first dimension (torch.export.export(model, (h, r, t), dynamic_shapes=({0: Dim('n')},) * 3)), or "
            "pass evaluate(..., score_fn=...)"
        )
