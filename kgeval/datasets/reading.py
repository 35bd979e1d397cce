"""Reading label files: one file per split (``<split>.txt``, ``.txt.gz``, ``.tsv``, ``.tsv.gz``), one triple or
quadruple per line, with headers, comments and the errors that name the file and line (the rules are
:func:`kgeval.datasets.load_tsv_dataset`'s; a line of five fields is named as the interval-valued fact it looks
like). A folder's data files that no split is read from are named in one :class:`UnreadFilesWarning`, with why.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal

from kgeval.datasets.labelled import LabelledSplit, column_order, drop_unmatched_first_rows, is_header
from kgeval.exceptions import UnreadFilesWarning, warn_caller

__all__ = [
    "FILE_PATTERNS",
    "SPLITS",
    "ReadOptions",
    "UnreadFilesWarning",
    "holds_quadruples",
    "iter_data_lines",
    "read_splits",
    "unread_files",
]

#: The three splits every dataset folder holds, in this order.
SPLITS: tuple[str, ...] = ("train", "valid", "test")

#: File names tried for a split, in this order (``{split}`` is replaced by the split name).
FILE_PATTERNS: tuple[str, ...] = ("{split}.txt", "{split}.txt.gz", "{split}.tsv", "{split}.tsv.gz")


@dataclass(frozen=True)
class ReadOptions:
    sep: str = "\t"
    header: bool | Literal["auto"] = "auto"
    temporal: bool = False  #: read (head, relation, tail, time) quadruples instead of triples


#: the extensions of the files a split is read from; a folder's other files with one are data kgeval does not read
DATA_SUFFIXES: tuple[str, ...] = tuple(pattern.removeprefix("{split}") for pattern in FILE_PATTERNS)
#: the beginnings of the names of a dataset's documents (licence, provenance): no data, never reported
DOCUMENT_PREFIXES: tuple[str, ...] = ("license", "licence", "readme", "source", "copying", "notice", "citation",
                                      "changelog", "authors")  # fmt: skip
#: why kgeval does not read a data file, by a pattern of its name without the extension (the first match applies)
UNREAD_REASONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(train|valid|validation|dev|test)[_-]?neg(ative)?s?", re.IGNORECASE),
     "hard negatives for triple classification (a false triple per line, as CoDEx ships them), which link "
     "prediction does not read: it ranks the true triples of each split (triple classification reads them: "
     "kgeval.variants.load_split_with_negatives, docs/classification.md)"),
    (re.compile(r"(entity|relation|time)2id|entities|relations|times", re.IGNORECASE),
     "a list or id map of labels: kgeval numbers the labels of the split files itself (sorted, or as the "
     "entity_to_id / relation_to_id / time_to_id given to the loader)"),
)  # fmt: skip


def unread_files(folder: Path | Traversable, read: Iterable[str]) -> dict[str, str]:
    """The files directly in ``folder`` that look like data (a name ending as a split file's, ``.txt``, ``.txt.gz``,
    ``.tsv`` or ``.tsv.gz``; a document's -- ``LICENSE*``, ``README*``, ``SOURCE*``, ... -- aside) but are none of the
    files ``read`` (names), each with why kgeval does not read it (hard negatives for triple classification, a list
    or id map of labels; ``""`` for any other: none of this layout's files), in name order."""
    taken = set(read)
    found = {}
    for item in sorted(folder.iterdir(), key=lambda entry: entry.name):
        name = item.name
        suffix = next((suffix for suffix in DATA_SUFFIXES if name.lower().endswith(suffix)), None)
        if suffix is None or name in taken or name.lower().startswith(DOCUMENT_PREFIXES) or not item.is_file():
            continue
        stem = name[: -len(suffix)]
        found[name] = next((why for pattern, why in UNREAD_REASONS if pattern.fullmatch(stem)), "")
    return found


def _warn_unread(folder: Path | Traversable, display: str, read: Iterable[str], names: tuple[str, ...]) -> None:
    """One :class:`UnreadFilesWarning` naming the data files of ``folder`` that were not ``read``, grouped by why
    (:func:`unread_files`), where there are any."""
    unread = unread_files(folder, read)
    if not unread:
        return
    default = f"none of the files kgeval reads here ({', '.join(names)})"
    reasons: dict[str, list[str]] = {}
    for name, why in unread.items():
        reasons.setdefault(why or default, []).append(name)
    said = " -- ".join(f"{', '.join(files)}: {why}" for why, files in reasons.items())
    warn_caller(f"{display} holds files kgeval does not read -- {said}", UnreadFilesWarning)


#: the fields of a line of a triple file and of a quadruple file
_FIELDS: dict[bool, tuple[str, ...]] = {False: ("head", "relation", "tail"), True: ("head", "relation", "tail", "time")}


def read_splits(folder: Path | Traversable, display: str, options: ReadOptions,
                names: tuple[str, ...] = SPLITS) -> dict[str, LabelledSplit]:  # fmt: skip
    """The labels of the splits ``names`` (one file each, :data:`FILE_PATTERNS`), each file's first line dropped
    where it proves to be a header. The folder's other data files -- hard negatives, label lists, other splits --
    are named in one :class:`UnreadFilesWarning`, with why kgeval does not read them (:func:`unread_files`)."""
    splits = {split: _read_split(folder, split, display, options) for split in names}
    drop_unmatched_first_rows(splits)
    _warn_unread(folder, display, (_split_files(folder, split)[1][0] for split in names), names)
    return splits


def holds_quadruples(folder: Path, sep: str = "\t") -> bool:
    """Whether the first data line (not blank, not a comment) of the folder's train file has four fields: a
    temporal dataset of (head, relation, tail, time) quadruples. False without a train file or a data line."""
    _, found = _split_files(folder, "train")
    if not found:
        return False
    for _, line in iter_data_lines(folder, found[0], f"{folder}/{found[0]}"):
        return len(line.split(sep)) == len(_FIELDS[True])
    return False


def train_relations(folder: Path, sep: str = "\t") -> set[str]:
    """The second field of every data line of the folder's train file (its relations, and a header's second
    label): a cheap look at a dataset before reading it whole. A FileNotFoundError without a train file."""
    names, found = _split_files(folder, "train")
    if not found:
        raise FileNotFoundError(f"no train file in {str(folder)!r}; tried {', '.join(names)}")
    fields = (line.split(sep, 2) for _, line in iter_data_lines(folder, found[0], f"{folder}/{found[0]}"))
    return {parts[1].strip() for parts in fields if len(parts) > 1}


def _split_files(folder: Path | Traversable, split: str) -> tuple[list[str], list[str]]:
    """(the file names tried for ``split``, those that exist in ``folder``)."""
    names = [pattern.format(split=split) for pattern in FILE_PATTERNS]
    return names, [file_name for file_name in names if folder.joinpath(file_name).is_file()]


def iter_data_lines(folder: Path | Traversable, file_name: str, where: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of the file's data lines: blank lines and ``#`` comments skipped, spaces and
    carriage returns stripped from the ends (they are no part of a label; tabs may be fields)."""
    for line_number, line in _iter_lines(folder.joinpath(file_name), file_name.endswith(".gz"), where):
        line = line.strip(" \r\n")
        if line and not line.startswith("#"):
            yield line_number, line


def _read_split(folder: Path | Traversable, split: str, display: str, options: ReadOptions) -> LabelledSplit:
    """Read one split's labels; see :func:`load_tsv_dataset` for the rules."""
    names, found = _split_files(folder, split)
    if not found:
        raise FileNotFoundError(f"no {split} file in {display!r}; tried {', '.join(names)}")
    if len(found) > 1:
        raise ValueError(f"more than one {split} file in {display!r}: {', '.join(found)}; keep one")
    file_name = found[0]
    where = f"{display}/{file_name}"
    labels = LabelledSplit([], [], [], [], source=where, times=[] if options.temporal else None)
    field_names = _FIELDS[options.temporal]
    first, order = True, None
    for line_number, line in iter_data_lines(folder, file_name, where):
        fields = [field.strip() for field in line.split(options.sep)]
        if order is not None:
            fields = [fields[index] for index in order] if len(fields) == len(order) else fields
        if first and options.temporal and options.header in (True, "auto") and column_order(fields) is not None:
            first, order = False, column_order(fields)  # a header naming the columns, in any order
            labels.columns = tuple(field.strip() for field in fields)
            continue
        if first and (options.header is True or (options.header == "auto" and len(fields) == len(field_names)
                                                  and is_header(fields))):  # fmt: skip
            first = False
            continue
        if first:
            labels.first_row_may_be_header = options.header == "auto"
        first = False
        if len(fields) != len(field_names):
            separated = "tab-separated" if options.sep == "\t" else f"{options.sep!r}-separated"
            hint = _other_reader(options.temporal, len(fields))
            raise ValueError(
                f"{where} line {line_number}: expected {len(field_names)} {separated} fields "
                f"({', '.join(field_names)}), got {len(fields)}{hint}"
            )
        if not all(fields):
            empty = [name for name, field in zip(field_names, fields, strict=True) if not field]
            raise ValueError(f"{where} line {line_number}: empty {', '.join(empty)} label")
        labels.heads.append(fields[0])
        labels.relations.append(fields[1])
        labels.tails.append(fields[2])
        if labels.times is not None:
            labels.times.append(fields[3])
        labels.origins.append(f"{where} line {line_number}")
    return labels


def _other_reader(temporal: bool, count: int) -> str:
    """The sentence that points a file of the other kind (quadruples where triples are read, or back) to its
    reader."""
    if not temporal and count == 4:
        return ": a file of (head, relation, tail, time) quadruples is read by kgeval.datasets.load_temporal_tsv"
    if temporal and count == 3:
        return ": a file of (head, relation, tail) triples is read by kgeval.datasets.load_tsv_dataset"
    if count == 5:
        return (": five fields look like interval-valued temporal facts (head, relation, tail, start, end: a fact "
                "true from one time to another, as e.g. YAGO11k and Wikidata12k write them); kgeval reads triples "
                "(3 columns) and time-stamped quadruples (4 columns), not interval-valued facts yet")  # fmt: skip
    return ""


def _iter_lines(resource: Path | Traversable, compressed: bool, where: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line) of a UTF-8 file or resource (a leading byte-order mark dropped),
    gunzipped when ``compressed``; undecodable text and corrupt or truncated gzip data are a ValueError naming
    ``where`` and the line. Lines are decoded one by one, so the number is the line's own."""
    line_number = 0
    with resource.open("rb") as raw, contextlib.ExitStack() as stack:
        binary = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb")) if compressed else raw
        try:
            for line_number, data in enumerate(binary, start=1):
                try:
                    yield line_number, data.decode("utf-8-sig" if line_number == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(f"{where} line {line_number}: not UTF-8 text ({error.reason})") from error
        except (EOFError, OSError, zlib.error) as error:  # gzip.BadGzipFile is an OSError
            raise ValueError(f"{where}: corrupt or truncated gzip data after line {line_number} ({error})") from error
