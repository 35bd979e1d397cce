"""From labelled triples to ids, one set of rules for files and in-memory tables: ids from a given vocabulary
(a label outside it is an error) or by sorted label; labels unseen in train are kept with a warning (default),
kept silently, or dropped as PyKEEN does (``unseen``).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval.exceptions import UnseenLabelsWarning

__all__ = [
    "DUPLICATE_CHOICES",
    "KNOWN_HEADERS",
    "TIME_HEADERS",
    "UNSEEN_CHOICES",
    "LabelNotInIdsError",
    "LabelledSplit",
    "Unseen",
    "check_id_ranges",
    "check_id_table",
    "column_order",
    "drop_unmatched_first_rows",
    "handle_duplicates",
    "is_header",
    "map_splits",
    "split_from_table",
]

#: what to do with valid / test triples whose labels never occur in train
Unseen = Literal["warn", "keep", "drop"]
UNSEEN_CHOICES: tuple[str, ...] = ("warn", "keep", "drop")

#: what to do with a row equal to an earlier row of the same split: keep it (ranked once per occurrence, as RE-GCN
#: does) or merge it into the first (ranked once, as the nec-research framework does); either way counted and said
Duplicates = Literal["keep", "merge"]
DUPLICATE_CHOICES: tuple[str, ...] = ("keep", "merge")


class LabelNotInIdsError(ValueError):
    """A label of a file is not in the label-to-id map given to read it with (a model's): the data is not the
    model's."""


class DuplicatesWarning(UserWarning):
    """A dataset's split repeats rows: kept (ranked once per occurrence) or merged, as the loader was asked."""


def handle_duplicates(rows: Mapping[str, torch.Tensor], policy: Duplicates, noun: str,
                      sources: Mapping[str, str]) -> dict[str, torch.Tensor]:  # fmt: skip
    """Each split's id rows with the rows that repeat an earlier row of the same split kept or merged (the first
    occurrence stays, in order), and one :class:`DuplicatesWarning` counting them per split when there are any."""
    if policy not in DUPLICATE_CHOICES:
        raise ValueError(f"duplicates must be one of {DUPLICATE_CHOICES}, got {policy!r}")
    handled, counts = {}, {}
    for split, table in rows.items():
        first = _first_occurrences(table)
        counts[split] = len(table) - len(first)
        handled[split] = table[torch.from_numpy(first)] if policy == "merge" and counts[split] else table
    if any(counts.values()):
        found = "; ".join(f"{sources.get(split, split)}: {count:,} of {len(rows[split]):,}"
                          for split, count in counts.items() if count)  # fmt: skip
        what = ("merged into their first occurrence" if policy == "merge" else
                "kept, each ranked as often as it occurs; pass duplicates='merge' to rank each once")  # fmt: skip
        warnings.warn(f"{noun} that repeat an earlier one of the same split -- {found} -- {what}", DuplicatesWarning,
                      stacklevel=4)  # fmt: skip
    return handled


def _first_occurrences(table: torch.Tensor) -> np.ndarray:
    """The sorted row indices of each distinct row's first occurrence."""
    if len(table) == 0:
        return np.zeros(0, dtype=np.int64)
    _, first = np.unique(table.numpy(), axis=0, return_index=True)
    return np.sort(first)


#: header lines recognised by ``header="auto"`` (compared case-insensitively)
KNOWN_HEADERS: frozenset[tuple[str, str, str]] = frozenset(
    {
        ("head", "relation", "tail"),
        ("subject", "predicate", "object"),
        ("h", "r", "t"),
        ("source", "relation", "target"),
        ("head_label", "relation_label", "tail_label"),
        ("head", "rel", "tail"),
        ("head_id", "relation_id", "tail_id"),
        ("h_id", "r_id", "t_id"),
        ("e1", "rel", "e2"),
        ("e1", "r", "e2"),
        ("e1", "relation", "e2"),
        ("entity1", "relation", "entity2"),
        ("src", "rel", "dst"),
        ("src", "relation", "dst"),
        ("src", "edge", "dst"),
        ("source", "edge", "target"),
        ("from", "edge", "to"),
        ("from", "relation", "to"),
        ("subject", "relation", "object"),
        ("s", "p", "o"),
    }
)


@dataclass
class LabelledSplit:
    """One split's labels: three parallel lists, and where each row came from (for error messages)."""

    heads: list[str]
    relations: list[str]
    tails: list[str]
    origins: list[str]  #: e.g. "data/valid.txt line 7" or "valid row 3"
    #: the first row is a file's first line that is no known header: kept only if one of its labels occurs again
    first_row_may_be_header: bool = False
    #: where the split was read from (a file's path), for messages
    source: str = ""
    #: the time label of each row, for a split of (head, relation, tail, time) quadruples; None for triples
    times: list[str] | None = None
    #: the column names a header gave, in the file's order (empty without such a header)
    columns: tuple[str, ...] = ()


def drop_unmatched_first_rows(splits: Mapping[str, LabelledSplit]) -> None:
    """Drop, with a warning, each file's first row (``first_row_may_be_header``) none of whose three labels occurs
    in any other row of the dataset: a header line of a form kgeval does not know (``e1 rel e2``, ``from edge
    to``, ...), never silently read as a triple of three new labels."""
    entities: set[str] = set()
    relations: set[str] = set()
    for split in splits.values():
        start = 1 if split.first_row_may_be_header else 0
        entities.update(split.heads[start:], split.tails[start:])
        relations.update(split.relations[start:])
    for split in splits.values():
        if not split.first_row_may_be_header or not split.heads:
            continue
        head, relation, tail = split.heads[0], split.relations[0], split.tails[0]
        if head in entities or tail in entities or relation in relations:
            continue
        warnings.warn(
            f"{split.origins[0]} ({head!r}, {relation!r}, {tail!r}) is read as a header line: none of its labels "
            "occurs anywhere else in the dataset. Pass header=False to read it as a triple (header=True skips "
            "every file's first line)",
            UserWarning,
            stacklevel=4,  # here <- _read_splits <- load_tsv_dataset <- its caller
        )
        for column in (split.heads, split.relations, split.tails, split.origins, split.times):
            if column is not None:
                del column[0]


#: the fourth field of a quadruple file's header line (``head relation tail time`` and the like)
TIME_HEADERS: frozenset[str] = frozenset({"time", "timestamp", "date", "t", "tau", "ts"})


#: the names a header may give each column of a quadruple file, in any order (TGB's ``ts,head,tail,relation_type``
#: among them); "t" is a time there, never a tail
COLUMN_NAMES: dict[str, frozenset[str]] = {
    "head": frozenset({"head", "subject", "sub", "s", "h", "src", "source", "from", "e1", "head_label", "head_id"}),
    "relation": frozenset(
        {
            "relation",
            "predicate",
            "rel",
            "r",
            "p",
            "relation_type",
            "edge_type",
            "edge",
            "type",
            "relation_label",
            "relation_id",
        }
    ),
    "tail": frozenset({"tail", "object", "obj", "o", "dst", "target", "to", "e2", "tail_label", "tail_id"}),
    "time": TIME_HEADERS,
}


def column_order(fields: Sequence[str]) -> tuple[int, ...] | None:
    """For a header line of four fields naming the columns of a quadruple file in any order (``ts,head,tail,
    relation_type``), the index of the head, relation, tail and time fields; None when it is no such header."""
    names = [field.strip().lower() for field in fields]
    if len(names) != len(COLUMN_NAMES):
        return None
    order = []
    for kind in ("head", "relation", "tail", "time"):
        found = [index for index, name in enumerate(names) if name in COLUMN_NAMES[kind]]
        if len(found) != 1:
            return None
        order.append(found[0])
    return tuple(order) if len(set(order)) == len(order) else None


def is_header(fields: Sequence[str]) -> bool:
    """Whether three fields (four, with a time) look like a header line (``head relation tail [time]`` and the
    like)."""
    names = tuple(field.strip().lower() for field in fields)
    if len(names) == 4:
        return names[:3] in KNOWN_HEADERS and names[3] in TIME_HEADERS
    return names in KNOWN_HEADERS


def split_from_table(table: Any, name: str) -> LabelledSplit:
    """A split from a DataFrame (columns head / relation / tail, or the first three) or an (n, 3) array of labels."""
    if isinstance(table, pd.DataFrame):
        named = [column for column in ("head", "relation", "tail") if column in table.columns]
        frame = table[named] if len(named) == 3 else table.iloc[:, :3]
        if frame.shape[1] != 3:
            raise ValueError(f"{name}: a table of triples needs 3 columns (head, relation, tail), got {table.shape[1]}")
        rows = frame.to_numpy()
    else:
        rows = np.asarray(table, dtype=object)
        if rows.ndim != 2 or rows.shape[1] != 3:
            raise ValueError(f"{name}: labelled triples must have shape (n, 3), got {rows.shape}")
    for index, row in enumerate(rows):
        for field, value in zip(("head", "relation", "tail"), row, strict=True):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} row {index}: the {field} label must be a non-empty string, got {value!r}")
    heads, relations, tails = ([list(column) for column in zip(*rows, strict=True)] if len(rows)
                               else [[], [], []])  # fmt: skip
    return LabelledSplit(heads, relations, tails, origins=[f"{name} row {index}" for index in range(len(rows))])


