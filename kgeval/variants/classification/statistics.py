"""Confidence intervals and paired comparisons of triple classification (:class:`TripleClassificationResults`):
the test triples are resampled (the bootstrap draws n of the n triples with replacement), the thresholds stay as
fitted on validation, and each resample's metric is computed from weighted counts -- so every metric of
:data:`CLASSIFICATION_METRICS` (micro) and the binarised ones per macro average get an interval, and two models
classified on the same test triples are compared on the same draws (:func:`compare_classifications`: paired
bootstrap, a permutation test of swapped predictions, or McNemar's exact test for accuracy). The results are
:mod:`kgeval.analysis.stats`' :class:`~kgeval.analysis.stats.ConfidenceInterval` and
:class:`~kgeval.analysis.stats.Comparison`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Literal

import numpy as np

from kgeval.analysis.stats import Comparison, ConfidenceInterval, _check_options, bootstrap_p_value
from kgeval.analysis.stats import _interval as percentile_interval
from kgeval.variants.classification.metrics import _ALIASES, CLASSIFICATION_METRICS
from kgeval.variants.classification.triples import TripleClassificationResults

__all__ = ["CLASSIFICATION_TESTS", "classification_interval", "compare_classifications"]

ClassificationTest = Literal["bootstrap", "permutation", "mcnemar"]
#: the tests of :func:`compare_classifications`
CLASSIFICATION_TESTS: tuple[str, ...] = ("bootstrap", "permutation", "mcnemar")
#: the metrics of a triple's prediction (the others, ROC-AUC and AP, read its score)
BINARISED: tuple[str, ...] = ("accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy")
#: (resample, triple) cells per block of resamples
_BLOCK_CELLS = 4_000_000


def classification_interval(
    results: TripleClassificationResults,
    key: str = "accuracy",
    *,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | None = 0,
) -> ConfidenceInterval:
    """Bootstrap percentile interval of a classification metric, resampling the test triples.

    Parameters
    ----------
    results : TripleClassificationResults
        A classification (its per-triple labels, scores, predictions and relations).
    key : str, default="accuracy"
        ``"<metric>"`` / ``"micro.<metric>"`` for any of :data:`CLASSIFICATION_METRICS`, or ``"macro.<metric>"`` for
        the binarised ones (accuracy, precision, recall, F1, MCC, balanced accuracy); aliases as ``get_metric``.
    level, n_resamples, seed
        As for :func:`kgeval.analysis.stats.confidence_interval`: resample i draws n triple indices with
        replacement from ``numpy.random.default_rng(seed)``, in order. Resamples where the metric is undefined
        (e.g. no positive drawn) are left out of the interval.

    Returns
    -------
    ConfidenceInterval
        The metric on all test triples (as reported) and the interval; ``n`` the test triples.
    """
    name, macro = _key(key)
    _check(n_resamples, level, seed, results)
    draws = _draws(len(results.labels), n_resamples, seed)
    values = np.concatenate([_values(results, name, macro, counts) for counts in draws])
    low, high = _interval(values, level)
    estimate = results.macro[name] if macro else results.micro[name]
    return ConfidenceInterval(_label(name, macro), estimate, low, high, float(level), len(results.labels), n_resamples)


def compare_classifications(
    results_a: TripleClassificationResults,
    results_b: TripleClassificationResults,
    key: str = "accuracy",
    *,
    test: ClassificationTest = "bootstrap",
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | None = 0,
) -> Comparison:
    """Compare two classifications of the same test triples: metric(A) - metric(B), a p-value and a paired
    bootstrap interval.

    Parameters
    ----------
    results_a, results_b : TripleClassificationResults
        Of the same test triples in the same order (checked by their labels and relations).
    key : str, default="accuracy"
        As for :func:`classification_interval`.
    test : {"bootstrap", "permutation", "mcnemar"}, default="bootstrap"
        ``bootstrap``: twice the share of paired-bootstrap differences on the far side of 0. ``permutation``: swap
        the two models' predictions of random triples (binarised metrics only: two models' scores are not on one
        scale). ``mcnemar``: McNemar's exact test of the triples one model gets right and the other wrong
        (accuracy only).
    level, n_resamples, seed
        As for :func:`classification_interval`; both models are resampled with the same draws.

    Raises
    ------
    ValueError
        For results of different test triples, an unknown test, or a test that does not apply to the metric.
    """
    name, macro = _key(key)
    if test not in CLASSIFICATION_TESTS:
        raise ValueError(f"test must be one of {CLASSIFICATION_TESTS}, got {test!r}")
    if test == "permutation" and name not in BINARISED:
        raise ValueError(f"test='permutation' swaps predictions: it needs a binarised metric {BINARISED}, got "
                         f"{name!r} (two models' scores are not on one scale); use test='bootstrap'")  # fmt: skip
    if test == "mcnemar" and (name != "accuracy" or macro):
        raise ValueError(f"test='mcnemar' tests (micro) accuracy, got {key!r}; use test='bootstrap'")
    _check(n_resamples, level, seed, results_a)
    _check_same_triples(results_a, results_b)
    n = len(results_a.labels)
    differences = np.concatenate([
        _values(results_a, name, macro, draws) - _values(results_b, name, macro, draws)
        for draws in _draws(n, n_resamples, seed)
    ])  # fmt: skip
    observed = (results_a.macro if macro else results_a.micro)[name] - (results_b.macro if macro else results_b.micro)[
        name
    ]
    if test == "bootstrap":
        p_value = bootstrap_p_value(differences[~np.isnan(differences)])
    elif test == "mcnemar":
        p_value = _mcnemar(results_a, results_b)
    else:
        p_value = _permutation_p_value(results_a, results_b, name, macro, observed, n_resamples, seed)
    low, high = _interval(differences, level)
    return Comparison(_label(name, macro), test, observed, p_value, low, high, float(level), n, n_resamples)


# -- resampled metrics ----------------------------------------------------------------------------------------------
def _draws(n: int, n_resamples: int, seed: int | None) -> Iterator[np.ndarray]:
    """Blocks of resampled triple counts (resamples, n): resample i draws n indices with replacement, in order."""
    rng = np.random.default_rng(seed)
    size = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, n_resamples, size):
        rows = min(size, n_resamples - start)
        indices = rng.integers(0, n, (rows, n))
        offsets = (np.arange(rows)[:, None] * n + indices).ravel()
        yield np.bincount(offsets, minlength=rows * n).reshape(rows, n)


def _values(results: TripleClassificationResults, name: str, macro: bool, counts: np.ndarray) -> np.ndarray:
    """The metric of each resample (counts: (resamples, n) weights of the test triples)."""
    if name in ("roc_auc", "average_precision"):
        return _ranked(results.scores, results.labels, counts, name)
    relations = results.relations if macro else None
    return _binarised(results.labels, results.predictions, counts, relations)[_METRIC_INDEX[name]]


def _binarised(labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray,
               relations: np.ndarray | None) -> np.ndarray:  # fmt: skip
    """(metric, row) values of the binarised metrics (:data:`BINARISED` order) for rows of triple ``weights``
    (rows, n) and ``predictions`` (n,) or (rows, n): micro, or with ``relations`` the mean over the relations
    where each is defined (NaN where undefined)."""
    weights = weights.astype(np.float64, copy=False)
    predictions = np.broadcast_to(predictions, weights.shape)
    cells = [weights * (labels & predictions), weights * (~labels & predictions), weights * (labels & ~predictions),
             weights * (~labels & ~predictions)]  # fmt: skip
    if relations is None:
        return _from_counts(*(cell.sum(axis=1) for cell in cells))
    per_relation = np.stack([_from_counts(*(cell[:, relations == relation].sum(axis=1) for cell in cells))
                             for relation in np.unique(relations)])  # fmt: skip
    defined = ~np.isnan(per_relation)
    total = np.where(defined, per_relation, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(defined.any(axis=0), total / defined.sum(axis=0), np.nan)


def _from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """(metric, resample) values of the binarised metrics (rows in :data:`BINARISED` order; NaN where undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        recall, specificity = tp / (tp + fn), tn / (tn + fp)
        margins = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
        mcc = np.where(margins > 0, (tp * tn - fp * fn) / np.sqrt(margins), np.nan)
        return np.stack([(tp + tn) / (tp + fp + fn + tn), tp / (tp + fp), recall, 2 * tp / (2 * tp + fp + fn), mcc,
                         (recall + specificity) / 2])  # fmt: skip


_METRIC_INDEX = {name: i for i, name in enumerate(BINARISED)}


def _ranked(scores: np.ndarray, labels: np.ndarray, counts: np.ndarray, name: str) -> np.ndarray:
    """ROC-AUC (ties half) or AP (scikit-learn's step rule) of each resample, from the scores' distinct values."""
    order = np.argsort(scores, kind="stable")
    _, starts = np.unique(scores[order], return_index=True)
    weights = counts[:, order].astype(np.float64)
    positives = np.add.reduceat(weights * labels[order], starts, axis=1)  # (resamples, distinct)
    negatives = np.add.reduceat(weights * ~labels[order], starts, axis=1)
    num_positives, num_negatives = positives.sum(axis=1), negatives.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if name == "roc_auc":
            below = np.cumsum(negatives, axis=1) - negatives
            wins = (positives * (below + negatives / 2)).sum(axis=1)
            return np.where((num_positives > 0) & (num_negatives > 0), wins / (num_positives * num_negatives), np.nan)
        tp = np.cumsum(positives[:, ::-1], axis=1)[:, ::-1]
        fp = np.cumsum(negatives[:, ::-1], axis=1)[:, ::-1]
        terms = np.where(positives > 0, positives * tp / (tp + fp), 0.0)
        return np.where(num_positives > 0, terms.sum(axis=1) / num_positives, np.nan)


# -- tests ----------------------------------------------------------------------------------------------------------
def _mcnemar(results_a: TripleClassificationResults, results_b: TripleClassificationResults) -> float:
    """McNemar's exact two-sided p-value: of the triples exactly one model gets right, how unlikely a split as
    uneven as this under a fair coin (exact binomial, in fractions)."""
    right_a = results_a.predictions == results_a.labels
    right_b = results_b.predictions == results_b.labels
    only_a, only_b = int((right_a & ~right_b).sum()), int((~right_a & right_b).sum())
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    tail = sum(math.comb(discordant, k) for k in range(min(only_a, only_b) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**discordant)))


