"""TorchKGE integration: ``torchkge.models`` evaluated unchanged, through their own ``scoring_function`` or, for
TransE and DistMult, the query/candidate fast path (:func:`torchkge_view`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchkge.models import DistMultModel, TransEModel
from torchkge.models.interfaces import Model
from torchkge.utils.dissimilarities import l1_dissimilarity, l2_dissimilarity

from kgeval.adapters.overrides import foreign_override
from kgeval.typing import Target

__all__ = [
    "SCORING_METHODS",
    "TorchKGEDistMult",
    "TorchKGEScoring",
    "TorchKGETransE",
    "torchkge_view",
]

#: the methods through which a TorchKGE model scores (kgeval's own path and TorchKGE's evaluator): a subclass that
#: redefines one may score otherwise than the fast path's formula, so it keeps its own scoring_function
SCORING_METHODS: tuple[str, ...] = (
    "scoring_function", "forward", "normalize_parameters", "get_embeddings", "inference_prepare_candidates",
    "inference_scoring_function",
)  # fmt: skip


def torchkge_view(model: Model) -> TorchKGEScoring:
    """kgeval's model protocol over a TorchKGE model, with the query/candidate form for TransE and DistMult.

    Whole triples are scored by ``scoring_function(h_idx, t_idx, r_idx)`` (TorchKGE's argument order); the fast
    path reads the embeddings with TorchKGE's normalisation (entities to unit L2 norm):

    =========  =====================  =====================  ==========
    model      tail query             head query             similarity
    =========  =====================  =====================  ==========
    TransE     n(h) + r               n(t) - r               l1 / l2 (TorchKGE's L2 is squared: same order)
    DistMult   n(h) ∘ r               r ∘ n(t)               dot
    =========  =====================  =====================  ==========

    TorchKGE's ``LinkPredictionEvaluator`` ranks by #(scores >= the true score), kgeval's pessimistic rank, and
    filters the facts of the graph it evaluates: with the same filter triples the two agree. A subclass of TransE or
    DistMult gets the fast path unless it redefines a scoring method (:data:`SCORING_METHODS`).
    """
    if isinstance(model, TransEModel) and model.dissimilarity in (l1_dissimilarity, l2_dissimilarity):
        view: type[TorchKGEScoring] = TorchKGETransE
    elif isinstance(model, DistMultModel):
        view = TorchKGEDistMult
    else:
        return TorchKGEScoring(model)
    overridden = foreign_override(model, SCORING_METHODS, "torchkge")
    if overridden is not None:  # a subclass that scores differently keeps its own scoring_function
        return TorchKGEScoring(model, refusal=f"{overridden} redefines TorchKGE's scoring")
    return view(model)


class TorchKGEScoring:
    """A TorchKGE model's triple scores for kgeval (its ``scoring_function``), with its entity / relation counts;
    ``kgeval_form_refused`` says why a fast path is not used (None: it is, or there is none)."""

    def __init__(self, model: Model, refusal: str | None = None) -> None:
        self.model = model
        self.kgeval_form_refused = refusal
        self.num_entities = model.n_ent
        self.num_relations = model.n_rel

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """(n,) scores of (h, r, t) rows: ``scoring_function(h, t, r)``."""
        return self.model.scoring_function(hrt_batch[:, 0], hrt_batch[:, 2], hrt_batch[:, 1])

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        vectors = self.model.ent_emb.weight if ids is None else self.model.ent_emb(ids)
        return F.normalize(vectors, p=2, dim=1)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        return self._entities(None)


class TorchKGETransE(TorchKGEScoring):
    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self.kgeval_similarity = "l1" if model.dissimilarity is l1_dissimilarity else "l2"

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return self._entities(batch[:, 0]) + self.model.rel_emb(batch[:, 1])
        return self._entities(batch[:, 1]) - self.model.rel_emb(batch[:, 0])


class TorchKGEDistMult(TorchKGEScoring):
    kgeval_similarity = "dot"

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return self._entities(batch[:, 0]) * self.model.rel_emb(batch[:, 1])
        return self.model.rel_emb(batch[:, 0]) * self._entities(batch[:, 1])
