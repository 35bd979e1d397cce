"""Which scoring methods a user's subclass of a library model redefines (:func:`foreign_override`): an integration
reads a model's query/candidate form off the library's own classes, and does not for a subclass that scores
otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "foreign_override",
]


def foreign_override(model: Any, names: Iterable[str], library: str) -> str | None:
    """``"Class.method"`` for the first of ``names`` that a class deriving from a class of the package ``library``
    (a user's subclass of a library model) redefines, or that is set on the instance itself; else None.

    An integration reads a model's query/candidate form off a library class whose scoring it knows; a subclass
    that redefines one of that scoring's methods may score differently, so the form is not used for it.
    """
    names = tuple(names)
    for name in names:
        if name in getattr(model, "__dict__", {}):
            return f"{type(model).__name__} (instance attribute).{name}"
    for cls in type(model).__mro__:
        module = cls.__module__ or ""
        if module == library or module.startswith(library + "."):
            return None  # the library's own classes (and what they derive from) score as the library does
        for name in names:
            if name in vars(cls):
                return f"{cls.__name__}.{name}"
    return None
