"""ULTRA (Galkin et al., "Towards Foundation Models for Knowledge Graph Reasoning", ICLR 2024;
github.com/DeepGraphLearning/ULTRA) as a graph-conditioned model (:mod:`kgeval.adapters.graph`): a pretrained
ULTRA checkpoint ranks the test triples of any graph -- new entities, new relations -- through kgeval's evaluator,
task for task as ULTRA's own ``test()`` ranks them (``script/run.py``; pessimistic ranks, see below)::

    from ultra.models import Ultra                          # the user's ULTRA checkout; no dependency of kgeval
    model = Ultra(rel_model_cfg=..., entity_model_cfg=...)  # and model.load_state_dict(torch.load(ckpt)["model"])
    data = kgeval.datasets.load_dataset("InGram-NL-25")
    results = RankBasedEvaluator().evaluate(on_graphs(UltraAdapter(model), data), **data.evaluation_kwargs("test"))

What it does, for each graph kgeval hands it (a :class:`kgeval.graphs.Graph` with its inverse edges -- ULTRA's
convention, asked for by ``kgeval_inverse_edges = True`` -- in the graph's own ids):

- builds the ``torch_geometric.data.Data`` ULTRA's inductive datasets build (``edge_index`` (2, 2E) and
  ``edge_type`` (2E,): the E edges then their inverses ``(t, r + R, h)``; ``num_nodes``; ``num_relations`` = 2R),
  and its ``relation_graph`` with ULTRA's own ``build_relation_graph`` (from the ``tasks`` module of the package
  the model's class comes from, ``ultra.tasks``, unless one is passed); once per graph, kept;
- answers a tail query ``(h, r)`` by ``model(data, batch)`` with ``batch[b, e] = (h_b, e, r_b)`` of shape
  (B, num_nodes, 3), and a head query ``(r, t)`` with ``batch[b, e] = (e, t_b, r_b)``: the ``t_batch`` and
  ``h_batch`` of ULTRA's ``tasks.all_negative``, which its ``test()`` scores; ULTRA's model itself turns the head
  batch into tail prediction with the inverse relation ``r + R``. Either returns (B, num_nodes) scores.

ULTRA's loaders number entities and relations by first appearance in the inference graph's file, kgeval by sorted
label. ULTRA's message passing is permutation-equivariant, but its sums run in an order set by the ids, and a score
that differs in the last float bit can swap a near tie (one task of 128 on ILPC2022-small in kgeval's ids). So the
adapter hands ULTRA the graph renumbered as ULTRA's loaders number it: nodes and relations by first appearance in
the graph's edges (the file's order; nodes without an edge after them, in kgeval's order), the edges in their order;
the queries are renumbered alike and the scores returned in kgeval's ids. The ranks were checked task for task
against ULTRA's own ``test()`` on ILPC2022-small, InGram-NL-25 and InGram-WK-25 (``benchmarks/ultra.py``;
docs/inductive.md, "ULTRA": ULTRA commit 427966a, February 2025, checkpoint ``ultra_4g.pth``).

ULTRA's ``compute_ranking`` counts every unfiltered candidate scored at least as high as the answer: kgeval's
**pessimistic** rank. ULTRA filters ILPC's and InGram's test triples by the inference graph and the
validation and test triples: kgeval's default ``evaluation_kwargs("test")`` filter.

ULTRA's checkpoints were trained with its fused ``rspmm`` extension, which aggregates from ``edge_index[1]`` into
``edge_index[0]``; PyG's generic ``propagate`` runs the other way unless a layer's ``flow`` is
``"target_to_source"`` -- a model patched to run without the extension must keep that direction, or it is another
model (docs/inductive.md, "ULTRA"). The adapter calls the model as given and changes none of its layers.

Nothing of ULTRA is imported when this module is: the adapter takes the model object, and imports
``torch_geometric`` (ULTRA's graph type) and the ``build_relation_graph`` function when it first builds a graph.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from kgeval.graphs import Graph

__all__ = ["UltraAdapter"]

#: ULTRA's relation-graph builder: takes a Data with inverse edges, returns it with ``relation_graph`` set
RelationGraphBuilder = Callable[[Any], Any]


class UltraAdapter(torch.nn.Module):
    """A ULTRA model (``ultra.models.Ultra``) as a graph-conditioned model of kgeval (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        A ULTRA model: ``relation_model`` and ``entity_model`` submodules, ``forward(data, batch)`` taking a PyG
        ``Data`` with ``relation_graph`` and a (B, K, 3) LongTensor of ``(head, tail, relation)`` candidates with
        one query per row, returning (B, K) scores.
    build_relation_graph : callable, optional
        ULTRA's ``tasks.build_relation_graph`` (``Data -> Data`` with ``relation_graph``); default: imported from
        the ``tasks`` module beside the model's class (``ultra.tasks`` for ``ultra.models.Ultra``).

    Attributes
    ----------
    model : torch.nn.Module
        The ULTRA model (its parameters decide the device; its evaluation mode is set by kgeval's evaluation).
    kgeval_inverse_edges : bool
        True: :func:`kgeval.adapters.graph.on_graphs` hands each graph with its inverse edges.

    Raises
    ------
    TypeError
        For a model that is no ULTRA model.
    """

    kgeval_inverse_edges = True

    def __init__(self, model: Any, *, build_relation_graph: RelationGraphBuilder | None = None) -> None:
        super().__init__()
        if not isinstance(model, torch.nn.Module) or not all(
            isinstance(getattr(model, name, None), torch.nn.Module) for name in ("relation_model", "entity_model")
        ):
            raise TypeError(f"UltraAdapter takes a ULTRA model (ultra.models.Ultra: a torch module with relation_model "
                            f"and entity_model submodules), got {type(model).__name__}")  # fmt: skip
        self.model = model
        self._build_relation_graph = build_relation_graph
        self._data: dict[tuple[int, torch.device], tuple[Graph, Any, torch.Tensor, torch.Tensor]] = {}

    def relation_graph_builder(self) -> RelationGraphBuilder:
        """ULTRA's ``build_relation_graph``: the one given, else ``<package of the model's class>.tasks``'s."""
        if self._build_relation_graph is not None:
            return self._build_relation_graph
        module = type(self.model).__module__
        package = module.rpartition(".")[0] or module
        try:
            tasks = importlib.import_module(f"{package}.tasks")
        except ImportError as error:
            raise ImportError(f"UltraAdapter found no {package}.tasks module beside the model's class "
                              f"({module}.{type(self.model).__name__}) for ULTRA's build_relation_graph: pass "
                              f"build_relation_graph=ultra.tasks.build_relation_graph ({error})"
                              ) from error  # fmt: skip
        builder = getattr(tasks, "build_relation_graph", None)
        if not callable(builder):
            raise ImportError(f"{package}.tasks has no build_relation_graph: pass UltraAdapter(model, "
                              "build_relation_graph=ultra.tasks.build_relation_graph)")  # fmt: skip
        self._build_relation_graph = builder
        return builder

    def data(self, graph: Graph) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """The ``torch_geometric.data.Data`` ULTRA reasons over for ``graph`` (which must carry its inverse edges),
        with ``node_id`` (num_nodes,) and ``relation_id`` (num_relations / 2,): each kgeval id's id in it. Built on
        the CPU as ULTRA's datasets build it (renumbered by first appearance, see the module docstring), its
        relation graph added, moved to the graph's device, kept for later calls with the same graph object."""
        key = (id(graph), graph.device)
        if key not in self._data:
            with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, kept for later evaluations
                self._data[key] = (graph, *self._build(graph))
        return self._data[key][1:]

    def _build(self, graph: Graph) -> tuple[Any, torch.Tensor, torch.Tensor]:
        _check_inverse_edges(graph)
        try:
            from torch_geometric.data import Data
        except ImportError as error:
            raise ImportError("kgeval.adapters.ultra needs torch_geometric (ULTRA's graphs are "
                              f"torch_geometric.data.Data): pip install torch_geometric ({error})"
                              ) from error  # fmt: skip
        cpu = graph.to("cpu")
        edges = cpu.triples[: len(cpu.triples) // 2]
        node_id = _first_appearance(edges[:, [0, 2]].reshape(-1), cpu.num_nodes)
        relation_id = _first_appearance(edges[:, 1], cpu.num_relations // 2)
        forward = torch.stack([node_id[edges[:, 0]], node_id[edges[:, 2]]])
        types = relation_id[edges[:, 1]]
        data = Data(edge_index=torch.cat([forward, forward.flip(0)], dim=1),
                    edge_type=torch.cat([types, types + cpu.num_relations // 2]), num_nodes=cpu.num_nodes,
                    num_relations=cpu.num_relations)  # fmt: skip
        built = self.relation_graph_builder()(data)
        data = data if built is None else built
        if getattr(data, "relation_graph", None) is None:
            raise ValueError("build_relation_graph(data) set no data.relation_graph: pass ULTRA's "
                             "tasks.build_relation_graph")  # fmt: skip
        return data.to(graph.device), node_id.to(graph.device), relation_id.to(graph.device)

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        """(B, num_nodes) scores of ``(h, r, e)`` for each row ``(h, r)`` of ``hr_batch`` (B, 2) and every node e:
        ULTRA's ``t_batch``."""
        return self._scores(graph, hr_batch[:, 0], hr_batch[:, 1], tails=True)

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        """(B, num_nodes) scores of ``(e, r, t)`` for each row ``(r, t)`` of ``rt_batch`` (B, 2) and every node e:
        ULTRA's ``h_batch``, which its model answers as tail prediction with the inverse relation."""
        return self._scores(graph, rt_batch[:, 1], rt_batch[:, 0], tails=False)

    def _scores(self, graph: Graph, known: torch.Tensor, relations: torch.Tensor, tails: bool) -> torch.Tensor:
        """ULTRA's scores of every node as the missing tail (``tails``) or head of the queries (``known`` entity,
        relation; kgeval's ids, shapes (B,)): one (B, num_nodes, 3) batch of (head, tail, relation) rows in ULTRA's
        ids, the scores returned in kgeval's node order."""
        data, node_id, relation_id = self.data(graph)
        nodes = graph.num_nodes
        fixed = node_id[known][:, None].expand(-1, nodes)
        candidates = torch.arange(nodes, device=known.device).expand(len(known), -1)
        head_column, tail_column = (fixed, candidates) if tails else (candidates, fixed)
        batch = torch.stack([head_column, tail_column, relation_id[relations][:, None].expand(-1, nodes)], dim=-1)
        return self.model(data, batch)[:, node_id]


def _first_appearance(ids: torch.Tensor, count: int) -> torch.Tensor:
    """(count,) LongTensor: each id's number by its first appearance in ``ids`` (ids that never appear after, in
    their order), as ULTRA's loaders number a file's labels."""
    first = torch.full((count,), len(ids), dtype=torch.long)
    first.scatter_reduce_(0, ids, torch.arange(len(ids)), "amin")
    order = torch.sort(first, stable=True).indices  # new id -> kgeval id
    renumbered = torch.empty(count, dtype=torch.long)
    renumbered[order] = torch.arange(count)
    return renumbered


def _check_inverse_edges(graph: Graph) -> None:
    """ValueError unless the graph's second half of edges is the first half inverted, ``(t, r + R, h)`` with R half
    its relations (what :meth:`kgeval.graphs.Graph.with_inverse_edges` gives, as ULTRA's datasets build it)."""
    triples = graph.triples
    half, relations = len(triples) // 2, graph.num_relations // 2
    inverted = triples[:half, [2, 1, 0]] + torch.tensor([0, relations, 0], device=triples.device)
    if len(triples) % 2 or graph.num_relations % 2 or not torch.equal(triples[half:], inverted):
        raise ValueError(f"UltraAdapter needs the graph with its inverse edges (t, r + R, h) after its edges, as "
                         "ULTRA builds it: evaluate on_graphs(UltraAdapter(model), ...), or pass "
                         f"graph.with_inverse_edges() (graph {graph.name!r} has {len(triples)} edges and "
                         f"{graph.num_relations} relations)")  # fmt: skip
