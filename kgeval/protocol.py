"""The model protocol: what kgeval calls on a model, as ``typing.Protocol`` classes (docs/models.md, The model
protocol). A model needs none of these classes as a base: kgeval looks for the methods.

- :class:`ScoringModel`: ``score_t`` / ``score_h`` (and, to rank relations, ``score_r``), PyKEEN's names; with an
  optional candidate-id argument (``tails=`` / ``heads=`` / ``relations=``) kgeval scores in slices.
- :class:`TripleScoringModel`: ``score_hrt`` -- for models that only score whole triples (``forward(h, r, t)`` or
  ``evaluate(..., score_fn=...)`` serve the same purpose).
- :class:`QueryCandidateModel`: the query/candidate form of the fast path -- scores are a similarity between a
  query vector and a candidate vector, so a tile of scores is one matrix multiplication.
- :class:`ShardedCandidateModel`: a query/candidate model whose ranks each hold a shard of the entity table
  (``torch.distributed``).
- :class:`RelationTableModel`: the per-relation candidate table -- scores are a similarity between a query vector
  and a candidate vector transformed by the relation alone (TransR's M_r t, TransH's projection, PairRE's t * r_t),
  so a tile of scores is one matrix multiplication (or cdist) per relation present, against that relation's table.

Models of PyKEEN, PyTorch Geometric, TorchKGE and dicee need none of this: :mod:`kgeval.adapters` gives them the
protocol their own library's scoring implies.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from kgeval.typing import Target

__all__ = [
    "SHARD_METHOD",
    "SIMILARITIES",
    "QueryCandidateModel",
    "RelationTableModel",
    "ScoringModel",
    "ShardedCandidateModel",
    "TripleScoringModel",
]

#: similarities of the query/candidate form: "dot" scores q . c; "l2" and "l1" rank as -||q - c||_2 / -||q - c||_1
SIMILARITIES: tuple[str, ...] = ("dot", "l2", "l1")
#: the method by which a query/candidate model declares the shard of the candidate table it holds
SHARD_METHOD = "kgeval_candidate_shard"


@runtime_checkable
class ScoringModel(Protocol):
    """A model that scores every candidate of a batch of queries; higher is more plausible.

    ``score_t(hr_batch)`` maps (B, 2) (head, relation) ids to the (B, num_entities) scores of (h, r, e) for every
    entity e; ``score_h(rt_batch)`` maps (B, 2) (relation, tail) ids to those of (e, r, t). A method that also takes
    candidate ids (``tails=`` / ``heads=``, a LongTensor (k,); by keyword, or positionally after the batch where
    the parameter is positional-only) returns only those k columns, and kgeval then scores in slices. The number
    of entities is read from ``num_entities`` unless ``evaluate`` is given one. ``score_r(ht_batch, relations=None)``
    (optional) ranks relations.
    """

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor: ...

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class TripleScoringModel(Protocol):
    """A model that scores whole triples: ``score_hrt(hrt_batch)`` maps (n, 3) (h, r, t) ids to (n,) (or PyKEEN's
    (n, 1)) scores. kgeval expands each batch of queries over one candidate slice at a time."""

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class QueryCandidateModel(Protocol):
    """A model whose scores are a similarity between a query vector and a candidate vector.

    ``kgeval_query(batch, target)`` maps a (B, 2) batch ((h, r) for target "tail", (r, t) for "head") to queries of
    shape (B, d); ``kgeval_candidates(target)`` is the (num_entities, d) candidate matrix; ``kgeval_similarity``
    names the similarity: ``"dot"`` (score = query @ candidates.T), ``"l2"`` (the model's scores are a decreasing
    function of the Euclidean distance, e.g. -||q - c||), ``"l1"`` (likewise for the Manhattan distance). Only the
    order of the scores matters for ranks. An optional ``kgeval_targets`` (default ("head", "tail")) names the
    targets the form serves; with "relation", ``kgeval_query`` maps (h, t) pairs and
    ``kgeval_candidates("relation")`` is the (num_relations, d) relation matrix.

    kgeval uses the form only where it computes the scores of the model's own methods (the class check and the
    probe of docs/models.md, The model protocol).
    """

    kgeval_similarity: str

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor: ...

    def kgeval_candidates(self, target: Target) -> torch.Tensor: ...


@runtime_checkable
class ShardedCandidateModel(QueryCandidateModel, Protocol):
    """A query/candidate model of which each ``torch.distributed`` rank holds a shard of the entity table.

    ``kgeval_candidate_shard(target) -> (start, stop)``: the global entity ids whose vectors
    ``kgeval_candidates(target)`` returns on this rank (a (stop - start, d) matrix); the ranks' shards, in rank
    order, tile [0, num_entities). ``kgeval_query`` is then called on each rank with only the queries whose entity
    it holds, and kgeval shares the query vectors (docs/scale.md, Sharded candidates).
    """

    def kgeval_candidate_shard(self, target: Target) -> tuple[int, int]: ...


@runtime_checkable
class RelationTableModel(Protocol):
    """A model whose scores are a similarity between a query vector and a candidate vector that depends on the
    candidate and the query's relation only (a per-relation candidate table).

    ``kgeval_query(batch, target)`` maps a (B, 2) batch ((h, r) for target "tail", (r, t) for "head") to queries
    of shape (B, d), as for :class:`QueryCandidateModel`. ``kgeval_relation_candidates(relation, target,
    entities)`` maps one relation id (an ``int``, the id of the batch's relation column) and a LongTensor (k,) of
    entity ids to the (k, d) candidate vectors of those entities transformed for that relation: tails for target
    "tail", heads for "head". kgeval asks for one candidate slice at a time (k is at most the evaluation's slice
    size), so the memory of a call is bounded; it builds each (relation, slice) table once per batch and scores
    the queries of that relation against it. ``kgeval_similarity`` names the similarity: ``"dot"`` (q . c),
    ``"l2"`` (the model's scores are a decreasing function of ||q - c||_2), ``"l1"`` (likewise for ||q - c||_1).

    Optional attributes: ``kgeval_candidate_bias`` (default False): when True, each candidate row holds one more
    column, the last, a per-candidate bias b added to the similarity -- the model's scores then rank as q . c + b
    ("dot"), -||q - c||_2^2 + b ("l2": the squared distance, as MuRE's) or -||q - c||_1 + b ("l1"); a constant of
    the query (a head bias for tail candidates) is left out, it does not change a query's ranks.
    ``kgeval_table_targets`` names the targets the table serves; without it, a model without
    :class:`QueryCandidateModel`'s form serves its ``kgeval_targets`` (default ("head", "tail")) through the table,
    and a model with that form none.

    A model may have both protocols, the targets split between them: each target is scored through the
    query/candidate form where the form serves it (its ``kgeval_targets``), else through the table where
    ``kgeval_table_targets`` names it, else through the model's own methods. ``kgeval_query`` then gives each
    target the query of what serves it, and ``kgeval_similarity`` is both forms'. (A ConvE-like model: its tails
    have the form, a network of (h, r) against t; its heads the table, the network's vector of each candidate head
    with the relation against t.) kgeval uses the table only where it computes the scores of the model's own
    methods (the class check and the probe of docs/models.md, The model protocol), else the model's own methods
    score it, with a :class:`~kgeval.exceptions.FastPathWarning`.
    """

    kgeval_similarity: str

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor: ...

    def kgeval_relation_candidates(self, relation: int, target: Target, entities: torch.Tensor) -> torch.Tensor: ...
