"""The metric table: one explicit record per metric, the only place metric metadata lives.

Keys are data: canonical names are METRICS.md's keys; k-parameterised families are written ``hits_at_k`` here
and reported as ``hits_at_{k}`` for every k of the evaluator. Aliases are resolved in :mod:`kgeval.keys`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from kgeval.exceptions import UndefinedMetricWarning
from kgeval.keys import K_FAMILIES, NAME_ALIASES, PLAIN_NAMES, close_matches, k_family_aliases, split_k
from kgeval.metrics import adjusted, null_model, plain
from kgeval.metrics.null_model import candidate_statistics
from kgeval.metrics.summary import RankSummary, rank_statistics
from kgeval.typing import RANK_TYPES, RankType

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

    @property
    def k_parameterised(self) -> bool:
        return self.name.endswith("_at_k")

    @property
    def aliases(self) -> tuple[str, ...]:
        """The aliases :mod:`kgeval.keys` resolves to this name."""
        if self.k_parameterised:
            return k_family_aliases(self.name)
        return tuple(alias for alias, target in NAME_ALIASES.items() if target == self.name)

    def key(self, k: int | None = None) -> str:
        """The reported key: the name, with k substituted for k-families."""
        return self.name.replace("_at_k", f"_at_{k}") if self.k_parameterised else self.name


_UNIT = ValueRange(0.0, 1.0, low_inclusive=True, high_inclusive=True)
_RANK = ValueRange(1.0, math.inf, low_inclusive=True)
_INVERSE_RANK = ValueRange(0.0, 1.0, high_inclusive=True)
_NON_NEGATIVE = ValueRange(0.0, math.inf, low_inclusive=True)

PLAIN_METRICS: tuple[MetricInfo, ...] = (
    MetricInfo(
        "hits_at_k", plain.hits_at_k, _UNIT, True, "fraction of ranks <= k", null_moments=null_model.hits_at_k_moments
    ),
    MetricInfo(
        "arithmetic_mean_rank",
        plain.arithmetic_mean_rank,
        _RANK,
        False,
        "mean rank",
        null_moments=null_model.arithmetic_mean_rank_moments,
    ),
    MetricInfo("inverse_arithmetic_mean_rank", plain.inverse_arithmetic_mean_rank, _INVERSE_RANK, True, "1 / MR"),
    MetricInfo("harmonic_mean_rank", plain.harmonic_mean_rank, _RANK, False, "n / sum(1/r)"),
    MetricInfo(
        "inverse_harmonic_mean_rank",
        plain.inverse_harmonic_mean_rank,
        _INVERSE_RANK,
        True,
        "mean reciprocal rank",
        null_moments=null_model.inverse_harmonic_mean_rank_moments,
    ),
    MetricInfo(
        "geometric_mean_rank",
        plain.geometric_mean_rank,
        _RANK,
        False,
        "exp(mean ln r)",
        null_moments=null_model.geometric_mean_rank_moments,
        null_moments_need_records=True,
    ),
    MetricInfo("inverse_geometric_mean_rank", plain.inverse_geometric_mean_rank, _INVERSE_RANK, True, "1 / GMR"),
    MetricInfo("median_rank", plain.median_rank, _RANK, False, "median rank", needs_records=True),
    MetricInfo(
        "inverse_median_rank", plain.inverse_median_rank, _INVERSE_RANK, True, "1 / median rank", needs_records=True
    ),
    MetricInfo(
        "standard_deviation",
        plain.standard_deviation,
        _NON_NEGATIVE,
        False,
        "population standard deviation of the ranks",
        needs_records=True,
    ),
    MetricInfo(
        "variance", plain.variance, _NON_NEGATIVE, False, "population variance of the ranks", needs_records=True
    ),
    MetricInfo(
        "median_absolute_deviation",
        plain.median_absolute_deviation,
        _NON_NEGATIVE,
        False,
        "normal-consistent median absolute deviation of the ranks",
        needs_records=True,
    ),
    MetricInfo("count", plain.count, _NON_NEGATIVE, None, "number of ranking tasks"),
)

_AT_MOST_ONE = ValueRange(-math.inf, 1.0, high_inclusive=True)
_SIGNED_UNIT = ValueRange(-1.0, 1.0, low_inclusive=True, high_inclusive=True)


def _adjusted(
    metric: adjusted.AdjustedMetric, value_range: ValueRange, increasing: bool, description: str
) -> MetricInfo:
    """The table record of an adjusted / z metric: null-model based, defined for every rank type as in PyKEEN
    (the null model does not depend on the rank type; METRICS.md defines them on realistic ranks)."""
    needs_records = metric.base == "geometric_mean_rank"
    return MetricInfo(
        metric.name,
        metric,
        value_range,
        increasing,
        description,
        needs_records=needs_records,
        needs_candidates=True,
        section=ADJUSTED_SECTION,
        null_moments=metric.moments,
        null_moments_need_records=needs_records,
    )


ADJUSTED_METRICS: tuple[MetricInfo, ...] = (
    _adjusted(adjusted.adjusted_arithmetic_mean_rank, ValueRange(0.0, 2.0), False, "MR / E[MR]"),
    _adjusted(adjusted.adjusted_arithmetic_mean_rank_index, _SIGNED_UNIT, True, "(MR - E[MR]) / (1 - E[MR])"),
    _adjusted(adjusted.adjusted_inverse_harmonic_mean_rank, _SIGNED_UNIT, True, "(MRR - E[MRR]) / (1 - E[MRR])"),
    _adjusted(adjusted.adjusted_geometric_mean_rank_index, _AT_MOST_ONE, True, "(GMR - E[GMR]) / (1 - E[GMR])"),
    _adjusted(adjusted.adjusted_hits_at_k, _AT_MOST_ONE, True, "(H@k - E[H@k]) / (1 - E[H@k])"),
    _adjusted(adjusted.z_arithmetic_mean_rank, ValueRange(), True, "-(MR - E[MR]) / sqrt(Var[MR])"),
    _adjusted(adjusted.z_inverse_harmonic_mean_rank, ValueRange(), True, "(MRR - E[MRR]) / sqrt(Var[MRR])"),
    _adjusted(adjusted.z_geometric_mean_rank, ValueRange(), True, "-(GMR - E[GMR]) / sqrt(Var[GMR])"),
    _adjusted(adjusted.z_hits_at_k, ValueRange(), True, "(H@k - E[H@k]) / sqrt(Var[H@k])"),
)

METRICS: dict[str, MetricInfo] = {info.name: info for info in (*PLAIN_METRICS, *ADJUSTED_METRICS)}
if set(METRICS) != {*PLAIN_NAMES, *K_FAMILIES}:  # the key grammar resolves exactly the names of this table
    raise RuntimeError(f"kgeval.keys and the metric table disagree: {set(METRICS) ^ {*PLAIN_NAMES, *K_FAMILIES}}")


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
    if family in METRICS and (k is not None or family not in K_FAMILIES):
        return METRICS[family], k
    if family in METRICS:
        raise KeyError(f"{name!r} needs a positive k: write e.g. {family.replace('_at_k', '_at_10')}")
    known = sorted(list(METRICS) + list(NAME_ALIASES))
    suggestions = close_matches(name, known)
    hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
    raise KeyError(f"unknown metric {name!r}{hint}")


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
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
    rank_tensor = torch.as_tensor(np.asarray(ranks, dtype=np.float64))
    sums: dict[str, float | np.ndarray] = {
        name: value.numpy() if value.dim() else value.item() for name, value in rank_statistics(rank_tensor, ks).items()
    }
    candidates = None
    if num_candidates is not None:
        candidates = np.asarray(num_candidates, dtype=np.int64)
        candidate_sums = candidate_statistics(torch.as_tensor(candidates), ks)
        sums.update({name: value.numpy() if value.dim() else value.item() for name, value in candidate_sums.items()})
    return RankSummary(ks=tuple(ks), sums=sums, ranks=rank_tensor.numpy(), num_candidates=candidates)
