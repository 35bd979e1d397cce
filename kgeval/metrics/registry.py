"""The metric table: one record per metric -- key, function, aliases, value range, direction, null-model moments --
the only place metric metadata lives, and the name resolution built from it (:func:`canonical_name`).
k-parameterised families are written ``hits_at_k`` and reported as ``hits_at_{k}`` for every k of the evaluator.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kgeval.exceptions import UndefinedMetricWarning, quieted
from kgeval.metrics import null_model, plain
from kgeval.metrics.adjusted import AdjustedMetric, Kind
from kgeval.metrics.naming import close_matches, is_k_family, split_k, with_k
from kgeval.metrics.null_model import candidate_statistics
from kgeval.metrics.summary import RankSummary, rank_statistics
from kgeval.typing import RANK_TYPES, RankType

__all__ = [
    "ADJUSTED_METRICS",
    "ADJUSTED_SECTION",
    "DEFAULT_K",
    "METRICS",
    "NAME_ALIASES",
    "PLAIN_METRICS",
    "PLAIN_SECTION",
    "MetricFunction",
    "MetricInfo",
    "MomentsFunction",
    "ValueRange",
    "canonical_name",
    "iter_metrics",
    "lookup",
    "normalize_name",
    "null_model_table",
    "reported_keys",
    "summarize",
]

MetricFunction = Callable[[RankSummary, "int | None"], float]
#: (E[M], Var[M]) under the null model (METRICS.md, Expectation and variance under the null model)
MomentsFunction = Callable[[RankSummary, "int | None"], "tuple[float, float]"]

#: METRICS.md section anchors (GitHub heading slugs)
PLAIN_SECTION = "plain-metrics-i--the-ranks-of-one-side-and-rank-type-n--i"
ADJUSTED_SECTION = "adjusted-metrics-berrendorf-et-al-2020-hoyt-et-al-2022-realistic-ranks"


@dataclass(frozen=True)
class ValueRange:
    """An interval of admissible metric values, with inclusive / exclusive bounds."""

    low: float = -math.inf
    high: float = math.inf
    low_inclusive: bool = False
    high_inclusive: bool = False

    def __contains__(self, value: float) -> bool:
        above = value >= self.low if self.low_inclusive else value > self.low
        below = value <= self.high if self.high_inclusive else value < self.high
        return above and below

    def __str__(self) -> str:
        left = "[" if self.low_inclusive else "("
        right = "]" if self.high_inclusive else ")"
        fmt = lambda x: "∞" if x == math.inf else "-∞" if x == -math.inf else f"{x:g}"  # noqa: E731
        return f"{left}{fmt(self.low)}, {fmt(self.high)}{right}"


@dataclass(frozen=True)
class MetricInfo:
    """Metadata of one metric (or k-family): see METRICS.md for each definition."""

    name: str  #: canonical key; k-families end in ``_at_k``
    function: MetricFunction  #: pure function of (summary, k)
    value_range: ValueRange
    increasing: bool | None  #: True: higher is better; None: not a quality measure (count)
    description: str
    rank_types: tuple[RankType, ...] = RANK_TYPES
    needs_records: bool = False  #: needs per-task ranks / num_candidates, not only running sums
    needs_candidates: bool = False  #: depends on num_candidates (null-model based)
    section: str = PLAIN_SECTION  #: METRICS.md section anchor
    null_moments: MomentsFunction | None = None  #: closed-form (E, Var) under the null model, if one exists
    null_moments_need_records: bool = False  #: the closed form reads the num_candidates records (GMR)
    #: other names of the metric (k-families: ``<prefix>@k``, each prefix also accepted as ``<prefix>@<k>``)
    aliases: tuple[str, ...] = ()
    #: the spellings PyKEEN's resolver accepts for a k-family written without its k (``h@``, ``h@k``, ``zahk``)
    pykeen_synonyms: tuple[str, ...] = ()

    @property
    def k_parameterised(self) -> bool:
        return is_k_family(self.name)

    def key(self, k: int | None = None) -> str:
        """The reported key: the name, with k substituted for k-families."""
        return with_k(self.name, k)


_UNIT = ValueRange(0.0, 1.0, low_inclusive=True, high_inclusive=True)
_RANK = ValueRange(1.0, math.inf, low_inclusive=True)
_INVERSE_RANK = ValueRange(0.0, 1.0, high_inclusive=True)
_NON_NEGATIVE = ValueRange(0.0, math.inf, low_inclusive=True)


HITS_AT_K = MetricInfo(
    "hits_at_k", plain.hits_at_k, _UNIT, True, "fraction of ranks <= k", null_moments=null_model.hits_at_k_moments,
    aliases=("hits@k", "h@k"), pykeen_synonyms=("h@", "h@k", "h_at_", "hits@", "hits@k", "hits_at_"),
)  # fmt: skip
ARITHMETIC_MEAN_RANK = MetricInfo(
    "arithmetic_mean_rank", plain.arithmetic_mean_rank, _RANK, False, "mean rank",
    null_moments=null_model.arithmetic_mean_rank_moments, aliases=("mean_rank", "mr"),
)  # fmt: skip
INVERSE_HARMONIC_MEAN_RANK = MetricInfo(
    "inverse_harmonic_mean_rank", plain.inverse_harmonic_mean_rank, _INVERSE_RANK, True, "mean reciprocal rank",
    null_moments=null_model.inverse_harmonic_mean_rank_moments, aliases=("mrr", "mean_reciprocal_rank"),
)  # fmt: skip
GEOMETRIC_MEAN_RANK = MetricInfo(
    "geometric_mean_rank", plain.geometric_mean_rank, _RANK, False, "exp(mean ln r)",
    null_moments=null_model.geometric_mean_rank_moments, null_moments_need_records=True, aliases=("gmr",),
)  # fmt: skip

PLAIN_METRICS: tuple[MetricInfo, ...] = (
    HITS_AT_K,
    ARITHMETIC_MEAN_RANK,
    MetricInfo("inverse_arithmetic_mean_rank", plain.inverse_arithmetic_mean_rank, _INVERSE_RANK, True, "1 / MR",
           aliases=("iamr",)),
    MetricInfo("harmonic_mean_rank", plain.harmonic_mean_rank, _RANK, False, "n / sum(1/r)", aliases=("hmr",)),
    INVERSE_HARMONIC_MEAN_RANK,
    GEOMETRIC_MEAN_RANK,
    MetricInfo("inverse_geometric_mean_rank", plain.inverse_geometric_mean_rank, _INVERSE_RANK, True, "1 / GMR",
           aliases=("igmr",)),
    MetricInfo("median_rank", plain.median_rank, _RANK, False, "median rank", needs_records=True),
    MetricInfo("inverse_median_rank", plain.inverse_median_rank, _INVERSE_RANK, True, "1 / median rank",
           needs_records=True),
    MetricInfo("standard_deviation", plain.standard_deviation, _NON_NEGATIVE, False,
           "population standard deviation of the ranks", needs_records=True, aliases=("std", "rank_std")),
    MetricInfo("variance", plain.variance, _NON_NEGATIVE, False, "population variance of the ranks", needs_records=True,
           aliases=("var", "rank_var")),
    MetricInfo("median_absolute_deviation", plain.median_absolute_deviation, _NON_NEGATIVE, False,
           "normal-consistent median absolute deviation of the ranks", needs_records=True,
           aliases=("mad", "rank_mad")),
    MetricInfo("count", plain.count, _NON_NEGATIVE, None, "number of ranking tasks", aliases=("rank_count",)),
)  # fmt: skip

_AT_MOST_ONE = ValueRange(-math.inf, 1.0, high_inclusive=True)
_SIGNED_UNIT = ValueRange(-1.0, 1.0, low_inclusive=True, high_inclusive=True)


def _adjusted(
    name: str, base: MetricInfo, kind: Kind, value_range: ValueRange, description: str, **extra: Any
) -> MetricInfo:
    """The record of an adjusted / z metric of ``base``: its function and moments come from ``base``'s record (its
    value, null-model moments and direction), so nothing about the base is stated twice. Null-model based, and
    reported for every rank type as in PyKEEN (the null model does not depend on the rank type; METRICS.md
    defines them on realistic ranks). The index and z metrics improve upward (the z-scores are signed for that), the
    ratio in its base's direction."""
    assert base.null_moments is not None
    assert base.increasing is not None
    metric = AdjustedMetric(name, kind, base.function, base.null_moments, base.increasing)
    needs_records = base.null_moments_need_records
    return MetricInfo(
        name, metric, value_range, kind != "ratio" or base.increasing, description, needs_records=needs_records,
        needs_candidates=True, section=ADJUSTED_SECTION, null_moments=metric.moments,
        null_moments_need_records=needs_records, **extra,
    )  # fmt: skip


