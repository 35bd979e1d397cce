"""Many graphs in one run (:func:`evaluate_many`): one model -- or one model per graph, e.g. a zero-shot model -- over
a list of datasets of every kind (transductive, entity-inductive, fully inductive), one row per graph and the group
averages as the field's papers report them (ULTRA's tables: the mean over the graphs of each group, and over all).

Each graph is evaluated as its own single-graph evaluation would be: the dataset's ``evaluation_kwargs(split)``
(its filter and, for an inductive one, its mode), a graph-conditioned model (``score_t(hr_batch, *, graph)``,
:mod:`kgeval.adapters.graph`) handed the graph it reasons over -- the inference graph of an inductive dataset
(:func:`kgeval.adapters.graph.on_graphs`), the training graph of a transductive one. Pessimistic ranks (what the
field's code reports) stand beside realistic ones, with the share of tasks whose true answer ties another candidate
(docs/inductive.md, "Many graphs in one run").
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from kgeval._checks import check_writable_file
from kgeval.adapters.devices import model_device
from kgeval.adapters.graph import on_graphs
from kgeval.datasets import FullyInductiveDataset, InductiveDataset, TemporalDataset, TriplesDataset, load_dataset
from kgeval.evaluator import RankBasedEvaluator
from kgeval.exceptions import ModelChangedWarning, warn_caller
from kgeval.graphs import Graph
from kgeval.many._store import GraphStore, graph_fingerprint, model_identity
from kgeval.many._text import Block, metric_blocks, text_table
from kgeval.report import many_report_html
from kgeval.results import RankBasedMetricResults

__all__ = ["GROUPS", "METRIC_COLUMNS", "ManyGraphs", "OnTrainingGraph", "evaluate_many", "group_of"]

#: the groups of graphs, in the order of the field's tables (ULTRA: 16 transductive, 18 entity-inductive, 23
#: entity-and-relation-inductive graphs)
GROUPS: tuple[str, ...] = ("transductive", "inductive (e)", "inductive (e, r)")
#: the metric columns of a row and of an average: each metric pessimistic beside realistic, then the tie share
METRIC_COLUMNS: tuple[str, ...] = ("mrr_pessimistic", "mrr_realistic", "hits@1_pessimistic", "hits@1_realistic",
                                   "hits@10_pessimistic", "hits@10_realistic", "tied")  # fmt: skip
#: (column, metric key of the results)
_KEYS: tuple[tuple[str, str], ...] = tuple(
    (f"{metric}_{rank_type}", f"both.{rank_type}.{metric}")
    for metric in ("mrr", "hits@1", "hits@10") for rank_type in ("pessimistic", "realistic"))  # fmt: skip

#: the blocks of :meth:`ManyGraphs.to_text`'s tables: the row names, the metrics, a graph's other values
_DATASET = Block("", (("dataset", "dataset"),), "label")
_GROUP = Block("", (("group", "group"),), "label")
_METRICS = (
    *metric_blocks([("MRR", "mrr"), ("Hits@1", "hits@1"), ("Hits@10", "hits@10")]),
    Block("", (("tied", "tied"),)),
)
_ROW_EXTRAS = (Block("", (("tasks", "tasks"),), "count"), Block("", (("group", "group"),), "label"))
_GRAPHS = Block("", (("graphs", "graphs"),), "count")

#: a model, or a function giving the model of a dataset
ModelFor = Callable[[Any], Any]


@dataclass(frozen=True)
class ManyGraphs:
    """The results of :func:`evaluate_many`.

    Attributes
    ----------
    table : DataFrame
        One row per graph, in the order given: ``dataset``, ``group`` (one of :data:`GROUPS`), ``split``, ``tasks``
        (ranking tasks, head and tail), the :data:`METRIC_COLUMNS` (``tied``: the share of tasks whose true answer
        ties another candidate, pessimistic rank > optimistic rank; NaN where the evaluator kept no rank records)
        and ``seconds``.
    averages : DataFrame
        Indexed by group (those present, in :data:`GROUPS` order) and ``"all"``: ``graphs`` and the mean of each
        metric column over the group's graphs (each graph counts once, whatever its size, as the field averages).
    results : dict of str to RankBasedMetricResults
        Each graph's own results, by dataset name.
    resumed : tuple of str
        The graphs whose results were read from ``results_dir`` rather than evaluated (:func:`evaluate_many`).
    """

    table: pd.DataFrame
    averages: pd.DataFrame
    results: dict[str, RankBasedMetricResults] = field(repr=False)
    resumed: tuple[str, ...] = ()

    def to_text(self, width: int | None = None) -> str:
        """The per-graph table and the group averages as two plain-text tables (4 decimals): each metric headed
        once over its ``pess`` (pessimistic) and ``real`` (realistic) columns, then ``tied``; a graph's row also
        holds its ``tasks`` and ``group`` (the split and the seconds are in :attr:`table` only).

        ``width`` (e.g. the terminal's columns): where a table is wider, its columns are wrapped into parts of at
        most ``width`` characters per line, the row names repeated at the left of each part (at least one metric
        per part, however narrow); None prints each table in one part. Every value is printed either way."""
        table = text_table(self.table, _DATASET, [*_METRICS, *_ROW_EXTRAS], width)
        averages = text_table(self.averages.reset_index(), _GROUP, [_GRAPHS, *_METRICS], width)
        heading = "Group averages (mean over each group's graphs):"
        return f"{table}\n\n{heading if width is None else textwrap.fill(heading, width)}\n{averages}"

    def to_html(self, path: str | os.PathLike[str] | None = None, *, model: str = "model",
                title: str | None = None) -> str:  # fmt: skip
        """One self-contained HTML page (no network) of the per-graph table and the group averages, pessimistic
        beside realistic with the tie share (:func:`kgeval.report.many_report_html`); also written to ``path`` (UTF-8)
        where given. ``model``: the model's name on the page."""
        splits = sorted(set(self.table["split"]))
        page = many_report_html(self.table, self.averages, model=model, title=title,
                                split=splits[0] if len(splits) == 1 else None)  # fmt: skip
        if path is not None:
            Path(check_writable_file(path, "the page's path")).write_text(page, encoding="utf-8")
        return page

    def to_dict(self) -> dict[str, Any]:
        """``{"graphs": [row, ...], "averages": {group: {column: value}}}``, NaN as None (strict JSON)."""

        def clean(record: Mapping[str, Any]) -> dict[str, Any]:
            return {key: _plain(value) for key, value in record.items()}

        return {
            "graphs": [clean(row) for row in self.table.to_dict(orient="records")],
            "averages": {str(group): clean(row) for group, row in self.averages.to_dict(orient="index").items()},
        }


def group_of(dataset: Any) -> str:
    """The group of a dataset (:data:`GROUPS`): ``"transductive"`` (a :class:`TriplesDataset`), ``"inductive (e)"``
    (new entities: an :class:`InductiveDataset`), ``"inductive (e, r)"`` (new entities and relations: a
    :class:`FullyInductiveDataset`); a TypeError for any other kind."""
    if isinstance(dataset, FullyInductiveDataset):
        return GROUPS[2]
    if isinstance(dataset, InductiveDataset):
        return GROUPS[1]
    if isinstance(dataset, TriplesDataset):
        return GROUPS[0]
    if isinstance(dataset, TemporalDataset):
        raise TypeError(f"{dataset.name} is a temporal dataset: evaluate_many takes triples, inductive and fully "
                        "inductive datasets (evaluate a temporal one with kgeval.variants.temporal)")  # fmt: skip
    raise TypeError(f"evaluate_many takes datasets (or their names), got {type(dataset).__name__}")


def evaluate_many(
    model_for: ModelFor | Any,
    datasets: Iterable[Any],
    *,
    split: str = "test",
    evaluator: RankBasedEvaluator | None = None,
    validation_filter: str = "inference",
    use_tqdm: bool = True,
    results_dir: str | os.PathLike[str] | None = None,
    model_id: str | None = None,
    **evaluate_kwargs: Any,
) -> ManyGraphs:
    """Evaluate a model over many graphs: one row per graph and the group averages.

    Parameters
    ----------
    model_for : callable or model
        ``model_for(dataset) -> model``: the model of each loaded dataset (one object for all, or one built per
        graph). An object with ``score_t`` and ``score_h`` is the model of every graph itself. A graph-conditioned
        model (its ``score_t`` takes ``graph=``) is handed each graph it reasons over; any other model is
        evaluated as :meth:`RankBasedEvaluator.evaluate` takes it (an inductive one with ``mode=``).
    datasets : iterable of dataset or str or path
        Loaded datasets, or names / folders :func:`kgeval.datasets.load_dataset` reads.
    split : {"test", "valid"}
        The split of every graph, filtered as its dataset's ``evaluation_kwargs(split)`` says.
    evaluator : RankBasedEvaluator, optional
        Default: ``RankBasedEvaluator()``; its ``ks`` must hold 1 and 10.
    validation_filter : {"inference", "inference+test"}
        How an inductive or fully inductive dataset filters validation
        (:meth:`InductiveDataset.evaluation_kwargs`, :meth:`FullyInductiveDataset.evaluation_kwargs`).
    use_tqdm : bool
        A progress bar over the graphs (a resumed graph is named on it, and in one line on stderr).
    results_dir : str or path-like, optional
        Make the run resumable: each graph's result is written to its own JSON file in this folder (made where
        missing, with its missing parents) as the graph completes, with a fingerprint of what its numbers depend
        on (the dataset's name and contents, the split, the validation filter where it applies, the evaluator's
        settings that change numbers, the keywords below other than sizes and devices, ``model_id``, kgeval's
        version; ``kgeval.many._store``).
        A later call with the same folder takes each graph whose file matches instead of evaluating it, and
        evaluates again -- with a :class:`kgeval.exceptions.ResumeWarning` naming what differs -- each graph whose
        file does not; the files of one graph are never mixed. What the graph's model scores counts too: every
        graph's model (``model_for`` is called for every graph) scores a probe of two queries per side before its
        graph is taken or evaluated (:meth:`RankBasedEvaluator.score_signature`), so a model retrained since the
        file was written is evaluated again even where its identity below does not change (a plain object holding
        a module, tensor attributes, a factory reading a registry).
    model_id : str, optional
        The model's identity in the fingerprint (e.g. a checkpoint's hash, a run's name). Default: a hash of the
        model object's weights and plain settings, or of the function ``model_for``'s code and what its closure
        holds -- name the model yourself when that does not identify it (a factory that reads files).
    **evaluate_kwargs
        Passed to each :meth:`RankBasedEvaluator.evaluate` (``batch_size``, ``device``, ...).

    Warns
    -----
    kgeval.exceptions.ModelChangedWarning
        When one model object scores a graph's probe the same bound to the graph before as to its own graph (a
        graph-conditioned model serving a cache of another graph's features), or scores the graph before
        otherwise after this one was evaluated (state kept across graphs): each graph's numbers may then depend on
        the graphs evaluated before it.

    Returns
    -------
    ManyGraphs
    """
    evaluator = RankBasedEvaluator() if evaluator is None else evaluator
    missing = [k for k in (1, 10) if k not in evaluator.ks]
    if missing:
        raise ValueError(f"evaluate_many reports hits@1 and hits@10: the evaluator's ks {tuple(evaluator.ks)} lack "
                         f"{missing}; pass RankBasedEvaluator(ks=(1, 3, 5, 10))")  # fmt: skip
    if model_id is not None and not isinstance(model_id, str):
        raise TypeError(f"model_id must be a str, got {type(model_id).__name__}")
    given = list(datasets)
    if not given:
        raise ValueError("evaluate_many needs at least one dataset")
    store = None if results_dir is None else GraphStore(results_dir)
    if store is not None and model_id is None:
        model_id = model_identity(model_for, _is_model(model_for))
    rows: list[dict[str, Any]] = []
    results: dict[str, RankBasedMetricResults] = {}
    resumed: list[str] = []
    previous: _Probed | None = None
    bar = tqdm(given, desc="graphs", unit="graph", disable=not use_tqdm)
    for item in bar:
        dataset = load_dataset(item) if isinstance(item, (str, os.PathLike)) else item
        group = group_of(dataset)
        bar.set_postfix_str(dataset.name)
        if dataset.name in results:
            raise ValueError(f"two datasets are named {dataset.name!r}: each row of the table is one graph, by name")
        model = model_for if _is_model(model_for) else model_for(dataset)
        bound, kwargs = graph_call(model, dataset, split, validation_filter, evaluate_kwargs)
        probed = _Probed(dataset.name, model, bound, kwargs, evaluator.score_signature(bound, **kwargs))
        _warn_if_graph_ignored(evaluator, previous, probed)
        fingerprint = saved = None
        if store is not None:
            fingerprint = graph_fingerprint(dataset, group, split, validation_filter, evaluator, evaluate_kwargs,
                                            str(model_id), probed.signature)  # fmt: skip
            saved = store.load(dataset.name, fingerprint)
            if saved is not None:
                resumed.append(dataset.name)
                bar.set_postfix_str(f"{dataset.name} (resumed)")
                if use_tqdm:
                    tqdm.write(f"{dataset.name}: resumed from {store.path_of(dataset.name)}", file=sys.stderr)
        if saved is not None:
            result, seconds = saved
        else:
            start = time.perf_counter()
            result = evaluator.evaluate(bound, **kwargs)
            seconds = time.perf_counter() - start
            _warn_if_scores_moved(evaluator, previous, model, dataset.name)
        previous = probed
        results[dataset.name] = result
        rows.append({"dataset": dataset.name, "group": group, "split": split, **row_of(result), "seconds": seconds})
        if store is not None and saved is None:
            store.save(dataset.name, fingerprint or {}, {key: _plain(value) for key, value in rows[-1].items()}, result)
    table = pd.DataFrame(rows, columns=["dataset", "group", "split", "tasks", *METRIC_COLUMNS, "seconds"])
    return ManyGraphs(table=table, averages=group_averages(table), results=results, resumed=tuple(resumed))


def evaluate_one(evaluator: RankBasedEvaluator, model: Any, dataset: Any, split: str,
                 validation_filter: str = "inference", **evaluate_kwargs: Any) -> RankBasedMetricResults:  # fmt: skip
    """One graph's evaluation, as :func:`evaluate_many` makes it: the dataset's ``evaluation_kwargs(split)``, a
    graph-conditioned model bound to the dataset's graphs."""
    bound, kwargs = graph_call(model, dataset, split, validation_filter, evaluate_kwargs)
    return evaluator.evaluate(bound, **kwargs)


def graph_call(model: Any, dataset: Any, split: str, validation_filter: str,
               evaluate_kwargs: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """(the model as one graph's evaluation scores it, the keywords of that evaluation): the dataset's
    ``evaluation_kwargs(split)`` with ``evaluate_kwargs`` (no progress bar unless asked), a graph-conditioned model
    bound to the dataset's graphs."""
    if isinstance(dataset, FullyInductiveDataset | InductiveDataset):
        kwargs = dataset.evaluation_kwargs(split, validation_filter=validation_filter)  # type: ignore[arg-type]
    else:
        kwargs = dataset.evaluation_kwargs(split)
    if is_graph_conditioned(model):
        model = on_graphs(model, dataset) if "mode" in kwargs else OnTrainingGraph(model, training_graph(dataset))
    twice = sorted(set(kwargs) & set(evaluate_kwargs))
    if twice:
        raise TypeError(f"{twice[0]!r} is set by the dataset's evaluation_kwargs({split!r}); do not pass it to "
                        "evaluate_many")  # fmt: skip
    return model, {"use_tqdm": False, **kwargs, **evaluate_kwargs}


@dataclass(frozen=True)
class _Probed:
    """One graph's model as its evaluation scored it, and what it scored on the probe before its evaluation."""

    name: str
    model: Any  #: as ``model_for`` gave it
    bound: Any  #: bound to the graph (a graph-conditioned model)
    kwargs: dict[str, Any]
    signature: Any  #: kgeval._fingerprints.ScoreSignature or None


def _warn_if_graph_ignored(evaluator: RankBasedEvaluator, previous: _Probed | None, current: _Probed) -> None:
    """A :class:`kgeval.exceptions.ModelChangedWarning` when a graph-conditioned model, the same object as the graph
    before's, scores this graph's probe the same bound to the graph before as bound to this one: it does not read
    the graph it is handed (a cache of node features filled for an earlier graph), so this graph's numbers would be
    those of the earlier graph's features. Skipped where the probe's ids do not fit the earlier graph."""
    if previous is None or previous.model is not current.model or current.signature is None:
        return
    if not is_graph_conditioned(current.model):
        return
    try:
        crossed = evaluator.score_signature(previous.bound, **current.kwargs)
    except (ValueError, TypeError, IndexError, RuntimeError):  # ids beyond the earlier graph's: not comparable
        return
    if current.signature.difference(crossed) is None and not _same_graph(previous, current):
        warn_caller(
            f"kgeval: the model scores {current.name}'s probe queries the same whether it is handed {current.name}'s "
            f"graph or {previous.name}'s: it does not read the graph it is handed (a cache of node or relation "
            f"features filled for {previous.name}, or an earlier graph?), so {current.name}'s numbers may be those "
            "of another graph's features. Clear such a cache when the graph changes, or give each graph a model of "
            "its own (model_for building one per dataset)",
            ModelChangedWarning,
        )


def _same_graph(previous: _Probed, current: _Probed) -> bool:
    """Whether the two graphs' models are handed the same graph (the same nodes and edges: two datasets over one
    training graph), where kgeval can tell; then scoring the same is no sign of a cache."""
    first, second = _handed_graph(previous), _handed_graph(current)
    if first is None or second is None:
        return False
    return (first.num_nodes, first.num_relations) == (second.num_nodes, second.num_relations) and torch.equal(
        first.triples.cpu(), second.triples.cpu())  # fmt: skip


def _handed_graph(probed: _Probed) -> Graph | None:
    """The graph a graph-conditioned model is handed for ``probed``'s evaluation, or None where not found."""
    bound = probed.bound._bound if isinstance(probed.bound, OnTrainingGraph) else probed.bound
    graph_of = getattr(bound, "graph", None)
    mode = probed.kwargs.get("mode", "testing")
    try:
        graph = graph_of(mode) if callable(graph_of) else None
    except (KeyError, ValueError, TypeError):
        return None
    return graph if isinstance(graph, Graph) else None


def _warn_if_scores_moved(evaluator: RankBasedEvaluator, previous: _Probed | None, model: Any,
                          evaluated: str) -> None:  # fmt: skip
    """A :class:`kgeval.exceptions.ModelChangedWarning` when the model of the graph before scores that graph's probe
    otherwise now that ``evaluated`` was evaluated with the same model object ``model``: it keeps state across graphs (a
    cache of node features filled for one graph and read for the next), so a graph's numbers depend on the graphs
    before it. Graphs with a model of their own (``model_for`` building one per graph) are not probed again."""
    if previous is None or previous.signature is None:
        return
    if previous.model is not model:
        return
    now = evaluator.score_signature(previous.bound, **previous.kwargs)
    reason = previous.signature.difference(now)
    if reason is not None:
        warn_caller(
            f"kgeval: the model scores {previous.name} otherwise after {evaluated} was evaluated ({reason}): it keeps "
            "state across graphs (a cache of node or relation features filled for one graph and read for another?), "
            "so each graph's numbers may depend on the graphs evaluated before it. Clear such a cache when the graph "
            "changes, or give each graph a model of its own (model_for building one per dataset)",
            ModelChangedWarning,
        )


def row_of(results: RankBasedMetricResults) -> dict[str, Any]:
    """``tasks``, the :data:`METRIC_COLUMNS` of one graph's results (``tied`` from the rank records: the share of
    tasks with pessimistic rank > optimistic rank; NaN without records)."""
    row: dict[str, Any] = {column: float(results[key]) for column, key in _KEYS}
    records = results.records
    if records is None:
        row["tasks"], row["tied"] = math.nan, math.nan
    else:
        pessimistic, optimistic = np.asarray(records["pessimistic"]), np.asarray(records["optimistic"])
        row["tasks"], row["tied"] = len(pessimistic), float(np.mean(pessimistic > optimistic))
    return row


def group_averages(table: pd.DataFrame) -> pd.DataFrame:
    """The mean of each metric column over the graphs of each group present (in :data:`GROUPS` order) and over
    all graphs, with their count (``graphs``)."""
    parts = [(group, table[table["group"] == group]) for group in GROUPS if (table["group"] == group).any()]
    parts.append(("all", table))
    averages = pd.DataFrame([{"graphs": len(part), **{c: part[c].mean() for c in METRIC_COLUMNS}}
                             for _, part in parts], index=[name for name, _ in parts])  # fmt: skip
    averages.index.name = "group"
    return averages


def is_graph_conditioned(model: Any) -> bool:
    """Whether ``model.score_t`` takes a ``graph`` keyword (:class:`kgeval.adapters.graph.GraphConditionedModel`)."""
    method = getattr(model, "score_t", None)
    if not callable(method):
        return False
    try:
        return "graph" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def training_graph(dataset: TriplesDataset) -> Graph:
    """A transductive dataset's training graph: what a graph-conditioned model reasons over for its valid and test
    queries (ULTRA's transductive protocol), in the dataset's ids."""
    return Graph(dataset.train, dataset.num_entities, dataset.num_relations,
                 tuple(_labels(dataset.entity_to_id)), tuple(_labels(dataset.relation_to_id)),
                 torch.arange(dataset.num_relations), f"{dataset.name} training graph")  # fmt: skip


class OnTrainingGraph:
    """A graph-conditioned model bound to one graph, as an ordinary model: ``score_t(hr_batch)`` /
    ``score_h(rt_batch)`` -> (B, graph.num_nodes), each call handing the model the graph (with inverse edges where
    it asks for them, ``kgeval_inverse_edges``) on its device. Its batches come from its measured memory per query
    (``kgeval_measure_memory``, as for :func:`kgeval.adapters.graph.on_graphs`)."""

    kgeval_measure_memory = True

    def __init__(self, model: Any, graph: Graph) -> None:
        self.model = model
        self._bound = on_graphs(model, {"testing": graph})
        self.num_entities = graph.num_nodes
        self.num_relations = graph.num_relations

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._bound.score_t(hr_batch, mode="testing")

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._bound.score_h(rt_batch, mode="testing")


def _is_model(candidate: Any) -> bool:
    return all(callable(getattr(candidate, name, None)) for name in ("score_t", "score_h"))


def _labels(vocabulary: Mapping[str, int]) -> list[str]:
    labels = [""] * len(vocabulary)
    for label, index in vocabulary.items():
        labels[index] = label
    return labels


def _plain(value: Any) -> Any:
    """A JSON-ready value: numpy scalars as Python ones, NaN as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
