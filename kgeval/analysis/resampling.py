"""Resampling evaluation triples (a triple's head and tail tasks together): the machinery under analysis.stats.

A metric on a resample is its registry function applied to weighted sums of per-task statistics (the accumulator's
own ``rank_statistics`` / ``candidate_statistics``), so every registry metric works; the mean-type ones (hits@k,
MRR, MR: ``MEAN_TYPE``) are vectorised end to end as a ratio of two sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kgeval.keys import MetricKey
from kgeval.metrics.null_model import candidate_statistics
from kgeval.metrics.registry import MetricInfo, lookup
from kgeval.metrics.summary import RankSummary, rank_statistics
from kgeval.records import RankRecords

__all__ = [
    "Layout",
    "PairedTasks",
    "ResampledRecords",
    "bootstrap_distribution",
    "chunks",
    "pair_tasks",
    "swapped_differences",
    "task_statistics",
]

#: metric families that are the mean of a per-task statistic -> the rank_statistics entry summed over tasks
MEAN_TYPE: dict[str, str] = {
    "hits_at_k": "hits",
    "arithmetic_mean_rank": "sum_rank",
    "inverse_harmonic_mean_rank": "sum_reciprocal_rank",
}
#: elements of one (resamples x units) block: bounds the memory of a chunk of resamples
CHUNK_ELEMENTS = 2**18
_SIDE_CODES = {"head": (0,), "tail": (1,), "relation": (2,), "both": (0, 1)}
_MATCH_COLUMNS = ("task_index", "side", "head", "relation", "tail")

Layout = tuple[tuple[str, tuple[int, ...]], ...]
#: row j of a resample -> its (ranks, num_candidates), for metrics that need records
ResampledRecords = Callable[[int], tuple[np.ndarray, np.ndarray]]


def task_statistics(ranks: np.ndarray, num_candidates: np.ndarray, ks: Sequence[int]) -> tuple[np.ndarray, Layout]:
    """Per-task additive statistics, from the accumulator's own functions.

    Returns
    -------
    matrix : float64 ndarray of shape (n, m)
        Row i holds the sums of :func:`rank_statistics` and :func:`candidate_statistics` over task i alone.
    layout : tuple of (name, trailing shape)
        Which statistic the m columns hold, in order.
    """
    r = torch.from_numpy(np.ascontiguousarray(ranks, dtype=np.float64)).reshape(-1, 1)
    c = torch.from_numpy(np.ascontiguousarray(num_candidates, dtype=np.int64)).reshape(-1, 1)

    def one(rank: torch.Tensor, count: torch.Tensor) -> dict[str, torch.Tensor]:
        return {**rank_statistics(rank, ks), **candidate_statistics(count, ks)}

    try:
        stats = torch.vmap(one)(r, c)
    except Exception:  # a statistic vmap cannot trace: one call per task (slower, same numbers)
        rows = [one(rank, count) for rank, count in zip(r, c, strict=True)]
        stats = {name: torch.stack([row[name] for row in rows]) for name in rows[0]}
    layout = tuple((name, tuple(value.shape[1:])) for name, value in stats.items())
    matrix = torch.cat([value.reshape(r.shape[0], -1).to(torch.float64) for value in stats.values()], dim=1)
    return matrix.numpy(), layout


@dataclass(frozen=True)
class PairedTasks:
    """The tasks of one metric key in one or more results, aligned, grouped into units (triples)."""

    info: MetricInfo
    k: int | None
    ks: tuple[int, ...]
    ranks: np.ndarray  #: float64 (models, n): ranks of the key's rank type
    num_candidates: np.ndarray  #: int64 (models, n)
    unit_of_task: np.ndarray  #: int64 (n,): unit of each task
    unit_tasks: np.ndarray  #: int64 (U, w): task positions of each unit, padded with -1
    unit_sums: np.ndarray  #: float64 (models, U, m): per-unit sums of the task statistics
    layout: Layout  #: the m statistic columns

    @property
    def num_units(self) -> int:
        return int(self.unit_tasks.shape[0])

    @property
    def mean_type(self) -> bool:
        """Whether the metric is the mean of a per-task value (then it never needs records)."""
        return self.info.name in MEAN_TYPE

    @property
    def needs_records(self) -> bool:
        return not self.mean_type and (self.info.needs_records or self.info.needs_candidates)

    def column(self, name: str) -> int:
        """Index of the first statistic column of ``name``."""
        offset = 0
        for entry, shape in self.layout:
            if entry == name:
                return offset
            offset += math.prod(shape)
        raise KeyError(name)

    def per_unit_values(self) -> np.ndarray:
        """Mean-type metrics: the mean per-task value of every unit, float64 (models, U)."""
        numerator = self.unit_sums[:, :, self.column(MEAN_TYPE[self.info.name])]
        return numerator / self.unit_sums[:, :, self.column("count")]

    def values(self, model: int, sums: np.ndarray, records: ResampledRecords | None = None) -> np.ndarray:
        """The metric for each row of ``sums`` (c, m); ``records(j)`` gives row j's (ranks, num_candidates)."""
        if self.mean_type:
            return sums[:, self.column(MEAN_TYPE[self.info.name])] / sums[:, self.column("count")]
        out = np.empty(sums.shape[0])
        for j, row in enumerate(sums):
            ranks, counts = records(j) if records is not None else (None, None)
            summary = RankSummary(ks=self.ks, sums=_unflatten(row, self.layout), ranks=ranks, num_candidates=counts)
            out[j] = self.info.function(summary, self.k)
        return out

    def observed(self, model: int) -> float:
        """The metric of one model on all tasks."""
        totals = self.unit_sums[model].sum(axis=0, keepdims=True)
        return float(self.values(model, totals, lambda _j: (self.ranks[model], self.num_candidates[model]))[0])


