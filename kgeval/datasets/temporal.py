"""Temporal knowledge graphs: ``train`` / ``valid`` / ``test`` files of (head, relation, tail, time) quadruples
mapped to integer ids (:func:`load_temporal_tsv`), with time ids in time order.

Time ids are the positions of the distinct *instants* of the dataset in time order. A label is read as the instant
it names -- numbers by their exact value (``1`` and ``1.0`` are one instant; ``2**53`` and ``2**53 + 1``, ``0.1``
and ``0.10000000000000001`` are two), ISO dates and timestamps by date and time (``2014-01-02`` and
``2014-01-02T00:00:00`` are one instant, a time zone converted to UTC), eight-digit labels that are all valid dates
(``20141231``, GDELT's and ICEWS's raw exports) as dates -- so two spellings of one moment share one id, and the
time-aware filter treats them as one. ``TemporalDataset.time_labels`` maps an id
back to its first spelling. Beside the positions, ``TemporalDataset.time_values`` keeps what each instant
measures (numbers as they are, dates in days since 1970-01-01) and ``time_steps`` the distance from the first
instant in the dataset's granularity (the greatest common step of its times: 1 for daily dates or consecutive
years, 24 for RE-GCN's ICEWS18 hours, 15 for GDELT's minutes): a model or baseline that measures time distances
(:class:`kgeval.models.RecurrencyBaseline`) reads steps, where positions would count a gap of 37 units as one.
The filter's keys remain the positions.
"""

from __future__ import annotations

import datetime
import itertools
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import torch

from kgeval.datasets.formats import refuse_other_format
from kgeval.datasets.labelled import (
    Duplicates,
    LabelledSplit,
    LabelNotInIdsError,
    Unseen,
    check_id_table,
    handle_duplicates,
    map_splits,
)
from kgeval.datasets.reading import SPLITS, ReadOptions, read_splits

__all__ = ["TemporalDataset", "TimeAxis", "load_temporal_tsv", "time_axis", "time_order"]


#: what a time value measures: a number as written, or days since 1970-01-01 for ISO dates and timestamps
TimeUnit = Literal["number", "day"]
#: an instant, exactly: an int or Fraction for a number, a naive UTC datetime for a date or timestamp
Instant = int | Fraction | datetime.datetime
_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECONDS_PER_DAY = 86_400_000_000
#: how a dataset's time labels were read (TimeAxis.reading)
NUMBERS, ISO_DATES, BASIC_DATES = "numbers", "ISO dates / timestamps", "dates written YYYYMMDD"


class TimeLabelError(ValueError):
    """A time label that cannot be put on the dataset's time axis; ``label`` names it, so that a reader of files
    can say where it occurs."""

    def __init__(self, message: str, label: str) -> None:
        super().__init__(message)
        self.label = label


