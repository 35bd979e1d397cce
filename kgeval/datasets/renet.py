"""Temporal datasets in the format the forecasting field distributes them in: RE-Net's, which RE-GCN, CyGNet, TiRGN
and others read (YAGO, WIKI, ICEWS18, GDELT, ...) -- :func:`load_renet_folder`.

A folder holds ``train.txt`` / ``valid.txt`` / ``test.txt`` of tab-separated integer ids, ``head relation tail
time`` and often a fifth column (0 on every line: RE-Net's unused "label"); ``entity2id.txt`` and
``relation2id.txt`` of ``label<TAB>id`` lines, sometimes with more columns (YAGO's entities carry two dates); and
usually ``stat.txt``: the number of entities, of relations and, where it is not 0, of times. Fields may be padded
with spaces (ICEWS18's are). Without ``stat.txt`` (xERTE's folders: ICEWS14_forecasting, YAGO1830) the id files
give the counts, and the times are read as undeclared.

The counts are the ones the dataset declares, not those its splits happen to use: YAGO declares 10,623 entities,
of which 38 occur in no split -- candidates all the same, as in the field's own ranking code, so pessimistic ranks
under ties equal the field's. Times: where ``stat.txt`` declares ``T`` times and every time is an integer in
``[0, T)``, the time ids are those integers (YAGO's years 0..188); otherwise they are the positions of the
distinct times (ICEWS18's hours 0, 24, 48, ...), whose values and step (24) the dataset keeps
(:class:`kgeval.datasets.temporal.TimeAxis`). What was read and what was left out is listed in the dataset's
``notes``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from kgeval.datasets.formats import ID_FILES, folder_format, is_renet_folder
from kgeval.datasets.labelled import Duplicates, handle_duplicates
from kgeval.datasets.reading import SPLITS
from kgeval.datasets.temporal import TemporalDataset, TimeAxis, time_axis

__all__ = ["ID_FILES", "is_renet_folder", "load_renet_folder"]

#: the fields of a split line kgeval reads (any more are left out, and said so)
QUADRUPLE_FIELDS = ("head", "relation", "tail", "time")


def load_renet_folder(path: str | os.PathLike[str], name: str | None = None, *,
                      duplicates: Duplicates = "keep") -> TemporalDataset:  # fmt: skip
    """Read a RE-Net-format folder (see the module docstring) as it is distributed.

    Parameters
    ----------
    path : str or path-like
        The folder.
    name : str, optional
        Default: the folder's name.
    duplicates : {"keep", "merge"}, default="keep"
        As :func:`kgeval.datasets.load_temporal_tsv` (RE-GCN keeps them, the nec-research framework merges them).

    Returns
    -------
    TemporalDataset
        With the declared entity and relation counts (and time count, where declared), the id files' labels, the
        time axis, and ``notes`` saying which columns were read.

    Raises
    ------
    FileNotFoundError
        For a missing file (naming the files a RE-Net folder holds, and what the folder holds instead).
    ValueError
        For a folder of another format (naming it and its reader), a field that is not an integer, an id outside
        the declared counts, id files that disagree with ``stat.txt`` or do not number 0..n-1, or an empty split --
        each naming the file (and line).
    """
    folder = Path(path)
    if not is_renet_folder(folder):
        _refuse(folder)
    declared, notes = _counts(folder)
    vocabularies = {}
    for kind, file in ID_FILES.items():
        vocabulary, extra = _id_file(folder / file, kind, declared[0 if kind == "entity" else 1])
        vocabularies[kind] = vocabulary
        notes.append(f"{file}: label, id" + (f" ({extra} more column(s) left out)" if extra else ""))
    counts = (len(vocabularies["entity"]), len(vocabularies["relation"]), declared[2])
    rows, times = {}, {}
    for split in SPLITS:
        table, extra = _split_file(folder / f"{split}.txt")
        rows[split], times[split] = table[:, :3], table[:, 3]
        if split == "train":
            notes.append(f"{split}.txt: head, relation, tail, time ids" + (
                f" ({extra} more column(s) left out)" if extra else ""))  # fmt: skip
        _check_ids(rows[split], counts, folder / f"{split}.txt")
    axis, time_ids, as_declared = _time_ids(np.concatenate([times[split] for split in SPLITS]), counts[2])
    notes.append(f"times: {len(axis.labels):,} ids, " + (
        "the declared ones" if as_declared else
        f"the positions of the distinct times (values {axis.labels[0]}..{axis.labels[-1]}, step {axis.granularity:g})"
    ))  # fmt: skip
    quadruples = {split: torch.from_numpy(np.column_stack([rows[split], time_ids(times[split])])) for split in SPLITS}
    sources = {split: str(folder / f"{split}.txt") for split in SPLITS}
    quadruples = handle_duplicates(quadruples, duplicates, "quadruples", sources)
    return TemporalDataset(
        name=folder.name if name is None else name,
        train=quadruples["train"],
        valid=quadruples["valid"],
        test=quadruples["test"],
        entity_to_id=vocabularies["entity"],
        relation_to_id=vocabularies["relation"],
        time_to_id={label: index for index, label in enumerate(axis.labels)},
        sources=sources,
        times=axis,
        notes=tuple(notes),
        read_with={"duplicates": duplicates},
    )


def _refuse(folder: Path) -> None:
    """The error of a folder that is no RE-Net folder: the files it lacks, and the format it holds where it holds
    another (no file of a RE-Net folder beside its splits)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"dataset folder {str(folder)!r} does not exist or is not a directory")
    missing = [file for file in (*ID_FILES.values(), "train.txt") if not (folder / file).is_file()]
    found = folder_format(folder)
    if not missing:  # the files are there, but train.txt holds no quadruple of ids
        raise found.refuse(folder, "kgeval.datasets.load_renet_folder")
    own = any((folder / file).is_file() for file in (*ID_FILES.values(), "stat.txt"))
    other = (
        ""
        if own
        else f"; it holds {found.description}"
        + (f": read it with kgeval.datasets.load_dataset or {found.reader}" if found.reader else f" ({found.refusal})")
    )
    raise FileNotFoundError(f"{str(folder)!r} is not a RE-Net-format folder: no {', '.join(missing)} (it holds "
                            "train.txt, valid.txt, test.txt of integer ids, entity2id.txt, relation2id.txt and "
                            f"usually stat.txt){other}")  # fmt: skip


