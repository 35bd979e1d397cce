"""Every metric of a group of ranking tasks, from an evaluation's records: relation groups side by side (micro over
the group's tasks, macro over its relations), and the subset machinery that :mod:`kgeval.analysis.buckets` shares.

A group's micro metrics are those an evaluation restricted to its relations reports
(``evaluate(..., restrict_relations_to=ids)``, whose ranks are those of the full evaluation); its macro metrics are
the unweighted mean over its evaluated relations of each per-relation metric (METRICS.md, Macro averaging).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval._checks import check_ks
from kgeval.analysis.relations import LabelMapping, label_array
from kgeval.analysis.stats import ConfidenceInterval, confidence_interval
from kgeval.keys import MetricKey, format_key, parse_key
from kgeval.metrics.naming import close_matches
from kgeval.metrics.registry import lookup, reported_keys, summarize
from kgeval.records import RankRecords, rank_records
from kgeval.typing import RANK_TYPES, SIDES, Side

__all__ = [
    "OTHER",
    "GroupTable",
    "RelationGroup",
    "evaluated_sides",
    "recorded",
    "relation_groups",
    "subset_interval",
    "subset_metrics",
]

#: the name of the group of the evaluated relations that no given group holds (``other=True``)
OTHER = "other"
#: the task codes of each side (``both``: head and tail tasks pooled, never relation prediction)
SIDE_CODES: dict[str, tuple[int, ...]] = {"head": (0,), "tail": (1,), "relation": (2,), "both": (0, 1)}


@dataclass(frozen=True)
class RelationGroup:
    """One group of :class:`GroupTable`."""

    name: str
    relations: tuple[int, ...]  #: the group's relation ids, ascending
    num_evaluated: int  #: how many of them the evaluated triples hold (the macro average's relations)
    num_tasks: int  #: ranking tasks of the group's relations
    micro: Mapping[MetricKey, float] = field(repr=False)  #: every metric of all the group's tasks
    macro: Mapping[MetricKey, float] = field(repr=False)  #: every metric's mean over the evaluated relations
    interval: ConfidenceInterval | None = field(default=None, repr=False)  #: of the table's key, micro

    def get(self, key: str, average: str = "micro") -> float:
        """The micro (default) or macro value of a metric key (``"mrr"``, ``"tail.hits@10"``) for this group.

        Raises
        ------
        KeyError
            For a key that names no metric, or a side or k that was not evaluated.
        """
        if average not in ("micro", "macro"):
            raise ValueError(f"average must be 'micro' or 'macro', got {average!r}")
        parsed = parse_key(key)
        lookup(parsed.name)
        values = self.micro if average == "micro" else self.macro
        if parsed not in values:
            raise KeyError(f"{format_key(parsed)} was not reported for group {self.name!r} (key {key!r})")
        return values[parsed]


@dataclass(frozen=True)
class GroupTable:
    """Result of :func:`relation_groups`: the groups in the order given (``other`` last)."""

    groups: tuple[RelationGroup, ...]
    ks: tuple[int, ...]  #: the k of hits@k in every group's metrics
    interval_key: str | None  #: the canonical key of each group's (micro) interval; None when none was computed

    __iter__ = None  # a table: read ``groups``

    def __len__(self) -> int:
        return len(self.groups)

    def group(self, name: str) -> RelationGroup:
        """The group of a name (KeyError listing the names otherwise)."""
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"no group {name!r}; the groups are {[g.name for g in self.groups]}")

    def to_frame(self, keys: str | Sequence[str] = ("mrr", "hits@10")) -> pd.DataFrame:
        """One row per group: ``num_relations``, ``num_evaluated``, ``num_tasks``, then ``micro.<key>`` and
        ``macro.<key>`` per key (named as given), then ``ci_low`` / ``ci_high`` (micro) when intervals were computed.

        Returns
        -------
        DataFrame indexed by group name (index name ``group``).
        """
        keys = (keys,) if isinstance(keys, str) else tuple(keys)
        rows = []
        for group in self.groups:
            row: dict[str, Any] = {"num_relations": len(group.relations), "num_evaluated": group.num_evaluated,
                                   "num_tasks": group.num_tasks}  # fmt: skip
            for key in keys:
                row[f"micro.{key}"] = group.get(key, "micro")
                row[f"macro.{key}"] = group.get(key, "macro")
            if self.interval_key is not None:
                row["ci_low"] = math.nan if group.interval is None else group.interval.low
                row["ci_high"] = math.nan if group.interval is None else group.interval.high
            rows.append(row)
        return pd.DataFrame(rows, index=pd.Index([g.name for g in self.groups], name="group"))


def relation_groups(
    results: Any,
    groups: Mapping[str, Iterable[int | str] | int | str],
    *,
    relation_labels: LabelMapping | None = None,
    other: bool = False,
    allow_overlap: bool = False,
    ks: Sequence[int] | None = None,
    interval_key: str | None = "mrr",
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: int | None = 0,
) -> GroupTable:
    """Every metric of each group of relations, micro and macro, side by side.

    Parameters
    ----------
    results : RankBasedMetricResults, RankRecords or DataFrame
        Results that kept their per-task records, the records themselves, or a rank table (``results.ranks_df()``).
    groups : mapping of str to relation ids or labels
        Group name -> its relations: ids, labels (with ``relation_labels``), or a mix; a single id or label is a
        group of one. Repeated members count once. A relation the evaluated triples lack is kept in
        ``relations`` and left out of the averages (a group of no evaluated relation has 0 tasks and NaN metrics).
    relation_labels : mapping or sequence, optional
        label -> id (``data.relation_to_id``), id -> label, or a sequence indexed by id; needed for labels.
    other : bool, default=False
        Add a group :data:`OTHER` of the evaluated relations that no group holds.
    allow_overlap : bool, default=False
        Let a relation be in several groups (its tasks then count in each); otherwise that is a ValueError.
    ks : sequence of int, optional
        The k of hits@k; default the results' ``ks``, or (1, 3, 5, 10) for records.
    interval_key : str or None, default="mrr"
        The key of each group's bootstrap percentile interval of its micro value (its evaluation triples
        resampled, as :func:`kgeval.analysis.stats.confidence_interval`); None computes none.
    level, n_resamples, seed
        Of the interval, as in :func:`kgeval.analysis.stats.confidence_interval`; every group uses ``seed``.

    Returns
    -------
    GroupTable
        Per group: ``micro`` (every metric of all its tasks, per side and rank type: the numbers of
        ``evaluate(..., restrict_relations_to=relations)``) and ``macro`` (each metric's unweighted mean over its
        evaluated relations; NaN where a relation's value is NaN).

    Raises
    ------
    ValueError
        For no group, an empty group, a name that is not a non-empty string (or is :data:`OTHER` with
        ``other=True``), a negative id, a label without ``relation_labels`` or unknown to them, or a relation in
        two groups without ``allow_overlap``.
    """
    records, ks = recorded(results, ks, "relation groups")
    members = _resolve_groups(groups, relation_labels, other)
    if not allow_overlap:
        _check_disjoint(members)
    evaluated = np.unique(records.relation)
    if other:
        grouped = set().union(*members.values())
        members[OTHER] = tuple(int(r) for r in evaluated if int(r) not in grouped)
    sides = evaluated_sides(records)
    wanted = sorted(set().union(*members.values()) & set(evaluated.tolist()))
    per_relation = {r: subset_metrics(records.select(records.relation == r), ks, sides) for r in wanted}
    keys = list(subset_metrics(records.select(np.zeros(len(records), dtype=bool)), ks, sides))
    table = []
    for name, relations in members.items():
        part = records.select(np.isin(records.relation, np.array(relations, dtype=np.int64)))
        present = [r for r in relations if r in per_relation]
        macro = {key: math.fsum(per_relation[r][key] for r in present) / len(present) if present else math.nan
                 for key in keys}  # fmt: skip
        interval = None
        if interval_key is not None:
            interval = subset_interval(part, ks, interval_key, level=level, n_resamples=n_resamples, seed=seed)
        micro = subset_metrics(part, ks, sides)
        table.append(RelationGroup(name, relations, len(present), len(part), micro, macro, interval))
    key = None if interval_key is None else format_key(parse_key(interval_key))
    return GroupTable(groups=tuple(table), ks=ks, interval_key=key)


def _resolve_groups(groups: Any, relation_labels: Any, other: bool) -> dict[str, tuple[int, ...]]:
    """Group name -> its relation ids (sorted, unique), every name and member checked."""
    if not isinstance(groups, Mapping) or not groups:
        raise ValueError(f"groups must be a non-empty mapping of group name to relations, got {groups!r}")
    labels = None if relation_labels is None else label_array(relation_labels, "relation_labels")
    label_to_id = {} if labels is None else {label: i for i, label in enumerate(labels) if label is not None}
    resolved: dict[str, tuple[int, ...]] = {}
    for name, given in groups.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"group names must be non-empty strings, got {name!r}")
        if other and name == OTHER:
            raise ValueError(f"a group is named {OTHER!r}, the name other=True gives the remaining relations")
        if isinstance(given, torch.Tensor | np.ndarray):
            given = given.tolist()
        items = [given] if isinstance(given, str | int | np.integer) else list(given)
        if not items:
            raise ValueError(f"group {name!r} holds no relation")
        ids = set()
        for item in items:
            if isinstance(item, str):
                if labels is None:
                    raise ValueError(f"group {name!r} names the relation {item!r} by label: pass relation_labels")
                if item not in label_to_id:
                    near = close_matches(item, [str(label) for label in label_to_id])
                    hint = f"; close labels: {', '.join(near)}" if near else ""
                    raise ValueError(f"group {name!r}: no relation is labelled {item!r}{hint}")
                ids.add(label_to_id[item])
            elif isinstance(item, int | np.integer) and not isinstance(item, bool) and item >= 0:
                ids.add(int(item))
            else:
                raise ValueError(f"group {name!r}: relations are ids >= 0 or labels, got {item!r}")
        resolved[name] = tuple(sorted(ids))
    return resolved


def _check_disjoint(members: Mapping[str, tuple[int, ...]]) -> None:
    """ValueError naming the first relation that two groups hold."""
    owner: dict[int, str] = {}
    for name, relations in members.items():
        for relation in relations:
            if relation in owner:
                raise ValueError(
                    f"relation {relation} is in the groups {owner[relation]!r} and {name!r}: make the groups "
                    "disjoint, or pass allow_overlap=True to count its tasks in each"
                )
            owner[relation] = name


# -- the metrics of some tasks (shared with kgeval.analysis.buckets) ---------------------------------------------
def recorded(results: Any, ks: Sequence[int] | None, what: str) -> tuple[RankRecords, tuple[int, ...]]:
    """(records, ks) of results, records or a rank table, checked to hold every triple and num_candidates.

    ``ks`` None: the results' ``ks``, or (1, 3, 5, 10) where there are none.
    """
    records = results if isinstance(results, RankRecords) else rank_records(results)
    records.require_known(("head", "relation", "tail"), what)
    if records.num_candidates is None:
        raise ValueError(f"{what} need the records' num_candidates column")
    if len(records) == 0:
        raise ValueError(f"{what} need ranking tasks; the records hold none")
    return records, check_ks(getattr(results, "ks", (1, 3, 5, 10)) if ks is None else ks)


def evaluated_sides(records: RankRecords) -> tuple[Side, ...]:
    """The sides of the records' tasks (``both`` where there are head or tail tasks), in the order of SIDES."""
    present = set(records.side.tolist())
    return tuple(side for side in SIDES if present & set(SIDE_CODES[side]))


def subset_metrics(records: RankRecords, ks: Sequence[int], sides: Sequence[Side]) -> dict[MetricKey, float]:
    """Every metric of some tasks per side and rank type: the keys ``RankBasedMetricResults.from_records`` reports,
    each computed by its registry function (METRICS.md); a side with no task gives NaN without a warning.

    Parameters
    ----------
    records : RankRecords
        The tasks, with num_candidates.
    ks : sequence of int
    sides : sequence of {"head", "tail", "relation", "both"}
        ``both`` pools the head and tail tasks.
    """
    out: dict[MetricKey, float] = {}
    for side in sides:
        rows = np.isin(records.side, np.array(SIDE_CODES[side], dtype=np.int8))
        for rank_type in RANK_TYPES:
            entries = reported_keys(ks, rank_type)
            if not rows.any():
                out.update({MetricKey(side, rank_type, key): math.nan for key, _info, _k in entries})
                continue
            summary = summarize(records.ranks(rank_type)[rows], records["num_candidates"][rows], ks)
            out.update({MetricKey(side, rank_type, key): info.function(summary, k) for key, info, k in entries})
    return out


@dataclass(frozen=True)
class _Subset:
    """Some tasks as :class:`kgeval.analysis.readings.RecordedResults`, for the bootstrap of their interval."""

    records: RankRecords
    ks: tuple[int, ...]

    def resolve_key(self, key: str) -> MetricKey:
        return parse_key(key)


def subset_interval(
    records: RankRecords, ks: Sequence[int], key: str, *, level: float, n_resamples: int, seed: int | None
) -> ConfidenceInterval | None:
    """:func:`kgeval.analysis.stats.confidence_interval` of some tasks (their evaluation triples resampled); None
    when none of them is of the key's side."""
    parsed = parse_key(key)
    lookup(parsed.name)
    if not np.isin(records.side, np.array(SIDE_CODES[parsed.side], dtype=np.int8)).any():
        return None
    return confidence_interval(_Subset(records, check_ks(ks)), key, level=level, n_resamples=n_resamples, seed=seed)
