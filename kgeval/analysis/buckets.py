"""Every metric per frequency bucket: the ranking tasks grouped by how often their answer, their query entity or their
relation occurs in a reference graph (usually train), computed from an evaluation's records (no re-scoring).

Two cut rules. ``scheme="kgeval"`` (the default) never splits equal counts: each bucket is a range of counts, cut at
quantiles of the evaluated tasks' counts, after an explicit ``unseen`` bucket of count 0. ``scheme="libkge"``
reproduces LibKGE's ``entity_ranking.metrics_per.argument_frequency``: every id sorted by its count (a stable
sort, so equal counts in id order), the sorted list cut at 25 / 50 / 75 % of its length -- which splits equal
counts by id (docs/results.md, "Frequency buckets"). A bucket's metrics are the registry functions applied to its
tasks, as for the whole evaluation (the keys of ``RankBasedMetricResults.from_records`` of those tasks).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval._checks import check_positive_int
from kgeval.analysis.groups import SIDE_CODES, evaluated_sides, recorded, subset_interval, subset_metrics
from kgeval.analysis.relations import UNSEEN
from kgeval.analysis.stats import ConfidenceInterval
from kgeval.keys import MetricKey, format_key, parse_key
from kgeval.metrics.registry import lookup
from kgeval.records import RankRecords
from kgeval.typing import TARGETS

__all__ = [
    "BY",
    "LIBKGE_BUCKETS",
    "SCHEMES",
    "Bucket",
    "BucketTable",
    "frequency_buckets",
    "reference_counts",
]

#: what a task is bucketed by: the entity it ranks, the entity it is given, or its relation
BY: tuple[str, ...] = ("answer", "query_entity", "relation")
#: the cut rules: kgeval's (equal counts never split) and LibKGE's (``metrics_per.argument_frequency``)
SCHEMES: tuple[str, ...] = ("kgeval", "libkge")
#: LibKGE's bucket names and the fractions of the sorted id list each one takes: [begin, end)
LIBKGE_BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("25%", 0.0, 0.25),
    ("50%", 0.25, 0.5),
    ("75%", 0.5, 0.75),
    ("top", 0.75, 1.0),
)


@dataclass(frozen=True)
class Bucket:
    """One bucket of :class:`BucketTable`: its count range, its tasks' number and every metric of them."""

    label: str  #: ``"unseen"``, ``"1-3"``, ``"12"``, ``"100+"``; LibKGE's ``"25%"``, ``"50%"``, ``"75%"``, ``"top"``
    low: int | None  #: the smallest count of the bucket (None: LibKGE's bucket of no id)
    high: int | None  #: the largest count of the bucket (None: no upper bound, or LibKGE's bucket of no id)
    num_tasks: int  #: ranking tasks in the bucket (head and tail tasks)
    metrics: Mapping[MetricKey, float] = field(repr=False)  #: (side, rank type, key) -> value; NaN for no task
    interval: ConfidenceInterval | None = field(default=None, repr=False)  #: bootstrap interval of the table's key

    def get(self, key: str) -> float:
        """The value of a metric key (``"mrr"``, ``"tail.hits@10"``, ``"head.pessimistic.mr"``) in this bucket.

        Raises
        ------
        KeyError
            For a key that names no metric, or a side or k that was not evaluated.
        """
        parsed = parse_key(key)
        lookup(parsed.name)
        if parsed not in self.metrics:
            raise KeyError(f"{format_key(parsed)} was not reported for this bucket (key {key!r})")
        return self.metrics[parsed]


