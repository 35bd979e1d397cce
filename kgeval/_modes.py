"""The evaluation mode of a model: ``model.eval()`` for the duration of an evaluation, its ``training`` flag restored
afterwards, and evaluations of one model object taking turns (a per-model lock).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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


@contextmanager
def evaluation_mode(model: Any) -> Iterator[None]:
    """``model.eval()`` for the block, then ``model.train(was_training)`` (models without these are left alone).

    Thread safety: evaluations of one model object take turns (a per-model lock held from the mode switch to its
    restoration), so a second thread can neither save the first one's eval mode as the model's own nor switch the
    mode back in the middle of the first one's run. Evaluations of different models run concurrently.
    """
    with _model_lock(model):
        was_training = getattr(model, "training", None)
        if callable(getattr(model, "eval", None)):
            model.eval()
        try:
            yield
        finally:
            if was_training is not None and callable(getattr(model, "train", None)):
                model.train(was_training)
