"""TorchKGE integration: ``torchkge.models`` evaluated unchanged, through their own ``scoring_function`` or the
fast path the model's scoring implies (:func:`torchkge_view`): the query/candidate form for TransE, TorusE (its
plain L1 dissimilarity), DistMult, HolE, ComplEx, ANALOGY and RESCAL, a per-relation candidate table
(:class:`kgeval.protocol.RelationTableModel`) for TransH, TransR and TransD.

No form (and why): TorusE with a torus dissimilarity (``torus_L1``, ``torus_L2``, ``torus_eL2``:
``min(|x|, 1 - |x|)`` or the cosine of x = h + r - t per coordinate is no norm of a difference of a query and a
candidate vector);
ConvKB (a convolution and a nonlinearity over (h, r, t) together); a translation model whose ``dissimilarity`` is
not TorchKGE's L1 or L2; a user's subclass that redefines a scoring method (:data:`SCORING_METHODS`); a class
outside ``torchkge.models``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torchkge import models as torchkge_models
from torchkge.models.interfaces import Model
from torchkge.utils.dissimilarities import l1_dissimilarity, l2_dissimilarity

from kgeval.adapters.overrides import foreign_override
from kgeval.typing import Target

__all__ = [
    "FORMS",
    "SCORING_METHODS",
    "TABLES",
    "TorchKGEAnalogy",
    "TorchKGEComplEx",
    "TorchKGEDistMult",
    "TorchKGEHolE",
    "TorchKGERESCAL",
    "TorchKGEScoring",
    "TorchKGETorusE",
    "TorchKGETransD",
    "TorchKGETransE",
    "TorchKGETransH",
    "TorchKGETransR",
    "torchkge_view",
]

#: the methods through which a TorchKGE model scores (kgeval's own path and TorchKGE's evaluator): a subclass that
#: redefines one may score otherwise than the fast path's formula, so it keeps its own scoring_function
SCORING_METHODS: tuple[str, ...] = (
    "scoring_function", "forward", "normalize_parameters", "get_embeddings", "inference_prepare_candidates",
    "inference_scoring_function", "project", "get_rolling_matrix",
)  # fmt: skip


def torchkge_view(model: Model) -> TorchKGEScoring:
    """kgeval's model protocol over a TorchKGE model, with the fast path its ``scoring_function`` implies.

    Whole triples are scored by ``scoring_function(h_idx, t_idx, r_idx)`` (TorchKGE's argument order); the fast
    path reads the embeddings as ``scoring_function`` does: n(x) is the L2-normalised x (TorchKGE's
    ``normalize(..., p=2, dim=1)``), frac(x) TorusE's projection on the torus, M_r a relation's matrix:

    ===========  ================================  ========================  ==================  ==========
    model        tail query                        head query                candidates          similarity
    ===========  ================================  ========================  ==================  ==========
    TransE       n(h) + r                          n(t) - r                  n(e)                l1 / l2
    TorusE (L1)  frac(h) + frac(r)                 frac(t) - frac(r)         frac(e)             l1
    DistMult     n(h) ∘ r                          r ∘ n(t)                  n(e)                dot
    HolE         n(h)ᵀ M_r (circular convolution)  M_r n(t)                  n(e)                dot
    RESCAL       n(h)ᵀ M_r                         M_r n(t)                  n(e)                dot
    ComplEx      [Re, Im] of h ∘ r                 [Re, Im] of r ∘ conj(t)   [Re e, Im e]        dot
    ANALOGY      [sc_h ∘ sc_r, ComplEx's]          [sc_r ∘ sc_t, ComplEx's]  [sc_e, Re e, Im e]  dot
    TransH       P_r n(h) + r                      P_r n(t) - r              table P_r n(e)      l2 / l1
    TransR       M_r n(h) + r                      M_r n(t) - r              table M_r n(e)      l2 / l1
    TransD       P_r(n(h)) + n(r)                  P_r(n(t)) - n(r)          table P_r(n(e))     l2 / l1
    ===========  ================================  ========================  ==================  ==========

    (TorchKGE's L2 dissimilarity is squared: the same order.) TransH's P_r projects on the hyperplane of its
    normalised normal vector, TransD's P_r(e) = n(r_p) (e . n(e_p)) + e[:rel_dim]: candidates transformed by the
    relation, so each relation has its own candidate table.

    A model is recognised by its TorchKGE class (the nearest class of ``torchkge`` in its MRO, which must be the
    class ``torchkge.models`` exports under that name); a user's subclass keeps the fast path unless it redefines a
    scoring method (:data:`SCORING_METHODS`), and then keeps its own ``scoring_function`` (with a
    :class:`~kgeval.exceptions.FastPathWarning`). TorchKGE's ``LinkPredictionEvaluator`` ranks by #(scores >= the
    true score), kgeval's pessimistic rank, and filters the facts of the graph it evaluates: with the same filter
    triples the two agree.
    """
    library = _library_class(model)
    view = None if library is None else FORMS.get(library.__name__) or TABLES.get(library.__name__)
    if view is None or getattr(torchkge_models, library.__name__, None) is not library:  # type: ignore[union-attr]
        return TorchKGEScoring(model)
    if not view.fits(model):
        return TorchKGEScoring(model)
    overridden = foreign_override(model, SCORING_METHODS, "torchkge")
    if overridden is not None:  # a subclass that scores differently keeps its own scoring_function
        return TorchKGEScoring(model, refusal=f"{overridden} redefines TorchKGE's scoring")
    return view(model)


def _library_class(model: Model) -> type | None:
    """The nearest class of the ``torchkge`` package in the MRO of ``model``'s class."""
    for cls in type(model).__mro__:
        module = cls.__module__ or ""
        if module == "torchkge" or module.startswith("torchkge."):
            return cls
    return None


def _distance(model: Model) -> str | None:
    """ "l1" / "l2" for TorchKGE's L1 / (squared) L2 dissimilarity, else None."""
    dissimilarity = getattr(model, "dissimilarity", None)
    if dissimilarity is l1_dissimilarity:
        return "l1"
    return "l2" if dissimilarity is l2_dissimilarity else None


def _unit(vectors: torch.Tensor) -> torch.Tensor:
    """TorchKGE's normalisation: ``normalize(x, p=2, dim=1)``."""
    return F.normalize(vectors, p=2, dim=1)


class TorchKGEScoring:
    """A TorchKGE model's triple scores for kgeval (its ``scoring_function``), with its entity / relation counts;
    ``kgeval_form_refused`` says why a fast path is not used (None: it is, or there is none)."""

    def __init__(self, model: Model, refusal: str | None = None) -> None:
        self.model = model
        self.kgeval_form_refused = refusal
        self.num_entities = model.n_ent
        self.num_relations = model.n_rel

    @classmethod
    def fits(cls, model: Model) -> bool:
        """Whether ``model`` (of the class this view is for) has this view's form."""
        return True

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """(n,) scores of (h, r, t) rows: ``scoring_function(h, t, r)``."""
        return self.model.scoring_function(hrt_batch[:, 0], hrt_batch[:, 2], hrt_batch[:, 1])

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        vectors = self.model.ent_emb.weight if ids is None else self.model.ent_emb(ids)
        return _unit(vectors)


class _ByDissimilarity(TorchKGEScoring):
    """A view of a translation model ranked by TorchKGE's dissimilarity: similarity "l1" / "l2" for its L1 /
    (squared) L2 dissimilarity; a model with another dissimilarity does not fit."""

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self.kgeval_similarity = _distance(model) or "l2"

    @classmethod
    def fits(cls, model: Model) -> bool:
        return _distance(model) is not None


class _QueryCandidate(TorchKGEScoring):
    """The query/candidate form: ``kgeval_query`` of (h, r) / (r, t) rows, candidates of every entity."""

    kgeval_similarity = "dot"

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        return self._entities(None)

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail") or (r, t) rows (target "head")."""
        if target == "tail":
            return self._query(self._entities(batch[:, 0]), batch[:, 1], target)
        return self._query(self._entities(batch[:, 1]), batch[:, 0], target)

    def _query(self, entity: torch.Tensor, relations: torch.Tensor, target: Target) -> torch.Tensor:
        raise NotImplementedError


class TorchKGETransE(_ByDissimilarity, _QueryCandidate):
    """TransE: -d(n(h) + r, n(t)), d TorchKGE's L1 or squared L2 dissimilarity."""

    def _query(self, entity: torch.Tensor, relations: torch.Tensor, target: Target) -> torch.Tensor:
        translation = self.model.rel_emb(relations)
        return entity + translation if target == "tail" else entity - translation


class TorchKGETorusE(_QueryCandidate):
    """TorusE with its plain L1 dissimilarity: -||frac(h) + frac(r) - frac(t)||_1 (the embeddings on the torus as
    ``scoring_function`` reads them; TorchKGE's ``frac``, truncation towards zero)."""

    kgeval_similarity = "l1"

    @classmethod
    def fits(cls, model: Model) -> bool:
        return model.dissimilarity is l1_dissimilarity

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        return torch.frac(self.model.ent_emb.weight if ids is None else self.model.ent_emb(ids))

    def _query(self, entity: torch.Tensor, relations: torch.Tensor, target: Target) -> torch.Tensor:
        translation = torch.frac(self.model.rel_emb(relations))
        return entity + translation if target == "tail" else entity - translation


class TorchKGEDistMult(_QueryCandidate):
    """DistMult: n(h) . diag(r) . n(t)."""

    def _query(self, entity: torch.Tensor, relations: torch.Tensor, target: Target) -> torch.Tensor:
        relation = self.model.rel_emb(relations)
        return entity * relation if target == "tail" else relation * entity


class TorchKGEHolE(_QueryCandidate):
    """HolE: n(h)ᵀ M_r n(t), M_r TorchKGE's rolling matrix of r (``get_rolling_matrix``: M[i, j] = r[j - i mod d])."""

    def _query(self, entity: torch.Tensor, relations: torch.Tensor, target: Target) -> torch.Tensor:
        matrix = self.model.get_rolling_matrix(self.model.rel_emb(relations))
        return _bilinear_query(entity, matrix, target)


class TorchKGERESCAL(_QueryCandidate):
    """RESCAL: n(h)ᵀ M_r n(t)."""

    def _query(self, entity: torch.Tensor, relations: torch.Tensor, target: Target) -> torch.Tensor:
        dim = self.model.emb_dim
        return _bilinear_query(entity, self.model.rel_mat(relations).view(-1, dim, dim), target)


def _bilinear_query(entity: torch.Tensor, matrix: torch.Tensor, target: Target) -> torch.Tensor:
    """hᵀ M (target "tail") or M t (target "head") for each row's entity vector and (d, d) matrix."""
    if target == "tail":
        return torch.matmul(entity.unsqueeze(1), matrix).squeeze(1)
    return torch.matmul(matrix, entity.unsqueeze(2)).squeeze(2)


def _complex_query(re_e: torch.Tensor, im_e: torch.Tensor, re_r: torch.Tensor, im_r: torch.Tensor,
                   target: Target) -> list[torch.Tensor]:  # fmt: skip
    """ComplEx's Re(<h, r, conj(t)>) as [query of the real parts, query of the imaginary parts] of the candidates."""
    if target == "tail":
        return [re_e * re_r - im_e * im_r, re_e * im_r + im_e * re_r]
    return [re_r * re_e + im_r * im_e, re_r * im_e - im_r * re_e]


class TorchKGEComplEx(_QueryCandidate):
    """ComplEx: Re(<h, r, conj(t)>) of its real and imaginary embeddings (not normalised)."""

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        return torch.cat(self._parts(ids), dim=1)

    def _parts(self, ids: torch.Tensor | None) -> list[torch.Tensor]:
        tables = (self.model.re_ent_emb, self.model.im_ent_emb)
        return [table.weight if ids is None else table(ids) for table in tables]

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        entity, relations = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        re_e, im_e = self._parts(entity)
        re_r, im_r = self.model.re_rel_emb(relations), self.model.im_rel_emb(relations)
        return torch.cat(_complex_query(re_e, im_e, re_r, im_r, target), dim=1)


class TorchKGEAnalogy(_QueryCandidate):
    """ANALOGY: sc_h . diag(sc_r) . sc_t + Re(<h, r, conj(t)>) of its scalar and complex embeddings."""

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        return torch.cat(self._parts(ids), dim=1)

    def _parts(self, ids: torch.Tensor | None) -> list[torch.Tensor]:
        tables = (self.model.sc_ent_emb, self.model.re_ent_emb, self.model.im_ent_emb)
        return [table.weight if ids is None else table(ids) for table in tables]

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        entity, relations = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        sc_e, re_e, im_e = self._parts(entity)
        model = self.model
        sc_r, re_r, im_r = model.sc_rel_emb(relations), model.re_rel_emb(relations), model.im_rel_emb(relations)
        return torch.cat([sc_e * sc_r, *_complex_query(re_e, im_e, re_r, im_r, target)], dim=1)


class _RelationTable(_ByDissimilarity):
    """A per-relation candidate table (:class:`kgeval.protocol.RelationTableModel`): -d(p_r(h) + r, p_r(t)), d
    TorchKGE's L1 or squared L2 dissimilarity, p_r the model's projection for relation r."""

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail") or (r, t) rows (target "head")."""
        entity, relations = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        projected = self._project(entity, relations)
        translation = self._translation(relations)
        return projected + translation if target == "tail" else projected - translation

    def kgeval_relation_candidates(self, relation: int, target: Target, entities: torch.Tensor) -> torch.Tensor:
        """The (k, d) projections of ``entities`` for ``relation`` (heads and tails alike)."""
        relations = torch.full((len(entities),), relation, dtype=torch.long, device=entities.device)
        return self._project(entities, relations)

    def _translation(self, relations: torch.Tensor) -> torch.Tensor:
        return self.model.rel_emb(relations)

    _project: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class TorchKGETransH(_RelationTable):
    """TransH: P_r(e) = e - (e . w_r) w_r, w_r the relation's normal vector normalised, e = n(e)."""

    def _project(self, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        normal = _unit(self.model.norm_vect(relations))
        return self.model.project(self._entities(entities), normal)


class TorchKGETransR(_RelationTable):
    """TransR: M_r n(e), M_r the relation's (rel_dim, ent_dim) projection matrix."""

    def _project(self, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        model = self.model
        matrices = model.proj_mat(relations).view(-1, model.rel_emb_dim, model.ent_emb_dim)
        return model.project(self._entities(entities), matrices)

    def kgeval_relation_candidates(self, relation: int, target: Target, entities: torch.Tensor) -> torch.Tensor:
        """The (k, rel_dim) projections M_r n(e) of ``entities``: one matrix product with the relation's matrix
        (gathering it once per candidate, as ``_project`` does for queries of mixed relations, copied k matrices:
        3.5x TorchKGE's own evaluator's time on CoDEx-S)."""
        model = self.model
        index = torch.tensor([relation], dtype=torch.long, device=entities.device)
        matrix = model.proj_mat(index).view(model.rel_emb_dim, model.ent_emb_dim)
        return self._entities(entities) @ matrix.T


class TorchKGETransD(_RelationTable):
    """TransD: P_r(e) = n(r_p) (n(e) . n(e_p)) + n(e)[:rel_dim], translation n(r)."""

    def _project(self, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        model = self.model
        vectors, projections = self._entities(entities), _unit(model.ent_proj_vect(entities))
        return model.project(vectors, projections, _unit(model.rel_proj_vect(relations)))

    def _translation(self, relations: torch.Tensor) -> torch.Tensor:
        return _unit(self.model.rel_emb(relations))


#: TorchKGE class name -> its query/candidate view (matched by class: ``torchkge.models``' own classes only)
FORMS: dict[str, type[TorchKGEScoring]] = {
    "TransEModel": TorchKGETransE,
    "TorusEModel": TorchKGETorusE,
    "DistMultModel": TorchKGEDistMult,
    "HolEModel": TorchKGEHolE,
    "RESCALModel": TorchKGERESCAL,
    "ComplExModel": TorchKGEComplEx,
    "AnalogyModel": TorchKGEAnalogy,
}
#: TorchKGE class name -> its per-relation candidate table view
TABLES: dict[str, type[TorchKGEScoring]] = {
    "TransHModel": TorchKGETransH,
    "TransRModel": TorchKGETransR,
    "TransDModel": TorchKGETransD,
}
