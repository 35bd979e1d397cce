"""Every import path that README.md, docs/ and examples/ name works -- or, where it moved, warns with the new path
(kgeval._moved: one table, one helper) -- and the moved paths keep forwarding for one minor release only."""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import kgeval
from kgeval._moved import MOVED

ROOT = Path(__file__).resolve().parents[1]
#: ``kgeval.a.b`` in prose or code, and ``from kgeval.a import b, c`` statements
DOTTED = re.compile(r"(?<![\w/.-])kgeval(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"from[ \t]+(kgeval(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)")


#: names of kgeval's loggers (``logging.getLogger("kgeval.sizes")``): documented, but not import paths
LOGGERS = {
    match
    for path in (ROOT / "kgeval").rglob("*.py")
    for match in re.findall(r"getLogger\(\"(kgeval[\w.]*)\"\)", path.read_text())
}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").rglob("*.py"))]


def documented_paths() -> dict[str, str]:
    """path -> the first document naming it (a module, or an attribute of one at any depth)."""
    found: dict[str, str] = {}
    for document in documents():
        if not document.exists():
            continue
        text = document.read_text()
        name = str(document.relative_to(ROOT))
        for match in DOTTED.finditer(text):
            if match.group(0) not in LOGGERS:
                found.setdefault(match.group(0), name)
        for module, names in FROM_IMPORT.findall(text):
            for item in re.sub(r"#[^\n]*", "", names).strip("()").split(","):
                imported = item.split(" as ")[0].strip()
                if re.fullmatch(r"[A-Za-z_]\w*", imported):
                    found.setdefault(f"{module}.{imported}", name)
    return found


def _forget_moved() -> None:
    """Drop the stand-ins of moved paths, so that importing one warns again."""
    for old in MOVED:
        sys.modules.pop(old, None)
        parent, _, child = old.rpartition(".")
        vars(sys.modules[parent]).pop(child, None)


def resolve(path: str) -> object:
    """Import the longest module prefix of ``path`` and read the rest as attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            value: object = importlib.import_module(module_name)
        except ImportError as error:
            missing = _missing_dependency(error)
            if missing is not None:
                pytest.skip(f"{path} needs {missing}, not installed here")
            if not isinstance(error, ModuleNotFoundError):
                raise
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise AssertionError(f"{path}: no importable prefix")


def _missing_dependency(error: BaseException | None) -> str | None:
    """The optional library whose absence made an import fail (also behind kgeval's own "pip install ..." error),
    or None when a kgeval module itself is missing."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name and not error.name.startswith("kgeval"):
            return error.name
        error = error.__cause__ or error.__context__
    return None


def moved_prefix(path: str) -> str | None:
    return next((old for old in MOVED if path == old or path.startswith(old + ".")), None)


def test_the_documents_name_import_paths() -> None:
    """The scan finds paths (else the test below would check nothing)."""
    paths = documented_paths()
    assert len(paths) > 50
    assert "kgeval.RankBasedEvaluator" in paths or "kgeval.evaluator.RankBasedEvaluator" in paths


@pytest.mark.parametrize("path", sorted(documented_paths()))
def test_every_documented_path_works_or_warns_with_its_new_path(path: str) -> None:
    _forget_moved()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolve(path)
    moved = [str(warning.message) for warning in caught if issubclass(warning.category, FutureWarning)]
    old = moved_prefix(path)
    if old is None:
        assert not moved, (path, moved)
    else:
        assert any(MOVED[old].new in message for message in moved), (path, moved)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_each_moved_path_forwards_to_the_new_module_with_a_future_warning(old: str) -> None:
    _forget_moved()
    new = importlib.import_module(MOVED[old].new)
    with pytest.warns(FutureWarning, match=re.escape(f"{old} moved to {MOVED[old].new}")):
        stand_in = importlib.import_module(old)
    for name in getattr(new, "__all__", []):
        assert getattr(stand_in, name) is getattr(new, name)
    assert not (ROOT / (old.replace(".", "/") + ".py")).exists()  # no file left at the old place


def test_a_moved_module_read_as_an_attribute_warns_at_the_callers_line() -> None:
    _forget_moved()
    with pytest.warns(FutureWarning, match="kgeval.macro moved to kgeval.variants.macro") as caught:
        stand_in = kgeval.macro  # type: ignore[attr-defined]
    assert stand_in.MacroRankBasedEvaluator is kgeval.MacroRankBasedEvaluator
    assert caught[0].filename == __file__
    with pytest.raises(AttributeError, match="no attribute 'no_such_module'"):
        kgeval.no_such_module  # type: ignore[attr-defined]  # noqa: B018


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_paths_are_removed_on_schedule(old: str) -> None:
    """An entry outliving its release fails here: remove it (and its CHANGELOG line) in that release."""
    assert _release(kgeval.__version__) < _release(MOVED[old].removed_in), old
