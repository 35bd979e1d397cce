"""Exported per-task ranks as tables: read a CSV / Parquet rank file and turn a rank table into record columns.

A rank table has one row per ranking task with the columns ``head``, ``relation``, ``tail`` (ids), ``side``
(``"head"`` / ``"tail"``, or 0 / 1 as in :data:`kgeval.results.RECORD_COLUMNS`), ``optimistic`` and
``pessimistic``; ``realistic``, ``num_candidates`` and ``task_index`` are optional. This is the layout of
``pandas.DataFrame(results.records)`` and of ``results.ranks_df()``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from kgeval.keys import TARGETS

__all__ = ["RANK_TABLE_COLUMNS", "read_ranks", "records_from_frame"]

#: columns a rank table must have
RANK_TABLE_COLUMNS: tuple[str, ...] = ("head", "relation", "tail", "side", "optimistic", "pessimistic")


def read_ranks(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a rank table written with ``DataFrame.to_csv`` (``.csv``, ``.csv.gz``) or ``to_parquet`` (``.parquet``).

    Parameters
    ----------
    path : str or path-like
        The file; the format follows its suffix.

    Returns
    -------
    DataFrame
        The table as stored (check it with :func:`records_from_frame`).
    """
    path = Path(path)
    suffixes = "".join(path.suffixes).lower()
    if suffixes.endswith(".parquet") or suffixes.endswith(".pq"):
        return pd.read_parquet(path)
    if ".csv" in suffixes or ".tsv" in suffixes:
        return pd.read_csv(path, sep="\t" if ".tsv" in suffixes else ",")
    raise ValueError(f"rank file must end in .csv, .csv.gz, .tsv or .parquet, got {path.name!r}")


def records_from_frame(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The record columns of a rank table, sides as 0 (head) / 1 (tail) and ``task_index`` -1 where unknown.

    Parameters
    ----------
    frame : DataFrame
        A rank table (see the module docstring).

    Returns
    -------
    records : dict of str to ndarray of shape (n,)
        ``head``, ``relation``, ``tail``, ``optimistic``, ``pessimistic``, ``task_index`` (int64) and ``side``
        (int8).
    """
    missing = [name for name in RANK_TABLE_COLUMNS if name not in frame.columns]
    if missing:
        raise ValueError(f"a rank table needs the columns {list(RANK_TABLE_COLUMNS)}, missing {missing}")
    records = {name: frame[name].to_numpy(dtype=np.int64) for name in RANK_TABLE_COLUMNS if name != "side"}
    ids = np.column_stack([records["head"], records["relation"], records["tail"]])
    if ids.size and ids.min() < 0:
        raise ValueError(f"rank table ids must be >= 0, got {int(ids.min())}")
    records["side"] = _side_codes(frame["side"])
    if "task_index" in frame.columns:
        records["task_index"] = frame["task_index"].to_numpy(dtype=np.int64)
    else:
        records["task_index"] = np.full(len(frame), -1, dtype=np.int64)
    return records


def _side_codes(side: pd.Series) -> np.ndarray:
    """Sides as int8 codes 0 = head, 1 = tail, from the strings "head" / "tail" or the codes themselves."""
    if pd.api.types.is_numeric_dtype(side):
        codes = side.to_numpy()
    else:
        codes = side.astype(str).str.lower().map({name: code for code, name in enumerate(TARGETS)}).to_numpy()
    valid = pd.notna(codes) & np.isin(codes, (0, 1))
    if not valid.all():
        bad = sorted({str(value) for value in side[~valid].unique()})
        raise ValueError(f"rank table side must be 'head' / 'tail' (or 0 / 1), got {bad}")
    return codes.astype(np.int8)
