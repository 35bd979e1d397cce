"""Macro-weighted evaluation (PyKEEN's ``MacroRankBasedEvaluator``): every ranking task weighs 1 / the number of
tasks of its side that share its query, so each distinct query -- (r, t) for a head task, (h, r) for a tail task,
(h, t) for a relation task -- counts once, however many answers it has (METRICS.md, Weighted and macro-weighted
metrics; the metrics themselves are :mod:`kgeval.metrics.weighted`).

:class:`MacroRankBasedEvaluator` ranks exactly as :class:`kgeval.RankBasedEvaluator` does and reports the weighted
metrics; :func:`macro_results` turns any results that kept their per-task records into macro-weighted ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kgeval._tasks import QUERY_COLUMNS
from kgeval.evaluator import RankBasedEvaluator
from kgeval.keys import MetricKey
from kgeval.metrics.weighted import WeightedRanks, frequency_denominators, weighted_metrics, weighted_null_model
from kgeval.records import RankRecords
from kgeval.results import RankBasedMetricResults
from kgeval.typing import ENTITY_TARGETS, RANK_TYPES, Target

__all__ = ["MacroRankBasedEvaluator", "macro_results", "query_weights"]


def query_weights(records: RankRecords, target: Target) -> np.ndarray:
    """The macro weight of each of ``target``'s tasks in ``records`` (in their order): 1 / the number of that
    side's tasks with the same query (float64, shape (tasks of the side,))."""
    return _side_weights(records.of_side(target), target)


def _side_weights(side_records: RankRecords, target: Target) -> np.ndarray:
    """:func:`query_weights` of records that hold ``target``'s tasks only."""
    return 1.0 / _side_denominators(side_records, target).astype(np.float64)


def _side_denominators(side_records: RankRecords, target: Target) -> np.ndarray:
    """The number of ``target`` tasks sharing each task's query (int64): the macro weight is its reciprocal."""
    if np.any(side_records.triples < 0):
        raise ValueError("macro weights need each task's triple; these records have unknown triples (-1)")
    return frequency_denominators(side_records.triples[:, QUERY_COLUMNS[target]])


def macro_results(results: RankBasedMetricResults) -> RankBasedMetricResults:
    """The macro-weighted metrics of ``results`` (and of its ``raw`` results), from its per-task records.

    Every side and rank type as in ``results``; ``both`` pools the head and tail tasks with the weights each has
    in its own side (as PyKEEN does). The returned results carry the weighted null-model moments and no records
    (a record-level view of macro metrics would recompute unweighted ones; read the records from the evaluation
    with :class:`kgeval.RankBasedEvaluator`).

    Raises
    ------
    ValueError
        When ``results`` kept no per-task records.
    """
    records = results.records
    if records is None:
        raise ValueError("macro-weighted metrics need the per-task records (evaluate with keep_records=True)")
    if records.num_candidates is None:
        raise ValueError("macro-weighted metrics need the records' num_candidates")
    sides: dict[str, tuple[RankRecords, np.ndarray]] = {}
    for target in records.sides():
        side_records = records.of_side(target)
        sides[target] = (side_records, _side_denominators(side_records, target))
    entity_sides = [target for target in sides if target in ENTITY_TARGETS]
    if entity_sides:
        parts = [sides[target] for target in entity_sides]
        sides["both"] = (RankRecords.concat([part[0] for part in parts]), np.concatenate([part[1] for part in parts]))
    data: dict[MetricKey, float] = {}
    null_model: dict[tuple[str, str], tuple[float, float]] = {}
    for side, (side_records, denominators) in sides.items():
        num_candidates = side_records.num_candidates
        assert num_candidates is not None
        for rank_type in RANK_TYPES:
            ranks = WeightedRanks.of_reciprocals(side_records.ranks(rank_type), num_candidates, denominators,
                                                 results.ks)  # fmt: skip
            for key, value in weighted_metrics(ranks, rank_type).items():
                data[MetricKey(side, rank_type, key)] = value  # type: ignore[arg-type]
        realistic = WeightedRanks.of_reciprocals(side_records.ranks("realistic"), num_candidates, denominators,
                                                 results.ks)  # fmt: skip
        null_model.update({(side, key): moments for key, moments in weighted_null_model(realistic).items()})
    raw = macro_results(results.raw) if results.raw is not None else None
    return RankBasedMetricResults(data=data, ks=results.ks, raw=raw, null_model=null_model)  # type: ignore[arg-type]


class MacroRankBasedEvaluator(RankBasedEvaluator):
    """:class:`kgeval.RankBasedEvaluator` reporting macro-weighted metrics: each task weighs 1 / the number of tasks
    of its side with the same query (PyKEEN's ``MacroRankBasedEvaluator``; see :mod:`kgeval.variants.macro`).

    Takes the arguments of :class:`kgeval.RankBasedEvaluator` except ``keep_records``, which must stay True (the
    weights are computed from the per-task records once every task is ranked). The results hold no records.
    """

    def __init__(self, filtered: Any = True, **kwargs: Any) -> None:
        if kwargs.get("keep_records", True) is not True:
            raise ValueError("MacroRankBasedEvaluator needs the per-task records (keep_records=True)")
        super().__init__(filtered=filtered, **kwargs)

    def evaluate(self, model: Any, mapped_triples: Any, **kwargs: Any) -> RankBasedMetricResults:
        """:meth:`kgeval.RankBasedEvaluator.evaluate` (the same arguments), reporting macro-weighted metrics."""
        return macro_results(super().evaluate(model, mapped_triples, **kwargs))
