"""The self-contained HTML report of a triple classification (:func:`classification_report_html`,
:func:`write_classification_report`), of either protocol: labelled triples
(:class:`~kgeval.variants.classification.TripleClassificationResults`) or PyKEEN's all pairs
(:class:`~kgeval.variants.classification.AllPairsResults`).

The page is built as ``kgeval.report`` builds the link-prediction report, with its style, its sortable tables and its
SVG axes: no network, no script needed to read it. The curves are exact: the ROC curve's vertices are the
(false positives, true positives) counts at every distinct score, a pair or triple called true at score >= it, and
the precision-recall curve is the step curve whose area is the average precision (scikit-learn's step rule); a
vertex that lies on the straight segment between its neighbours (a tie, a run of one class) is left out, which
changes no drawn line. Coordinates are printed to 1/10 of a pixel, as ``kgeval.report`` prints its paths, and a
vertex printed as the one before it is printed once (the all-pairs curves of CoDEx-S: 370 kB for the page, not the
2.3 MB of every vertex to 1/100 of a pixel). Every number printed carries ``data-key`` (the results' flat key:
``micro.accuracy``, ``relation.<label>.threshold``, ``both.roc_auc``, ``tail.pykeen.f1_score``, ...) and
``data-value`` (its ``repr``).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgeval._checks import check_writable_file
from kgeval._files import replace_atomically
from kgeval.report import (
    BOTTOM,
    HEIGHT,
    LEFT,
    PALETTE,
    RIGHT,
    SIDE_COLOURS,
    TOP,
    WIDTH,
    _e,
    _frame,
    _page,
    _scale,
    _x_tick,
    _y_ticks,
    nice_axis,
)
from kgeval.variants.classification.all_pairs import ALL_PAIRS_METRICS, AllPairsClassification, AllPairsResults
from kgeval.variants.classification.metrics import CLASSIFICATION_METRICS
from kgeval.variants.classification.pykeen_formulas import PYKEEN_METRICS, PYKEEN_QUIRKS
from kgeval.variants.classification.triples import TripleClassificationResults

__all__ = ["classification_report_html", "write_classification_report"]

#: the colour of each curve: the report's side colours, "both" and the labelled triples in its first model colour
CURVE_COLOURS = {**SIDE_COLOURS, "both": PALETTE[0], "test triples": PALETTE[0]}
#: a point of a curve: (x, y)
Point = tuple[float, float]


def classification_report_html(results: TripleClassificationResults | AllPairsResults, *,
                               title: str | None = None) -> str:  # fmt: skip
    """The report of a triple classification as one HTML document (a str): its ROC and precision-recall curves and
    its tables. The same results give the same page, byte for byte.

    Parameters
    ----------
    results : TripleClassificationResults or AllPairsResults
        Labelled triples (:func:`~kgeval.variants.classification.classify_triples`): the curves of the test
        triples' scores against their labels, the micro and macro metrics, and a table of every test relation (its
        threshold, test positives and negatives, fallback reason, metrics). All pairs
        (:func:`~kgeval.variants.classification.classify_all_pairs`): the curves of each side (head, tail, both)
        from its pair tally, a table of kgeval's metrics and one of the confusion counts per side with the threshold
        rule, and PyKEEN's 22 numbers folded.
    title : str, optional
        The page's heading and title (escaped); by default it names the protocol.

    Returns
    -------
    str
        A self-contained page: inline CSS and SVG, a few lines of script that only sort the tables.

    Raises
    ------
    TypeError
        For results of another kind.
    """
    if isinstance(results, TripleClassificationResults):
        title = title or f"Triple classification of {len(results.scores):,} labelled test triples"
        body = _labelled_sections(results)
    elif isinstance(results, AllPairsResults):
        title = title or "All-pairs triple classification (PyKEEN's protocol)"
        body = _all_pairs_sections(results)
    else:
        raise TypeError(f"expected TripleClassificationResults or AllPairsResults, got {type(results).__name__}")
    return _page(title, f"<h1>{_e(title)}</h1>\n{body}")


def write_classification_report(results: TripleClassificationResults | AllPairsResults,
                                path: str | os.PathLike[str], *, title: str | None = None) -> Path:  # fmt: skip
    """Write :func:`classification_report_html` to ``path`` as UTF-8, whole or not at all (a temporary file beside
    it, renamed over it: a failed write leaves the previous file).

    Parameters
    ----------
    results : TripleClassificationResults or AllPairsResults
    path : str or PathLike
        The file; its folder must exist.
    title : str, optional
        As for :func:`classification_report_html`.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    ValueError
        Before any work, where no file can be written at ``path`` (a folder, a missing folder).
    """
    path = Path(check_writable_file(path, "the report's path"))
    data = classification_report_html(results, title=title).encode("utf-8")
    replace_atomically(path, lambda handle: handle.write(data))
    return path


# -- labelled triples -------------------------------------------------------------------------------------------
def _labelled_sections(results: TripleClassificationResults) -> str:
    labels = np.asarray(results.labels, dtype=bool)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    comparison = "&gt;" if results.strict else "&gt;="
    fitted = (
        "no threshold fitted: the P highest-scored test triples are called true, P the true test triples "
        "(PyKEEN's top-P rule, fitted on the evaluated labels: optimistic)"
        if results.convention == "pykeen"
        else f"thresholds fitted on validation, objective {_e(results.objective)}"
    )
    summary = (
        f'<p class="note">{len(labels):,} labelled test triples ({positives:,} true, {negatives:,} false), '
        f"{len(results.per_relation):,} test relations. Convention {_e(results.convention)}: {fitted}; a triple is "
        f"called true when its score {comparison} its relation's threshold. Fallback: "
        f"{len(results.fallback):,} relations, {results.fallback_triples:,} test triples.</p>"
    )
    return "\n".join([summary, _labelled_curves(results, labels), _scope_table(results), _relation_table(results)])


def _labelled_curves(results: TripleClassificationResults, labels: np.ndarray) -> str:
    scores = np.asarray(results.scores, dtype=np.float64)
    if scores.size == 0 or labels.all() or not labels.any():
        why = "no test triple scores" if scores.size == 0 else "the test triples hold one class only"
        return f'<section id="curves"><h2>Curves</h2><p class="note">Not drawn: {why}.</p></section>'
    fp, tp = _counts_at_scores(scores, labels)
    roc = [("test triples", _roc_vertices(fp, tp))]
    pr = [("test triples", _precision_recall_steps(*_precision_recall_at_positives(fp, tp)))]
    auc, ap = results.micro["roc_auc"], results.micro["average_precision"]
    caption = f"all {len(scores):,} test triples: ROC-AUC {auc:.4f}, average precision {ap:.4f}"
    return _curve_section(roc, pr, caption)


def _scope_table(results: TripleClassificationResults) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name in CLASSIFICATION_METRICS)
    rows = []
    for scope, values in (("micro", results.micro), ("macro", results.macro)):
        cells = "".join(_number(values[name], f"{scope}.{name}") for name in CLASSIFICATION_METRICS)
        rows.append(f'<tr><td class="label">{scope}</td>{cells}</tr>')
    return (
        '<section id="metrics"><h2>Metrics</h2><table><thead><tr><th class="label">scope</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="note">micro: over all test triples; macro: the unweighted mean over the test relations where a '
        "metric is defined (a dash: undefined, e.g. a relation with one class only).</p></section>"
    )


def _relation_table(results: TripleClassificationResults) -> str:
    labels, relations = np.asarray(results.labels, dtype=bool), np.asarray(results.relations)
    head = "".join(f"<th>{_e(name)}</th>" for name in CLASSIFICATION_METRICS)
    rows = []
    for relation, values in results.per_relation.items():
        name = results.relation_name(relation)
        mine = relations == relation
        why = results.fallback.get(relation)
        cells = [
            f'<td class="label" title="relation id {int(relation)}">{_e(name)}</td>',
            _number(results.thresholds[relation], f"relation.{name}.threshold"),
            _count(int((labels & mine).sum()), f"relation.{name}.positives"),
            _count(int((~labels & mine).sum()), f"relation.{name}.negatives"),
            f'<td class="label">{_e(why)}</td>' if why else '<td class="label missing">\u2013</td>',
        ]
        cells += [_number(values[metric], f"relation.{name}.{metric}") for metric in CLASSIFICATION_METRICS]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="relations"><h2>Per relation</h2>'
        '<p class="note">Click a column header to sort (the table reads the same without JavaScript).</p>'
        '<table class="sortable" id="relation-table"><thead><tr><th class="label">relation</th><th>threshold</th>'
        f'<th>true</th><th>false</th><th class="label">fallback</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


# -- all pairs --------------------------------------------------------------------------------------------------
def _all_pairs_sections(results: AllPairsResults) -> str:
    sides = results.sides
    roc = [(side, _roc_vertices(*_tally_roc_counts(result))) for side, result in sides.items()]
    pr = [(side, _precision_recall_steps(*result.tally.precision_recall_points())) for side, result in sides.items()]
    both = sides.get("both")
    caption = (
        f"every (query, entity) pair of the evaluated queries: {both.num_pairs:,} pairs of both sides"
        if both is not None
        else "every (query, entity) pair of the evaluated queries"
    )
    return "\n".join([_rule_note(results), _curve_section(roc, pr, caption), _side_tables(sides),
                      _pykeen_section(sides)])  # fmt: skip


def _rule_note(results: AllPairsResults) -> str:
    rule = results.threshold_rule
    if rule == "top_p":
        how = (
            "PyKEEN's top-P rule: on each side the P highest-scored pairs are called true, P its positive pairs "
            "(fitted on the evaluated labels: the thresholded metrics are optimistic; where the P-th score ties, "
            "negatives are called true first and the confusion table's <i>tied</i> counts that tie's pairs)"
        )
    elif rule == "given":
        how = "a given threshold: a pair is called true at score &gt;= it"
    else:
        fitted = sum(result.num_pairs for side, result in results.validation.items() if side != "both")
        how = (
            f"{_e(rule)}: the lowest score maximising the objective over the {fitted:,} pairs of the validation "
            "triples' queries, applied to every side; a pair is called true at score &gt;= it"
        )
    return (
        f'<p class="note">Every (query, entity) pair of the evaluated queries is an instance: a known triple '
        f"positive, every other pair negative (pairs excluded count in neither class). Threshold: {how}. ROC-AUC "
        "and average precision are exact (ties count one half in the AUC).</p>"
    )


def _side_tables(sides: dict[str, AllPairsClassification]) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name in ALL_PAIRS_METRICS)
    metric_rows, count_rows = [], []
    for side, result in sides.items():
        values = result.metrics()
        cells = "".join(_number(values[name], f"{side}.{name}") for name in ALL_PAIRS_METRICS)
        metric_rows.append(f'<tr><td class="label">{side}</td>{cells}</tr>')
        c = result.confusion
        counts = [
            _number(result.threshold, f"{side}.threshold"),
            _count(result.num_pairs, f"{side}.num_pairs"),
            _count(result.tally.num_positives, f"{side}.num_positives"),
            _count(result.tally.num_negatives, f"{side}.num_negatives"),
            _count(result.excluded, f"{side}.excluded_pairs"),
        ]
        counts += [_count(getattr(c, name), f"{side}.confusion.{name}") for name in ("tp", "fp", "fn", "tn", "tied")]
        count_rows.append(f'<tr><td class="label">{side}</td>{"".join(counts)}</tr>')
    return (
        '<section id="metrics"><h2>Metrics</h2><table><thead><tr><th class="label">side</th>'
        f"{head}</tr></thead><tbody>{''.join(metric_rows)}</tbody></table>"
        '<p class="note">kgeval\'s metrics: each is what its name says (a dash: undefined, a zero '
        "denominator); both = the head and tail pairs pooled.</p>"
        '<h2 id="counts">Pairs and confusion counts</h2><table><thead><tr><th class="label">side</th><th>threshold'
        "</th><th>pairs</th><th>positive</th><th>negative</th><th>excluded</th><th>TP</th><th>FP</th><th>FN</th>"
        f"<th>TN</th><th>tied</th></tr></thead><tbody>{''.join(count_rows)}</tbody></table></section>"
    )


def _pykeen_section(sides: dict[str, AllPairsClassification]) -> str:
    values = {side: _pykeen_numbers(result) for side, result in sides.items()}
    head = "".join(f"<th>{_e(side)}</th>" for side in sides)
    rows = []
    for key in PYKEEN_METRICS:
        quirk = PYKEEN_QUIRKS.get(key, "")
        cells = "".join(_number(values[side][key], f"{side}.pykeen.{key}") for side in sides)
        rows.append(f'<tr><td class="label">{_e(key)}</td>{cells}<td class="label">{_e(quirk)}</td></tr>')
    return (
        '<section id="pykeen"><details><summary>PyKEEN\'s 22 numbers</summary>'
        "<p class=\"note\">PyKEEN's classification metrics as its code computes them (PyKEEN 1.11.1). PyKEEN's "
        "formulas have quirks: several of its metrics are not what their names say (it reads the confusion matrix "
        "transposed), as the last column states, and a zero denominator gives 0; docs/classification.md describes "
        "them. Compare with PyKEEN here, and read kgeval's metrics above for what the names mean.</p>"
        f'<table><thead><tr><th class="label">PyKEEN\'s key</th>{head}<th class="label">what PyKEEN computes, '
        f"where it differs from the name</th></tr></thead><tbody>{''.join(rows)}</tbody></table></details></section>"
    )


def _pykeen_numbers(result: AllPairsClassification) -> dict[str, float]:
    """:meth:`AllPairsClassification.pykeen_metrics` without PyKEEN's warning at each zero denominator (its 0 is
    shown; the page says so)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Division by zero. Result set to 0 according to policy.", UserWarning)
        return result.pykeen_metrics()