def _counts(folder: Path) -> tuple[tuple[int | None, int | None, int], list[str]]:
    """((entities, relations, times) declared by ``stat.txt``, the note saying so); without ``stat.txt``, (None,
    None, 0): the id files give the counts, no time count is declared."""
    if not (folder / "stat.txt").is_file():
        return (None, None, 0), ["no stat.txt: the counts are those of entity2id.txt and relation2id.txt, no time "
                                 "count"]  # fmt: skip
    declared = _declared_counts(folder / "stat.txt")
    return declared, [f"stat.txt: {declared[0]:,} entities, {declared[1]:,} relations"
                      + (f", {declared[2]:,} times" if declared[2] else " (no time count: 0)")]  # fmt: skip


def _fields(file: Path) -> pd.DataFrame:
    """The file's tab-separated fields as stripped strings (blank lines skipped; an empty file: no rows). Lines of
    more fields than the first (a trailing tab on some lines) are read whole, the fields a shorter line lacks left
    empty."""
    options = {"sep": "\t", "header": None, "dtype": str, "keep_default_na": False, "skip_blank_lines": True,
               "quoting": 3, "encoding": "utf-8"}  # fmt: skip
    try:
        table = pd.read_csv(file, **options)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except pd.errors.ParserError:  # uneven lines: read as wide as the widest
        with file.open(encoding="utf-8") as lines:
            widest = max(line.count("\t") for line in lines) + 1
        table = pd.read_csv(file, names=range(widest), **options).fillna("")
    return table.apply(lambda column: column.str.strip())


#: an integer id as the RE-Net files write it (ASCII digits, maybe negative)
_ID = re.compile(r"-?[0-9]+")


def _line_numbers(file: Path) -> list[int]:
    """The 1-based line numbers of the lines :func:`_fields` reads as rows (pandas skips the blank ones: empty, or
    spaces only), for messages that name a line."""
    with file.open(encoding="utf-8") as lines:
        return [number for number, line in enumerate(lines, start=1) if line.strip(" \r\n")]


def _integers(table: pd.DataFrame, file: Path) -> np.ndarray:
    """The table as int64, or a ValueError naming the first field that is not an integer id of int64's range (file
    and line)."""
    try:
        return table.to_numpy(dtype=np.int64)
    except (ValueError, OverflowError):
        for row, values in enumerate(table.itertuples(index=False)):
            for value in values:
                if not _ID.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
                    line = _line_numbers(file)[row]
                    raise ValueError(f"{file} line {line}: {value!r} is not an integer id of 64 bits") from None
        raise