@dataclass(frozen=True)
class BucketTable:
    """Result of :func:`frequency_buckets`: the buckets in order of count (``unseen`` first)."""

    by: str  #: ``answer``, ``query_entity`` or ``relation``
    scheme: str  #: ``kgeval`` or ``libkge``
    buckets: tuple[Bucket, ...]
    ks: tuple[int, ...]  #: the k of hits@k in every bucket's metrics
    interval_key: str | None  #: the canonical key of each bucket's interval; None when none was computed

    __iter__ = None  # a table: read ``buckets``

    def __len__(self) -> int:
        return len(self.buckets)

    def bucket(self, label: str) -> Bucket:
        """The bucket of a label (KeyError listing the labels otherwise)."""
        for bucket in self.buckets:
            if bucket.label == label:
                return bucket
        raise KeyError(f"no bucket {label!r}; the buckets are {[b.label for b in self.buckets]}")

    def to_frame(self, keys: str | Sequence[str] = ("mrr", "hits@10")) -> pd.DataFrame:
        """One row per bucket: ``low``, ``high``, ``num_tasks``, a column per key (named as given), then
        ``ci_low`` / ``ci_high`` (the interval of :attr:`interval_key`) when intervals were computed.

        Returns
        -------
        DataFrame indexed by bucket label (index name ``bucket``).
        """
        keys = (keys,) if isinstance(keys, str) else tuple(keys)
        rows = []
        for bucket in self.buckets:
            row: dict[str, Any] = {"low": bucket.low, "high": bucket.high, "num_tasks": bucket.num_tasks}
            row.update({key: bucket.get(key) for key in keys})
            if self.interval_key is not None:
                interval = bucket.interval
                row["ci_low"] = math.nan if interval is None else interval.low
                row["ci_high"] = math.nan if interval is None else interval.high
            rows.append(row)
        return pd.DataFrame(rows, index=pd.Index([b.label for b in self.buckets], name="bucket"))

    def libkge_metrics(self, setting: str = "filtered", rank_type: str = "realistic") -> dict[str, float]:
        """The buckets' metrics under LibKGE's trace keys (``mean_reciprocal_rank_filtered_subject_25%``).

        LibKGE reports ``mean_rank``, ``mean_reciprocal_rank`` and ``hits_at_<k>`` per bucket: ``subject_*`` over
        the head tasks and ``object_*`` over the tail tasks (``by="answer"``), ``relation_*`` over both
        (``by="relation"``). Its default rank (``tie_handling: rounded_mean_rank``) is the realistic rank rounded
        up, so values differ from kgeval's where the answer ties; LibKGE reports 0.0 for a bucket of no task, kgeval
        NaN.

        Parameters
        ----------
        setting : {"filtered", "", "filtered_with_test"}, default="filtered"
            The infix LibKGE gives the filter setting these records were evaluated with.
        rank_type : str, default="realistic"

        Raises
        ------
        ValueError
            For a table of another scheme than ``libkge``, or an unknown setting.
        """
        if self.scheme != "libkge":
            raise ValueError(f"libkge_metrics needs a table of scheme='libkge', got scheme={self.scheme!r}")
        if setting not in ("filtered", "", "filtered_with_test"):
            raise ValueError(f"setting must be 'filtered', '' or 'filtered_with_test', got {setting!r}")
        roles = {"subject": "head", "object": "tail"} if self.by == "answer" else {"relation": "both"}
        names = {"mean_rank": "mr", "mean_reciprocal_rank": "mrr", **{f"hits_at_{k}": f"hits@{k}" for k in self.ks}}
        infix = f"_{setting}" if setting else ""
        return {
            f"{name}{infix}_{role}_{bucket.label}": bucket.get(f"{side}.{rank_type}.{key}")
            for bucket in self.buckets
            for role, side in roles.items()
            for name, key in names.items()
        }


