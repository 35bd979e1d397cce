"""A model as an evaluation holds it: in evaluation mode, its sharded parameters gathered, nothing of it changed,
and evaluations that share a module taking turns (:func:`evaluation_mode`).

- ``model.eval()`` for the evaluation, then the ``training`` flag of every module restored exactly as it was,
  recorded per module (a submodule two held models share recorded once). Only torch modules are switched, through
  torch's own ``eval`` / ``train``: an object that is not an ``nn.Module`` keeps its ``eval`` to itself (it may
  mean anything -- run the user's own evaluation, say); the torch modules it holds are switched instead (and
  gathered and watched as below), found through its attributes, ``__slots__`` and class attributes, the lists,
  tuples, sets and dicts (any hashable key) it holds, nested plain objects, bound methods (their ``__self__``),
  ``functools.partial`` objects, closures and weak references (:func:`held_modules`). Such an object with an
  ``eval`` / ``train`` of its own that holds no module kgeval can find is warned about, and so is one holding
  callables kgeval cannot look into (a callable object of a C type, a closure deeper than :data:`HELD_DEPTH`),
  which may hold modules it cannot switch. A module that replaced ``eval`` / ``train`` on the instance keeps them
  too (``torch.export``'s modules refuse them: their mode was fixed when they were exported).
- Sharded parameters (FSDP2, FSDP1) gathered for the evaluation and sharded again after it
  (:mod:`kgeval.adapters.sharded`); attributes a forward pre-hook recomputes (hook-based ``weight_norm`` /
  ``spectral_norm``, pruning) recomputed before anything reads them, and accelerate's autocast ``forward`` replaced by
  the original for the evaluation (:mod:`kgeval.adapters.patched`).
- Nothing of the model changed: a table whose lookups write (``max_norm``) and lazy parameters not yet initialised
  refused before scoring, any other parameter or buffer written during the evaluation reported
  (:mod:`kgeval._model_state`).
- Evaluations that share any torch module take turns, whatever handle each holds (the model, a wrapper, a holder,
  another model sharing a submodule): the model and every module of its trees claimed for the evaluation
  (:func:`_claimed`).
- Another thread that uses the model meanwhile (a trainer training it, through ``forward`` or computing gradients
  through its parameters) told so (:func:`_eval_modes_told`).
"""

from __future__ import annotations

import enum
import functools
import threading
import types
import weakref
from collections.abc import Iterator, Sequence
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

#: the objects (by id) claimed by running evaluations: id -> (the claiming thread, how many times it claimed it)
_CLAIMS: dict[int, tuple[int, int]] = {}
#: guards _CLAIMS; notified whenever a claim is released
_CLAIMS_CHANGED = threading.Condition()


@contextmanager
def _claimed(objects: Sequence[Any]) -> Iterator[None]:
    """Hold every object of ``objects`` (by identity: the model handed over and every torch module of the module
    trees it holds, shared submodules included) for the block; an evaluation that needs any of them waits until
    it is free.

    The whole set is claimed in one step, under one condition variable, once none of it is held by another thread
    -- never one at a time -- so two evaluations that need overlapping sets cannot each hold a part and wait for
    the other's (no lock order to get wrong). Re-entrant in one thread: a thread may claim again what it holds (an
    evaluation inside an evaluation of an overlapping set). The objects stay alive while claimed (``objects`` is
    held), so their ids are not reused meanwhile."""
    keys = list({id(item): None for item in objects})
    me = threading.get_ident()

    def free() -> bool:
        return all(_CLAIMS.get(key, (me, 0))[0] == me for key in keys)

    with _CLAIMS_CHANGED:
        _CLAIMS_CHANGED.wait_for(free)
        for key in keys:
            _CLAIMS[key] = (me, _CLAIMS.get(key, (me, 0))[1] + 1)
    try:
        yield
    finally:
        with _CLAIMS_CHANGED:
            for key in keys:
                owner, count = _CLAIMS[key]
                if count > 1:
                    _CLAIMS[key] = (owner, count - 1)
                else:
                    del _CLAIMS[key]
            _CLAIMS_CHANGED.notify_all()


