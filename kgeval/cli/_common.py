"""What the command line's evaluations of triples, temporal and inductive data share: the version and protocol
written into ``--json`` documents, and the refusal of options a kind of data does not honour (never ignored)."""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kgeval._version import __version__
from kgeval.datasets import dataset_fingerprint

__all__ = [
    "BUCKET_REFERENCES",
    "RANK_TYPE_RULES",
    "check_ranks_fit",
    "count_of",
    "int_at_least",
    "json_header",
    "metrics_document",
    "one_line",
    "positive_float",
    "provenance",
    "read_groups",
    "refuse_options",
    "version",
    "with_provenance",
]

#: how each rank type counts, as every ``--json`` document states it
RANK_TYPE_RULES = {"optimistic": "1 + #(score > true)", "pessimistic": "1 + #(score >= true)",
                   "realistic": "(optimistic + pessimistic) / 2"}  # fmt: skip


#: ``--bucket-reference`` -> the dataset splits whose triples the frequency buckets count
BUCKET_REFERENCES: dict[str, tuple[str, ...]] = {"train": ("train",), "train+valid": ("train", "valid"),
                                                 "all": ("train", "valid", "test")}  # fmt: skip


def read_groups(path: str) -> dict[str, Any]:
    """The JSON object of ``--relation-groups``: group name -> relation labels or ids."""
    groups = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(groups, dict):
        raise ValueError(f"--relation-groups {path} must hold a JSON object: name -> relations")
    return groups


def count_of(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is 1 ("1 epoch", "0 epochs", "10 epochs")."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def version() -> str:
    """kgeval's version, from its one source (:mod:`kgeval._version`): the same in every document the command line
    and the audits write, installed or in a bare checkout."""
    return __version__


def json_header(source: Mapping[str, Any], setting: Any, ks: Sequence[int]) -> dict[str, Any]:
    """The keys every ``kgeval evaluate --json`` document starts with: ``kgeval_version``, ``source`` and
    ``protocol`` (the filter setting or settings, the rank types' rules, the ks)."""
    protocol = {"setting": setting, "rank_types": dict(RANK_TYPE_RULES), "ks": list(ks)}
    return {"kgeval_version": version(), "source": dict(source), "protocol": protocol}


def metrics_document(source: Mapping[str, Any], setting: str, ks: Sequence[int], results: Any,
                     others: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    """The one shape of every ``kgeval evaluate --json`` document, whatever the protocol: :func:`json_header`
    (``protocol.setting`` names the setting of ``metrics``: ``filtered``, ``time-aware``, ...), ``extra`` keys,
    ``metrics`` (every ``side.rank_type.metric`` key of ``results``, undefined ones null) and, where an evaluation
    made other settings beside it (a temporal one: static and raw), ``other_settings``: setting -> the same flat
    metrics."""
    document = {**json_header(source, setting, ks), **extra, "metrics": _flat(results)}
    if others:
        document["other_settings"] = {name: _flat(got) for name, got in others.items()}
    return document


def _flat(results: Any) -> dict[str, float | None]:
    return {key: (None if value != value else value) for key, value in results.to_flat_dict().items()}


def provenance(model: str, dataset: Any, split: str, filtered_by: Sequence[str], setting: str) -> dict[str, str]:
    """What a rank table written by the command line records of its evaluation (one value per column of
    :data:`kgeval.records.PROVENANCE_COLUMNS`): the model's class, the dataset's name and fingerprint, the split,
    the filter's splits, the setting, and the time now (UTC, to the second)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return {"model": model, "dataset": dataset.name, "dataset_fingerprint": dataset_fingerprint(dataset),
            "split": split, "filtered_by": "+".join(filtered_by), "setting": setting, "evaluated_at": now}  # fmt: skip


def with_provenance(frame: pd.DataFrame, about: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with a column per entry of ``about`` (the same value on every row), a column it has already
    (a temporal table's ``setting``) kept as it is."""
    return frame.assign(**{name: value for name, value in about.items() if name not in frame.columns})


def refuse_options(args: argparse.Namespace, kind: str, options: Mapping[str, Any]) -> None:
    """ValueError naming the first option of ``options`` (its attribute name -> its default) that ``args`` sets
    otherwise: an option the evaluation of ``kind`` data does not honour is refused, never silently ignored."""
    for name, default in options.items():
        value = getattr(args, name, default)
        if value != default and not (isinstance(default, list) and list(value) == default):
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{flag} is not available for {kind} data yet ({kind} evaluations report their own "
                             "table; --json holds every metric)")  # fmt: skip


def check_ranks_fit(records: Any, frame: pd.DataFrame, dataset: Any, path: str) -> Any:
    """``records`` (:class:`kgeval.records.RankRecords` of ``frame``) when they can be a ranking of ``dataset``;
    a ValueError naming the first mismatch otherwise: the dataset the table recorded (its fingerprint, where the
    table has one), ids inside the dataset's counts (times too, for a temporal table), candidates no more than its
    entities, and labels (where the table has them) those of the dataset's ids."""
    recorded = frame["dataset_fingerprint"].iloc[0] if "dataset_fingerprint" in frame.columns and len(frame) else None
    if recorded is not None and str(recorded) != (found := dataset_fingerprint(dataset)):
        name = frame["dataset"].iloc[0] if "dataset" in frame.columns else "another dataset"
        raise ValueError(f"rank table {path} ranks {name} (fingerprint {recorded}), not {dataset.name} "
                         f"(fingerprint {found}): give --dataset {name}")  # fmt: skip
    bounds = {"head": dataset.num_entities, "tail": dataset.num_entities, "relation": dataset.num_relations}
    if "time" in frame.columns and hasattr(dataset, "num_times"):
        bounds["time"] = dataset.num_times
    for column, bound in bounds.items():
        values = frame[column] if column == "time" else records[column]
        if len(records) and int(values.max()) >= bound:
            what = {"relation": "relations", "time": "times"}.get(column, "entities")
            raise ValueError(f"rank table {path}: {column} ids up to {int(values.max())}, but "
                             f"{dataset.name} has {bound:,} {what}: the table ranks another dataset")  # fmt: skip
    if records.num_candidates is not None and len(records) and int(records.num_candidates.max()) > dataset.num_entities:
        raise ValueError(
            f"rank table {path}: up to {int(records.num_candidates.max()):,} candidates per task, but "
            f"{dataset.name} has {dataset.num_entities:,} entities: the table ranks another dataset"
        )
    labelled = [("head_label", "head", dataset.entity_to_id), ("tail_label", "tail", dataset.entity_to_id),
                ("relation_label", "relation", dataset.relation_to_id)]  # fmt: skip
    if hasattr(dataset, "time_to_id"):
        labelled.append(("time_label", "time", dataset.time_to_id))
    for column, ids_column, mapping in labelled:
        if column not in frame.columns:
            continue
        expected = frame[column].map(mapping)
        wrong = (expected != frame[ids_column]) & (frame[ids_column] >= 0)
        if bool(wrong.any()):
            row = int(wrong.to_numpy().nonzero()[0][0])
            raise ValueError(f"rank table {path} row {row}: {ids_column} {frame[ids_column].iloc[row]} is labelled "
                             f"{frame[column].iloc[row]!r}, which {dataset.name} numbers otherwise or not at all: "
                             "the table ranks another dataset (or other ids)")  # fmt: skip
    return records


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    """An argparse ``type`` accepting numbers > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def one_line(error: Exception) -> str:
    """An error as one line: an OSError as "<reason>: <file>", anything else as its message."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.strerror}: {error.filename}"
    return " ".join(str(error).split())
