"""PyKEEN models scored exactly as PyKEEN predicts (:func:`pykeen_view`), with the GEMM fast path for the
interactions that have a query/candidate form. Imported only when kgeval meets a PyKEEN model.
"""

from __future__ import annotations

from typing import Any

import torch
from pykeen.models import ERModel, Model

from kgeval.adapters.overrides import foreign_override
from kgeval.typing import Target

#: the methods through which a PyKEEN model computes its scores: a subclass that redefines one may score otherwise
#: than its interaction's GEMM form, so it is scored through its own methods
SCORING_METHODS: tuple[str, ...] = (
    "score_hrt", "score_t", "score_h", "score_r", "score_hrt_inverse", "score_t_inverse", "score_h_inverse",
    "forward", "_get_representations", "_prepare_batch", "_prepare_inverse_batch",
)  # fmt: skip
#: the methods PyKEEN's own evaluator calls: a subclass that redefines one is scored through them, as PyKEEN does
PREDICT_METHODS: tuple[str, ...] = ("predict", "predict_t", "predict_h", "predict_r")

#: PyKEEN interaction class name -> similarity (None: it depends on the interaction's p)
SUPPORTED: dict[str, str | None] = {
    "DistMultInteraction": "dot",
    "ComplExInteraction": "dot",
    "RESCALInteraction": "dot",
    "TransEInteraction": None,
    "RotatEInteraction": "l2",
}


def pykeen_view(model: Model) -> PyKEENScoring:
    """kgeval's model protocol over a PyKEEN model, with the query/candidate form where the interaction has one.

    Raises
    ------
    TypeError
        For models kgeval cannot score the way PyKEEN predicts (inductive models).

    Notes
    -----
    Scores follow ``model.predict(..., target=...)``: relation ids go through the model's relation inverter, and a
    model trained with inverse triples ranks heads by scoring (t, r_inv, ?) with its tail scorer.
    ``predict_with_sigmoid`` is not applied: the sigmoid is increasing, so raw scores rank the same, except where
    float32 saturates it into ties the raw scores do not have (PyKEEN's ranks are then wider; kgeval's lie inside
    them). Inductive models, which PyKEEN scores per mode, are refused.

    An ``ERModel`` with one entity and one relation representation gets the fast path for these interactions
    (inverse relations through the inverse relation's representation):

    ============  ==============  ===================  ==========
    interaction   tail query      head query           similarity
    ============  ==============  ===================  ==========
    DistMult      h ∘ r           r ∘ t                dot
    ComplEx       h ∘ r           conj(r) ∘ t          dot (real views)
    RESCAL        h^T R           R t                  dot
    TransE        h + r           t - r                l1 / l2 (p of the interaction)
    RotatE        h ∘ r           t ∘ conj(r)          l2 (real views)
    ============  ==============  ===================  ==========

    With inverse triples the head query is the tail query of (t, r_inv). Ranks equal PyKEEN's except where two
    scores differ by float rounding only (the fast path sums in another order; for L2 it ranks 2 q.c - ||c||^2).
    """
    if _is_inductive(model):
        raise TypeError(
            f"{type(model).__name__} is an inductive PyKEEN model, which PyKEEN scores per mode (training, "
            "validation, testing inference graphs); kgeval does not evaluate inductive models"
        )
    form = _query_candidate_form(model)
    predicting = foreign_override(model, PREDICT_METHODS, "pykeen")
    if predicting is not None:
        return PyKEENPredicting(model, refusal=f"{predicting} redefines PyKEEN's prediction" if form else None)
    overridden = foreign_override(model, SCORING_METHODS, "pykeen")
    if form is None or overridden is not None:
        return PyKEENScoring(model, refusal=f"{overridden} redefines PyKEEN's scoring" if form else None)
    return PyKEENQueryCandidate(model, *form)


def _is_inductive(model: Model) -> bool:
    from pykeen.models.inductive import InductiveERModel

    return isinstance(model, InductiveERModel)


def _query_candidate_form(model: Any) -> tuple[str, str] | None:
    """(interaction name, similarity) of a model with a GEMM form, else None (see :func:`pykeen_view`)."""
    if not isinstance(model, ERModel):
        return None
    return _interaction_form(model)


def _interaction_form(model: Any) -> tuple[str, str] | None:
    """:func:`_query_candidate_form` of an ``ERModel`` (``Any``: torch types its submodules as Tensor | Module)."""
    if len(model.entity_representations) != 1 or len(model.relation_representations) != 1:
        return None
    interaction: Any = type(model.interaction)
    kind = interaction.__name__
    if kind not in SUPPORTED or not (interaction.__module__ or "").startswith("pykeen."):
        return None  # an interaction of PyKEEN's own, not a user's class of the same name
    similarity = SUPPORTED[kind]
    if kind == "TransEInteraction":
        similarity = {1: "l1", 2: "l2"}.get(int(model.interaction.p))
    if kind == "RotatEInteraction" and model.interaction.p != 2:
        similarity = None
    return None if similarity is None else (kind, similarity)