def _switches_modes(model: Any) -> bool:
    """Whether kgeval may call ``model.eval()`` / ``model.train(mode)``: a torch module that keeps torch's methods
    on the instance (a class may override them: it gets its say)."""
    own = getattr(model, "__dict__", {})
    return isinstance(model, torch.nn.Module) and "eval" not in own and "train" not in own


@contextmanager
def _eval_modes(roots: Sequence[torch.nn.Module]) -> Iterator[list[tuple[torch.nn.Module, int]]]:
    """``root.eval()`` of each root for the block, then every ``training`` flag of every module of their trees back
    as it was; yields (module, the index of the first root whose tree holds it) of each module switched from
    training to evaluation mode. Roots that are not torch modules, or that replaced ``eval`` / ``train`` on the
    instance, are left alone.

    ``root.train(was_training)`` alone would recurse: a submodule the user froze with ``.eval()`` (a pretrained
    encoder, a BatchNorm) would come back in training mode, its statistics updating and its dropout on. So the flag
    of every module of every root's tree is recorded once, per module (a submodule two roots share recorded once,
    before any root is switched); afterwards (also when the block raises) each root's own ``train(was_training)``
    runs (a class that overrides ``train`` gets its say), then every flag that differs from its record is set back.
    """
    switching = [root for root in roots if _switches_modes(root)]
    recorded: dict[int, tuple[torch.nn.Module, bool, int]] = {}
    for index, root in enumerate(switching):
        for module in root.modules():
            if id(module) not in recorded:
                recorded[id(module)] = (module, module.training, index)
    for root in switching:
        root.eval()
    try:
        yield [(module, index) for module, training, index in recorded.values() if training and not module.training]
    finally:
        for root in reversed(switching):
            root.train(recorded[id(root)][1])
        for module, training, _ in recorded.values():
            if module.training != training:
                module.training = training


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


def _tell_the_training_thread(module: torch.nn.Module, evaluation: _Evaluating, _gradient: torch.Tensor) -> None:
    """Tensor hook on a parameter of a module kgeval switched to evaluation mode: a gradient computed through it
    during the evaluation -- which scores under ``torch.inference_mode`` and computes none -- means another thread
    trains the model (through a method other than ``forward``, say, or with ``F.dropout(x, training=self.training)``
    and no module of its own to call, so no forward pre-hook sees it): told once per evaluation (in the thread that
    runs the backward pass: the trainer's on the CPU) that the model is in evaluation mode. A module switched back to
    training mode meanwhile is told to the evaluation's caller at its end instead."""
    if evaluation.told or module.training or threading.get_ident() == evaluation.thread:
        return
    with _EVALUATING_GUARD:
        if evaluation.told:
            return
        evaluation.told = True
    warn_caller(
        f"kgeval: {evaluation.name} is in evaluation mode for an evaluation running in another thread, and this "
        "thread computed gradients through its parameters meanwhile (training it), so its training-mode behaviour "
        "is off (dropout, including F.dropout(x, training=self.training), batch-norm statistics): evaluate a copy "
        "(copy.deepcopy(model)) or wait for the evaluation to end before training the model",
        ModelInUseWarning,
    )


