"""The checked reading of a results JSON document's entries (:meth:`kgeval.RankBasedMetricResults.from_json`): every
metric and null-model entry is a canonical key reported for the document's ks, with a number inside its metric's
range; anything else is a ValueError naming the entry.
"""

from __future__ import annotations

import math
from typing import Any

from kgeval.metrics.registry import MetricInfo, ValueRange, lookup
from kgeval.typing import RANK_TYPES, SIDES, RankType, Side


def document_entries(document: dict[str, Any], name: str, where: str) -> list[Any]:
    """The list stored under ``name`` (empty when absent); ValueError when it is not a list."""
    entries = document.get(name, [])
    if not isinstance(entries, list):
        raise ValueError(f"{where}: {name!r} must be a list, got {type(entries).__name__}")
    return entries


def _number(value: Any, what: str) -> float:
    """A JSON number as a float (NaN and infinities allowed); ValueError for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    try:
        return float(value)
    except OverflowError as error:
        raise ValueError(f"{what} is out of the float range: {value!r}") from error


def _canonical_key(key: Any, ks: tuple[int, ...], what: str) -> MetricInfo:
    """The metric of a stored canonical key reported for ``ks``."""
    if not isinstance(key, str):
        raise ValueError(f"{what}: metric key must be a string, got {key!r}")
    try:
        info, k = lookup(key)
    except KeyError as error:
        raise ValueError(f"{what}: {error.args[0]}") from error
    if info.key(k) != key or (k is not None and k not in ks):
        raise ValueError(f"{what}: {key!r} is not a canonical key reported for ks={ks}")
    return info


def metric_entry(entry: Any, ks: tuple[int, ...], where: str) -> tuple[tuple[Side, RankType, str], float]:
    """One ``[side, rank_type, key, value]`` entry, checked."""
    what = f"metric entry in {where}: {entry!r}"
    if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in SIDES and entry[1] in RANK_TYPES):
        raise ValueError(f"malformed {what}")
    info = _canonical_key(entry[2], ks, what)
    value = _number(entry[3], what)
    if entry[1] not in info.rank_types:
        raise ValueError(f"{what}: {entry[2]} is not defined for {entry[1]} ranks")
    if not (math.isnan(value) or _in_range(value, info.value_range)):
        raise ValueError(f"{what}: {value!r} lies outside the range {info.value_range} of {entry[2]}")
    return (entry[0], entry[1], entry[2]), value


def null_model_entry(entry: Any, ks: tuple[int, ...], where: str) -> tuple[tuple[Side, str], tuple[float, float]]:
    """One ``[side, key, expectation, variance]`` entry, checked."""
    what = f"null_model entry in {where}: {entry!r}"
    if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in SIDES):
        raise ValueError(f"malformed {what}")
    _canonical_key(entry[1], ks, what)
    expectation, variance = _number(entry[2], what), _number(entry[3], what)
    if variance < 0:
        raise ValueError(f"{what}: a variance must be >= 0")
    return (entry[0], entry[1]), (expectation, variance)


def _in_range(value: float, value_range: ValueRange) -> bool:
    """``value`` inside the range, its bounds widened by float rounding (1e-9 relative)."""
    slack = 1e-9 * max(1.0, abs(value))
    widened = ValueRange(value_range.low - slack, value_range.high + slack, True, True)
    return value in widened
