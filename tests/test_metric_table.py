"""docs/metric_table.md agrees with the metric registry (keys, aliases, range, direction, rank types, ...)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kgeval.metrics import METRICS

TABLE = Path(__file__).resolve().parents[1] / "docs" / "metric_table.md"
COLUMNS = ["key", "aliases", "range", "better", "rank types", "E, Var", "definition"]


def metric_table() -> dict[str, dict[str, str]]:
    """The rows of the metric table, keyed by metric name."""
    section = TABLE.read_text(encoding="utf-8")
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(COLUMNS, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        name = re.match(r"`([a-z_]+)`", cells["key"]).group(1)
        assert name not in rows, f"{name} listed twice"
        rows[name] = cells
    return rows


ROWS = metric_table()


def test_the_table_lists_every_registered_metric_once() -> None:
    assert list(ROWS) == list(METRICS)


@pytest.mark.parametrize("name", list(METRICS))
def test_row_agrees_with_the_registry(name: str) -> None:
    info, row = METRICS[name], ROWS[name]
    assert re.findall(r"`([^`]+)`", row["aliases"]) == list(info.aliases)
    assert row["range"] == str(info.value_range)
    assert row["better"] == {True: "higher", False: "lower", None: ""}[info.increasing]
    all_types = set(info.rank_types) == {"optimistic", "pessimistic", "realistic"}
    assert row["rank types"] == ("all" if all_types else ", ".join(info.rank_types))
    assert row["E, Var"] == ("✓" if info.null_moments is not None else "")
    assert ("(one key per k)" in row["key"]) == info.k_parameterised
    assert row["definition"].endswith(f"](METRICS.md#{info.section})")
