"""Bilinear models: DistMult, ComplEx, RESCAL -- scores are dot products of a query and an entity vector."""

from __future__ import annotations

import torch
from torch import nn

from kgeval.models.base import QueryCandidateModule, as_complex, as_real, make_generator
from kgeval.typing import Target

__all__ = [
    "RESCAL",
    "ComplEx",
    "DistMult",
]

#: RESCAL queries computed at once: their gathered (chunk, d, d) relation matrices stay in cache (gathering a
#: 1,024-query batch's matrices at once took a fifth of a WN18RR evaluation, dim 100)
QUERY_CHUNK = 128
#: RESCAL multiplies by relation when a batch has at least this many queries per distinct relation
GROUP_MIN_QUERIES_PER_RELATION = 2


class DistMult(QueryCandidateModule):
    """DistMult (Yang et al., 2015): score(h, r, t) = Σ_i h_i · r_i · t_i.

    Parameters
    ----------
    num_entities : int
        Number of entities E (ids ``0 .. E - 1``).
    num_relations : int
        Number of relations R (ids ``0 .. R - 1``).
    dim : int, default=64
        Embedding dimension d.
    seed : int, default=None
        Seed of the Xavier-uniform initialisation; None draws from the global torch generator.

    Attributes
    ----------
    entity_embeddings : nn.Embedding of shape (E, d)
    relation_embeddings : nn.Embedding of shape (R, d)

    Notes
    -----
    Fast path: tail query h ∘ r, head query r ∘ t, candidates the entity embeddings, similarity "dot", so
    ``kgeval_query(hr, "tail") @ kgeval_candidates("tail").T == score_t(hr)``.

    Examples
    --------
    >>> model = DistMult(num_entities=5, num_relations=2, dim=8, seed=0)
    >>> model.score_t(torch.tensor([[0, 1], [3, 0]])).shape
    torch.Size([2, 5])
    >>> model.score_t(torch.tensor([[0, 1]]), tails=torch.tensor([4, 2])).shape
    torch.Size([1, 2])
    """

    kgeval_similarity = "dot"

    def __init__(self, num_entities: int, num_relations: int, dim: int = 64, seed: int | None = None) -> None:
        super().__init__(num_entities, num_relations, dim)
        self.entity_embeddings = nn.Embedding(num_entities, dim)
        self.relation_embeddings = nn.Embedding(num_relations, dim)
        self.reset_parameters(generator=make_generator(seed))

    def _query(self, first: torch.Tensor, second: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return self.entity_embeddings(first) * self.relation_embeddings(second)
        return self.relation_embeddings(first) * self.entity_embeddings(second)

    def _relation_query(self, heads: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        return self.entity_embeddings(heads) * self.entity_embeddings(tails)  # (h ∘ t) . r


class ComplEx(QueryCandidateModule):
    """ComplEx (Trouillon et al., 2016): score(h, r, t) = Re(Σ_i h_i · r_i · conj(t_i)), complex embeddings.

    Parameters
    ----------
    num_entities, num_relations : int
    dim : int, default=32
        Complex dimension d; stored as 2d interleaved (real, imaginary) reals.
    seed : int, default=None

    Attributes
    ----------
    entity_embeddings : nn.Embedding of shape (E, 2d)
    relation_embeddings : nn.Embedding of shape (R, 2d)

    Notes
    -----
    Fast path ("dot" on the real views): tail query h ∘ r, head query conj(r) ∘ t, since
    Re(h r conj(t)) = Re((h r) conj(t)) = Re(h conj(conj(r) t)) and Re(a conj(b)) is the real dot product of the
    (real, imaginary) views of a and b.
    """

    kgeval_similarity = "dot"

    def __init__(self, num_entities: int, num_relations: int, dim: int = 32, seed: int | None = None) -> None:
        super().__init__(num_entities, num_relations, dim)
        self.entity_embeddings = nn.Embedding(num_entities, 2 * dim)
        self.relation_embeddings = nn.Embedding(num_relations, 2 * dim)
        self.reset_parameters(generator=make_generator(seed))

    def _query(self, first: torch.Tensor, second: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            head, relation = as_complex(self.entity_embeddings(first)), as_complex(self.relation_embeddings(second))
            return as_real(head * relation)
        relation, tail = as_complex(self.relation_embeddings(first)), as_complex(self.entity_embeddings(second))
        return as_real(relation.conj() * tail)

    def _relation_query(self, heads: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        """Re(h r conj(t)) = Re(r conj(conj(h) t)): the real dot product of r's view with conj(h) ∘ t's."""
        head, tail = as_complex(self.entity_embeddings(heads)), as_complex(self.entity_embeddings(tails))
        return as_real(head.conj() * tail)


class RESCAL(QueryCandidateModule):
    """RESCAL (Nickel et al., 2011): score(h, r, t) = h^T M_r t with a full (d, d) matrix per relation.

    Parameters
    ----------
    num_entities, num_relations : int
    dim : int, default=32
    seed : int, default=None

    Attributes
    ----------
    entity_embeddings : nn.Embedding of shape (E, d)
    relation_embeddings : nn.Embedding of shape (R, d * d)
        Row r is M_r flattened row-major.

    Notes
    -----
    Fast path ("dot"): tail query h^T M_r, head query M_r t.
    """

    kgeval_similarity = "dot"

    def __init__(self, num_entities: int, num_relations: int, dim: int = 32, seed: int | None = None) -> None:
        super().__init__(num_entities, num_relations, dim)
        self.entity_embeddings = nn.Embedding(num_entities, dim)
        self.relation_embeddings = nn.Embedding(num_relations, dim * dim)
        self.reset_parameters(generator=make_generator(seed))

    def _matrices(self, relations: torch.Tensor) -> torch.Tensor:
        return self.relation_embeddings(relations).view(-1, self.dim, self.dim)

    def _query(self, first: torch.Tensor, second: torch.Tensor, target: Target) -> torch.Tensor:
        """Tail queries h^T M_r, head queries M_r t, shape (B, d). Queries sharing a relation are multiplied by its
        matrix in one GEMM when a batch has few relations for its size (gathering one d x d matrix per query
        copied B d^2 floats: a quarter of an FB15k-237 RESCAL evaluation); otherwise in chunks of batched
        products."""
        relations, entities = (second, first) if target == "tail" else (first, second)
        distinct, counts = torch.unique(relations, return_counts=True)
        if relations.numel() >= GROUP_MIN_QUERIES_PER_RELATION * distinct.numel():
            return self._query_by_relation(self.entity_embeddings(entities), relations, distinct, counts, target)
        parts = []
        for start in range(0, first.numel(), QUERY_CHUNK):
            a, b = first[start : start + QUERY_CHUNK], second[start : start + QUERY_CHUNK]
            if target == "tail":
                parts.append(torch.bmm(self.entity_embeddings(a).unsqueeze(1), self._matrices(b)).squeeze(1))
            else:
                parts.append(torch.bmm(self._matrices(a), self.entity_embeddings(b).unsqueeze(2)).squeeze(2))
        return torch.cat(parts) if parts else self.entity_embeddings.weight.new_empty(0, self.dim)

    def _relation_query(self, heads: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        """h^T M_r t = vec(h t^T) . vec(M_r) (row-major, as the relation rows are stored): (B, d * d) queries."""
        outer = self.entity_embeddings(heads).unsqueeze(2) * self.entity_embeddings(tails).unsqueeze(1)
        return outer.reshape(heads.shape[0], self.dim * self.dim)

    def _query_by_relation(
        self,
        vectors: torch.Tensor,
        relations: torch.Tensor,
        distinct: torch.Tensor,
        counts: torch.Tensor,
        target: Target,
    ) -> torch.Tensor:
        """(B, d) entity vectors times their relation's matrix (from the left for tails, v^T M_r; from the right
        for heads, M_r v = v^T M_r^T), one GEMM per distinct relation (``distinct``, sorted, with their
        ``counts``: ``torch.unique`` of ``relations``)."""
        matrices = self.relation_embeddings.weight.view(-1, self.dim, self.dim)
        order = torch.argsort(relations, stable=True)  # rows grouped by relation, in the order of ``distinct``
        query = vectors.new_empty(vectors.shape)
        for relation, rows in zip(distinct.tolist(), torch.split(order, counts.tolist()), strict=True):
            matrix = matrices[relation] if target == "tail" else matrices[relation].T
            query[rows] = vectors[rows] @ matrix
        return query
