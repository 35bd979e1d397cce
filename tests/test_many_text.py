"""The text table of a many-graph run fits the terminal (``$COLUMNS``, else 100 columns off a terminal): its columns
wrap into parts that each fit, the dataset repeated at the left of each, and every value of ``--json`` is printed
in one of them (4 decimals)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kgeval.cli import main
from kgeval.many import METRIC_COLUMNS, evaluate_many
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.support.many_graphs import make_folders


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_folders(tmp_path_factory.mktemp("many"))


def _shown(value: float | None) -> str:
    return "NaN" if value is None or math.isnan(value) else f"{value:.4f}"


def check_every_value_shown(text: str, graphs: list[dict], averages: dict[str, dict]) -> None:
    """Each graph's (and each group average's) values are on the lines that start with its name, in some part."""
    table, group_part = text.split("Group averages", 1)
    for row in graphs:
        lines = " ".join(line for line in table.splitlines() if line.split()[:1] == [row["dataset"]])
        shown = lines.split()
        for column in METRIC_COLUMNS:
            assert _shown(row[column]) in shown, (row["dataset"], column)
        assert str(row["tasks"]) in shown and row["group"] in lines
    for group, row in averages.items():
        lines = " ".join(line for line in group_part.splitlines() if line.startswith(f"{group}  "))
        assert str(row["graphs"]) in lines.split(), group
        for column in METRIC_COLUMNS:
            assert _shown(row[column]) in lines.split(), (group, column)


@pytest.mark.parametrize("columns", [80, 120])
def test_the_printed_table_fits_the_terminal(folders: list[Path], columns: int, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    argv = ["evaluate-many", "--datasets", *map(str, folders), "--threads", "1"]
    assert main([*argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main([*argv, "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= columns, text
    check_every_value_shown(text, document["graphs"], document["averages"])
    wrapped = text.count("dataset ") > 1  # the table in parts, each headed by the dataset column
    assert wrapped == (columns == 80)


def test_to_text_wraps_at_any_width_and_keeps_every_value(folders: list[Path]) -> None:
    many = evaluate_many(lambda dataset: NeighbourhoodBaseline(), folders, use_tqdm=False)
    document = json.loads(json.dumps(many.to_dict()))
    whole = many.to_text()
    assert whole.count("dataset ") == 1 and "mrr_pessimistic" not in whole  # short headers: MRR over pess / real
    check_every_value_shown(whole, document["graphs"], document["averages"])
    widest = max(len(line) for line in whole.splitlines())
    for width in (40, 60, 80, widest):
        text = many.to_text(width)
        assert max(len(line) for line in text.splitlines()) <= width, width
        assert "\n\n\n" not in text
        check_every_value_shown(text, document["graphs"], document["averages"])
    assert many.to_text(widest) == whole