def check_id_table(split: str, table: Any, columns: Sequence[tuple[str, int]]) -> None:
    """TypeError / ValueError naming ``split`` unless ``table`` is an int64 tensor of shape (n, len(columns)) whose
    column i holds ids in [0, bound) for ``columns[i] = (kind, bound)`` (e.g. ("head", num_entities))."""
    if not isinstance(table, torch.Tensor):
        raise TypeError(f"{split} must be a torch.Tensor, got {type(table).__name__}")
    if table.ndim != 2 or table.shape[1] != len(columns):
        raise ValueError(f"{split} must have shape (n, {len(columns)}), got {tuple(table.shape)}")
    if table.dtype != torch.long:
        raise TypeError(f"{split} must have dtype torch.int64, got {table.dtype}")
    check_id_ranges(split, table, columns)


def check_id_ranges(name: str, table: torch.Tensor, columns: Sequence[tuple[str, int]]) -> None:
    """ValueError naming ``name``, the kind and the range found unless column i of the (n, >= len(columns)) id
    table lies in [0, bound) for ``columns[i] = (kind, bound)``; nothing to check in an empty table."""
    if table.numel() == 0:
        return
    for column, (kind, bound) in enumerate(columns):
        low, high = int(table[:, column].min()), int(table[:, column].max())
        if low < 0 or high >= bound:
            raise ValueError(f"{name} has {kind} ids in [{low}, {high}], outside [0, {bound - 1}]")


