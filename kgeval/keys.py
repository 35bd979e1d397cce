"""Metric keys: the ``[side.][rank_type.]name[.k]`` grammar of METRICS.md (Keys) -- sides, rank types and their
synonyms (``best`` / ``worst`` / ``avg``), PyKEEN's trailing ``.k``. Metric names and their aliases are resolved by
the metric table (:func:`kgeval.metrics.registry.canonical_name`).
"""

from __future__ import annotations

from typing import NamedTuple

from kgeval.metrics.registry import canonical_name
from kgeval.typing import DEFAULT_RANK_TYPE, DEFAULT_SIDE, SIDES, RankType, Side

__all__ = [
    "RANK_TYPE_SYNONYMS",
    "MetricKey",
    "format_key",
    "parse_key",
]

RANK_TYPE_SYNONYMS: dict[str, RankType] = {
    "optimistic": "optimistic",
    "best": "optimistic",
    "pessimistic": "pessimistic",
    "worst": "pessimistic",
    "realistic": "realistic",
    "avg": "realistic",
    "average": "realistic",
}


class MetricKey(NamedTuple):
    """A fully resolved metric key: side, rank type and canonical metric name (k included).

    A tuple, so ``("both", "realistic", "hits_at_10")`` finds the same entry; ``metric`` is PyKEEN's name of the
    third field (``RankBasedMetricKey.metric``)."""

    side: Side
    rank_type: RankType
    name: str

    @property
    def metric(self) -> str:
        """The canonical metric name, under the attribute name PyKEEN's ``RankBasedMetricKey`` gives it."""
        return self.name


def parse_key(key: str) -> MetricKey:
    """Parse ``[side.][rank_type.]name[.k]`` into a :class:`MetricKey` with defaults ``both`` and ``realistic``.

    The trailing ``.k`` is PyKEEN's: it gives the k of a k-family named without one (``head.best.hits_at_k.3``
    is ``head.optimistic.hits_at_3``) and is ignored after any other name, as PyKEEN ignores it.

    Raises
    ------
    KeyError
        When the key has more parts than the grammar allows or a part is not a side, rank type or name
        where one is expected. (Whether the name is a known metric is decided by the caller.)

    Examples
    --------
    >>> parse_key("mrr")
    MetricKey(side='both', rank_type='realistic', name='inverse_harmonic_mean_rank')
    >>> parse_key("tail.best.h@10")
    MetricKey(side='tail', rank_type='optimistic', name='hits_at_10')
    >>> parse_key("head.best.hits_at_k.3")
    MetricKey(side='head', rank_type='optimistic', name='hits_at_3')
    """
    if not isinstance(key, str):
        raise TypeError(f"a metric key must be a str, got {type(key).__name__}")
    parts = [part.strip().lower() for part in key.split(".")]
    k = None
    if len(parts) > 1 and parts[-1].isascii() and parts[-1].isdigit():
        k = int(parts.pop())
    if len(parts) > 3 or any(not part for part in parts):
        raise KeyError(f"malformed metric key {key!r}: expected '[side.][rank_type.]name[.k]'")
    side: Side = DEFAULT_SIDE
    rank_type: RankType = DEFAULT_RANK_TYPE
    *prefix, name = parts
    if len(prefix) == 2:
        side_part, rank_part = prefix
        if side_part not in SIDES:
            raise KeyError(f"unknown side {side_part!r} in metric key {key!r}; expected one of {SIDES}")
        if rank_part not in RANK_TYPE_SYNONYMS:
            raise KeyError(
                f"unknown rank type {rank_part!r} in metric key {key!r}; expected one of {tuple(RANK_TYPE_SYNONYMS)}"
            )
        side, rank_type = side_part, RANK_TYPE_SYNONYMS[rank_part]
    elif len(prefix) == 1:
        (part,) = prefix
        if part in SIDES:
            side = part
        elif part in RANK_TYPE_SYNONYMS:
            rank_type = RANK_TYPE_SYNONYMS[part]
        else:
            raise KeyError(
                f"unknown side or rank type {part!r} in metric key {key!r}; "
                f"expected one of {SIDES + tuple(RANK_TYPE_SYNONYMS)}"
            )
    return MetricKey(side=side, rank_type=rank_type, name=canonical_name(name, k))


def format_key(key: MetricKey) -> str:
    """Render a :class:`MetricKey` as ``side.rank_type.name`` (the flat-dict spelling)."""
    return f"{key.side}.{key.rank_type}.{key.name}"