def _unflatten(row: np.ndarray, layout: Layout) -> dict[str, Any]:
    out, offset = {}, 0
    for name, shape in layout:
        size = math.prod(shape)
        out[name] = row[offset : offset + size].reshape(shape) if shape else float(row[offset])
        offset += size
    return out


# -- pairing ------------------------------------------------------------------------------------------------
def pair_tasks(results: Sequence[Any], names: Sequence[str], key: str) -> PairedTasks:
    """Select the tasks of ``key`` in every result, check they are the same tasks, group them into units."""
    parsed, *_others = [_resolve(result, name, key) for result, name in zip(results, names, strict=True)]
    info, k = lookup(parsed.name)
    selected = [_select(result.records, _SIDE_CODES[parsed.side]) for result in results]
    for part, name in zip(selected[1:], names[1:], strict=True):
        _check_same_tasks(selected[0], part, names[0], name)
    ranks = np.stack([part.ranks(parsed.rank_type) for part in selected])
    num_candidates = np.stack([part["num_candidates"] for part in selected])
    units, unit_of_task = np.unique(selected[0].triple_keys(), return_inverse=True)  # one unit per triple
    ks = (k,) if k is not None else tuple(results[0].ks)
    stats = [task_statistics(r, c, ks) for r, c in zip(ranks, num_candidates, strict=True)]
    if info.name in MEAN_TYPE:  # a ratio of two sums: resample only those two columns
        stats = [_only(matrix, layout, ("count", MEAN_TYPE[info.name])) for matrix, layout in stats]
    unit_sums = np.zeros((len(results), len(units), stats[0][0].shape[1]))
    for model, (matrix, _layout) in enumerate(stats):
        np.add.at(unit_sums[model], unit_of_task, matrix)
    unit_tasks = _unit_table(unit_of_task, len(units))
    return PairedTasks(info, k, ks, ranks, num_candidates, unit_of_task, unit_tasks, unit_sums, stats[0][1])


def _only(matrix: np.ndarray, layout: Layout, names: tuple[str, ...]) -> tuple[np.ndarray, Layout]:
    """The columns of the statistics ``names`` (in that order) and their layout."""
    bounds = np.cumsum([0] + [math.prod(shape) for _name, shape in layout])
    where = {name: (i, shape) for i, (name, shape) in enumerate(layout)}
    columns = np.concatenate([np.arange(bounds[where[name][0]], bounds[where[name][0] + 1]) for name in names])
    return matrix[:, columns], tuple((name, where[name][1]) for name in names)


def _resolve(result: Any, name: str, key: str) -> MetricKey:
    if not callable(getattr(result, "resolve_key", None)) or not hasattr(result, "records"):  # duck-typed results
        raise TypeError(f"{name} must be a RankBasedMetricResults, got {type(result).__name__}")
    if result.records is None:
        raise ValueError(f"{name} has no per-task records; evaluate with keep_records=True to resample it")
    return result.resolve_key(key)


