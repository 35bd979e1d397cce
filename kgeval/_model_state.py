"""Nothing of the user's model changes while kgeval scores it, or the user is told.

- **Tables whose lookups write** (``nn.Embedding`` / ``nn.EmbeddingBag`` with ``max_norm``): every lookup
  renormalises the rows it reads in place, so scoring the model would change it, and its scores -- and ranks --
  would depend on the order kgeval scores the tasks in (``torch.embedding_renorm_`` is not even idempotent: a row
  at the bound moves by an ulp at each lookup). Such a model is refused before anything is scored
  (:func:`refuse_writing_lookups`); :func:`without_max_norm` gives the copy to evaluate instead.
- **Lazy parameters not yet initialised** (``nn.LazyLinear`` before its first forward): the first scoring call
  would create them inside kgeval's ``torch.inference_mode`` -- inference tensors, which the model could never
  train afterwards. Refused before anything is scored (:func:`refuse_lazy_parameters`).
- **Anything else** (a scoring method that writes a buffer or a parameter in place, or replaces one): every
  parameter and buffer is recorded before the evaluation -- the tensor object, its version counter, which every
  in-place write bumps, inside ``torch.inference_mode`` too (an inference tensor has none), and a checksum of its
  content (:func:`content_checksum`; a tensor subclass's through a plain alias of its storage), which sees the
  writes through ``.data`` that bump no version counter -- and compared after it (:class:`StateWatch`; the
  checksums on their device, read back once); a change is reported in one
  :class:`kgeval.exceptions.ModelChangedWarning` naming the tensors.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from kgeval.exceptions import ModelChangedWarning, warn_caller

__all__ = ["StateWatch", "content_checksum", "refuse_lazy_parameters", "refuse_writing_lookups", "without_max_norm"]

_LOOKUP_TABLES = (torch.nn.Embedding, torch.nn.EmbeddingBag)


def _writing_lookups(model: Any) -> list[tuple[str, torch.nn.Embedding | torch.nn.EmbeddingBag]]:
    """(path, module) of every embedding table of ``model`` whose lookups renormalise rows in place."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [(path, module) for path, module in model.named_modules()
            if isinstance(module, _LOOKUP_TABLES) and module.max_norm is not None]  # fmt: skip


def refuse_writing_lookups(model: Any, name: str) -> None:
    """TypeError, before anything is scored, when ``model`` holds an embedding table with ``max_norm``.

    ``name``: how the message names the model."""
    tables = _writing_lookups(model)
    if not tables:
        return
    path, table = tables[0]
    where = f".{path}" if path else ""
    more = f" (and {len(tables) - 1} more table(s))" if len(tables) > 1 else ""
    raise TypeError(
        f"{name}{where} is an nn.{type(table).__name__} with max_norm={table.max_norm}{more}: each of its lookups "
        "renormalises the rows it reads in place, so scoring the model would change it, and its ranks would depend "
        "on the order the tasks are scored in (two evaluations would give two results). Evaluate "
        "kgeval.adapters.without_max_norm(model) instead: a copy whose tables are renormalised once and looked up "
        "without max_norm (the model itself is left as it is)"
    )


def refuse_lazy_parameters(model: Any, name: str) -> None:
    """TypeError, before anything is scored, when ``model`` has a lazy parameter not yet initialised."""
    if not isinstance(model, torch.nn.Module):
        return
    lazy = [path for path, tensor in [*model.named_parameters(), *model.named_buffers()]
            if torch.nn.parameter.is_lazy(tensor)]  # fmt: skip
    if lazy:
        raise TypeError(
            f"{name} has lazy parameters that are not initialised yet ({', '.join(lazy[:3])}): its first call would "
            "create them inside kgeval's torch.inference_mode, as tensors it could never train afterwards. Run one "
            "forward pass (or training step) first"
        )


