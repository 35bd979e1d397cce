"""Temporal knowledge graphs: ``train`` / ``valid`` / ``test`` files of (head, relation, tail, time) quadruples
mapped to integer ids (:func:`load_temporal_tsv`), with time ids in time order.

Time ids are the positions of the distinct times of the dataset in time order: integers by value, ISO dates and
timestamps (``2014-01-01``, ``2014-01-01T06:00:00``) by the time they name. ``TemporalDataset.time_labels`` maps
an id back to its label.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from kgeval.datasets.labelled import LabelledSplit, Unseen, check_id_table, map_splits
from kgeval.datasets.reading import SPLITS, ReadOptions, read_splits

__all__ = ["TemporalDataset", "load_temporal_tsv", "time_order"]


@dataclass(frozen=True, eq=False)
class TemporalDataset:
    """Train, validation and test quadruples of one temporal knowledge graph, mapped to integer ids.

    Attributes
    ----------
    name : str
    train, valid, test : LongTensor of shape (n_split, 4)
        (head, relation, tail, time) ids of each split.
    entity_to_id, relation_to_id : dict of str to int
    time_to_id : dict of str to int
        Time label -> id; ids are ``0 .. num_times - 1`` in time order.
    sources : dict of str to str
        Split -> the file it was read from.
    """

    name: str
    train: torch.Tensor = field(repr=False)
    valid: torch.Tensor = field(repr=False)
    test: torch.Tensor = field(repr=False)
    entity_to_id: dict[str, int] = field(repr=False)
    relation_to_id: dict[str, int] = field(repr=False)
    time_to_id: dict[str, int] = field(repr=False)
    sources: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        columns = (("head", self.num_entities), ("relation", self.num_relations), ("tail", self.num_entities),
                   ("time", self.num_times))  # fmt: skip
        for split in SPLITS:
            check_id_table(split, getattr(self, split), columns)

    @property
    def num_entities(self) -> int:
        return len(self.entity_to_id)

    @property
    def num_relations(self) -> int:
        return len(self.relation_to_id)

    @property
    def num_times(self) -> int:
        return len(self.time_to_id)

    @property
    def time_labels(self) -> list[str]:
        """The label of each time id, in time order."""
        labels = [""] * self.num_times
        for label, index in self.time_to_id.items():
            labels[index] = label
        return labels

    def evaluation_kwargs(self, split: str) -> dict[str, Any]:
        """``mapped_quadruples`` and ``additional_filter_quadruples`` for evaluating ``split``: "valid" filters
        train + valid, "test" train + valid + test (the evaluated quadruples are always filtered)."""
        if split in ("valid", "validation", "val"):
            return {"mapped_quadruples": self.valid, "additional_filter_quadruples": [self.train]}
        if split == "test":
            return {"mapped_quadruples": self.test, "additional_filter_quadruples": [self.train, self.valid]}
        raise ValueError(f"split must be 'valid' or 'test', got {split!r}")

    def __repr__(self) -> str:
        return (f"TemporalDataset(name={self.name!r}, num_entities={self.num_entities}, num_relations="
                f"{self.num_relations}, num_times={self.num_times}, train={len(self.train)}, valid={len(self.valid)}, "
                f"test={len(self.test)})")  # fmt: skip


def load_temporal_tsv(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    sep: str = "\t",
    header: bool | Literal["auto"] = "auto",
    unseen: Unseen = "warn",
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
    time_to_id: Mapping[str, int] | None = None,
) -> TemporalDataset:
    """Read a folder of labelled quadruples: ``head<sep>relation<sep>tail<sep>time`` per line, one file per split,
    read as :func:`kgeval.datasets.load_tsv_dataset` reads triples (file names, headers -- ``head relation tail
    time`` and the like --, comments, unseen labels, errors naming the file and line). A file of triples is refused
    in one sentence that names the reader of triples.

    Parameters
    ----------
    path, name, sep, header, unseen, entity_to_id, relation_to_id
        As for :func:`kgeval.datasets.load_tsv_dataset`. Times are never "unseen": a forecasting split's test
        times follow every training time by design.
    time_to_id : mapping of str to int, optional
        Use these time ids; by default the distinct times of the three splits in time order (:func:`time_order`).

    Returns
    -------
    TemporalDataset
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"dataset folder {str(folder)!r} does not exist or is not a directory")
    splits = read_splits(folder, str(folder), ReadOptions(sep, header, temporal=True))
    mapped, entity_ids, relation_ids = map_splits(splits, unseen, entity_to_id, relation_to_id)
    kept = _kept_times(splits, mapped, unseen)
    labels = sorted({label for times in kept.values() for label in times})
    time_ids = dict(time_to_id) if time_to_id is not None else {label: i for i, label in enumerate(time_order(labels))}
    quadruples = {}
    for split in SPLITS:
        times = kept[split]
        missing = next((label for label in times if label not in time_ids), None)
        if missing is not None:
            raise ValueError(f"{splits[split].source or split}: time label {missing!r} is not in the given time_to_id")
        column = torch.tensor([time_ids[label] for label in times], dtype=torch.long).reshape(-1, 1)
        quadruples[split] = torch.cat([mapped[split], column], dim=1)
    return TemporalDataset(
        name=folder.name if name is None else name,
        train=quadruples["train"],
        valid=quadruples["valid"],
        test=quadruples["test"],
        entity_to_id=entity_ids,
        relation_to_id=relation_ids,
        time_to_id=time_ids,
        sources={split: labels.source for split, labels in splits.items() if labels.source},
    )


def _kept_times(splits: Mapping[str, LabelledSplit], mapped: Mapping[str, torch.Tensor], unseen: Unseen) -> dict:
    """The time labels of the rows :func:`map_splits` kept (with ``unseen="drop"`` it drops rows of unseen
    entities or relations: their times go with them)."""
    kept = {}
    for split, labels in splits.items():
        times = labels.times or []
        if unseen == "drop" and len(times) != len(mapped[split]):
            train = splits["train"]
            entities, relations = set(train.heads) | set(train.tails), set(train.relations)
            times = [time for head, relation, tail, time in zip(labels.heads, labels.relations, labels.tails, times,
                                                                 strict=True)
                     if head in entities and tail in entities and relation in relations]  # fmt: skip
        kept[split] = times
    return kept


def time_order(labels: Sequence[str]) -> list[str]:
    """Time labels sorted by the time they name: all integers (or all numbers) by value, all ISO dates / timestamps
    by date and time.

    Raises
    ------
    ValueError
        For labels of mixed or unknown kinds (naming the first that does not fit).
    """
    labels = list(labels)
    if not labels:
        return []
    for parse in (_as_number, _as_time):
        keys = [parse(label) for label in labels]
        if all(key is not None for key in keys):
            return [label for _, label in sorted(zip(keys, labels, strict=True))]
    parse = _as_number if _as_number(labels[0]) is not None else _as_time
    odd = next(label for label in labels if parse(label) is None)
    raise ValueError(f"time labels must all be numbers or all ISO dates / timestamps (to be put in time order): "
                     f"{labels[0]!r} and {odd!r} are not of one kind")  # fmt: skip


def _as_number(label: str) -> float | None:
    try:
        value = float(label)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _as_time(label: str) -> datetime.datetime | None:
    try:
        value = datetime.datetime.fromisoformat(label)
    except ValueError:
        return None
    return value if value.tzinfo is None else value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