def _gradient_hooks(
    switched: Sequence[tuple[torch.nn.Module, int]], evaluations: Sequence[_Evaluating]
) -> list[RemovableHandle]:
    """A :func:`_tell_the_training_thread` hook on each parameter that requires a gradient of each switched module
    (each parameter once), marked as torch's ``unserializable_hook`` (pickling or sharing the model with another
    process meanwhile warns of nothing). A parameter that takes no hook (a subclass that refuses one) is skipped."""
    handles: list[RemovableHandle] = []
    hooked: set[int] = set()
    for module, index in switched:
        for parameter in module.parameters(recurse=False):
            if not parameter.requires_grad or id(parameter) in hooked:
                continue
            hooked.add(id(parameter))
            hook = functools.partial(_tell_the_training_thread, module, evaluations[index])
            hook.__torch_unserializable__ = True  # type: ignore[attr-defined]  # no "will not be serialized" warning
            try:
                handles.append(parameter.register_hook(hook))
            except RuntimeError:
                continue
    return handles


@contextmanager
def _eval_modes_told(held: Sequence[tuple[str, torch.nn.Module]]) -> Iterator[None]:
    """:func:`_eval_modes` of the held modules (label, module) for the block, with another thread that uses them
    meanwhile told so: a thread that calls a submodule kgeval switched to evaluation mode (a trainer training the
    same model), or computes gradients through one's parameters (a trainer whose step calls no module's
    ``forward``), gets one :class:`ModelInUseWarning` per evaluation; and when the block ends, the submodules another
    thread switched back to training mode meanwhile are named to the caller in one warning per held module (some
    scores may have had dropout on). The mode itself is the model's, shared by every thread: kgeval cannot give
    another thread its own. Nothing is hooked for a model that was in evaluation mode already."""
    me = threading.get_ident()
    with _eval_modes([module for _, module in held]) as switched:
        if not switched:
            yield
            return
        evaluations = [_Evaluating(label, me) for label, _ in held]
        watched = [(module, evaluations[index]) for module, index in switched]
        _watch(watched)
        handles = _gradient_hooks(switched, evaluations)
        try:
            yield
            back = [(module, index) for module, index in switched if module.training]
        finally:
            for handle in handles:
                handle.remove()
            _unwatch(watched)
    for index, (label, _) in enumerate(held):
        count = sum(1 for _, owner in back if owner == index)
        if count:
            warn_caller(
                f"kgeval: {count} module(s) of {label} were switched back to training mode during this evaluation "
                "(by another thread), so some of its scores may have had dropout on: evaluate a copy "
                "(copy.deepcopy(model)) while another thread trains the model",
                ModelInUseWarning,
            )


def _watch(watched: Sequence[tuple[torch.nn.Module, _Evaluating]]) -> None:
    """Register each module as held by its evaluation (the global hook is on while any module is)."""
    with _EVALUATING_GUARD:
        for module, evaluation in watched:
            _EVALUATING.setdefault(id(module), []).append(evaluation)
        if _EVALUATING and not _HOOK:
            _HOOK.append(torch.nn.modules.module.register_module_forward_pre_hook(_tell_another_thread))


def _unwatch(watched: Sequence[tuple[torch.nn.Module, _Evaluating]]) -> None:
    """Undo :func:`_watch` (the global hook removed when no module is held any more)."""
    with _EVALUATING_GUARD:
        for module, evaluation in watched:
            others = [other for other in _EVALUATING.get(id(module), []) if other is not evaluation]
            if others:
                _EVALUATING[id(module)] = others
            else:
                _EVALUATING.pop(id(module), None)
        if not _EVALUATING and _HOOK:
            _HOOK.pop().remove()


#: how deep :func:`held_modules` looks through the containers and plain objects a scorer holds
HELD_DEPTH = 4
#: containers longer than this are not searched (a scorer's list of data, not of networks)
HELD_CONTAINER_ITEMS = 1000


def held_modules(model: Any) -> list[tuple[str, torch.nn.Module]]:
    """The torch modules an evaluation of ``model`` holds, with the prefix that names their tensors: the model itself
    when it is a module; else the outermost distinct modules found in what it holds (:func:`_children`: attributes,
    containers, bound methods, partials, closures, class attributes), :data:`HELD_DEPTH` levels deep
    (``"model."``: a plain object holding its network in ``self.model``; ``"parts.0."``, ``"parts.encoder."``,
    ``"inner.net."``, ``"score_t.__self__."`` deeper down). No property and no user code runs (attributes are read
    from instance dictionaries and slots)."""
    return _search(model)[0]