# -- curve points -----------------------------------------------------------------------------------------------
def _counts_at_scores(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(false positives, true positives) when the triples scoring at or above each distinct score are called true,
    from the highest score down: int64 arrays, one entry per distinct score."""
    order = np.argsort(-scores, kind="stable")
    ordered, hits = scores[order], labels[order]
    last = np.flatnonzero(np.r_[ordered[1:] != ordered[:-1], True])  # the last triple of each distinct score
    tp = np.cumsum(hits, dtype=np.int64)[last]
    return last + 1 - tp, tp


def _tally_roc_counts(result: AllPairsClassification) -> tuple[np.ndarray, np.ndarray]:
    """The tally's ROC points (:meth:`PairTally.roc_points`) as counts of false and true positives (exact: a rate
    times its denominator, rounded to the integer it was divided from)."""
    fpr, tpr = result.tally.roc_points()
    negatives, positives = result.tally.num_negatives, result.tally.num_positives
    return np.rint(fpr * negatives).astype(np.int64), np.rint(tpr * positives).astype(np.int64)


def _roc_vertices(fp: np.ndarray, tp: np.ndarray) -> list[Point]:
    """The ROC curve through (0, 0) and the counts' points, as rates: the vertices of its polyline, a point on the
    segment between its kept neighbours left out (collinearity decided on the integer counts: exact)."""
    negatives, positives = int(fp[-1]), int(tp[-1])
    kept: list[tuple[int, int]] = []
    for point in zip([0, *fp.tolist()], [0, *tp.tolist()], strict=True):
        if kept and kept[-1] == point:
            continue
        while len(kept) >= 2 and _collinear(kept[-2], kept[-1], point):
            kept.pop()
        kept.append(point)
    return [(x / negatives, y / positives) for x, y in kept]


def _collinear(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int]) -> bool:
    return (b[0] - a[0]) * (c[1] - a[1]) == (b[1] - a[1]) * (c[0] - a[0])


def _precision_recall_at_positives(fp: np.ndarray, tp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(recalls, precisions) at each distinct score where a positive scores, from the highest: the points whose
    step sum is the average precision."""
    hit = np.diff(tp, prepend=0) > 0
    tp_hit, fp_hit = tp[hit], fp[hit]
    return tp_hit / tp[-1], tp_hit / (tp_hit + fp_hit)


