"""The evaluation mode of a model: ``model.eval()`` for the duration of an evaluation, the ``training`` flag of the
model and of every submodule restored afterwards exactly as it was, and evaluations of one model object taking
turns (a per-model lock).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

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


def _modes(model: Any) -> list[tuple[Any, bool]]:
    """(object, its ``training`` flag) of the model and, for a torch module, of each of its submodules."""
    modules = getattr(model, "modules", None)
    objects = list(modules()) if isinstance(model, torch.nn.Module) and callable(modules) else [model]
    return [(item, item.training) for item in objects if isinstance(getattr(item, "training", None), bool)]


@contextmanager
def evaluation_mode(model: Any) -> Iterator[None]:
    """``model.eval()`` for the block, then every ``training`` flag back as it was (models without these are left
    alone).

    ``model.train(was_training)`` alone would recurse: a submodule the user froze with ``.eval()`` (a pretrained
    encoder, a BatchNorm) would come back in training mode, its statistics updating and its dropout on. So the flag
    of the model and of each submodule is recorded before; afterwards (also when the block raises) the model's own
    ``train(was_training)`` runs (a class that overrides ``train`` gets its say), then every flag that differs from
    its record is set back.

    Thread safety: evaluations of one model object take turns (a per-model lock held from the mode switch to its
    restoration), so a second thread can neither save the first one's eval mode as the model's own nor switch the
    mode back in the middle of the first one's run. Evaluations of different models run concurrently.
    """
    with _model_lock(model):
        modes = _modes(model)
        if callable(getattr(model, "eval", None)):
            model.eval()
        try:
            yield
        finally:
            if modes and modes[0][0] is model and callable(getattr(model, "train", None)):
                model.train(modes[0][1])
            for item, training in modes:
                if item.training != training:
                    item.training = training
