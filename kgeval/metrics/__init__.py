"""The metric catalogue: metadata table, pure metric functions and the null model.

``METRICS`` lists every metric family with its metadata: the plain metrics (:mod:`kgeval.metrics.plain`) and the
adjusted / z family (:mod:`kgeval.metrics.adjusted`), whose closed-form null-model moments come from
:mod:`kgeval.metrics.null_model` (``MetricInfo.null_moments``).

>>> from kgeval.metrics import METRICS
>>> METRICS["inverse_harmonic_mean_rank"].increasing
True
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
