"""Triple classification (kgeval.variants.classification): thresholds, metrics and inputs, each checked against a
reference derived from its definition -- scikit-learn's metrics, brute-force sweeps, confusion-matrix formulas and,
on CoDEx-S, an independent re-implementation of CoDEx's scripts/tc.py -- never against kgeval's own output."""

from __future__ import annotations

import gzip
import math
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, average_precision_score, f1_score, roc_auc_score

from kgeval.datasets import load_dataset, shared_data_dir
from kgeval.exceptions import KnownNegativesWarning, ThresholdFallbackWarning, UndefinedMetricWarning
from kgeval.models import DistMult
from kgeval.models.training import train_model
from kgeval.variants import (
    LabelledTriples,
    average_precision,
    best_threshold,
    classify_scores,
    classify_triples,
    load_split_with_negatives,
    read_labelled_triples,
    roc_auc,
    score_triples,
)


def labelled(relations: list[int], labels: list[bool]) -> LabelledTriples:
    """Triples (i, relation, i + 1) with the given relations and labels (the ids do not matter to the fit)."""
    rows = [[i, r, i + 1] for i, r in enumerate(relations)]
    return LabelledTriples(torch.tensor(rows), torch.tensor(labels))


def brute_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """(#(pos, neg) pairs with pos > neg + half the ties) / (P N), by pairs."""
    pos, neg = scores[labels], scores[~labels]
    wins = sum(Fraction(1) if p > n else Fraction(1, 2) if p == n else Fraction(0) for p in pos for n in neg)
    return float(wins / (len(pos) * len(neg)))


def brute_threshold(scores: np.ndarray, labels: np.ndarray, objective: str) -> float:
    """The lowest distinct score maximising the objective (exact fractions) when score >= threshold is true."""
    best, chosen = None, None
    for t in sorted(set(scores.tolist())):
        predicted = scores >= t
        tp, fp = int((predicted & labels).sum()), int((predicted & ~labels).sum())
        fn, tn = int((~predicted & labels).sum()), int((~predicted & ~labels).sum())
        value = Fraction(tp + tn, len(scores)) if objective == "accuracy" else Fraction(2 * tp, 2 * tp + fp + fn)
        if best is None or value > best:
            best, chosen = value, t
    assert chosen is not None
    return chosen


# -- ROC-AUC and AP ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_roc_auc_and_average_precision_equal_scikit_learn_with_heavy_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    scores = rng.integers(0, int(rng.integers(1, 8)), n).astype(np.float64) / 3  # few distinct values: many ties
    if seed % 3 == 0:
        scores[rng.random(n) < 0.1] = -np.inf
    labels = rng.random(n) < rng.uniform(0.1, 0.9)
    labels[:2] = [True, False]
    finite = np.where(np.isinf(scores), -1e300, scores)  # scikit-learn refuses infinities; the order is the same
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, finite), abs=1e-12)
    assert average_precision(scores, labels) == pytest.approx(average_precision_score(labels, finite), abs=1e-12)
    if n < 120:
        assert roc_auc(scores, labels) == pytest.approx(brute_auc(scores, labels), abs=1e-12)


def test_the_micro_and_per_relation_areas_are_scikit_learns() -> None:
    rng = np.random.default_rng(7)
    relations = rng.integers(0, 3, 300).tolist()
    valid_labels, test_labels = (rng.random(300) < 0.5).tolist(), (rng.random(300) < 0.4).tolist()
    valid, test = labelled(relations, valid_labels), labelled(relations, test_labels)
    test_scores = rng.integers(0, 5, 300).astype(np.float32)
    results = classify_scores(valid, rng.normal(size=300), test, torch.from_numpy(test_scores))
    y, s, r = np.array(test_labels), test_scores.astype(np.float64), np.array(relations)
    assert results.get_metric("roc_auc") == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert results.get_metric("micro.ap") == pytest.approx(average_precision_score(y, s), abs=1e-12)
    for relation in range(3):
        mask = r == relation
        expected = roc_auc_score(y[mask], s[mask])
        assert results.get_metric(f"relation.{relation}.auc") == pytest.approx(expected, abs=1e-12)
    expected_macro = np.mean([average_precision_score(y[r == k], s[r == k]) for k in range(3)])
    assert results.get_metric("macro.average_precision") == pytest.approx(expected_macro, abs=1e-12)


