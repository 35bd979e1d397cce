"""docs/design.md's "Who owns what" table against the package's imports, so that it cannot drift: every part of
the package has one row, each row's "imports" cell is exactly what its modules import of kgeval (module-level,
function-local and TYPE_CHECKING imports alike), and no arrow points to a row further down (the layers)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_import_graph import PACKAGE, graph

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
#: the packages a row names as one part ("adapters/")
PACKAGES = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}


def part_of(module: str) -> str:
    """The table's name of the part a module belongs to: ``kgeval.adapters.pykeen`` -> ``adapters/``,
    ``kgeval.records`` -> ``records``, ``kgeval`` -> ``__init__``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return f"{parts[1]}/" if parts[1] in PACKAGES else parts[1]


def table() -> list[tuple[list[str], set[str]]]:
    """The rows of the table, top to bottom: (the parts a row names, the parts it says they import)."""
    text = DESIGN.read_text()
    section = text[text.index("## Who owns what") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        named, _owns, imported = (cell.strip() for cell in line.strip().strip("|").rsplit("|", 2))
        parts = [name.removesuffix(".py") for name in re.findall(r"`([^`]+)`", named)]
        targets = set() if imported == "nothing of kgeval" else set(re.findall(r"`([^`]+)`", imported))
        rows.append((parts, targets))
    return rows


def actual_imports() -> dict[str, set[str]]:
    """part -> the other parts its modules import (every kind of import)."""
    tops, locals_ = graph(annotations=True)
    found: dict[str, set[str]] = {}
    for module in tops:
        part = part_of(module)
        found.setdefault(part, set()).update(part_of(target) for target in tops[module] | locals_[module])
    return {part: targets - {part} for part, targets in found.items()}


def test_the_table_is_read() -> None:
    rows = table()
    assert len(rows) > 20
    assert (["records"], {"_checks", "typing"}) in rows


def test_every_part_of_the_package_has_one_row() -> None:
    named = [part for parts, _ in table() for part in parts]
    assert len(named) == len(set(named)), sorted(part for part in named if named.count(part) > 1)
    assert set(named) == set(actual_imports())


def test_each_row_states_exactly_what_its_parts_import() -> None:
    actual = actual_imports()
    for parts, stated in table():
        imported = set().union(*(actual[part] for part in parts)) - set(parts)
        assert imported == stated, f"row {parts}: imports {sorted(imported)}, the table says {sorted(stated)}"


def test_no_arrow_points_down_the_table() -> None:
    """Each part imports only parts of the rows above it: the table is the layering, bottom-up."""
    above: set[str] = set()
    for parts, stated in table():
        assert stated <= above, (parts, sorted(stated - above))
        above.update(parts)
