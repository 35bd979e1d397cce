"""Content fingerprints of what an evaluation's numbers depend on -- a model (its tensors and its plain settings,
and a summary of what it scores: :class:`ScoreSignature`), a function given as ``score_fn`` (its code and what its
closure holds) -- for the resumable progress files
(kgeval._engine.resume) and the agreement of a distributed evaluation's ranks (kgeval._inputs). A leaf module
(torch and the standard library only), read by kgeval._inputs and by the engine, which imports kgeval._inputs."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "ScoreSignature",
    "callable_fingerprint",
    "dataset_content_fingerprint",
    "model_fingerprint",
    "model_settings",
    "settings_fingerprint",
    "value_fingerprint",
    "view_settings",
]

#: bytes hashed per step when fingerprinting a tensor
HASH_CHUNK = 2**26


def model_fingerprint(model: Any) -> dict[str, Any]:
    """The class of ``model`` and a hash of every tensor of its ``state_dict`` and of its non-persistent buffers
    (name, dtype, shape, bytes); an object without a ``state_dict`` is described by its class only. Its plain
    settings are :func:`model_settings`."""
    description: dict[str, Any] = {"class": f"{type(model).__module__}.{type(model).__qualname__}"}
    state_dict = getattr(model, "state_dict", None)
    if callable(state_dict):
        digest = hashlib.blake2b(digest_size=16)
        tensors = dict(state_dict())
        if isinstance(model, torch.nn.Module):  # a non-persistent buffer (an inference graph's profile) counts too
            tensors.update((f"{name}[buffer]", buffer) for name, buffer in model.named_buffers() if name not in tensors)
        for name, tensor in tensors.items():
            if isinstance(tensor, torch.Tensor):
                digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
                _hash_tensor(digest, tensor)
        description["weights"] = digest.hexdigest()
    return description


def model_settings(model: Any) -> dict[str, str]:
    """The plain attributes (numbers, strings, booleans, None and tuples / lists of them; names not starting with
    "_") of ``model`` and of each of its submodules, by path (``"p"``, ``"encoder.depth"``) -> repr: the settings
    that change a model's scores as much as its weights do (TransE's ``p``, a baseline's ``decay``) -- and, alike to
    Python, counters a model keeps."""
    if isinstance(model, torch.nn.Module):
        objects = list(model.named_modules())
    else:  # an object holding modules (a wrapper of a training loop): itself, then the modules it holds
        held = [(name, value) for name, value in sorted(getattr(model, "__dict__", {}).items())
                if not name.startswith("_") and isinstance(value, torch.nn.Module)]  # fmt: skip
        objects = [("", model)] + [(f"{name}.{path}" if path else name, part)
                                   for name, module in held for path, part in module.named_modules()]  # fmt: skip
    return {f"{path}.{name}" if path else name: value for path, part in objects
            for name, value in _plain_attributes(part).items() if name != "training"}  # fmt: skip


def settings_fingerprint(obj: Any) -> str:
    """A hash of :func:`model_settings` of ``obj``."""
    digest = hashlib.blake2b(digest_size=16)
    for name, value in model_settings(obj).items():
        digest.update(f"{name}={value};".encode())
    return digest.hexdigest()


def view_settings(view: Any, model: Any) -> str | None:
    """A hash of the plain attributes of the object kgeval scores ``model`` through, where that is one of kgeval's
    adapters (a temporal model's view, with its inverse relations; an inductive mode's binding), not the model's
    own: they are kgeval's settings, fixed for the call. None where the model is scored as it is."""
    if view is model or not type(view).__module__.startswith("kgeval."):
        return None
    digest = hashlib.blake2b(digest_size=16)
    for name, value in _plain_attributes(view).items():
        digest.update(f"{name}={value};".encode())
    return f"{type(view).__module__}.{type(view).__qualname__}:{digest.hexdigest()}"


def _plain_attributes(obj: Any) -> dict[str, str]:
    """name -> repr of the attributes of ``obj`` itself (not of what it holds) that are plain values
    (:func:`_plain`) and whose names do not start with "_", by name."""
    return {name: repr(value) for name, value in sorted(getattr(obj, "__dict__", {}).items())
            if not name.startswith("_") and _plain(value)}  # fmt: skip


def _plain(value: Any) -> bool:
    if isinstance(value, tuple | list):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, bool | int | float | str)