# -- the threshold sweep ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("objective", ["accuracy", "f1"])
@pytest.mark.parametrize("seed", range(40))
def test_the_sweep_equals_a_brute_force_over_every_candidate(seed: int, objective: str) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    scores = rng.integers(0, int(rng.integers(1, 10)), n).astype(np.float64)
    labels = rng.random(n) < rng.uniform(0, 1)
    if not labels.any() and objective == "f1":
        labels[0] = True
    assert best_threshold(scores, labels, objective) == brute_threshold(scores, labels, objective)


def test_ties_between_thresholds_go_to_the_lowest_score() -> None:
    scores, labels = np.array([1.0, 2.0, 3.0, 4.0]), np.array([False, True, False, True])
    # at 2: F T T T -> 3 right; at 4: F F F T -> 3 right; at 1 and 3: 2 right; the lowest maximiser is 2
    assert best_threshold(scores, labels) == 2.0
    # F1 at 1: 2*2/(4+2+0) = 2/3; at 2: 4/(4+1) = 4/5; at 3: 2/(2+1+1) = 1/2; at 4: 2/(2+0+1) = 2/3
    assert best_threshold(scores, labels, "f1") == 2.0
    # tied scores are one candidate, the two 1.0 on the same side: at 1 and at 2, 2 of 3 right; the lower is 1
    assert best_threshold(np.array([1.0, 1.0, 2.0]), np.array([True, False, True])) == 1.0


