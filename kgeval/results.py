"""RankBasedMetricResults: the reported numbers as plain data, with PyKEEN's key grammar and exports.

Results are a frozen mapping (side, rank_type, metric key) -> float plus, by default, the per-task rank records
(one row per ranking task: head, relation, tail, side, optimistic, pessimistic, num_candidates, task_index).
Formatting lives in the export methods; the numbers never change after construction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kgeval import relations
from kgeval.keys import RANK_TYPES, SIDES, TARGETS, MetricKey, RankType, Side, close_matches, format_key, parse_key
from kgeval.metrics.registry import lookup

if TYPE_CHECKING:
    from kgeval.stats import ConfidenceInterval

JSON_FORMAT = "kgeval.results/1"

#: PyKEEN 1.11 reports its adjusted and z hits@k under one k-less key each; kgeval exports them for k = 10
PYKEEN_K_LESS_KEYS: dict[str, str] = {"adjusted_hits_at_10": "adjusted_hits_at_k", "z_hits_at_10": "z_hits_at_k"}

#: columns of the per-task records and their dtypes
RECORD_COLUMNS: dict[str, str] = {
    "head": "int64",
    "relation": "int64",
    "tail": "int64",
    "side": "int8",  # 0 = head task, 1 = tail task (index into TARGETS)
    "optimistic": "int64",
    "pessimistic": "int64",
    "num_candidates": "int64",
    "task_index": "int64",
}


def _check_records(records: Mapping[str, Any]) -> dict[str, np.ndarray]:
    missing = [name for name in RECORD_COLUMNS if name not in records]
    if missing:
        raise ValueError(f"rank records lack the columns {missing}")
    arrays = {name: np.asarray(records[name], dtype=dtype) for name, dtype in RECORD_COLUMNS.items()}
    lengths = {array.shape for array in arrays.values()}
    if len(lengths) != 1 or len(next(iter(lengths))) != 1:
        raise ValueError(f"rank record columns must be 1-D of one length, got shapes {sorted(lengths)}")
    return arrays


@dataclass(frozen=True, eq=False)
class RankBasedMetricResults:
    """The metrics of one evaluation, keyed by (side, rank type, metric key).

    Parameters
    ----------
    data : mapping of (side, rank_type, key) -> float
        Every reported number; keys are canonical (``hits_at_10``, ``inverse_harmonic_mean_rank``).
    ks : tuple of int
        The k of the hits@k metrics.
    records : mapping of column -> ndarray, optional
        The per-task rank records (columns :data:`RECORD_COLUMNS`), when the evaluator kept them.
    raw : RankBasedMetricResults, optional
        The raw (unfiltered) results of the same pass, when evaluated with ``filtered="both"``.
    null_model : mapping of (side, key) -> (expectation, variance), optional
        The null-model moments of every reported metric with a closed form (METRICS.md, Expectation and variance
        under the null model), per side; read them with :meth:`expected` and :meth:`variance`.
    """

    data: Mapping[tuple[Side, RankType, str], float]
    ks: tuple[int, ...] = (1, 3, 5, 10)
    records: Mapping[str, np.ndarray] | None = field(default=None, repr=False)
    raw: RankBasedMetricResults | None = field(default=None, repr=False)
    null_model: Mapping[tuple[Side, str], tuple[float, float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.records is not None:
            object.__setattr__(self, "records", _check_records(self.records))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RankBasedMetricResults):
            return NotImplemented
        same_data = self.data.keys() == other.data.keys() and all(
            _same_float(value, other.data[key]) for key, value in self.data.items()
        )
        if not same_data or self.ks != other.ks or (self.records is None) != (other.records is None):
            return False
        same_null_model = self.null_model.keys() == other.null_model.keys() and all(
            _same_float(mean, other.null_model[key][0]) and _same_float(var, other.null_model[key][1])
            for key, (mean, var) in self.null_model.items()
        )
        if not same_null_model or self.raw != other.raw:
            return False
        if self.records is None or other.records is None:
            return True
        return all(np.array_equal(self.records[name], other.records[name]) for name in RECORD_COLUMNS)

    __hash__ = None  # type: ignore[assignment]

    # -- lookup -----------------------------------------------------------------------------------------------
    def resolve_key(self, key: str) -> MetricKey:
        """Parse ``key`` and check that it names a reported number; KeyError listing close matches otherwise."""
        parsed = parse_key(key)
        info, _k = lookup(parsed.name)
        if parsed.rank_type not in info.rank_types:
            raise KeyError(
                f"{parsed.name} is defined for {', '.join(info.rank_types)} ranks only, not {parsed.rank_type} "
                f"(key {key!r})"
            )
        if (parsed.side, parsed.rank_type, parsed.name) not in self.data:
            reported = sorted({name for (_s, _r, name) in self.data})
            hint = close_matches(parsed.name, reported)
            extra = f"; reported names close to it: {', '.join(hint)}" if hint else ""
            raise KeyError(f"{format_key(parsed)} was not reported by this evaluation{extra}")
        return parsed

    def get_metric(self, name: str | tuple[str, str, str] | None = None) -> float:
        """The value of a metric key such as ``"both.realistic.hits_at_10"``, ``"mrr"`` or ``"tail.best.mr"``.

        Parameters
        ----------
        name : str, (side, rank_type, metric) tuple, or None
            Any key PyKEEN's ``get_metric(name=...)`` accepts, with the same meaning: a key string, a
            ``RankBasedMetricKey``-like tuple, or None for PyKEEN's default key
            ``both.realistic.inverse_harmonic_mean_rank``.

        Raises
        ------
        KeyError
            For an unknown or unreported key, with close matches.
        """
        return self.data[tuple(self.resolve_key(_key_string(name)))]  # type: ignore[index]

    def __getitem__(self, key: str) -> float:
        return self.get_metric(key)

    def _null_moments(self, key: str) -> tuple[float, float]:
        parsed = self.resolve_key(key)
        moments = self.null_model.get((parsed.side, parsed.name))
        if moments is None:
            raise KeyError(f"{parsed.name} has no closed-form null-model moments in these results (side {parsed.side})")
        return moments

    def expected(self, key: str) -> float:
        """E[metric] when every task is ranked uniformly at random among its own num_candidates.

        E.g. ``f"MRR {r['mrr']:.2f} (random: {r.expected('mrr'):.4f})"``. The null model does not depend on the
        rank type. Available for MR, MRR, hits@k, GMR (GMR needs the rank records) and the adjusted family.

        Raises
        ------
        KeyError
            For an unknown or unreported key, or a metric without a closed form.
        """
        return self._null_moments(key)[0]

    def variance(self, key: str) -> float:
        """Var[metric] under the null model; see :meth:`expected`."""
        return self._null_moments(key)[1]

    # -- exports ----------------------------------------------------------------------------------------------
    def exported_items(self) -> dict[tuple[Side, RankType, str], float]:
        """Every reported number and, as PyKEEN reports them too, its k-less keys ``adjusted_hits_at_k`` and
        ``z_hits_at_k`` holding the values for k = 10 (PyKEEN's default k; only when 10 is one of ``ks``)."""
        items = dict(self.data)
        for (side, rank_type, key), value in self.data.items():
            if key in PYKEEN_K_LESS_KEYS:
                items[(side, rank_type, PYKEEN_K_LESS_KEYS[key])] = value
        return items

    def to_flat_dict(self, prefix: str | None = None) -> dict[str, float]:
        """``"side.rank_type.metric" -> value`` (``"prefix.side.rank_type.metric"`` with a prefix), every key of
        :meth:`exported_items`."""
        head = f"{prefix}." if prefix else ""
        items = self.exported_items().items()
        return {f"{head}{side}.{rank_type}.{key}": value for (side, rank_type, key), value in items}

    def to_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """Nested ``side -> rank_type -> metric -> value`` (PyKEEN's nesting), every key of :meth:`exported_items`."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (side, rank_type, key), value in self.exported_items().items():
            out.setdefault(side, {}).setdefault(rank_type, {})[key] = value
        return out

    def to_df(self) -> pd.DataFrame:
        """A long table with PyKEEN's columns ``Side``, ``Rank_type``, ``Metric``, ``Value`` (every key of
        :meth:`exported_items`)."""
        rows = [(side, rank_type, key, value) for (side, rank_type, key), value in self.exported_items().items()]
        return pd.DataFrame(rows, columns=["Side", "Rank_type", "Metric", "Value"])

    def _long_frame(self) -> pd.DataFrame:
        """The reported numbers as a long table with columns side, rank_type, metric, value (display)."""
        rows = [(side, rank_type, key, value) for (side, rank_type, key), value in self.data.items()]
        return pd.DataFrame(rows, columns=["side", "rank_type", "metric", "value"])

    def to_json(self, include_records: bool = True) -> str:
        """A JSON document that :meth:`from_json` turns back into equal results (floats round-trip exactly)."""
        document: dict[str, Any] = {
            "format": JSON_FORMAT,
            "ks": list(self.ks),
            "metrics": [[side, rank_type, key, value] for (side, rank_type, key), value in self.data.items()],
        }
        if self.null_model:
            document["null_model"] = [[side, key, *moments] for (side, key), moments in self.null_model.items()]
        if include_records and self.records is not None:
            document["records"] = {name: self.records[name].tolist() for name in RECORD_COLUMNS}
        if self.raw is not None:
            document["raw"] = json.loads(self.raw.to_json(include_records))
        return json.dumps(document)

    @classmethod
    def from_json(cls, text: str) -> RankBasedMetricResults:
        """Results from :meth:`to_json` output; ValueError for anything else."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not a kgeval results JSON document: {error}") from error
        if not isinstance(document, dict) or document.get("format") != JSON_FORMAT:
            raise ValueError(f"not a kgeval results JSON document: expected format {JSON_FORMAT!r}")
        data: dict[tuple[Side, RankType, str], float] = {}
        for entry in document.get("metrics", []):
            if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in SIDES and entry[1] in RANK_TYPES):
                raise ValueError(f"malformed metric entry in results JSON: {entry!r}")
            data[(entry[0], entry[1], str(entry[2]))] = float(entry[3])
        null_model: dict[tuple[Side, str], tuple[float, float]] = {}
        for entry in document.get("null_model", []):
            if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in SIDES):
                raise ValueError(f"malformed null_model entry in results JSON: {entry!r}")
            null_model[(entry[0], str(entry[1]))] = (float(entry[2]), float(entry[3]))
        ks = tuple(int(k) for k in document.get("ks", ()))
        raw = cls.from_json(json.dumps(document["raw"])) if "raw" in document else None
        return cls(data=data, ks=ks, records=document.get("records"), null_model=null_model, raw=raw)

    # -- views of the per-task records (logic in kgeval.relations) ----------------------------------------------
    def _require_records(self, what: str) -> Mapping[str, np.ndarray]:
        if self.records is None:
            raise ValueError(f"{what} needs the per-task rank records; evaluate with keep_records=True")
        return self.records

    def ranks_df(self, entity_labels: Any = None, relation_labels: Any = None) -> pd.DataFrame:
        """One row per ranking task (head, relation, tail, side, ranks, num_candidates); see
        :func:`kgeval.relations.ranks_frame`. Labels: label -> id or id -> label mappings, or sequences."""
        return relations.ranks_frame(self._require_records("ranks_df"), entity_labels, relation_labels)

    def per_relation(self, keys: str | Sequence[str] = ("mrr", "hits@10"), relation_labels: Any = None) -> pd.DataFrame:
        """One row per evaluated relation: count and each metric per side; see
        :func:`kgeval.relations.per_relation_frame`."""
        return relations.per_relation_frame(self._require_records("per_relation"), keys, self.ks, relation_labels)

    def macro_average(self, key: str) -> float:
        """The unweighted mean of a metric over the evaluated relations (METRICS.md, Macro averaging)."""
        return relations.macro_average(self._require_records("macro_average"), key, self.ks)

    def per_category(
        self,
        reference_triples: Any,
        keys: str | Sequence[str] = ("mrr", "hits@10"),
        threshold: float = relations.DEFAULT_THRESHOLD,
    ) -> pd.DataFrame:
        """Metrics per relation category (1-1, 1-N, N-1, N-N) from ``reference_triples`` (usually train); see
        :func:`kgeval.relations.per_category_frame`."""
        return relations.per_category_frame(
            self._require_records("per_category"), reference_triples, keys, self.ks, threshold
        )

    # -- display ----------------------------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """Wide table: one row per metric, one column per (side, rank type) that was reported."""
        frame = self._long_frame()
        wide = frame.pivot_table(
            index="metric", columns=["side", "rank_type"], values="value", sort=False, dropna=False
        )
        return wide

    def __str__(self) -> str:
        frame = self._long_frame()
        if frame.empty:
            return "RankBasedMetricResults(no metrics)"
        realistic = frame[frame.rank_type == "realistic"].pivot(index="metric", columns="side", values="value")
        sides = [side for side in SIDES if side in realistic.columns]
        realistic = realistic.reindex(index=list(dict.fromkeys(frame[frame.rank_type == "realistic"].metric)))
        both = frame[frame.side == "both"].pivot(index="metric", columns="rank_type", values="value")
        table = realistic[sides].copy()
        table.columns = [f"{side} (realistic)" for side in sides]
        for rank_type in ("optimistic", "pessimistic"):
            if rank_type in both.columns:
                table[f"both ({rank_type})"] = both[rank_type].reindex(table.index)
        n = self.data.get(("both", "realistic", "count"), math.nan)
        header = f"Rank-based metrics over {int(n) if not math.isnan(n) else '?'} ranking tasks"
        return header + "\n" + table.to_string(float_format=lambda x: f"{x:.4f}", na_rep="-")

    def __repr__(self) -> str:
        n = self.data.get(("both", "realistic", "count"), math.nan)
        mrr = self.data.get(("both", "realistic", "inverse_harmonic_mean_rank"), math.nan)
        return f"RankBasedMetricResults(tasks={n:g}, mrr={mrr:.4f}, ks={self.ks}, metrics={len(self.data)})"

    def stratified(
        self,
        popularity_triples: Any,
        beta_e: float = 0.0,
        beta_r: float = 0.0,
        ks: tuple[int, ...] = (1, 3, 10),
        rank_type: RankType = "realistic",
        min_count: float | None = None,
    ) -> dict[str, float]:
        """Popularity-stratified hits@k and MRR from the rank records: :func:`kgeval.stratified.stratified_metrics`."""
        from kgeval.stratified import stratified_metrics

        return stratified_metrics(self, popularity_triples, beta_e, beta_r, ks, rank_type, min_count)

    @property
    def targets(self) -> tuple[str, ...]:
        """The ranking sides that were evaluated."""
        return tuple(t for t in TARGETS if any(side == t for (side, _r, _k) in self.data))

    def confidence_interval(
        self, key: str = "mrr", level: float = 0.95, n_resamples: int = 10_000, seed: int | None = 0
    ) -> ConfidenceInterval:
        """Bootstrap percentile interval of a metric, resampling evaluation triples (head and tail together).

        Needs the per-task records; see :func:`kgeval.stats.confidence_interval`.
        """
        from kgeval.stats import confidence_interval

        return confidence_interval(self, key, level=level, n_resamples=n_resamples, seed=seed)


def _key_string(name: str | tuple[str, str, str] | None) -> str:
    """A metric key given as PyKEEN's get_metric takes it (string, key tuple, None) as a key string."""
    if name is None:
        return "both.realistic.inverse_harmonic_mean_rank"  # PyKEEN's default metric key
    if isinstance(name, tuple) and len(name) == 3 and all(isinstance(part, str) for part in name):
        return ".".join(name)
    if not isinstance(name, str):
        raise TypeError(f"a metric key must be a str or a (side, rank_type, metric) tuple, got {name!r}")
    return name


def _same_float(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))
