"""Models as a training loop hands them over: wrapped by ``torch.compile``, ``DataParallel``,
``DistributedDataParallel``, FSDP1's ``FullyShardedDataParallel``, an EMA / SWA ``AveragedModel`` or Lightning
Fabric (:func:`unwrap`), or a module that delegates its scoring -- and its protocol methods
(:func:`find_protocol_method`) -- to a model it holds (:func:`delegate_of`). (An FSDP wrapper's parameters are
gathered for the evaluation by :mod:`kgeval.adapters.sharded`.)

A wrapper of torch's (or Fabric's) scores through the model it wraps: ``torch.compile`` compiles only ``forward``
(``score_t`` of the compiled object *is* the original's, through ``__getattr__``), ``DataParallel`` /
``DistributedDataParallel`` / Fabric split a ``forward`` call over devices, and an ``AveragedModel`` holds the
averaged copy of the model in ``.module``. kgeval ranks the wrapped model -- its class, its integration, its fast
path -- with its own (eager) methods, so the ranks are those of the model the wrapper holds, and the class checks
of the fast path see the user's class, not the wrapper's. A subclass of a wrapper that defines a scoring method of
its own is not unwrapped: it is a model in its own right.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SCORING_ATTRIBUTES",
    "Unwrapped",
    "delegate_of",
    "describe",
    "eager_call",
    "find_protocol_method",
    "held_models",
    "held_models_hint",
    "unwrap",
]

#: (module, class name, attribute holding the wrapped model, how the wrapper is named to the user)
WRAPPERS: tuple[tuple[str, str, str, str], ...] = (
    ("torch._dynamo.eval_frame", "OptimizedModule", "_orig_mod", "torch.compile"),
    ("torch.nn.parallel.data_parallel", "DataParallel", "module", "DataParallel"),
    ("torch.nn.parallel.distributed", "DistributedDataParallel", "module", "DistributedDataParallel"),
    ("torch.optim.swa_utils", "AveragedModel", "module", "AveragedModel"),
    (
        "torch.distributed.fsdp.fully_sharded_data_parallel",
        "FullyShardedDataParallel",
        "module",
        "FullyShardedDataParallel",
    ),
    ("lightning.fabric.wrappers", "_FabricModule", "module", "Lightning Fabric"),
    ("lightning_fabric.wrappers", "_FabricModule", "module", "Lightning Fabric"),
)

#: attributes through which kgeval scores a model: a class that defines one scores in its own right
SCORING_ATTRIBUTES: tuple[str, ...] = (
    "score_t", "score_h", "score_r", "score_hrt", "kgeval_query", "kgeval_candidates", "kgeval_similarity",
)  # fmt: skip


@dataclass(frozen=True)
class Unwrapped:
    """A model with the wrappers around it taken off.

    Attributes
    ----------
    model : object
        The innermost model (the argument itself when it is no wrapper).
    wrappers : tuple of str
        The wrappers taken off, outermost first (e.g. ``("torch.compile", "DataParallel")``).
    """

    model: Any
    wrappers: tuple[str, ...] = ()


def unwrap(model: Any) -> Unwrapped:
    """The model inside torch's (and Lightning Fabric's) wrappers, however deeply nested.

    A wrapper is recognised by its class (loaded only if the program loaded it); one whose own subclass defines a
    scoring method (:data:`SCORING_ATTRIBUTES`, on the class below the wrapper or on the instance) is kept.
    """
    wrappers: list[str] = []
    while True:
        known = _wrapper_of(model)
        if known is None:
            return Unwrapped(model, tuple(wrappers))
        attribute, name = known
        inner = getattr(model, attribute, None)
        if inner is None or inner is model:
            return Unwrapped(model, tuple(wrappers))
        wrappers.append(name)
        model = inner


def _wrapper_of(model: Any) -> tuple[str, str] | None:
    """(attribute, name) when ``model`` is a wrapper whose scoring is its wrapped model's, else None."""
    for module_name, class_name, attribute, name in WRAPPERS:
        module = sys.modules.get(module_name)
        wrapper = getattr(module, class_name, None) if module is not None else None
        if wrapper is None or not isinstance(model, wrapper):
            continue
        if any(attr in getattr(model, "__dict__", {}) for attr in SCORING_ATTRIBUTES):
            return None  # scoring set on the instance itself
        for cls in type(model).__mro__:
            if cls is wrapper:
                return attribute, name
            if any(attr in vars(cls) for attr in SCORING_ATTRIBUTES):
                return None  # a subclass of the wrapper that scores in its own right
    return None


