"""Per-task rank records: read exported rank tables (CSV / Parquet), get record columns, pair head and tail tasks.

A rank table has one row per ranking task with the columns ``head``, ``relation``, ``tail`` (ids), ``side``
(``"head"`` / ``"tail"``, or 0 / 1 as in :data:`kgeval.results.RECORD_COLUMNS`), ``optimistic`` and
``pessimistic``; ``realistic``, ``num_candidates`` and ``task_index`` are optional. This is the layout of
``pandas.DataFrame(results.records)`` and of ``results.ranks_df()``. Metrics that combine the head and the tail
task of one triple (:mod:`kgeval.analysis.stratified`) pair them with :func:`pair_tasks`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kgeval._checks import check_rank_records, plain
from kgeval.keys import TARGETS, RankType

__all__ = ["RANK_TABLE_COLUMNS", "pair_tasks", "rank_records", "read_ranks", "records_from_frame"]

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


def records_from_frame(frame: pd.DataFrame, source: str = "rank table") -> dict[str, np.ndarray]:
    """The record columns of a rank table, checked, sides as 0 (head) / 1 (tail) and ``task_index`` -1 where
    unknown.

    Parameters
    ----------
    frame : DataFrame
        A rank table (see the module docstring).
    source : str, default="rank table"
        Names the table in error messages (e.g. its file).

    Returns
    -------
    records : dict of str to ndarray of shape (n,)
        ``head``, ``relation``, ``tail``, ``optimistic``, ``pessimistic``, ``task_index`` (and ``num_candidates``
        when the table has it) as int64, ``side`` as int8.

    Raises
    ------
    ValueError
        Naming the first bad row: ids must be integers >= 0, ranks integers with 1 <= optimistic <= pessimistic
        (<= num_candidates where given), realistic (where given) their mean, side head / tail (or 0 / 1); an empty
        or NaN cell is never read as a number.
    """
    missing = [name for name in RANK_TABLE_COLUMNS if name not in frame.columns]
    if missing:
        raise ValueError(f"a {source} needs the columns {list(RANK_TABLE_COLUMNS)}, missing {missing}")
    optional = ("num_candidates", "task_index", "realistic")
    columns = {name: frame[name].to_numpy() for name in (*RANK_TABLE_COLUMNS, *optional) if name in frame.columns}
    columns["side"] = _side_codes(frame["side"], source)
    records = check_rank_records(columns, source, unknown_task_index=True)
    if "task_index" not in records:
        records["task_index"] = np.full(len(frame), -1, dtype=np.int64)
    return records


def _side_codes(side: pd.Series, source: str) -> np.ndarray:
    """Sides as int8 codes 0 = head, 1 = tail, from the strings "head" / "tail" or the codes themselves."""
    if pd.api.types.is_numeric_dtype(side) and not pd.api.types.is_bool_dtype(side):
        codes = side.to_numpy(dtype=np.float64)
    else:
        codes = side.astype(str).str.lower().map({name: code for code, name in enumerate(TARGETS)}).to_numpy()
    valid = pd.notna(codes) & np.isin(codes, (0, 1))
    if not valid.all():
        row = int(np.flatnonzero(~valid)[0])
        raise ValueError(
            f"{source}: column 'side' row {row} = {plain(side.iloc[row])!r} must be 'head' / 'tail' (or 0 / 1)"
        )
    return codes.astype(np.int8)


def pair_tasks(records: Mapping[str, np.ndarray], rank_type: RankType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(triples (n, 3), head ranks (n,), tail ranks (n,)): the head and tail task of each triple, paired.

    Tasks pair by ``task_index``; when some index is unknown (-1), by (head, relation, tail) and occurrence
    number instead (duplicate triples have equal ranks, so any pairing of their tasks gives the same values).
    """
    side = records["side"]
    if len(side) == 0:
        raise ValueError("the results hold no ranking tasks")
    present = sorted({"head" if code == 0 else "tail" for code in np.unique(side).tolist()})
    if present != ["head", "tail"]:
        raise ValueError(
            f"stratified metrics need the head and the tail task of every triple, got {present[0]} tasks only "
            "(evaluate with targets=('head', 'tail'))"
        )
    triples = np.column_stack([records["head"], records["relation"], records["tail"]]).astype(np.int64)
    optimistic, pessimistic = records["optimistic"], records["pessimistic"]
    ranks = {"optimistic": optimistic, "pessimistic": pessimistic}.get(rank_type, (optimistic + pessimistic) / 2)
    key = _pairing_key(triples, side, records["task_index"])
    order = np.lexsort((side, key))  # by key, head task first
    key, side, triples, ranks = key[order], side[order], triples[order], ranks[order].astype(np.float64)
    paired = (key[:-1:2] == key[1::2]) & (side[:-1:2] == 0) & (side[1::2] == 1) if len(key) % 2 == 0 else [False]
    if not np.all(paired) or np.unique(key).size * 2 != len(key):
        raise ValueError(
            "stratified metrics need exactly one head and one tail task per triple; the records pair "
            f"{len(key)} tasks into {np.unique(key).size} triples"
        )
    heads, tails = slice(0, None, 2), slice(1, None, 2)
    if not np.array_equal(triples[heads], triples[tails]):
        raise ValueError("head and tail tasks with the same task_index belong to different triples")
    return triples[heads], ranks[heads], ranks[tails]


def _pairing_key(triples: np.ndarray, side: np.ndarray, task_index: np.ndarray) -> np.ndarray:
    """One int64 key per task, equal for the head and tail task of one triple."""
    if np.all(task_index >= 0):
        return task_index
    frame = pd.DataFrame({"h": triples[:, 0], "r": triples[:, 1], "t": triples[:, 2], "side": side})
    occurrence = frame.groupby(["h", "r", "t", "side"], sort=False).cumcount().to_numpy()
    _, key = np.unique(np.column_stack([triples, occurrence]), axis=0, return_inverse=True)
    return key.reshape(-1).astype(np.int64)


def rank_records(results: Any) -> Mapping[str, np.ndarray]:
    """The per-task record columns of :class:`kgeval.RankBasedMetricResults` or of a rank table.

    Parameters
    ----------
    results : RankBasedMetricResults or DataFrame

    Returns
    -------
    mapping of str to ndarray of shape (n,)
        At least ``head``, ``relation``, ``tail``, ``side``, ``optimistic``, ``pessimistic``, ``task_index``.
    """
    if isinstance(results, pd.DataFrame):
        return records_from_frame(results)
    records = getattr(results, "records", None)
    if not hasattr(results, "data") or not isinstance(records, Mapping | type(None)):
        raise TypeError(f"results must be RankBasedMetricResults or a rank DataFrame, got {type(results).__name__}")
    if records is None:
        raise ValueError(
            "the results keep no per-task rank records; evaluate with RankBasedEvaluator(keep_records=True)"
        )
    return records