def _search(model: Any) -> tuple[list[tuple[str, torch.nn.Module]], list[str]]:
    """(:func:`held_modules`, the paths of the callables kgeval found but could not look into: objects of a C type
    that hold no readable state, and callables at the depth bound). Both empty for a torch module."""
    if isinstance(model, torch.nn.Module):
        return [("", model)], []
    found: dict[int, tuple[str, torch.nn.Module]] = {}
    unseen: list[str] = []
    _collect_modules(model, "", found, {id(model)}, HELD_DEPTH, unseen)
    inner = {id(sub) for _, module in found.values() for sub in module.modules() if sub is not module}
    return [(prefix, module) for key, (prefix, module) in found.items() if key not in inner], unseen


#: types that hold nothing kgeval looks for (no module can hide in them)
_LEAVES = (type, types.ModuleType, torch.Tensor, str, bytes, bytearray, int, float, complex, bool, range,
           type(None), enum.Enum, torch.dtype, torch.device)  # fmt: skip
#: root packages of callable C types that never hold a torch module (numpy's ufuncs, torch's own functions)
_OPAQUE_BUT_EMPTY = frozenset({"torch", "numpy", "builtins", "operator", "_operator"})


def _key_name(key: Any) -> str:
    """How a path names a dict key, without running user code (no ``repr`` of an arbitrary object)."""
    if isinstance(key, enum.Enum):
        return f"{type(key).__name__}.{key.name}"
    if isinstance(key, (str, int)):
        return str(key)
    if isinstance(key, tuple) and all(isinstance(part, (str, int, float, bool)) for part in key):
        return repr(key)
    return f"<{type(key).__name__}>"


def _function_children(function: types.FunctionType) -> list[tuple[str, Any]]:
    """What a Python function holds: its closure cells (by their variable names), its defaults, the torch modules among
    the globals its code names (a lambda over a module-level network; other globals are not searched: they are the
    program's, not the scorer's) and its own attributes (``functools.wraps``' ``__wrapped__``)."""
    children: list[tuple[str, Any]] = []
    for variable, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=False):
        try:
            children.append((variable, cell.cell_contents))
        except ValueError:  # an empty cell (a variable not bound yet)
            continue
    children += [(f"__defaults__.{i}", value) for i, value in enumerate(function.__defaults__ or ())]
    children += list((function.__kwdefaults__ or {}).items())
    scope = function.__globals__
    children += [(name, scope[name]) for name in function.__code__.co_names
                 if isinstance(scope.get(name), torch.nn.Module)]  # fmt: skip
    children += list(function.__dict__.items())
    return children


def _object_children(value: Any) -> list[tuple[str, Any]] | None:
    """A plain object's instance attributes, its ``__slots__`` attributes, and the torch modules its class (or a base
    class) holds as class attributes; None when it has neither an instance dictionary nor slots."""
    attributes = getattr(value, "__dict__", None)
    children: list[tuple[str, Any]] | None = list(attributes.items()) if isinstance(attributes, dict) else None
    for cls in type(value).__mro__[:-1]:  # not object
        own = vars(cls)
        slots = own.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            descriptor = own.get(slot)
            if isinstance(descriptor, types.MemberDescriptorType):
                children = children if children is not None else []
                try:
                    children.append((slot, descriptor.__get__(value, cls)))
                except AttributeError:  # a slot never set
                    continue
        held = [(name, item) for name, item in own.items() if isinstance(item, torch.nn.Module)]
        if held:
            children = [*(children or []), *held]
    return children