def dataset_content_fingerprint(dataset: Any) -> str:
    """A hash of what a dataset object holds that an evaluation reads: its class, and each of its dataclass fields
    (or attributes) that is a tensor (name, dtype, shape, bytes: the triples of every split and graph, in ids) or a
    label -> id map (name, sorted pairs). Its name, the files it was read from and its notes count not: the same
    contents read from another folder give the same hash; one changed triple, or one label given another id, does
    not. Works for every kind of kgeval dataset (triples, inductive, fully inductive, temporal)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{type(dataset).__module__}.{type(dataset).__qualname__};".encode())
    if dataclasses.is_dataclass(dataset):  # the fields only: a cached view (a graph built on demand) counts not
        items = sorted((f.name, getattr(dataset, f.name)) for f in dataclasses.fields(dataset))
    else:
        items = sorted(getattr(dataset, "__dict__", {}).items())
    for name, value in items:
        if isinstance(value, torch.Tensor):
            digest.update(f"{name}:{value.dtype}:{tuple(value.shape)};".encode())
            _hash_tensor(digest, value)
        elif isinstance(value, Mapping) and value and all(
                isinstance(k, str) and isinstance(v, int) for k, v in value.items()):  # fmt: skip
            digest.update(f"{name}:{sorted(value.items())!r};".encode())
    return digest.hexdigest()


def callable_fingerprint(function: Any, depth: int = 0) -> str:
    """A hash of what a function computes as far as Python shows it: its module, name and bytecode (with constants and
    names), its defaults, and the values its closure holds (tensors by content, models by :func:`model_fingerprint`,
    other functions recursively); a ``functools.partial`` by its function and arguments, a bound method by its
    function and object, another callable by its class and settings. Two closures of one factory that hold other
    values (a sign, a scale) differ; one name alone would not tell them apart."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_describe(function, depth).encode())
    return digest.hexdigest()


