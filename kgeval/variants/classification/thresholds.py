"""The thresholds of triple classification: the exact sweep for the lowest score that maximises accuracy or F1
(:func:`best_threshold`), PyKEEN's top-P rule (:func:`top_p_predictions`), and the fit on validation of a threshold
per relation by each convention of :data:`CONVENTIONS` (docs/classification.md), with its fallback for a relation
that validation lacks or holds one class of only.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

import numpy as np

from kgeval.exceptions import ThresholdFallbackWarning, warn_caller
from kgeval.variants.classification.metrics import _checked_pairs

__all__ = ["CONVENTIONS", "best_threshold", "top_p_predictions"]

Convention = Literal["kgeval", "codex", "torchkge", "global", "pykeen"]
Objective = Literal["accuracy", "f1"]

#: the threshold conventions by name (docs/classification.md)
CONVENTIONS: tuple[str, ...] = ("kgeval", "codex", "torchkge", "global", "pykeen")


def top_p_predictions(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """PyKEEN's binarisation (``construct_indicator`` in pykeen/metrics/classification.py): the P highest ``scores``
    (n,) called true, P the number of true ``labels`` (n,). Exactly P are called true; among scores tied at the P-th
    score, the ones called true are the last ones of NumPy's default ``np.argsort`` (ascending, not stable) -- the
    order PyKEEN reverses and cuts."""
    count = int(np.sum(labels, dtype=np.int64))
    predictions = np.zeros(scores.shape[0], dtype=bool)
    if count:
        predictions[np.argsort(scores)[-count:]] = True
    return predictions


def best_threshold(scores: np.ndarray, labels: np.ndarray, objective: Objective = "accuracy") -> float:
    """The lowest of the distinct ``scores`` (n,) that maximises ``objective`` when a triple is called true at
    score >= threshold, ``labels`` (n,) bool; counted exactly (accuracy by its integer count, F1 as a fraction).
    ValueError for a NaN score or an empty input."""
    scores, labels = _checked_pairs(scores, labels, "best_threshold", both_classes=False)
    order = np.argsort(scores, kind="stable")
    distinct, first = np.unique(scores[order], return_index=True)  # first: how many scores lie below a candidate
    positives_below = np.concatenate([[0], np.cumsum(labels[order])])[first]
    num_positives, num_negatives = int(labels.sum()), int(labels.size - labels.sum())
    tp = num_positives - positives_below
    fp = num_negatives - (first - positives_below)
    if objective == "accuracy":
        return float(distinct[int(np.argmax(tp - fp))])  # correct = tp + (N - fp); argmax: the first, lowest
    f1 = 2 * tp / (tp + fp + num_positives)  # 2tp / (2tp + fp + fn); tp + fp >= 1 at every candidate
    near = np.nonzero(f1 >= f1.max() * (1 - 1e-9))[0]  # the float maximum's neighbours, decided exactly below
    exact = [Fraction(2 * int(tp[j]), int(tp[j] + fp[j]) + num_positives) for j in near]
    return float(distinct[near[exact.index(max(exact))]])


def _fit(
    scores: np.ndarray,
    labels: np.ndarray,
    relations: np.ndarray,
    test_relations: np.ndarray,
    convention: str,
    objective: Objective,
) -> tuple[dict[int, float], float | None, dict[int, str], bool]:
    """(threshold per relation of validation and test, global threshold, fallback reasons, strict comparison)."""
    wanted = sorted(set(np.unique(relations).tolist()) | set(np.unique(test_relations).tolist()))
    present = set(np.unique(relations).tolist())
    if convention == "torchkge":
        if labels.all():
            raise ValueError("convention 'torchkge' needs validation negatives: valid holds none")
        top = float(scores[~labels].max())
        own = {r: float(scores[(relations == r) & ~labels].max()) for r in np.unique(relations[~labels]).tolist()}
        fallback = {r: "no validation negatives: the highest of all" for r in wanted if r not in own}
        return {r: own.get(r, top) for r in wanted}, top, fallback, True
    one_class = labels.all() or not labels.any()
    if one_class and convention in ("kgeval", "global"):
        raise ValueError(f"the validation triples hold one class only ({'true' if labels.all() else 'false'}): no "
                         "threshold can be fitted on them")  # fmt: skip
    overall = best_threshold(scores, labels, objective)
    if convention == "global":
        return dict.fromkeys(wanted, overall), overall, {}, False
    thresholds, fallback = {}, {}
    for r in wanted:
        mask = relations == r
        if convention == "codex":
            thresholds[r] = best_threshold(scores[mask], labels[mask], objective) if r in present else -math.inf
            if r not in present:
                fallback[r] = "absent from validation: -inf, every triple true (CoDEx's tc.py)"
        elif r not in present:
            thresholds[r], fallback[r] = overall, "absent from validation: the global threshold"
        elif labels[mask].all() or not labels[mask].any():
            thresholds[r], fallback[r] = overall, "one class only in validation: the global threshold"
        else:
            thresholds[r] = best_threshold(scores[mask], labels[mask], objective)
    tested = set(np.unique(test_relations).tolist())
    told = {r: why for r, why in fallback.items() if r in tested}
    if told:
        count = int(np.isin(test_relations, list(told)).sum())
        warn_caller(f"{len(told)} test relation(s) got no threshold of their own from validation ({count} test "
                    f"triples): " + "; ".join(f"relation {r}: {why}" for r, why in told.items()),
                    ThresholdFallbackWarning)  # fmt: skip
    return thresholds, overall, fallback, False
