"""Popularity-stratified metrics (Mohamed et al., UAI 2020): strat-hits@k and strat-MRR, and their β curves,
computed from the records an evaluation keeps (METRICS.md, Popularity-stratified metrics). Each item x is weighted
by its popularity N(x) in reference triples raised to -β: β = -1 weights by frequency, 0 equally, β > 0 favours
rare items.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval._checks import check_ks
from kgeval.keys import RANK_TYPE_SYNONYMS
from kgeval.records import rank_records
from kgeval.typing import RankType

if TYPE_CHECKING:
    from matplotlib.figure import Figure


__all__ = [
    "DEFAULT_BETAS",
    "evaluated_triples",
    "plot_strat_curve",
    "popularity_counts",
    "strat_curve",
    "stratified_metrics",
]

#: β values of :func:`strat_curve` by default: -1 to 1 in steps of 0.1.
DEFAULT_BETAS: tuple[float, ...] = tuple(round(-1 + 0.1 * i, 10) for i in range(21))


def stratified_metrics(
    results: Any,
    popularity_triples: Any,
    beta_e: float = 0.0,
    beta_r: float = 0.0,
    *,
    ks: Sequence[int] = (1, 3, 10),
    rank_type: RankType = "realistic",
    min_count: float | None = None,
) -> dict[str, float]:
    """Popularity-stratified hits@k and MRR of evaluation results (METRICS.md, "Popularity-stratified metrics").

    Parameters
    ----------
    results : RankBasedMetricResults or DataFrame
        Results that kept their per-task rank records (the default), with the head and the tail task of every
        triple; or a rank table such as ``results.ranks_df()`` (see :mod:`kgeval.records`).
    popularity_triples : LongTensor or ndarray of shape (m, 3), or a sequence of them
        The reference triples N(x) is counted on: an entity's subject plus object occurrences, a relation's
        occurrences. Usually the training triples; duplicates count.
    beta_e, beta_r : float in [-1, 1], default=0.0
        Popularity exponents of entities and relations: w(x) = N(x) ** -beta.
    ks : sequence of int, default=(1, 3, 10)
        The k of the stratified hits@k.
    rank_type : {"realistic", "optimistic", "pessimistic"} or a synonym, default="realistic"
    min_count : float, optional
        A floor count: N(x) is replaced by ``max(N(x), min_count)``. Without it, an entity or relation of the
        evaluated triples that does not occur in ``popularity_triples`` is an error.

    Returns
    -------
    dict of str to float
        ``strat_hits_at_{k}`` for each k (ascending), then ``strat_mrr``.
    """
    beta_e, beta_r = _check_beta(beta_e, "beta_e"), _check_beta(beta_r, "beta_r")
    return _StratTable.build(results, popularity_triples, ks, rank_type, min_count).compute(beta_e, beta_r)


def strat_curve(
    results: Any | Mapping[str, Any],
    popularity_triples: Any,
    *,
    betas: Sequence[float] = DEFAULT_BETAS,
    vary: Literal["entity", "relation"] = "entity",
    ks: Sequence[int] = (1, 3, 10),
    rank_type: RankType = "realistic",
    min_count: float | None = None,
) -> pd.DataFrame:
    """The stratified metrics as one β varies over [-1, 1] and the other stays 0 (the paper's Figures 2-4).

    Parameters
    ----------
    results : RankBasedMetricResults, DataFrame, or mapping of str to either
        One model's results, or several models' by name.
    popularity_triples, ks, rank_type, min_count
        As in :func:`stratified_metrics`.
    betas : sequence of float in [-1, 1], default=:data:`DEFAULT_BETAS`
    vary : {"entity", "relation"}, default="entity"
        ``"entity"`` varies β_e with β_r = 0; ``"relation"`` varies β_r with β_e = 0.

    Returns
    -------
    DataFrame
        One row per β (per model and β for a mapping, with a first column ``model``); columns ``beta_e``,
        ``beta_r`` and the keys of :func:`stratified_metrics`. ``frame.attrs["vary"]`` records ``vary``.
    """
    if vary not in ("entity", "relation"):
        raise ValueError(f"vary must be 'entity' or 'relation', got {vary!r}")
    if isinstance(betas, numbers.Real) or not isinstance(betas, Sequence | np.ndarray) or len(betas) == 0:
        raise ValueError(f"betas must be a non-empty sequence of numbers in [-1, 1], got {betas!r}")
    betas = [_check_beta(beta, "every beta") for beta in betas]
    named = _named_results(results)
    frames = []
    for name, one in named.items():
        table = _StratTable.build(one, popularity_triples, ks, rank_type, min_count)
        rows = []
        for beta in betas:
            beta_e, beta_r = (beta, 0.0) if vary == "entity" else (0.0, beta)
            rows.append({"beta_e": beta_e, "beta_r": beta_r, **table.compute(beta_e, beta_r)})
        frame = pd.DataFrame(rows)
        if name is not None:
            frame.insert(0, "model", name)
        frames.append(frame)
    curve = pd.concat(frames, ignore_index=True)
    curve.attrs["vary"] = vary
    return curve


def plot_strat_curve(
    results: Any | Mapping[str, Any],
    popularity_triples: Any,
    *,
    betas: Sequence[float] = DEFAULT_BETAS,
    vary: Literal["entity", "relation"] = "entity",
    metrics: Sequence[str] | None = None,
    ks: Sequence[int] = (1, 3, 10),
    rank_type: RankType = "realistic",
    min_count: float | None = None,
    path: str | None = None,
    title: str | None = None,
) -> Figure:
    """Draw :func:`strat_curve` with matplotlib (the optional extra ``plot``).

    One model gives one panel with a line per metric; a mapping of several models gives one panel per metric
    with a line per model.

    Parameters
    ----------
    results, popularity_triples, betas, vary, ks, rank_type, min_count
        As in :func:`strat_curve`.
    metrics : sequence of str, optional
        Which keys of :func:`stratified_metrics` to draw; default all.
    path : str, optional
        Also save the figure there (e.g. a PNG).
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        A figure not registered with pyplot (no GUI window); show it with ``display(fig)`` or save it.
    """
    from kgeval.analysis.plot import draw_curve

    curve = strat_curve(
        results, popularity_triples, betas=betas, vary=vary, ks=ks, rank_type=rank_type, min_count=min_count
    )
    return draw_curve(curve, metrics=metrics, path=path, title=title)


def popularity_counts(popularity_triples: Any, size_e: int = 0, size_r: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(entity counts, relation counts): N(e) = occurrences as subject plus as object, N(r) = as relation.

    Parameters
    ----------
    popularity_triples : LongTensor or ndarray of shape (m, 3), or a sequence of them
    size_e, size_r : int, default=0
        Minimum lengths of the returned arrays.

    Returns
    -------
    entity_counts, relation_counts : int64 ndarray
        ``entity_counts[e] = N(e)``, ``relation_counts[r] = N(r)``.
    """
    parts = popularity_triples if isinstance(popularity_triples, list | tuple) else [popularity_triples]
    arrays = [_triples_array(part) for part in parts]
    triples = np.concatenate(arrays) if arrays else np.zeros((0, 3), dtype=np.int64)
    entities = np.bincount(triples[:, [0, 2]].reshape(-1), minlength=size_e)
    relations = np.bincount(triples[:, 1], minlength=size_r)
    return entities, relations


def evaluated_triples(results: Any) -> np.ndarray:
    """The evaluated (head, relation, tail) triples, one row per triple with a head and a tail task (int64, (n, 3))."""
    return rank_records(results).paired("realistic")[0]


# -- the computation --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _StratTable:
    """Everything the stratified metrics need, per evaluated triple (n) and per present relation (R)."""

    names: tuple[str, ...]  #: metric keys, M of them
    head_values: np.ndarray  #: float64 (n, M): m_h per metric
    tail_values: np.ndarray  #: float64 (n, M): m_t per metric
    head_counts: np.ndarray  #: float64 (n,): N(h)
    tail_counts: np.ndarray  #: float64 (n,): N(t)
    relation_of: np.ndarray  #: int64 (n,): index of the triple's relation in 0..R-1
    relation_sizes: np.ndarray  #: float64 (R,): number of evaluated triples per relation
    relation_counts: np.ndarray  #: float64 (R,): N(r)

    @classmethod
    def build(cls, results: Any, popularity_triples: Any, ks: Any, rank_type: Any, min_count: Any) -> _StratTable:
        min_count = _check_min_count(min_count)
        ks = check_ks(ks)
        rank_type = _check_rank_type(rank_type)
        triples, head_rank, tail_rank = rank_records(results).paired(rank_type)
        sizes = triples.max(axis=0) + 1
        entity_counts, relation_counts = popularity_counts(popularity_triples, max(sizes[0], sizes[2]), sizes[1])
        relations, relation_of, relation_sizes = np.unique(triples[:, 1], return_inverse=True, return_counts=True)
        entity_popularity = _lookup(entity_counts, triples[:, [0, 2]], min_count, "entity")  # (n, 2): N(h), N(t)
        return cls(
            names=(*(f"strat_hits_at_{k}" for k in ks), "strat_mrr"),
            head_values=_metric_values(head_rank, ks),
            tail_values=_metric_values(tail_rank, ks),
            head_counts=entity_popularity[:, 0],
            tail_counts=entity_popularity[:, 1],
            relation_of=relation_of.reshape(-1),
            relation_sizes=relation_sizes.astype(np.float64),
            relation_counts=_lookup(relation_counts, relations, min_count, "relation"),
        )

    def compute(self, beta_e: float, beta_r: float) -> dict[str, float]:
        """The metrics for one (β_e, β_r), straight from METRICS.md's three formulas."""
        w_h = np.power(self.head_counts, -beta_e)[:, None]
        w_t = np.power(self.tail_counts, -beta_e)[:, None]
        strat = (w_t * self.tail_values + w_h * self.head_values) / (w_h + w_t)  # (n, M)
        sums = np.zeros((len(self.relation_sizes), strat.shape[1]))
        np.add.at(sums, self.relation_of, strat)
        strat_r = sums / self.relation_sizes[:, None]  # (R, M)
        w_r = np.power(self.relation_counts, -beta_r)
        values = (w_r @ strat_r) / w_r.sum()
        return {name: float(value) for name, value in zip(self.names, values, strict=True)}


def _metric_values(ranks: np.ndarray, ks: tuple[int, ...]) -> np.ndarray:
    """(n, len(ks) + 1) float64: [rank <= k] for each k, then 1 / rank."""
    return np.column_stack([*((ranks <= k).astype(np.float64) for k in ks), 1.0 / ranks])


def _lookup(counts: np.ndarray, items: np.ndarray, min_count: float | None, kind: str) -> np.ndarray:
    """N(x) of each item (any shape) as float64, floored at ``min_count``; ValueError for absent items."""
    found = counts[items].astype(np.float64)
    if min_count is not None:
        return np.maximum(found, float(min_count))
    absent = np.unique(items[found == 0])
    if absent.size:
        raise ValueError(
            f"{absent.size} {kind}(s) of the evaluated triples do not occur in popularity_triples (ids "
            f"{absent[:5].tolist()}{' ...' if absent.size > 5 else ''}); pass min_count to give them a floor count"
        )
    return found


def _named_results(results: Any) -> dict[str | None, Any]:
    """``{None: results}`` for one model, ``{name: results}`` for a mapping of several."""
    if isinstance(results, Mapping):
        if not results:
            raise ValueError("results must name at least one model, got an empty mapping")
        return {str(name): one for name, one in results.items()}
    return {None: results}


def _triples_array(triples: Any) -> np.ndarray:
    """An (m, 3) int64 numpy array from a tensor or array of ids."""
    array = triples.detach().cpu().numpy() if isinstance(triples, torch.Tensor) else np.asarray(triples)
    if array.ndim != 2 or array.shape[1] != 3 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"popularity_triples must be integer (m, 3) arrays, got {array.dtype} of shape {tuple(array.shape)}"
        )
    if array.size and array.min() < 0:
        raise ValueError(f"popularity_triples must hold ids >= 0, got {int(array.min())}")
    return array.astype(np.int64, copy=False)


def _check_beta(beta: Any, name: str) -> float:
    """β as a float in [-1, 1]."""
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not -1 <= float(beta) <= 1:
        raise ValueError(f"{name} must be a number in [-1, 1], got {beta!r}")
    return float(beta)


def _check_min_count(min_count: Any) -> float | None:
    """``min_count`` as a float > 0, or None."""
    if min_count is None:
        return None
    if isinstance(min_count, bool) or not isinstance(min_count, numbers.Real) or not float(min_count) > 0:
        raise ValueError(f"min_count must be a number > 0 or None, got {min_count!r}")
    return float(min_count)


def _check_rank_type(rank_type: Any) -> RankType:
    """A rank type from its name or a synonym (case-insensitive)."""
    resolved = RANK_TYPE_SYNONYMS.get(rank_type.lower()) if isinstance(rank_type, str) else None
    if resolved is None:
        raise ValueError(f"rank_type must be one of {sorted(RANK_TYPE_SYNONYMS)}, got {rank_type!r}")
    return resolved
