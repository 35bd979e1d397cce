"""PyKEEN 1.11.1's 22 classification metrics (pykeen/metrics/classification.py) computed from confusion counts,
formula for formula -- quirks included, each named in :data:`PYKEEN_QUIRKS` and described in docs/classification.md.

PyKEEN reads sklearn's confusion matrix ``[[TN, FP], [FN, TP]]`` as if it were ``[[TP, FN], [FP, TN]]`` (its
docstring's layout), so several of its metrics are their mirror image: its "accuracy" is TN * TP / n, its "f1_score"
the F1 of the negative class, its "positive_predictive_value" the negative predictive value, and so on; its MCC has
no square root and multiplies the four margins in int64, which wraps around past 9.2e18 (its
``RuntimeWarning: overflow encountered in scalar multiply``). :func:`pykeen_metrics` reproduces each number as
PyKEEN's code computes it; kgeval's own metrics (:mod:`.all_pairs`) are what the names say.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from kgeval.variants.classification.pair_counts import Confusion

__all__ = ["PYKEEN_METRICS", "PYKEEN_QUIRKS", "pykeen_metrics"]

#: PyKEEN's 22 metric keys, in its resolver's order of names (sorted)
PYKEEN_METRICS: tuple[str, ...] = (
    "accuracy", "area_under_the_receiver_operating_characteristic_curve", "average_precision_score",
    "balanced_accuracy_score", "diagnostic_odds_ratio", "f1_score", "false_discovery_rate", "false_negative_rate",
    "false_omission_rate", "false_positive_rate", "fowlkes_mallows_index", "informedness",
    "matthews_correlation_coefficient", "negative_likelihood_ratio", "negative_predictive_value", "num_scores",
    "positive_likelihood_ratio", "positive_predictive_value", "prevalence_threshold", "threat_score",
    "true_negative_rate", "true_positive_rate",
)  # fmt: skip

#: what PyKEEN's code computes where it differs from the metric's name (TP, FP, FN, TN: the true confusion counts)
PYKEEN_QUIRKS: dict[str, str] = {
    "accuracy": "TN * TP / n (a product where the sum belongs)",
    "false_positive_rate": "FN / (FN + TP): the false negative rate",
    "false_negative_rate": "FP / (FP + TN): the false positive rate",
    "positive_predictive_value": "TN / (TN + FN): the negative predictive value",
    "negative_predictive_value": "TP / (TP + FP): the positive predictive value",
    "false_discovery_rate": "FN / (FN + TN): the false omission rate",
    "false_omission_rate": "FP / (FP + TP): the false discovery rate",
    "positive_likelihood_ratio": "TN (FN + TP) / (FN (TN + FP)): 1 / the negative likelihood ratio",
    "negative_likelihood_ratio": "FP (TN + FP) / (TP (FN + TP))",
    "f1_score": "2 TN / (2 TN + FP + FN): the F1 of the negative class",
    "threat_score": "TN / (TN + FP + FN): the threat score of the negative class",
    "fowlkes_mallows_index": "sqrt(TN^2 / (2 TN + FP + FN))",
    "prevalence_threshold": "sqrt(FNR) / (sqrt(FNR) + sqrt(TPR)), through its false positive rate",
    "matthews_correlation_coefficient": "(TN TP - FN FP) / (the product of the four margins, no square root, int64)",
}


def pykeen_metrics(confusion: Confusion, roc_auc: float, average_precision: float, num_scores: int) -> dict[str, float]:
    """PyKEEN's 22 metrics of one side from its binarisation's ``confusion`` (its top-P rule for a reproduction) and
    the exact ``roc_auc`` / ``average_precision``: every expression evaluated as PyKEEN evaluates it (NumPy int64
    products, its zero-division rule: 0 with a UserWarning)."""
    m = np.array([[confusion.tn, confusion.fp], [confusion.fn, confusion.tp]], dtype=np.int64)
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the int64 overflow of its MCC, reproduced
        mcc_numerator = (m[0, 0] * m[1, 1] - m[1, 0] * m[0, 1]).item()
        mcc_denominator = (m.sum(axis=1).prod() * m.sum(axis=0).prod()).item()
        lr_plus = ((m[0, 0] * m[1, :].sum()).item(), (m[1, 0] * m[0, :].sum()).item())
        lr_minus = ((m[0, 1] * m[0, :].sum()).item(), (m[1, 1] * m[1, :].sum()).item())
        dor = ((m[0, 0] * m[1, 1]).item(), (m[0, 1] * m[1, 0]).item())
    fpr = _divide(m[1, 0].item(), m[1, :].sum().item())
    tpr = _divide(m[1, 1].item(), m[1, :].sum().item())
    per_class = np.diag(m) / m.sum(axis=1)
    return {
        "accuracy": _divide(dor[0], m.sum().item()),
        "area_under_the_receiver_operating_characteristic_curve": roc_auc,
        "average_precision_score": average_precision,
        "balanced_accuracy_score": float(np.mean(per_class)),
        "diagnostic_odds_ratio": _divide(*dor),
        "f1_score": _divide(2 * m[0, 0].item(), (2 * m[0, 0] + m[0, 1] + m[1, 0]).item()),
        "false_discovery_rate": _divide(m[1, 0].item(), m[:, 0].sum().item()),
        "false_negative_rate": _divide(m[0, 1].item(), m[0, :].sum().item()),
        "false_omission_rate": _divide(m[0, 1].item(), m[:, 1].sum().item()),
        "false_positive_rate": fpr,
        "fowlkes_mallows_index": math.sqrt(_divide(m[0, 0].item() ** 2, (2 * m[0, 0] + m[0, 1] + m[1, 0]).item())),
        "informedness": tpr + _divide(m[0, 0].item(), m[0, :].sum().item()) - 1,
        "matthews_correlation_coefficient": _divide(mcc_numerator, mcc_denominator),
        "negative_likelihood_ratio": _divide(*lr_minus),
        "negative_predictive_value": _divide(m[1, 1].item(), m[:, 1].sum().item()),
        "num_scores": num_scores,
        "positive_likelihood_ratio": _divide(*lr_plus),
        "positive_predictive_value": _divide(m[0, 0].item(), m[:, 0].sum().item()),
        "prevalence_threshold": _divide(np.sqrt(fpr).item(), (np.sqrt(fpr) + np.sqrt(tpr)).item()),
        "threat_score": _divide(m[0, 0].item(), (m[0, 0] + m[0, 1] + m[1, 0]).item()),
        "true_negative_rate": _divide(m[0, 0].item(), m[0, :].sum().item()),
        "true_positive_rate": tpr,
    }


def _divide(numerator: float, denominator: float) -> float:
    """PyKEEN's ``safe_divide`` with its default policy: 0 for a zero denominator, with its UserWarning."""
    if denominator != 0:
        return numerator / denominator
    warnings.warn("Division by zero. Result set to 0 according to policy.", UserWarning, stacklevel=3)
    return 0
