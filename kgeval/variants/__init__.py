"""Evaluation variants built on the evaluator: each a file of its own.

- :mod:`kgeval.variants.sampled`: ranks among sampled negatives (``SampledRankBasedEvaluator``);
- :mod:`kgeval.variants.macro`: macro-weighted metrics, every query weighted alike (``MacroRankBasedEvaluator``);
- :mod:`kgeval.variants.temporal`: temporal link prediction, time-aware filters (``TemporalRankBasedEvaluator``);
- :mod:`kgeval.variants.precomputed`: ranks of scores a caller computed (``evaluate_scores``).

A new variant is a new module here, re-exported below and from :mod:`kgeval` (CONTRIBUTING.md).
"""

from kgeval.variants.macro import MacroRankBasedEvaluator, macro_results, query_weights
from kgeval.variants.precomputed import evaluate_scores
from kgeval.variants.sampled import SampledRankBasedEvaluator
from kgeval.variants.temporal import (
    TEMPORAL_FILTERS,
    TemporalFilter,
    TemporalRankBasedEvaluator,
    TemporalRankBasedMetricResults,
)

__all__ = [
    "TEMPORAL_FILTERS",
    "MacroRankBasedEvaluator",
    "SampledRankBasedEvaluator",
    "TemporalFilter",
    "TemporalRankBasedEvaluator",
    "TemporalRankBasedMetricResults",
    "evaluate_scores",
    "macro_results",
    "query_weights",
]
