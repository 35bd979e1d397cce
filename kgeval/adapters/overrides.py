"""Which scoring methods a user's subclass of a library model redefines (:func:`foreign_override`): an integration
reads a model's query/candidate form off the library's own classes, and does not for a subclass that scores
otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "FORM_ATTRIBUTES",
    "foreign_override",
    "method_below_form",
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


#: the attributes of the query/candidate form: the class that defines the last of them owns the form
FORM_ATTRIBUTES: tuple[str, ...] = (
    "kgeval_query", "kgeval_candidates", "kgeval_relation_candidates", "kgeval_similarity", "kgeval_targets",
    "kgeval_table_targets",
)  # fmt: skip


def method_below_form(form: Any, method: str) -> str | None:
    """``"Class.method"`` when ``form``'s class (or the instance) defines the scoring ``method`` below the class
    that declares its query/candidate form (a subclass overriding ``score_t`` of a model with a form), else None.

    The form owner is the most derived class in the MRO that defines any of :data:`FORM_ATTRIBUTES`; a subclass
    that declares its own form (one of them) owns it, and its methods are then its form's concern.
    """
    if method in getattr(form, "__dict__", {}):
        return f"{type(form).__name__} (instance attribute).{method}"
    mro = type(form).__mro__
    owner = next((i for i, cls in enumerate(mro) if any(name in vars(cls) for name in FORM_ATTRIBUTES)), None)
    definer = next((i for i, cls in enumerate(mro) if method in vars(cls)), None)
    if owner is None or definer is None or definer >= owner:
        return None
    return f"{mro[definer].__name__}.{method}"
