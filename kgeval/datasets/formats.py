"""What a dataset folder holds, told from its file names and the first data line of its train file -- never from
reading it whole: labelled triples, labelled quadruples, a RE-Net-format folder of integer ids, an inductive
dataset, or a layout kgeval does not read. :func:`kgeval.datasets.load_dataset` picks its reader by it, and each
format-specific reader refuses a folder of another format with one sentence naming the call that reads it
(:func:`refuse_other_format`).

A folder of integer ids beside ``entity2id.txt`` / ``relation2id.txt`` is never read as labels: numbered again by
sorted label (``'0', '1', '10', '100', ...``) its ids would be scrambled while every count stayed right.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kgeval.datasets.reading import FILE_PATTERNS, holds_quadruples, iter_data_lines

__all__ = [
    "ID_FILES",
    "FolderFormat",
    "folder_format",
    "id_columns",
    "is_inductive_folder",
    "is_renet_folder",
    "refuse_other_format",
]

#: the id files of a RE-Net folder, by kind
ID_FILES = {"entity": "entity2id.txt", "relation": "relation2id.txt"}
#: an integer id as id files and RE-Net splits write it
_ID = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class FolderFormat:
    """What a folder holds.

    Attributes
    ----------
    kind : str
        "triples", "quadruples", "renet" (integer ids beside id files, four or five columns), "inductive" (a
        training and an inference graph), "id-triples" (integer ids of triples beside id files: not read) or
        "fully-inductive" (InGram's train / msg / valid / test, relations new at inference).
    description : str
        The kind in words, for messages ("a RE-Net-format folder of integer ids ...").
    reader : str or None
        The format-specific call that reads it (``kgeval.datasets.load_renet_folder``); None for a layout kgeval
        does not read.
    refusal : str
        For a layout kgeval does not read, the sentence that says so and what to do; empty otherwise.
    """

    kind: str
    description: str
    reader: str | None
    refusal: str = ""

    def refuse(self, folder: str | os.PathLike[str], reader: str = "kgeval.datasets.load_dataset") -> ValueError:
        """The error of ``reader`` handed a folder of this format: what the folder holds and the call that reads
        it (or that none does)."""
        where = f"{os.fspath(folder)} holds {self.description}"
        if self.reader is None:
            return ValueError(f"{where}: {self.refusal}")
        return ValueError(f"{where}, which {reader} does not read: read it with kgeval.datasets.load_dataset or "
                          f"{self.reader}")  # fmt: skip


_FORMATS = {
    "triples": FolderFormat("triples", "labelled triples", "kgeval.datasets.load_tsv_dataset"),
    "quadruples": FolderFormat(
        "quadruples", "labelled (head, relation, tail, time) quadruples", "kgeval.datasets.load_temporal_tsv"
    ),
    "renet": FolderFormat(
        "renet",
        "a RE-Net-format folder of integer ids (head, relation, tail, time ids beside "
        "entity2id.txt and relation2id.txt)",
        "kgeval.datasets.load_renet_folder",
    ),
    "inductive": FolderFormat(
        "inductive", "an inductive dataset (train and inference graphs)", "kgeval.datasets.load_inductive_dataset"
    ),
    "id-triples": FolderFormat(
        "id-triples",
        "integer ids of triples beside entity2id.txt and relation2id.txt",
        None,
        "kgeval reads folders of ids in RE-Net's format (quadruples) only, and never "
        "reads ids as labels; write the id files' labels in place of the ids to read it as "
        "labelled triples",
    ),
    "fully-inductive": FolderFormat(
        "fully-inductive",
        "a fully inductive dataset (InGram's layout: train, msg, valid and test files, relations new at inference)",
        "kgeval.datasets.load_fully_inductive_folder",
    ),
}


def _has_file(folder: Path, name: str) -> bool:
    """Whether ``folder`` holds ``name`` under one of :data:`FILE_PATTERNS` (``.txt``, ``.txt.gz``, ...)."""
    return any((folder / pattern.format(split=name)).is_file() for pattern in FILE_PATTERNS)


def is_inductive_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds an inductive dataset: a train file and an inference file (any of
    :data:`kgeval.datasets.reading.FILE_PATTERNS`)."""
    path = Path(folder)
    return _has_file(path, "train") and _has_file(path, "inference")


def id_columns(folder: str | os.PathLike[str]) -> int | None:
    """The number of fields of the first data line of ``train.txt`` where the folder holds ``entity2id.txt`` and
    ``relation2id.txt`` and every field of that line is an integer (a folder of ids); else None."""
    path = Path(folder)
    if not all((path / name).is_file() for name in (*ID_FILES.values(), "train.txt")):
        return None
    for _, line in iter_data_lines(path, "train.txt", str(path / "train.txt")):
        fields = [field.strip() for field in line.split("\t")]
        return len(fields) if all(_ID.fullmatch(field) for field in fields) else None
    return None


def is_renet_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a RE-Net-format dataset: ``entity2id.txt``, ``relation2id.txt`` and a
    ``train.txt`` whose first data line is four or more integer ids (``stat.txt`` optional: xERTE's folders have
    none, the id files give the counts)."""
    columns = id_columns(folder)
    return columns is not None and columns >= 4


def folder_format(folder: str | os.PathLike[str]) -> FolderFormat:
    """What ``folder`` holds, checked in this order: a ``msg`` file (InGram's fully inductive layout), a train and an
    inference file (inductive), integer ids beside the id files (RE-Net's format, or ids of triples), a train file
    whose first data line has four fields (labelled quadruples), else labelled triples."""
    path = Path(folder)
    if _has_file(path, "msg"):
        return _FORMATS["fully-inductive"]
    if is_inductive_folder(path):
        return _FORMATS["inductive"]
    columns = id_columns(path)
    if columns is not None:
        return _FORMATS["renet" if columns >= 4 else "id-triples"]
    return _FORMATS["quadruples" if holds_quadruples(path) else "triples"]


def refuse_other_format(folder: str | os.PathLike[str], reads: tuple[str, ...], reader: str) -> None:
    """A ValueError naming what ``folder`` holds and the call that reads it, unless its kind
    (:func:`folder_format`) is one of ``reads`` -- the kinds ``reader`` reads, or leaves to its own line-by-line
    messages."""
    found = folder_format(folder)
    if found.kind not in reads:
        raise found.refuse(folder, reader)
