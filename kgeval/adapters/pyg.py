"""PyTorch Geometric integration: ``torch_geometric.nn.kge`` models evaluated unchanged, through their own
``forward`` or, for the four models PyG ships, the query/candidate fast path (:func:`pyg_view`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn.kge import ComplEx, DistMult, KGEModel, RotatE, TransE

from kgeval.adapters.overrides import foreign_override
from kgeval.adapters.wrappers import eager_call
from kgeval.typing import Target

__all__ = [
    "PyGComplEx",
    "PyGDistMult",
    "PyGRotatE",
    "PyGScoring",
    "PyGTransE",
    "pyg_view",
]


def pyg_view(model: KGEModel) -> PyGScoring:
    """kgeval's model protocol over a PyG KGE model, with the query/candidate form for the shipped models.

    Whole triples are scored by the model's ``forward(head_index, rel_type, tail_index)`` (with
    ``fast_path=False`` and for models without a GEMM form); the shipped models get the fast path, read from their
    embeddings:

    =========  ==================================  ==================================  ==========
    model      tail query                          head query                          similarity
    =========  ==================================  ==================================  ==========
    DistMult   h ∘ r                               r ∘ t                               dot
    ComplEx    [h_re r_re - h_im r_im,             [r_re t_re + r_im t_im,             dot
               h_im r_re + h_re r_im]              r_re t_im - r_im t_re]
    TransE     n(h) + r   (n: PyG's p-normalise)   n(t) - r                            l1 / l2 (p_norm)
    RotatE     h ∘ e^{iθ} as [re, im]              t ∘ e^{-iθ} as [re, im]             l2
    =========  ==================================  ==================================  ==========

    Ranks equal those of the model's ``forward`` except where two scores differ by float rounding only. A subclass
    gets the fast path of the shipped model it derives from unless it redefines ``forward``: then its own
    ``forward`` scores it.
    """
    views = {DistMult: PyGDistMult, ComplEx: PyGComplEx, TransE: PyGTransE, RotatE: PyGRotatE}
    kind = next((cls for cls in type(model).__mro__ if cls in views), None)  # the shipped model it derives from
    if kind is None or (kind is TransE and model.p_norm not in (1, 2)):
        return PyGScoring(model)
    overridden = foreign_override(model, ("forward", "__call__"), "torch_geometric")
    if overridden is not None:  # a subclass that scores differently keeps its own forward
        return PyGScoring(model, refusal=f"{overridden} redefines PyG's {kind.__name__} scoring")
    return views[kind](model)


class PyGScoring:
    """A PyG KGE model's triple scores for kgeval (its ``forward``), with PyG's entity and relation counts;
    ``kgeval_form_refused`` says why a shipped model's fast path is not used (None: it is, or there is none)."""

    def __init__(self, model: KGEModel, refusal: str | None = None) -> None:
        self.model = model
        self.kgeval_form_refused = refusal
        self.num_entities = model.num_nodes
        self.num_relations = model.num_relations

    @property
    def device(self) -> torch.device:
        return self.model.node_emb.weight.device

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """(n,) scores of (h, r, t) rows: the model's own ``forward`` (uncompiled, for a model compiled in place)."""
        return eager_call(self.model)(hrt_batch[:, 0], hrt_batch[:, 1], hrt_batch[:, 2])


class PyGDistMult(PyGScoring):
    kgeval_similarity = "dot"

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        return self.model.node_emb.weight

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        entity, relation = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        return self.model.node_emb(entity) * self.model.rel_emb(relation)


class _ComplexEmbeddings(PyGScoring):
    """PyG models with real and imaginary entity embeddings (``node_emb``, ``node_emb_im``): candidates are the
    concatenated [re, im] vectors."""

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        return torch.cat([self.model.node_emb.weight, self.model.node_emb_im.weight], dim=1)

    def _query_parts(self, batch: torch.Tensor, target: Target) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(re, im) embeddings of each query's entity, and its relation ids."""
        entity, relation = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        return self.model.node_emb(entity), self.model.node_emb_im(entity), relation


class PyGComplEx(_ComplexEmbeddings):
    kgeval_similarity = "dot"

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        e_re, e_im, relation = self._query_parts(batch, target)
        r_re, r_im = self.model.rel_emb(relation), self.model.rel_emb_im(relation)
        if target == "tail":  # coefficients of t_re and t_im
            return torch.cat([e_re * r_re - e_im * r_im, e_im * r_re + e_re * r_im], dim=1)
        return torch.cat([r_re * e_re + r_im * e_im, r_re * e_im - r_im * e_re], dim=1)  # of h_re and h_im


class PyGTransE(PyGScoring):
    def __init__(self, model: KGEModel) -> None:
        super().__init__(model)
        self.kgeval_similarity = {1: "l1", 2: "l2"}[model.p_norm]

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        vectors = self.model.node_emb.weight if ids is None else self.model.node_emb(ids)
        return F.normalize(vectors, p=self.model.p_norm, dim=-1)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        return self._entities(None)

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return self._entities(batch[:, 0]) + self.model.rel_emb(batch[:, 1])
        return self._entities(batch[:, 1]) - self.model.rel_emb(batch[:, 0])


class PyGRotatE(_ComplexEmbeddings):
    kgeval_similarity = "l2"

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        e_re, e_im, relation = self._query_parts(batch, target)
        theta = self.model.rel_emb(relation)
        r_re, r_im = torch.cos(theta), torch.sin(theta)
        if target == "head":  # |h r - t| = |h - t conj(r)| since |r| = 1
            r_im = -r_im
        return torch.cat([r_re * e_re - r_im * e_im, r_re * e_im + r_im * e_re], dim=1)
