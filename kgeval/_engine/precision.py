"""The model's own float arithmetic for the duration of an evaluation, whatever context the caller evaluates from.

A training loop evaluates from inside settings that change how a model computes: ``torch.autocast`` regions
(Lightning's ``precision="bf16-mixed"`` / ``"16-mixed"``, a hand-written mixed-precision loop), TF32 or reduced
float32 precision for matrix multiplications, convolutions and RNNs (``torch.backends.cuda.matmul.allow_tf32``,
``torch.set_float32_matmul_precision``, ``torch.backends.cudnn.allow_tf32`` -- on by default for cuDNN
convolutions --, the ``fp32_precision`` backends), reduced-precision reductions and float16 accumulation in
half-precision GEMMs, and denormals flushed to zero (``torch.set_flush_denormal``). Under any of them the scores,
and so the ranks, are those of a lower precision than the model's own.

:func:`exact_arithmetic` sets every such setting aside for the block and restores each through the API that reads
it, also on error -- unless another thread changed it meanwhile, whose value then stays; what it finds it cannot
set aside, or what came into force while the block ran, it names in one :class:`kgeval.exceptions.PrecisionWarning`.
A model that enters its own autocast region inside its scoring methods keeps it: that is its own arithmetic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from kgeval.exceptions import PrecisionWarning, warn_caller
from kgeval.typing import MatmulPrecision

__all__ = ["ambient_settings", "exact_arithmetic"]

#: the float32 precision handles of the operator families that can compute in TF32 / bf16, as (owner, attribute
#: path) -- read and written through ``fp32_precision`` (kgeval reads them lazily: a backend missing in this torch
#: build is skipped)
_PRECISION_HANDLES: tuple[tuple[str, str], ...] = (
    ("cuda", "cuda.matmul"),
    ("cuda", "cudnn.conv"),
    ("cuda", "cudnn.rnn"),
    ("mkldnn", "mkldnn.matmul"),
    ("mkldnn", "mkldnn.conv"),
    ("mkldnn", "mkldnn.rnn"),
)
#: per backend, the handle that an operator family's "none" inherits from (then ``torch.backends.fp32_precision``)
_BACKEND_DEFAULTS: dict[str, str] = {"cuda": "cudnn", "mkldnn": "mkldnn"}
#: half-precision GEMM settings of cuBLAS that round below the inputs' precision when on: (attribute, exact value)
_HALF_GEMM_FLAGS: tuple[tuple[str, bool], ...] = (
    ("allow_fp16_reduced_precision_reduction", False),
    ("allow_bf16_reduced_precision_reduction", False),
    ("allow_fp16_accumulation", False),
)
#: device types an autocast region can be enabled for (the privateuse1 backend's name is added when registered)
_AUTOCAST_DEVICES: tuple[str, ...] = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "mtia", "maia")


def _handle(path: str) -> Any:
    """``torch.backends.<path>`` (e.g. ``cudnn.conv``), or None where this torch build has none."""
    owner: Any = torch.backends
    for part in path.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _effective_precision(backend: str, handle: Any) -> str:
    """What a handle's float32 precision resolves to: its own value, else its backend's, else the process's."""
    chain = (handle, _handle(_BACKEND_DEFAULTS[backend]), torch.backends)
    for owner in chain:
        value = getattr(owner, "fp32_precision", "none") if owner is not None else "none"
        if value != "none":
            return value
    return "ieee"


@dataclass(frozen=True)
class _Setting:
    """One ambient setting: how messages name it, how to read and write it, and its exact value."""

    name: str
    read: Callable[[], Any]
    write: Callable[[Any], Any]
    exact: Any


def _autocast_devices() -> list[str]:
    """The device types whose autocast region is enabled on this thread."""
    devices = list(_AUTOCAST_DEVICES)
    privateuse = torch._C._get_privateuse1_backend_name()
    if privateuse not in devices:
        devices.append(privateuse)
    enabled = []
    for device in devices:
        try:
            if torch.is_autocast_enabled(device):
                enabled.append(device)
        except (RuntimeError, TypeError, ValueError):  # a device type this build does not know
            continue
    return enabled


def _denormals_flushed() -> bool:
    """Whether this thread flushes float32 denormals to zero (``torch.set_flush_denormal(True)``): a denormal
    multiplied by one comes back as zero."""
    tiny = np.float32(1e-40)  # numpy's scalar arithmetic runs under the same thread's flush-to-zero mode as torch's
    return bool(tiny * np.float32(1.0) == 0)


def _thread_settings() -> list[_Setting]:
    """The settings of this thread that lower a model's precision now: its autocast regions, flushed denormals."""
    found = [
        _Setting(f"torch.autocast({device!r}, dtype={torch.get_autocast_dtype(device)})",
                 partial(torch.is_autocast_enabled, device), partial(torch.set_autocast_enabled, device), False)
        for device in _autocast_devices()
    ]  # fmt: skip
    if _denormals_flushed():
        found.append(_Setting("torch.set_flush_denormal(True)", _denormals_flushed, torch.set_flush_denormal, False))
    return found


