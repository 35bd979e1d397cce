"""Tests of the triple-classification report (:mod:`kgeval.variants.classification.report`): its curves are the
exact curves -- every polyline's vertices are those scikit-learn's ``roc_curve`` / ``precision_recall_curve`` give on
the same scores and labels, brought to one normal form here -- its numbers are the results' to the last bit, labels
are escaped, the page is the same on every call and needs no network, and the file is written whole or not at all."""

from __future__ import annotations

import html
import math
import os
import re
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval.report import BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH
from kgeval.variants.classification import (
    AllPairsResults,
    LabelledTriples,
    TripleClassificationResults,
    classify_scored_pairs,
    classify_scores,
)
from kgeval.variants.classification.pykeen_formulas import PYKEEN_METRICS
from kgeval.variants.classification.report import classification_report_html, write_classification_report

sklearn_metrics = pytest.importorskip("sklearn.metrics")  # the reference curves (installed with PyKEEN)

POLYLINE = re.compile(r'<polyline data-curve="([^"]+)" data-series="([^"]+)" points="([^"]*)"')
CELL = re.compile(r'data-key="([^"]+)" data-value="([^"]+)"')
RELATIONS = ("born_in", "<script>alert(1)</script>", 'a & "b"')


# -- inputs -----------------------------------------------------------------------------------------------------
def _labelled(seed: int, n: int = 60) -> TripleClassificationResults:
    """Labelled triples of three relations with integer scores (many ties), thresholds fitted on another draw."""
    rng = np.random.default_rng(seed)

    def draw() -> tuple[LabelledTriples, np.ndarray]:
        triples = torch.tensor(np.c_[rng.integers(0, 20, n), rng.integers(0, 3, n), rng.integers(0, 20, n)])
        labels = rng.random(n) < 0.4
        scores = _tied_scores(rng, labels)
        return LabelledTriples(triples, torch.tensor(labels), relation_labels=RELATIONS), scores

    (valid, valid_scores), (test, test_scores) = draw(), draw()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classify_scores(valid, valid_scores, test, test_scores)