def _permutation_p_value(results_a: TripleClassificationResults, results_b: TripleClassificationResults, name: str,
                         macro: bool, observed: float, n_resamples: int, seed: int | None) -> float:  # fmt: skip
    """(1 + #as extreme) / (1 + n_resamples) over random swaps of the two models' predictions per triple (Phipson &
    Smyth 2010: never under-states p)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
    threshold = abs(observed) * (1 - 1e-9)
    labels, n = results_a.labels, len(results_a.labels)
    relations = results_a.relations if macro else None
    index = _METRIC_INDEX[name]
    extreme = 0
    size = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, n_resamples, size):
        swaps = rng.random((min(size, n_resamples - start), n)) < 0.5
        ones = np.ones(swaps.shape)
        a = np.where(swaps, results_b.predictions, results_a.predictions)
        b = np.where(swaps, results_a.predictions, results_b.predictions)
        differences = _binarised(labels, a, ones, relations)[index] - _binarised(labels, b, ones, relations)[index]
        extreme += int(np.count_nonzero(np.abs(differences) >= threshold))
    return (1 + extreme) / (1 + n_resamples)


# -- checks ---------------------------------------------------------------------------------------------------------
def _key(key: str) -> tuple[str, bool]:
    """(metric, macro) of a key; KeyError naming the valid ones."""
    scope, _, name = key.rpartition(".")
    metric = _ALIASES.get(name.lower(), name.lower())
    if metric not in CLASSIFICATION_METRICS or scope.lower() not in ("", "micro", "macro"):
        raise KeyError(f"{key!r}: a key reads <metric>, micro.<metric> or macro.<metric>, the metric one of "
                       f"{', '.join(CLASSIFICATION_METRICS)}")  # fmt: skip
    macro = scope.lower() == "macro"
    if macro and metric not in BINARISED:
        raise KeyError(f"{key!r}: macro intervals are for the binarised metrics ({', '.join(BINARISED)})")
    return metric, macro


def _label(name: str, macro: bool) -> str:
    return f"{'macro' if macro else 'micro'}.{name}"


def _check(n_resamples: object, level: object, seed: object, results: TripleClassificationResults) -> None:
    _check_options(n_resamples, level, seed)
    if len(results.labels) == 0:
        raise ValueError("the results hold no per-triple labels (results of classify_triples / classify_scores do)")


def _check_same_triples(first: TripleClassificationResults, second: TripleClassificationResults) -> None:
    """ValueError unless both classified the same test triples (same labels and relations, in order)."""
    if len(first.labels) != len(second.labels):
        raise ValueError(f"the two results classify {len(first.labels)} and {len(second.labels)} test triples: "
                         "compare classifications of the same test triples")  # fmt: skip
    if not (np.array_equal(first.labels, second.labels) and np.array_equal(first.relations, second.relations)):
        raise ValueError("the two results' test triples differ (labels or relations, in order): compare "
                         "classifications of the same test triples")  # fmt: skip


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of the defined values (NaN, NaN when none is)."""
    defined = values[~np.isnan(values)]
    if defined.size == 0:
        return float("nan"), float("nan")
    return percentile_interval(defined, level)