def _children(value: Any) -> tuple[list[tuple[str, Any]], bool]:
    """(name, item) of what ``value`` holds, and whether ``value`` is a callable kgeval cannot look into.

    What is held: a list's, tuple's, set's items; a dict's values (by any hashable key: str, int, Enum, tuple);
    a bound method's ``__self__`` (``types.SimpleNamespace(score_t=net.score_t)``: the network is the method's
    object); a builtin method's object (``[net].copy``); a ``functools.partial``'s function, arguments
    and keywords; a function's closure cells, defaults, the globals it names and its attributes; a weak reference's
    object; a plain object's instance attributes, ``__slots__`` and the modules its class holds. Nothing for leaves
    (tensors, strings, numbers, classes, Python modules) or containers longer than :data:`HELD_CONTAINER_ITEMS`.
    A callable of a C type with no readable state (outside torch, numpy and the standard operators) is reported
    as one kgeval cannot look into."""
    if isinstance(value, _LEAVES):
        return [], False
    if isinstance(value, (list, tuple, set, frozenset)):
        if len(value) > HELD_CONTAINER_ITEMS:
            return [], False
        return [(str(i), item) for i, item in enumerate(value)], False
    if isinstance(value, dict):
        if len(value) > HELD_CONTAINER_ITEMS:
            return [], False
        return [(_key_name(key), item) for key, item in value.items()], False
    if isinstance(value, types.MethodType):
        return [("__self__", value.__self__)], False
    if isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType)):
        return [("__self__", value.__self__)], False
    if isinstance(value, functools.partial):
        arguments = [(f"args.{i}", item) for i, item in enumerate(value.args)]
        return [("func", value.func), *arguments, *value.keywords.items()], False
    if isinstance(value, types.FunctionType):
        return _function_children(value), False
    if isinstance(value, weakref.ref):
        referent = value()
        return ([("()", referent)] if referent is not None else []), False
    children = _object_children(value)
    if children is not None:
        return children, False
    opaque = callable(value) and type(value).__module__.split(".")[0] not in _OPAQUE_BUT_EMPTY
    return [], opaque


def _could_hide_a_module(value: Any) -> bool:
    """Whether a value left unsearched at the depth bound is a callable that holds state a module could hide in: a
    function with a closure or defaults, a bound method, a partial, a callable object (not a class, not a
    module-level function that captures nothing, not torch's and numpy's own functions)."""
    if isinstance(value, types.FunctionType):
        return bool(value.__closure__ or value.__defaults__ or value.__kwdefaults__)
    if isinstance(value, (types.MethodType, functools.partial)):
        return True
    if isinstance(value, (_LEAVES, types.BuiltinFunctionType)) or not callable(value):
        return False
    return type(value).__module__.split(".")[0] not in _OPAQUE_BUT_EMPTY


def _collect_modules(
    value: Any, prefix: str, found: dict[int, tuple[str, torch.nn.Module]], seen: set[int], depth: int,
    unseen: list[str],
) -> None:  # fmt: skip
    """Add to ``found`` (id -> (prefix, module)) the modules ``value`` holds, searched ``depth`` levels down; to
    ``unseen`` the path of each callable kgeval could not look into (:func:`_children`) or reached at the bound."""
    children, opaque = _children(value)
    if opaque:
        unseen.append(prefix[:-1] or "the object itself")
    for key, item in children:
        path = f"{prefix}{key}"
        if isinstance(item, torch.nn.Module):
            found.setdefault(id(item), (f"{path}.", item))
        elif id(item) in seen:
            continue
        elif depth > 1:
            seen.add(id(item))
            _collect_modules(item, f"{path}.", found, seen, depth - 1, unseen)
        elif _could_hide_a_module(item):
            seen.add(id(item))
            unseen.append(path)


