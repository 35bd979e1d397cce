"""RankBasedMetricResults: the reported numbers as plain data, with PyKEEN's key grammar and exports.

Results are a frozen mapping (side, rank_type, metric key) -> float plus, by default, the per-task rank records
(one row per ranking task: head, relation, tail, side, optimistic, pessimistic, num_candidates, task_index).
Formatting lives in the export methods; the numbers never change after construction.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval import _display as display
from kgeval._checks import check_ks, check_positive_int, check_writable_file
from kgeval._documents import document_entries, metric_entry, null_model_entry
from kgeval.accumulator import MetricAccumulator, merged, to_host
from kgeval.analysis import buckets, plot, relations, sampled_estimates
from kgeval.analysis import groups as groups_module
from kgeval.analysis.stats import ConfidenceInterval, confidence_interval
from kgeval.analysis.stratified import stratified_metrics
from kgeval.exceptions import UndefinedMetricWarning, quieted
from kgeval.keys import MetricKey, format_key, parse_key
from kgeval.metrics.naming import close_matches
from kgeval.metrics.registry import lookup, null_model_table
from kgeval.metrics.summary import nan_equal
from kgeval.records import RankRecords, read_ranks, write_ranks
from kgeval.typing import ENTITY_TARGETS, RANK_TYPES, TARGETS, RankType, Side, Target

__all__ = [
    "JSON_FORMAT",
    "RankBasedMetricResults",
]

JSON_FORMAT = "kgeval.results/1"
#: the results of the same pass a results object may hold, by attribute and JSON key: the raw ranks
#: (``filtered="both"``) and the wider filter level's (``also_filter_triples``)
NESTED_RESULTS = ("raw", "also_filtered")

#: PyKEEN 1.11 reports its adjusted and z hits@k under one k-less key each; kgeval exports them for k = 10
PYKEEN_K_LESS_KEYS: dict[str, str] = {"adjusted_hits_at_10": "adjusted_hits_at_k", "z_hits_at_10": "z_hits_at_k"}


@dataclass(frozen=True, eq=False)
class RankBasedMetricResults:
    """The metrics of one evaluation, keyed by (side, rank type, metric key).

    Parameters
    ----------
    data : mapping of (side, rank_type, key) -> float
        Every reported number; keys are canonical (``hits_at_10``, ``inverse_harmonic_mean_rank``) and stored as
        :class:`kgeval.keys.MetricKey` tuples (``key.side``, ``key.rank_type``, ``key.name`` or PyKEEN's
        ``key.metric``), so plain (side, rank_type, key) tuples find them too.
    ks : tuple of int
        The k of the hits@k metrics.
    records : mapping of column -> ndarray, optional
        The per-task rank records, when the evaluator kept them (a mapping of columns is checked and converted).
    raw : RankBasedMetricResults, optional
        The raw (unfiltered) results of the same pass, when evaluated with ``filtered="both"``.
    also_filtered : RankBasedMetricResults, optional
        The results of the same pass under the wider filter level, when evaluated with ``also_filter_triples``
        (e.g. validation ranks filtered by train + valid here, by train + valid + test there; LibKGE's
        ``filter_with_test``). Its ``raw`` is None: the raw ranks do not depend on the filter.
    null_model : mapping of (side, key) -> (expectation, variance), optional
        The null-model moments of every reported metric with a closed form (METRICS.md, Expectation and variance
        under the null model), per side; read them with :meth:`expected` and :meth:`variance`.
    """

    data: Mapping[tuple[Side, RankType, str], float]
    ks: tuple[int, ...] = (1, 3, 5, 10)
    records: RankRecords | None = field(default=None, repr=False)
    raw: RankBasedMetricResults | None = field(default=None, repr=False)
    null_model: Mapping[tuple[Side, str], tuple[float, float]] = field(default_factory=dict, repr=False)
    also_filtered: RankBasedMetricResults | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.records is not None:
            object.__setattr__(self, "records", RankRecords.from_columns(self.records))
        if not all(isinstance(key, MetricKey) for key in self.data):  # keys with attributes, as PyKEEN's have
            object.__setattr__(self, "data", {MetricKey(*key): value for key, value in self.data.items()})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RankBasedMetricResults):
            return NotImplemented
        same_data = self.data.keys() == other.data.keys() and all(
            nan_equal(value, other.data[key]) for key, value in self.data.items()
        )
        if not same_data or self.ks != other.ks or (self.records is None) != (other.records is None):
            return False
        same_null_model = self.null_model.keys() == other.null_model.keys() and all(
            nan_equal(mean, other.null_model[key][0]) and nan_equal(var, other.null_model[key][1])
            for key, (mean, var) in self.null_model.items()
        )
        if not same_null_model or self.raw != other.raw or self.also_filtered != other.also_filtered:
            return False
        if self.records is None or other.records is None:
            return True
        return self.records.equals(other.records)

    __hash__ = None  # type: ignore[assignment]

    # -- construction -----------------------------------------------------------------------------------------
    @classmethod
    def from_accumulators(
        cls,
        accumulators: Mapping[Any, MetricAccumulator],
        ks: tuple[int, ...],
        raw: RankBasedMetricResults | None = None,
        also_filtered: RankBasedMetricResults | None = None,
    ) -> RankBasedMetricResults:
        """Every metric per side (each target, and ``both`` = the head and tail targets pooled, PyKEEN's ``both``;
        relation prediction, when evaluated, is its own side and not part of ``both``) and rank type.

        Also stores, per side, the null-model (E, Var) of every reported metric with a closed form; ``raw`` holds
        the raw results of a ``filtered="both"`` evaluation, ``also_filtered`` those under the wider filter level.

        Parameters
        ----------
        accumulators : mapping of {"head", "tail", "relation"} to MetricAccumulator
            The ranks of each evaluated target side.
        ks : tuple of int
        raw, also_filtered : RankBasedMetricResults, optional
        """
        data, null_model = {}, {}
        to_host(accumulators.values())  # every state in one transfer; "both" is merged from them on the host too
        sides: dict[str, MetricAccumulator] = {str(target): accumulator for target, accumulator in accumulators.items()}
        entity_sides = [accumulator for target, accumulator in accumulators.items() if target in ENTITY_TARGETS]
        if entity_sides:
            sides["both"] = merged(entity_sides)  # on the host: the states were read
        for side, accumulator in sides.items():
            for rank_type in RANK_TYPES:
                for key, value in accumulator.compute(rank_type).items():
                    data[MetricKey(side, rank_type, key)] = value  # type: ignore[arg-type]
            moments = null_model_table(accumulator.summary("realistic"), accumulator.ks, accumulator.keep_records)
            null_model.update({(side, key): value for key, value in moments.items()})
        records = None
        if all(acc.keep_records for acc in accumulators.values()):
            records = RankRecords.concat([acc.records(target) for target, acc in accumulators.items()])
        return cls(data=data, ks=ks, records=records, null_model=null_model, raw=raw,  # type: ignore[arg-type]
                   also_filtered=also_filtered)  # fmt: skip

    # -- lookup -----------------------------------------------------------------------------------------------
    def resolve_key(self, key: str) -> MetricKey:
        """Parse ``key`` and check that it names a reported number; KeyError listing close matches otherwise.

        A key without a side means ``both``, or ``relation`` for an evaluation of relation prediction alone."""
        parsed = parse_key(key)
        if parsed.side == "both" and self.targets == ("relation",) and "both" not in key.lower().split("."):
            parsed = MetricKey(side="relation", rank_type=parsed.rank_type, name=parsed.name)
        info, _k = lookup(parsed.name)
        if parsed.rank_type not in info.rank_types:
            raise KeyError(
                f"{parsed.name} is defined for {', '.join(info.rank_types)} ranks only, not {parsed.rank_type} "
                f"(key {key!r})"
            )
        if (parsed.side, parsed.rank_type, parsed.name) not in self.data:
            if info.needs_records and self.records is None:
                raise KeyError(
                    f"{format_key(parsed)} needs the per-task rank records, which this evaluation did not keep: "
                    "evaluate with RankBasedEvaluator(keep_records=True) (the default)"
                )
            reported = sorted({name for (_s, _r, name) in self.data})
            hint = close_matches(parsed.name, reported)
            extra = f"; reported names close to it: {', '.join(hint)}" if hint else ""
            raise KeyError(f"{format_key(parsed)} was not reported by this evaluation{extra}")
        return parsed

    @classmethod
    def key_from_string(cls, s: str | None) -> MetricKey:
        """PyKEEN's ``RankBasedMetricResults.key_from_string``: the key a string names (``[side.][rank_type.]name[.k]``,
        defaults ``both`` and ``realistic``; None: ``both.realistic.inverse_harmonic_mean_rank``), whether or not an
        evaluation reported it. Its fields are ``side``, ``rank_type`` and ``name`` (also as ``metric``).

        Raises
        ------
        KeyError
            For a string that names no metric, with close matches.
        """
        return parse_key(_key_string(s))

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

    def to_json(self, *, include_records: bool = True) -> str:
        """A JSON document that :meth:`from_json` turns back into equal results (floats round-trip exactly)."""
        document: dict[str, Any] = {
            "format": JSON_FORMAT,
            "ks": list(self.ks),
            "metrics": [[side, rank_type, key, value] for (side, rank_type, key), value in self.data.items()],
        }
        if self.null_model:
            document["null_model"] = [[side, key, *moments] for (side, key), moments in self.null_model.items()]
        if include_records and self.records is not None:
            document["records"] = self.records.to_lists()
        for name in NESTED_RESULTS:
            nested = getattr(self, name)
            if nested is not None:
                document[name] = json.loads(nested.to_json(include_records=include_records))
        return json.dumps(document)

    @classmethod
    def from_records(
        cls, records: RankRecords | Mapping[str, Any], *, ks: Sequence[int] = (1, 3, 5, 10)
    ) -> RankBasedMetricResults:
        """Every metric computed from per-task records (e.g. a rank table read by
        :meth:`kgeval.records.RankRecords.from_frame`, which must include ``num_candidates``); records checked.

        Raises
        ------
        ValueError
            For missing columns, invalid records, or records without any ranking task.
        """
        checked = RankRecords.from_columns(records)
        if checked.num_candidates is None:
            raise ValueError("metrics need the records' num_candidates column")
        accumulators = _accumulators_of(checked, check_ks(ks))
        if not accumulators:
            raise ValueError("the records hold no ranking task")
        return cls.from_accumulators(accumulators, check_ks(ks))

    @classmethod
    def from_rank_table(
        cls,
        table: pd.DataFrame | str | os.PathLike[str],
        *,
        ks: Sequence[int] = (1, 3, 5, 10),
        source: str | None = None,
    ) -> RankBasedMetricResults:
        """Every metric of a rank table -- a DataFrame (``results.ranks_df()``) or a file written by
        ``kgeval evaluate --save-ranks`` / :meth:`save_ranks` -- with its records kept (so views, plots and the HTML
        report work as on evaluated results); the table is checked column by column, ``source`` (default: "rank
        table", and its file) named in errors."""
        if source is None:
            source = "rank table" if isinstance(table, pd.DataFrame) else f"rank table {table}"
        frame = table if isinstance(table, pd.DataFrame) else read_ranks(table)
        return cls.from_records(RankRecords.from_frame(frame, source), ks=ks)

    @classmethod
    def create_random(cls, random_state: int | None = None, num_tasks: int = 1000) -> RankBasedMetricResults:
        """Results of random ranks, for tests of code that consumes results (PyKEEN's classmethod of the same name).

        Each side (head, tail) gets ``num_tasks`` tasks with num_candidates drawn from [2, 1000), an optimistic rank
        and a pessimistic rank at or above it drawn below it, seeded by ``random_state``; every metric is computed
        from them as usual.
        """
        rng = np.random.default_rng(random_state)
        n = 2 * check_positive_int(num_tasks, "num_tasks")
        num_candidates = rng.integers(2, 1000, n)
        bounds = np.sort(rng.integers(1, num_candidates[None, :], (2, n)), axis=0)
        records = {
            "head": rng.integers(0, 100, n), "relation": rng.integers(0, 10, n), "tail": rng.integers(0, 100, n),
            "side": np.repeat(np.array([0, 1], dtype=np.int8), n // 2), "optimistic": bounds[0],
            "pessimistic": bounds[1], "num_candidates": num_candidates, "task_index": np.tile(np.arange(n // 2), 2),
        }  # fmt: skip
        return cls.from_records(records)

    @classmethod
    def from_json(cls, text: str) -> RankBasedMetricResults:
        """Results from :meth:`to_json` output, every entry checked; ValueError naming the entry otherwise.

        Metric keys must be canonical and reported for the document's ``ks``, values numbers inside their
        metric's range (or NaN); records obey ``kgeval._checks.check_rank_records``; where records are present
        every stored metric and null-model moment is recomputed from them and must agree (to float rounding).
        """
        try:
            document = json.loads(text)
        except (json.JSONDecodeError, RecursionError, TypeError) as error:
            raise ValueError(f"not a kgeval results JSON document: {error}") from error
        return cls._from_document(document, "results JSON")

    @classmethod
    def _from_document(cls, document: Any, where: str, allow_raw: bool = True) -> RankBasedMetricResults:
        """Results from a parsed :meth:`to_json` document (``where`` names it in errors; ``allow_raw``: whether it
        may hold nested results, :data:`NESTED_RESULTS`)."""
        if not isinstance(document, dict) or document.get("format") != JSON_FORMAT:
            nested = "" if where == "results JSON" else f" ({where})"
            raise ValueError(f"not a kgeval results JSON document: expected format {JSON_FORMAT!r}{nested}")
        try:
            ks = check_ks(document.get("ks"))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from error
        metrics, moments = (document_entries(document, name, where) for name in ("metrics", "null_model"))
        data = dict(metric_entry(entry, ks, where) for entry in metrics)
        null_model = dict(null_model_entry(entry, ks, where) for entry in moments)
        records = RankRecords.from_columns(document["records"], f"{where} records") if "records" in document else None
        inner: dict[str, RankBasedMetricResults] = {}
        for name in NESTED_RESULTS:
            if name in document:
                if not allow_raw:
                    raise ValueError(f"{where}: nested results must not hold {name} results of their own")
                inner[name] = cls._from_document(document[name], f"{where} {name}", allow_raw=False)
        results = cls(data=data, ks=ks, records=records, null_model=null_model, **inner)
        if records is not None:
            _agree_with_records(results, where)
        return results

    # -- views of the per-task records (logic in kgeval.analysis.relations) ----------------------------------
    def _require_records(self, what: str) -> RankRecords:
        if self.records is None:
            raise ValueError(f"{what} needs the per-task rank records; evaluate with keep_records=True")
        return self.records

    def ranks_df(self, entity_labels: Any = None, relation_labels: Any = None) -> pd.DataFrame:
        """One row per ranking task (head, relation, tail, side, ranks, num_candidates); see
        :func:`kgeval.analysis.relations.ranks_frame`. Labels: label -> id or id -> label mappings, or sequences."""
        return relations.ranks_frame(self._require_records("ranks_df"), entity_labels, relation_labels)

    def save_ranks(self, path: str | os.PathLike[str], entity_labels: Any = None, relation_labels: Any = None) -> Path:
        """Write :meth:`ranks_df` to ``path`` (``.csv``, ``.csv.gz``, ``.tsv``, ``.parquet``), the rank table that
        ``kgeval evaluate / strat / audit --ranks`` and :func:`kgeval.records.read_ranks` read; the path written."""
        return write_ranks(self.ranks_df(entity_labels, relation_labels), path)

    def to_html(self, path: str | os.PathLike[str] | None = None, **options: Any) -> str:
        """The self-contained HTML report of these results (:func:`kgeval.report.report_html`, same options: title,
        relation_labels, audit, popularity_triples, min_count, n_resamples, seed, frequency_buckets, bucket_options,
        relation_groups, group_options, sampled); also written to ``path`` when given (docs/report.md)."""
        from kgeval.report import report_html  # kgeval.report imports this module

        if path is not None:  # before the work: a folder or an unwritable place is named at once
            path = check_writable_file(path, "the report's path")
        text = report_html(self, **options)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def per_relation(
        self, keys: str | Sequence[str] = ("mrr", "hits@10"), *, relation_labels: Any = None
    ) -> pd.DataFrame:
        """One row per evaluated relation: count and each metric per side; see
        :func:`kgeval.analysis.relations.per_relation_frame`."""
        return relations.per_relation_frame(self._require_records("per_relation"), keys, self.ks, relation_labels)

    def plot_ranks(self, rank_type: RankType = "realistic", path: str | None = None, title: str | None = None) -> Any:
        """The distribution of ranks per side, a matplotlib Figure (log rank axis; ``kgeval[plot]``); see
        :func:`kgeval.analysis.plot.draw_rank_histogram`."""
        return plot.draw_rank_histogram(self._require_records("plot_ranks"), rank_type, path, title)

    def plot_per_relation(
        self, key: str = "both.mrr", *, top: int = 20, relation_labels: Any = None, path: str | None = None,
        title: str | None = None,
    ) -> Any:  # fmt: skip
        """A bar per relation of one metric (the ``top`` relations with the most evaluation triples), a matplotlib
        Figure (``kgeval[plot]``); see :func:`kgeval.analysis.plot.draw_per_relation`."""
        frame = self.per_relation(keys=key, relation_labels=relation_labels)
        column = next(name for name in frame.columns if name not in ("count", "relation_label"))
        return plot.draw_per_relation(frame, column, top, path, title)

    def macro_average(self, key: str) -> float:
        """The unweighted mean of a metric over the evaluated relations (METRICS.md, Macro averaging)."""
        return relations.macro_average(self._require_records("macro_average"), key, self.ks)

    def per_category(
        self,
        reference_triples: Any,
        *,
        keys: str | Sequence[str] = ("mrr", "hits@10"),
        threshold: float = relations.DEFAULT_THRESHOLD,
    ) -> pd.DataFrame:
        """Metrics per relation category (1-1, 1-N, N-1, N-N) from ``reference_triples`` (usually train); see
        :func:`kgeval.analysis.relations.per_category_frame`."""
        return relations.per_category_frame(
            self._require_records("per_category"), reference_triples, keys, self.ks, threshold
        )

    def frequency_buckets(self, reference_triples: Any, **options: Any) -> buckets.BucketTable:
        """Every metric (and an MRR interval) per bucket of how often each task's answer, query entity or relation
        occurs in ``reference_triples`` (usually train), an explicit unseen bucket first; ``scheme="libkge"``
        reproduces LibKGE's ``argument_frequency`` buckets. See :func:`kgeval.analysis.buckets.frequency_buckets`
        for ``options``."""
        return buckets.frequency_buckets(self, reference_triples, **options)

    def sampled_metrics(
        self, num_samples: int = 50, ks: Sequence[int] | None = None, **options: Any
    ) -> dict[str, float]:
        """Hits@k (and MRR) among ``num_samples`` candidates -- the answer and N - 1 negatives drawn from each task's
        filtered candidates -- estimated from these ranks without re-scoring: the exact hypergeometric expectation
        by default, ULTRA's / NBFNet's binomial ``hits@k_N`` with ``method="ultra"``; keys such as
        ``both.realistic.hits_at_10_sampled_50``. ``ks`` defaults to the results' own. See
        :func:`kgeval.analysis.sampled_estimates.sampled_metrics` and docs/conventions.md."""
        records = self._require_records("sampled_metrics")
        return sampled_estimates.sampled_metrics(records, self.ks if ks is None else ks, num_samples, **options)

    def relation_groups(self, groups: Any, **options: Any) -> groups_module.GroupTable:
        """Every metric of each named group of relations (ids or labels), micro and macro, side by side; see
        :func:`kgeval.analysis.groups.relation_groups` for ``options``."""
        return groups_module.relation_groups(self, groups, **options)

    # -- display (logic in kgeval._display) --------------------------------------------------------------------
    def summary(self) -> str:
        """The headline: MRR, Hits@k for every k and MR of realistic ranks, both sides with head and tail beside
        (the optimistic / pessimistic columns only where ties make them differ), in at most 80 columns."""
        return display.headline(self.data, self.ks)

    def headline(self, prefix: str | None = None, rank_type: RankType = "realistic") -> dict[str, float]:
        """The numbers a paper reports as a flat dict ready for any logger (TensorBoard, MLflow, W&B, Lightning):
        MRR, Hits@k for every k and MR, the pooled side first, then each side.

        The names use the metric tokens of kgeval's flat keys (``hits_at_10``, as
        :func:`kgeval.integrations.trackers.log_results` logs them), which MLflow accepts; ``mrr`` and ``mr`` are
        short for ``inverse_harmonic_mean_rank`` and ``arithmetic_mean_rank``. ``headline("val")["val/hits@10"]``, the
        spelling of kgeval 0.1, still finds its value.

        Parameters
        ----------
        prefix : str, optional
            Put in front of every key (``"val"``: ``val/mrr``, ``val/hits_at_10``, ``val/head/mrr``, ...).
        rank_type : {"realistic", "optimistic", "pessimistic"}, default="realistic"

        Examples
        --------
        >>> results.headline("val")  # doctest: +SKIP
        {'val/mrr': 0.68, 'val/hits_at_1': 0.55, ..., 'val/mr': 3.1, 'val/head/mrr': 0.66, ..., 'val/tail/mr': 2.9}
        """
        return display.headline_values(self.data, self.ks, rank_type, prefix)

    def headline_table(self, rank_type: RankType = "realistic") -> pd.DataFrame:
        """The headline as a DataFrame (rows MRR, Hits@k, MR; a column per side), for ``to_markdown`` /
        ``to_latex`` or any other pandas writer."""
        return display.headline_frame(self.data, self.ks, rank_type)

    def to_markdown(self, rank_type: RankType = "realistic", floatfmt: str = ".4f") -> str:
        """The headline table in Markdown (pandas' writer; needs ``tabulate``: ``pip install "kgeval[tables]"``)."""
        return self.headline_table(rank_type).to_markdown(floatfmt=floatfmt)

    def to_latex(self, rank_type: RankType = "realistic", float_format: str = "{:.4f}") -> str:
        """The headline table as a LaTeX ``tabular`` (pandas' writer; needs ``jinja2``: ``kgeval[tables]``)."""
        return self.headline_table(rank_type).to_latex(float_format=float_format.format)

    def table(self, rank_types: str | tuple[str, ...] = "all") -> pd.DataFrame:
        """Every metric: one row per metric, one column per (side, rank type).

        Parameters
        ----------
        rank_types : "all", "auto" or a tuple of rank types, default="all"
            "auto" keeps the realistic columns and, per side, the optimistic and pessimistic ones only where ties
            make them differ. ``print(results.full_table())`` shows it as text.
        """
        return display.wide_table(self.data, rank_types)

    def full_table(self, rank_types: str | tuple[str, ...] = "auto") -> str:
        """:meth:`table` as text: counts as integers, values with 4 decimals, NaN as '-'."""
        return display.format_table(self.table(rank_types))

    def __str__(self) -> str:
        if not self.data:
            return "RankBasedMetricResults(no metrics)"
        shown = self.table("auto").size
        return f"{self.summary()}\n(.full_table() lists {shown} of the {len(self.data)} numbers, .table() every one)"

    def __repr__(self) -> str:
        n = self.data.get(("both", "realistic", "count"), math.nan)
        mrr = self.data.get(("both", "realistic", "inverse_harmonic_mean_rank"), math.nan)
        return f"RankBasedMetricResults(tasks={n:g}, mrr={mrr:.4f}, ks={self.ks}, metrics={len(self.data)})"

    def stratified(
        self,
        popularity_triples: Any,
        beta_e: float = 0.0,
        beta_r: float = 0.0,
        *,
        ks: tuple[int, ...] = (1, 3, 10),
        rank_type: RankType = "realistic",
        min_count: float | None = None,
    ) -> dict[str, float]:
        """Popularity-stratified hits@k and MRR from the rank records (see
        :func:`~kgeval.analysis.stratified.stratified_metrics`)."""
        return stratified_metrics(
            self, popularity_triples, beta_e=beta_e, beta_r=beta_r, ks=ks, rank_type=rank_type, min_count=min_count
        )

    @property
    def targets(self) -> tuple[str, ...]:
        """The ranking sides that were evaluated."""
        return tuple(t for t in TARGETS if any(side == t for (side, _r, _k) in self.data))

    def confidence_interval(
        self, key: str = "mrr", *, level: float = 0.95, n_resamples: int = 10_000, seed: int | None = 0
    ) -> ConfidenceInterval:
        """Bootstrap percentile interval of a metric, resampling evaluation triples (head and tail together).

        Needs the per-task records; see :func:`kgeval.analysis.stats.confidence_interval`.
        """
        return confidence_interval(self, key, level=level, n_resamples=n_resamples, seed=seed)


def _accumulators_of(records: RankRecords, ks: tuple[int, ...]) -> dict[Target, MetricAccumulator]:
    """One accumulator per target side present in checked records that have num_candidates."""
    accumulators: dict[Target, MetricAccumulator] = {}
    for target in records.sides():
        part = records.of_side(target)
        column = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in part.columns().items()}
        accumulator = MetricAccumulator(ks=ks)
        accumulator.update_unchecked(
            column["optimistic"], column["pessimistic"], column["num_candidates"],
            torch.from_numpy(part.triples), column["task_index"],
        )  # fmt: skip
        accumulators[target] = accumulator
    return accumulators


def _agree_with_records(results: RankBasedMetricResults, where: str) -> None:
    """Every stored number equals the one its records give (to float rounding), so the document cannot say one
    thing in its metrics and another in the records that per-relation views and statistics read."""
    assert results.records is not None
    accumulators = _accumulators_of(results.records, results.ks)
    if not accumulators:
        return
    with quieted(UndefinedMetricWarning):
        recomputed = RankBasedMetricResults.from_accumulators(accumulators, results.ks)
    stored: list[tuple[Any, float, float | None]] = [(key, value, recomputed.data.get(key))
                                                     for key, value in results.data.items()]  # fmt: skip
    stored += [(key, pair[i], recomputed.null_model.get(key, (None, None))[i])
               for key, pair in results.null_model.items() for i in (0, 1)]  # fmt: skip
    for key, value, expected in stored:
        if expected is None or not _close(value, expected):
            raise ValueError(
                f"{where}: the stored {'.'.join(key)} = {value!r} disagrees with its records, which give {expected!r}"
            )


def _close(a: float, b: float) -> bool:
    return nan_equal(a, b) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _key_string(name: str | tuple[str, str, str] | None) -> str:
    """A metric key given as PyKEEN's get_metric takes it (string, key tuple, None) as a key string."""
    if name is None:
        return "both.realistic.inverse_harmonic_mean_rank"  # PyKEEN's default metric key
    if isinstance(name, tuple) and len(name) == 3 and all(isinstance(part, str) for part in name):
        return ".".join(name)
    if not isinstance(name, str):
        raise TypeError(f"a metric key must be a str or a (side, rank_type, metric) tuple, got {name!r}")
    return name