def test_the_f1_objective_can_choose_another_threshold_than_accuracy() -> None:
    scores = np.array([10.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    labels = np.array([True, False, False, False, True, True])
    # at 10: tp 1, fp 0, fn 2, tn 3 -> accuracy 4/6, F1 2/4; at 1: tp 3, fp 3 -> accuracy 3/6, F1 6/9
    assert best_threshold(scores, labels, "accuracy") == brute_threshold(scores, labels, "accuracy") == 10.0
    assert best_threshold(scores, labels, "f1") == brute_threshold(scores, labels, "f1") == 1.0


# -- the other metrics ------------------------------------------------------------------------------------------------


def confusion_case(tp: int, fp: int, fn: int, tn: int) -> tuple[LabelledTriples, np.ndarray]:
    """Test triples of one relation whose predictions at threshold 1 (fitted on valid below) give the matrix."""
    labels = [True] * tp + [False] * fp + [True] * fn + [False] * tn
    scores = np.array([2.0] * (tp + fp) + [0.0] * (fn + tn))
    return labelled([0] * len(labels), labels), scores


@pytest.mark.parametrize(("tp", "fp", "fn", "tn"), [(5, 2, 3, 7), (1, 0, 0, 1), (0, 3, 2, 4), (40, 1, 9, 13)])
def test_confusion_metrics_follow_their_definitions(tp: int, fp: int, fn: int, tn: int) -> None:
    valid = labelled([0, 0], [False, True])  # scores 0 (false) and 1 (true): the fitted threshold is 1
    test, scores = confusion_case(tp, fp, fn, tn)
    results = classify_scores(valid, np.array([0.0, 1.0]), test, scores, convention="global")
    assert results.global_threshold == 1.0
    p, n = tp + fn, fp + tn
    expected = {
        "accuracy": (tp + tn) / (p + n),
        "precision": tp / (tp + fp) if tp + fp else math.nan,
        "recall": tp / p,
        "f1": 2 * tp / (2 * tp + fp + fn),
        "mcc": (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)),
        "balanced_accuracy": (tp / p + tn / n) / 2,
    }
    for name, value in expected.items():
        got = results.get_metric(name)
        assert got == pytest.approx(value, abs=1e-12) or (math.isnan(got) and math.isnan(value)), name
        assert results.get_metric(f"relation.0.{name}") == got or math.isnan(got), name


def test_an_undefined_metric_is_nan_with_a_warning() -> None:
    valid = labelled([0, 0], [False, True])
    test, scores = confusion_case(3, 0, 2, 0)  # no false triple: MCC, balanced accuracy and ROC-AUC undefined
    with pytest.warns(UndefinedMetricWarning, match="mcc") as record:
        results = classify_scores(valid, np.array([0.0, 1.0]), test, scores, convention="global")
    assert "roc_auc" in str(record[0].message)
    for name in ("mcc", "balanced_accuracy", "roc_auc", "macro.roc_auc"):
        assert math.isnan(results.get_metric(name)), name
    assert results.get_metric("precision") == 1.0 and results.get_metric("recall") == 3 / 5


def test_macro_is_the_mean_over_relations_and_keys_name_relations_by_label() -> None:
    names = ("likes", "hates")
    valid = LabelledTriples(
        torch.tensor([[0, 0, 1], [0, 0, 2], [0, 1, 1], [0, 1, 2]]), torch.tensor([True, False, True, False]), names
    )
    test = LabelledTriples(
        torch.tensor([[0, 0, 1], [0, 0, 2], [0, 1, 1], [0, 1, 2], [0, 1, 3]]),
        torch.tensor([True, False, True, True, False]),
        names,
    )
    results = classify_scores(valid, [1.0, 0.0, 5.0, 4.0], test, [1.0, 0.0, 5.0, 4.0, 6.0])
    assert results.thresholds == {0: 1.0, 1: 5.0}
    # likes: both right (1.0); hates: 5 -> T right, 4 -> F wrong, 6 -> T wrong: 1/3
    assert results.get_metric("relation.likes.accuracy") == 1.0
    assert results.get_metric("relation.1.accuracy") == pytest.approx(1 / 3)
    assert results.get_metric("macro.accuracy") == pytest.approx((1 + 1 / 3) / 2)
    assert results.get_metric("ACC") == pytest.approx(3 / 5)
    assert results.to_dict()["per_relation"]["hates"]["threshold"] == 5.0
    frame = results.to_df()
    assert list(frame.index) == ["micro", "macro", "likes", "hates"]
    assert frame.loc["hates", "negatives"] == 1 and frame.loc["likes", "accuracy"] == 1.0
    for bad in ("relation.loves.f1", "macro.hits_at_10", "side.f1"):
        with pytest.raises(KeyError):
            results.get_metric(bad)


# -- conventions ------------------------------------------------------------------------------------------------------


def convention_case() -> tuple[LabelledTriples, np.ndarray, LabelledTriples, np.ndarray]:
    """Relation 0 with both classes in validation, 1 with true triples only, 2 absent from validation."""
    valid = labelled([0, 0, 0, 0, 1, 1], [True, True, False, False, True, True])
    valid_scores = np.array([3.0, 2.0, 1.0, 0.0, 9.0, 8.0])
    test = labelled([0, 0, 1, 1, 2, 2], [True, False, True, False, True, False])
    test_scores = np.array([2.5, 1.5, 8.5, 7.5, -5.0, -6.0])
    return valid, valid_scores, test, test_scores


def test_the_conventions_differ_where_validation_lacks_a_relation() -> None:
    valid, valid_scores, test, test_scores = convention_case()
    # global sweep over valid: candidates 0,1,2,3,8,9; at 2 every triple is right (6/6): threshold 2
    with pytest.warns(ThresholdFallbackWarning, match=r"2 test relation\(s\).*4 test triples"):
        own = classify_scores(valid, valid_scores, test, test_scores)
    assert own.thresholds == {0: 2.0, 1: 2.0, 2: 2.0} and own.global_threshold == 2.0
    assert set(own.fallback) == {1, 2} and own.fallback_triples == 4
    assert own.predictions.tolist() == [True, False, True, True, False, False]
    with pytest.warns(ThresholdFallbackWarning, match="-inf"):
        codex = classify_scores(valid, valid_scores, test, test_scores, convention="codex")
    # relation 1 (true triples only) fits its lowest score 8; relation 2 (absent) gets -inf: all true
    assert codex.thresholds == {0: 2.0, 1: 8.0, 2: -math.inf} and set(codex.fallback) == {2}
    assert codex.predictions.tolist() == [True, False, True, False, True, True]
    assert codex.fallback_triples == 2
    torchkge = classify_scores(valid, valid_scores, test, test_scores, convention="torchkge")
    # the highest validation negative: 1 for relation 0; relations 1, 2 have none: the highest of all, 1; strict
    assert torchkge.thresholds == {0: 1.0, 1: 1.0, 2: 1.0} and torchkge.strict
    assert torchkge.predictions.tolist() == [True, True, True, True, False, False]
    tie = classify_scores(valid, valid_scores, test, np.array([1.0] * 6), convention="torchkge")
    assert not tie.predictions.any()  # score == threshold is false under ">"
    one = classify_scores(valid, valid_scores, test, test_scores, convention="global")
    assert one.thresholds == {0: 2.0, 1: 2.0, 2: 2.0} and one.fallback == {}


def test_bad_conventions_objectives_and_one_class_validation_are_refused() -> None:
    valid, valid_scores, test, test_scores = convention_case()
    with pytest.raises(ValueError, match="convention must be one of"):
        classify_scores(valid, valid_scores, test, test_scores, convention="sklearn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="objective must be"):
        classify_scores(valid, valid_scores, test, test_scores, objective="mcc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fits no objective"):
        classify_scores(valid, valid_scores, test, test_scores, convention="torchkge", objective="f1")
    only_true = labelled([0, 1], [True, True])
    with pytest.raises(ValueError, match="one class only"):
        classify_scores(only_true, [1.0, 2.0], test, test_scores)
    with pytest.raises(ValueError, match="needs validation negatives"):
        classify_scores(only_true, [1.0, 2.0], test, test_scores, convention="torchkge")
    with pytest.raises(ValueError, match="row 1 .* is NaN"):
        classify_scores(valid, valid_scores, test, [0.0, math.nan, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="one score per labelled triple"):
        classify_scores(valid, valid_scores[:3], test, test_scores)


# -- inputs -----------------------------------------------------------------------------------------------------------


def test_labels_other_than_the_two_classes_are_refused() -> None:
    triples = torch.tensor([[0, 0, 1], [1, 0, 2]])
    assert LabelledTriples.from_labels(triples, [1, 0]).labels.tolist() == [True, False]
    assert LabelledTriples.from_labels(triples, torch.tensor([0.0, 1.0])).labels.tolist() == [False, True]
    with pytest.raises(ValueError, match="row 1 holds -1"):
        LabelledTriples.from_labels(triples, [1, -1])
    with pytest.raises(TypeError, match="BoolTensor"):
        LabelledTriples(triples, torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="one entry per triple"):
        LabelledTriples(triples, torch.tensor([True]))


def test_ids_beyond_the_models_are_refused_and_scores_are_the_models_own() -> None:
    model = DistMult(num_entities=5, num_relations=2, dim=4, seed=0)
    triples = torch.tensor([[0, 1, 4], [3, 0, 2], [4, 1, 1]])
    with torch.no_grad():
        expected = model.score_hrt(triples)
    assert torch.equal(score_triples(model, triples, batch_size=2), expected)
    good = LabelledTriples(triples, torch.tensor([True, False, True]))
    for bad in ([[0, 2, 1]], [[5, 0, 1]]):  # a relation id 2 of 2 relations, an entity id 5 of 5
        with pytest.raises(ValueError, match="row 0"):
            classify_triples(model, good, LabelledTriples(torch.tensor(bad), torch.tensor([True])))


def test_a_model_that_scores_rows_only_is_scored_by_its_rows() -> None:
    inner = DistMult(num_entities=6, num_relations=2, dim=4, seed=1)

    class RowsOnly(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner, self.num_entities, self.num_relations = inner, 6, 2

        def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
            return self.inner.score_t(hr_batch)

        def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
            return self.inner.score_h(rt_batch)

    triples = torch.tensor([[0, 1, 5], [2, 0, 3]])
    with torch.no_grad():
        expected = inner.score_t(triples[:, :2])[torch.arange(2), triples[:, 2]]
    assert torch.equal(score_triples(RowsOnly(), triples), expected)


def write(path: Path, lines: list[str]) -> Path:
    text = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def test_wn11_layout_files_are_read_and_bad_labels_named(tmp_path: Path) -> None:
    entities, relations = {"a": 0, "b": 1, "c": 2}, {"r": 0, "s": 1}
    path = write(tmp_path / "test.txt.gz", ["a\tr\tb\t1", "a\ts\tc\t-1", "b\tr\tc\t1"])
    read = read_labelled_triples(path, entities, relations)
    assert read.triples.tolist() == [[0, 0, 1], [0, 1, 2], [1, 0, 2]] and read.labels.tolist() == [True, False, True]
    assert read.relation_labels == ("r", "s")
    zero = read_labelled_triples(write(tmp_path / "z.txt", ["a\tr\tb\t0", "a\tr\tc\t1"]), entities, relations)
    assert zero.labels.tolist() == [False, True]
    with pytest.warns(KnownNegativesWarning, match="1 of 1 negatives"):
        dropped = read_labelled_triples(path, entities, relations, known_triples=torch.tensor([[0, 1, 2]]),
                                        known_negatives="drop")  # fmt: skip
    assert dropped.known_negatives == 1 and len(dropped) == 2
    cases = {
        "b.txt": (["a\tr\tb\t2"], r"line 1: label '2'"),
        "m.txt": (["a\tr\tb\t-1", "a\tr\tc\t0"], "line 2: .*both -1 and 0"),
        "u.txt": (["a\tr\tb\t1", "a\tq\tb\t1"], "line 2: unknown relation 'q'"),
        "e.txt": (["x\tr\tb\t1"], "line 1: unknown head 'x'"),
        "f.txt": (["a\tr\tb"], "expected 4 fields"),
    }
    for name, (lines, message) in cases.items():
        with pytest.raises(ValueError, match=message):
            read_labelled_triples(write(tmp_path / name, lines), entities, relations)


def test_a_splits_negatives_are_read_beside_it_and_known_ones_counted(tmp_path: Path) -> None:
    write(tmp_path / "train.txt", ["a\tr\tb", "b\tr\tc", "c\ts\ta"])
    write(tmp_path / "valid.txt", ["a\tr\tc"])
    write(tmp_path / "test.txt", ["b\ts\ta"])
    write(tmp_path / "valid_negatives.txt.gz", ["c\tr\ta", "b\tr\tc"])  # the second is a train triple
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the folder's negatives are no split
        dataset = load_dataset(tmp_path)
    with pytest.warns(KnownNegativesWarning, match="1 of 2 negatives"):
        valid = load_split_with_negatives(dataset, "valid")
    assert valid.known_negatives == 1 and valid.labels.tolist() == [True, False, False]
    ids = dataset.entity_to_id
    assert valid.triples[1].tolist() == [ids["c"], dataset.relation_to_id["r"], ids["a"]]
    with pytest.warns(KnownNegativesWarning):
        assert len(load_split_with_negatives(dataset, "valid", known_negatives="drop")) == 2
    with pytest.raises(ValueError, match="split must be"):
        load_split_with_negatives(dataset, "dev")
    with pytest.raises(ValueError, match="no negatives file for test"):
        load_split_with_negatives(dataset, "test")
    write(tmp_path / "test_negatives.txt", ["a\tt\tb"])
    with pytest.raises(ValueError, match="line 1: unknown relation 't'"):
        load_split_with_negatives(dataset, "test")


# -- CoDEx-S: CoDEx's own protocol ------------------------------------------------------------------------------------

CODEX_S = shared_data_dir() / "codex-s" if shared_data_dir() is not None else None


def tc_py(
    valid_scores: torch.Tensor,
    valid_labels: torch.Tensor,
    valid_relations: torch.Tensor,
    test_scores: torch.Tensor,
    test_relations: torch.Tensor,
    num_relations: int,
) -> tuple[dict, torch.Tensor]:
    """CoDEx's scripts/tc.py as the issue describes it: per validation relation, the accuracy of every candidate
    threshold from an (n x n) comparison of the relation's scores, the lowest maximiser kept; a dict pre-filled with
    -inf for every relation (the global threshold computed but never looked up); test triples true at >=."""

    def get_threshold(scores: torch.Tensor, labels: torch.Tensor) -> float:
        predictions = (scores.view(-1, 1) >= scores.view(1, -1)).long().t()
        accuracies = (predictions == labels.view(-1)).float().sum(dim=1)
        return scores[accuracies.max() == accuracies].min().item()

    thresholds = {r: -float("inf") for r in range(num_relations)}
    for r in valid_relations.unique():
        mask = valid_relations == r
        thresholds[int(r)] = get_threshold(valid_scores[mask], valid_labels[mask].long())
    predictions = torch.zeros(test_scores.shape, dtype=torch.bool)
    for r in test_relations.unique():
        mask = test_relations == r
        predictions[mask] = test_scores[mask] >= thresholds[int(r)]
    return thresholds, predictions


@pytest.mark.slow
@pytest.mark.skipif(CODEX_S is None or not (CODEX_S / "valid_negatives.txt.gz").is_file(), reason="no CoDEx-S")
def test_codex_s_under_codexs_convention_equals_its_script() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = load_dataset(CODEX_S)
    valid, test = load_split_with_negatives(dataset, "valid"), load_split_with_negatives(dataset, "test")
    assert (len(valid), len(test), valid.known_negatives, test.known_negatives) == (3654, 3656, 0, 0)
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=32, seed=0)
    train_model(model, dataset.train, num_epochs=2, batch_size=1024, seed=0, use_tqdm=False, threads=2)
    with torch.no_grad():  # the scores as CoDEx's script takes them: the model's own triple scores
        valid_scores, test_scores = model.score_hrt(valid.triples), model.score_hrt(test.triples)
    thresholds, predictions = tc_py(valid_scores, valid.labels, valid.triples[:, 1], test_scores, test.triples[:, 1],
                                    dataset.num_relations)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        codex = classify_triples(model, valid, test, convention="codex")
    assert np.array_equal(codex.scores, test_scores.double().numpy())
    absent = set(test.triples[:, 1].tolist()) - set(valid.triples[:, 1].tolist())
    assert len(absent) == 1 and set(codex.fallback) == absent and codex.fallback_triples == 2
    assert codex.thresholds == {r: thresholds[r] for r in codex.thresholds}
    relation = absent.pop()
    assert codex.thresholds[relation] == -math.inf and codex.predictions[codex.relations == relation].all()
    assert np.array_equal(codex.predictions, predictions.numpy())
    y = test.labels.numpy()
    assert codex.get_metric("accuracy") == pytest.approx(accuracy_score(y, predictions.numpy()), abs=1e-12)
    assert codex.get_metric("f1") == pytest.approx(f1_score(y, predictions.numpy()), abs=1e-12)
    assert any(issubclass(w.category, ThresholdFallbackWarning) for w in caught)
    # the default: the relation absent from validation and the five with one class in validation take the global
    # threshold -- 6 relations, 23 test triples; every other prediction is CoDEx's
    with pytest.warns(ThresholdFallbackWarning, match=r"6 test relation\(s\).*\(23 test triples\)"):
        own = classify_triples(model, valid, test)
    assert own.fallback_triples == 23 and len(own.fallback) == 6
    in_fallback = np.isin(own.relations, list(own.fallback))
    assert np.array_equal(own.predictions[~in_fallback], codex.predictions[~in_fallback])
    changed = int((own.predictions != codex.predictions).sum())
    assert 0 < changed <= 23  # the count with this model is in docs/classification.md


@pytest.mark.cuda
def test_a_model_on_cuda_is_scored_on_its_device() -> None:
    generator = torch.Generator().manual_seed(0)
    triples = torch.stack([torch.randint(0, 50, (200,), generator=generator),
                           torch.randint(0, 4, (200,), generator=generator),
                           torch.randint(0, 50, (200,), generator=generator)], dim=1)  # fmt: skip
    labels = torch.rand(200, generator=generator) < 0.5
    valid, test = LabelledTriples(triples[:100], labels[:100]), LabelledTriples(triples[100:], labels[100:])
    model = DistMult(50, 4, dim=8, seed=0)
    on_cpu = score_triples(model, triples)
    model = model.cuda()
    on_gpu = score_triples(model, triples, batch_size=64)
    assert on_gpu.device.type == "cuda"
    torch.testing.assert_close(on_gpu.cpu(), on_cpu, rtol=1e-5, atol=1e-6)
    results = classify_triples(model, valid, test)
    assert np.array_equal(results.scores, on_gpu[100:].double().cpu().numpy())


def test_bad_metric_inputs_and_codex_with_f1_are_refused() -> None:
    from kgeval.variants.classification import average_precision, best_threshold, roc_auc

    scores, labels = np.array([0.1, float("nan"), 0.3]), np.array([True, False, True])
    for function in (roc_auc, average_precision, best_threshold):
        with pytest.raises(ValueError, match="NaN"):
            function(scores, labels)
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(np.array([1.0, 2.0]), np.array([True, True]))
    with pytest.raises(ValueError, match="a true label"):
        average_precision(np.array([1.0, 2.0]), np.array([False, False]))
    valid = LabelledTriples(torch.tensor([[0, 0, 1], [1, 0, 2]]), torch.tensor([True, False]))
    with pytest.raises(ValueError, match="'codex' fits accuracy"):
        classify_scores(valid, [1.0, 0.0], valid, [1.0, 0.0], convention="codex", objective="f1")