ADJUSTED_METRICS: tuple[MetricInfo, ...] = (
    _adjusted("adjusted_arithmetic_mean_rank", ARITHMETIC_MEAN_RANK, "ratio", ValueRange(0.0, 2.0), "MR / E[MR]",
              aliases=("amr", "aamr", "adjusted_mean_rank")),
    _adjusted("adjusted_arithmetic_mean_rank_index", ARITHMETIC_MEAN_RANK, "index", _SIGNED_UNIT,
              "(MR - E[MR]) / (1 - E[MR])", aliases=("amri", "aamri", "adjusted_mean_rank_index")),
    _adjusted("adjusted_inverse_harmonic_mean_rank", INVERSE_HARMONIC_MEAN_RANK, "index", _SIGNED_UNIT,
              "(MRR - E[MRR]) / (1 - E[MRR])",
              aliases=("amrr", "adjusted_mrr", "aihmr", "adjusted_mean_reciprocal_rank")),
    _adjusted("adjusted_geometric_mean_rank_index", GEOMETRIC_MEAN_RANK, "index", _AT_MOST_ONE,
              "(GMR - E[GMR]) / (1 - E[GMR])", aliases=("agmri", "gmri")),
    _adjusted("adjusted_hits_at_k", HITS_AT_K, "index", _AT_MOST_ONE, "(H@k - E[H@k]) / (1 - E[H@k])",
              aliases=("adjusted_hits@k", "ah@k", "ahits@k"),
              pykeen_synonyms=("adjusted_hits_at_", "ah@", "ah@k", "ah_at_", "ahits@", "ahits@k", "ahits_at_", "ahk")),
    _adjusted("z_arithmetic_mean_rank", ARITHMETIC_MEAN_RANK, "z", ValueRange(), "-(MR - E[MR]) / sqrt(Var[MR])",
              aliases=("zmr", "zamr")),
    _adjusted("z_inverse_harmonic_mean_rank", INVERSE_HARMONIC_MEAN_RANK, "z", ValueRange(),
              "(MRR - E[MRR]) / sqrt(Var[MRR])", aliases=("zmrr", "zihmr")),
    _adjusted("z_geometric_mean_rank", GEOMETRIC_MEAN_RANK, "z", ValueRange(), "-(GMR - E[GMR]) / sqrt(Var[GMR])",
              aliases=("zgmr",)),
    _adjusted("z_hits_at_k", HITS_AT_K, "z", ValueRange(), "(H@k - E[H@k]) / sqrt(Var[H@k])",
              aliases=("z_hits@k", "zh@k"), pykeen_synonyms=("z_hits_at_", "zahk")),
)  # fmt: skip

