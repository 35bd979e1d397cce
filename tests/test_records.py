"""Tests of kgeval.records: reading exported rank tables and converting them to record columns."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgeval.records import RankRecords, read_ranks


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "head": [0, 0, 3],
            "relation": [1, 1, 0],
            "tail": [2, 2, 1],
            "side": ["head", "tail", "Tail"],
            "optimistic": [1, 2, 5],
            "pessimistic": [1, 4, 5],
            "realistic": [1.0, 3.0, 5.0],
            "num_candidates": [9, 9, 9],
        }
    )


def test_records_from_a_ranks_df_table() -> None:
    records = RankRecords.from_frame(_table())
    assert records["side"].dtype == np.int8
    assert records["side"].tolist() == [0, 1, 1]
    assert records["task_index"].tolist() == [-1, -1, -1]
    assert records["pessimistic"].tolist() == [1, 4, 5]
    assert records["head"].dtype == np.int64


def test_records_keep_integer_sides_and_task_index() -> None:
    table = _table().assign(side=[0, 1, 1], task_index=[4, 4, 7])
    records = RankRecords.from_frame(table)
    assert records["side"].tolist() == [0, 1, 1]
    assert records["task_index"].tolist() == [4, 4, 7]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".tsv"])
def test_csv_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"ranks{suffix}"
    _table().to_csv(path, index=False, sep="\t" if suffix == ".tsv" else ",")
    pd.testing.assert_frame_equal(read_ranks(path), _table())


@pytest.mark.skipif(
    importlib.util.find_spec("pyarrow") is None and importlib.util.find_spec("fastparquet") is None,
    reason="no Parquet engine installed",
)
def test_parquet_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "ranks.parquet"
    _table().to_parquet(path)
    pd.testing.assert_frame_equal(read_ranks(path), _table())


def test_error_on_unknown_suffix(tmp_path: Path) -> None:
    message = "rank file must end in .csv, .csv.gz, .tsv or .parquet, got 'ranks.json'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        read_ranks(tmp_path / "ranks.json")


def test_error_on_missing_columns() -> None:
    message = (
        "a rank table needs the columns ['head', 'relation', 'tail', 'side', 'optimistic', 'pessimistic'], "
        "missing ['side', 'optimistic']"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RankRecords.from_frame(_table().drop(columns=["side", "optimistic"]))


@pytest.mark.parametrize(("side", "bad"), [(["head", "both", "tail"], "'both'"), ([0, 3, 1], "3")])
def test_error_on_bad_side(side: list, bad: str) -> None:
    message = f"rank table: column 'side' row 1 = {bad} must be 'head' / 'tail' / 'relation' (or 0 / 1 / 2)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RankRecords.from_frame(_table().assign(side=side))


# every untrusted value the table may hold is refused, naming the column and the first bad row
UNTRUSTED = [
    ("tail", [2, -1, 1], "column 'tail' row 1 = -1 is not an integer >= 0"),
    ("optimistic", [1, np.nan, 5], "column 'optimistic' row 1 = nan is not an integer >= 1"),  # an empty cell
    ("optimistic", [1, 0, 5], "column 'optimistic' row 1 = 0 is not an integer >= 1"),
    ("pessimistic", [1, -1, 5], "column 'pessimistic' row 1 = -1 is not an integer >= 1"),
    ("optimistic", [1, 2.5, 5], "column 'optimistic' row 1 = 2.5 is not an integer >= 1"),
    ("head", ["0", "x", "3"], "column 'head' row 1 = 'x' is not an integer >= 0"),
    ("num_candidates", [9, 3, 9], "row 1 {'head': 0, 'relation': 1, 'tail': 2, 'optimistic': 2, 'pessimistic': 4, "
     "'side': 1, 'num_candidates': 3}: pessimistic must be <= num_candidates"),
    ("pessimistic", [1, 1, 5], "row 1 {'head': 0, 'relation': 1, 'tail': 2, 'optimistic': 2, 'pessimistic': 1, "
     "'side': 1, 'num_candidates': 9}: optimistic must be <= pessimistic"),
    ("realistic", [1.0, 2.0, 5.0], "row 1 {'head': 0, 'relation': 1, 'tail': 2, 'optimistic': 2, 'pessimistic': 4, "
     "'side': 1, 'num_candidates': 9}: realistic must be the mean rank"),
    ("task_index", [0, -2, 1], "column 'task_index' row 1 = -2 is not an integer >= -1"),
]  # fmt: skip


@pytest.mark.parametrize(("column", "values", "message"), UNTRUSTED, ids=[m[:40] for _c, _v, m in UNTRUSTED])
def test_untrusted_cells_are_refused(column: str, values: list, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape('rank table: ' + message)}$"):
        RankRecords.from_frame(_table().assign(**{column: values}))


def test_a_blank_optimistic_cell_read_from_csv_is_refused(tmp_path: Path) -> None:
    """The reported case: one empty optimistic cell used to become -2**63 and count as a hit@1."""
    path = tmp_path / "ranks.csv"
    _table().to_csv(path, index=False)
    lines = path.read_text().splitlines()
    cells = lines[2].split(",")
    cells[4] = ""  # optimistic of row 1
    lines[2] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"column 'optimistic' row 1 = nan is not an integer >= 1"):
        RankRecords.from_frame(read_ranks(path))


def test_a_rank_path_is_checked_before_anything_is_ranked(tmp_path, monkeypatch) -> None:
    import importlib.util

    from kgeval.records import check_rank_path

    assert check_rank_path(tmp_path / "r.csv.gz") == tmp_path / "r.csv.gz"
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        check_rank_path(tmp_path / "folder.csv")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_rank_path(tmp_path / "absent" / "r.csv")
    with pytest.raises(ValueError, match="must end in .csv, .csv.gz, .tsv or .parquet"):
        check_rank_path(tmp_path / "r.xlsx")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyarrow", "fastparquet") else real(name, *a))  # fmt: skip
    with pytest.raises(ValueError, match=r"\.parquet needs pyarrow"):
        check_rank_path(tmp_path / "r.parquet")


def test_labels_read_back_as_text(tmp_path) -> None:
    """Zero-padded labels (WN18RR's synset ids) keep their zeros through a CSV rank table."""
    import pandas as pd

    from kgeval.records import read_ranks, write_ranks

    frame = pd.DataFrame({"head": [0], "relation": [0], "tail": [1], "side": ["tail"], "optimistic": [1],
                          "pessimistic": [1], "num_candidates": [3], "head_label": ["00012345"],
                          "relation_label": ["007"], "tail_label": ["01"]})  # fmt: skip
    back = read_ranks(write_ranks(frame, tmp_path / "r.csv"))
    assert back[["head_label", "relation_label", "tail_label"]].iloc[0].tolist() == ["00012345", "007", "01"]
    assert back["head"].dtype.kind == "i"