def frequency_buckets(
    results: Any,
    reference_triples: Any,
    *,
    by: Literal["answer", "query_entity", "relation"] = "answer",
    scheme: Literal["kgeval", "libkge"] = "kgeval",
    num_buckets: int = 4,
    edges: Sequence[int] | None = None,
    num_entities: int | None = None,
    num_relations: int | None = None,
    ks: Sequence[int] | None = None,
    interval_key: str | None = "mrr",
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: int | None = 0,
) -> BucketTable:
    """Every metric per bucket of how often each task's answer, query entity or relation occurs in a reference graph.

    Parameters
    ----------
    results : RankBasedMetricResults, RankRecords or DataFrame
        Results that kept their per-task records, the records themselves, or a rank table (``results.ranks_df()``);
        the head and tail tasks are bucketed (relation-prediction tasks are left out).
    reference_triples : LongTensor or ndarray of shape (m, 3), or a sequence of them
        The graph the counts come from, usually the training triples; duplicates count.
    by : {"answer", "query_entity", "relation"}, default="answer"
        ``answer``: the entity the task ranks (a head task's head, a tail task's tail); ``query_entity``: the entity
        it is given (a head task's tail, a tail task's head); ``relation``: its relation. An entity's count is its
        occurrences as head or tail, a relation's its triples (``scheme="libkge"``: see there).
    scheme : {"kgeval", "libkge"}, default="kgeval"
        ``kgeval``: a bucket ``unseen`` (count 0, always listed), then count ranges cut at the 1/B, ..., (B-1)/B
        quantiles of the seen tasks' counts (B = ``num_buckets``; the lower quantile: the smallest count with at
        least that share of tasks at or below it), so that equal counts are never split and each bucket holds
        about 1/B of the seen tasks; cuts that coincide merge buckets. ``libkge``: LibKGE's buckets ``25%``,
        ``50%``, ``75%``, ``top``: every id of ``0 .. num_entities - 1`` (``num_relations - 1``) sorted by its
        count with a stable sort (equal counts in ascending id order), bucket j the ids at sorted positions
        ``int(begin * n) .. int(end * n) - 1``; ``by="answer"`` counts a head task's answer as a subject (its
        head occurrences) and a tail task's as an object (its tail occurrences), each with its own sorted list;
        ``by="query_entity"`` is not LibKGE's and is refused.
    num_buckets : int, default=4
        B of the kgeval scheme.
    edges : sequence of int, optional
        The kgeval scheme with fixed buckets instead of quantiles: a bucket starts at 1 and at each edge (strictly
        increasing integers >= 2), the last one unbounded: ``edges=(10, 100)`` gives 1-9, 10-99, 100+. Buckets of
        no task are listed (NaN metrics).
    num_entities, num_relations : int, optional
        The number of ids LibKGE sorts (the dataset's, e.g. ``data.num_entities``; ids absent from the reference
        count 0 and come first). Default: one more than the largest id of the reference triples and the records.
        Only the libkge scheme reads them.
    ks : sequence of int, optional
        The k of hits@k; default the results' ``ks``, or (1, 3, 5, 10) for records.
    interval_key : str or None, default="mrr"
        The key of each bucket's bootstrap percentile interval (:func:`kgeval.analysis.stats.confidence_interval`
        on the bucket's tasks, resampling its evaluation triples); None computes none.
    level, n_resamples, seed
        Of the interval, as in :func:`kgeval.analysis.stats.confidence_interval`; every bucket uses ``seed``.

    Returns
    -------
    BucketTable
        The buckets in order of count; each has every metric of its tasks per side (head, tail, both) and rank type.

    Raises
    ------
    ValueError
        For an unknown ``by`` or ``scheme``, options of the other scheme, records without triples or
        num_candidates, or (libkge) an id at or beyond ``num_entities`` / ``num_relations``.
    """
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, got {by!r}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    records, ks = recorded(results, ks, "frequency buckets")
    records = records.select(np.isin(records.side, np.array(SIDE_CODES["both"], dtype=np.int8)))
    if len(records) == 0:
        raise ValueError("frequency buckets need head or tail tasks; the records hold none")
    reference = _reference_array(reference_triples)
    if scheme == "libkge":
        if by == "query_entity":
            raise ValueError("LibKGE buckets tasks by their answer or relation only; by='query_entity' is kgeval's")
        if edges is not None or num_buckets != 4:
            raise ValueError("edges and num_buckets choose kgeval's buckets; scheme='libkge' cuts at 25 / 50 / 75 %")
        groups = _libkge_buckets(records, reference, by, num_entities, num_relations)
    else:
        num_buckets = check_positive_int(num_buckets, "num_buckets")
        counts = _task_counts(records, reference, by)
        groups = _kgeval_buckets(counts, num_buckets, _check_edges(edges))
    sides = evaluated_sides(records)
    buckets = []
    for label, low, high, rows in groups:
        part = records.select(rows)
        interval = None
        if interval_key is not None:
            interval = subset_interval(part, ks, interval_key, level=level, n_resamples=n_resamples, seed=seed)
        buckets.append(Bucket(label, low, high, len(part), subset_metrics(part, ks, sides), interval))
    key = None if interval_key is None else format_key(parse_key(interval_key))
    return BucketTable(by=by, scheme=scheme, buckets=tuple(buckets), ks=ks, interval_key=key)


