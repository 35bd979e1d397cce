"""The metrics of triple classification (:data:`CLASSIFICATION_METRICS`), in float64 from exact counts: accuracy,
precision, recall, F1, MCC and balanced accuracy from the predictions of a scope's triples, and from their scores
ROC-AUC by the positives' mid-ranks (:func:`roc_auc`: ties count half) and average precision by scikit-learn's step
rule (:func:`average_precision`); a metric a scope leaves undefined is NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["CLASSIFICATION_METRICS", "average_precision", "roc_auc"]


#: the metrics reported micro, per relation and macro, in this order
CLASSIFICATION_METRICS: tuple[str, ...] = (
    "accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy", "roc_auc", "average_precision",
)  # fmt: skip
_ALIASES = {
    "acc": "accuracy", "f1_score": "f1", "matthews_correlation_coefficient": "mcc", "auc": "roc_auc",
    "auc_roc": "roc_auc", "ap": "average_precision", "tpr": "recall", "sensitivity": "recall",
}  # fmt: skip


def _metrics(labels: np.ndarray, predictions: np.ndarray, scores: np.ndarray, undefined: dict[str, list[str]],
             scope: str) -> dict[str, float]:  # fmt: skip
    """:data:`CLASSIFICATION_METRICS` of one scope's triples; an undefined one is NaN, its scope noted."""
    tp = int((labels & predictions).sum())
    fp = int((~labels & predictions).sum())
    fn = int((labels & ~predictions).sum())
    tn = int((~labels & ~predictions).sum())
    p, n = tp + fn, tn + fp
    denominator = (tp + fp) * p * n * (tn + fn)
    values = {
        "accuracy": _ratio(tp + tn, p + n),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, p),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "mcc": (tp * tn - fp * fn) / math.sqrt(denominator) if denominator else math.nan,
        "balanced_accuracy": (_ratio(tp, p) + _ratio(tn, n)) / 2 if p and n else math.nan,
        "roc_auc": roc_auc(scores, labels) if p and n else math.nan,
        "average_precision": average_precision(scores, labels) if p else math.nan,
    }
    for name, value in values.items():
        if math.isnan(value):
            undefined.setdefault(name, []).append(scope)
    return values


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else math.nan


def _defined_mean(values: list[float]) -> float:
    defined = [v for v in values if not math.isnan(v)]
    return math.fsum(defined) / len(defined) if defined else math.nan


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve, (#(pos, neg) pairs ordered right + half the tied ones) / (P N), from the
    positives' mid-ranks summed exactly (Mann-Whitney); both classes must be present (else a ValueError, as for a
    NaN score)."""
    scores, labels = _checked_pairs(scores, labels, "roc_auc")
    order = np.argsort(scores, kind="stable")
    ranked, positive = scores[order], labels[order]
    _, start = np.unique(ranked, return_index=True)
    end = np.append(start[1:], ranked.size)  # group g spans sorted positions [start, end): mid-rank (start+end+1)/2
    positives_per_group = np.add.reduceat(positive.astype(np.int64), start)
    twice_rank_sum = int(np.sum(positives_per_group * (start + end + 1)))
    p = int(labels.sum())
    n = labels.size - p
    return (twice_rank_sum - p * (p + 1)) / (2 * p * n)


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Σ_k (R_k - R_{k-1}) P_k over the distinct scores, descending, as scikit-learn's ``average_precision_score``:
    P_k and R_k the precision and recall of calling true the triples scoring >= the k-th score; a true label must be
    present (else a ValueError, as for a NaN score)."""
    scores, labels = _checked_pairs(scores, labels, "average_precision", both_classes=False, positives=True)
    order = np.argsort(-scores, kind="stable")
    ranked, positive = scores[order], labels[order].astype(np.int64)
    # the last position of each distinct score (compared, not subtracted: -inf - -inf is NaN)
    last = np.append(np.nonzero(ranked[1:] != ranked[:-1])[0], ranked.size - 1)
    tp = np.cumsum(positive)[last]
    predicted = last + 1
    gained = np.diff(np.concatenate([[0], tp]))
    return float(np.sum(gained / tp[-1] * (tp / predicted)))


def _checked_pairs(scores: Any, labels: Any, name: str, both_classes: bool = True,
                   positives: bool = False) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``scores`` as float64 and ``labels`` as bool arrays of one length (n,); ValueError, naming ``name``, for other
    shapes, an empty input, a NaN score, labels of one class only (``both_classes``) or no true label
    (``positives``)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    if scores.ndim != 1 or scores.shape != labels.shape or scores.size == 0:
        raise ValueError(f"{name} takes scores and labels of one length (n,) > 0, got {scores.shape} and "
                         f"{labels.shape}")  # fmt: skip
    if np.isnan(scores).any():
        raise ValueError(f"{name}: score {int(np.flatnonzero(np.isnan(scores))[0])} is NaN")
    if both_classes and (labels.all() or not labels.any()):
        raise ValueError(f"{name} needs both classes among the labels, got only {'true' if labels.all() else 'false'}")
    if positives and not labels.any():
        raise ValueError(f"{name} needs a true label, got only false ones")
    return scores, labels
