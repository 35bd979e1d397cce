"""Where a model lives (:func:`model_device`), for the views and the evaluation's boundary, and when two names of a
device name the same one (:func:`canonical_device`, :func:`same_device`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["canonical_device", "model_device", "random_state_kept", "same_device"]

#: the methods a probe may call, with the width of the id batch each takes (PyKEEN's names)
PROBED_METHODS: tuple[tuple[str, int], ...] = (("score_t", 2), ("score_h", 2), ("score_r", 2), ("score_hrt", 3))
#: tensor functions that read a tensor's metadata, never its values: a meta tensor passed to them is not read
METADATA_FUNCTIONS = frozenset({
    "__get__", "__len__", "__hash__", "__format__", "__repr__", "dim", "ndimension", "numel", "nelement", "size",
    "stride", "element_size", "is_complex", "is_contiguous", "is_floating_point", "storage_offset", "get_device",
})  # fmt: skip

_PROBING = threading.local()  #: ``active``: a probe runs in this thread (a model_device call inside it probes nothing)


def canonical_device(device: torch.device | str) -> torch.device:
    """``device`` as the tensors on it name it: the CPU (and meta) without an index -- ``"cpu:0"`` and
    ``torch.device("cpu", 0)`` are ``cpu``, where ``.to("cpu:0")`` puts a tensor -- and an accelerator named without
    an index (``"cuda"``) as the current device of its type (``cuda:1`` after ``torch.cuda.set_device(1)``),
    where ``.to("cuda")`` puts it; left without an index when no device of that type is available here."""
    device = torch.device(device)
    if device.type in ("cpu", "meta"):
        return torch.device(device.type)
    if device.index is None:
        index = _current_index(device.type)
        if index is not None:
            return torch.device(device.type, index)
    return device


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """Whether ``a`` and ``b`` may name one device: the same type and, for types other than the CPU and meta, the
    same index -- an accelerator named without an index (``"cuda"``, PyKEEN's usual ``device``) names its type and
    matches every index of it: kgeval evaluates where the model is and never moves it, so a model on ``cuda:1``
    under ``device="cuda"`` (DDP code that never calls ``set_device``) is evaluated there."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    return a.type in ("cpu", "meta") or a.index is None or b.index is None or a.index == b.index


def _current_index(device_type: str) -> int | None:
    """The index of the current device of ``device_type`` (``torch.cuda.current_device()`` for CUDA), or None when
    no device of that type is available here."""
    backend = getattr(torch, device_type, None)
    try:
        if backend is None or not backend.is_available():
            return None
        return int(backend.current_device())
    except (AttributeError, RuntimeError, TypeError, ValueError):  # a backend without a notion of a current device
        return None


def model_device(model: Any) -> torch.device:
    """The device a model scores on: ``model.device`` where set (a view's); else the device of the tensors it
    scores with -- the first of its parameters, then buffers, then plain tensor attributes of a module and its
    submodules (in lists, tuples and dict values one level down too), that is not on the meta device; the CPU for
    a model without tensors (a non-module scorer without ``parameters()``).

    A model also holding meta-device tensors is evaluated where its other tensors are, unless a probe shows it
    reads them: torch.func's ensembling recipe holds a ``base`` module on the meta device that it never reads
    (``functional_call`` substitutes the stacked weights). The probe -- one scoring call of one query of id 0 on
    that device, without gradients, the random number generators' states restored, watching every tensor
    function it calls -- runs where the model is in evaluation mode (so it changes nothing a training mode
    would: batch-norm statistics), or where the model holds no tensor off the meta device (then the scores'
    device is its device). It returns the meta device -- refused at the boundary with the advice to load the
    weights -- when the model holds meta tensors only and no probe shows it scores without them, or when the
    probe's scores are on the meta device, a tensor function read a meta tensor, or it failed for one."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device | str):
        return canonical_device(device)
    found: torch.device | None = None
    holds_meta = False
    for tensor in _held_tensors(model):
        if tensor.is_meta:
            holds_meta = True
        elif found is None:
            found = tensor.device
        if found is not None and holds_meta:
            break
    if not holds_meta or getattr(_PROBING, "active", False):
        return canonical_device(found) if found is not None else torch.device("meta" if holds_meta else "cpu")
    if found is not None and not _in_evaluation_mode(model):
        return canonical_device(found)
    verdict = _probe(model, canonical_device(found) if found is not None else torch.device("cpu"))
    if verdict == "reads meta":
        return torch.device("meta")
    if found is not None:
        return canonical_device(found)
    return canonical_device(verdict) if isinstance(verdict, torch.device) else torch.device("meta")


def _held_tensors(model: Any) -> Iterator[torch.Tensor]:
    """The tensors a model holds, in :func:`model_device`'s order: parameters, buffers, then (for a module) the
    plain tensor attributes of it and its submodules, also inside the lists, tuples and dicts they hold."""
    for name in ("parameters", "buffers"):
        method = getattr(model, name, None)
        if callable(method):
            yield from method()
    if isinstance(model, torch.nn.Module):
        for module in model.modules():
            for value in vars(module).values():
                if isinstance(value, torch.Tensor):
                    yield value
                elif isinstance(value, list | tuple | dict):
                    items = value.values() if isinstance(value, dict) else value
                    yield from (item for item in items if isinstance(item, torch.Tensor))


def _in_evaluation_mode(model: Any) -> bool:
    """Whether ``model`` and every submodule are in evaluation mode (True for a non-module)."""
    modules = model.modules() if isinstance(model, torch.nn.Module) else ()
    return not any(module.training for module in modules)


class _MetaReads(TorchFunctionMode):
    """Records the tensor functions called with a meta tensor among their arguments (metadata queries excepted):
    a function that reads a meta tensor computes nothing (some, like a CPU-by-meta matmul, return a CPU tensor of
    uninitialised memory)."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in METADATA_FUNCTIONS and any(_holds_meta(value) for value in (*args, *kwargs.values())):
            self.read.append(name or repr(func))
        return func(*args, **kwargs)


def _holds_meta(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_meta
    if isinstance(value, list | tuple):
        return any(_holds_meta(item) for item in value)
    return False


def _probe(model: Any, device: torch.device) -> torch.device | str | None:
    """One scoring call of ``model`` (its first method of :data:`PROBED_METHODS`) on ids on ``device``: the
    scores' device when it computed them without reading a meta tensor; ``"reads meta"`` when its scores are on
    the meta device, a tensor function read a meta tensor, or it raised an error naming the meta device; None when
    the model has none of the methods, or the call failed for another reason (the evaluation reports that one)."""
    probed = [(getattr(model, name), width) for name, width in PROBED_METHODS if callable(getattr(model, name, None))]
    if not probed:
        return None
    method, width = probed[0]
    _PROBING.active = True
    watch = _MetaReads()
    try:
        with random_state_kept(device), torch.no_grad(), watch:
            scores = method(torch.zeros((1, width), dtype=torch.long, device=device))
    except Exception as error:  # the evaluation will call it again, and report the error there
        message = str(error).lower()
        return "reads meta" if "meta tensor" in message or "'meta'" in message or "meta device" in message else None
    finally:
        _PROBING.active = False
    if not isinstance(scores, torch.Tensor):
        return None
    return "reads meta" if scores.is_meta or watch.read else scores.device


@contextlib.contextmanager
def random_state_kept(device: torch.device) -> Iterator[None]:
    """The CPU's random number generator (and ``device``'s: for an accelerator named without an index, its current
    one) as they were before the block: a model that draws random numbers while a probe scores it does not move the
    caller's stream."""
    index = None
    if device.type not in ("cpu", "meta"):
        index = device.index if device.index is not None else _current_index(device.type)
    if index is None:
        with torch.random.fork_rng(devices=[]):
            yield
        return
    with torch.random.fork_rng(devices=[index], device_type=device.type):
        yield
