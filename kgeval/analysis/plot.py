"""Drawing with matplotlib: stratified-metric curves (:func:`kgeval.analysis.stratified.plot_strat_curve`), the
distribution of ranks per side (:func:`draw_rank_histogram`) and a per-relation metric (:func:`draw_per_relation`).

matplotlib is the optional extra ``plot`` (``pip install "kgeval[plot]"``); it is imported only when a curve is
drawn. Figures are built with :class:`matplotlib.figure.Figure` directly, so drawing needs no GUI backend and
leaves pyplot's global state alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw_curve", "draw_per_relation", "draw_rank_histogram", "rank_histogram"]

#: the side of each side code of the rank records
_SIDE_NAMES: dict[int, str] = {0: "head", 1: "tail", 2: "relation"}

#: Axis label of β per varied item.
_BETA_LABELS: dict[str, str] = {
    "entity": r"$\beta_e$  ($\beta_r = 0$)",
    "relation": r"$\beta_r$  ($\beta_e = 0$)",
}


def draw_curve(
    curve: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    path: str | None = None,
    title: str | None = None,
) -> Figure:
    """Draw a :func:`kgeval.analysis.stratified.strat_curve` table.

    Parameters
    ----------
    curve : DataFrame
        Output of ``strat_curve``: columns ``beta_e``, ``beta_r``, the metric keys, and ``model`` when it
        holds several models; ``curve.attrs["vary"]`` is ``"entity"`` or ``"relation"``.
    metrics : sequence of str, optional
        The metric columns to draw; default every ``strat_*`` column.
    path : str, optional
        Also save the figure there (format from the suffix, e.g. ``.png``).
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        One panel with a line per metric, or, with a ``model`` column, one panel per metric with a line per
        model.
    """
    figure_class = _figure_class()
    available = [column for column in curve.columns if column.startswith("strat_")]
    metrics = list(available if metrics is None else metrics)
    unknown = [name for name in metrics if name not in available]
    if unknown or not metrics:
        raise ValueError(f"metrics must be a non-empty subset of {available}, got {metrics}")
    vary = curve.attrs.get("vary", "entity")
    beta = "beta_e" if vary == "entity" else "beta_r"
    panels = metrics if "model" in curve.columns else [None]
    figure = figure_class(figsize=(4.2 * len(panels) + 0.8, 3.6), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, metric in zip(axes, panels, strict=True):
        if metric is None:  # one model: a line per metric
            for name in metrics:
                ax.plot(curve[beta], curve[name], marker="o", markersize=3, label=name)
            ax.set_ylabel("value")
        else:  # several models: a line per model
            for model, rows in curve.groupby("model", sort=False):
                ax.plot(rows[beta], rows[metric], marker="o", markersize=3, label=str(model))
            ax.set_title(metric)
        ax.set_xlabel(_BETA_LABELS.get(vary, beta))
        ax.set_xlim(-1.05, 1.05)
        ax.axvline(0.0, color="0.8", linewidth=0.8, zorder=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    return _finished(figure, title, path)


def rank_histogram(ranks: np.ndarray, bins_per_decade: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of ranks (>= 1) over log-spaced bins with integer edges from 1 to past the largest rank
    (the low bins one rank wide, none empty for want of an integer); counts sum to the number of ranks (a
    realistic rank of k + 0.5 falls in the bin holding it)."""
    top = float(np.floor(max(float(np.max(ranks)), 1.0))) + 1.0
    bins = max(1, int(np.ceil(np.log10(top) * bins_per_decade)))
    edges = np.unique(np.round(np.geomspace(1.0, top, bins + 1)))
    counts, _ = np.histogram(ranks, bins=edges)
    return counts, edges


def draw_rank_histogram(
    records: Any, rank_type: str = "realistic", path: str | None = None, title: str | None = None
) -> Figure:
    """The distribution of ranks per side (step histograms over log-spaced bins, log rank axis).

    Parameters
    ----------
    records : RankRecords
        The per-task records of an evaluation (``results.records``).
    rank_type : {"realistic", "optimistic", "pessimistic"}, default="realistic"
    path : str, optional
        Also save the figure there (format from the suffix).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        One panel, a line per side; its y axis counts tasks.
    """
    if rank_type not in ("realistic", "optimistic", "pessimistic"):
        raise ValueError(f"rank_type must be 'realistic', 'optimistic' or 'pessimistic', got {rank_type!r}")
    figure = _figure_class()(figsize=(5.6, 3.6), layout="constrained")
    ax = figure.subplots()
    sides = np.asarray(records["side"])
    optimistic, pessimistic = np.asarray(records["optimistic"]), np.asarray(records["pessimistic"])
    ranks = {"optimistic": optimistic, "pessimistic": pessimistic}.get(rank_type, (optimistic + pessimistic) / 2)
    for code in np.unique(sides):
        counts, edges = rank_histogram(ranks[sides == code])
        ax.stairs(counts, edges, label=f"{_SIDE_NAMES.get(int(code), code)} ({int((sides == code).sum()):,} tasks)")
    ax.set_xscale("log")
    ax.set_xlabel(f"{rank_type} rank (log scale)")
    ax.set_ylabel("tasks")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _finished(figure, title, path)


def draw_per_relation(
    frame: pd.DataFrame, column: str, top: int = 20, path: str | None = None, title: str | None = None
) -> Figure:
    """A horizontal bar per relation of one column of a per-relation table (``results.per_relation``): the
    ``top`` relations with the most evaluation triples, sorted by the value, labelled by ``relation_label`` when
    the table has it, else by id, with their triple counts.

    Raises
    ------
    ValueError
        For a column the table lacks, or ``top`` < 1.
    """
    if column not in frame.columns:
        raise ValueError(f"column must be one of {[c for c in frame.columns if c not in ('count', 'relation_label')]},"
                         f" got {column!r}")  # fmt: skip
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    chosen = frame.sort_values("count", ascending=False, kind="stable").head(top).sort_values(column, kind="stable")
    labels = chosen["relation_label"] if "relation_label" in chosen.columns else chosen.index.astype(str)
    names = [f"{label} ({count})" for label, count in zip(labels, chosen["count"], strict=True)]
    figure = _figure_class()(figsize=(6.4, 0.8 + 0.26 * len(chosen)), layout="constrained")
    ax = figure.subplots()
    ax.barh(names, chosen[column].to_numpy(dtype=float))
    ax.set_xlabel(column)
    ax.grid(True, axis="x", alpha=0.3)
    ax.tick_params(axis="y", labelsize="small")
    return _finished(figure, title, path)


def _finished(figure: Figure, title: str | None, path: str | None) -> Figure:
    """The figure with its title, saved to ``path`` (format from the suffix) when one is given."""
    if title:
        figure.suptitle(title)
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure


def _figure_class() -> type[Figure]:
    """matplotlib's Figure class, or an ImportError that says how to install it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError('plotting needs matplotlib: pip install "kgeval[plot]" (or matplotlib)') from error
    return Figure
