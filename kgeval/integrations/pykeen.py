"""PyKEEN integration: the GEMM fast path for PyKEEN's DistMult, ComplEx, RESCAL, TransE and RotatE.

A ``pykeen.models.ERModel`` whose interaction is one of those five (one entity and one relation
representation, no inverse triples) is recognised automatically by :func:`kgeval.scoring.make_scorer`; the
adapter reads the embeddings through the model's own representation modules (so normalisers apply as in
PyKEEN's scoring) and builds the queries PyKEEN's interactions imply:

============  ==============  ===================  ==========
interaction   tail query      head query           similarity
============  ==============  ===================  ==========
DistMult      h ∘ r           r ∘ t                dot
ComplEx       h ∘ r           conj(r) ∘ t          dot (real views)
RESCAL        h^T R           R t                  dot
TransE        h + r           t - r                l1 / l2 (p of the interaction)
RotatE        h ∘ r           t ∘ conj(r)          l2 (real views)
============  ==============  ===================  ==========

The ranks equal those of PyKEEN's own ``score_t`` / ``score_h`` except where two scores differ by float rounding
only (the fast path sums in another order; for L2 it ranks 2 q.c - ||c||^2, which orders like -||q - c||).
Anything else -- other interactions, inverse triples, several representations -- returns None, and kgeval
calls the model's ``score_t`` / ``score_h`` as for any model. This module imports PyKEEN only when it is called
with a PyKEEN model.
"""

from __future__ import annotations

from typing import Any

import torch

#: PyKEEN interaction class name -> (similarity, or None when it depends on the interaction's p)
SUPPORTED: dict[str, str | None] = {
    "DistMultInteraction": "dot",
    "ComplExInteraction": "dot",
    "RESCALInteraction": "dot",
    "TransEInteraction": None,
    "RotatEInteraction": "l2",
}


def adapt_pykeen_model(model: Any) -> PyKEENQueryCandidate | None:
    """The query/candidate form of a supported PyKEEN model, or None (see the module docstring)."""
    from pykeen.models import ERModel

    if not isinstance(model, ERModel) or getattr(model, "use_inverse_triples", False):
        return None
    if len(model.entity_representations) != 1 or len(model.relation_representations) != 1:
        return None
    interaction = model.interaction
    kind = type(interaction).__name__
    if kind not in SUPPORTED:
        return None
    similarity = SUPPORTED[kind]
    if kind == "TransEInteraction":
        similarity = {1: "l1", 2: "l2"}.get(interaction.p)
    if kind == "RotatEInteraction" and interaction.p != 2:
        similarity = None
    if similarity is None:
        return None
    return PyKEENQueryCandidate(model, kind, similarity)


class PyKEENQueryCandidate:
    """The kgeval query/candidate protocol over a PyKEEN ERModel (see :class:`kgeval.scoring.QueryCandidateModel`)."""

    def __init__(self, model: Any, kind: str, similarity: str) -> None:
        self.model = model
        self.kind = kind
        self.kgeval_similarity = similarity
        self.num_entities = model.num_entities

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        return self.model.entity_representations[0](indices=ids)

    def _relations(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.relation_representations[0](indices=ids)

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        """The (E, d) entity vectors (real views of complex embeddings)."""
        return _real(self._entities(None))

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail") or (r, t) rows (target "head")."""
        if target == "tail":
            entity, relation = self._entities(batch[:, 0]), self._relations(batch[:, 1])
        else:
            relation, entity = self._relations(batch[:, 0]), self._entities(batch[:, 1])
        return _real(_QUERIES[self.kind](entity, relation, target))


def _complex(x: torch.Tensor) -> torch.Tensor:
    """PyKEEN's ``ensure_complex``: complex tensors as they are, real ones as (..., d/2) complex."""
    return x if x.is_complex() else torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))


def _real(x: torch.Tensor) -> torch.Tensor:
    """(n, d) complex -> (n, 2d) interleaved real; real tensors unchanged."""
    return torch.view_as_real(x).flatten(start_dim=-2) if x.is_complex() else x


def _distmult(entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
    return entity * relation


def _complex_query(entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
    entity, relation = _complex(entity), _complex(relation)
    return entity * relation if target == "tail" else relation.conj() * entity


def _rescal(entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
    if target == "tail":
        return torch.einsum("bd,bde->be", entity, relation)
    return torch.einsum("bde,be->bd", relation, entity)


def _transe(entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
    return entity + relation if target == "tail" else entity - relation


def _rotate(entity: torch.Tensor, relation: torch.Tensor, target: str) -> torch.Tensor:
    entity, relation = _complex(entity), _complex(relation)
    return entity * relation if target == "tail" else entity * relation.conj()


_QUERIES = {
    "DistMultInteraction": _distmult,
    "ComplExInteraction": _complex_query,
    "RESCALInteraction": _rescal,
    "TransEInteraction": _transe,
    "RotatEInteraction": _rotate,
}