METRICS: dict[str, MetricInfo] = {info.name: info for info in (*PLAIN_METRICS, *ADJUSTED_METRICS)}


def iter_metrics() -> Iterator[MetricInfo]:
    """All registered metrics, in table order."""
    return iter(METRICS.values())


def lookup(name: str) -> tuple[MetricInfo, int | None]:
    """Resolve a canonical name (``hits_at_10``) to its metadata and k.

    Raises
    ------
    KeyError
        For an unknown name, listing close matches.
    """
    family, k = split_k(name)
    if family in METRICS and (k is not None or not is_k_family(family)):
        return METRICS[family], k
    if family in METRICS:
        raise KeyError(f"{name!r} needs a positive k: write e.g. {with_k(family, 10)}")
    known = sorted(list(METRICS) + list(NAME_ALIASES))
    suggestions = close_matches(name, known)
    hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
    raise KeyError(f"unknown metric {name!r}{hint}")


# -- name resolution, built from the table -----------------------------------------------------------------------
#: k of a family named without one (``hits_at_k``, ``h@k``, ``zahk``): PyKEEN's default
DEFAULT_K = 10
#: alias -> canonical name, for the metrics without a k
NAME_ALIASES: dict[str, str] = {
    alias: info.name for info in METRICS.values() if not info.k_parameterised for alias in info.aliases
}
#: written prefix of a per-k name (``<prefix>@<k>`` / ``<prefix>_at_<k>``) -> canonical family prefix
_K_PREFIXES: dict[str, str] = {
    written: info.name.removesuffix("_at_k")
    for info in METRICS.values()
    if info.k_parameterised
    for written in (info.name.removesuffix("_at_k"), *(alias.removesuffix("@k") for alias in info.aliases))
}
_K_PATTERN = re.compile(r"^(?P<prefix>[a-z_]+?)(?:@|_at_)(?P<k>[0-9]+)$")
#: the suffix PyKEEN's metric resolver strips from class names (``HitsAtKRankBasedMetric`` = ``HitsAtK``)
_RESOLVER_SUFFIX = "rankbasedmetric"


