"""Reference knowledge-graph-embedding models implementing the kgeval model protocol.

kgeval evaluates any object with ``score_t`` / ``score_h`` (PyKEEN's signatures, see ``DESIGN.md``); the
models here are small, seeded implementations for demos, tests and benchmarks. Each one documents its score
function and, where its scores are a matrix product, exposes the GEMM fast-path protocol described in
:class:`DistMult`.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

__all__ = ["DistMult"]

Target = Literal["head", "tail"]


class DistMult(nn.Module):
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
    num_entities, num_relations, dim : int
    entity_embeddings : nn.Embedding of shape (E, d)
    relation_embeddings : nn.Embedding of shape (R, d)

    Notes
    -----
    **Scoring protocol** (PyKEEN-compatible): :meth:`score_t`, :meth:`score_h` score one query against all
    entities (or against the candidate ids passed as ``tails`` / ``heads``), :meth:`score_hrt` scores triples.

    **GEMM fast-path protocol.** A model whose scores are a similarity between a query vector and a candidate
    vector may expose it, and kgeval then computes scores as one matrix product per candidate slice instead of
    calling ``score_t`` / ``score_h``:

    - ``kgeval_similarity : str``: how query and candidates combine; ``"dot"`` means
      ``scores = query @ candidates.T``.
    - ``kgeval_query(batch, target) -> FloatTensor of shape (B, d)``: for ``target="tail"`` the batch
      holds (h, r) pairs, for ``target="head"`` it holds (r, t) pairs (the layout of ``score_t`` /
      ``score_h``).
    - ``kgeval_candidates(target) -> FloatTensor of shape (E, d)``: row e is the candidate vector of
      entity e.

    For DistMult the tail query is h ∘ r, the head query is r ∘ t, and the candidates are the entity
    embeddings for both targets, so ``kgeval_query(hr, "tail") @ kgeval_candidates("tail").T == score_t(hr)``.

    Examples
    --------
    >>> model = DistMult(num_entities=5, num_relations=2, dim=8, seed=0)
    >>> model.score_t(torch.tensor([[0, 1], [3, 0]])).shape
    torch.Size([2, 5])
    >>> model.score_t(torch.tensor([[0, 1]]), tails=torch.tensor([4, 2])).shape
    torch.Size([1, 2])
    """

    #: How kgeval combines :meth:`kgeval_query` and :meth:`kgeval_candidates`: ``query @ candidates.T``.
    kgeval_similarity: str = "dot"

    def __init__(self, num_entities: int, num_relations: int, dim: int = 64, seed: int | None = None) -> None:
        super().__init__()
        sizes = {"num_entities": num_entities, "num_relations": num_relations, "dim": dim}
        for arg_name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg_name} must be a positive int, got {value!r}")
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.dim = dim
        self.entity_embeddings = nn.Embedding(num_entities, dim)
        self.relation_embeddings = nn.Embedding(num_relations, dim)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        self.reset_parameters(generator=generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise both embedding matrices with Xavier-uniform values.

        Parameters
        ----------
        generator : torch.Generator, default=None
            Random source; None uses the global torch generator.
        """
        with torch.no_grad():
            nn.init.xavier_uniform_(self.entity_embeddings.weight, generator=generator)
            nn.init.xavier_uniform_(self.relation_embeddings.weight, generator=generator)

    # -- scoring protocol ----------------------------------------------------------------------------------

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """Score triples.

        Parameters
        ----------
        hrt_batch : LongTensor of shape (B, 3)
            (head, relation, tail) ids.

        Returns
        -------
        FloatTensor of shape (B,)
        """
        _check_batch(hrt_batch, 3, "hrt_batch")
        h = self.entity_embeddings(hrt_batch[:, 0])
        r = self.relation_embeddings(hrt_batch[:, 1])
        t = self.entity_embeddings(hrt_batch[:, 2])
        return (h * r * t).sum(dim=-1)

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        """Score (h, r, e) for every candidate tail e.

        Parameters
        ----------
        hr_batch : LongTensor of shape (B, 2)
            (head, relation) ids.
        tails : LongTensor of shape (k,) or (B, k), default=None
            Candidate tail ids: shared by all rows (1-d) or one list per row (2-d). None means all entities.

        Returns
        -------
        FloatTensor of shape (B, E), or (B, k) when ``tails`` is given (column j scores candidate
        ``tails[j]``, or ``tails[i, j]`` in row i).
        """
        return self._score_all(self.kgeval_query(hr_batch, "tail"), tails)

    def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        """Score (e, r, t) for every candidate head e.

        Parameters
        ----------
        rt_batch : LongTensor of shape (B, 2)
            (relation, tail) ids.
        heads : LongTensor of shape (k,) or (B, k), default=None
            Candidate head ids: shared by all rows (1-d) or one list per row (2-d). None means all entities.

        Returns
        -------
        FloatTensor of shape (B, E), or (B, k) when ``heads`` is given.
        """
        return self._score_all(self.kgeval_query(rt_batch, "head"), heads)

    # -- GEMM fast-path protocol ---------------------------------------------------------------------------

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """Query vectors of the fast path: h ∘ r for ``target="tail"``, r ∘ t for ``target="head"``.

        Parameters
        ----------
        batch : LongTensor of shape (B, 2)
            (head, relation) ids for ``target="tail"``; (relation, tail) ids for ``target="head"``.
        target : {"head", "tail"}
            The side whose entity is being predicted.

        Returns
        -------
        FloatTensor of shape (B, d)
        """
        if target == "tail":
            _check_batch(batch, 2, "hr_batch")
            return self.entity_embeddings(batch[:, 0]) * self.relation_embeddings(batch[:, 1])
        if target == "head":
            _check_batch(batch, 2, "rt_batch")
            return self.relation_embeddings(batch[:, 0]) * self.entity_embeddings(batch[:, 1])
        raise ValueError(f"target must be 'head' or 'tail', got {target!r}")

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        """Candidate vectors of the fast path: the entity embedding matrix (the same for both targets).

        Parameters
        ----------
        target : {"head", "tail"}

        Returns
        -------
        FloatTensor of shape (E, d)
        """
        if target not in ("head", "tail"):
            raise ValueError(f"target must be 'head' or 'tail', got {target!r}")
        return self.entity_embeddings.weight

    def _score_all(self, query: torch.Tensor, candidates: torch.Tensor | None) -> torch.Tensor:
        """Dot products of (B, d) queries with all entities, shared candidates (k,) or per-row (B, k)."""
        if candidates is None:
            return query @ self.entity_embeddings.weight.T
        if candidates.ndim == 1:
            return query @ self.entity_embeddings(candidates).T
        if candidates.ndim == 2 and candidates.shape[0] == query.shape[0]:
            return torch.einsum("bd,bkd->bk", query, self.entity_embeddings(candidates))
        raise ValueError(f"candidate ids must have shape (k,) or ({query.shape[0]}, k), got {tuple(candidates.shape)}")

    def extra_repr(self) -> str:
        return f"num_entities={self.num_entities}, num_relations={self.num_relations}, dim={self.dim}"


def _check_batch(batch: torch.Tensor, width: int, name: str) -> None:
    """Raise ValueError unless ``batch`` is a 2-d tensor with ``width`` columns."""
    if batch.ndim != 2 or batch.shape[1] != width:
        raise ValueError(f"{name} must have shape (B, {width}), got {tuple(batch.shape)}")
