"""What kgeval has established about a tensor -- that its ids are in range, its content's digest -- kept while the
tensor is unchanged (:class:`TensorMemo`).

An evaluation called every epoch with the same filter triples would otherwise check, hash and (on a GPU) upload
them on every call: on FB15k-237 (310,116 known triples) that is ~11 ms of a 31 ms evaluation of 10 test triples
on the developers' CPU, and a copy to and from the device on a GPU (benchmarks/fixed_cost.py).

A tensor is "unchanged" while it is the same object with the same version counter (bumped by every in-place
write through torch, inside ``torch.inference_mode`` too), data pointer, shape, strides, dtype and device. A write
that bypasses the version counter -- through ``tensor.numpy()``, ``tensor.data`` or DLPack -- is not seen: pass
a new tensor after such a write. Inference tensors have no version counter and are never memoised. A fact is a
small value (a flag, a digest), never the tensor itself: the memo holds tensors only weakly, and keeps none alive.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import torch

__all__ = ["TensorMemo", "memo"]

T = TypeVar("T")

#: entries kept (least recently used dropped first): a few filter tensors per evaluator, a few evaluators
MAX_ENTRIES = 64


def _state(tensor: torch.Tensor) -> tuple[Any, ...]:
    """What must be equal for ``tensor`` to hold what it held when a fact about it was recorded."""
    return (tensor._version, tensor.data_ptr(), tuple(tensor.shape), tensor.stride(), tensor.storage_offset(),
            tensor.dtype, tensor.device)  # fmt: skip


class TensorMemo:
    """Facts about tensors, each under a key, valid while the tensor is unchanged (see the module docstring)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, Hashable], tuple[weakref.ref, tuple[Any, ...], Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, tensor: torch.Tensor, key: Hashable, compute: Callable[[], T]) -> T:
        """The fact ``key`` about ``tensor``: recorded, or ``compute()`` now (and recorded unless ``tensor`` is an
        inference tensor). ``compute`` raising records nothing."""
        if tensor.is_inference():
            return compute()
        slot = (id(tensor), key)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and entry[0]() is tensor and entry[1] == _state(tensor):
                self._entries.move_to_end(slot)
                self.hits += 1
                return entry[2]
        value = compute()
        with self._lock:
            self.misses += 1
            self._entries[slot] = (weakref.ref(tensor), _state(tensor), value)
            self._entries.move_to_end(slot)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_MEMO = TensorMemo()


def memo() -> TensorMemo:
    """The process's :class:`TensorMemo`."""
    return _MEMO
