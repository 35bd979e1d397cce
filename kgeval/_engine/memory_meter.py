"""The peak memory one call allocates (:func:`peak_call_bytes`): what the automatic batch and slice sizes of a model
scored through its own methods are derived from (kgeval._engine.sizes.measure_memory_per_query and
measure_memory_per_pair, a few small calls once per model, side and device).

- On CUDA, the caching allocator's own statistics: ``torch.cuda.max_memory_allocated`` after
  ``torch.cuda.reset_peak_memory_stats``, above ``torch.cuda.memory_allocated`` before the call -- exact, every
  allocation of the device counted (an operation's temporaries, a custom extension's buffers). It resets the
  device's peak statistics (a caller's own ``max_memory_allocated`` then starts again from that point: at an
  evaluation's first side scored through a model's own methods without a ``batch_size``).
- Elsewhere (CPU), :class:`LiveTensorBytes`: a ``TorchDispatchMode`` that adds the bytes of the storage every
  operation creates while the call runs and subtracts them when its last tensor dies, keeping the maximum. It counts
  every tensor an operation returns, intermediates freed inside the call included, at no cost outside the probe's
  calls (inside them, a Python dispatch per operation) and without printing anything (the profiler's memory events,
  exact at the allocator, print two lines per use in some torch builds and take a second to start). It does not see
  the scratch memory an operation allocates and frees inside its own kernel (a sort's buffers, a sparse product's
  workspace), so it is a lower bound of the allocator's peak: the sizes leave the budget's pairs share beside it
  (kgeval._engine.sizes).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["LiveTensorBytes", "peak_call_bytes"]


def _components(tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The strided tensors holding ``tensor``'s memory: itself, or a sparse tensor's indices and values."""
    if tensor.layout is torch.strided:
        return (tensor,)
    if tensor.layout is torch.sparse_coo:
        return (tensor._indices(), tensor._values())
    if tensor.layout in (torch.sparse_csr, torch.sparse_bsr):
        return (tensor.crow_indices(), tensor.col_indices(), tensor.values())
    if tensor.layout in (torch.sparse_csc, torch.sparse_bsc):
        return (tensor.ccol_indices(), tensor.row_indices(), tensor.values())
    return ()


def _storage(tensor: torch.Tensor) -> tuple[int, int] | None:
    """(address, bytes) of a strided tensor's storage; None for an empty one (no memory to count)."""
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a tensor without a storage of its own
        return None
    size = storage.nbytes()
    return (storage.data_ptr(), size) if size else None


class LiveTensorBytes(TorchDispatchMode):
    """Inside its ``with`` block, the bytes of the storages operations created that are still alive (:attr:`live`)
    and their maximum (:attr:`peak`). A storage an operation's inputs already held (an in-place operation, a view of
    a parameter) is not new; a view of a new storage keeps it alive until the last of its tensors dies."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch would otherwise wrap :meth:`__torch_dispatch__` in ``torch._dynamo.disable``, importing
        torch._dynamo (seconds, once per process) at the first operation; nothing here is ever compiled."""
        return False

    def __init__(self) -> None:
        super().__init__()
        self.live = 0  #: bytes of the created storages alive now
        self.peak = 0  #: the most bytes alive at once since the block began
        self._bytes: dict[int, int] = {}  #: address -> bytes of each created storage alive
        self._holders: dict[int, int] = {}  #: address -> tensors referring to it

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        inputs = {found[0] for found in self._storages(tree_leaves((args, kwargs)))}
        result = func(*args, **kwargs)
        for tensor in tree_leaves(result):
            if isinstance(tensor, torch.Tensor):
                self._track(tensor, inputs)
        return result

    @staticmethod
    def _storages(leaves: list[Any]) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                found.extend(storage for part in _components(leaf) if (storage := _storage(part)) is not None)
        return found

    def _track(self, tensor: torch.Tensor, inputs: set[int]) -> None:
        """Count the storages of an operation's output that are new (not among its inputs', unless created here)."""
        for address, size in self._storages([tensor]):
            if address in self._bytes:
                if size > self._bytes[address]:  # resized in place (an out= operation growing its output)
                    self._add(size - self._bytes[address])
                    self._bytes[address] = size
            elif address in inputs:
                continue  # memory that existed before the block: not the call's
            else:
                self._bytes[address] = size
                self._holders[address] = 0
                self._add(size)
            self._holders[address] += 1
            weakref.finalize(tensor, self._drop, address)

    def _add(self, size: int) -> None:
        self.live += size
        self.peak = max(self.peak, self.live)

    def _drop(self, address: int) -> None:
        """One tensor referring to ``address`` died; the storage is freed with the last."""
        if address not in self._holders:
            return
        self._holders[address] -= 1
        if self._holders[address] == 0:
            self.live -= self._bytes.pop(address)
            del self._holders[address]


def peak_call_bytes(call: Callable[[], Any], device: torch.device) -> int:
    """The most bytes ``call()`` held allocated at once on ``device`` above what was allocated before it, the
    memory its result holds included (module docstring: exact on CUDA, the tensors of operations elsewhere)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = call()
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return max(0, int(peak))
    with LiveTensorBytes() as meter:
        result = call()
    peak = meter.peak
    del result
    return peak