# -- counts ------------------------------------------------------------------------------------------------------
def _reference_array(triples: Any) -> np.ndarray:
    """An (m, 3) int64 array of ids from a tensor or array of shape (m, 3), or a sequence of them (concatenated)."""
    parts = triples if isinstance(triples, list | tuple) else [triples]
    arrays = []
    for part in parts:
        array = part.detach().cpu().numpy() if isinstance(part, torch.Tensor) else np.asarray(part)
        if array.ndim != 2 or array.shape[1] != 3 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
            raise ValueError(
                f"reference_triples must be integer arrays of shape (m, 3), got {array.dtype} {tuple(array.shape)}"
            )
        if array.size and array.min() < 0:
            raise ValueError(f"reference_triples must hold ids >= 0, got {int(array.min())}")
        arrays.append(array.astype(np.int64, copy=False))
    return np.concatenate(arrays) if arrays else np.zeros((0, 3), dtype=np.int64)


def reference_counts(reference_triples: Any, num_entities: int = 0, num_relations: int = 0) -> dict[str, np.ndarray]:
    """How often each id occurs in reference triples (duplicates count).

    Parameters
    ----------
    reference_triples : LongTensor or ndarray of shape (m, 3), or a sequence of them
    num_entities, num_relations : int, default=0
        Minimum lengths of the arrays.

    Returns
    -------
    dict of str to int64 ndarray
        ``entity`` (occurrences as head or tail), ``subject`` (as head), ``object`` (as tail), ``relation``.
    """
    triples = _reference_array(reference_triples)
    size = max(num_entities, int(triples[:, [0, 2]].max()) + 1 if len(triples) else 0)
    subject = np.bincount(triples[:, 0], minlength=size)
    obj = np.bincount(triples[:, 2], minlength=size)
    relation = np.bincount(triples[:, 1], minlength=num_relations)
    return {"entity": subject + obj, "subject": subject, "object": obj, "relation": relation}


def _items(records: RankRecords, by: str) -> np.ndarray:
    """The id each task is bucketed by."""
    head_task = records.side == TARGETS.index("head")
    if by == "answer":
        return np.where(head_task, records.head, records.tail)
    if by == "query_entity":
        return np.where(head_task, records.tail, records.head)
    return records.relation


def _task_counts(records: RankRecords, reference: np.ndarray, by: str) -> np.ndarray:
    """int64 (n,): the reference count of each task's item (0 where the reference lacks it)."""
    counts = reference_counts(reference)["relation" if by == "relation" else "entity"]
    items = _items(records, by)
    found = np.zeros(len(items), dtype=np.int64)
    inside = items < len(counts)
    found[inside] = counts[items[inside]]
    return found


# -- kgeval's buckets ---------------------------------------------------------------------------------------------
#: a bucket before its metrics: (label, low, high, the rows of its tasks)
Group = tuple[str, int | None, int | None, np.ndarray]


def _check_edges(edges: Any) -> tuple[int, ...] | None:
    if edges is None:
        return None
    values = list(edges) if isinstance(edges, Sequence | np.ndarray) and not isinstance(edges, str) else None
    if not values or any(isinstance(e, bool) or not isinstance(e, numbers.Integral) for e in values):
        raise ValueError(f"edges must be a non-empty sequence of integers, got {edges!r}")
    if values[0] < 2 or any(b <= a for a, b in itertools.pairwise(values)):
        raise ValueError(f"edges must be strictly increasing integers >= 2 (a bucket starts at 1), got {values}")
    return tuple(int(e) for e in values)