def _pairs(seed: int) -> tuple[AllPairsResults, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """All-pairs results of scored blocks per side (integer scores: ties within and across sides), and each side's
    flat (scores, labels), "both" the two sides pooled."""
    rng = np.random.default_rng(seed)
    blocks: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    flat: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for side, shape in (("head", (6, 11)), ("tail", (9, 11))):
        positive = rng.random(shape) < 0.25
        scores = _tied_scores(rng, positive.reshape(-1)).reshape(shape).astype(np.float32)
        half = shape[0] // 2
        blocks[side] = [(torch.tensor(scores[:half]), torch.tensor(positive[:half])),
                        (torch.tensor(scores[half:]), torch.tensor(positive[half:]))]  # fmt: skip
        flat[side] = (scores.reshape(-1).astype(np.float64), positive.reshape(-1))
    flat["both"] = (np.concatenate([flat["head"][0], flat["tail"][0]]), np.concatenate([flat["head"][1],
                                                                                         flat["tail"][1]]))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the top-P rule is optimistic, and says so
        return classify_scored_pairs(blocks), flat


def _tied_scores(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """Integer scores, the true ones a little higher, with what moves the curves' corners: the top score shared by
    both classes (precision below 1 at the first step), a score only a negative has, many ties. Sets the first
    three labels (true, false, false)."""
    labels[:3] = (True, False, False)
    scores = rng.integers(0, 10, labels.shape[0]) + labels * rng.integers(0, 3, labels.shape[0])
    scores = np.minimum(scores, 10).astype(np.float64)
    scores[:3] = (10.0, 10.0, 9.5)
    return scores


# -- reading the page back --------------------------------------------------------------------------------------
def _polylines(page: str) -> dict[tuple[str, str], list[str]]:
    """(curve, series) -> the polyline's points as printed ("x,y" in pixels)."""
    return {(curve, html.unescape(series)): points.split() for curve, series, points in POLYLINE.findall(page)}


def _cells(page: str) -> dict[str, str]:
    """data-key -> data-value of every number printed (each key once)."""
    pairs = [(html.unescape(key), value) for key, value in CELL.findall(page)]
    cells = dict(pairs)
    assert len(cells) == len(pairs), "a data-key printed twice"
    return cells


def _same_number(printed: str, value: float) -> bool:
    return math.isnan(value) if printed == "nan" else printed == repr(float(value))


# -- the expected curves, from scikit-learn ---------------------------------------------------------------------
def _normal_form(points: list[tuple[Fraction, Fraction]]) -> list[tuple[Fraction, Fraction]]:
    """A path's vertices: repeated points once, and no point on the straight segment between its neighbours."""
    kept: list[tuple[Fraction, Fraction]] = []
    for point in points:
        if kept and kept[-1] == point:
            continue
        while len(kept) >= 2:
            (ax, ay), (bx, by) = kept[-2], kept[-1]
            if (bx - ax) * (point[1] - ay) != (by - ay) * (point[0] - ax):
                break
            kept.pop()
        kept.append(point)
    return kept


def _expected_roc(scores: np.ndarray, labels: np.ndarray) -> list[tuple[Fraction, Fraction]]:
    fpr, tpr, _ = sklearn_metrics.roc_curve(labels, scores, drop_intermediate=False)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    counts = [(Fraction(round(f * negatives), negatives), Fraction(round(t * positives), positives))
              for f, t in zip(fpr, tpr, strict=True)]  # fmt: skip
    return _normal_form(counts)


def _expected_precision_recall(scores: np.ndarray, labels: np.ndarray) -> list[tuple[Fraction, Fraction]]:
    """The step curve of precision over recall whose area is scikit-learn's average precision: at each recall
    reached, the precision of the highest threshold reaching it; the steps from recall 0."""
    precision, recall, _ = sklearn_metrics.precision_recall_curve(labels, scores)
    best: dict[float, float] = {}
    for p, r in zip(precision, recall, strict=True):
        if r > 0:
            best[float(r)] = max(best.get(float(r), -1.0), float(p))
    steps = sorted(best.items())
    area = sum((r - before) * p for (r, p), before in zip(steps, [0.0] + [r for r, _ in steps[:-1]], strict=True))
    assert area == pytest.approx(sklearn_metrics.average_precision_score(labels, scores), abs=1e-12)
    path = [(Fraction(0), Fraction(steps[0][1]))]
    for index, (r, p) in enumerate(steps):
        path.append((Fraction(r), Fraction(p)))
        if index + 1 < len(steps):
            path.append((Fraction(r), Fraction(steps[index + 1][1])))
    return _normal_form(path)


def _printed(points: list[tuple[Fraction, Fraction]]) -> list[str]:
    """The chart's [0, 1] x [0, 1] points in pixels as the report prints them (to 1/10 of a pixel), a point printed
    as the one before it left out."""
    printed: list[str] = []
    for x, y in points:
        text = (
            f"{LEFT + float(x) * (WIDTH - RIGHT - LEFT):.1f},{HEIGHT - BOTTOM + float(y) * (TOP - HEIGHT + BOTTOM):.1f}"
        )
        if not printed or printed[-1] != text:
            printed.append(text)
    return printed


def _assert_drawn(drawn: list[str], expected: list[tuple[Fraction, Fraction]]) -> None:
    """The polyline is the expected vertices, in order, as printed."""
    assert drawn == _printed(expected)


# -- tests --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_labelled_curves_are_sklearns(seed: int) -> None:
    results = _labelled(seed)
    page = classification_report_html(results)
    curves = _polylines(page)
    assert set(curves) == {("roc", "test triples"), ("precision-recall", "test triples")}
    scores, labels = results.scores, results.labels
    expected_roc = _expected_roc(scores, labels)
    assert len(expected_roc) <= len(np.unique(scores)) + 1
    _assert_drawn(curves[("roc", "test triples")], expected_roc)
    _assert_drawn(curves[("precision-recall", "test triples")], _expected_precision_recall(scores, labels))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_all_pairs_curves_are_sklearns_on_every_side(seed: int) -> None:
    """Each side's curves come from its pair tally; "both" pools the head and tail pairs."""
    results, flat = _pairs(seed)
    curves = _polylines(classification_report_html(results))
    assert set(curves) == {(curve, side) for curve in ("roc", "precision-recall") for side in ("head", "tail", "both")}
    for side, (scores, labels) in flat.items():
        assert results.sides[side].tally.num_pairs == len(scores)
        _assert_drawn(curves[("roc", side)], _expected_roc(scores, labels))
        _assert_drawn(curves[("precision-recall", side)], _expected_precision_recall(scores, labels))


def test_a_curve_with_no_tie_keeps_every_vertex() -> None:
    """Distinct scores alternating between the classes: every point of scikit-learn's curve is a corner."""
    scores = np.arange(10, dtype=np.float64)
    labels = np.array([True, False] * 5)
    triples = torch.tensor([[0, 0, 1]] * 10)
    test = LabelledTriples(triples, torch.tensor(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = classify_scores(test, scores, test, scores)
    curves = _polylines(classification_report_html(results))
    fpr, _tpr, _ = sklearn_metrics.roc_curve(labels, scores, drop_intermediate=False)
    assert len(curves[("roc", "test triples")]) == len(fpr) == 11
    _assert_drawn(curves[("roc", "test triples")], _expected_roc(scores, labels))


def test_a_long_curve_prints_each_pixel_point_once() -> None:
    """20,000 distinct scores: far more vertices than tenths of a pixel; the polyline holds them as printed, each
    printed point once (a vertex printed as its predecessor draws nothing more), the whole curve still there."""
    rng = np.random.default_rng(7)
    scores = rng.normal(size=20_000)
    labels = rng.random(20_000) < scores.clip(-2, 2) / 4 + 0.5
    test = LabelledTriples(torch.zeros((20_000, 3), dtype=torch.long), torch.tensor(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = classify_scores(test, scores, test, scores)
    curves = _polylines(classification_report_html(results))
    expected = _expected_roc(scores, labels)
    drawn = curves[("roc", "test triples")]
    _assert_drawn(drawn, expected)
    assert len(drawn) < len(expected) and drawn[0] == _printed([(Fraction(0), Fraction(0))])[0]
    assert drawn[-1] == _printed([(Fraction(1), Fraction(1))])[0]
    _assert_drawn(curves[("precision-recall", "test triples")], _expected_precision_recall(scores, labels))


def test_points_on_one_straight_segment_are_left_out() -> None:
    """Scores 3, 3, 2, 2, 1 with labels (T, F, T, F, T): the ROC points (0, 0), (1, 1), (2, 2) in counts are one
    segment, drawn by its two ends; the precision-recall steps 1/2, 1/2 are one step."""
    scores = np.array([3.0, 3.0, 2.0, 2.0, 1.0])
    labels = np.array([True, False, True, False, True])
    test = LabelledTriples(torch.tensor([[0, 0, 1]] * 5), torch.tensor(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = classify_scores(test, scores, test, scores)
    curves = _polylines(classification_report_html(results))
    _assert_drawn(curves[("roc", "test triples")], [(Fraction(0), Fraction(0)), (Fraction(1), Fraction(2, 3)),
                                                     (Fraction(1), Fraction(1))])  # fmt: skip
    half, three_fifths = Fraction(1, 2), Fraction(3, 5)
    _assert_drawn(curves[("precision-recall", "test triples")], [(Fraction(0), half), (Fraction(2, 3), half),
                                                                 (Fraction(2, 3), three_fifths),
                                                                 (Fraction(1), three_fifths)])  # fmt: skip


def test_labelled_numbers_are_the_results() -> None:
    results = _labelled(0)
    cells = _cells(classification_report_html(results))
    flat = results.to_flat_dict()
    for key, value in flat.items():
        assert _same_number(cells[key], value), key
    for name, values in results.to_dict()["per_relation"].items():
        assert _same_number(cells[f"relation.{name}.threshold"], values["threshold"])
        assert cells[f"relation.{name}.positives"] == repr(values["positives"])
        assert cells[f"relation.{name}.negatives"] == repr(values["negatives"])
    assert set(cells) == set(flat) | {f"relation.{name}.{column}" for name in RELATIONS
                                      for column in ("threshold", "positives", "negatives")}  # fmt: skip


def test_all_pairs_numbers_are_the_results() -> None:
    results, _flat = _pairs(3)
    page = classification_report_html(results)
    cells = _cells(page)
    for side, result in results.sides.items():
        for name, value in result.metrics().items():
            assert _same_number(cells[f"{side}.{name}"], value), (side, name)
        pykeen = result.pykeen_metrics()
        assert list(pykeen) == list(PYKEEN_METRICS)
        for key, value in pykeen.items():
            assert _same_number(cells[f"{side}.pykeen.{key}"], value), (side, key)
        confusion = result.confusion
        for name in ("tp", "fp", "fn", "tn", "tied"):
            assert cells[f"{side}.confusion.{name}"] == repr(getattr(confusion, name))
        assert cells[f"{side}.num_pairs"] == repr(result.num_pairs)
        assert cells[f"{side}.threshold"] == "nan"  # the top-P rule has no threshold
    details = page[page.index("<details>") : page.index("</details>")]
    assert "PyKEEN's 22 numbers" in details and "quirks" in details and "docs/classification.md" in details
    assert details.count(".pykeen.") == 22 * 3
    assert "top-P rule" in page


def test_a_fitted_or_given_threshold_is_shown() -> None:
    _results, flat = _pairs(4)
    blocks = {side: [(torch.tensor(flat[side][0].reshape(1, -1)), torch.tensor(flat[side][1].reshape(1, -1)))]
              for side in ("head", "tail")}  # fmt: skip
    results = classify_scored_pairs(blocks, threshold=5.0)
    page = classification_report_html(results)
    assert _cells(page)["both.threshold"] == "5.0"
    assert _cells(page)["head.confusion.tp"] == repr(int(((flat["head"][0] >= 5) & flat["head"][1]).sum()))
    assert "a given threshold" in page


def test_labels_and_the_title_are_escaped() -> None:
    results = _labelled(0)
    page = classification_report_html(results, title='<img src=x onerror="alert(1)">')
    assert "<script>alert" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a &amp; &quot;b&quot;" in page
    assert "<title>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</title>" in page
    pairs_page = classification_report_html(_pairs(0)[0], title="<b>pairs</b>")
    assert "<b>pairs</b>" not in pairs_page and "<h1>&lt;b&gt;pairs&lt;/b&gt;</h1>" in pairs_page


@pytest.mark.parametrize("kind", ["labelled", "all pairs"])
def test_the_page_is_self_contained_and_the_same_every_time(kind: str) -> None:
    results = _labelled(5) if kind == "labelled" else _pairs(5)[0]
    page = classification_report_html(results)
    assert page == classification_report_html(results)
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    for needle in ("http://", "https://", "src=", "href=", "@import"):
        assert needle not in page, needle
    assert page.count('<figure data-chart="roc"') == 1 and page.count('<figure data-chart="precision-recall"') == 1
    assert ('id="relation-table"' in page) == (kind == "labelled")
    assert ("<details>" in page) == (kind == "all pairs")


def test_default_titles_name_the_protocol() -> None:
    assert "<h1>Triple classification of 60 labelled test triples</h1>" in classification_report_html(_labelled(0))
    assert "<h1>All-pairs triple classification (PyKEEN&#x27;s protocol)</h1>" in classification_report_html(
        _pairs(0)[0]
    )


def test_one_class_only_draws_no_curve() -> None:
    triples = torch.tensor([[0, 0, 1], [1, 0, 2], [2, 0, 3]])
    valid = LabelledTriples(triples, torch.tensor([True, False, True]))
    test = LabelledTriples(triples, torch.tensor([True, True, True]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = classify_scores(valid, [1.0, 0.0, 2.0], test, [1.0, 0.5, 2.0])
    page = classification_report_html(results)
    assert "Not drawn: the test triples hold one class only." in page and "<polyline" not in page


def test_other_results_are_refused() -> None:
    with pytest.raises(TypeError, match="expected TripleClassificationResults or AllPairsResults, got dict"):
        classification_report_html({})  # type: ignore[arg-type]


def test_the_file_is_written_whole(tmp_path: Path) -> None:
    results = _labelled(0)
    path = tmp_path / "classification.html"
    assert write_classification_report(results, path, title="t") == path
    assert path.read_text(encoding="utf-8") == classification_report_html(results, title="t")
    written = write_classification_report(_pairs(0)[0], str(path))  # replaced
    assert written == path and "All-pairs" in path.read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file beside it


def test_a_failed_write_leaves_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "classification.html"
    path.write_text("before", encoding="utf-8")

    def fail(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_classification_report(_labelled(0), path)
    assert path.read_text(encoding="utf-8") == "before"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_path_that_cannot_be_written_is_refused_first(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the report's path .* is a folder; give a file name"):
        write_classification_report(_labelled(0), tmp_path)
    with pytest.raises(ValueError, match="cannot write there, the folder .* does not exist"):
        write_classification_report(_labelled(0), tmp_path / "missing" / "report.html")
