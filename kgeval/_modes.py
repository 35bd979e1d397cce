"""A model as an evaluation holds it: in evaluation mode, its sharded parameters gathered, nothing of it changed,
and evaluations of one model object taking turns (:func:`evaluation_mode`).

- ``model.eval()`` for the evaluation, then the ``training`` flag of the model and of every submodule restored
  exactly as it was. Only torch modules are switched, through torch's own ``eval`` / ``train``: an object that is
  not an ``nn.Module`` keeps its ``eval`` to itself (it may mean anything -- run the user's own evaluation, say);
  the torch modules it holds are switched instead (and gathered and watched as below), found through its
  attributes, the lists, tuples and dicts it holds and nested plain objects (:func:`held_modules`); such an object
  with an ``eval`` / ``train`` of its own that holds no module kgeval can find is warned about. A module
  that replaced ``eval`` / ``train`` on the instance keeps them too (``torch.export``'s modules refuse them: their
  mode was fixed when they were exported).
- Sharded parameters (FSDP2, FSDP1) gathered for the evaluation and sharded again after it
  (:mod:`kgeval.adapters.sharded`); attributes a forward pre-hook recomputes (hook-based ``weight_norm`` /
  ``spectral_norm``, pruning) recomputed before anything reads them, and accelerate's autocast ``forward`` replaced by
  the original for the evaluation (:mod:`kgeval.adapters.patched`).
- Nothing of the model changed: a table whose lookups write (``max_norm``) and lazy parameters not yet initialised
  refused before scoring, any other parameter or buffer written during the evaluation reported
  (:mod:`kgeval._model_state`).
- A per-model lock.
- Another thread that uses the model meanwhile (a trainer training it) told so (:func:`_eval_mode_told`).
"""

from __future__ import annotations

import threading
import types
import weakref
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from kgeval._model_state import StateWatch, refuse_lazy_parameters, refuse_writing_lookups
from kgeval.adapters.patched import original_forwards, recomputed_attributes
from kgeval.adapters.sharded import gathered_parameters
from kgeval.adapters.wrappers import describe
from kgeval.exceptions import ModelInUseWarning, warn_caller

#: one lock per model object (weakly held): concurrent evaluations of one model take turns
_MODEL_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
#: guards _MODEL_LOCKS, and serves models that cannot be weakly referenced or hashed
_LOCKS_GUARD = threading.RLock()


def _model_lock(model: Any) -> threading.RLock:
    with _LOCKS_GUARD:
        try:
            return _MODEL_LOCKS.setdefault(model, threading.RLock())
        except TypeError:  # not weakly referenceable or not hashable
            return _LOCKS_GUARD


def _modes(model: torch.nn.Module) -> list[tuple[torch.nn.Module, bool]]:
    """(module, its ``training`` flag) of the model and of each of its submodules, the model first."""
    return [(module, module.training) for module in model.modules()]


def _switches_modes(model: Any) -> bool:
    """Whether kgeval may call ``model.eval()`` / ``model.train(mode)``: a torch module that keeps torch's methods
    on the instance (a class may override them: it gets its say)."""
    own = getattr(model, "__dict__", {})
    return isinstance(model, torch.nn.Module) and "eval" not in own and "train" not in own


@contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """``model.eval()`` for the block, then every ``training`` flag back as it was (models that are not torch modules,
    or that replaced ``eval`` / ``train`` on the instance, are left alone).

    ``model.train(was_training)`` alone would recurse: a submodule the user froze with ``.eval()`` (a pretrained
    encoder, a BatchNorm) would come back in training mode, its statistics updating and its dropout on. So the flag
    of the model and of each submodule is recorded before; afterwards (also when the block raises) the model's own
    ``train(was_training)`` runs (a class that overrides ``train`` gets its say), then every flag that differs from
    its record is set back.
    """
    if not _switches_modes(model):
        yield
        return
    modes = _modes(model)
    model.eval()
    try:
        yield
    finally:
        model.train(modes[0][1])
        for item, training in modes:
            if item.training != training:
                item.training = training


@dataclass
class _Evaluating:
    """One running evaluation of a module: how messages name the model, the evaluating thread, and whether another
    thread has been told yet."""

    name: str
    thread: int
    told: bool = False