def _declared_counts(file: Path) -> tuple[int, int, int]:
    """(entities, relations, times) of ``stat.txt``; 0 times where it declares none."""
    fields = file.read_text(encoding="utf-8").split()
    if len(fields) < 2 or not all(field.isdigit() for field in fields[:3]):
        raise ValueError(f"{file}: expected the counts of entities and relations (and times), got {fields[:3]}")
    counts = [int(field) for field in fields[:3]] + [0]
    return counts[0], counts[1], counts[2]


def _id_file(file: Path, kind: str, declared: int | None) -> tuple[dict[str, int], int]:
    """(label -> id, the number of columns beyond the two read) of an id file, whose ids must be 0..declared-1
    (0..n-1 for its n lines where nothing is declared), each once."""
    table = _fields(file)
    if table.shape[1] < 2:
        raise ValueError(f"{file}: expected label<TAB>id lines, got {table.shape[1]} field(s)")
    ids = _integers(table[[1]], file)[:, 0]
    expected = len(ids) if declared is None else declared
    if len(ids) != expected or sorted(ids.tolist()) != list(range(expected)):
        plural = "entities" if kind == "entity" else "relations"
        counted = (f"{len(ids):,} lines" if declared is None
                   else f"stat.txt declares {declared:,} {plural}")  # fmt: skip
        raise ValueError(f"{file}: {len(ids):,} {kind} ids ({len(set(ids.tolist())):,} distinct), but {counted}: "
                         f"each id 0..{expected - 1} must appear once")  # fmt: skip
    labels = table[0].tolist()
    if len(set(labels)) != len(labels):
        duplicated = next(label for label in labels if labels.count(label) > 1)
        raise ValueError(f"{file}: the {kind} label {duplicated!r} has more than one id")
    return dict(zip(labels, ids.tolist(), strict=True)), table.shape[1] - 2


def _split_file(file: Path) -> tuple[np.ndarray, int]:
    """((n, 4) int64 head, relation, tail, time ids, the number of columns beyond those four) of a split file."""
    if not file.is_file():
        raise FileNotFoundError(f"no {file.name} in {str(file.parent)!r} (a RE-Net folder holds train.txt, "
                                "valid.txt and test.txt)")  # fmt: skip
    table = _fields(file)
    if len(table) == 0:
        raise ValueError(f"{file} holds no quadruple")
    if table.shape[1] < len(QUADRUPLE_FIELDS):
        raise ValueError(f"{file} line 1: expected {len(QUADRUPLE_FIELDS)} tab-separated ids "
                         f"({', '.join(QUADRUPLE_FIELDS)}), got {table.shape[1]}")  # fmt: skip
    return _integers(table.iloc[:, :4], file), table.shape[1] - 4


def _check_ids(rows: np.ndarray, counts: tuple[int, int, int], file: Path) -> None:
    """A ValueError naming the first line of ``file`` whose ids lie outside the (entities, relations) counts."""
    bounds = np.array([counts[0], counts[1], counts[0]])
    bad = ((rows < 0) | (rows >= bounds)).any(axis=1)
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(f"{file} line {_line_numbers(file)[row]}: ids {rows[row].tolist()} outside the "
                         f"{counts[0]:,} entities and {counts[1]:,} relations of the id files"
                         + (" and stat.txt" if (file.parent / "stat.txt").is_file() else ""))  # fmt: skip


def _time_ids(times: np.ndarray, declared: int) -> tuple[TimeAxis, Callable[[np.ndarray], np.ndarray], bool]:
    """(the time axis, a function mapping an array of time values to ids, whether the ids are the declared ones):
    the declared ids where every time is one of them, else the positions of the distinct times."""
    if declared and times.min() >= 0 and times.max() < declared:
        labels = tuple(str(i) for i in range(declared))
        axis = TimeAxis(labels, tuple(range(declared)), "number")
        return axis, lambda values: values, True
    axis, ids = time_axis(str(value) for value in np.unique(times).tolist())
    lookup = np.array([ids[str(value)] for value in np.unique(times).tolist()], dtype=np.int64)
    distinct = np.unique(times)
    return axis, lambda values: lookup[np.searchsorted(distinct, values)], False