class PyKEENScoring:
    """A PyKEEN model's scores for kgeval, target by target as ``model.predict`` computes them, without sigmoid.

    Attributes
    ----------
    model : pykeen.models.Model
    num_entities : int
    num_relations : int
        The relations of the data (``model.num_real_relations``: without the inverse ones).
    kgeval_form_refused : str or None
        Why the model's interaction form is not used (a subclass redefines a scoring method), for kgeval's warning.
    """

    def __init__(self, model: Model, refusal: str | None = None) -> None:
        self.model: Any = model  # its attributes are PyKEEN's (typed by torch as Tensor | Module)
        self.kgeval_form_refused = refusal
        self.num_entities = model.num_entities
        self.num_relations = model.num_real_relations
        self.inverse = bool(model.use_inverse_triples)

    @property
    def device(self) -> torch.device:
        return self.model.device

    def _mapped(self, batch: torch.Tensor, relation_column: int, invert: bool = False) -> torch.Tensor:
        """The batch with relation ids as the model stores them (unchanged without inverse triples)."""
        if not self.inverse:
            return batch
        return self.model.relation_inverter.map(batch=batch, index=relation_column, invert=invert)

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None) -> torch.Tensor:
        """(B, |tails|) scores of (h, r, e): PyKEEN's ``predict_t`` without sigmoid."""
        return self.model.score_t(self._mapped(hr_batch, 1), tails=tails)

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None) -> torch.Tensor:
        """(B, |heads|) scores of (e, r, t): PyKEEN's ``predict_h`` without sigmoid, i.e. (t, r_inv, e) scored
        by the tail scorer for a model trained with inverse triples."""
        if self.inverse:
            return self.model.score_h_inverse(rt_batch=self._mapped(rt_batch, 0), heads=heads)
        return self.model.score_h(rt_batch, heads=heads)


    def score_r(self, ht_batch: torch.Tensor, *, relations: torch.Tensor | None = None) -> torch.Tensor:
        """(B, |relations|) scores of (h, r, t) for candidate relations r (default: every relation of the data):
        PyKEEN's ``score_r``. A model trained with inverse triples is asked for the stored ids of the real relations
        only (PyKEEN's ``predict_r`` also returns the inverse ones)."""
        return self.model.score_r(ht_batch, relations=self._stored_relations(ht_batch, relations))

    def _stored_relations(self, ht_batch: torch.Tensor, relations: torch.Tensor | None) -> torch.Tensor | None:
        """Candidate relation ids as the model stores them (unchanged, None for all, without inverse triples)."""
        if not self.inverse:
            return relations
        ids = torch.arange(self.num_relations, device=ht_batch.device) if relations is None else relations
        return self.model.relation_inverter.map(batch=ids.reshape(-1, 1), index=0).reshape(ids.shape)


class PyKEENPredicting(PyKEENScoring):
    """A PyKEEN model whose subclass redefines ``predict`` or ``predict_*``: scored through ``model.predict``, as
    PyKEEN's own evaluator scores it (relation ids as given: ``predict`` maps them itself)."""

    def _predict(self, batch: torch.Tensor, target: str, ids: torch.Tensor | None) -> torch.Tensor:
        return self.model.predict(batch, target=target, full_batch=False, ids=ids)

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None) -> torch.Tensor:
        """(B, |tails|) scores of (h, r, e): ``model.predict(hr_batch, target="tail")``."""
        return self._predict(hr_batch, "tail", tails)

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None) -> torch.Tensor:
        """(B, |heads|) scores of (e, r, t): ``model.predict(rt_batch, target="head")``."""
        return self._predict(rt_batch, "head", heads)

    def score_r(self, ht_batch: torch.Tensor, *, relations: torch.Tensor | None = None) -> torch.Tensor:
        """(B, |relations|) scores of (h, r, t) (default: every relation of the data): ``model.predict``, asked for
        the stored ids of the real relations of a model trained with inverse triples (as :class:`PyKEENScoring`)."""
        return self._predict(ht_batch, "relation", self._stored_relations(ht_batch, relations))


class PyKEENQueryCandidate(PyKEENScoring):
    """:class:`PyKEENScoring` with the query/candidate form (kgeval.protocol.QueryCandidateModel)."""

    def __init__(self, model: Model, kind: str, similarity: str) -> None:
        super().__init__(model)
        self.kind = kind
        self.kgeval_similarity = similarity

    def _entities(self, ids: torch.Tensor | None) -> torch.Tensor:
        return self.model.entity_representations[0](indices=ids)

    def _relations(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.relation_representations[0](indices=ids)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        """The (E, d) entity vectors (real views of complex embeddings)."""
        return _real(self._entities(None))

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail") or (r, t) rows (target "head")."""
        if target == "tail":
            mapped = self._mapped(batch, 1)
            entity, relation, side = self._entities(mapped[:, 0]), self._relations(mapped[:, 1]), "tail"
        elif self.inverse:  # (t, r_inv, ?) as a tail query
            mapped = self._mapped(batch, 0, invert=True)
            entity, relation, side = self._entities(mapped[:, 1]), self._relations(mapped[:, 0]), "tail"
        else:
            entity, relation, side = self._entities(batch[:, 1]), self._relations(batch[:, 0]), "head"
        return _real(_QUERIES[self.kind](entity, relation, side))


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


__all__ = ("PyKEENPredicting", "PyKEENQueryCandidate", "PyKEENScoring", "pykeen_view")
