"""The metric catalogue: ``METRICS`` has one entry per metric family (function, value range, direction,
null-model moments), over the pure functions of :mod:`~kgeval.metrics.plain` and :mod:`~kgeval.metrics.adjusted`
and the null model of :mod:`~kgeval.metrics.null_model`.
"""

from kgeval.exceptions import UndefinedMetricWarning
from kgeval.metrics.registry import METRICS, MetricInfo, ValueRange, iter_metrics, lookup, reported_keys, summarize
from kgeval.metrics.summary import RankSummary

__all__ = [
    "METRICS",
    "MetricInfo",
    "RankSummary",
    "UndefinedMetricWarning",
    "ValueRange",
    "iter_metrics",
    "lookup",
    "reported_keys",
    "summarize",
]