def _range_label(low: int, high: int | None) -> str:
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}-{high}"


def _kgeval_buckets(counts: np.ndarray, num_buckets: int, edges: tuple[int, ...] | None) -> list[Group]:
    """``unseen``, then the count ranges: from ``edges``, else cut at the lower quantiles of the seen counts."""
    groups: list[Group] = [(UNSEEN, 0, 0, np.flatnonzero(counts == 0))]
    seen = np.sort(counts[counts > 0])
    if edges is not None:
        bounds: list[tuple[int, int | None]] = [(1, edges[0] - 1)]
        bounds += [(a, b - 1) for a, b in itertools.pairwise(edges)] + [(edges[-1], None)]
    elif len(seen) == 0:
        bounds = []
    else:  # the j/B lower quantile: the ceil(j n / B)-th smallest count; equal cuts merge, the top closes at the max
        cuts = [int(seen[math.ceil(j * len(seen) / num_buckets) - 1]) for j in range(1, num_buckets)]
        tops = sorted({*cuts, int(seen[-1])})
        bounds = [(low, high) for low, high in zip([1, *(t + 1 for t in tops[:-1])], tops, strict=True)]
    for low, high in bounds:
        inside = (counts >= low) if high is None else (counts >= low) & (counts <= high)
        groups.append((_range_label(low, high), low, high, np.flatnonzero(inside)))
    return groups


# -- LibKGE's buckets ---------------------------------------------------------------------------------------------
def _libkge_positions(counts: np.ndarray, num: int) -> np.ndarray:
    """int64 (num,): LibKGE's bucket (0..3) of each id: ids sorted by count with a stable sort (Python's
    ``sorted(enumerate(counts), key=count)``: equal counts in ascending id order), cut at ``int(f * num)``."""
    order = np.argsort(counts[:num], kind="stable")
    bucket = np.empty(num, dtype=np.int64)
    for j, (_name, begin, end) in enumerate(LIBKGE_BUCKETS):
        bucket[order[int(begin * num) : int(end * num)]] = j
    return bucket


def _libkge_buckets(
    records: RankRecords, reference: np.ndarray, by: str, num_entities: int | None, num_relations: int | None
) -> list[Group]:
    """LibKGE's four buckets; each (label, smallest and largest count of its ids, task rows)."""
    ids = records.relation if by == "relation" else np.concatenate([records.head, records.tail])
    column = [1] if by == "relation" else [0, 2]
    largest = max(int(ids.max()), int(reference[:, column].max()) if len(reference) else -1)
    given = num_relations if by == "relation" else num_entities
    option = "num_relations" if by == "relation" else "num_entities"
    num = largest + 1 if given is None else check_positive_int(given, option)
    if largest >= num:
        raise ValueError(f"{option}={num}, but the records or the reference triples hold the id {largest}")
    counts = reference_counts(reference, num, num)
    if by == "relation":  # one sorted list of relations, for head and tail tasks alike
        roles = [(counts["relation"], records.relation, np.ones(len(records), dtype=bool))]
    else:  # a head task's answer ranked among subjects, a tail task's among objects
        head_task = records.side == TARGETS.index("head")
        roles = [(counts["subject"], records.head, head_task), (counts["object"], records.tail, ~head_task)]
    assigned = np.full(len(records), -1, dtype=np.int64)
    ranges: list[list[int]] = [[] for _ in LIBKGE_BUCKETS]
    for role_counts, items, tasks in roles:
        position = _libkge_positions(role_counts, num)
        assigned[tasks] = position[items[tasks]]
        for j in range(len(LIBKGE_BUCKETS)):
            ranges[j] += role_counts[:num][position == j].tolist()
    return [
        (name, min(found, default=None), max(found, default=None), np.flatnonzero(assigned == j))
        for j, ((name, _begin, _end), found) in enumerate(zip(LIBKGE_BUCKETS, ranges, strict=True))
    ]