def _select(records: RankRecords, side_codes: tuple[int, ...]) -> RankRecords:
    """The records of the given sides, sorted by (task_index, side)."""
    chosen = np.flatnonzero(np.isin(records.side, side_codes))
    return records.select(chosen[np.lexsort((records.side[chosen], records.task_index[chosen]))])


def _check_same_tasks(first: RankRecords, other: RankRecords, name: str, other_name: str) -> None:
    if len(other["side"]) != len(first["side"]):
        raise ValueError(
            f"{name} and {other_name} must cover the same ranking tasks, got {len(first['side'])} and "
            f"{len(other['side'])} tasks"
        )
    same = np.logical_and.reduce([first[column] == other[column] for column in _MATCH_COLUMNS])
    if not same.all():
        i = int(np.argmin(same))
        a, b = (tuple(int(part[column][i]) for column in _MATCH_COLUMNS) for part in (first, other))
        raise ValueError(
            f"{name} and {other_name} must cover the same ranking tasks, matched by (task_index, side) and triple; "
            f"first difference (task_index, side, head, relation, tail): {a} in {name}, {b} in {other_name}"
        )


def _unit_table(unit_of_task: np.ndarray, num_units: int) -> np.ndarray:
    """(U, w) task positions of each unit, padded with -1."""
    order = np.argsort(unit_of_task, kind="stable")
    counts = np.bincount(unit_of_task, minlength=num_units)
    starts = np.cumsum(counts) - counts
    table = np.full((num_units, int(counts.max())), -1, dtype=np.int64)
    table[unit_of_task[order], np.arange(len(order)) - starts[unit_of_task[order]]] = order
    return table


# -- resampling ---------------------------------------------------------------------------------------------
def chunks(n_resamples: int, num_units: int) -> list[tuple[int, int]]:
    """(start, stop) of blocks of resamples holding about ``CHUNK_ELEMENTS`` (resample, unit) cells."""
    size = max(1, CHUNK_ELEMENTS // num_units)
    return [(start, min(start + size, n_resamples)) for start in range(0, n_resamples, size)]


def bootstrap_distribution(paired: PairedTasks, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The metric of every model on ``n_resamples`` draws of U units with replacement: float64 (models, R).

    All models see the same draws (a paired bootstrap).
    """
    num_units = paired.num_units
    out = np.empty((paired.unit_sums.shape[0], n_resamples))
    for start, stop in chunks(n_resamples, num_units):
        drawn = rng.integers(0, num_units, size=(stop - start, num_units))
        flat = (drawn + num_units * np.arange(stop - start)[:, None]).ravel()
        weights = np.bincount(flat, minlength=drawn.size).reshape(drawn.shape).astype(np.float64)
        for model in range(out.shape[0]):
            records = _drawn_records(paired, model, drawn) if paired.needs_records else None
            out[model, start:stop] = paired.values(model, weights @ paired.unit_sums[model], records)
    return out


def _drawn_records(paired: PairedTasks, model: int, drawn: np.ndarray) -> ResampledRecords:
    def records(j: int) -> tuple[np.ndarray, np.ndarray]:
        tasks = paired.unit_tasks[drawn[j]].ravel()
        tasks = tasks[tasks >= 0]
        return paired.ranks[model, tasks], paired.num_candidates[model, tasks]

    return records


def swapped_differences(paired: PairedTasks, swaps: np.ndarray) -> np.ndarray:
    """metric(A') - metric(B'), A' taking B's tasks in the units marked by ``swaps`` (bool (c, U)): (c,).

    For a mean-type metric this is the observed difference with the marked units' differences sign-flipped.
    """
    moved = swaps.astype(np.float64) @ (paired.unit_sums[1] - paired.unit_sums[0])
    totals = paired.unit_sums.sum(axis=1)
    values = []
    for model, sums in ((0, totals[0] + moved), (1, totals[1] - moved)):
        records = _swapped_records(paired, model, swaps) if paired.needs_records else None
        values.append(paired.values(model, sums, records))
    return values[0] - values[1]


def _swapped_records(paired: PairedTasks, model: int, swaps: np.ndarray) -> ResampledRecords:
    tasks = np.arange(paired.ranks.shape[1])

    def records(j: int) -> tuple[np.ndarray, np.ndarray]:
        source = np.where(swaps[j][paired.unit_of_task], 1 - model, model)
        return paired.ranks[source, tasks], paired.num_candidates[source, tasks]

    return records
