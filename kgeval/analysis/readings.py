"""What the analyses and the report read of an evaluation's results, as structural types.

:class:`kgeval.RankBasedMetricResults` satisfies both protocols (mypy checks it wherever it is passed); so may any
object with the same members. The analyses and the report name these protocols, never the results class, so the
import graph stays one-way even among annotations: ``kgeval.results`` imports the analyses, not the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pandas as pd

from kgeval.keys import MetricKey
from kgeval.records import RankRecords

__all__ = ["RecordedResults", "ReportedResults"]


class RecordedResults(Protocol):
    """What a paired test, a bootstrap interval or a stratified analysis reads: the per-task records and the
    resolution of a metric key (``"tail.hits@10"`` -> its side, rank type and metric)."""

    @property
    def records(self) -> RankRecords | None:
        """The per-task rank records, or None when the evaluation kept none."""
        ...

    def resolve_key(self, key: str) -> MetricKey:
        """The full key of ``key`` (the defaults of side and rank type filled in, synonyms resolved)."""
        ...


class ReportedResults(RecordedResults, Protocol):
    """What the HTML report reads besides: the metric values, the ks of hits@k, the per-relation table, the rank
    table and a bootstrap interval."""

    @property
    def data(self) -> Mapping[Any, float]:
        """(side, rank type, metric) -> value."""
        ...

    @property
    def ks(self) -> tuple[int, ...]:
        """The k of the hits@k metrics."""
        ...

    def per_relation(self, keys: str | Sequence[str] = ..., *, relation_labels: Any = ...) -> pd.DataFrame:
        """One row per evaluated relation: count and each metric per side."""
        ...

    def ranks_df(self, entity_labels: Any = ..., relation_labels: Any = ...) -> pd.DataFrame:
        """One row per ranking task."""
        ...

    def confidence_interval(
        self, key: str = ..., *, level: float = ..., n_resamples: int = ..., seed: int | None = ...
    ) -> Any:
        """A bootstrap percentile interval of a metric."""
        ...
