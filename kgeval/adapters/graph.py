"""Graph-conditioned models: a model that scores every entity of a query *given the graph it reasons over* -- ULTRA,
NBFNet, InGram, GraIL-style models -- evaluated with no id translation written by its user (docs/inductive.md).

The form (:class:`GraphConditionedModel`): two methods that take the graph as a keyword argument,

- ``score_t(hr_batch, *, graph) -> (B, graph.num_nodes)``: the scores of ``(h, r, e)`` for every node e;
- ``score_h(rt_batch, *, graph) -> (B, graph.num_nodes)``: the scores of ``(e, r, t)``;

where ``graph`` is a :class:`kgeval.graphs.Graph` (``edge_index`` (2, E), ``edge_type`` (E,), ``num_nodes``,
``num_relations``, the labels and ``relation_to_training`` where a dataset knows them) on the model's device, and the
batches are ``(head, relation)`` / ``(relation, tail)`` ids of that graph -- always its own relation ids, never an
inverse relation: a model that answers head queries through inverse relations maps them itself. A model with the
class attribute ``kgeval_inverse_edges = True`` is handed the graph with an inverse edge ``(t, r + R, h)`` after
each edge (ULTRA's and NBFNet's convention; :meth:`kgeval.graphs.Graph.with_inverse_edges`), the queries unchanged.

:func:`on_graphs` binds such a model to the graph of each inductive mode (a dataset's, or a mapping of graphs) and
returns a model of kgeval's inductive protocol (:mod:`kgeval.adapters.inductive`): every mode's entities and
relations are its graph's, and evaluation runs as for any inductive model::

    model = on_graphs(my_ultra_like_model, data)           # a FullyInductiveDataset or an InductiveDataset
    RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch

from kgeval.adapters.devices import model_device
from kgeval.graphs import Graph
from kgeval.typing import INDUCTIVE_MODES

__all__ = ["GraphConditionedModel", "OnGraphs", "graphs_of", "on_graphs"]


@runtime_checkable
class GraphConditionedModel(Protocol):
    """A model scoring every node of a graph for each query, given the graph (see the module docstring)."""

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor: ...

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor: ...


def graphs_of(dataset: Any) -> dict[str, Graph]:
    """The graph of each inductive mode of a dataset: ``"training"`` its training graph, ``"validation"`` and
    ``"testing"`` its inference graph. A :class:`kgeval.datasets.fully_inductive.FullyInductiveDataset` gives its
    own (:meth:`~kgeval.datasets.fully_inductive.FullyInductiveDataset.graph`); an
    :class:`kgeval.datasets.InductiveDataset` (one relation vocabulary) is built here."""
    if callable(getattr(dataset, "graph", None)):
        return {mode: dataset.graph(mode) for mode in INDUCTIVE_MODES}
    needed = ("train", "inference", "training_entity_to_id", "inference_entity_to_id", "relation_to_id")
    if not all(hasattr(dataset, name) for name in needed):
        raise TypeError(f"graphs_of takes an inductive dataset (train and inference graphs), got "
                        f"{type(dataset).__name__}")  # fmt: skip
    relations = len(dataset.relation_to_id)
    relation_labels = _labels(dataset.relation_to_id)
    training = Graph(dataset.train, len(dataset.training_entity_to_id), relations,
                     _labels(dataset.training_entity_to_id), relation_labels, torch.arange(relations),
                     f"{dataset.name} training graph")  # fmt: skip
    inference = Graph(dataset.inference, len(dataset.inference_entity_to_id), relations,
                      _labels(dataset.inference_entity_to_id), relation_labels, torch.arange(relations),
                      f"{dataset.name} inference graph")  # fmt: skip
    return {"training": training, "validation": inference, "testing": inference}


def on_graphs(model: Any, graphs: Any, *, inverse_edges: bool | None = None) -> OnGraphs:
    """``model`` (:class:`GraphConditionedModel`) as a model of kgeval's inductive protocol, handed the graph of
    each mode.

    Parameters
    ----------
    model : object
        With ``score_t(hr_batch, *, graph)`` and ``score_h(rt_batch, *, graph)``.
    graphs : mapping of mode to Graph, or an inductive dataset
        A dataset's graphs come from :func:`graphs_of`.
    inverse_edges : bool, optional
        Hand the model each graph with its inverse edges; default: the model's ``kgeval_inverse_edges`` (False
        without it).
    """
    if not all(callable(getattr(model, name, None)) for name in ("score_t", "score_h")):
        raise TypeError(f"{type(model).__name__} is no graph-conditioned model: it needs score_t(hr_batch, *, graph) "
                        "and score_h(rt_batch, *, graph)")  # fmt: skip
    table = dict(graphs) if isinstance(graphs, Mapping) else graphs_of(graphs)
    for mode, graph in table.items():
        if mode not in INDUCTIVE_MODES:
            raise ValueError(f"graph modes must be among {INDUCTIVE_MODES}, got {mode!r}")
        if not isinstance(graph, Graph):
            raise TypeError(f"the graph of mode {mode!r} must be a kgeval.graphs.Graph, got {type(graph).__name__}")
    inverse = bool(getattr(model, "kgeval_inverse_edges", False)) if inverse_edges is None else inverse_edges
    return OnGraphs(model, table, inverse)


class OnGraphs:
    """A graph-conditioned model bound to the graph of each mode: kgeval's inductive protocol
    (``kgeval_num_entities(mode)``, ``kgeval_num_relations(mode)``, ``score_t`` / ``score_h(..., mode=)``), each
    call handing the model the mode's graph on its device (moved once, kept).

    Attributes
    ----------
    model : object
        The graph-conditioned model (its torch modules are put in evaluation mode by the evaluation).
    graphs : dict of mode to Graph
        As given (without inverse edges).
    inverse_edges : bool
    kgeval_measure_memory : True
        Without a ``batch_size``, the evaluator measures the model's memory per query once (per mode, side and
        device) on a few of the evaluation's queries and scores as many queries per call as its memory budget holds
        (kgeval._engine.sizes.measured_sizes; docs/performance.md, Memory): a graph model's working memory per
        query is far more than its row of scores.
    """

    #: batches sized from the model's measured memory per query (kgeval._engine.sizes.measures_memory)
    kgeval_measure_memory = True

    def __init__(self, model: Any, graphs: dict[str, Graph], inverse_edges: bool) -> None:
        self.model = model
        self.graphs = graphs
        self.inverse_edges = inverse_edges
        self._handed: dict[tuple[int, torch.device], Graph] = {}

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    def _graph(self, mode: str) -> Graph:
        """The graph of ``mode`` (a ValueError naming the modes it has), as the model takes it."""
        if mode not in self.graphs:
            raise ValueError(f"no graph for mode {mode!r}: the graphs given are those of {sorted(self.graphs)}")
        return self.graphs[mode]

    def graph(self, mode: str) -> Graph:
        """The graph handed to the model in ``mode``: with inverse edges if it takes them, on its device."""
        graph = self._graph(mode)
        device = self.device
        key = (id(graph), device)
        if key not in self._handed:
            with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, kept for later evaluations
                handed = graph.with_inverse_edges() if self.inverse_edges else graph
                self._handed[key] = handed.to(device)
        return self._handed[key]

    def kgeval_num_entities(self, mode: str) -> int:
        return self._graph(mode).num_nodes

    def kgeval_num_relations(self, mode: str) -> int:
        """The relations of the mode's graph, as the queries name them (without inverse relations)."""
        return self._graph(mode).num_relations

    def score_t(self, hr_batch: torch.Tensor, *, mode: str) -> torch.Tensor:
        """(B, num_nodes) scores of ``(h, r, e)``: ``model.score_t(hr_batch, graph=<the mode's graph>)``."""
        return self._checked(self.model.score_t(hr_batch, graph=self.graph(mode)), hr_batch, mode, "score_t")

    def score_h(self, rt_batch: torch.Tensor, *, mode: str) -> torch.Tensor:
        """(B, num_nodes) scores of ``(e, r, t)``: ``model.score_h(rt_batch, graph=<the mode's graph>)``."""
        return self._checked(self.model.score_h(rt_batch, graph=self.graph(mode)), rt_batch, mode, "score_h")

    def _checked(self, scores: Any, batch: torch.Tensor, mode: str, method: str) -> torch.Tensor:
        expected = (len(batch), self._graph(mode).num_nodes)
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != expected:
            raise ValueError(
                f"{type(self.model).__name__}.{method}(batch, graph=...) must return a {expected} tensor "
                f"(a score per node of the {mode} graph), got {getattr(scores, 'shape', scores)!r}"
            )
        return scores


def _labels(vocabulary: Mapping[str, int]) -> tuple[str, ...]:
    labels = [""] * len(vocabulary)
    for label, index in vocabulary.items():
        labels[index] = label
    return tuple(labels)