#: the modules (by id, submodules included) of the evaluations running now, each with its evaluations
_EVALUATING: dict[int, list[_Evaluating]] = {}
#: guards _EVALUATING and _HOOK
_EVALUATING_GUARD = threading.Lock()
#: the global forward pre-hook, registered while an evaluation runs
_HOOK: list[RemovableHandle] = []


def _tell_another_thread(module: torch.nn.Module, _args: Any) -> None:
    """Global forward pre-hook: a module of a running evaluation called from a thread that does not evaluate it is
    told once per evaluation (in that thread) that it runs in evaluation mode."""
    evaluations = _EVALUATING.get(id(module))
    if not evaluations or module.training:  # switched back to training mode: the evaluation is told at its end
        return
    me = threading.get_ident()
    if any(evaluation.thread == me for evaluation in evaluations):
        return
    untold = [evaluation for evaluation in evaluations if not evaluation.told]
    for evaluation in untold:
        evaluation.told = True
    if untold:
        warn_caller(
            f"kgeval: {untold[0].name} is in evaluation mode for an evaluation running in another thread, so this "
            "call runs in evaluation mode too (dropout off, batch-norm statistics frozen): evaluate a copy "
            "(copy.deepcopy(model)) or wait for the evaluation to end before training the model",
            ModelInUseWarning,
        )


@contextmanager
def _eval_mode_told(module: torch.nn.Module, name: str) -> Iterator[None]:
    """:func:`_eval_mode` for the block, with another thread that uses the module meanwhile told so: a thread that
    calls a submodule kgeval switched to evaluation mode (a trainer training the same model) gets one
    :class:`ModelInUseWarning`; and when the block ends, the submodules another thread switched back to training mode
    meanwhile are named to the caller in one warning (some scores may have had dropout on). The mode itself is the
    model's, shared by every thread: kgeval cannot give another thread its own."""
    before = [(item, item.training) for item in module.modules()]
    with _eval_mode(module):
        switched = [item for item, training in before if training and not item.training]  # by kgeval
        evaluation = _Evaluating(name, threading.get_ident())
        _watch(switched, evaluation)
        try:
            yield
            back = [item for item in switched if item.training]
        finally:
            _unwatch(switched, evaluation)
    if back:
        warn_caller(
            f"kgeval: {len(back)} module(s) of {name} were switched back to training mode during this evaluation "
            "(by another thread), so some of its scores may have had dropout on: evaluate a copy "
            "(copy.deepcopy(model)) while another thread trains the model",
            ModelInUseWarning,
        )


def _watch(modules: list[torch.nn.Module], evaluation: _Evaluating) -> None:
    """Register ``modules`` as held by ``evaluation`` (the global hook is on while any module is)."""
    with _EVALUATING_GUARD:
        for item in modules:
            _EVALUATING.setdefault(id(item), []).append(evaluation)
        if _EVALUATING and not _HOOK:
            _HOOK.append(torch.nn.modules.module.register_module_forward_pre_hook(_tell_another_thread))


def _unwatch(modules: list[torch.nn.Module], evaluation: _Evaluating) -> None:
    """Undo :func:`_watch` (the global hook removed when no module is held any more)."""
    with _EVALUATING_GUARD:
        for item in modules:
            others = [other for other in _EVALUATING.get(id(item), []) if other is not evaluation]
            if others:
                _EVALUATING[id(item)] = others
            else:
                _EVALUATING.pop(id(item), None)
        if not _EVALUATING and _HOOK:
            _HOOK.pop().remove()


#: how deep :func:`held_modules` looks through the containers and plain objects a scorer holds
HELD_DEPTH = 4
#: containers longer than this are not searched (a scorer's list of data, not of networks)
HELD_CONTAINER_ITEMS = 1000


def held_modules(model: Any) -> list[tuple[str, torch.nn.Module]]:
    """The torch modules an evaluation of ``model`` holds, with the prefix that names their tensors: the model itself
    when it is a module; else the outermost distinct modules found through its attributes, the items of the lists,
    tuples and dicts it holds and the attributes of the plain objects it holds, :data:`HELD_DEPTH` levels deep
    (``"model."``: a plain object holding its network in ``self.model``; ``"parts.0."``, ``"parts.encoder."``,
    ``"inner.net."`` deeper down). Attributes are read from instance dictionaries only (no property runs)."""
    if isinstance(model, torch.nn.Module):
        return [("", model)]
    found: dict[int, tuple[str, torch.nn.Module]] = {}
    _collect_modules(model, "", found, {id(model)}, HELD_DEPTH)
    inner = {id(sub) for _, module in found.values() for sub in module.modules() if sub is not module}
    return [(prefix, module) for key, (prefix, module) in found.items() if key not in inner]