def normalize_name(name: str) -> str:
    """A metric name as PyKEEN's class resolver compares it: lower case without ``_``, ``-`` and spaces, and
    without the suffix ``rankbasedmetric`` (so ``MeanRank``, ``mean_rank`` and ``meanrank`` are one name)."""
    normalized = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    return normalized.removesuffix(_RESOLVER_SUFFIX) if normalized != _RESOLVER_SUFFIX else normalized


def _normalized_table() -> dict[str, str]:
    """normalized written form -> canonical name or k-family (names, aliases, PyKEEN's k-less synonyms)."""
    table = {normalize_name(name): name for name in METRICS}
    table.update({normalize_name(alias): name for alias, name in NAME_ALIASES.items()})
    for info in METRICS.values():
        table.update({normalize_name(synonym): info.name for synonym in info.pykeen_synonyms})
    return table


_NORMALIZED = _normalized_table()


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
    if is_k_family(resolved):
        k = DEFAULT_K if k is None else k
        return with_k(resolved, k) if k > 0 else lowered
    return resolved


def reported_keys(
    ks: Sequence[int], rank_type: RankType, keep_records: bool = True
) -> list[tuple[str, MetricInfo, int | None]]:
    """The (key, info, k) triples reported for one rank type: every metric supporting it, every k of ks."""
    out: list[tuple[str, MetricInfo, int | None]] = []
    for info in iter_metrics():
        if rank_type not in info.rank_types or (info.needs_records and not keep_records):
            continue
        for k in ks if info.k_parameterised else (None,):
            out.append((info.key(k), info, k))
    return out


def null_model_table(
    summary: RankSummary, ks: Sequence[int], keep_records: bool = True
) -> dict[str, tuple[float, float]]:
    """(E, Var) under the null model of every reported metric with a closed form: key -> (E, Var).

    ``summary`` holds realistic ranks (the null model does not depend on the rank type) with the null-model sums;
    metrics whose closed form reads the num_candidates records are left out when ``keep_records`` is False.
    Undefined moments are NaN without a second warning (the metric's own value already warned).
    """
    out: dict[str, tuple[float, float]] = {}
    with quieted(UndefinedMetricWarning):
        for key, info, k in reported_keys(ks, "realistic", keep_records):
            if info.null_moments is not None and (keep_records or not info.null_moments_need_records):
                out[key] = info.null_moments(summary, k)
    return out


def summarize(
    ranks: torch.Tensor | np.ndarray | Sequence[float],
    num_candidates: torch.Tensor | np.ndarray | Sequence[int] | None = None,
    ks: Sequence[int] = (1, 3, 5, 10),
) -> RankSummary:
    """Build a :class:`RankSummary` from one array of ranks (and optionally num_candidates), keeping records.

    This is the functional entry point: ``metric(summarize(ranks, num_candidates))``.
    """
    rank_tensor = torch.as_tensor(np.asarray(ranks, dtype=np.float64), device="cpu")
    sums: dict[str, float | np.ndarray] = {
        name: value.numpy() if value.dim() else value.item() for name, value in rank_statistics(rank_tensor, ks).items()
    }
    candidates = None
    if num_candidates is not None:
        candidates = np.asarray(num_candidates, dtype=np.int64)
        candidate_sums = candidate_statistics(torch.as_tensor(candidates, device="cpu"), ks)
        sums.update({name: value.numpy() if value.dim() else value.item() for name, value in candidate_sums.items()})
    return RankSummary(ks=tuple(ks), sums=sums, ranks=rank_tensor.numpy(), num_candidates=candidates)