def map_splits(
    splits: Mapping[str, LabelledSplit],
    unseen: Unseen = "warn",
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
) -> tuple[dict[str, torch.Tensor], dict[str, int], dict[str, int]]:
    """Map labelled splits (``train`` first) to (n, 3) LongTensors of ids.

    Returns
    -------
    mapped : dict of split name to LongTensor of shape (n, 3)
    entity_to_id, relation_to_id : dict of str to int
        The given vocabularies, or sorted labels (of train only when ``unseen="drop"``).

    Raises
    ------
    ValueError
        For an unknown ``unseen`` choice, a label outside a given vocabulary (naming where it came from), or an
        empty train split without given vocabularies.
    """
    if unseen not in UNSEEN_CHOICES:
        raise ValueError(f"unseen must be one of {UNSEEN_CHOICES}, got {unseen!r}")
    train = splits["train"]
    if not train.heads and (entity_to_id is None or relation_to_id is None):
        raise ValueError(f"{train.source or 'train'}: the train split holds no {_noun(train)}, so there are no "
                         "entities or relations to number (a file whose only line has labels found nowhere else is "
                         "read as a header: pass header=False)")  # fmt: skip
    seen_entities, seen_relations = set(train.heads) | set(train.tails), set(train.relations)
    kept = {name: _drop_unseen(split, seen_entities, seen_relations) if unseen == "drop" and name != "train"
            else split for name, split in splits.items()}  # fmt: skip
    if unseen == "warn":
        _warn_about_unseen(splits, seen_entities, seen_relations)
    if unseen == "drop":
        for name, split in splits.items():
            if len(kept[name].heads) < len(split.heads):
                warnings.warn(
                    f"{name}: dropped {len(split.heads) - len(kept[name].heads)} of {len(split.heads)} {_noun(split)} "
                    "whose entities or relations never occur in train (as PyKEEN does)",
                    UnseenLabelsWarning,
                    stacklevel=4,  # the caller of load_tsv_dataset / load_labelled_triples
                )
    entities = {label for split in kept.values() for label in (*split.heads, *split.tails)}
    relations = {label for split in kept.values() for label in split.relations}
    entity_ids = check_one_to_one(entity_to_id, "entity_to_id") if entity_to_id is not None else _sorted_ids(entities)
    relation_ids = (check_one_to_one(relation_to_id, "relation_to_id") if relation_to_id is not None
                    else _sorted_ids(relations))  # fmt: skip
    mapped = {name: _ids(split, entity_ids, relation_ids) for name, split in kept.items()}
    return mapped, entity_ids, relation_ids


