"""Temporal knowledge graphs: ``train`` / ``valid`` / ``test`` files of (head, relation, tail, time) quadruples
mapped to integer ids (:func:`load_temporal_tsv`), with time ids in time order.

Time ids are the positions of the distinct *instants* of the dataset in time order. A label is read as the instant
it names -- numbers by value (``1`` and ``1.0`` are one instant), ISO dates and timestamps by date and time
(``2014-01-02`` and ``2014-01-02T00:00:00`` are one instant, a time zone converted to UTC) -- so two spellings of
one moment share one id, and the time-aware filter treats them as one. ``TemporalDataset.time_labels`` maps an id
back to its first spelling. Beside the positions, ``TemporalDataset.time_values`` keeps what each instant
measures (numbers as they are, dates in days since 1970-01-01) and ``time_steps`` the distance from the first
instant in the dataset's granularity (the greatest common step of its times: 1 for daily dates or consecutive
years, 24 for RE-GCN's ICEWS18 hours, 15 for GDELT's minutes): a model or baseline that measures time distances
(:class:`kgeval.models.RecurrencyBaseline`) reads steps, where positions would count a gap of 37 units as one.
The filter's keys remain the positions.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from kgeval.datasets.labelled import Duplicates, LabelledSplit, Unseen, check_id_table, handle_duplicates, map_splits
from kgeval.datasets.reading import SPLITS, ReadOptions, read_splits

__all__ = ["TemporalDataset", "TimeAxis", "load_temporal_tsv", "time_axis", "time_order"]


#: what a time value measures: a number as written, or days since 1970-01-01 for ISO dates and timestamps
TimeUnit = Literal["number", "day"]
_EPOCH = datetime.datetime(1970, 1, 1)


@dataclass(frozen=True)
class TimeAxis:
    """The distinct instants of a dataset's times, in time order (an id is a position on this axis).

    Attributes
    ----------
    labels : tuple of str
        The first spelling of each instant, by id.
    values : tuple of float
        What each instant measures, by id (strictly increasing): numbers as written, dates in days since
        1970-01-01 (a timestamp's time of day as a fraction of a day).
    unit : {"number", "day"}
    granularity : float
        The dataset's time step: the greatest common divisor of the differences between consecutive values when
        they are all integers (1 for consecutive years or daily dates, 24 for hourly ids of one a day), else the
        smallest difference; 1.0 for a single instant.
    """

    labels: tuple[str, ...]
    values: tuple[float, ...]
    unit: TimeUnit
    granularity: float

    @property
    def steps(self) -> torch.Tensor:
        """Float64 tensor (num_times,): each instant's distance from the first, in granularity steps (0, 1, 2, 9,
        39 for the years 1, 2, 3, 10, 40)."""
        values = torch.tensor(self.values, dtype=torch.float64)
        return (values - values[0]) / self.granularity if len(values) else values


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
        Time label -> id; ids are ``0 .. num_times - 1`` in time order; every spelling of one instant (``1`` and
        ``1.0``, ``2014-01-02`` and ``2014-01-02T00:00:00``) maps to its id.
    sources : dict of str to str
        Split -> the file it was read from.
    times : TimeAxis, optional
        The instants behind the ids (values, unit, granularity); None when the ids were given (``time_to_id``)
        without what they measure.
    notes : tuple of str
        How the files were read: the columns read and left out, the counts declared (:meth:`summary`).
    """

    name: str
    train: torch.Tensor = field(repr=False)
    valid: torch.Tensor = field(repr=False)
    test: torch.Tensor = field(repr=False)
    entity_to_id: dict[str, int] = field(repr=False)
    relation_to_id: dict[str, int] = field(repr=False)
    time_to_id: dict[str, int] = field(repr=False)
    sources: dict[str, str] = field(default_factory=dict, repr=False)
    times: TimeAxis | None = field(default=None, repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)

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
        return len(set(self.time_to_id.values()))

    @property
    def time_labels(self) -> list[str]:
        """The label of each time id, in time order (the first spelling of an instant written more than one way)."""
        if self.times is not None:
            return list(self.times.labels)
        labels = [""] * self.num_times
        for label, index in self.time_to_id.items():
            labels[index] = labels[index] or label
        return labels

    @property
    def time_values(self) -> torch.Tensor:
        """Float64 tensor (num_times,): what each time id measures (:class:`TimeAxis`); the ids themselves when
        they were given without values."""
        if self.times is None:
            return torch.arange(self.num_times, dtype=torch.float64)
        return torch.tensor(self.times.values, dtype=torch.float64)

    @property
    def time_steps(self) -> torch.Tensor:
        """Float64 tensor (num_times,): each time id's distance from the first in the dataset's granularity
        (:attr:`TimeAxis.steps`); the ids themselves when they were given without values."""
        return self.times.steps if self.times is not None else torch.arange(self.num_times, dtype=torch.float64)

    def evaluation_kwargs(self, split: str) -> dict[str, Any]:
        """``mapped_quadruples`` and ``additional_filter_quadruples`` for evaluating ``split``: "valid" filters
        train + valid, "test" train + valid + test (the evaluated quadruples are always filtered)."""
        if split in ("valid", "validation", "val"):
            return {"mapped_quadruples": self.valid, "additional_filter_quadruples": [self.train]}
        if split == "test":
            return {"mapped_quadruples": self.test, "additional_filter_quadruples": [self.train, self.valid]}
        raise ValueError(f"split must be 'valid' or 'test', got {split!r}")

    def summary(self) -> str:
        """The dataset in a few lines: its counts, its time axis, and how its files were read."""
        lines = [repr(self)]
        if self.times is not None and self.times.labels:
            unit = "days" if self.times.unit == "day" else "units"
            lines.append(f"times {self.times.labels[0]} .. {self.times.labels[-1]}, one step = "
                         f"{self.times.granularity:g} {unit}")  # fmt: skip
        lines.extend(self.notes)
        return "\n".join(lines)

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
    duplicates: Duplicates = "keep",
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
    duplicates : {"keep", "merge"}, default="keep"
        A quadruple equal to an earlier one of the same split (the same instant, however spelled): kept (RE-GCN
        ranks it as often as it occurs) or merged into the first (the nec-research framework's way); either way a
        :class:`~kgeval.datasets.labelled.DuplicatesWarning` counts them per split.

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
    axis = None
    if time_to_id is not None:
        time_ids = dict(time_to_id)
    else:
        axis, time_ids = time_axis(label for split in SPLITS for label in kept[split])
    quadruples = {}
    for split in SPLITS:
        times = kept[split]
        missing = next((label for label in times if label not in time_ids), None)
        if missing is not None:
            raise ValueError(f"{splits[split].source or split}: time label {missing!r} is not in the given time_to_id")
        column = torch.tensor([time_ids[label] for label in times], dtype=torch.long).reshape(-1, 1)
        quadruples[split] = torch.cat([mapped[split], column], dim=1)
    quadruples = handle_duplicates(quadruples, duplicates, "quadruples",
                                   {split: labels.source for split, labels in splits.items() if labels.source})
    return TemporalDataset(
        name=folder.name if name is None else name,
        train=quadruples["train"],
        valid=quadruples["valid"],
        test=quadruples["test"],
        entity_to_id=entity_ids,
        relation_to_id=relation_ids,
        time_to_id=time_ids,
        sources={split: labels.source for split, labels in splits.items() if labels.source},
        times=axis,
        notes=tuple(_column_notes(splits)),
    )


def _column_notes(splits: Mapping[str, LabelledSplit]) -> list[str]:
    """Which columns each file was read from: its header's names, or the first four fields in order."""
    notes = []
    for split, labels in splits.items():
        where = labels.source or split
        if labels.columns:
            notes.append(f"{where}: columns {', '.join(labels.columns)} read as head, relation, tail, time "
                         "(named by its header)")  # fmt: skip
        else:
            notes.append(f"{where}: fields read as head, relation, tail, time, in that order")
    return notes


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
    by date and time (two spellings of one instant keep their order of appearance).

    Raises
    ------
    ValueError
        For labels of mixed or unknown kinds (naming the first that does not fit).
    """
    labels = list(labels)
    keys, _ = _instants(labels)
    order = sorted(range(len(labels)), key=lambda i: keys[i])
    return [labels[i] for i in order]


def time_axis(labels: Any) -> tuple[TimeAxis, dict[str, int]]:
    """The instants the time labels name, in time order, and the id of every spelling (see the module docstring).

    Raises
    ------
    ValueError
        For labels of mixed or unknown kinds (naming the first that does not fit).
    """
    distinct = list(dict.fromkeys(labels))  # first appearance order: the first spelling of an instant wins
    keys, unit = _instants(distinct)
    instants = sorted(set(keys))
    index = {instant: i for i, instant in enumerate(instants)}
    first: dict[Any, str] = {}
    for label, key in zip(distinct, keys, strict=True):
        first.setdefault(key, label)
    values = tuple(_measure(instant) for instant in instants)
    axis = TimeAxis(tuple(first[instant] for instant in instants), values, unit, _granularity(values))
    return axis, {label: index[key] for label, key in zip(distinct, keys, strict=True)}


def _instants(labels: list[str]) -> tuple[list[Any], TimeUnit]:
    """Each label as the instant it names (a float, or a naive UTC datetime) and the unit of the lot."""
    if not labels:
        return [], "number"
    for parse, unit in ((_as_number, "number"), (_as_time, "day")):
        keys = [parse(label) for label in labels]
        if all(key is not None for key in keys):
            return keys, unit  # type: ignore[return-value]
    parse = _as_number if _as_number(labels[0]) is not None else _as_time
    odd = next(label for label in labels if parse(label) is None)
    raise ValueError(f"time labels must all be numbers or all ISO dates / timestamps (to be put in time order): "
                     f"{labels[0]!r} and {odd!r} are not of one kind")  # fmt: skip


def _measure(instant: float | datetime.datetime) -> float:
    """What an instant measures: a number itself, a datetime in days since 1970-01-01."""
    if isinstance(instant, datetime.datetime):
        return (instant - _EPOCH).total_seconds() / 86_400
    return float(instant)


def _granularity(values: Sequence[float]) -> float:
    """The time step of increasing values: the gcd of consecutive differences when all values are integers, else
    the smallest difference; 1.0 for fewer than two values."""
    if len(values) < 2:
        return 1.0
    array = np.asarray(values, dtype=np.float64)
    differences = np.diff(array)
    if np.all(array == np.round(array)) and np.all(np.abs(array) < 2**53):
        return float(np.gcd.reduce(differences.astype(np.int64)))
    return float(differences.min())


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