def _warn_if_nothing_switched(
    model: Any, modules: list[tuple[str, torch.nn.Module]], unseen: list[str], name: str
) -> None:
    """A UserWarning when ``model`` is not a torch module and kgeval may have left torch modules it computes with in
    training mode: it holds none kgeval can find and has an ``eval`` or ``train`` method of its own (kgeval never
    calls it: it may be the user's own routine, so nothing of the model is put in eval mode); or it holds callables
    kgeval cannot look into (:func:`_children`: a callable object of a C type, a function deeper than
    :data:`HELD_DEPTH` levels), which may hold modules kgeval cannot switch."""
    if isinstance(model, torch.nn.Module):
        return
    if not modules and any(callable(getattr(model, method, None)) for method in ("eval", "train")):
        warn_caller(
            f"kgeval: {name} is not a torch module and holds none kgeval can find (in its attributes, or the lists, "
            "dicts, plain objects, bound methods, partials and closures they hold), so nothing of it was put in eval "
            "mode; kgeval does not call its own eval() (it may be any routine of yours). If it computes with torch "
            "modules (dropout, batch norm), put them in eval mode before evaluating, or hold them in an attribute",
            UserWarning,
        )
        return
    if unseen:
        shown = ", ".join(unseen[:3]) + (f" and {len(unseen) - 3} more" if len(unseen) > 3 else "")
        switched = f"kgeval switched the {len(modules)} it found to eval mode" if modules else "kgeval found none"
        warn_caller(
            f"kgeval: {name} is not a torch module and may hold torch modules kgeval cannot switch to eval mode: it "
            f"holds callables kgeval cannot look into ({shown}: a callable object of a C type, or one more than "
            f"{HELD_DEPTH} levels down; {switched}). If they compute with torch modules (dropout, batch norm), put "
            "them in eval mode before evaluating, or hold the modules in an attribute of the scorer",
            UserWarning,
        )


@contextmanager
def evaluation_mode(model: Any, name: str | None = None, watch: bool = True) -> Iterator[None]:
    """The model as an evaluation holds it, for the block (see the module docstring): evaluation mode, sharded
    parameters gathered, a table whose lookups write refused, any other change to its parameters or buffers
    reported after the block (:class:`kgeval.exceptions.ModelChangedWarning`; not with ``watch=False``, for a probe
    of a few queries beside an evaluation that watches). ``name``: how messages name the model (default: its class,
    with its wrappers).

    Thread safety: evaluations that share any object take turns -- the model handed over, and every torch module of
    the module trees it holds, shared submodules included, are claimed from the mode switch to its restoration
    (:func:`_claimed`) -- so a second thread can neither save the first one's eval mode as the model's own nor switch
    the mode back in the middle of the first one's run, whatever handle each thread holds (the model and
    ``DataParallel(model)``, ``torch.compile(model)`` or a plain object holding it; two models sharing an encoder).
    Evaluations of models that share no module run concurrently; an evaluation may nest inside one in its thread.

    Raises
    ------
    TypeError
        For an embedding table with ``max_norm``, lazy parameters not yet initialised, or a DTensor parameter kgeval
        cannot gather.
    """
    name = name or describe(model)
    modules, unseen = _search(model)
    labels = [name if not prefix else f"{name}.{prefix[:-1]}" for prefix, _ in modules]
    _warn_if_nothing_switched(model, modules, unseen, name)
    for label, (_, module) in zip(labels, modules, strict=True):
        refuse_writing_lookups(module, label)
        refuse_lazy_parameters(module, label)
    claimed = [model, *(sub for _, module in modules for sub in module.modules())]
    with _claimed(claimed), ExitStack() as stack:
        stack.enter_context(_eval_modes_told(list(zip(labels, (module for _, module in modules), strict=True))))
        for label, (_, module) in zip(labels, modules, strict=True):
            stack.enter_context(gathered_parameters(module, label))
            stack.enter_context(recomputed_attributes(module))
            stack.enter_context(original_forwards(module, label))
        watches = [(prefix, module, StateWatch.of(module)) for prefix, module in modules] if watch else []
        yield
        for prefix, module, state in watches:
            state.warn_if_changed(module, name, prefix)