def _precision_recall_steps(recall: np.ndarray, precision: np.ndarray) -> list[Point]:
    """The step curve whose area is the average precision: precision p_n on the recalls (r_(n-1), r_n], r_0 = 0;
    where two steps have one precision, the vertices between them are left out."""
    r, p = recall.tolist(), precision.tolist()
    points = [(0.0, p[0])]
    for n in range(len(r)):
        if n + 1 < len(r) and p[n + 1] == p[n]:  # the same height on: no corner here
            continue
        points.append((r[n], p[n]))
        if n + 1 < len(r):
            points.append((r[n], p[n + 1]))
    return points


# -- SVG and cells ----------------------------------------------------------------------------------------------
def _curve_section(roc: Sequence[tuple[str, list[Point]]], pr: Sequence[tuple[str, list[Point]]],
                   caption: str) -> str:  # fmt: skip
    legend = " ".join(f'<span style="color:{CURVE_COLOURS[name]}">\u25a0 {_e(name)}</span>' for name, _ in roc)
    diagonal = (
        f'<line x1="{_x(0.0):.2f}" y1="{_y(0.0):.2f}" x2="{_x(1.0):.2f}" y2="{_y(1.0):.2f}" stroke="#bbb" '
        'stroke-dasharray="4 3"><title>chance</title></line>'
    )
    roc_svg = _curve_svg(roc, "roc", "false positive rate", "true positive rate", "ROC curve", diagonal)
    pr_svg = _curve_svg(pr, "precision-recall", "recall", "precision", "precision-recall curve")

    def figure(chart: str, svg: str, text: str) -> str:
        return (
            f'<figure data-chart="{chart}" style="width:{WIDTH}px">{svg}'
            f"<figcaption>{text} {legend}</figcaption></figure>"
        )

    roc_caption = f"ROC curve of {_e(caption)}; the dashed line is chance."
    pr_caption = (
        "Precision-recall curve: precision at the threshold where recall reaches each value, as steps whose area is "
        "the average precision."
    )
    return (
        '<section id="curves"><h2>Curves</h2><div class="charts">'
        + figure("roc", roc_svg, roc_caption)
        + figure("precision-recall", pr_svg, pr_caption)
        + "</div></section>"
    )


