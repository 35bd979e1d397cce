"""The metric table: one explicit record per metric, the only place metric metadata lives.

Keys are data: canonical names are METRICS.md's keys; k-parameterised families are written ``hits_at_k`` here
and reported as ``hits_at_{k}`` for every k of the evaluator. Aliases are resolved in :mod:`kgeval.keys`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kgeval.keys import NAME_ALIASES, RANK_TYPES, RankType, close_matches, split_k
from kgeval.metrics import plain
from kgeval.metrics.summary import RankSummary

MetricFunction = Callable[[RankSummary, "int | None"], float]


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
    section: str = "plain-metrics"  #: METRICS.md section anchor

    @property
    def k_parameterised(self) -> bool:
        return self.name.endswith("_at_k")

    @property
    def aliases(self) -> tuple[str, ...]:
        """The aliases :mod:`kgeval.keys` resolves to this name."""
        found = tuple(alias for alias, target in NAME_ALIASES.items() if target == self.name)
        if self.name == "hits_at_k":
            found += ("hits@k", "h@k")
        return found

    def key(self, k: int | None = None) -> str:
        """The reported key: the name, with k substituted for k-families."""
        return self.name.replace("_at_k", f"_at_{k}") if self.k_parameterised else self.name


_UNIT = ValueRange(0.0, 1.0, low_inclusive=True, high_inclusive=True)
_RANK = ValueRange(1.0, math.inf, low_inclusive=True)
_INVERSE_RANK = ValueRange(0.0, 1.0, high_inclusive=True)
_NON_NEGATIVE = ValueRange(0.0, math.inf, low_inclusive=True)

PLAIN_METRICS: tuple[MetricInfo, ...] = (
    MetricInfo("hits_at_k", plain.hits_at_k, _UNIT, True, "fraction of ranks <= k"),
    MetricInfo("arithmetic_mean_rank", plain.arithmetic_mean_rank, _RANK, False, "mean rank"),
    MetricInfo("inverse_arithmetic_mean_rank", plain.inverse_arithmetic_mean_rank, _INVERSE_RANK, True, "1 / MR"),
    MetricInfo("harmonic_mean_rank", plain.harmonic_mean_rank, _RANK, False, "n / sum(1/r)"),
    MetricInfo(
        "inverse_harmonic_mean_rank", plain.inverse_harmonic_mean_rank, _INVERSE_RANK, True, "mean reciprocal rank"
    ),
    MetricInfo("geometric_mean_rank", plain.geometric_mean_rank, _RANK, False, "exp(mean ln r)"),
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

METRICS: dict[str, MetricInfo] = {info.name: info for info in PLAIN_METRICS}


def register(info: MetricInfo) -> None:
    """Add a metric family to the table (used by the adjusted-metric module at import time)."""
    if info.name in METRICS:
        raise ValueError(f"metric {info.name!r} is registered twice")
    METRICS[info.name] = info


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
    if family in METRICS:
        return METRICS[family], k
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
