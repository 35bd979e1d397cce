"""The repository's shape: every public module declares ``__all__`` (and every name in it exists), and no two
files differ only by case (a clone on macOS or Windows would get one of them)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import kgeval

PACKAGE = Path(kgeval.__file__).resolve().parent
ROOT = PACKAGE.parent
#: modules that import an optional library at import time: their ``__all__`` is read from the source
OPTIONAL = {"kgeval.adapters.pykeen", "kgeval.adapters.pyg", "kgeval.adapters.torchkge", "kgeval.adapters.dicee",
            "kgeval.integrations.pykeen", "kgeval.integrations.lightning", "kgeval.analysis.plot"}  # fmt: skip


def public_modules() -> list[tuple[str, Path]]:
    """(module name, path) of every module with no private part (``kgeval._engine.*``, ``kgeval._checks``, ...)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(part.startswith("_") for part in parts):
            continue
        found.append((".".join(parts), path))
    return found


def declared_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text()).body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return list(ast.literal_eval(node.value))
    return None


@pytest.mark.parametrize(("name", "path"), public_modules(), ids=[name for name, _ in public_modules()])
def test_every_public_module_declares_all_and_defines_it(name: str, path: Path) -> None:
    names = declared_all(path)
    assert names is not None, f"{name} has no __all__"
    assert len(names) == len(set(names)), name
    if name in OPTIONAL:
        return
    module = importlib.import_module(name)
    missing = [item for item in names if not hasattr(module, item)]
    assert not missing, (name, missing)


def test_no_two_files_differ_only_by_case() -> None:
    seen: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if relative.parts[0].startswith(".") or "__pycache__" in relative.parts:
            continue
        key = str(relative).lower()
        assert key not in seen, f"{relative} and {seen[key].relative_to(ROOT)} differ only by case"
        seen[key] = path


def _anchors(path: Path) -> set[str]:
    """The GitHub anchors of a Markdown file's headings (outside code fences)."""
    found, fence = set(), False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,6} ", line):
            title = re.sub(r"^#+ ", "", line).strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_every_relative_link_of_the_docs_resolves() -> None:
    """README.md and docs/*.md link to files that exist and to headings those files have (the guide is split by
    topic: a link to a section that moved would break silently)."""
    broken = []
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in re.finditer(r"\]\(([^)\s]*?)(#[^)\s]+)?\)", document.read_text(encoding="utf-8")):
            target, anchor = match.group(1), match.group(2)
            if target.startswith(("http://", "https://")):
                continue
            path = document.parent / target if target else document
            if not path.exists():
                broken.append(f"{document.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor[1:] not in _anchors(path):
                broken.append(f"{document.name}: {target}{anchor}")
    assert not broken, broken
