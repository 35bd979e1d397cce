"""RankRecords: the one per-task table (a row per ranking task), its checked construction, views and files.

Accumulators emit it, results keep it, rank files read into it, and every analysis reads it. Columns: the task's
triple ``head`` / ``relation`` / ``tail``, ``side`` (0 = head task, 1 = tail task, 2 = relation task),
``optimistic`` / ``pessimistic`` ranks, ``num_candidates`` and ``task_index`` (the triple's row in the evaluated
triples, -1 where unknown).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import torch

from kgeval._checks import check_rank_records, check_writable_file, plain
from kgeval.typing import ENTITY_TARGETS, TARGETS, RankType, Target

__all__ = [
    "PROVENANCE_COLUMNS",
    "RANK_TABLE_COLUMNS",
    "RankRecords",
    "rank_records",
    "ranks_of_type",
    "read_ranks",
    "settings_of",
    "table_provenance",
]

#: columns a rank table (CSV / Parquet, or a DataFrame) must have; ``num_candidates``, ``task_index`` and
#: ``realistic`` are optional
RANK_TABLE_COLUMNS: tuple[str, ...] = ("head", "relation", "tail", "side", "optimistic", "pessimistic")

#: what a rank table written by the command line records of its evaluation, one column each, the same value on
#: every row (``setting`` excepted: a temporal table holds the rows of each filter setting): the model's class, the
#: dataset's name and fingerprint (:func:`kgeval.datasets.dataset_fingerprint`), the split, the splits it was
#: filtered by (``train+valid+test``), the filter setting (``filtered``; ``time-aware`` / ``static`` / ``raw``) and
#: when it was evaluated (ISO 8601, UTC). Optional; readers that need none of them ignore them.
PROVENANCE_COLUMNS: tuple[str, ...] = ("model", "dataset", "dataset_fingerprint", "split", "filtered_by", "setting",
                                       "evaluated_at")  # fmt: skip
#: text columns of a rank table besides the provenance: the labels
LABEL_COLUMNS: tuple[str, ...] = ("head_label", "relation_label", "tail_label", "time_label")

Ranks = TypeVar("Ranks", np.ndarray, torch.Tensor)


def ranks_of_type(rank_type: RankType, optimistic: Ranks, pessimistic: Ranks) -> Ranks:
    """The float64 ranks of one rank type from integer optimistic and pessimistic ranks (numpy or torch): the
    realistic rank is their mean, exact as a half-integer."""
    if isinstance(optimistic, torch.Tensor):
        low, high = optimistic.to(torch.float64), pessimistic.to(torch.float64)
    else:
        low, high = np.asarray(optimistic, dtype=np.float64), np.asarray(pessimistic, dtype=np.float64)
    if rank_type == "optimistic":
        return low
    if rank_type == "pessimistic":
        return high
    return (low + high) / 2.0


@dataclass(frozen=True, eq=False)
class RankRecords:
    """One row per ranking task, as numpy columns of length n (build with :meth:`from_columns`, which checks them).

    Read a column as an attribute or by name (``records.optimistic``, ``records["side"]``); ``len(records)`` is n.
    """

    head: np.ndarray  #: int64 (n,); -1 where the triple is unknown
    relation: np.ndarray  #: int64 (n,)
    tail: np.ndarray  #: int64 (n,)
    side: np.ndarray  #: int8 (n,): 0 = head task, 1 = tail task, 2 = relation task (the index into TARGETS)
    optimistic: np.ndarray  #: int64 (n,), 1-based
    pessimistic: np.ndarray  #: int64 (n,), >= optimistic
    num_candidates: np.ndarray | None  #: int64 (n,), >= pessimistic; None where unknown (a rank table without it)
    task_index: np.ndarray  #: int64 (n,): row of the triple in the evaluated triples; -1 where unknown

    __iter__ = None  # a table, not a sequence of rows: read columns by name

    # -- construction -----------------------------------------------------------------------------------------
    @classmethod
    def from_columns(
        cls, columns: Mapping[str, Any] | RankRecords, source: str = "rank records", *, unknown_ids: bool = True
    ) -> RankRecords:
        """Records from column arrays, every column checked (``kgeval._checks.check_rank_records``).

        Parameters
        ----------
        columns : mapping of str to array-like of shape (n,)
            ``head``, ``relation``, ``tail``, ``side`` (0 / 1 / 2), ``optimistic``, ``pessimistic``; optional
            ``num_candidates``, ``task_index`` (default -1) and ``realistic`` (checked, then dropped).
        source : str
            Names the records in error messages.
        unknown_ids : bool, default=True
            Accept -1 for an unknown triple or task_index (an accumulator updated without triples records them).
        """
        if isinstance(columns, RankRecords):
            return columns
        if not isinstance(columns, Mapping):
            raise ValueError(f"{source} must map column names to arrays, got {type(columns).__name__}")
        missing = [name for name in RANK_TABLE_COLUMNS if name not in columns]
        if missing:
            raise ValueError(f"{source} lack the columns {missing}")
        checked = check_rank_records(columns, source, unknown_task_index=True, unknown_triples=unknown_ids)
        if "task_index" not in checked:
            checked["task_index"] = np.full(len(checked["side"]), -1, dtype=np.int64)
        checked.setdefault("num_candidates", None)  # type: ignore[arg-type]
        return cls(**checked)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, source: str = "rank table") -> RankRecords:
        """Records from a rank table (the layout of ``results.ranks_df()``; sides by name or code 0 / 1 / 2),
        every column checked; ValueError naming the first bad row: ids integers >= 0, 1 <= optimistic <=
        pessimistic (<= num_candidates where given), realistic (where given) their mean; an empty or NaN cell is
        never read as a number. -1 stands for an unknown id or task_index, as in the tables ``ranks_df()`` writes for
        an evaluation without triples (``evaluate_scores``, an accumulator updated without them); the analyses that
        need ids refuse such records (:meth:`require_known`)."""
        missing = [name for name in RANK_TABLE_COLUMNS if name not in frame.columns]
        if missing:
            raise ValueError(f"a {source} needs the columns {list(RANK_TABLE_COLUMNS)}, missing {missing}")
        if "setting" in frame.columns and frame["setting"].nunique() > 1:
            held = ", ".join(map(str, pd.unique(frame["setting"])))
            raise ValueError(
                f"the {source} holds the ranks of several filter settings ({held}): read one at a time "
                "(kgeval.records.settings_of, or TemporalRankBasedMetricResults.from_rank_table)"
            )
        optional = ("num_candidates", "task_index", "realistic")
        columns = {name: frame[name].to_numpy() for name in (*RANK_TABLE_COLUMNS, *optional) if name in frame.columns}
        columns["side"] = _side_codes(frame["side"], source)
        return cls.from_columns(columns, source)

    @classmethod
    def from_tensors(
        cls,
        target: Target,
        optimistic: torch.Tensor,
        pessimistic: torch.Tensor,
        num_candidates: torch.Tensor,
        triples: torch.Tensor,
        task_index: torch.Tensor,
    ) -> RankRecords:
        """The records of one side's tasks from trusted tensors (an accumulator's states), moved to the host."""
        return cls.from_arrays(target, *(value.cpu().numpy() for value in (optimistic, pessimistic, num_candidates,
                                                                             triples, task_index)))  # fmt: skip

    @classmethod
    def from_arrays(
        cls,
        target: Target,
        optimistic: np.ndarray,
        pessimistic: np.ndarray,
        num_candidates: np.ndarray,
        triples: np.ndarray,
        task_index: np.ndarray,
    ) -> RankRecords:
        """:meth:`from_tensors` of host arrays (int64; ``triples`` (n, 3)), taken as they are (not copied)."""
        return cls(
            head=triples[:, 0].copy(),
            relation=triples[:, 1].copy(),
            tail=triples[:, 2].copy(),
            side=np.full(len(triples), TARGETS.index(target), dtype=np.int8),
            optimistic=optimistic,
            pessimistic=pessimistic,
            num_candidates=num_candidates,
            task_index=task_index,
        )

    @classmethod
    def concat(cls, parts: Sequence[RankRecords]) -> RankRecords:
        """The rows of ``parts``, in order (num_candidates kept only if every part has it)."""
        if not parts:
            raise ValueError("no records to concatenate")
        columns: dict[str, Any] = {}
        for name in cls.column_names():
            values = [getattr(part, name) for part in parts]
            columns[name] = None if any(value is None for value in values) else np.concatenate(values)
        return cls(**columns)

    # -- columns ----------------------------------------------------------------------------------------------
    @staticmethod
    def column_names() -> tuple[str, ...]:
        """Every column, in table order."""
        return tuple(field.name for field in fields(RankRecords))

    def columns(self) -> dict[str, np.ndarray]:
        """The present columns by name (``num_candidates`` left out where unknown)."""
        return {name: value for name in self.column_names() if (value := getattr(self, name)) is not None}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self:
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self.column_names() and getattr(self, str(name)) is not None

    def __len__(self) -> int:
        return len(self.side)

    def __repr__(self) -> str:
        return f"RankRecords({len(self)} tasks, sides {sorted(set(self.sides()))})"

    def equals(self, other: RankRecords) -> bool:
        """Same columns with the same values."""
        mine, theirs = self.columns(), other.columns()
        return mine.keys() == theirs.keys() and all(np.array_equal(mine[name], theirs[name]) for name in mine)

    @property
    def triples(self) -> np.ndarray:
        """int64 (n, 3): each task's (head, relation, tail)."""
        return np.column_stack([self.head, self.relation, self.tail]).astype(np.int64, copy=False)

    def ranks(self, rank_type: RankType) -> np.ndarray:
        """float64 (n,): the ranks of one rank type."""
        return ranks_of_type(rank_type, self.optimistic, self.pessimistic)

    def sides(self) -> tuple[Target, ...]:
        """The target sides present, in the order of kgeval.typing.TARGETS."""
        present = set(np.unique(self.side).tolist())
        return tuple(target for code, target in enumerate(TARGETS) if code in present)

    def require_known(self, columns: Sequence[str], what: str) -> RankRecords:
        """These records, when no task has -1 (unknown) in ``columns`` (id columns, ``task_index``); else a ValueError
        saying that ``what`` needs them -- never a group "-1" or an id that wraps around to the last entity."""
        for name in columns:
            unknown = int(np.count_nonzero(self[name] < 0))
            if unknown:
                raise ValueError(
                    f"{what} needs each task's {name}, but {unknown:,} of {len(self):,} tasks have none (-1: an "
                    "evaluation without triples, such as evaluate_scores or an accumulator updated without them)"
                )
        return self

    def triple_keys(self) -> np.ndarray:
        """int64 (n,): a key per task naming its evaluation triple, equal for the head and the tail task of one
        triple -- the pairing of :meth:`paired` and the resampling unit of :mod:`kgeval.analysis.stats`.

        The ``task_index`` where every task has one; else the (head, relation, tail) triple and its occurrence number
        among the tasks of its side, where every triple is known (duplicate triples have equal ranks, so any pairing
        of their tasks gives the same values); else, for tasks of one side only, the task's position (each task a
        triple of its own). A ValueError where none of these tells which tasks belong to one triple.
        """
        if np.all(self.task_index >= 0):
            return self.task_index
        triples = self.triples
        if np.all(triples >= 0):
            frame = pd.DataFrame({"h": triples[:, 0], "r": triples[:, 1], "t": triples[:, 2], "side": self.side})
            occurrence = frame.groupby(["h", "r", "t", "side"], sort=False).cumcount().to_numpy()
            _, key = np.unique(np.column_stack([triples, occurrence]), axis=0, return_inverse=True)
            return key.reshape(-1).astype(np.int64)
        if len(self.sides()) <= 1:
            return np.arange(len(self), dtype=np.int64)
        raise ValueError(
            f"the records hold {' and '.join(self.sides())} tasks without a task_index or triple (-1), so nothing "
            "says which tasks rank the same triple: resample one side at a time (e.g. the key 'tail.mrr'), or give "
            "task_index (and triples) to MetricAccumulator.update"
        )

    def select(self, rows: np.ndarray) -> RankRecords:
        """The records of some rows (a boolean mask or integer indices), in that order."""
        columns: dict[str, Any] = {name: None if value is None else value[rows] for name, value in self._all().items()}
        return RankRecords(**columns)

    def of_side(self, target: Target) -> RankRecords:
        """The records of one side's tasks."""
        return self.select(self.side == TARGETS.index(target))

    def _all(self) -> dict[str, np.ndarray | None]:
        return {name: getattr(self, name) for name in self.column_names()}

    def to_frame(self) -> pd.DataFrame:
        """The columns as a DataFrame (``side`` as its code); ``results.ranks_df()`` adds labels and realistic ranks."""
        return pd.DataFrame(self.columns())

    def to_lists(self) -> dict[str, list[int]]:
        """The columns as lists of Python ints (a JSON document's ``records``)."""
        return {name: value.tolist() for name, value in self.columns().items()}

    # -- head and tail tasks of one triple --------------------------------------------------------------------
    def paired(self, rank_type: RankType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(triples (n, 3), head ranks (n,), tail ranks (n,)): the head and tail task of each triple, paired
        (relation tasks, if any, are left out).

        Tasks pair by :meth:`triple_keys`; every task's triple must be known (stratified metrics look its entities
        and relation up).
        """
        if len(self) == 0:
            raise ValueError("the results hold no ranking tasks")
        self.require_known(("head", "relation", "tail"), "pairing head and tail tasks by triple")
        entity_tasks = self.select(self.side != TARGETS.index("relation"))
        if entity_tasks.sides() != ENTITY_TARGETS:
            raise ValueError(
                f"stratified metrics need the head and the tail task of every triple, got {self.sides()[0]} tasks "
                "only (evaluate with targets=('head', 'tail'))"
            )
        return entity_tasks._paired_entity_tasks(rank_type)

    def _paired_entity_tasks(self, rank_type: RankType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        triples, side = self.triples, self.side
        key = self.triple_keys()
        order = np.lexsort((side, key))  # by key, head task first
        key, side, triples, ranks = key[order], side[order], triples[order], self.ranks(rank_type)[order]
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


def _side_codes(side: pd.Series, source: str) -> np.ndarray:
    """Sides as int8 codes 0 = head, 1 = tail, 2 = relation, from their names or the codes themselves."""
    if pd.api.types.is_numeric_dtype(side) and not pd.api.types.is_bool_dtype(side):
        codes = side.to_numpy(dtype=np.float64)
    else:
        codes = side.astype(str).str.lower().map({name: code for code, name in enumerate(TARGETS)}).to_numpy()
    valid = pd.notna(codes) & np.isin(codes, range(len(TARGETS)))
    if not valid.all():
        row = int(np.flatnonzero(~valid)[0])
        raise ValueError(
            f"{source}: column 'side' row {row} = {plain(side.iloc[row])!r} must be 'head' / 'tail' / 'relation' "
            "(or 0 / 1 / 2)"
        )
    return codes.astype(np.int8)


# -- files and sources ----------------------------------------------------------------------------------------
def read_ranks(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a rank table written with ``DataFrame.to_csv`` (``.csv``, ``.csv.gz``, ``.tsv``) or ``to_parquet``
    (``.parquet``), as stored; check it with :meth:`RankRecords.from_frame`."""
    path = Path(path)
    kind = _table_kind(path)
    try:
        return _read_table(path, kind)
    except FileNotFoundError:
        raise
    except (OSError, EOFError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise ValueError(f"cannot read the rank table {path}: {' '.join(str(error).split())}") from error


#: compressions pandas reads and writes by a text file's last suffix
_COMPRESSIONS = ("", ".gz", ".bz2", ".xz", ".zst", ".zip")


def _table_kind(path: Path) -> str:
    """ "parquet", "csv" or "tsv" by the file's last suffixes (``.csv.gz`` is csv, ``x.tsv_old.csv`` too);
    ValueError for any other."""
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    for kind in ("csv", "tsv"):
        if name.endswith(tuple(f".{kind}{compression}" for compression in _COMPRESSIONS)):
            return kind
    raise ValueError(f"rank file must end in .csv, .tsv (either maybe compressed: .csv.gz, ...) or .parquet, got "
                     f"{path.name!r}")  # fmt: skip


def _read_table(path: Path, kind: str) -> pd.DataFrame:
    """The table at ``path`` of :func:`_table_kind` ``kind``."""
    if kind == "parquet":
        return pd.read_parquet(path)
    # csv or tsv: labels stay text as written (WN18RR's "00012345" keeps its zeros; "NA", "null", "nan" and "" are
    # labels, not missing values); only an empty cell of a number column is missing (then refused by from_frame)
    labels = {column: str for column in (*LABEL_COLUMNS, *PROVENANCE_COLUMNS)}
    numbers = (*RANK_TABLE_COLUMNS, "realistic", "num_candidates", "task_index", "time")
    return pd.read_csv(path, sep="\t" if kind == "tsv" else ",", dtype=labels, keep_default_na=False,
                       na_values={column: [""] for column in numbers})  # fmt: skip


def settings_of(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rows of each filter setting of a rank table, by setting, in the order they first occur: a temporal
    table holds the time-aware, static and raw ranks of one evaluation, tagged by its ``setting`` column. A table
    without that column is one setting, ``""``."""
    if "setting" not in frame.columns:
        return {"": frame}
    return {str(setting): part.reset_index(drop=True)
            for setting, part in frame.groupby("setting", sort=False)}  # fmt: skip


def table_provenance(frame: pd.DataFrame) -> dict[str, str]:
    """What a rank table records of its evaluation (:data:`PROVENANCE_COLUMNS`): each such column whose value is
    the same on every row, as text (``setting`` where the table holds one); empty for a table without them."""
    found = {}
    for column in PROVENANCE_COLUMNS:
        if column in frame.columns and len(frame) and frame[column].nunique(dropna=False) == 1:
            found[column] = str(frame[column].iloc[0])
    return found


def check_rank_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a rank table can be written there (a suffix :func:`read_ranks` reads,
    an existing folder); else a ValueError / FileNotFoundError that says why."""
    path = Path(path)
    parquet = _table_kind(path) == "parquet"
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write the rank table {path}: its folder {path.parent} does not exist")
    check_writable_file(path, "the rank table")  # not a folder, and its folder takes a new file
    if parquet and importlib.util.find_spec("pyarrow") is None and importlib.util.find_spec("fastparquet") is None:
        raise ValueError(f"cannot write the rank table {path}: .parquet needs pyarrow (pip install pyarrow)")
    return path


def write_ranks(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a rank table as :func:`read_ranks` reads it back, by the file's suffix: ``.csv`` / ``.csv.gz`` (commas),
    ``.tsv`` / ``.tsv.gz`` (tabs), ``.parquet`` (needs pyarrow); without the index. The folder must exist. Returns
    the path written."""
    path = check_rank_path(path)
    kind = _table_kind(path)
    if kind == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, sep="\t" if kind == "tsv" else ",", index=False)
    return path


def rank_records(results: Any) -> RankRecords:
    """The records of :class:`kgeval.RankBasedMetricResults` (its ``records``) or of a rank table (a DataFrame)."""
    if isinstance(results, pd.DataFrame):
        return RankRecords.from_frame(results)
    records = getattr(results, "records", None)
    if not hasattr(results, "data") or not isinstance(records, RankRecords | type(None)):
        raise TypeError(f"results must be RankBasedMetricResults or a rank DataFrame, got {type(results).__name__}")
    if records is None:
        raise ValueError(
            "the results keep no per-task rank records; evaluate with RankBasedEvaluator(keep_records=True)"
        )
    return records
