"""Drawing of stratified-metric curves (:func:`kgeval.analysis.stratified.plot_strat_curve`) with matplotlib.

matplotlib is the optional extra ``plot`` (``pip install "kgeval[plot]"``); it is imported only when a curve is
drawn. Figures are built with :class:`matplotlib.figure.Figure` directly, so drawing needs no GUI backend and
leaves pyplot's global state alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw_curve"]

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
        raise ImportError(
            'plotting stratified curves needs matplotlib: pip install "kgeval[plot]" (or matplotlib)'
        ) from error
    return Figure
