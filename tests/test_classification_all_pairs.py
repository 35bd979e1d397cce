"""PyKEEN's all-pairs classification protocol (kgeval.variants.classification.all_pairs), checked against brute
force: every (query, entity) pair scored by the model's own ``score_t`` / ``score_h`` into a dense array, labelled
from the known triples, and handed to scikit-learn; PyKEEN's formulas checked against PyKEEN's own metric classes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from kgeval._engine.memory_meter import peak_call_bytes
from kgeval.exceptions import OptimisticThresholdWarning
from kgeval.models import DistMult
from kgeval.variants import best_threshold, top_p_predictions
from kgeval.variants.classification import classify_all_pairs
from kgeval.variants.classification.pair_counts import Confusion, PairTally, TallyCounter
from kgeval.variants.classification.pykeen_formulas import PYKEEN_METRICS, pykeen_metrics

NUM_ENTITIES, NUM_RELATIONS = 23, 3


def tie_heavy_model(seed: int = 0) -> DistMult:
    """A DistMult whose embeddings are -1, 0 or 1: scores are small integers, ties everywhere."""
    model = DistMult(NUM_ENTITIES, NUM_RELATIONS, dim=3, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for table in (model.entity_embeddings.weight, model.relation_embeddings.weight):
            table.copy_(torch.randint(-1, 2, table.shape, generator=generator).float())
    return model


def random_triples(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, NUM_ENTITIES, (n,), generator=generator),
                        torch.randint(0, NUM_RELATIONS, (n,), generator=generator),
                        torch.randint(0, NUM_ENTITIES, (n,), generator=generator)], dim=1)  # fmt: skip


def dense_pairs(model, triples, known, exclude, side):
    """(scores, labels) of every pair of the side's distinct queries, from the model's own score_t / score_h;
    excluded pairs dropped."""
    positives = {tuple(t) for t in torch.cat([triples, *known]).tolist()}
    excluded = {tuple(t) for t in torch.cat(exclude).tolist()} if exclude else set()
    columns = [0, 1] if side == "tail" else [1, 2]
    queries = torch.unique(triples[:, columns], dim=0)
    with torch.no_grad():
        scores = (model.score_t if side == "tail" else model.score_h)(queries).numpy()
    values, labels = [], []
    for row, query in enumerate(queries.tolist()):
        for entity in range(NUM_ENTITIES):
            triple = (query[0], query[1], entity) if side == "tail" else (entity, query[0], query[1])
            if triple in excluded:
                continue
            values.append(scores[row, entity])
            labels.append(triple in positives)
    return np.array(values, dtype=np.float64), np.array(labels)


def both(model, triples, known, exclude):
    head = dense_pairs(model, triples, known, exclude, "head")
    tail = dense_pairs(model, triples, known, exclude, "tail")
    return {
        "head": head,
        "tail": tail,
        "both": (np.concatenate([head[0], tail[0]]), np.concatenate([head[1], tail[1]])),
    }


@pytest.mark.parametrize(("batch_size", "slice_size"), [(1, 1), (3, 4), (5, None), (None, 7), (None, None)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_and_ap_equal_sklearn_on_tie_heavy_scores(batch_size, slice_size, seed):
    model = tie_heavy_model(seed)
    triples, known = random_triples(12, seed), [random_triples(30, seed + 100)]
    exclude = [random_triples(15, seed + 200)] if seed else []
    results = classify_all_pairs(model, triples, known=known, exclude=exclude, threshold="top_p",
                                 batch_size=batch_size, slice_size=slice_size)  # fmt: skip
    for side, (scores, labels) in both(model, triples, known, exclude).items():
        got = results.sides[side]
        assert got.num_pairs == scores.size and got.tally.num_positives == int(labels.sum())
        assert abs(got.metrics()["roc_auc"] - roc_auc_score(labels, scores)) < 1e-12
        assert abs(got.metrics()["average_precision"] - average_precision_score(labels, scores)) < 1e-12
        predicted = top_p_predictions(scores, labels)
        tp = int((predicted & labels).sum())
        if got.confusion.tied:  # negatives first among the P-th score's tie: at most NumPy's
            assert got.confusion.tp <= tp
        else:
            assert got.confusion.tp == tp and got.confusion.fp == int((predicted & ~labels).sum())
    assert sum(results.sides[side].excluded for side in ("head", "tail")) == results.sides["both"].excluded


@pytest.mark.parametrize("objective", ["accuracy", "f1"])
def test_validation_threshold_is_the_dense_sweep_applied_to_test(objective):
    model = tie_heavy_model(3)
    triples, validation, known = random_triples(10, 3), random_triples(10, 4), [random_triples(40, 5)]
    results = classify_all_pairs(model, triples, known=known, validation=validation, objective=objective,
                                 batch_size=4, slice_size=5)  # fmt: skip
    valid_scores, valid_labels = both(model, validation, known, [])["both"]
    threshold = best_threshold(valid_scores, valid_labels, objective)
    assert results.threshold_rule == f"validation ({objective})"
    for side, (scores, labels) in both(model, triples, known, []).items():
        got = results.sides[side]
        assert got.threshold == threshold
        predicted = scores >= threshold
        expected = Confusion(int((predicted & labels).sum()), int((predicted & ~labels).sum()),
                             int((~predicted & labels).sum()), int((~predicted & ~labels).sum()))  # fmt: skip
        assert got.confusion == expected


def test_a_given_threshold_and_the_optimistic_default():
    model = tie_heavy_model(4)
    triples = random_triples(8, 6)
    scores, labels = both(model, triples, [], [])["both"]
    got = classify_all_pairs(model, triples, threshold=0.5).sides["both"].confusion
    assert (got.tp, got.fp) == (int(((scores >= 0.5) & labels).sum()), int(((scores >= 0.5) & ~labels).sum()))
    with pytest.warns(OptimisticThresholdWarning):
        assert classify_all_pairs(model, triples).threshold_rule == "top_p"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        classify_all_pairs(model, triples, threshold="top_p")  # asked for by name: no warning


def test_tally_against_sklearn_and_the_sweep_on_random_tied_scores():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(2, 300))
        scores = rng.integers(0, int(rng.integers(1, 30)), n).astype(np.float32) / 4
        labels = rng.random(n) < rng.random()
        if labels.all() or not labels.any():
            continue
        positives, negatives = torch.tensor(scores[labels]), torch.tensor(scores[~labels])
        counter = TallyCounter(torch.unique(torch.cat([positives, torch.tensor([scores.max()])])), float(scores.max()))
        for chunk in torch.split(positives, 7):
            counter.count(chunk, positive=True)
        for chunk in torch.split(negatives, 5):
            counter.count(chunk, positive=False)
        tally = counter.tally()
        assert abs(tally.roc_auc() - roc_auc_score(labels, scores)) < 1e-12
        assert abs(tally.average_precision() - average_precision_score(labels, scores)) < 1e-12
        for objective in ("accuracy", "f1"):
            assert tally.best_threshold(objective) == best_threshold(scores, labels, objective)
        checked += 1
    assert checked > 200


def test_a_positive_scored_differently_in_the_second_pass_is_refused():
    counter = TallyCounter(torch.tensor([0.0, 1.0]), 1.0)
    counter.count(torch.tensor([0.5]), positive=True)
    with pytest.raises(ValueError, match="scores changed"):
        counter.tally()


def test_pykeen_formulas_equal_pykeens_own_metric_classes():
    from pykeen.metrics.classification import classification_metric_resolver

    rng = np.random.default_rng(1)
    cases = [Confusion(3, 5, 7, 11), Confusion(10, 0, 4, 9), Confusion(5_000, 20_000, 9_000, 7_000_000),
             Confusion(60_000, 40_000, 50_000, 300_000_000)]  # fmt: skip  # the last overflows its MCC's int64
    for case in cases:
        matrix = np.array([[case.tn, case.fp], [case.fn, case.tp]], dtype=np.int64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = pykeen_metrics(case, 0.5, 0.25, case.total)
            for key in PYKEEN_METRICS:
                metric = classification_metric_resolver.make(key.replace("_", ""))
                if hasattr(metric, "extract_from_confusion_matrix"):
                    expected = metric.extract_from_confusion_matrix(matrix)
                    assert ours[key] == expected or (np.isnan(ours[key]) and np.isnan(expected)), key
    # and on arrays, through PyKEEN's binarisation (no tie at the P-th score: continuous scores)
    scores, labels = rng.random(500), rng.random(500) < 0.2
    tally_counter = TallyCounter(torch.unique(torch.tensor(np.concatenate([scores[labels], [scores.max()]]))),
                                 float(scores.max()))  # fmt: skip
    tally_counter.count(torch.tensor(scores[labels]), positive=True)
    tally_counter.count(torch.tensor(scores[~labels]), positive=False)
    tally = tally_counter.tally()
    ours = pykeen_metrics(tally.top_p_confusion(), tally.roc_auc(), tally.average_precision(), tally.num_pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in PYKEEN_METRICS:
            metric = classification_metric_resolver.make(key.replace("_", ""))
            assert ours[key] == pytest.approx(metric(labels.astype(int), scores), rel=1e-12, abs=1e-12), key


def test_peak_memory_does_not_grow_with_queries_times_entities():
    """Ten times the queries: the dense (queries x entities) arrays grow by 14 MB; the streaming computation's peak
    (the tensors its operations hold, kgeval._engine.memory_meter) may grow by what grows with the queries (their
    positives, the filter index), not by a share of that."""
    num_entities = 2_000
    model = DistMult(num_entities, NUM_RELATIONS, dim=8, seed=0)
    generator = torch.Generator().manual_seed(9)
    peaks, dense = [], []
    for n in (100, 1_000):
        triples = torch.stack([torch.randint(0, num_entities, (n,), generator=generator),
                               torch.randint(0, NUM_RELATIONS, (n,), generator=generator),
                               torch.randint(0, num_entities, (n,), generator=generator)], dim=1)  # fmt: skip
        run = lambda triples=triples: classify_all_pairs(model, triples, threshold="top_p", batch_size=16,  # noqa: E731
                                                         slice_size=100)  # fmt: skip
        peaks.append(peak_call_bytes(run, torch.device("cpu")))
        queries = sum(torch.unique(triples[:, c], dim=0).shape[0] for c in ([0, 1], [1, 2]))
        dense.append(queries * num_entities * 4)  # one float32 score per pair, no mask
    assert peaks[1] - peaks[0] < 0.05 * (dense[1] - dense[0])


def test_bad_inputs_are_refused():
    model = tie_heavy_model(0)
    triples = random_triples(5, 0)
    with pytest.raises(ValueError, match="validation"):
        classify_all_pairs(model, triples, threshold="validation")
    with pytest.raises(ValueError, match="objective"):
        classify_all_pairs(model, triples, objective="mcc", threshold="top_p")
    with pytest.raises(ValueError, match="threshold"):
        classify_all_pairs(model, triples, threshold="best")
    with pytest.raises(ValueError):
        classify_all_pairs(model, torch.tensor([[0, NUM_RELATIONS, 1]]), threshold="top_p")
    everything = torch.cartesian_prod(
        torch.arange(NUM_ENTITIES), torch.arange(NUM_RELATIONS), torch.arange(NUM_ENTITIES)
    )
    with pytest.raises(ValueError, match="both classes"):
        classify_all_pairs(model, triples, known=everything, threshold="top_p")


def test_nan_scores_name_the_query():
    model = tie_heavy_model(0)
    with torch.no_grad():
        model.entity_embeddings.weight[5] = torch.nan
    with pytest.raises(ValueError, match="NaN"):
        classify_all_pairs(model, random_triples(5, 1), threshold="top_p", fast_path=False)


def test_tally_rejects_a_threshold_that_is_not_a_mark():
    tally = PairTally(np.array([0.0, 1.0]), np.array([1, 1]), np.array([0, 0]), np.array([1, 0, 0]), 1.0)
    with pytest.raises(ValueError, match="not a mark"):
        tally.confusion_at(0.5)


def test_curve_points_are_sklearns_curves():
    from sklearn.metrics import auc, precision_recall_curve, roc_curve

    rng = np.random.default_rng(5)
    scores = rng.integers(0, 12, 400).astype(np.float32)
    labels = rng.random(400) < 0.3
    counter = TallyCounter(torch.unique(torch.tensor(np.concatenate([scores[labels], [scores.max()]]))),
                           float(scores.max()))  # fmt: skip
    counter.count(torch.tensor(scores[labels]), positive=True)
    counter.count(torch.tensor(scores[~labels]), positive=False)
    tally = counter.tally()
    fpr, tpr = tally.roc_points()
    assert auc(fpr, tpr) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    expected_fpr, expected_tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    for x, y in zip(expected_fpr, expected_tpr, strict=True):  # every sklearn point lies on the drawn curve
        assert np.any(np.isclose(fpr, x) & np.isclose(tpr, y))
    recall, precision = tally.precision_recall_points()
    assert float(np.sum(np.diff(np.concatenate([[0], recall])) * precision)) == pytest.approx(
        average_precision_score(labels, scores), abs=1e-12
    )
    expected_precision, expected_recall, _ = precision_recall_curve(labels, scores)
    for r, p in zip(recall, precision, strict=True):
        assert np.any(np.isclose(expected_recall, r) & np.isclose(expected_precision, p))
