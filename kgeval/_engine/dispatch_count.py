"""What an evaluation costs the host, counted on any device: every ATen operation (on a GPU, one kernel launch each)
and every data-dependent read (on a GPU, one host-device synchronisation each), attributed to kgeval's functions.

A private tool for the engine's tests and benchmarks (``benchmarks/dispatch.py``, tests/engine/test_dispatch_counts.py),
not public API::

    with DispatchCounter() as counter:
        evaluator.evaluate(model, triples, ...)
    counter.ops, counter.syncs, counter.by_function()

:class:`DispatchCounter` is a ``TorchDispatchMode`` (it sees each operation after autograd and the composite
decompositions, as a device would run it) together with a ``TorchFunctionMode`` for the reads that dispatch no
operation on a CPU tensor (``tolist``, ``numpy``). A *sync op* is one whose result or output size depends on a
tensor's values:

- ``aten._local_scalar_dense`` (``item``, ``bool``, ``int``, ``float`` of a tensor, ``if tensor:``);
- ``aten.nonzero``, ``aten.masked_select``, ``aten.unique*``, ``aten.argwhere``;
- ``aten.repeat_interleave.Tensor`` without ``output_size``;
- ``aten.index.Tensor`` / ``aten.index_put_`` with a boolean index (boolean-mask indexing);
- ``Tensor.tolist`` and ``Tensor.numpy`` (function level: on a device tensor they follow a copy to the host).

A ``.cpu()`` of a CPU tensor dispatches nothing, so a device-to-host copy is counted where it is read (``numpy``,
``tolist``, ``item``). Each operation is attributed to the innermost frame of kgeval's code on the Python stack
(file relative to the package, and function), or "outside kgeval".
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DispatchCounter", "format_table"]

_PACKAGE = str(Path(__file__).resolve().parents[1]) + "/"
_THIS_FILE = str(Path(__file__).resolve())

#: ATen operations (packet names) whose output size or result is read from the data
_SYNC_PACKETS = frozenset(
    {"_local_scalar_dense", "nonzero", "nonzero_static", "masked_select", "argwhere", "unique", "_unique",
     "_unique2", "unique_dim", "unique_consecutive", "unique_dim_consecutive", "is_nonzero", "equal"}
)  # fmt: skip
#: function-level reads that dispatch nothing on a CPU tensor
_READS = {torch.Tensor.tolist: "Tensor.tolist", torch.Tensor.numpy: "Tensor.numpy"}


def _where(frame: FrameType | None) -> str:
    """'file.py function' of the innermost frame of kgeval's code (this module's excluded)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_PACKAGE) and filename != _THIS_FILE:
            return f"{filename[len(_PACKAGE) :]} {frame.f_code.co_name}"
        frame = frame.f_back
    return "outside kgeval"


def _has_bool_index(args: tuple) -> bool:
    """Whether an ``index`` / ``index_put`` call's indices (its second argument) hold a boolean tensor."""
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8) for index in indices or ())


def _is_sync(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether an ATen operation reads values to the host (see the module's docstring)."""
    packet = func._overloadpacket.__name__
    if packet in _SYNC_PACKETS:
        return True
    if packet == "repeat_interleave":
        output_size = kwargs.get("output_size", args[2] if len(args) > 2 else None)
        return isinstance(args[0], torch.Tensor) and output_size is None
    if packet in ("index", "index_put", "index_put_", "_index_put_impl_"):
        return _has_bool_index(args)
    return False


class _Reads(TorchFunctionMode):
    """The function-level half of :class:`DispatchCounter`: reads that dispatch no operation."""

    def __init__(self, owner: DispatchCounter) -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = _READS.get(func)
        if name is not None:
            self.owner._record(name, True, sys._getframe(1))
        return func(*args, **(kwargs or {}))


class DispatchCounter(TorchDispatchMode):
    """Counts the ATen operations and the sync ops run inside its ``with`` block, by operation and by kgeval
    function (module docstring). Counters: :attr:`ops` and :attr:`syncs` (totals, a sync op counts in both),
    :attr:`op_names` / :attr:`sync_names` (by operation), :attr:`functions` / :attr:`sync_functions` (by 'file
    function')."""

    def __init__(self) -> None:
        super().__init__()
        self.op_names: Counter[str] = Counter()
        self.sync_names: Counter[str] = Counter()
        self.functions: Counter[str] = Counter()
        self.sync_functions: Counter[str] = Counter()
        self.sync_sites: Counter[tuple[str, str]] = Counter()  #: (kgeval function, operation) of each sync op
        self._reads = _Reads(self)

    @property
    def ops(self) -> int:
        """Every counted operation (ATen operations and function-level reads)."""
        return sum(self.op_names.values())

    @property
    def syncs(self) -> int:
        """The sync ops among them."""
        return sum(self.sync_names.values())

    def by_function(self) -> list[tuple[str, int, int]]:
        """(kgeval function, ops, sync ops), most ops first."""
        return [(name, ops, self.sync_functions[name]) for name, ops in self.functions.most_common()]

    def _record(self, name: str, sync: bool, frame: FrameType | None) -> None:
        where = _where(frame)
        self.op_names[name] += 1
        self.functions[where] += 1
        if sync:
            self.sync_names[name] += 1
            self.sync_functions[where] += 1
            self.sync_sites[where, name] += 1

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        self._record(func._overloadpacket.__name__, _is_sync(func, args, kwargs), sys._getframe(1))
        return func(*args, **kwargs)

    def __enter__(self) -> DispatchCounter:
        self._reads.__enter__()
        try:
            return super().__enter__()
        except BaseException:
            self._reads.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._reads.__exit__(*exc)


def format_table(counter: DispatchCounter, rows: int = 15) -> str:
    """The counts as text: totals, the sync ops by operation, and the ``rows`` kgeval functions with most ops."""
    lines = [f"{counter.ops:,} ops, {counter.syncs:,} sync ops"]
    if counter.sync_names:
        lines.append("  sync ops: " + ", ".join(f"{name} {n}" for name, n in counter.sync_names.most_common()))
    lines.append(f"  {'ops':>7} {'syncs':>6}  kgeval function")
    listed = counter.by_function()[:rows]
    for name, ops, syncs in listed:
        lines.append(f"  {ops:7,d} {syncs:6d}  {name}")
    shown = {name for name, _ops, _syncs in listed}
    for name, syncs in counter.sync_functions.most_common():
        if name not in shown:  # every function that reads the host is listed
            lines.append(f"  {counter.functions[name]:7,d} {syncs:6d}  {name}")
    return "\n".join(lines)
