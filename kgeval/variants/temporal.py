"""TemporalRankBasedEvaluator: exact rank-based evaluation of temporal knowledge-graph models on (head, relation,
tail, time) quadruples, with the field's three filter settings (METRICS.md, Temporal filters):

- **time-aware**: for a tail query (h, r, ?, τ) with answer t, remove each t' != t with (h, r, t', τ) known;
- **static**: remove each t' != t with (h, r, t', τ') known at any time τ';
- **raw**: remove nothing.

Heads alike. It is a second front over the engine (docs/design.md): each quadruple is the triple (h, r · T + τ, t)
of a *packed relation* (kgeval.adapters.temporal), so the time-aware filter is the engine's filter of the packed
triples, the static filter the same index with relations compared as ``r // T``, and the model is asked for the
unpacked rows. Ties are counted as for triples: optimistic, pessimistic and realistic ranks.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import torch

from kgeval import _checks
from kgeval import _display as display
from kgeval._engine import RunSettings, rank, together
from kgeval._inputs import ResolvedModel, check_evaluation_inputs, resolve_model
from kgeval.adapters.temporal import pack_quadruples, temporal_view
from kgeval.adapters.wrappers import delegate_of, find_protocol_method
from kgeval.analysis import relations
from kgeval.evaluator import RankingSettings
from kgeval.records import read_ranks, settings_of, write_ranks
from kgeval.results import RankBasedMetricResults
from kgeval.typing import ENTITY_TARGETS, EntityTarget, KernelChoice, MatmulPrecision, RankType

__all__ = ["TEMPORAL_FILTERS", "TemporalFilter", "TemporalRankBasedEvaluator", "TemporalRankBasedMetricResults"]

#: the filter settings: each alone, or "all" (the time-aware results with the static and raw ones beside them)
TemporalFilter = Literal["time-aware", "static", "raw", "all"]
TEMPORAL_FILTERS: tuple[str, ...] = ("time-aware", "static", "raw", "all")
#: the forecasting order: "single-step" (the truth of each time revealed to the model after it is scored),
#: "multi-step" (time by time, never revealed), None (all at once); "auto": single-step for a model with the hook
Observe = Literal["auto", "single-step", "multi-step"] | None
OBSERVE_CHOICES: tuple[str | None, ...] = ("auto", "single-step", "multi-step", None)
#: the method through which a forecasting model is told the truth of a time once it was scored
OBSERVE_METHOD = "kgeval_observe"


@dataclass(frozen=True, eq=False)
class TemporalRankBasedMetricResults(RankBasedMetricResults):
    """:class:`kgeval.RankBasedMetricResults` of a temporal evaluation: the same keys and tables, records whose
    ``relation`` column holds the quadruple's relation, and besides them

    Attributes
    ----------
    setting : str
        The filter setting of these numbers ("time-aware", "static" or "raw").
    static : TemporalRankBasedMetricResults or None
        With ``filtered="all"``, the static results of the same evaluation (``raw`` holds the raw ones).
    times : ndarray or None
        The time id of each evaluated quadruple (indexed by the records' ``task_index``).
    """

    setting: str = "time-aware"
    static: TemporalRankBasedMetricResults | None = field(default=None, repr=False)
    times: np.ndarray | None = field(default=None, repr=False)

    def headline_table(self, rank_type: RankType = "realistic") -> pd.DataFrame:
        """The headline as a DataFrame: one row per metric (MRR, Hits@k, MR); with ``filtered="all"`` one column
        per filter setting (time-aware, static, raw; both sides pooled), else one per side. ``to_markdown`` and
        ``to_latex`` write it."""
        if self.static is None and self.raw is None:
            return super().headline_table(rank_type)
        settings = [(self.setting, self)] + [
            (name, other) for name, other in (("static", self.static), ("raw", self.raw)) if other is not None
        ]
        columns = {name: display.headline_frame(other.data, other.ks, rank_type)["both"] for name, other in settings}
        frame = pd.DataFrame(columns)
        frame.columns.name = "filter"
        return frame

    def settings(self) -> dict[str, TemporalRankBasedMetricResults]:
        """These results and, with ``filtered="all"``, the static and raw ones beside them, by setting."""
        held = {self.setting: self, "static": self.static, "raw": self.raw}
        return {name: cast(TemporalRankBasedMetricResults, got) for name, got in held.items() if got is not None}

    def ranks_df(self, entity_labels: Any = None, relation_labels: Any = None,
                 time_labels: Any = None) -> pd.DataFrame:  # fmt: skip
        """The rank table of a temporal evaluation: the columns of :meth:`RankBasedMetricResults.ranks_df`, plus
        ``time`` (each task's time id), ``time_label`` (with ``time_labels``: label -> id, id -> label, or a
        sequence by id) and ``setting``; the rows of every setting these results hold (time-aware, then static and
        raw with ``filtered="all"``), so one table restores them all (:meth:`from_rank_table`)."""
        parts = []
        for setting, results in self.settings().items():
            records = results._require_records("ranks_df")
            frame = relations.ranks_frame(records, entity_labels, relation_labels)
            if results.times is None or bool((records.task_index < 0).any()):
                raise ValueError("a temporal rank table needs each task's time: evaluate with keep_records=True")
            frame["time"] = np.asarray(results.times, dtype=np.int64)[records.task_index]
            if time_labels is not None:
                frame["time_label"] = relations.label_array(time_labels, "time_labels")[frame["time"].to_numpy()]
            frame["setting"] = setting
            parts.append(frame)
        return pd.concat(parts, ignore_index=True)

    def save_ranks(self, path: str | os.PathLike[str], entity_labels: Any = None, relation_labels: Any = None,
                   time_labels: Any = None) -> Path:  # fmt: skip
        """Write :meth:`ranks_df` to ``path`` (``.csv``, ``.csv.gz``, ``.tsv``, ``.parquet``): the table that
        ``kgeval evaluate / audit / report --ranks`` and :meth:`from_rank_table` read; the path written."""
        return write_ranks(self.ranks_df(entity_labels, relation_labels, time_labels), path)

    @classmethod
    def from_rank_table(
        cls, table: pd.DataFrame | str | os.PathLike[str], *, ks: Sequence[int] = (1, 3, 5, 10),
        source: str | None = None,
    ) -> TemporalRankBasedMetricResults:  # fmt: skip
        """The results of a temporal rank table (:meth:`ranks_df`, ``kgeval evaluate --save-ranks``): one per
        setting its ``setting`` column holds (time-aware first, the static and raw ones beside it, as an evaluation
        with ``filtered="all"`` returns them), with their records and each task's time. A table without
        ``setting`` is time-aware; one without ``time`` is refused."""
        if source is None:
            source = "rank table" if isinstance(table, pd.DataFrame) else f"rank table {table}"
        frame = table if isinstance(table, pd.DataFrame) else read_ranks(table)
        if "time" not in frame.columns:
            raise ValueError(f"the {source} has no time column: it ranks triples (RankBasedMetricResults."
                             "from_rank_table reads it)")  # fmt: skip
        held = {}
        for setting, part in settings_of(frame).items():
            name = setting or "time-aware"
            if name not in ("time-aware", "static", "raw"):
                raise ValueError(f"the {source} has the setting {name!r}; a temporal table holds time-aware, static "
                                 "or raw ranks")  # fmt: skip
            results = RankBasedMetricResults.from_rank_table(part, ks=ks, source=f"{source} ({name})")
            held[name] = cls(data=results.data, ks=results.ks, records=results.records,
                             null_model=results.null_model, setting=name,
                             times=_times_by_task(part, f"{source} ({name})"))  # fmt: skip
        first = held.pop("time-aware", None) or held.pop(next(iter(held)))
        return dataclasses.replace(first, static=held.get("static"), raw=held.get("raw"))

    def per_timestamp(self, ks: Sequence[int] = (1, 3, 10), rank_type: RankType = "realistic") -> pd.DataFrame:
        """MRR and hits@k of the tasks of each time, both sides pooled: one row per time id (``count``, ``mrr``,
        ``hits@k``), in time order. Needs the records (``keep_records=True``)."""
        if self.records is None or self.times is None:
            raise ValueError("per_timestamp needs the per-task records (evaluate with keep_records=True)")
        records = self.records
        ranks = {"optimistic": records.optimistic, "pessimistic": records.pessimistic}.get(rank_type)
        if ranks is None:
            ranks = (records.optimistic + records.pessimistic) / 2
        frame = pd.DataFrame({"time": self.times[records.task_index], "rank": np.asarray(ranks, dtype=np.float64)})
        grouped = frame.groupby("time")["rank"]
        table = pd.DataFrame({"count": grouped.size(), "mrr": grouped.apply(lambda r: float(np.mean(1.0 / r)))})
        for k in _checks.check_ks(ks):
            table[f"hits@{k}"] = grouped.apply(lambda r, k=k: float(np.mean(r <= k)))
        return table.sort_index()


class TemporalRankBasedEvaluator(RankingSettings):
    """Filtered rank-based evaluation of temporal models on quadruples.

    Parameters
    ----------
    filtered : {"time-aware", "static", "raw", "all"}, default="time-aware"
        The filter setting (see the module docstring). "all" reports the time-aware results with ``.static`` and
        ``.raw`` results beside them, from one pass: the model scores every query once.
    ks, batch_size, slice_size, keep_records, fast_path, kernel, matmul_precision, check_fast_path, memory_budget
        As for :class:`kgeval.RankBasedEvaluator`.

    Examples
    --------
    >>> evaluator = TemporalRankBasedEvaluator(filtered="all")
    >>> results = evaluator.evaluate(model, data.test, additional_filter_quadruples=[data.train, data.valid])
    ... # doctest: +SKIP
    >>> results["mrr"], results.static["mrr"], results.raw["mrr"]  # doctest: +SKIP
    """

    def __init__(
        self,
        filtered: TemporalFilter = "time-aware",
        ks: Sequence[int] = (1, 3, 5, 10),
        batch_size: int | None = None,
        slice_size: int | None = None,
        keep_records: bool = True,
        fast_path: bool = True,
        kernel: KernelChoice = "auto",
        matmul_precision: MatmulPrecision = "exact",
        check_fast_path: bool = True,
        memory_budget: int | None = None,
    ) -> None:
        if filtered not in TEMPORAL_FILTERS:
            raise ValueError(f"filtered must be one of {TEMPORAL_FILTERS}, got {filtered!r}")
        self.filtered: TemporalFilter = filtered
        super().__init__(ks, batch_size, slice_size, keep_records, fast_path, kernel, matmul_precision,
                         check_fast_path, memory_budget)  # fmt: skip

    def __repr__(self) -> str:
        return f"TemporalRankBasedEvaluator(filtered={self.filtered!r}, ks={self.ks})"

    def evaluate(
        self,
        model: Any,
        mapped_quadruples: torch.Tensor,
        *,
        additional_filter_quadruples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        num_entities: int | None = None,
        num_times: int | None = None,
        inverse_relations: int | None = None,
        observe: Observe = "auto",
        targets: Sequence[EntityTarget] = ("head", "tail"),
        use_tqdm: bool = True,
        tqdm_kwargs: Mapping[str, Any] | None = None,
        batch_size: int | None = None,
        slice_size: int | None = None,
        device: torch.device | str | None = None,
        distributed: bool | None = None,
        process_group: Any = None,
        progress_path: str | os.PathLike[str] | None = None,
        save_every: float = 60.0,
    ) -> TemporalRankBasedMetricResults:
        """Rank the true tail of (h, r, ?, τ) and the true head of (?, r, t, τ) of every quadruple.

        Parameters
        ----------
        model : object
            Has ``score_t(hrτ_batch)`` / ``score_h(rtτ_batch)``: (B, 3) LongTensors of (head, relation, time) and
            (relation, tail, time) ids -> (B, num_entities) scores (optionally taking ``tails=`` / ``heads=``
            candidate ids), or the query/candidate form over such (B, 3) batches (``kgeval_query``,
            ``kgeval_candidates``, ``kgeval_similarity``). Inside torch's wrappers it is ranked as the model
            inside. Evaluated where it lives, in eval mode, never moved.
        mapped_quadruples : LongTensor of shape (n, 4)
            (head, relation, tail, time) ids to rank; always part of the filter set.
        additional_filter_quadruples : LongTensor of shape (m, 4), or a sequence of them, optional
            Further known quadruples (typically train and valid).
        num_entities : int, optional
            Default: ``model.num_entities``.
        num_times : int, optional
            Default: ``model.num_times`` if the model has it, else 1 + the largest time id of the quadruples.
        inverse_relations : int, optional
            R: the model predicts objects only and scores (?, r, t, τ) as (t, r + R, ?, τ) through ``score_t``
            (the field's convention; an offset other than the relation count is allowed).
        observe : {"auto", "single-step", "multi-step", None}, default="auto"
            The forecasting order. "single-step": the evaluated quadruples are taken time by time in time order,
            every query of time τ is scored, then the model's ``kgeval_observe(quadruples_at_τ)`` ((n_τ, 4)
            LongTensor on its device) is called -- so nothing of time >= τ reaches the model before τ's queries are
            scored; "multi-step": time by time, never revealed; None: every quadruple at once. "auto":
            "single-step" for a model with ``kgeval_observe``, else None. The ranks are the same in every order
            for a model whose scores do not depend on what it observed.
        targets : sequence of {"head", "tail"}, default=("head", "tail")
        use_tqdm, tqdm_kwargs, batch_size, slice_size, device, distributed, process_group, progress_path,
        save_every
            As for :meth:`kgeval.RankBasedEvaluator.evaluate`.

        Returns
        -------
        TemporalRankBasedMetricResults
        """
        resolved_model = resolve_model(model, device)
        user = resolved_model.view
        entities = _checks.check_num_entities(user, num_entities, resolved_model.name)
        quadruples = _checks.check_triples(mapped_quadruples, "mapped_quadruples", entities, timed=True)
        _checks.check_evaluated(quadruples, "mapped_quadruples")
        known = _checks.check_filter_triples(additional_filter_quadruples, entities, timed=True)
        every = torch.cat([quadruples, *known])
        times = _num_times(user, num_times, every)
        if inverse_relations is not None:
            inverse_relations = _checks.check_positive_int(inverse_relations, "inverse_relations")
        relations = int(every[:, 1].max()) + 1
        _check_relation_range(user, relations, inverse_relations)
        view = temporal_view(user, entities, relations, times, inverse_relations)
        form = view if hasattr(view, "kgeval_query") else None
        resolved = ResolvedModel(resolved_model.model, view, resolved_model.name, resolved_model.device, form, None)
        device_of = resolved_model.device
        packed = pack_quadruples(quadruples.to(device_of), times)
        packed_known = [pack_quadruples(k.to(device_of), times) for k in known]
        sides = tuple(_checks.check_targets(targets, ENTITY_TARGETS))

        prepared: list[Any] = []  # checked once, for every pass and step of this call

        def prepare() -> Any:
            if not prepared:
                prepared.append(check_evaluation_inputs(
                    resolved, packed, additional_filter_triples=packed_known, num_entities=entities, targets=sides,
                    batch_size=self.batch_size if batch_size is None else batch_size,
                    slice_size=self.slice_size if slice_size is None else slice_size,
                    memory_budget=self.memory_budget,
                ))  # fmt: skip
            return prepared[0]

        run = RunSettings(RunSettings.progress_bar(use_tqdm, tqdm_kwargs), distributed, process_group, progress_path,
                          save_every)  # fmt: skip
        hook = _observer(user, observe)
        steps = _steps(user, observe, hook, quadruples)
        quadruple_times = quadruples[:, 3].cpu().numpy()
        if progress_path is not None and steps[0][0] is not None:
            raise ValueError(
                f"progress_path resumes one pass over every quadruple, but observe={observe!r} scores time by time "
                "(single-step for a model with kgeval_observe under 'auto'), and a resumed run would reveal times to "
                "the model twice: pass observe=None or no progress_path"
            )
        # the filter of the options and the relation stride of the one pass; "all" filters statically (relations
        # compared as r // T) and marks the time-aware filter's pairs among the static ones: time-aware, static and
        # raw ranks from the same scores
        choices: dict[str, tuple[bool | Literal["all"], int]] = {"time-aware": (True, 1), "static": (True, times),
                                                      "raw": (False, 1), "all": ("all", times)}  # fmt: skip
        filtered, stride = choices[self.filtered]
        options = self._rank_options(filtered, stride)
        setting = self.filtered if self.filtered != "all" else "time-aware"
        ranked: dict[str, dict[Any, Any]] = {}
        for rows, revealed in steps:
            step = rank(_restricted(prepare, rows), options, run, self._state)
            _merge_into(ranked, setting, {target: side.ranked for target, side in step.items()})
            if self.filtered == "all":
                _merge_into(ranked, "raw", {target: side.raw for target, side in step.items()})
                _merge_into(ranked, "static", {target: side.coarse for target, side in step.items()})
            if revealed is not None:  # under torch.distributed every rank raises together if a rank's hook fails
                with together(run):
                    hook(revealed.to(device_of))
        results = {setting: self._results(parts, setting, times, quadruple_times) for setting, parts in ranked.items()}
        if self.filtered != "all":
            return results[self.filtered]
        return dataclasses.replace(results["time-aware"], raw=results["raw"], static=results["static"])

    def _results(
        self, accumulators: Mapping[Any, Any], setting: str, num_times: int, quadruple_times: np.ndarray
    ) -> TemporalRankBasedMetricResults:
        """The results of one setting, the records' packed relations unpacked."""
        results = RankBasedMetricResults.from_accumulators(accumulators, self.ks)
        records = results.records
        if records is not None:  # in task order within each side (a stepwise order ranks them time by time)
            records = records.select(np.lexsort((records.task_index, records.side)))
            records = dataclasses.replace(records, relation=records.relation // num_times)
        return TemporalRankBasedMetricResults(
            data=results.data, ks=results.ks, records=records, null_model=results.null_model, setting=setting,
            times=quadruple_times,
        )  # fmt: skip


def _times_by_task(frame: pd.DataFrame, source: str) -> np.ndarray | None:
    """The time id of each evaluated quadruple, indexed by task_index, from a rank table's ``time`` column (None
    where the table has no task_index); ValueError where two tasks of one quadruple disagree or a time is not an
    integer >= 0."""
    if "task_index" not in frame.columns or bool((frame["task_index"] < 0).any()):
        return None
    time = frame["time"].to_numpy()
    if not np.issubdtype(time.dtype, np.integer) or (len(time) and int(time.min()) < 0):
        raise ValueError(f"the {source}: column 'time' must hold integer time ids >= 0")
    task = frame["task_index"].to_numpy(dtype=np.int64)
    times = np.full(int(task.max()) + 1 if len(task) else 0, -1, dtype=np.int64)
    times[task] = time
    if not np.array_equal(times[task], time):
        raise ValueError(f"the {source}: the tasks of one quadruple (one task_index) have different times")
    return times


def _observer(model: Any, observe: Any) -> Any:
    """The model's ``kgeval_observe`` (its own, or that of the one model it holds) when ``observe`` may reveal
    times to it ("auto", "single-step"), else None."""
    if observe not in OBSERVE_CHOICES:
        raise ValueError(f"observe must be one of {OBSERVE_CHOICES}, got {observe!r}")
    return find_protocol_method(model, OBSERVE_METHOD) if observe in ("auto", "single-step") else None


def _steps(model: Any, observe: Any, hook: Any, quadruples: torch.Tensor) -> list[tuple[torch.Tensor | None, Any]]:
    """(task rows, quadruples to reveal after them) of each step of the forecasting order: one step of every task
    without an order, else one per time in time order (revealing that time's quadruples to ``hook``, the model's
    observer, in the single-step order)."""
    if observe == "auto":
        observe = "single-step" if hook is not None else None
    if observe == "single-step" and hook is None:
        raise TypeError(f"observe='single-step' reveals each time to the model after it is scored, through "
                        f"{OBSERVE_METHOD}(quadruples), which {type(model).__name__} does not have")  # fmt: skip
    if observe is None:
        return [(None, None)]
    steps = []
    for time in torch.unique(quadruples[:, 3]).tolist():  # ascending
        rows = (quadruples[:, 3] == time).nonzero()[:, 0]
        steps.append((rows, quadruples[rows] if observe == "single-step" else None))
    return steps


def _restricted(prepare: Any, rows: torch.Tensor | None) -> Any:
    """``prepare`` whose inputs rank only the task rows ``rows`` (None: all): the other evaluated quadruples stay
    in the filter set."""
    if rows is None:
        return prepare

    def restricted() -> Any:
        inputs = prepare()
        chosen = rows.to(inputs.task_index.device)
        return dataclasses.replace(inputs, task_index=inputs.task_index[torch.isin(inputs.task_index, chosen)])

    return restricted


def _merge_into(ranked: dict[str, dict[Any, Any]], setting: str, sides: Mapping[Any, Any]) -> None:
    """Add one step's accumulators of ``setting`` (fresh ones, of this call) to those of the earlier steps (records
    in step order)."""
    if setting not in ranked:
        ranked[setting] = dict(sides)
        return
    for target, accumulator in sides.items():
        ranked[setting][target].merge(accumulator)


def _num_times(model: Any, num_times: Any, quadruples: torch.Tensor) -> int:
    """The number of time ids: given, else the model's ``num_times`` (or that of the one model it holds, as for
    ``num_entities``), else 1 + the largest time id; every time id of the quadruples must be below it."""
    declared = num_times if num_times is not None else getattr(model, "num_times", None)
    if declared is None:
        held = delegate_of(model, lambda child: getattr(child, "num_times", None) is not None)
        declared = None if held is None else held[1].num_times
    largest = int(quadruples[:, 3].max()) + 1 if len(quadruples) else 1
    if declared is None:
        return largest
    count = _checks.check_positive_int(declared, "num_times")
    if largest > count:
        raise ValueError(f"a quadruple has time id {largest - 1}, but num_times is {count}")
    return count


def _check_relation_range(model: Any, relations: int, inverse_relations: int | None) -> None:
    """With a model that declares ``num_relations``, every relation id it is asked for (r, and r + R with
    ``inverse_relations`` R) must be below it."""
    declared = _checks.model_num_relations(model)
    if declared is None:
        return
    largest = relations - 1 + (inverse_relations or 0)
    if largest >= declared:
        raise ValueError(f"the model has num_relations={declared}, but it would be asked for relation {largest}"
                         + (f" (relation {relations - 1} + inverse_relations={inverse_relations})"
                            if inverse_relations else ""))  # fmt: skip
