"""Labelled triples for triple classification: triples with a true / false label each, in a model's ids
(:class:`LabelledTriples`), read from a split and CoDEx's hard negatives beside it (:func:`load_split_with_negatives`),
made of a split and negatives drawn by :func:`draw_negatives` (:func:`split_with_drawn_negatives`), or read from a
``head relation tail label`` file as WN11 and FB13 ship them (:func:`read_labelled_triples`); a negative that is a
known triple is counted and warned about (:class:`KnownNegativesWarning`), then kept or dropped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from kgeval import _checks
from kgeval.datasets.reading import iter_data_lines
from kgeval.exceptions import KnownNegativesWarning, warn_caller
from kgeval.variants.classification.negatives import DrawnNegativesReport, NegativeStrategy, draw_negatives

__all__ = ["LabelledTriples", "load_split_with_negatives", "read_labelled_triples", "split_with_drawn_negatives"]

KnownNegatives = Literal["keep", "drop"]


@dataclass(frozen=True, eq=False)
class LabelledTriples:
    """Triples with a true / false label each, in a model's ids.

    Attributes
    ----------
    triples : LongTensor of shape (n, 3)
        (head, relation, tail) ids.
    labels : BoolTensor of shape (n,)
        True for a true triple, False for a false one.
    relation_labels : tuple of str, optional
        The label of each relation id (results then name relations by label).
    known_negatives : int, default=0
        Given negatives found among the known triples when they were read (warned; kept or dropped as asked).
    source : str, default=""
        Where the triples came from, for messages.
    drawn : DrawnNegativesReport, optional
        How the negatives were drawn, when they were (:func:`split_with_drawn_negatives`).
    """

    triples: torch.Tensor = field(repr=False)
    labels: torch.Tensor = field(repr=False)
    relation_labels: tuple[str, ...] | None = field(default=None, repr=False)
    known_negatives: int = 0
    source: str = ""
    drawn: DrawnNegativesReport | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        triples = _checks.check_triples(self.triples, "triples", num_entities=2**62)
        if not isinstance(self.labels, torch.Tensor) or self.labels.dtype != torch.bool or self.labels.dim() != 1:
            raise TypeError("labels must be a BoolTensor of shape (n,); LabelledTriples.from_labels converts 0 / 1")
        if self.labels.shape[0] != triples.shape[0] or triples.shape[0] == 0:
            raise ValueError(f"labels must have one entry per triple, and there must be one: got {triples.shape[0]} "
                             f"triples and {self.labels.shape[0]} labels")  # fmt: skip
        object.__setattr__(self, "triples", triples.cpu())
        object.__setattr__(self, "labels", self.labels.cpu())

    @classmethod
    def from_labels(cls, triples: torch.Tensor, labels: Any, **kwargs: Any) -> LabelledTriples:
        """Labelled triples from labels given as bools or as the numbers 0 / 1 (a tensor, array or list); any other
        value is a ValueError naming the first row holding one."""
        values = labels.cpu() if isinstance(labels, torch.Tensor) else torch.as_tensor(np.asarray(labels))
        if values.dtype != torch.bool:
            bad = ~((values == 0) | (values == 1))
            if bool(bad.any()):
                row = int(bad.nonzero()[0, 0])
                raise ValueError(
                    f"labels must be 0 / 1 (false / true) or bools: row {row} holds {values[row].item()!r}"
                )
            values = values == 1
        return cls(triples, values.reshape(-1), **kwargs)

    @classmethod
    def from_positives_and_negatives(cls, positives: torch.Tensor, negatives: torch.Tensor,
                                     **kwargs: Any) -> LabelledTriples:  # fmt: skip
        """The positives (n, 3) labelled true, then the negatives (m, 3) labelled false."""
        labels = torch.cat(
            [torch.ones(len(positives), dtype=torch.bool), torch.zeros(len(negatives), dtype=torch.bool)]
        )
        return cls(torch.cat([positives.cpu(), negatives.cpu()]), labels, **kwargs)

    def __len__(self) -> int:
        return int(self.triples.shape[0])

    @property
    def num_positives(self) -> int:
        return int(self.labels.sum())

    @property
    def num_negatives(self) -> int:
        return len(self) - self.num_positives


def load_split_with_negatives(
    dataset: Any,
    split: str,
    *,
    negatives: str | os.PathLike[str] | None = None,
    known_negatives: KnownNegatives = "keep",
) -> LabelledTriples:
    """A split's triples labelled true beside the hard negatives of CoDEx's layout labelled false.

    Parameters
    ----------
    dataset : TriplesDataset
        The dataset (:func:`kgeval.datasets.load_dataset`); its ``entity_to_id`` / ``relation_to_id`` map the
        negatives' labels, and its three splits are the known triples.
    split : {"valid", "test"}
        The split whose triples are the positives.
    negatives : path, optional
        The negatives' file, one ``head<TAB>relation<TAB>tail`` per line (gzipped when its name ends in ``.gz``);
        by default ``{split}_negatives.txt`` or ``.txt.gz`` beside the split's file (CoDEx ships them so).
    known_negatives : {"keep", "drop"}, default="keep"
        A negative that is a triple of train, valid or test: kept (labelled false) or dropped; either way a
        :class:`KnownNegativesWarning` counts them, and so does the result's ``known_negatives``.

    Returns
    -------
    LabelledTriples
        The split's positives, then the negatives, in the files' order.

    Raises
    ------
    ValueError
        For a label outside the dataset's vocabulary or a malformed line (naming the file and line), or when the
        negatives' file is not found (naming the names tried).
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    positives = getattr(dataset, split)
    path = Path(negatives) if negatives is not None else _negatives_beside(dataset, split)
    read = _read_rows(path, dataset.entity_to_id, dataset.relation_to_id, with_labels=False)[0]
    known = torch.cat([dataset.train, dataset.valid, dataset.test])
    false = torch.zeros(len(read), dtype=torch.bool)
    (kept, _), count = _known_negatives(read, false, known, known_negatives, str(path))
    return LabelledTriples.from_positives_and_negatives(
        positives, kept, relation_labels=_labels_by_id(dataset.relation_to_id), known_negatives=count,
        source=f"{split} + {path}",
    )  # fmt: skip


