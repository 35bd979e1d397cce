"""Tests of the stratified-curve plots (kgeval.analysis.stratified.plot_strat_curve, kgeval.analysis.plot)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.analysis.plot import draw_curve
from kgeval.analysis.stratified import plot_strat_curve, strat_curve
from tests.helpers.rank_records import random_popularity, random_records

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _labels(ax) -> list[str]:
    """Labels of the data lines (the β = 0 guide line has a private label)."""
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def _one(seed: int = 0) -> RankBasedMetricResults:
    return RankBasedMetricResults(data={}, records=random_records(seed))


def test_one_model_one_line_per_metric(tmp_path: Path) -> None:
    results = _one()
    path = tmp_path / "curve.png"
    figure = plot_strat_curve(results, random_popularity(0, results.records), path=str(path), title="one")
    (ax,) = figure.axes
    assert _labels(ax) == [
        "strat_hits_at_1",
        "strat_hits_at_3",
        "strat_hits_at_10",
        "strat_mrr",
    ]
    assert ax.get_xlabel() == r"$\beta_e$  ($\beta_r = 0$)"
    assert len(ax.get_lines()[0].get_xdata()) == 21
    assert path.stat().st_size > 1000
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_several_models_one_panel_per_metric(tmp_path: Path) -> None:
    first, second = _one(0), _one(2)
    popularity = [random_popularity(0, first.records), random_popularity(2, second.records)]
    path = tmp_path / "models.png"
    figure = plot_strat_curve(
        {"DistMult": first, "other": second},
        popularity,
        betas=[-1, -0.5, 0, 0.5, 1],
        vary="relation",
        metrics=["strat_mrr", "strat_hits_at_10"],
        path=str(path),
    )
    assert [ax.get_title() for ax in figure.axes] == ["strat_mrr", "strat_hits_at_10"]
    for ax in figure.axes:
        assert _labels(ax) == ["DistMult", "other"]
        assert ax.get_xlabel() == r"$\beta_r$  ($\beta_e = 0$)"
    curve = strat_curve({"DistMult": first, "other": second}, popularity, betas=[-1, -0.5, 0, 0.5, 1], vary="relation")
    other = curve[curve.model == "other"]
    assert list(figure.axes[0].get_lines()[1].get_ydata()) == other["strat_mrr"].tolist()
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_error_on_unknown_metric() -> None:
    results = _one()
    curve = strat_curve(results, random_popularity(0, results.records), betas=[0.0])
    message = "metrics must be a non-empty subset of ['strat_hits_at_1', 'strat_hits_at_3', 'strat_hits_at_10', "
    message += "'strat_mrr'], got ['mrr']"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        draw_curve(curve, metrics=["mrr"])


def test_error_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    results = _one()
    message = 'plotting needs matplotlib: pip install "kgeval[plot]" (or matplotlib)'
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        plot_strat_curve(results, random_popularity(0, results.records), betas=[0.0])


def test_rank_histogram_counts_every_rank_once() -> None:
    from kgeval.analysis.plot import rank_histogram

    rng = np.random.default_rng(0)
    ranks = np.concatenate([rng.integers(1, 5000, 300), rng.integers(1, 4, 50) + 0.5, [1.0, 4999.5]])
    counts, edges = rank_histogram(ranks)
    assert counts.sum() == ranks.size
    assert edges[0] == 1 and edges[-1] > ranks.max() and np.all(np.diff(edges) >= 1)
    assert np.all(edges == np.round(edges))
    for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True):  # independent count per bin
        assert count == np.sum((ranks >= low) & (ranks < high))


def test_results_draw_their_rank_distribution_and_per_relation_bars(tmp_path) -> None:
    from kgeval.datasets import load_shipped_dataset
    from kgeval.models import DistMult

    data = load_shipped_dataset("nations")
    results = RankBasedEvaluator().evaluate(DistMult(14, 55, dim=8, seed=0), **data.evaluation_kwargs("test"),
                                            use_tqdm=False)  # fmt: skip
    figure = results.plot_ranks(path=str(tmp_path / "ranks.png"), title="Nations")
    (ax,) = figure.axes
    steps = [patch for patch in ax.patches if patch.get_label().startswith(("head", "tail"))]
    assert [patch.get_data().values.sum() for patch in steps] == [201, 201]
    assert ax.get_xscale() == "log" and (tmp_path / "ranks.png").stat().st_size > 0
    bars = results.plot_per_relation("tail.mrr", top=5, relation_labels=data.relation_to_id)
    (ax,) = bars.axes
    frame = results.per_relation(keys="tail.mrr").sort_values("count", ascending=False, kind="stable").head(5)
    heights = sorted(patch.get_width() for patch in ax.patches)
    assert heights == pytest.approx(sorted(frame["tail.mrr"]))
    assert all("(" in label.get_text() for label in ax.get_yticklabels())  # label (count)
    with pytest.raises(ValueError, match="rank_type must be"):
        results.plot_ranks(rank_type="best")