def _process_settings() -> list[_Setting]:
    """The process-wide settings that lower a model's precision now: the float32 precision handles that are not
    IEEE, and the half-precision GEMM flags that reduce precision."""
    found = []
    for backend, path in _PRECISION_HANDLES:
        handle = _handle(path)
        if handle is not None and (precision := _effective_precision(backend, handle)) != "ieee":
            found.append(_Setting(f"torch.backends.{path}.fp32_precision={precision!r}",
                                  partial(getattr, handle, "fp32_precision"),
                                  partial(setattr, handle, "fp32_precision"), "ieee"))  # fmt: skip
    matmul = _handle("cuda.matmul")
    for name, exact in _HALF_GEMM_FLAGS:
        if matmul is not None and getattr(matmul, name, exact) != exact:
            found.append(_Setting(f"torch.backends.cuda.matmul.{name}={not exact}", partial(getattr, matmul, name),
                                  partial(setattr, matmul, name), exact))  # fmt: skip
    return found


def ambient_settings() -> list[str]:
    """The settings in force now (this thread's and the process's) that make a model compute below its own
    precision, in words (empty when none)."""
    return [setting.name for setting in _thread_settings() + _process_settings()]


def _set_aside(settings: list[_Setting], stack: ExitStack) -> list[str]:
    """Each of ``settings`` set to its exact value, and registered on ``stack`` to be set back; returns the names of
    those that could not be (that do not read back as exact)."""
    failed: list[str] = []
    for setting in settings:
        saved = setting.read()
        try:
            setting.write(setting.exact)
        except (AttributeError, RuntimeError, TypeError, ValueError):
            failed.append(setting.name)
            continue
        stack.callback(_restore, setting, saved)
        if setting.read() != setting.exact:
            failed.append(setting.name)
    return failed


def _restore(setting: _Setting, saved: Any) -> None:
    """``setting`` back to ``saved``, the value kgeval found -- only while it still holds the exact value kgeval set:
    a value another thread (or the model) set meanwhile is theirs, and stays."""
    if setting.read() == setting.exact:
        setting.write(saved)


class _ProcessWide:
    """The process-wide settings set aside once for every evaluation running at a time (in any thread): the first to
    begin sets them aside, the last to end restores them -- a thread whose evaluation ends must not restore what
    another thread's evaluation still relies on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._restore = ExitStack()
        self._failed: list[str] = []

    def begin(self) -> list[str]:
        """Count one more evaluation in; returns the settings that could not be set aside."""
        with self._lock:
            if self._running == 0:
                self._restore = ExitStack()
                self._failed = _set_aside(_process_settings(), self._restore)
            self._running += 1
            return list(self._failed)

    def end(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self._restore.close()


_PROCESS_WIDE = _ProcessWide()


@contextmanager
def exact_arithmetic(mode: MatmulPrecision = "exact") -> Iterator[None]:
    """Inside the block a model computes in its own precision: every setting of :func:`ambient_settings` is set
    aside (autocast regions off, float32 matmuls / convolutions / RNNs in IEEE float32, half-precision GEMMs
    accumulated in float32 without reduced-precision reductions, denormals kept) and restored afterwards, also on
    error; nothing is touched where nothing is set, or with ``mode="inherit"``.

    Autocast and denormal flushing are per thread: the calling thread's are set aside. The backend flags are
    process-wide: set aside by the first of the evaluations running at a time, in any thread, and restored by the
    last, so another thread's work meanwhile (an evaluation with ``"inherit"`` too) runs exact. A setting that
    cannot be set aside is named in one :class:`kgeval.exceptions.PrecisionWarning`, and the evaluation runs under
    it. At the end a setting is set back only while it still holds the exact value kgeval set: one that another
    thread changed meanwhile keeps that thread's value.
    """
    if mode == "inherit":
        yield
        return
    with ExitStack() as stack:
        failed = _PROCESS_WIDE.begin()
        stack.callback(_PROCESS_WIDE.end)
        failed += _set_aside(_thread_settings(), stack)
        if failed:
            warn_caller(
                f"kgeval: could not set aside {', '.join(failed)} for this evaluation: the model's scores, and so "
                "its ranks, are those of that setting, not of the model's own precision",
                PrecisionWarning,
            )
        yield
        _warn_if_set_meanwhile(failed)


def _warn_if_set_meanwhile(failed: list[str]) -> None:
    """One :class:`PrecisionWarning` naming the settings that came into force while the evaluation ran (another
    thread set a process-wide flag, say), other than those it could not set aside at its start (named then)."""
    meanwhile = [name for name in ambient_settings() if name not in failed]
    if meanwhile:
        warn_caller(
            f"kgeval: {', '.join(meanwhile)} came into force during this evaluation (set by another thread, or by the "
            "model): the scores computed after that are those of that setting, not of the model's own precision",
            PrecisionWarning,
        )