def split_with_drawn_negatives(
    dataset: Any,
    split: str,
    *,
    per_positive: int = 1,
    strategy: NegativeStrategy = "uniform",
    type_constraints: Any = None,
    seed: int = 0,
) -> LabelledTriples:
    """A split's triples labelled true beside negatives drawn by :func:`draw_negatives` labelled false, the known
    triples being train + valid + test.

    Parameters
    ----------
    dataset : TriplesDataset
        The dataset (:func:`kgeval.datasets.load_dataset`, :func:`kgeval.datasets.load_shipped_dataset`).
    split : {"valid", "test"}
        The split whose triples are the positives (``"train"`` is accepted too).
    per_positive, strategy, type_constraints, seed
        As :func:`draw_negatives` takes them.

    Returns
    -------
    LabelledTriples
        The positives, then their negatives grouped by positive; ``drawn`` holds the report.
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    positives = getattr(dataset, split)
    known = torch.cat([dataset.train, dataset.valid, dataset.test])
    negatives, report = draw_negatives(positives, known, dataset.num_entities, per_positive=per_positive,
                                       strategy=strategy, type_constraints=type_constraints, seed=seed)  # fmt: skip
    return LabelledTriples.from_positives_and_negatives(
        positives, negatives, relation_labels=_labels_by_id(dataset.relation_to_id),
        source=f"{split} + {report.drawn} drawn negatives ({strategy}, {report.per_positive} per positive, seed "
        f"{report.seed})", drawn=report,
    )  # fmt: skip


def read_labelled_triples(
    path: str | os.PathLike[str],
    entity_to_id: Mapping[str, int],
    relation_to_id: Mapping[str, int],
    *,
    known_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
    known_negatives: KnownNegatives = "keep",
    sep: str = "\t",
) -> LabelledTriples:
    """Labelled triples from a ``head relation tail label`` file (WN11's and FB13's ``valid.txt`` / ``test.txt``).

    Parameters
    ----------
    path : path
        One ``head<sep>relation<sep>tail<sep>label`` per line, gzipped when the name ends in ``.gz``; the labels of
        a file are ``1`` / ``-1`` (WN11, FB13) or ``1`` / ``0``.
    entity_to_id, relation_to_id : mapping of str to int
        The model's vocabularies.
    known_triples : LongTensor (m, 3) or a sequence of them, optional
        Known (true) triples: a triple labelled false among them is counted and warned about
        (:class:`KnownNegativesWarning`), then kept or dropped as ``known_negatives`` says.
    known_negatives : {"keep", "drop"}, default="keep"
    sep : str, default="\\t"

    Returns
    -------
    LabelledTriples

    Raises
    ------
    ValueError
        For a label other than the file's two classes (``-1`` and ``0`` in one file included), a head, relation or
        tail outside the vocabularies, or a line without four fields: the message names the file and line.
    """
    path = Path(path)
    triples, labels = _read_rows(path, entity_to_id, relation_to_id, with_labels=True, sep=sep)
    assert labels is not None
    if known_triples is not None:
        known = torch.cat(list(known_triples)) if not isinstance(known_triples, torch.Tensor) else known_triples
        (triples, labels), count = _known_negatives(triples, labels, known.long().cpu(), known_negatives, str(path))
    else:
        count = 0
    return LabelledTriples(triples, labels, _labels_by_id(relation_to_id), known_negatives=count, source=str(path))


# -- reading ---------------------------------------------------------------------------------------------------------


def _negatives_beside(dataset: Any, split: str) -> Path:
    source = getattr(dataset, "sources", {}).get(split)
    if not source:
        raise ValueError(f"the dataset knows no file for its {split} split (built in memory?): pass negatives=<path>")
    folder = Path(source).parent
    names = [f"{split}_negatives.txt", f"{split}_negatives.txt.gz"]
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise ValueError(f"{what} negatives file for {split} in {str(folder)!r}; tried {', '.join(names)}")
    return found[0]


def _read_rows(path: Path, entity_to_id: Mapping[str, int], relation_to_id: Mapping[str, int], *, with_labels: bool,
               sep: str = "\t") -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(triples (n, 3), labels (n,) or None) of a file of ``head relation tail [label]`` lines, mapped."""
    if not path.is_file():
        raise ValueError(f"no file {str(path)!r}")
    width, rows, labels, seen = 4 if with_labels else 3, [], [], set()
    for line_number, line in iter_data_lines(path.parent, path.name, str(path)):
        fields = [part.strip() for part in line.split(sep)]
        where = f"{path} line {line_number}"
        if len(fields) != width:
            named = "head, relation, tail, label" if with_labels else "head, relation, tail"
            raise ValueError(f"{where}: expected {width} fields ({named}), got {len(fields)}")
        ids = []
        for kind, label, vocabulary in zip(("head", "relation", "tail"), fields[:3],
                                           (entity_to_id, relation_to_id, entity_to_id), strict=True):  # fmt: skip
            if label not in vocabulary:
                raise ValueError(f"{where}: unknown {kind} {label!r} (not in the model's vocabulary)")
            ids.append(int(vocabulary[label]))
        rows.append(ids)
        if with_labels:
            if fields[3] not in ("1", "+1", "-1", "0"):
                raise ValueError(f"{where}: label {fields[3]!r} is none of 1 (true), -1 or 0 (false)")
            seen.add(fields[3].lstrip("+"))
            if {"-1", "0"} <= seen:
                raise ValueError(f"{where}: the file labels false triples both -1 and 0; its two classes must be "
                                 "1 / -1 or 1 / 0")  # fmt: skip
            labels.append(fields[3].lstrip("+") == "1")
    if not rows:
        raise ValueError(f"{path} holds no triple")
    return torch.tensor(rows, dtype=torch.long), torch.tensor(labels, dtype=torch.bool) if with_labels else None


def _known_negatives(triples: torch.Tensor, labels: torch.Tensor, known: torch.Tensor, keep: KnownNegatives,
                     where: str) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:  # fmt: skip
    """((triples, labels) with the false-labelled known triples kept or dropped, how many there were), warned."""
    if keep not in ("keep", "drop"):
        raise ValueError(f"known_negatives must be 'keep' or 'drop', got {keep!r}")
    _, inverse = torch.unique(torch.cat([triples, known]), dim=0, return_inverse=True)
    is_known = torch.isin(inverse[: len(triples)], inverse[len(triples) :]) & ~labels
    count = int(is_known.sum())
    if count:
        done = "kept, labelled false" if keep == "keep" else "dropped"
        warn_caller(f"{count} of {int((~labels).sum())} negatives of {where} are known triples ({done})",
                    KnownNegativesWarning)  # fmt: skip
        if keep == "drop":
            triples, labels = triples[~is_known], labels[~is_known]
    return (triples, labels), count


def _labels_by_id(label_to_id: Mapping[str, int]) -> tuple[str, ...]:
    labels = [""] * (max(label_to_id.values(), default=-1) + 1)
    for label, index in label_to_id.items():
        labels[index] = labels[index] or label
    return tuple(labels)
