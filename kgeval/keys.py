"""Metric keys: the ``[side.][rank_type.]name[.k]`` grammar of METRICS.md (Keys), with PyKEEN's synonyms
(``best`` / ``worst`` / ``avg``, class names, names without underscores, ``hits_at_k`` = hits@10). Every synonym
lives here and nowhere else.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from kgeval.typing import DEFAULT_RANK_TYPE, DEFAULT_SIDE, SIDES, RankType, Side

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

#: every canonical metric name without a k parameter, and the k-parameterised families (``<prefix>_at_k``); the
#: metric table (:mod:`kgeval.metrics.registry`) checks at import that it defines exactly these
PLAIN_NAMES: tuple[str, ...] = (
    "arithmetic_mean_rank",
    "inverse_arithmetic_mean_rank",
    "harmonic_mean_rank",
    "inverse_harmonic_mean_rank",
    "geometric_mean_rank",
    "inverse_geometric_mean_rank",
    "median_rank",
    "inverse_median_rank",
    "standard_deviation",
    "variance",
    "median_absolute_deviation",
    "count",
    "adjusted_arithmetic_mean_rank",
    "adjusted_arithmetic_mean_rank_index",
    "adjusted_inverse_harmonic_mean_rank",
    "adjusted_geometric_mean_rank_index",
    "z_arithmetic_mean_rank",
    "z_inverse_harmonic_mean_rank",
    "z_geometric_mean_rank",
)
K_FAMILIES: tuple[str, ...] = ("hits_at_k", "adjusted_hits_at_k", "z_hits_at_k")

#: k of a family named without one (``hits_at_k``, ``h@k``, ``zahk``): PyKEEN's default
DEFAULT_K = 10

#: prefixes of kgeval's per-k names: written form -> canonical family prefix (``<prefix>@<k>`` / ``<prefix>_at_<k>``)
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

#: PyKEEN's spellings of the k-families without a k (its class-resolver synonyms): written form -> family
_K_FAMILY_SYNONYMS: dict[str, str] = {
    **dict.fromkeys(("h@", "h@k", "h_at_", "hits@", "hits@k", "hits_at_", "hits_at_k"), "hits_at_k"),
    **dict.fromkeys(
        ("adjusted_hits_at_", "adjusted_hits_at_k", "ah@", "ah@k", "ah_at_", "ahits@", "ahits@k", "ahits_at_", "ahk"),
        "adjusted_hits_at_k",
    ),
    **dict.fromkeys(("z_hits_at_", "z_hits_at_k", "zahk"), "z_hits_at_k"),
}

#: the suffix PyKEEN's metric resolver strips from class names (``HitsAtKRankBasedMetric`` = ``HitsAtK``)
_RESOLVER_SUFFIX = "rankbasedmetric"


def normalize_name(name: str) -> str:
    """A metric name as PyKEEN's class resolver compares it: lower case without ``_``, ``-`` and spaces, and
    without the suffix ``rankbasedmetric`` (so ``MeanRank``, ``mean_rank`` and ``meanrank`` are one name)."""
    normalized = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    return normalized.removesuffix(_RESOLVER_SUFFIX) if normalized != _RESOLVER_SUFFIX else normalized


def _normalized_table() -> dict[str, str]:
    """normalized written form -> canonical name or k-family (names, aliases, PyKEEN's synonyms)."""
    table = {normalize_name(name): name for name in (*PLAIN_NAMES, *K_FAMILIES)}
    table.update({normalize_name(alias): name for alias, name in NAME_ALIASES.items()})
    table.update({normalize_name(alias): family for alias, family in _K_FAMILY_SYNONYMS.items()})
    return table


_NORMALIZED = _normalized_table()


class MetricKey(NamedTuple):
    """A fully resolved metric key: side, rank type and canonical metric name (k included)."""

    side: Side
    rank_type: RankType
    name: str


def canonical_name(name: str, k: int | None = None) -> str:
    """Map a metric name or alias (any case) to its canonical spelling; unknown names pass through lower-cased.

    Every spelling PyKEEN's key parser accepts resolves to the metric PyKEEN resolves it to: ``hits@10``,
    ``h@10`` and ``hits_at_10`` become ``hits_at_10``; ``ah@3`` becomes ``adjusted_hits_at_3``; class names and
    names without underscores (``MeanRank``, ``meanrank``, ``zahk``) are matched as PyKEEN's resolver matches
    them. A k-family named without its k (``hits_at_k``, ``h@k``, ``adjusted_hits_at_k``) takes ``k`` (a key's
    trailing ``.k``), else :data:`DEFAULT_K` = 10 as in PyKEEN; a k written in the name wins over ``k``.
    k must be a positive integer written in decimal digits.
    """
    lowered = name.strip().lower()
    match = _K_PATTERN.match(lowered)
    if match is not None and match.group("prefix") in _K_PREFIXES and int(match.group("k")) > 0:
        return f"{_K_PREFIXES[match.group('prefix')]}_at_{int(match.group('k'))}"
    if lowered in NAME_ALIASES:
        return NAME_ALIASES[lowered]
    resolved = _NORMALIZED.get(normalize_name(lowered))
    if resolved is None:
        return lowered
    if resolved in K_FAMILIES:
        k = DEFAULT_K if k is None else k
        if k <= 0:
            return lowered
        return resolved.replace("_at_k", f"_at_{k}")
    return resolved


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
    return MetricKey(side=side, rank_type=rank_type, name=canonical_name(name, k))


def format_key(key: MetricKey) -> str:
    """Render a :class:`MetricKey` as ``side.rank_type.name`` (the flat-dict spelling)."""
    return f"{key.side}.{key.rank_type}.{key.name}"


def close_matches(word: str, candidates: list[str], n: int = 5) -> list[str]:
    """The candidates closest to ``word`` (difflib ratio >= 0.5), best first, for error messages."""
    return difflib.get_close_matches(word, candidates, n=n, cutoff=0.5)