def check_one_to_one(mapping: Mapping[str, int], name: str) -> dict[str, int]:
    """``mapping`` as a dict once every id is a non-negative int given to one label only; a ValueError naming the
    first id given twice (two labels on one id would merge two entities without a word)."""
    ids: dict[str, int] = {}
    owner: dict[int, str] = {}
    for label, given in mapping.items():
        try:
            index = operator.index(given)  # Python and NumPy ints
        except TypeError:
            index = -1
        if isinstance(given, bool) or index < 0:
            raise ValueError(f"{name}[{label!r}] = {given!r} is not an id (an int >= 0)")
        ids[label] = index
        if owner.setdefault(index, label) != label:
            raise ValueError(f"{name} gives the id {index} to both {owner[index]!r} and {label!r}: a label map must "
                             "be one-to-one")  # fmt: skip
    return ids


def _sorted_ids(labels: set[str]) -> dict[str, int]:
    return {label: index for index, label in enumerate(sorted(labels))}


def _ids(split: LabelledSplit, entity_ids: Mapping[str, int], relation_ids: Mapping[str, int]) -> torch.Tensor:
    """The split as a LongTensor (n, 3); ValueError naming the first label outside the vocabularies."""
    columns = []
    for labels, vocabulary, kind in (
        (split.heads, entity_ids, "entity"),
        (split.relations, relation_ids, "relation"),
        (split.tails, entity_ids, "entity"),
    ):
        try:
            columns.append(np.fromiter(map(vocabulary.__getitem__, labels), dtype=np.int64, count=len(labels)))
        except KeyError as error:
            row = next(index for index, label in enumerate(labels) if label not in vocabulary)
            raise LabelNotInIdsError(
                f"{split.origins[row]}: {kind} label {labels[row]!r} is not in the given {kind}_to_id"
            ) from error
    return torch.from_numpy(np.stack(columns, axis=1)).reshape(-1, 3)


def _drop_unseen(split: LabelledSplit, entities: set[str], relations: set[str]) -> LabelledSplit:
    keep = [
        index
        for index, (head, relation, tail) in enumerate(zip(split.heads, split.relations, split.tails, strict=True))
        if head in entities and tail in entities and relation in relations
    ]
    return LabelledSplit(
        [split.heads[i] for i in keep],
        [split.relations[i] for i in keep],
        [split.tails[i] for i in keep],
        [split.origins[i] for i in keep],
        times=None if split.times is None else [split.times[i] for i in keep],
    )


def _noun(split: LabelledSplit) -> str:
    """What a row of the split is: "quadruples" (with a time) or "triples"."""
    return "triples" if split.times is None else "quadruples"


def _warn_about_unseen(splits: Mapping[str, LabelledSplit], entities: set[str], relations: set[str]) -> None:
    """One warning counting the valid / test triples (quadruples), entities and relations never seen in train."""
    parts, noun = [], _noun(splits["train"])
    for name, split in splits.items():
        if name == "train":
            continue
        new_entities = (set(split.heads) | set(split.tails)) - entities
        new_relations = set(split.relations) - relations
        triples = sum(
            head in new_entities or tail in new_entities or relation in new_relations
            for head, relation, tail in zip(split.heads, split.relations, split.tails, strict=True)
        )
        if triples:
            parts.append(
                f"{name}: {triples} {noun} with {len(new_entities)} entities and {len(new_relations)} relations"
            )
    if parts:
        warnings.warn(
            f"labels that never occur in train (their embeddings are untrained): {'; '.join(parts)}. Kept; pass "
            f"unseen='drop' to drop those {noun} (PyKEEN's behaviour) or unseen='keep' to keep them silently "
            "(--unseen drop / keep on the command line)",
            UnseenLabelsWarning,
            stacklevel=5,  # the caller of load_tsv_dataset / load_labelled_triples
        )