def _curve_svg(series: Sequence[tuple[str, list[Point]]], kind: str, x_label: str, y_label: str, label: str,
               under: str = "") -> str:  # fmt: skip
    """A [0, 1] x [0, 1] chart with a polyline per series (``data-curve`` the kind, ``data-series`` its name;
    coordinates to 1/10 of a pixel, a vertex printed as its predecessor left out: the same line)."""
    ticks, decimals = nice_axis(0.0, 1.0)
    x_ticks = "".join(_x_tick(_x(value), f"{value:.{decimals}f}") for value in ticks)
    lines = []
    for name, points in series:
        printed = [f"{_x(x):.1f},{_y(y):.1f}" for x, y in points]
        drawn = " ".join(text for i, text in enumerate(printed) if i == 0 or text != printed[i - 1])
        lines.append(
            f'<polyline data-curve="{kind}" data-series="{_e(name)}" points="{drawn}" fill="none" '
            f'stroke="{CURVE_COLOURS[name]}" stroke-width="1.8"><title>{_e(name)}</title></polyline>'
        )
    return _frame(label, under + "".join(lines), x_ticks, _y_ticks(0.0, 1.0), x_label, y_label)


def _x(value: float) -> float:
    return _scale(value, 0.0, 1.0, LEFT, WIDTH - RIGHT)


def _y(value: float) -> float:
    return _scale(value, 0.0, 1.0, HEIGHT - BOTTOM, TOP)


def _number(value: Any, key: str, digits: int = 4) -> str:
    """A cell printing a float (a dash for NaN) with its ``data-key`` and exact ``data-value``."""
    value = float(value)
    shown = "\u2013" if math.isnan(value) else f"{value:.{digits}f}"
    return f'<td data-key="{_e(key)}" data-value="{value!r}">{shown}</td>'


def _count(value: int, key: str) -> str:
    """A cell printing a count with its ``data-key`` and ``data-value``."""
    return f'<td data-key="{_e(key)}" data-value="{int(value)!r}">{int(value):,}</td>'
