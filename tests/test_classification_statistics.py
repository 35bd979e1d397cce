"""Confidence intervals and paired comparisons of triple classification
(kgeval.variants.classification.statistics), against brute force: the same draws replayed in the test, each
resample's metric computed by scikit-learn on the drawn triples, the percentile interval by numpy; McNemar's test
against scipy's exact binomial test."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    balanced_accuracy_score,
    f1_score,
    matthews_corrcoef,
    precision_score,
    recall_score,
    roc_auc_score,
)

from kgeval.variants import LabelledTriples, classification_interval, classify_scores, compare_classifications

N_VALID, N_TEST, RELATIONS = 120, 90, 3
SKLEARN = {
    "accuracy": lambda y, p, s: accuracy_score(y, p),
    "precision": lambda y, p, s: precision_score(y, p, zero_division=np.nan),
    "recall": lambda y, p, s: recall_score(y, p, zero_division=np.nan),
    "f1": lambda y, p, s: f1_score(y, p, zero_division=np.nan),
    "mcc": lambda y, p, s: matthews_corrcoef(y, p) if len(set(y)) > 1 and len(set(p)) > 1 else np.nan,
    "balanced_accuracy": lambda y, p, s: balanced_accuracy_score(y, p) if len(set(y)) > 1 else np.nan,
    "roc_auc": lambda y, p, s: roc_auc_score(y, s) if len(set(y)) > 1 else np.nan,
    "average_precision": lambda y, p, s: average_precision_score(y, s) if y.any() else np.nan,
}


def triples(n: int, rng: np.random.Generator) -> tuple[LabelledTriples, np.ndarray]:
    import torch

    relations = rng.integers(0, RELATIONS, n)
    rows = torch.tensor([[i, int(r), i + 1] for i, r in enumerate(relations)])
    labels = rng.random(n) < 0.5
    return LabelledTriples(rows, torch.as_tensor(labels)), labels


def classification(seed: int, test_labels=None):
    """A classification of tie-heavy scores (quarters in [0, 2)) that follow the labels a little."""
    rng = np.random.default_rng(seed)
    valid, valid_labels = triples(N_VALID, rng)
    test, labels = triples(N_TEST, np.random.default_rng(99))  # the same test triples for every seed
    score = lambda y: np.floor((rng.random(y.size) + 0.4 * y) * 8) / 4  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classify_scores(valid, score(valid_labels), test, score(labels))


def replayed(n_resamples: int, seed: int) -> np.ndarray:
    """The draws the module documents: resample i takes n indices with replacement, in order, one Generator."""
    return np.random.default_rng(seed).integers(0, N_TEST, (n_resamples, N_TEST))


def brute_value(results, name: str, macro: bool, index: np.ndarray) -> float:
    y, p, s, r = results.labels[index], results.predictions[index], results.scores[index], results.relations[index]
    if not macro:
        return SKLEARN[name](y, p, s)
    values = [SKLEARN[name](y[r == relation], p[r == relation], s[r == relation]) for relation in np.unique(r)]
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else np.nan


def percentile(values: list[float], level: float) -> tuple[float, float]:
    defined = np.array([v for v in values if not np.isnan(v)])
    low, high = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


@pytest.mark.parametrize(
    "key",
    ["accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy", "roc_auc", "average_precision",
     "macro.accuracy", "macro.f1", "macro.mcc"],
)  # fmt: skip
def test_intervals_equal_the_brute_force_bootstrap(key):
    results = classification(0)
    name = key.rpartition(".")[2]
    macro = key.startswith("macro.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [brute_value(results, name, macro, index) for index in replayed(300, 7)]
    got = classification_interval(results, key, n_resamples=300, seed=7, level=0.9)
    assert (got.low, got.high) == pytest.approx(percentile(expected, 0.9), abs=1e-12)
    assert got.estimate == (results.macro if macro else results.micro)[name]
    assert got.key == ("macro." if macro else "micro.") + name and got.n == N_TEST


def test_paired_bootstrap_uses_one_draw_for_both_models():
    a, b = classification(1), classification(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [brute_value(a, "roc_auc", False, i) - brute_value(b, "roc_auc", False, i) for i in replayed(200, 3)]
    got = compare_classifications(a, b, "auc", n_resamples=200, seed=3)
    assert (got.low, got.high) == pytest.approx(percentile(expected, 0.95), abs=1e-12)
    assert got.difference == a.micro["roc_auc"] - b.micro["roc_auc"]
    differences = np.array(expected)
    share = 2 * (1 + min(np.count_nonzero(differences <= 0), np.count_nonzero(differences >= 0))) / 201
    assert got.p_value == pytest.approx(min(1.0, share))


def test_mcnemar_is_scipys_exact_binomial_test():
    scipy_stats = pytest.importorskip("scipy.stats")
    a, b = classification(3), classification(4)
    right_a, right_b = a.predictions == a.labels, b.predictions == b.labels
    only_a, only_b = int((right_a & ~right_b).sum()), int((~right_a & right_b).sum())
    expected = scipy_stats.binomtest(only_a, only_a + only_b, 0.5).pvalue
    assert compare_classifications(a, b, test="mcnemar", n_resamples=10).p_value == pytest.approx(expected, rel=1e-12)


def test_permutation_test_of_a_model_against_itself_and_against_a_worse_one():
    a = classification(5)
    assert compare_classifications(a, a, "f1", test="permutation", n_resamples=50).p_value == 1.0
    perfect = classification(5)
    perfect.predictions[:] = perfect.labels
    perfect.micro["accuracy"] = 1.0
    got = compare_classifications(perfect, a, "accuracy", test="permutation", n_resamples=999, seed=1)
    assert got.p_value < 0.01 and got.difference > 0


def test_bad_requests_are_refused():
    a = classification(6)
    with pytest.raises(ValueError, match="binarised"):
        compare_classifications(a, a, "roc_auc", test="permutation")
    with pytest.raises(ValueError, match="mcnemar"):
        compare_classifications(a, a, "f1", test="mcnemar")
    with pytest.raises(ValueError, match="test must be"):
        compare_classifications(a, a, test="t-test")
    with pytest.raises(KeyError, match="macro intervals"):
        classification_interval(a, "macro.roc_auc")
    with pytest.raises(KeyError, match="metric one of"):
        classification_interval(a, "hits@10")
    with pytest.raises(ValueError, match="level"):
        classification_interval(a, level=1.5)
    other = classification(7)
    other.labels[0] = not other.labels[0]
    with pytest.raises(ValueError, match="same test triples"):
        compare_classifications(a, other)