def without_max_norm(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``model`` in which every embedding table with ``max_norm`` has had every row renormalised
    once (``torch.embedding_renorm_``, what a lookup of the row does) and is looked up without ``max_norm`` from
    then on: scoring the copy writes nothing, and gives each entity the vector a lookup of the original returns.
    ``model`` is not changed.

    A model that reads a table's ``weight`` directly as well as through lookups (e.g. every entity as a candidate)
    is scored with renormalised rows in both places by the copy; the original would mix them, row by row, as its
    lookups had touched them.
    """
    frozen = copy.deepcopy(model)
    for _, table in _writing_lookups(frozen):
        assert table.max_norm is not None  # what makes it a writing lookup
        with torch.no_grad():
            rows = torch.arange(table.weight.shape[0], device=table.weight.device)
            torch.embedding_renorm_(table.weight, rows, table.max_norm, table.norm_type)
        table.max_norm = None
    return frozen


def _named_state(model: Any) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of ``model`` (a torch module) by its path; empty for other objects."""
    if not isinstance(model, torch.nn.Module):
        return {}
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def _version(tensor: torch.Tensor) -> int | None:
    """The tensor's version counter; None for an inference tensor, which has none."""
    return None if tensor.is_inference() else tensor._version


#: the integer dtype of each element size: a tensor's bits are summed as integers of its width
_BITS_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

#: elements of a tensor widened to int64 at once while its checksum is computed (bounds the temporary memory)
CHECKSUM_BLOCK_ELEMENTS = 2**22

#: int64 constants of the checksum's weights (a multiplicative hash of the position; any odd weights would do)
_HASH_MULTIPLIER, _HASH_MIXER = 0x9E3779B97F4A7C15 - 2**64, 0x5851F42D4C957F2D


def _plain(tensor: torch.Tensor) -> torch.Tensor | None:
    """``tensor`` as a plain ``torch.Tensor`` sharing its memory: itself for a plain tensor or parameter; for a
    subclass that keeps its data in its own storage (a ``torch.Tensor`` subclass overriding ``__torch_function__``
    only, and a parameter of one) an alias of that storage, which sees every write to it -- through ``.data`` too;
    None for a subclass that overrides ``__torch_dispatch__`` (a wrapper such as a DTensor: its storage is not its
    data)."""
    kind = type(tensor)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return tensor
    if getattr(kind, "__torch_dispatch__", None) is not torch.Tensor.__torch_dispatch__:
        data = tensor.data  # a parameter of a wrapper class whose data is plain
        return data if type(data) is torch.Tensor else None
    return torch.Tensor.as_subclass(tensor, torch.Tensor)


def _bits(tensor: torch.Tensor) -> torch.Tensor | None:
    """The tensor's bits as a 2-d integer tensor of its element width ((rows, elements per row); a view, copied
    only when the tensor's strides do not allow a 2-d view); None where kgeval reads no content (a sparse or meta
    tensor, or a wrapper subclass -- a DTensor, say). A subclass that keeps its data in its own storage is read
    through a plain alias of it (:func:`_plain`)."""
    if tensor.layout != torch.strided or tensor.is_meta:
        return None
    with torch.no_grad():  # integer views of the data, tracking no gradient
        plain = _plain(tensor)
        if plain is None:
            return None
        plain = torch.view_as_real(plain) if plain.is_complex() else plain
        integer = _BITS_DTYPES.get(plain.element_size())
        if integer is None:
            return None
        bits = plain if plain.dtype == integer else plain.view(integer)
        if bits.dim() == 2:
            return bits
        rows = bits.shape[0] if bits.dim() else 1
        return bits.reshape(rows, bits.numel() // rows if rows else 0)  # (0, -1) is ambiguous for an empty tensor


def odd_weights(length: int, device: torch.device) -> torch.Tensor:
    """(length,) odd int64 weights, a hash of the position: an odd weight times any nonzero change of one element
    below 2**64 is nonzero modulo 2**64. One vector serves every tensor's columns and rows (its prefixes), so a
    watch computes it once (:class:`Checksums`)."""
    weights = torch.arange(length, dtype=torch.int64, device=device) * _HASH_MULTIPLIER
    weights = (weights ^ (weights >> 29)) * _HASH_MIXER
    return weights | 1


@dataclass(frozen=True)
class ContentChecksum:
    """What the content checksum of one tensor reads (:func:`content_checksum`): its bits as a 2-d integer view --
    read again, the view sees the tensor's content then -- and the odd weights of its columns (in the bits' dtype)
    and of its rows, made once, so that a checksum taken again costs three ATen ops (one block) or three per
    block."""

    tensor: torch.Tensor
    bits: torch.Tensor
    column_weights: torch.Tensor
    row_weights: torch.Tensor
    #: whether ``bits`` shares the tensor's memory (else it is a copy, made again at each reading)
    is_view: bool

    @classmethod
    def of(cls, tensor: torch.Tensor, weights: torch.Tensor | None = None) -> ContentChecksum | None:
        """None where :func:`_bits` reads no content. ``weights``: :func:`odd_weights` on the tensor's device, at
        least as long as its rows and its columns (computed here when not given)."""
        bits = _bits(tensor)
        if bits is None:
            return None
        rows, width = bits.shape
        if weights is None:
            weights = odd_weights(max(rows, width), bits.device)
        is_view = bits.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
        return cls(tensor, bits, weights[:width].to(bits.dtype), weights[:rows], is_view)  # wraps: still odd

    def value(self) -> torch.Tensor:
        """The checksum now: a 0-d int64 tensor on the tensor's device (nothing read to the host)."""
        bits = self.bits if self.is_view else _bits(self.tensor)
        assert bits is not None  # the same tensor as when the checksum was made
        rows, width = bits.shape
        step = max(1, CHECKSUM_BLOCK_ELEMENTS // max(1, width))
        if rows <= step:  # one block: the common case, in the fewest ops
            return torch.dot(_row_sums(bits, self.column_weights).to(torch.int64), self.row_weights)
        total = torch.zeros((), dtype=torch.int64, device=bits.device)
        for start in range(0, rows, step):
            row_sums = _row_sums(bits[start : start + step], self.column_weights).to(torch.int64)
            total += torch.dot(row_sums, self.row_weights[start : start + row_sums.shape[0]])
        return total


def content_checksum(tensor: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor | None:
    """A 0-d int64 tensor on the tensor's device: a sum of each element's bits (an integer of its width) times an
    odd weight of its column, modulo 2**width per row, and of the row sums times an odd weight of their row,
    modulo 2**64; None where :func:`_bits` reads no content. ``weights``: :func:`odd_weights` on the tensor's
    device, at least as long as its rows and its columns (computed here when not given).

    Integer sums are exact and do not depend on the order they are summed in (threads, kernels, devices), so an
    unchanged tensor gives the same checksum every time, and a change of any one element always changes it (an
    odd weight times a nonzero change is nonzero modulo a power of two); a change of several elements goes unseen
    with a probability of about 2**-width. Nothing is read to the host: the caller compares checksums on the device
    and reads the verdict once (:meth:`StateWatch.changed`). On the CPU each row sum is one integer matrix-vector
    product over the table in place (about 2 ms for a 14,541 x 200 float32 table); elsewhere the products are
    formed per block of :data:`CHECKSUM_BLOCK_ELEMENTS`. A watch keeps the :class:`ContentChecksum` to take it
    again."""
    made = ContentChecksum.of(tensor, weights)
    return None if made is None else made.value()


def _row_sums(block: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """(rows,) sums of ``block`` (rows, width) times ``weights`` (width,), integers of the block's dtype (wrapping)
    on the CPU, where the integer matrix-vector product reads the block once; on other devices (no integer
    matrix-vector product there) the products are formed and summed in int64."""
    if block.device.type == "cpu":
        return torch.mv(block, weights)
    return (block * weights).sum(dim=1)


@dataclass(frozen=True)
class StateWatch:
    """The parameters and buffers of a model when the watch began: each path's tensor object, version and content
    checksum (:func:`content_checksum`; None where it has none)."""

    recorded: dict[str, tuple[torch.Tensor, int | None, tuple[ContentChecksum, torch.Tensor] | None]]

    @classmethod
    def of(cls, model: Any) -> StateWatch:
        state = _named_state(model)
        weights = _weights_by_device(state.values())
        recorded = {}
        for path, tensor in state.items():
            checksum = ContentChecksum.of(tensor, weights.get(tensor.device))
            recorded[path] = (tensor, _version(tensor), None if checksum is None else (checksum, checksum.value()))
        return cls(recorded)

    def changed(self, model: Any) -> list[str]:
        """The paths whose tensor was written in place (its version counter or its content changed: a write
        through ``.data`` bumps no version counter), replaced, added or removed since the watch began. The contents
        are compared on their devices and read back once per device."""
        now = _named_state(model)
        replaced = {path for path, (tensor, version, _) in self.recorded.items()
                    if now.get(path) is not tensor or _version(tensor) != version}  # fmt: skip
        rewritten = _rewritten({path: checksum for path, (_, _, checksum) in self.recorded.items()
                                if path not in replaced and checksum is not None})  # fmt: skip
        paths = [path for path in self.recorded if path in replaced or path in rewritten]
        return paths + [path for path in now if path not in self.recorded]

    def warn_if_changed(self, model: Any, name: str, prefix: str = "") -> None:
        """A :class:`kgeval.exceptions.ModelChangedWarning` naming what changed (``prefix`` before each path), if
        anything did."""
        changed = [prefix + path for path in self.changed(model)]
        if not changed:
            return
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        warn_caller(
            f"kgeval: {name} changed its own state while it was scored ({shown}: written in place or replaced): "
            "its scores may depend on the order the tasks were scored in, so these ranks may not be reproducible. "
            "Make its scoring methods free of side effects (no in-place writes to parameters or buffers), or "
            "evaluate a copy (copy.deepcopy(model)); a cache filled once and read the same way after is harmless "
            "(warnings.filterwarnings('ignore', category=kgeval.exceptions.ModelChangedWarning))",
            ModelChangedWarning,
        )


def _weights_by_device(tensors: Iterable[torch.Tensor]) -> dict[torch.device, torch.Tensor]:
    """:func:`odd_weights` on each device of ``tensors``, as long as the longest row count or row width of the
    tensors there whose content is checksummed (:func:`_bits`)."""
    lengths: dict[torch.device, int] = {}
    for tensor in tensors:
        bits = _bits(tensor)
        if bits is not None:
            lengths[bits.device] = max(lengths.get(bits.device, 0), *bits.shape)
    return {device: odd_weights(length, device) for device, length in lengths.items()}


def _rewritten(recorded: dict[str, tuple[ContentChecksum, torch.Tensor]]) -> set[str]:
    """The paths among ``recorded`` (path -> (its checksum, the value when the watch began)) whose content
    checksum differs now: compared on each device, one read to the host per device."""
    by_device: dict[torch.device, list[tuple[str, torch.Tensor, torch.Tensor]]] = {}
    for path, (checksum, before) in recorded.items():
        by_device.setdefault(before.device, []).append((path, before, checksum.value()))
    changed: set[str] = set()
    for entries in by_device.values():
        differs = torch.stack([before for _, before, _ in entries]) != torch.stack([after for *_, after in entries])
        changed.update(path for (path, *_), flag in zip(entries, differs.tolist(), strict=True) if flag)
    return changed
