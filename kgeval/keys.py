"""Metric keys: the ``[side.][rank_type.]name`` grammar of METRICS.md (Keys), shared with PyKEEN.

A key names one reported number. Sides and rank types have defaults (``both``, ``realistic``) and synonyms
(``best`` = optimistic, ``worst`` = pessimistic, ``avg`` / ``average`` = realistic); metric names are matched
case-insensitively against the canonical names and aliases of :mod:`kgeval.metrics.registry`. Every synonym
lives in this module and nowhere else.

>>> parse_key("mrr")
MetricKey(side='both', rank_type='realistic', name='inverse_harmonic_mean_rank')
>>> parse_key("tail.best.h@10")
MetricKey(side='tail', rank_type='optimistic', name='hits_at_10')
>>> format_key(parse_key("Head.worst.MR"))
'head.pessimistic.arithmetic_mean_rank'
"""

from __future__ import annotations

import difflib
import re
from typing import Literal, NamedTuple, get_args

Side = Literal["head", "tail", "both"]
RankType = Literal["optimistic", "pessimistic", "realistic"]
Target = Literal["head", "tail"]

SIDES: tuple[Side, ...] = get_args(Side)
RANK_TYPES: tuple[RankType, ...] = get_args(RankType)
TARGETS: tuple[Target, ...] = get_args(Target)
DEFAULT_SIDE: Side = "both"
DEFAULT_RANK_TYPE: RankType = "realistic"

RANK_TYPE_SYNONYMS: dict[str, RankType] = {
    "optimistic": "optimistic",
    "best": "optimistic",
    "pessimistic": "pessimistic",
    "worst": "pessimistic",
    "realistic": "realistic",
    "avg": "realistic",
    "average": "realistic",
}

#: aliases of metric names without a k parameter -> canonical name
NAME_ALIASES: dict[str, str] = {
    "mean_rank": "arithmetic_mean_rank",
    "mr": "arithmetic_mean_rank",
    "iamr": "inverse_arithmetic_mean_rank",
    "hmr": "harmonic_mean_rank",
    "mrr": "inverse_harmonic_mean_rank",
    "mean_reciprocal_rank": "inverse_harmonic_mean_rank",
    "gmr": "geometric_mean_rank",
    "igmr": "inverse_geometric_mean_rank",
    "std": "standard_deviation",
    "rank_std": "standard_deviation",
    "var": "variance",
    "rank_var": "variance",
    "mad": "median_absolute_deviation",
    "rank_mad": "median_absolute_deviation",
    "rank_count": "count",
    "amr": "adjusted_arithmetic_mean_rank",
    "aamr": "adjusted_arithmetic_mean_rank",
    "adjusted_mean_rank": "adjusted_arithmetic_mean_rank",
    "amri": "adjusted_arithmetic_mean_rank_index",
    "aamri": "adjusted_arithmetic_mean_rank_index",
    "adjusted_mean_rank_index": "adjusted_arithmetic_mean_rank_index",
    "amrr": "adjusted_inverse_harmonic_mean_rank",
    "adjusted_mrr": "adjusted_inverse_harmonic_mean_rank",
    "aihmr": "adjusted_inverse_harmonic_mean_rank",
    "adjusted_mean_reciprocal_rank": "adjusted_inverse_harmonic_mean_rank",
    "agmri": "adjusted_geometric_mean_rank_index",
    "gmri": "adjusted_geometric_mean_rank_index",
    "zmr": "z_arithmetic_mean_rank",
    "zamr": "z_arithmetic_mean_rank",
    "zmrr": "z_inverse_harmonic_mean_rank",
    "zihmr": "z_inverse_harmonic_mean_rank",
    "zgmr": "z_geometric_mean_rank",
}

#: prefixes of k-parameterised names: written form -> canonical family prefix (``<prefix>_at_<k>``)
_K_PREFIXES: dict[str, str] = {
    "hits": "hits",
    "h": "hits",
    "adjusted_hits": "adjusted_hits",
    "ah": "adjusted_hits",
    "ahits": "adjusted_hits",
    "z_hits": "z_hits",
    "zh": "z_hits",
}
_K_PATTERN = re.compile(r"^(?P<prefix>[a-z_]+?)(?:@|_at_)(?P<k>[0-9]+)$")


class MetricKey(NamedTuple):
    """A fully resolved metric key: side, rank type and canonical metric name (k included)."""

    side: Side
    rank_type: RankType
    name: str


def canonical_name(name: str) -> str:
    """Map a metric name or alias (any case) to its canonical spelling; unknown names pass through lower-cased.

    ``hits@10``, ``h@10`` and ``hits_at_10`` all become ``hits_at_10``; ``ah@3`` becomes ``adjusted_hits_at_3``.
    k must be a positive integer written in decimal digits.
    """
    lowered = name.strip().lower()
    match = _K_PATTERN.match(lowered)
    if match is not None and match.group("prefix") in _K_PREFIXES and int(match.group("k")) > 0:
        return f"{_K_PREFIXES[match.group('prefix')]}_at_{int(match.group('k'))}"
    return NAME_ALIASES.get(lowered, lowered)


def k_family_aliases(family: str) -> tuple[str, ...]:
    """The ``<prefix>@k`` spellings of a k-parameterised family: ``"hits_at_k" -> ("hits@k", "h@k")``."""
    prefix = family.removesuffix("_at_k")
    return tuple(f"{written}@k" for written, target in _K_PREFIXES.items() if target == prefix)


def split_k(name: str) -> tuple[str, int | None]:
    """Split a canonical name into its family and k: ``"hits_at_10" -> ("hits_at_k", 10)``."""
    match = _K_PATTERN.match(name)
    if match is not None and match.group("prefix") in _K_PREFIXES.values():
        return f"{match.group('prefix')}_at_k", int(match.group("k"))
    return name, None


def parse_key(key: str) -> MetricKey:
    """Parse ``[side.][rank_type.]name`` into a :class:`MetricKey` with defaults ``both`` and ``realistic``.

    Raises
    ------
    KeyError
        When the key has more parts than the grammar allows or a part is not a side, rank type or name
        where one is expected. (Whether the name is a known metric is decided by the caller.)
    """
    if not isinstance(key, str):
        raise TypeError(f"a metric key must be a str, got {type(key).__name__}")
    parts = [part.strip().lower() for part in key.split(".")]
    if len(parts) > 3 or any(not part for part in parts):
        raise KeyError(f"malformed metric key {key!r}: expected '[side.][rank_type.]name'")
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
        side, rank_type = side_part, RANK_TYPE_SYNONYMS[rank_part]  # type: ignore[assignment]
    elif len(prefix) == 1:
        (part,) = prefix
        if part in SIDES:
            side = part  # type: ignore[assignment]
        elif part in RANK_TYPE_SYNONYMS:
            rank_type = RANK_TYPE_SYNONYMS[part]
        else:
            raise KeyError(
                f"unknown side or rank type {part!r} in metric key {key!r}; "
                f"expected one of {SIDES + tuple(RANK_TYPE_SYNONYMS)}"
            )
    return MetricKey(side=side, rank_type=rank_type, name=canonical_name(name))


def format_key(key: MetricKey) -> str:
    """Render a :class:`MetricKey` as ``side.rank_type.name`` (the flat-dict spelling)."""
    return f"{key.side}.{key.rank_type}.{key.name}"


def close_matches(word: str, candidates: list[str], n: int = 5) -> list[str]:
    """The candidates closest to ``word`` (difflib ratio >= 0.5), best first, for error messages."""
    return difflib.get_close_matches(word, candidates, n=n, cutoff=0.5)
