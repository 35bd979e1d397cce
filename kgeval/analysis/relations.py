"""Views of per-task records: the rank table, per-relation and per-category metrics, macro averages.

Each group's metrics are the registry's functions applied to the group's ranks (no second formula; METRICS.md,
Macro averaging). Relation categories (1-1, 1-N, N-1, N-N) follow Bordes et al. (2013), threshold 1.5.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval.keys import MetricKey, format_key, parse_key
from kgeval.metrics.registry import MetricInfo, lookup, summarize
from kgeval.metrics.summary import RankSummary
from kgeval.records import RankRecords
from kgeval.typing import RANK_TYPES, SIDES, TARGETS

__all__ = [
    "CATEGORIES",
    "DEFAULT_THRESHOLD",
    "UNSEEN",
    "Column",
    "LabelMapping",
    "group_metrics",
    "label_array",
    "macro_average",
    "per_category_frame",
    "per_relation_frame",
    "ranks_frame",
    "relation_categories",
    "resolve_columns",
]

#: the relation categories, in display order
CATEGORIES: tuple[str, ...] = ("1-1", "1-N", "N-1", "N-N")
#: the category of relations absent from the reference triples
UNSEEN = "unseen"
#: the usual threshold on the average number of heads / tails (Bordes et al. 2013)
DEFAULT_THRESHOLD = 1.5

LabelMapping = Mapping[str, int] | Mapping[int, str] | Sequence[str]


# -- rank export ------------------------------------------------------------------------------------------------
def ranks_frame(
    records: RankRecords, entity_labels: LabelMapping | None = None, relation_labels: LabelMapping | None = None
) -> pd.DataFrame:
    """One row per ranking task: head, relation, tail, side, the three ranks, num_candidates, task_index.

    Parameters
    ----------
    records : RankRecords
        The per-task records of a results object.
    entity_labels, relation_labels : mapping or sequence, optional
        label -> id (e.g. ``TriplesDataset.entity_to_id``), id -> label, or a sequence indexed by id. When given,
        ``head_label`` / ``tail_label`` (resp. ``relation_label``) columns are added.

    Returns
    -------
    DataFrame with n rows; ``side`` is categorical ("head", "tail"), ``realistic`` float64, the rest int64.
    """
    side = pd.Categorical.from_codes(records["side"].astype(np.int64), categories=list(TARGETS))
    realistic = records.ranks("realistic")
    frame = pd.DataFrame(
        {
            "head": records["head"],
            "relation": records["relation"],
            "tail": records["tail"],
            "side": side,
            "optimistic": records["optimistic"],
            "pessimistic": records["pessimistic"],
            "realistic": realistic,
            "num_candidates": records["num_candidates"],
            "task_index": records["task_index"],
        }
    )
    if entity_labels is not None:
        labels = label_array(entity_labels, "entity_labels")
        frame["head_label"] = _labels_of(labels, records["head"], "entity_labels")
        frame["tail_label"] = _labels_of(labels, records["tail"], "entity_labels")
    if relation_labels is not None:
        frame["relation_label"] = _labels_of(
            label_array(relation_labels, "relation_labels"), records["relation"], "relation_labels"
        )
    return frame


def label_array(mapping: LabelMapping, name: str) -> np.ndarray:
    """An object array whose item i is the label of id i (None where no label is known).

    Accepts label -> id (``entity_to_id``), id -> label, or a sequence of labels indexed by id.
    """
    pairs: list[tuple[Any, Any]]  # (id, label), the ids not yet checked
    if isinstance(mapping, Mapping):
        items: list[tuple[Any, Any]] = list(mapping.items())
        label_to_id = all(isinstance(key, str) for key, _ in items)
        pairs = [(value, key) for key, value in items] if label_to_id else items
    elif isinstance(mapping, Sequence) and not isinstance(mapping, str):
        pairs = list(enumerate(mapping))
    else:
        kind = type(mapping).__name__
        raise TypeError(f"{name} must be a mapping (label -> id or id -> label) or a sequence, got {kind}")
    bad = [i for i, _ in pairs if isinstance(i, bool) or not isinstance(i, int | np.integer) or i < 0]
    if bad:
        raise TypeError(f"{name} must map labels to non-negative integer ids (or back), got id {bad[0]!r}")
    labels: np.ndarray = np.full(max((int(i) for i, _ in pairs), default=-1) + 1, None, dtype=object)
    for i, label in pairs:
        labels[int(i)] = label
    return labels


def _labels_of(labels: np.ndarray, ids: np.ndarray, name: str) -> np.ndarray:
    """``labels[ids]``, with a ValueError naming the first id that has no label."""
    known = ids < len(labels)
    found = labels[np.where(known, ids, 0)] if len(labels) else np.full(len(ids), None, dtype=object)
    missing = ~known | np.equal(found, None)  # type: ignore[call-overload]  # object arrays: elementwise "is None"
    if missing.any():
        raise ValueError(f"{name} has no label for id {int(ids[missing][0])}")
    return found


# -- grouped metrics ----------------------------------------------------------------------------------------------
def _explicit_side(key: str) -> bool:
    """Whether the key spells out its side (``"tail.mrr"``) rather than taking the default."""
    parts = key.split(".")
    return len(parts) == 3 or (len(parts) == 2 and parts[0].strip().lower() in SIDES)


def _evaluated_sides(records: RankRecords) -> tuple[str, ...]:
    present = set(np.unique(records["side"]).tolist())
    both = ("both",) if present & {0, 1} else ()  # head and tail pooled: relation tasks are kept apart
    return (*(t for i, t in enumerate(TARGETS) if i in present), *both)


Column = tuple[str, MetricKey, MetricInfo, int | None]


def resolve_columns(keys: str | Sequence[str], records: RankRecords) -> list[Column]:
    """The columns asked for: ``<side>.<key>`` for every evaluated side, or just ``<key>`` when it names its side.

    Returns (column name, resolved key, metric metadata, k) per column, without repeated names.

    Raises
    ------
    KeyError
        For an unknown metric, a rank type the metric does not support, or a side that was not evaluated.
    """
    sides = _evaluated_sides(records)
    columns: list[Column] = []
    for key in (keys,) if isinstance(keys, str) else keys:
        parsed = parse_key(key)
        info, k = lookup(parsed.name)
        if parsed.rank_type not in info.rank_types:
            raise KeyError(f"{info.name} is defined for {', '.join(info.rank_types)} ranks only (key {key!r})")
        if parsed.side not in sides:
            raise KeyError(f"side {parsed.side!r} of key {key!r} was not evaluated; evaluated sides: {sides}")
        explicit = _explicit_side(key)
        for side in (parsed.side,) if explicit else sides:
            name = key if explicit else f"{side}.{key}"
            if name not in [c[0] for c in columns]:
                columns.append((name, MetricKey(side, parsed.rank_type, parsed.name), info, k))  # type: ignore[arg-type]
    return columns


def _all_ks(ks: Sequence[int], columns: Sequence[Column]) -> tuple[int, ...]:
    return tuple(sorted(set(ks) | {k for _, _, _, k in columns if k is not None}))


def group_metrics(
    records: RankRecords,
    groups: np.ndarray,
    keys: str | Sequence[str],
    ks: Sequence[int],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Metrics of the tasks of each group, computed by the registry functions.

    Parameters
    ----------
    records : mapping of column -> ndarray of shape (n,)
    groups : ndarray of shape (n,)
        A sortable group label per task (a relation id, a category name, ...).
    keys : str or sequence of str
        Metric keys; see :func:`resolve_columns` for the sides reported.
    ks : sequence of int
        The k tracked in the summaries (the requested ks are added).

    Returns
    -------
    labels : ndarray of shape (g,)
        The distinct groups, sorted.
    columns : dict of str -> ndarray of shape (g,)
        ``count`` (the evaluation triples of the group: tasks of its most frequent side) and one float64 column
        per column of :func:`resolve_columns`.
    """
    columns = resolve_columns(keys, records)
    ks = _all_ks(ks, columns)
    ranks = {rank_type: records.ranks(rank_type) for rank_type in RANK_TYPES}
    order = np.argsort(groups, kind="stable")
    labels, starts = np.unique(groups[order], return_index=True)
    bounds = [*starts.tolist(), len(order)]
    out = {"count": np.zeros(len(labels), dtype=np.int64)}
    out.update({name: np.full(len(labels), math.nan) for name, _, _, _ in columns})
    for g in range(len(labels)):
        rows = order[bounds[g] : bounds[g + 1]]
        side_of_row = records["side"][rows]
        out["count"][g] = max(np.count_nonzero(side_of_row == i) for i in range(len(TARGETS)))
        summaries: dict[tuple[str, str], RankSummary] = {}
        for name, column, info, k in columns:
            if (column.side, column.rank_type) not in summaries:
                if column.side == "both":  # head and tail tasks pooled (METRICS.md), never relation prediction
                    chosen = rows[side_of_row != TARGETS.index("relation")]
                else:
                    chosen = rows[side_of_row == TARGETS.index(column.side)]
                summaries[column.side, column.rank_type] = summarize(
                    ranks[column.rank_type][chosen], records["num_candidates"][chosen], ks
                )
            out[name][g] = info.function(summaries[column.side, column.rank_type], k)
    return labels, out