def eager_call(module: Any) -> Any:
    """What calling ``module`` runs, uncompiled: ``module`` itself, or for a module compiled in place
    (``module.compile()``, which leaves its class and attributes as they were) the eager ``__call__`` it replaced
    (hooks, then ``forward``). Scoring through it gives the model's own scores, not those of a compiled graph
    (whose kernels may round otherwise), and never waits for a compilation per new batch shape."""
    if getattr(module, "_compiled_call_impl", None) is not None and callable(getattr(module, "_call_impl", None)):
        return module._call_impl
    return module


def describe(model: Any) -> str:
    """The class name of the model inside any wrappers, with the wrappers: ``"DistMult (inside DataParallel)"``."""
    unwrapped = unwrap(model)
    name = type(unwrapped.model).__name__
    if not unwrapped.wrappers:
        return name
    return f"{name} (inside {' inside '.join(reversed(unwrapped.wrappers))})"


def held_models(model: Any) -> Iterator[tuple[str, Any]]:
    """(attribute name, module) of each direct child module of ``model`` (a torch module), in definition order."""
    children = getattr(model, "named_children", None)
    if not callable(children):
        return iter(())
    return iter(children())


def held_models_hint(model: Any, accepts: Callable[[Any], bool], what: str) -> str:
    """``"; it holds ... in .attr: pass model.attr ..."`` naming the models ``model`` holds (direct children, after
    their wrappers) that ``accepts``, for an error about ``model``; empty when it holds none."""
    found = [(name, describe(child)) for name, child in held_models(model) if accepts(unwrap(child).model)]
    if not found:
        return ""
    where = ", ".join(f"{cls} in .{name}" for name, cls in found)
    first = found[0][0]
    return (f"; it holds {where}, which {'has' if len(found) == 1 else 'have'} {what}: pass that model "
            f"(evaluate(model.{first}, ...); in KGEvalCallback, model={first!r})")  # fmt: skip


def delegate_of(model: Any, scorable: Any) -> tuple[str, Any] | None:
    """(attribute, child) of the one direct child module of ``model`` that ``scorable(child)`` accepts (after its
    wrappers are taken off), or None when none or several do.

    A module that holds one scorable model and scores through it (a LightningModule whose ``score_t`` calls
    ``self.model.score_t``) has that model as its delegate. Holding it proves nothing about how the module scores:
    callers compare the two on the evaluation's own queries before they use what the delegate offers.
    """
    found = [(name, unwrap(child).model) for name, child in held_models(model) if scorable(unwrap(child).model)]
    return found[0] if len(found) == 1 else None


def find_protocol_method(model: Any, name: str) -> Callable[..., Any] | None:
    """The protocol method ``name`` (``kgeval_observe``, ...) of ``model``, found as scoring methods are: on the
    model itself, else on the one model it holds that has it (a LightningModule whose ``self.model`` observes);
    None when neither has it.

    Raises
    ------
    TypeError
        When ``model`` does not have it but holds it where kgeval will not guess: on several held models, or only on
        a model deeper inside (a holder that hides the hook is told, never skipped).
    """
    method = getattr(model, name, None)
    if callable(method):
        return method
    found = delegate_of(model, lambda child: callable(getattr(child, name, None)))
    if found is not None:
        return getattr(found[1], name)
    modules = getattr(model, "named_modules", None)
    hidden = [path for path, module in modules() if path and callable(getattr(module, name, None))] if callable(
        modules) else []  # fmt: skip
    if hidden:
        where = ", ".join(f".{path} ({describe(model.get_submodule(path))})" for path in hidden[:3])
        raise TypeError(
            f"{describe(model)} has no {name} of its own, but holds models that have one at {where}, which kgeval "
            f"does not guess between: define {name} on {type(unwrap(model).model).__name__} (calling the right one), "
            "or evaluate the model that has it"
        )
    return None
