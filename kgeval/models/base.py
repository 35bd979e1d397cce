"""The built-in models' shared machinery: a score is a similarity between a query built from two ids and a
candidate vector of the third (:class:`QueryCandidateModule`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from kgeval.typing import Target

__all__ = [
    "QueryCandidateModule",
    "as_complex",
    "as_real",
    "make_generator",
    "xavier_uniform_",
]

#: (query, candidate relation) pairs scored at once by :meth:`QueryCandidateModule.score_r` (bounds its temporaries)
RELATION_PAIRS_PER_STEP = 2**16


class QueryCandidateModule(nn.Module):
    """Base class of the built-in models (see Notes).

    Parameters
    ----------
    num_entities, num_relations : int
        Numbers of entities and relations (ids ``0 .. n - 1``).
    dim : int
        Embedding dimension (complex dimension for complex models).

    Notes
    -----
    Tail prediction scores a query q(h, r) against candidates c(e), head prediction q'(r, t) against c'(e); the
    similarity is ``"dot"`` (q . c), ``"l2"`` (-||q - c||_2) or ``"l1"`` (-||q - c||_1). A subclass implements
    ``_query`` (and ``_candidate_matrix`` if its candidates are not the entity embeddings); this class turns it
    into PyKEEN's scoring methods (``score_hrt``, ``score_t``, ``score_h``, ``score_r`` with optional candidate
    ids) and into kgeval's fast path (``kgeval_similarity``, ``kgeval_query``, ``kgeval_candidates``): one GEMM for
    "dot", ``torch.cdist`` (no (B, E, d) temporary) for the distances. Relations are ranked through ``score_r``.
    """

    #: how query and candidates combine: "dot", "l2" or "l1"
    kgeval_similarity: str = "dot"
    #: the subclasses' (E, d) entity and (R, d) relation tables
    entity_embeddings: nn.Embedding
    relation_embeddings: nn.Embedding

    def __init__(self, num_entities: int, num_relations: int, dim: int) -> None:
        super().__init__()
        sizes = {"num_entities": num_entities, "num_relations": num_relations, "dim": dim}
        for arg_name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg_name} must be a positive int, got {value!r}")
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.dim = dim

    # -- to implement ----------------------------------------------------------------------------------------
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise ``entity_embeddings`` and ``relation_embeddings`` with Xavier-uniform values."""
        xavier_uniform_(self.entity_embeddings.weight, generator)
        xavier_uniform_(self.relation_embeddings.weight, generator)

    def _query(self, first: torch.Tensor, second: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d') query vectors from id columns: (h, r) for target "tail", (r, t) for "head"."""
        raise NotImplementedError

    def _candidate_matrix(self) -> torch.Tensor:
        """(E, d') candidate vectors (the same for both targets)."""
        return self.entity_embeddings.weight

    def _relation_query(self, heads: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        """(B, d'') query vectors of (h, ?, t) whose similarity (``kgeval_similarity``) with the rows of
        :meth:`_relation_candidates` orders the relations like the scores; implemented by models whose relations
        take that form (then relation prediction has the GEMM fast path)."""
        raise NotImplementedError

    def _relation_candidates(self) -> torch.Tensor:
        """(R, d'') relation candidate vectors (with :meth:`_relation_query`)."""
        return self.relation_embeddings.weight

    @property
    def kgeval_targets(self) -> tuple[Target, ...]:
        """The targets the query/candidate form serves: head and tail, and relation where the model has one."""
        has_relation_form = type(self)._relation_query is not QueryCandidateModule._relation_query
        return ("head", "tail", "relation") if has_relation_form else ("head", "tail")

    # -- GEMM fast-path protocol -----------------------------------------------------------------------------
    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """Query vectors of shape (B, d') for a (B, 2) batch: (h, r) pairs for ``target="tail"``, (r, t) for
        ``target="head"``, (h, t) for ``target="relation"`` where the model has that form (the layouts of
        score_t / score_h / score_r)."""
        _check_target(target, self.kgeval_targets)
        _check_batch(batch, 2, {"tail": "hr_batch", "head": "rt_batch", "relation": "ht_batch"}[target])
        if target == "relation":
            return self._relation_query(batch[:, 0], batch[:, 1])
        return self._query(batch[:, 0], batch[:, 1], target)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        """Candidate vectors: (E, d') for the entity targets (row e belongs to entity e), (R, d'') for relations."""
        _check_target(target, self.kgeval_targets)
        return self._relation_candidates() if target == "relation" else self._candidate_matrix()

    # -- scoring protocol ------------------------------------------------------------------------------------
    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """Scores of triples: LongTensor (B, 3) of (head, relation, tail) ids -> FloatTensor (B,)."""
        _check_batch(hrt_batch, 3, "hrt_batch")
        query = self._query(hrt_batch[:, 0], hrt_batch[:, 1], "tail")
        # an embedding lookup, not indexing: its backward is deterministic (training must be reproducible)
        candidates = functional.embedding(hrt_batch[:, 2], self._candidate_matrix())
        return self._rowwise(query, candidates)

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of (h, r, e) for every candidate tail e.

        Parameters
        ----------
        hr_batch : LongTensor of shape (B, 2)
            (head, relation) ids.
        tails : LongTensor of shape (k,) or (B, k), default=None
            Candidate tail ids: shared by all rows (1-d) or one list per row (2-d). None means all entities.

        Returns
        -------
        FloatTensor of shape (B, E), or (B, k) when ``tails`` is given.
        """
        return self._score_all(self.kgeval_query(hr_batch, "tail"), tails)

    def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of (e, r, t) for every candidate head e; ``rt_batch`` (B, 2) holds (relation, tail) ids and
        ``heads`` works like ``tails`` of :meth:`score_t`."""
        return self._score_all(self.kgeval_query(rt_batch, "head"), heads)

    def score_r(self, ht_batch: torch.Tensor, relations: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of (h, r', t) for every candidate relation r' (relation prediction).

        Parameters
        ----------
        ht_batch : LongTensor of shape (B, 2)
            (head, tail) ids.
        relations : LongTensor of shape (k,) or (B, k), default=None
            Candidate relation ids, shared or per row. None means all relations.

        Returns
        -------
        FloatTensor of shape (B, num_relations), or (B, k) when ``relations`` is given; entry (i, j) equals
        ``score_hrt`` of (h_i, r_j, t_i).
        """
        if "relation" in self.kgeval_targets:
            return self._score_all(self.kgeval_query(ht_batch, "relation"), relations, self._relation_candidates())
        _check_batch(ht_batch, 2, "ht_batch")
        size = ht_batch.shape[0]
        ids = torch.arange(self.num_relations, device=ht_batch.device) if relations is None else relations
        if ids.ndim == 1:
            ids = ids.unsqueeze(0).expand(size, -1)
        elif ids.ndim != 2 or ids.shape[0] != size:
            raise ValueError(f"relations must have shape (k,) or ({size}, k), got {tuple(ids.shape)}")
        width = ids.shape[1]
        step = max(1, RELATION_PAIRS_PER_STEP // max(1, width))
        parts = []
        for start in range(0, size, step):
            rows = ht_batch[start : start + step]
            heads = rows[:, :1].expand(-1, width).reshape(-1)
            tails = rows[:, 1:].expand(-1, width).reshape(-1)
            query = self._query(heads, ids[start : start + step].reshape(-1), "tail")
            candidates = functional.embedding(tails, self._candidate_matrix())
            parts.append(self._rowwise(query, candidates).view(-1, width))
        if not parts:
            return self._candidate_matrix().new_zeros((0, width))
        return torch.cat(parts)

    def _score_all(
        self, query: torch.Tensor, ids: torch.Tensor | None, matrix: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Scores of (B, d') queries against all candidates (rows of ``matrix``, default the entities), shared ids
        (k,) or per-row ids (B, k)."""
        matrix = self._candidate_matrix() if matrix is None else matrix
        if ids is None or ids.ndim == 1:
            candidates = matrix if ids is None else functional.embedding(ids, matrix)
            if self.kgeval_similarity == "dot":
                return query @ candidates.T
            return -_distances(query, candidates, 1.0 if self.kgeval_similarity == "l1" else 2.0)
        if ids.ndim == 2 and ids.shape[0] == query.shape[0]:
            return self._rowwise(query.unsqueeze(1), functional.embedding(ids, matrix))
        raise ValueError(f"candidate ids must have shape (k,) or ({query.shape[0]}, k), got {tuple(ids.shape)}")

    def _rowwise(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Similarity along the last dimension of broadcastable query and candidate tensors."""
        if self.kgeval_similarity == "dot":
            return (query * candidates).sum(dim=-1)
        return -torch.linalg.vector_norm(query - candidates, ord=1 if self.kgeval_similarity == "l1" else 2, dim=-1)

    def extra_repr(self) -> str:
        return f"num_entities={self.num_entities}, num_relations={self.num_relations}, dim={self.dim}"


def xavier_uniform_(weight: torch.Tensor, generator: torch.Generator | None) -> None:
    """Xavier-uniform initialisation in place (no autograd)."""
    with torch.no_grad():
        nn.init.xavier_uniform_(weight, generator=generator)


def make_generator(seed: int | None) -> torch.Generator | None:
    """A seeded CPU generator, or None for the global one."""
    return None if seed is None else torch.Generator().manual_seed(seed)


def as_complex(weight: torch.Tensor) -> torch.Tensor:
    """A (n, 2d) real tensor of interleaved (real, imaginary) parts viewed as (n, d) complex."""
    return torch.view_as_complex(weight.reshape(*weight.shape[:-1], -1, 2))


def as_real(values: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`as_complex`: (n, d) complex -> (n, 2d) interleaved real."""
    return torch.view_as_real(values).flatten(start_dim=-2)


def _check_batch(batch: torch.Tensor, width: int, name: str) -> None:
    """Raise ValueError unless ``batch`` is a 2-d tensor with ``width`` columns."""
    if batch.ndim != 2 or batch.shape[1] != width:
        raise ValueError(f"{name} must have shape (B, {width}), got {tuple(batch.shape)}")


def _check_target(target: str, served: tuple[str, ...] = ("head", "tail")) -> None:
    if target not in served:
        raise ValueError(f"target must be one of {served}, got {target!r}")


def _distances(query: torch.Tensor, candidates: torch.Tensor, p: float) -> torch.Tensor:
    """(B, E) p-norm distances of (B, d) queries to (E, d) candidates, computed directly -- never through torch's
    matmul expansion of ||q - c||^2 (torch.cdist's default beyond 25 rows), so that a score depends neither on how
    many rows are scored at once nor cancels for vectors far from the origin. Euclidean distances of half-precision
    vectors, which torch's direct kernel does not take on the CPU, are computed in float32 and rounded back."""
    dtype = query.dtype
    if p == 2.0 and dtype in (torch.float16, torch.bfloat16):
        return _distances(query.float(), candidates.float(), p).to(dtype)
    return torch.cdist(query, candidates, p=p, compute_mode="donot_use_mm_for_euclid_dist")