def per_relation_frame(
    records: RankRecords,
    keys: str | Sequence[str] = ("mrr", "hits@10"),
    ks: Sequence[int] = (),
    relation_labels: LabelMapping | None = None,
) -> pd.DataFrame:
    """One row per relation present in the evaluated triples: ``count`` and each metric per side.

    Returns
    -------
    DataFrame indexed by relation id (name ``relation``); columns ``count`` (evaluation triples of the relation),
    ``relation_label`` when labels are given, and one column per evaluated side and key, named
    ``<side>.<key as given>`` (``"both.mrr"``), or the key itself when it names its side (``"tail.hits@10"``).
    """
    records.require_known(("relation",), "a per-relation table")
    labels, columns = group_metrics(records, records["relation"], keys, ks)
    frame = pd.DataFrame(columns, index=pd.Index(labels, name="relation"))
    if relation_labels is not None:
        names = _labels_of(label_array(relation_labels, "relation_labels"), labels, "relation_labels")
        frame.insert(1, "relation_label", names)
    return frame


def macro_average(records: RankRecords, key: str, ks: Sequence[int] = ()) -> float:
    """The unweighted mean over relations of a per-relation metric (a NaN relation makes it NaN).

    The side and rank type come from the key (defaults ``both`` and ``realistic``).
    """
    parsed = parse_key(key)
    explicit = format_key(parsed)
    records.require_known(("relation",), "a macro average over relations")
    _labels, columns = group_metrics(records, records["relation"], explicit, ks)
    values = columns[explicit].tolist()
    return math.fsum(values) / len(values)