def _children(value: Any) -> list[tuple[str | int, Any]]:
    """(name, item) of what ``value`` holds: a list's or tuple's items, a dict's values (by their str / int keys), a
    plain object's instance attributes; nothing for anything else (tensors, strings, arrays, classes, functions)."""
    if isinstance(value, (list, tuple)):
        return list(enumerate(value)) if len(value) <= HELD_CONTAINER_ITEMS else []
    if isinstance(value, dict):
        if len(value) > HELD_CONTAINER_ITEMS:
            return []
        return [(key, item) for key, item in value.items() if isinstance(key, (str, int))]
    if isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType, torch.Tensor)):
        return []
    attributes = getattr(value, "__dict__", None)
    return list(attributes.items()) if isinstance(attributes, dict) else []


def _collect_modules(
    value: Any, prefix: str, found: dict[int, tuple[str, torch.nn.Module]], seen: set[int], depth: int
) -> None:
    """Add to ``found`` (id -> (prefix, module)) the modules ``value`` holds, searched ``depth`` levels down."""
    for key, item in _children(value):
        path = f"{prefix}{key}"
        if isinstance(item, torch.nn.Module):
            found.setdefault(id(item), (f"{path}.", item))
        elif depth > 1 and id(item) not in seen:
            seen.add(id(item))
            _collect_modules(item, f"{path}.", found, seen, depth - 1)


def _warn_if_nothing_switched(model: Any, modules: list[tuple[str, torch.nn.Module]], name: str) -> None:
    """A UserWarning when ``model`` is not a torch module, holds none kgeval can find, and has an ``eval`` or
    ``train`` method of its own: kgeval never calls it (it may be the user's own routine), so nothing of the model
    is put in eval mode."""
    if modules or isinstance(model, torch.nn.Module):
        return
    if not any(callable(getattr(model, method, None)) for method in ("eval", "train")):
        return
    warn_caller(
        f"kgeval: {name} is not a torch module and holds none kgeval can find (in its attributes, or the lists, dicts "
        "and plain objects they hold), so nothing of it was put in eval mode; kgeval does not call its own eval() "
        "(it may be any routine of yours). If it computes with torch modules (dropout, batch norm), put them in eval "
        "mode before evaluating, or hold them in an attribute",
        UserWarning,
    )


@contextmanager
def evaluation_mode(model: Any, name: str | None = None) -> Iterator[None]:
    """The model as an evaluation holds it, for the block (see the module docstring): evaluation mode, sharded
    parameters gathered, a table whose lookups write refused, any other change to its parameters or buffers
    reported after the block (:class:`kgeval.exceptions.ModelChangedWarning`). ``name``: how messages name the
    model (default: its class, with its wrappers).

    Thread safety: evaluations of one model object take turns (a per-model lock held from the mode switch to its
    restoration), so a second thread can neither save the first one's eval mode as the model's own nor switch the
    mode back in the middle of the first one's run. Evaluations of different models run concurrently.

    Raises
    ------
    TypeError
        For an embedding table with ``max_norm``, lazy parameters not yet initialised, or a DTensor parameter kgeval
        cannot gather.
    """
    name = name or describe(model)
    modules = held_modules(model)
    labels = [name if not prefix else f"{name}.{prefix[:-1]}" for prefix, _ in modules]
    _warn_if_nothing_switched(model, modules, name)
    for label, (_, module) in zip(labels, modules, strict=True):
        refuse_writing_lookups(module, label)
        refuse_lazy_parameters(module, label)
    with _model_lock(model), ExitStack() as stack:
        for label, (_, module) in zip(labels, modules, strict=True):
            stack.enter_context(_eval_mode_told(module, label))
            stack.enter_context(gathered_parameters(module, label))
            stack.enter_context(recomputed_attributes(module))
            stack.enter_context(original_forwards(module, label))
        watches = [(prefix, module, StateWatch.of(module)) for prefix, module in modules]
        yield
        for prefix, module, watch in watches:
            watch.warn_if_changed(module, name, prefix)