@dataclass(frozen=True)
class TimeAxis:
    """The distinct instants of a dataset's times, in time order (an id is a position on this axis).

    Distances are exact: numbers are read as the decimals they are written as (``0.1`` and
    ``0.10000000000000001`` are two instants, so are ``2**53`` and ``2**53 + 1``), dates to the microsecond; only
    :attr:`values` and :attr:`granularity` are rounded to float64.

    Attributes
    ----------
    labels : tuple of str
        The first spelling of each instant, by id.
    instants : tuple
        Each instant exactly, by id (strictly increasing): an int or :class:`fractions.Fraction` for a number, a
        naive UTC :class:`datetime.datetime` for a date or timestamp.
    unit : {"number", "day"}
    reading : str
        How the labels were read: "numbers", "ISO dates / timestamps", or "dates written YYYYMMDD" (eight-digit
        labels that are all valid dates, e.g. GDELT's and ICEWS's raw exports: read as days, not as the numbers
        20141231 and 20150101, which are 8,870 apart).
    """

    labels: tuple[str, ...]
    instants: tuple[Instant, ...]
    unit: TimeUnit
    reading: str = NUMBERS

    @cached_property
    def _exact(self) -> tuple[list[int], Fraction]:
        """(each instant as an integer count of a common unit, that unit in the axis's unit): numbers over the
        least common denominator, dates in microseconds."""
        dates = [instant for instant in self.instants if isinstance(instant, datetime.datetime)]
        if dates:
            microsecond = datetime.timedelta(microseconds=1)
            return [(date - _EPOCH) // microsecond for date in dates], Fraction(1, _MICROSECONDS_PER_DAY)
        numbers = [instant for instant in self.instants if not isinstance(instant, datetime.datetime)]
        if all(type(number) is int for number in numbers):
            return [int(number) for number in numbers], Fraction(1)
        fractions = [Fraction(number) for number in numbers]
        denominator = math.lcm(*(fraction.denominator for fraction in fractions)) if fractions else 1
        return [int(fraction * denominator) for fraction in fractions], Fraction(1, denominator)

    @cached_property
    def _step(self) -> int:
        """The greatest common divisor of the differences between consecutive instants, in :attr:`_exact`'s unit
        (1 for fewer than two instants)."""
        counts = self._exact[0]
        return math.gcd(*(b - a for a, b in itertools.pairwise(counts))) or 1

    @property
    def values(self) -> tuple[float, ...]:
        """What each instant measures, by id: numbers as written, dates in days since 1970-01-01 (a timestamp's
        time of day as a fraction of a day); float64, so increasing but not always strictly beyond 2**53."""
        counts, unit = self._exact
        return tuple(count * unit.numerator / unit.denominator for count in counts)

    @property
    def granularity(self) -> float:
        """The dataset's time step, in the axis's unit: the greatest common divisor of the distances between
        consecutive instants, computed exactly (1 for consecutive years or daily dates, 24 for hourly ids of one a
        day, 0.25 for six-hourly timestamps); 1.0 for a single instant."""
        if len(self.instants) < 2:
            return 1.0
        return float(self._step * self._exact[1])

    @property
    def offsets(self) -> tuple[int, ...]:
        """Each instant's distance from the first in :attr:`granularity` steps, exactly (0, 1, 2, 9, 39 for the
        years 1, 2, 3, 10, 40)."""
        counts = self._exact[0]
        return tuple((count - counts[0]) // self._step for count in counts)

    @property
    def steps(self) -> torch.Tensor:
        """Float64 tensor (num_times,): :attr:`offsets` (exact below 2**53)."""
        return torch.tensor([float(offset) for offset in self.offsets], dtype=torch.float64, device="cpu")

    @property
    def keys(self) -> tuple[str, ...]:
        """A canonical name of each instant, by id, whatever its spelling: a number in lowest terms (``1``,
        ``1/10``), a date or timestamp in ISO form (``2014-01-02T00:00:00``)."""
        return tuple(instant_name(instant) for instant in self.instants)


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
        out of time order or for labels of no one kind.
    notes : tuple of str
        How the files were read: the columns read and left out, the counts declared (:meth:`summary`).
    read_with : dict of str to str
        The reading options that decide which rows were kept (``unseen``, ``duplicates``; empty when unknown): what
        a checkpoint records, to read its data again the same way.
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
    read_with: dict[str, str] = field(default_factory=dict, repr=False)

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
            return torch.arange(self.num_times, dtype=torch.float64, device="cpu")
        return torch.tensor(self.times.values, dtype=torch.float64, device="cpu")

    @property
    def time_steps(self) -> torch.Tensor:
        """Float64 tensor (num_times,): each time id's distance from the first in the dataset's granularity
        (:attr:`TimeAxis.steps`); the ids themselves when they were given without values."""
        if self.times is not None:
            return self.times.steps
        return torch.arange(self.num_times, dtype=torch.float64, device="cpu")

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
            lines.append(f"times {self.times.labels[0]} .. {self.times.labels[-1]} (read as {self.times.reading}), "
                         f"one step = {self.times.granularity:g} {unit}")  # fmt: skip
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
    in one sentence that names the reader of triples; so is a folder of another format -- RE-Net's integer ids
    beside ``entity2id.txt`` / ``relation2id.txt`` (never read as labels: numbered again by sorted label, the ids
    would be scrambled), an inductive dataset -- naming the call that reads it (:func:`kgeval.datasets.load_dataset`
    reads them all).

    Parameters
    ----------
    path, name, sep, header, unseen, entity_to_id, relation_to_id
        As for :func:`kgeval.datasets.load_tsv_dataset`. Times are never "unseen": a forecasting split's test
        times follow every training time by design.
    time_to_id : mapping of str to int, optional
        Use these time ids (a checkpoint's, one label per id): a time of the files is matched by the instant it
        names, so ``1.0`` finds the id given for ``1`` (:func:`given_time_ids`). By default the distinct instants
        of the three splits in time order (:func:`time_axis`).
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
    refuse_other_format(folder, ("triples", "quadruples"), "kgeval.datasets.load_temporal_tsv")
    splits = read_splits(folder, str(folder), ReadOptions(sep, header, temporal=True))
    mapped, entity_ids, relation_ids = map_splits(splits, unseen, entity_to_id, relation_to_id)
    kept = _kept_times(splits, mapped, unseen)
    labels = (label for split in SPLITS for label in kept[split])
    try:
        if time_to_id is not None:
            time_ids, axis = given_time_ids(time_to_id, labels)
        else:
            axis, time_ids = time_axis(labels)
    except TimeLabelError as error:
        raise ValueError(f"{_origin(splits, error.label)}: {error}") from None
    quadruples = {}
    for split in SPLITS:
        times = kept[split]
        missing = next((label for label in times if label not in time_ids), None)
        if missing is not None:
            raise LabelNotInIdsError(f"{splits[split].source or split}: time label {missing!r} is not in the given "
                                     "time_to_id")  # fmt: skip
        column = torch.tensor([time_ids[label] for label in times], dtype=torch.long, device="cpu").reshape(-1, 1)
        quadruples[split] = torch.cat([mapped[split], column], dim=1)
    quadruples = handle_duplicates(
        quadruples,
        duplicates,
        "quadruples",
        {split: labels.source for split, labels in splits.items() if labels.source},
    )
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
        read_with={"unseen": unseen, "duplicates": duplicates},
    )


def _origin(splits: Mapping[str, LabelledSplit], time: str) -> str:
    """Where the time label ``time`` first occurs: "path line N" (or the split's name and row)."""
    for labels in splits.values():
        if labels.times is not None and time in labels.times:
            return labels.origins[labels.times.index(time)]
    return "the time_to_id given"


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


def time_axis(labels: Iterable[str]) -> tuple[TimeAxis, dict[str, int]]:
    """The instants the time labels name, in time order, and the id of every spelling (see the module docstring).

    Raises
    ------
    ValueError
        For labels of mixed or unknown kinds (naming the first that does not fit).
    """
    distinct = list(dict.fromkeys(labels))  # first appearance order: the first spelling of an instant wins
    keys, unit, reading = _instants(distinct)
    first: dict[Any, str] = {}
    for label, key in zip(distinct, keys, strict=True):
        first.setdefault(key, label)
    instants = sorted(first)
    index = {instant: i for i, instant in enumerate(instants)}
    axis = TimeAxis(tuple(first[instant] for instant in instants), tuple(instants), unit, reading)
    return axis, {label: index[key] for label, key in zip(distinct, keys, strict=True)}


def given_time_ids(time_to_id: Mapping[str, int], labels: Iterable[str]) -> tuple[dict[str, int], TimeAxis | None]:
    """Given time ids extended to every spelling of their instants among ``labels`` (a checkpoint records one
    spelling per time, the data may hold others), and the axis they form when the ids are ``0 .. n-1`` (else None:
    ids given without what they measure between them).

    Labels of no one kind (neither all numbers nor all dates) are matched by spelling only.

    Raises
    ------
    ValueError
        When two given labels name one instant under two ids, two instants share one id, or the ids do not follow
        time order (a later instant with a lower id): time ids are read as positions in time (the recurrency
        baseline's "before", the forecasting order), so such ids would let a model see the future.
    """
    ids = dict(time_to_id)
    others = [label for label in dict.fromkeys(labels) if label not in ids]
    try:
        keys, unit, reading = _instants(list(ids) + others)
    except TimeLabelError:
        return ids, None
    by_instant: dict[Any, int] = {}
    first: dict[int, tuple[str, Any]] = {}
    for (label, index), key in zip(ids.items(), keys, strict=False):
        if by_instant.setdefault(key, index) != index:
            twin = next(other for other, other_key in zip(ids, keys, strict=False) if other_key == key)
            raise ValueError(f"the time labels {twin!r} and {label!r} name one instant but have the ids "
                             f"{by_instant[key]} and {index}")  # fmt: skip
        if first.setdefault(index, (label, key))[1] != key:
            raise ValueError(f"the time labels {first[index][0]!r} and {label!r} name two instants but share the id "
                             f"{index}")  # fmt: skip
    for label, key in zip(others, keys[len(ids) :], strict=True):
        if key in by_instant:
            ids[label] = by_instant[key]
    ordered = sorted(first)
    late = next((i for i, j in itertools.pairwise(ordered) if first[i][1] >= first[j][1]), None)
    if late is not None:
        later = ordered[ordered.index(late) + 1]
        raise ValueError(f"the given time ids do not follow time order: {first[late][0]!r} has the id {late} and "
                         f"the earlier {first[later][0]!r} the id {later}; time ids are positions in time")  # fmt: skip
    if ordered != list(range(len(ordered))):
        return ids, None
    return ids, TimeAxis(tuple(first[i][0] for i in ordered), tuple(first[i][1] for i in ordered), unit, reading)


def _instants(labels: list[str]) -> tuple[list[Instant], TimeUnit, str]:
    """Each label as the instant it names, exactly, the unit of the lot and how it was read (:class:`TimeAxis`)."""
    if not labels:
        return [], "number", NUMBERS
    numbers = [_as_number(label) for label in labels]
    if all(number is not None for number in numbers):
        if all(_BASIC_DATE.fullmatch(label) for label in labels):
            dates = [_as_time(label) for label in labels]
            if all(date is not None for date in dates):
                return dates, "day", BASIC_DATES  # type: ignore[return-value]
        return numbers, "number", NUMBERS  # type: ignore[return-value]
    dates = [_as_time(label) for label in labels]
    if all(date is not None for date in dates):
        return dates, "day", ISO_DATES  # type: ignore[return-value]
    neither = next((label for label, number, date in zip(labels, numbers, dates, strict=True)
                    if number is None and date is None), None)  # fmt: skip
    if neither is not None:
        raise TimeLabelError(
            f"the time label {neither!r} is neither a number nor an ISO date / timestamp "
            "(YYYY-MM-DD, YYYY-MM-DDThh:mm:ss, ...), so it cannot be put in time order",
            neither,
        )
    number = next(label for label, value in zip(labels, numbers, strict=True) if value is not None)
    date = next(label for label, value in zip(labels, numbers, strict=True) if value is None)
    raise TimeLabelError(f"time labels must all be numbers or all ISO dates / timestamps (to be put in time order): "
                         f"{number!r} is a number and {date!r} a date (eight-digit numbers are read as YYYYMMDD dates "
                         "only where every label is one)", date)  # fmt: skip


#: an eight-digit label, which may be a date written YYYYMMDD
_BASIC_DATE = re.compile(r"[0-9]{8}")
#: a label that is an integer (read by int(), quickly and exactly)
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: the fraction of a second of an ISO timestamp (its digits)
_SECOND_FRACTION = re.compile(r"[0-9]{2}:[0-9]{2}:[0-9]{2}[.,]([0-9]+)")


def _as_number(label: str) -> int | Fraction | None:
    """The number a label writes, exactly (a decimal as the fraction it is), or None for anything float() does not
    read as a finite number."""
    if _INTEGER.fullmatch(label):
        return int(label)
    try:
        if not math.isfinite(float(label)):
            return None
    except ValueError:
        return None
    try:
        return Fraction(label.strip())
    except ValueError:
        return None


def _as_time(label: str) -> datetime.datetime | None:
    """The naive UTC datetime of an ISO date or timestamp (a zone converted, none read as UTC), or None.
    TimeLabelError for a timestamp finer than a microsecond (Python's datetimes would cut the digits, merging two
    instants); trailing zeros beyond the sixth digit (pandas' nanosecond output) are exact and read."""
    try:
        value = datetime.datetime.fromisoformat(label)
    except ValueError:
        return None
    fraction = _SECOND_FRACTION.search(label)
    if fraction is not None and fraction.group(1)[6:].strip("0"):
        raise TimeLabelError(f"the time label {label!r} is finer than a microsecond, the finest time Python's "
                             "datetimes hold: read as a datetime it would merge with its neighbours; round the times "
                             "or write them as numbers", label)  # fmt: skip
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    except OverflowError:
        raise TimeLabelError(f"the time label {label!r} falls outside the dates Python holds once converted to "
                             "UTC", label) from None  # fmt: skip


def instant_name(instant: Instant) -> str:
    """A canonical name of an instant: a number in lowest terms (``1``, ``1/10``), a datetime in ISO form."""
    if isinstance(instant, datetime.datetime):
        return instant.isoformat()
    return str(Fraction(instant))


def time_keys(time_to_id: Mapping[str, int]) -> list[str]:
    """The canonical name of each time id's instant (:func:`instant_name`) -- the same whichever spelling a file
    used --, or its first label where the labels are of no one kind."""
    labels = [""] * len(set(time_to_id.values()))
    for label, index in time_to_id.items():
        labels[index] = labels[index] or label
    try:
        keys, _, _ = _instants(labels)
    except ValueError:
        return labels
    return [instant_name(key) for key in keys]


def time_order(labels: Sequence[str]) -> list[str]:
    """Time labels sorted by the time they name: all integers (or all numbers) by value, all ISO dates / timestamps
    by date and time (two spellings of one instant keep their order of appearance).

    Raises
    ------
    ValueError
        For labels of mixed or unknown kinds (naming the first that does not fit).
    """
    labels = list(labels)
    keys, _, _ = _instants(labels)
    order = sorted(range(len(labels)), key=lambda i: keys[i])
    return [labels[i] for i in order]