# -- relation categories -----------------------------------------------------------------------------------------
def relation_categories(triples: torch.Tensor | np.ndarray, *, threshold: float = DEFAULT_THRESHOLD) -> pd.DataFrame:
    """The 1-1 / 1-N / N-1 / N-N category of every relation of ``triples`` (duplicates counted once).

    Parameters
    ----------
    triples : LongTensor or ndarray of shape (m, 3)
        The reference triples (usually train).
    threshold : float, default=1.5
        A side is "N" when its average is at least this.

    Returns
    -------
    DataFrame indexed by relation id with columns ``num_triples``, ``tails_per_head`` (average distinct tails
    per (h, r)), ``heads_per_tail`` (average distinct heads per (r, t)) and ``category``.
    """
    array = triples.detach().cpu().numpy() if isinstance(triples, torch.Tensor) else np.asarray(triples)
    if array.ndim != 2 or array.shape[1] != 3 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"triples must be an integer array of shape (m, 3), got {array.dtype} {array.shape}")
    if not (isinstance(threshold, int | float) and not isinstance(threshold, bool) and threshold > 0):
        raise ValueError(f"threshold must be a positive number, got {threshold!r}")
    unique = np.unique(array.astype(np.int64), axis=0)
    relations, num_triples = np.unique(unique[:, 1], return_counts=True)
    _, head_pairs = np.unique(np.unique(unique[:, [1, 0]], axis=0)[:, 0], return_counts=True)
    _, tail_pairs = np.unique(np.unique(unique[:, [1, 2]], axis=0)[:, 0], return_counts=True)
    tails_per_head = num_triples / head_pairs
    heads_per_tail = num_triples / tail_pairs
    head_side = np.where(heads_per_tail < threshold, "1", "N")
    tail_side = np.where(tails_per_head < threshold, "1", "N")
    return pd.DataFrame(
        {
            "num_triples": num_triples,
            "tails_per_head": tails_per_head,
            "heads_per_tail": heads_per_tail,
            "category": np.char.add(np.char.add(head_side, "-"), tail_side).astype(object),
        },
        index=pd.Index(relations, name="relation"),
    )


def per_category_frame(
    records: RankRecords,
    reference_triples: torch.Tensor | np.ndarray,
    keys: str | Sequence[str] = ("mrr", "hits@10"),
    ks: Sequence[int] = (),
    threshold: float = DEFAULT_THRESHOLD,
) -> pd.DataFrame:
    """Metrics over the tasks of each relation category (micro-averaged within a category).

    Relations of the evaluated triples that are absent from ``reference_triples`` form the category
    :data:`UNSEEN`.

    Returns
    -------
    DataFrame indexed by category (1-1, 1-N, N-1, N-N, unseen; those present) with ``count`` (evaluation
    triples), ``num_relations`` and the metric columns of :func:`per_relation_frame`.
    """
    records.require_known(("relation",), "a per-category table")
    categories = relation_categories(reference_triples, threshold=threshold)["category"]
    known = categories.reindex(np.unique(records["relation"])).fillna(UNSEEN)
    order = [*CATEGORIES, UNSEEN]
    codes = pd.Series(known.map(order.index).to_numpy(), index=known.index)
    groups = codes.loc[records["relation"]].to_numpy()
    labels, columns = group_metrics(records, groups, keys, ks)
    frame = pd.DataFrame(columns, index=pd.Index([order[i] for i in labels], name="category"))
    frame.insert(1, "num_relations", [int((codes == i).sum()) for i in labels])
    return frame
