"""A graph-conditioned baseline without learned parameters (:class:`NeighbourhoodBaseline`): it scores the
entities of any graph from that graph's edges alone, so it runs on every inductive set, new relations included
(kgeval's graph-conditioned form, :mod:`kgeval.adapters.graph`)."""

from __future__ import annotations

import warnings
import weakref

import torch
from torch import nn

from kgeval.graphs import Graph

__all__ = ["NeighbourhoodBaseline"]


class NeighbourhoodBaseline(nn.Module):
    """Score a tail candidate t of a query (h, r) in a graph G by how close t is to h and how often t answers r:

        score(h, r, t | G) = 2 s(a(h, t)) + s(w(h, t)) + s(n_r(t)),    s(c) = c / (c + 1)

    - a(h, t): the edges between h and t, either direction, any relation;
    - w(h, t): the walks h - x - t of two edges, either direction (0 for t = h);
    - n_r(t): the edges of relation r into t (t's count as a tail of r in G).

    Head candidates mirror it: a(t, h), w(t, h) and the edges of r out of h. Deterministic, no training, no
    entity or relation embeddings: the scores of a graph are functions of its edges, so a new relation is scored
    from its own edges in the graph. The counts are exact integers and every operation is correctly rounded, so
    a query's scores are the same in any batch (and by either way of
    counting, :attr:`sparse_products_from`). Entities with equal counts tie (use realistic ranks).
    """

    anchor: torch.Tensor  #: an empty buffer, on the device the model is moved to
    #: from this many queries a call, the counts come from sparse-sparse products (else sparse-dense ones): the same
    #: integers either way, so the same scores
    sparse_products_from: int = 64

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("anchor", torch.zeros(0), persistent=False)  # the device the graph is scored on
        self._counts: weakref.WeakKeyDictionary[Graph, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = (
            weakref.WeakKeyDictionary())  # fmt: skip

    @property
    def device(self) -> torch.device:
        return self.anchor.device

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        """(B, graph.num_nodes) scores of (h, r, e) for every node e."""
        adjacency, incoming, _ = self.counts(graph)
        return self._scores(adjacency, hr_batch[:, 0], incoming[hr_batch[:, 1]])

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        """(B, graph.num_nodes) scores of (e, r, t) for every node e."""
        adjacency, _, outgoing = self.counts(graph)
        return self._scores(adjacency, rt_batch[:, 1], outgoing[rt_batch[:, 0]])

    def counts(self, graph: Graph) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the (N, N) sparse count of edges between two nodes, either direction; the (R, N) count of each
        relation's edges into each node; out of each node), computed once per graph (as ordinary tensors, even when
        first asked for inside ``torch.inference_mode``, so later evaluations in any mode may use them)."""
        if graph not in self._counts:
            with torch.inference_mode(False), torch.no_grad():
                self._counts[graph] = self._count(graph)
        return self._counts[graph]

    @staticmethod
    def _count(graph: Graph) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        heads, relations, tails = graph.triples.clone().T  # a copy: the graph's tensors may be inference tensors
        ones = torch.ones(len(heads), device=graph.device)
        adjacency = torch.sparse_coo_tensor(torch.stack([torch.cat([heads, tails]), torch.cat([tails, heads])]),
                                            torch.cat([ones, ones]), (graph.num_nodes,) * 2,
                                            check_invariants=True).coalesce()  # fmt: skip
        shape = (graph.num_relations, graph.num_nodes)
        incoming = torch.zeros(shape, device=graph.device).index_put_((relations, tails), ones, accumulate=True)
        outgoing = torch.zeros(shape, device=graph.device).index_put_((relations, heads), ones, accumulate=True)
        return adjacency, incoming, outgoing

    def _scores(self, adjacency: torch.Tensor, anchors: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """2 s(a) + s(w) + s(n) per (query, node), from the anchors' adjacency rows and the queries' typed counts."""
        queries = torch.arange(len(anchors), device=anchors.device)
        if len(anchors) >= self.sparse_products_from:
            direct, walks = _sparse_products(adjacency, anchors, queries)
        else:  # a few queries: sparse-dense products (the sparse-sparse ones cost ~30 ms a call on a CPU)
            one_hot = torch.zeros(adjacency.shape[0], len(anchors), device=adjacency.device)
            one_hot[anchors, queries] = 1  # (N, B); the adjacency is symmetric: the product picks the anchors' rows
            direct = torch.sparse.mm(adjacency, one_hot).T  # (B, N): a(anchor, e)
            walks = torch.sparse.mm(adjacency, direct.T).T  # (B, N): sum over x of a(anchor, x) a(x, e)
        walks[queries, anchors] = 0

        def saturated(count: torch.Tensor) -> torch.Tensor:
            return count / (count + 1)

        return 2 * saturated(direct) + saturated(walks) + saturated(typed)


def _sparse_products(adjacency: torch.Tensor, anchors: torch.Tensor,
                     queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(a(anchor, e), sum over x of a(anchor, x) a(x, e)) as dense (B, N) tensors, by sparse-sparse products."""
    ones = torch.ones(len(anchors), device=anchors.device)
    picks = torch.sparse_coo_tensor(torch.stack([queries, anchors]), ones, (len(anchors), adjacency.shape[0]),
                                    check_invariants=True)  # (B, N): a 1 at each query's anchor  # fmt: skip
    with warnings.catch_warnings():  # torch's sparse-sparse product announces its CSR kernels as beta
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        reached = torch.sparse.mm(picks, adjacency)
        walked = torch.sparse.mm(reached, adjacency)
    return reached.to_dense(), walked.to_dense()