def value_fingerprint(value: Any) -> str:
    """A hash of a value as :func:`callable_fingerprint` describes what a closure holds: tensors by content, models
    by :func:`model_fingerprint`, functions by their code, plain values by their repr."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_describe(value, 0).encode())
    return digest.hexdigest()


def _describe(value: Any, depth: int) -> str:
    """A text that changes with what ``value`` computes or holds (see :func:`callable_fingerprint`)."""
    if depth > 4:
        return type(value).__qualname__
    if isinstance(value, torch.Tensor):
        digest = hashlib.blake2b(digest_size=16)
        _hash_tensor(digest, value)
        return f"tensor({value.dtype},{tuple(value.shape)},{digest.hexdigest()})"
    if isinstance(value, torch.nn.Module):
        return repr(model_fingerprint(value))
    if _plain(value):
        return repr(value)
    if isinstance(value, functools.partial):
        arguments = [_describe(item, depth + 1) for item in value.args]
        keywords = [f"{key}={_describe(item, depth + 1)}" for key, item in sorted(value.keywords.items())]
        return f"partial({_describe(value.func, depth + 1)},{arguments},{keywords})"
    if inspect.ismethod(value):
        return f"method({_describe(value.__func__, depth + 1)},{_describe(value.__self__, depth + 1)})"
    code = getattr(value, "__code__", None)
    if code is not None:
        cells = [_describe(cell.cell_contents, depth + 1) for cell in (value.__closure__ or ())
                 if _has_contents(cell)]  # fmt: skip
        defaults = [_describe(item, depth + 1) for item in (value.__defaults__ or ())]
        return (f"function({value.__module__}.{value.__qualname__},{code.co_code.hex()},{code.co_consts!r},"
                f"{code.co_names!r},{defaults},{cells})")  # fmt: skip
    return f"{type(value).__module__}.{type(value).__qualname__}({settings_fingerprint(value)})"


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _hash_tensor(digest: Any, tensor: torch.Tensor) -> None:
    data = tensor.detach().contiguous().reshape(-1)
    if data.numel() == 0:
        return
    raw = data.view(torch.uint8) if data.dtype != torch.bool else data.to(torch.uint8)
    for start in range(0, raw.numel(), HASH_CHUNK):
        digest.update(raw[start : start + HASH_CHUNK].cpu().numpy().tobytes())


#: the most candidates of one probe row a :class:`ScoreSignature` reads (the first and the last half of them)
SIGNATURE_CANDIDATES = 2**16
#: random +-1 projections of each probe row a :class:`ScoreSignature` keeps
SIGNATURE_PROJECTIONS = 4
#: how far two signatures' projections may differ, relative to their rows' root mean square, and still be the scores
#: of one model: float32 rounding of another kernel, thread count or batch blocking stays orders of magnitude below
SIGNATURE_TOLERANCE = 1e-5
#: for scores of a coarser dtype (float16, bfloat16), the tolerance is this many of its machine epsilons instead
#: (a one-ulp change of a bfloat16 score moves the projections by ~1e-3 of the RMS; a retrained model by far more)
SIGNATURE_EPSILONS = 4


@dataclasses.dataclass(frozen=True)
class ScoreSignature:
    """What a model scores, in a few numbers: a summary of its own scores of a fixed probe (the first queries of an
    evaluation's triples, each side, against all candidates or the first and last :data:`SIGNATURE_CANDIDATES` /
    2 of them; kgeval._engine.identity scores them). Where kgeval reuses or combines results across calls,
    processes or ranks (a resumed progress file, ``evaluate_many``'s result files, the ranks of a distributed
    evaluation) it compares signatures beside the weight digest: a model whose scoring state is not in its
    ``state_dict`` (a plain object holding a module, tensor attributes, a factory, a closure) is "the same" model
    only when it scores the probe the same.

    ``rows``: per probe row, ``(side, the scores' dtype, number of candidates, +inf count, -inf count, NaN count,
    root mean square of the finite scores, then SIGNATURE_PROJECTIONS projections onto fixed random +-1 vectors /
    sqrt(n))``. Two signatures agree when side, dtype and every count are equal and the RMS and projections differ
    by at most a tolerance times the larger RMS -- :data:`SIGNATURE_TOLERANCE` (1e-5), or for a dtype coarser than
    float32 :data:`SIGNATURE_EPSILONS` of its machine epsilons (bfloat16: 0.031, float16: 0.0039): a change of any
    one score by more than about ``tolerance * sqrt(n)`` RMS, or a small change of many, is seen; the rounding of
    the scores' dtype is not.
    """

    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of_scores(cls, rows: Sequence[tuple[str, torch.Tensor]]) -> ScoreSignature:
        """The signature of ``rows``: (side, scores of shape (queries, candidates)) in probe order."""
        summary = []
        for side, scores in rows:
            table = scores.detach().to(device="cpu", dtype=torch.float64)
            width = table.shape[1]
            signs = _projection_signs(width)
            dtype = str(scores.dtype).removeprefix("torch.")
            for row in table:
                finite = torch.isfinite(row)
                values = torch.where(finite, row, torch.zeros((), dtype=torch.float64))
                count = max(1, int(finite.sum()))
                rms = float(values.square().sum().div(count).sqrt())
                projections = (signs @ values / max(1.0, width**0.5)).tolist()
                infinite = (int((row == float("inf")).sum()), int((row == float("-inf")).sum()), int(row.isnan().sum()))
                summary.append((side, dtype, width, *infinite, rms, *projections))
        return cls(tuple(summary))

    def to_plain(self) -> list[list[Any]]:
        """The signature as JSON values (and back with :meth:`from_plain`)."""
        return [list(row) for row in self.rows]

    @classmethod
    def from_plain(cls, value: Any) -> ScoreSignature | None:
        """The signature :meth:`to_plain` wrote; None for anything else (an older file has none)."""
        if not isinstance(value, list | tuple) or not all(isinstance(row, list | tuple) for row in value):
            return None
        return cls(tuple(tuple(row) for row in value))

    def difference(self, other: ScoreSignature | None) -> str | None:
        """In words, how ``other``'s probe scores differ from these (None when they agree, see the class)."""
        if other is None:
            return "no probe scores were recorded"
        if len(self.rows) != len(other.rows):
            return f"{len(other.rows)} probe rows against {len(self.rows)}"
        for number, (mine, theirs) in enumerate(zip(self.rows, other.rows, strict=True)):
            if len(mine) != len(theirs) or tuple(mine[:6]) != tuple(theirs[:6]):
                return f"probe row {number} has other candidates, another dtype or other non-finite scores"
            scale = max(abs(float(mine[6])), abs(float(theirs[6])), 1e-30)
            gap = max(abs(float(a) - float(b)) for a, b in zip(mine[6:], theirs[6:], strict=True))
            if not gap <= _tolerance(str(mine[1])) * scale:
                return (f"the {mine[0]} scores of probe query {number} differ (by {gap / scale:.2e} of their root "
                        "mean square)")  # fmt: skip
        return None


@functools.lru_cache(maxsize=8)
def _projection_signs(width: int) -> torch.Tensor:
    """(SIGNATURE_PROJECTIONS, width) float64 +-1 on the CPU, drawn from a generator seeded with ``width``: the same
    in every process (made with an explicit device and dtype, whatever the caller's defaults, and cached per width:
    at most 8 x 4 x 65,536 float64, 16 MiB)."""
    with torch.inference_mode(False):  # an ordinary tensor, usable after the caller's inference mode
        generator = torch.Generator(device="cpu").manual_seed(width)
        signs = torch.randint(0, 2, (SIGNATURE_PROJECTIONS, width), generator=generator, device="cpu")
        return (signs * 2 - 1).to(torch.float64)


def _tolerance(dtype: str) -> float:
    """The relative tolerance of two signatures of scores of ``dtype`` (a name such as "float32"; see
    :class:`ScoreSignature`)."""
    kind = getattr(torch, dtype, None)
    if not isinstance(kind, torch.dtype) or not kind.is_floating_point:
        return SIGNATURE_TOLERANCE
    return max(SIGNATURE_TOLERANCE, SIGNATURE_EPSILONS * torch.finfo(kind).eps)
