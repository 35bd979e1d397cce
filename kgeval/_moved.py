"""Module paths that moved, and the one helper that keeps them working for a while.

Each entry of :data:`MOVED` maps an old import path to its new one. Importing an old path (``import kgeval.macro``,
``from kgeval.macro import MacroRankBasedEvaluator``, ``from kgeval import macro``) gives a stand-in module that
forwards every attribute to the new module and warns once, with a ``FutureWarning`` naming the new path. The
stand-ins are made by an import finder installed by :mod:`kgeval`, so no file is left at the old place. Each entry
stays for one minor release: it is removed in the release it names (CHANGELOG.md, Deprecated).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kgeval.exceptions import warn_caller

__all__ = ["MOVED", "Moved", "install", "moved_attribute"]


@dataclass(frozen=True)
class Moved:
    """An old module path, the module that replaced it, and the release that removes the old path."""

    new: str
    removed_in: str = "0.3.0"


#: old module path -> where it went (the 0.2.0 restructuring: the fronts in packages of their own)
MOVED: dict[str, Moved] = {
    "kgeval.sampled": Moved("kgeval.variants.sampled"),
    "kgeval.macro": Moved("kgeval.variants.macro"),
    "kgeval.temporal": Moved("kgeval.variants.temporal"),
    "kgeval.precomputed": Moved("kgeval.variants.precomputed"),
    "kgeval.temporal_audit": Moved("kgeval.audit.temporal"),
    "kgeval.inductive_audit": Moved("kgeval.audit.inductive"),
    "kgeval._many_store": Moved("kgeval.many._store"),
    "kgeval._cli_common": Moved("kgeval.cli._common"),
    "kgeval._cli_report": Moved("kgeval.cli.report"),
    "kgeval._cli_temporal": Moved("kgeval.cli.temporal"),
    "kgeval._cli_many": Moved("kgeval.cli.many"),
    "kgeval._cli_inductive": Moved("kgeval.cli.inductive"),
}


def _warn(old: str) -> None:
    moved = MOVED[old]
    message = f"{old} moved to {moved.new}; import it from there (the old path is removed in kgeval {moved.removed_in})"
    warn_caller(message, FutureWarning)  # at the user's import: past this module, importlib and the package


class _Forwarding(types.ModuleType):
    """The stand-in at an old path: every attribute read from the new module."""

    def __init__(self, old: str, new: types.ModuleType) -> None:
        super().__init__(old, new.__doc__)
        self.__dict__["_kgeval_new"] = new

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_kgeval_new"], name)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_kgeval_new"])


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        _warn(spec.name)
        return _Forwarding(spec.name, importlib.import_module(MOVED[spec.name].new))

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the stand-in reads the new module."""


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` (and only those)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=False)


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once per process)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def moved_attribute(package: str, name: str) -> types.ModuleType:
    """``package.name`` read as an attribute (``kgeval.macro`` after ``import kgeval``): the stand-in module of a
    moved path, imported (and warned about) on first use; AttributeError for any other name."""
    old = f"{package}.{name}"
    if old not in MOVED:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(old)
