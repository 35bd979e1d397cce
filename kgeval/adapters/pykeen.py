"""PyKEEN models scored exactly as PyKEEN predicts (:func:`pykeen_view`), with the GEMM fast path for the
interactions that have a query/candidate form. Imported only when kgeval meets a PyKEEN model.
"""

from __future__ import annotations

from typing import Any

import torch
from pykeen.models import ERModel, Model

from kgeval._machine import eager_chunk_elements, last_level_cache
from kgeval.adapters.inductive import check_mode
from kgeval.adapters.overrides import foreign_override
from kgeval.typing import INDUCTIVE_MODES, InductiveMode, Target

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
#: PyKEEN interactions that score each (query, candidate) pair from that pair's representations alone, elementwise
#: and reduced along the pair's own d values: their scores of a block of candidates are their scores of all
#: (matched by class, not name: a subclass may compute otherwise)
ELEMENTWISE: tuple[str, ...] = ("DistMultInteraction",)


def _elementwise() -> tuple[type, ...]:
    """The classes of :data:`ELEMENTWISE`, from ``pykeen.nn.modules``."""
    from pykeen.nn import modules

    return tuple(getattr(modules, name) for name in ELEMENTWISE)


def pykeen_view(model: Model, mode: InductiveMode | None = None) -> PyKEENScoring:
    """kgeval's model protocol over a PyKEEN model, with the query/candidate form where the interaction has one;
    an inductive model (``InductiveERModel``: ``InductiveNodePiece``, ``InductiveNodePieceGNN``) bound to ``mode``'s
    graph, PyKEEN's ``"training"``, ``"validation"`` or ``"testing"`` (see :class:`PyKEENScoring`).

    Raises
    ------
    TypeError
        For an inductive model without a mode.
    ValueError
        For a mode the model does not have (a transductive model has none, as in PyKEEN).

    Notes
    -----
    Scores follow ``model.predict(..., target=...)``: relation ids go through the model's relation inverter, and a
    model trained with inverse triples ranks heads by scoring (t, r_inv, ?) with its tail scorer.
    ``predict_with_sigmoid`` is not applied: the sigmoid is increasing, so raw scores rank the same, except where
    float32 saturates it into ties the raw scores do not have (PyKEEN's ranks are then wider; kgeval's lie inside
    them). An inductive model is scored in the given mode: its candidates are the entities of that mode's graph
    (``model._get_entity_len(mode=mode)``), and its scores are PyKEEN's own arithmetic on the mode's
    representations, computed once per evaluation (``PyKEENInductiveScoring``; a subclass redefining a scoring
    method is scored through its ``score_*(..., mode=mode)``).

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
    mode = _checked_mode(model, mode)
    form = _query_candidate_form(model) if mode is None else None
    predicting = foreign_override(model, PREDICT_METHODS, "pykeen")
    if predicting is not None:
        return PyKEENPredicting(model, f"{predicting} redefines PyKEEN's prediction" if form else None, mode)
    overridden = foreign_override(model, SCORING_METHODS, "pykeen")
    if mode is not None and overridden is None and isinstance(model, ERModel):
        return PyKEENInductiveScoring(model, mode)
    if form is None or overridden is not None:
        return PyKEENScoring(model, f"{overridden} redefines PyKEEN's scoring" if form else None, mode)
    return PyKEENQueryCandidate(model, *form)


def _checked_mode(model: Model, mode: Any) -> InductiveMode | None:
    """The mode to score ``model`` in: required (one of PyKEEN's) for an inductive model, refused for a
    transductive one, as PyKEEN's ``_get_entity_len`` refuses it."""
    if not _is_inductive(model):
        if mode is not None:
            raise ValueError(f"{type(model).__name__} is a transductive PyKEEN model: it has no inductive mode "
                             f"(got mode={mode!r}); evaluate it without one")  # fmt: skip
        return None
    if mode is None:
        raise TypeError(f"{type(model).__name__} is an inductive PyKEEN model, which scores the entities of one "
                        f"graph per mode: pass mode= one of {INDUCTIVE_MODES} (PyKEEN's evaluators take mode=; "
                        "validation and test triples are in the inference graph's ids)")  # fmt: skip
    mode = check_mode(mode)
    try:
        model._get_entity_len(mode=mode)
    except (ValueError, NotImplementedError) as error:
        raise ValueError(f"{type(model).__name__} has no graph for mode={mode!r}: {error}") from error
    return mode


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

    def __init__(self, model: Model, refusal: str | None = None, mode: InductiveMode | None = None) -> None:
        self.model: Any = model  # its attributes are PyKEEN's (typed by torch as Tensor | Module)
        self.kgeval_form_refused = refusal
        self.mode = mode
        self.num_entities = model.num_entities if mode is None else model._get_entity_len(mode=mode)
        self.num_relations = model.num_real_relations
        self.inverse = bool(model.use_inverse_triples)
        self._mode: dict[str, str] = {} if mode is None else {"mode": mode}  # what PyKEEN's scorers are passed

    @property
    def device(self) -> torch.device:
        return self.model.device

    def _mapped(self, batch: torch.Tensor, relation_column: int, invert: bool = False) -> torch.Tensor:
        """The batch with relation ids as the model stores them (unchanged without inverse triples)."""
        if not self.inverse:
            return batch
        return self.model.relation_inverter.map(batch=batch, index=relation_column, invert=invert)

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|tails|``) scores of (h, r, e): PyKEEN's ``predict_t`` without sigmoid."""
        return self.model.score_t(self._mapped(hr_batch, 1), tails=tails, **self._mode)

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|heads|``) scores of (e, r, t): PyKEEN's ``predict_h`` without sigmoid, i.e. (t, r_inv, e) scored
        by the tail scorer for a model trained with inverse triples."""
        if self.inverse:
            return self.model.score_h_inverse(rt_batch=self._mapped(rt_batch, 0), heads=heads, **self._mode)
        return self.model.score_h(rt_batch, heads=heads, **self._mode)

    def score_r(self, ht_batch: torch.Tensor, *, relations: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|relations|``) scores of (h, r, t) for candidate relations r (default: every relation of the data):
        PyKEEN's ``score_r``. A model trained with inverse triples is asked for the stored ids of the real relations
        only (PyKEEN's ``predict_r`` also returns the inverse ones)."""
        return self.model.score_r(ht_batch, relations=self._stored_relations(ht_batch, relations), **self._mode)

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
        return self.model.predict(batch, target=target, full_batch=False, ids=ids, **self._mode)

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|tails|``) scores of (h, r, e): ``model.predict(hr_batch, target="tail")``."""
        return self._predict(hr_batch, "tail", tails)

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|heads|``) scores of (e, r, t): ``model.predict(rt_batch, target="head")``."""
        return self._predict(rt_batch, "head", heads)

    def score_r(self, ht_batch: torch.Tensor, *, relations: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|relations|``) scores of (h, r, t) (default: every relation of the data): ``model.predict``, asked for
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


class PyKEENInductiveScoring(PyKEENScoring):
    """An inductive PyKEEN ``ERModel`` in one mode, scored with PyKEEN's own arithmetic -- its interaction on its
    representations, as ``score_t`` / ``score_h`` compute them -- from the representations of the mode's entities
    and of every relation computed once for the view (one view per evaluation): the model's own
    ``_get_representations(None, None, None, mode=mode)``, i.e. NodePiece's token aggregation over every entity, or
    ``InductiveNodePieceGNN``'s message passing over the mode's whole graph, which PyKEEN recomputes for every
    batch. The rows are those PyKEEN's scorers compute, value for value (they index the same tables), so the ranks
    are PyKEEN's, ties included; there is no GEMM form (a GEMM sums in another order, and NodePiece's shared tokens
    make the near-ties such an order would break)."""

    def __init__(self, model: Model, mode: InductiveMode) -> None:
        super().__init__(model, None, mode)
        self._tables: tuple[Any, Any] | None = None

    def _representations(self) -> tuple[Any, Any]:
        """(the mode's entity representations, the relation representations): tensors (or lists of tensors, for an
        interaction of several), every row, computed once."""
        if self._tables is None:
            entities, relations, _ = self.model._get_representations(h=None, r=None, t=None, mode=self.mode)
            self._tables = (entities, relations)
        return self._tables

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|tails|``) scores of (h, r, e), as PyKEEN's ``score_t(..., mode=mode)`` computes them."""
        return self._score_tails(self._mapped(hr_batch, 1), tails)

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None) -> torch.Tensor:
        """(B, ``|heads|``) scores of (e, r, t), as PyKEEN's ``predict_h`` computes them: through the inverse relation,
        (t, r_inv, e) scored as tails, for a model trained with inverse triples (every NodePiece model)."""
        if self.inverse:
            inverted = self.model.relation_inverter.invert_(batch=self._mapped(rt_batch, 0).clone(), index=0)
            return self._score_tails(inverted.flip(1), heads)
        entities, relations = self._representations()
        batch = rt_batch.unsqueeze(dim=1)
        head = entities if heads is None else _take(entities, heads)
        return self._interaction_in_chunks({"r": _take(relations, batch[..., 0]), "t": _take(entities, batch[..., 1])},
                                           "h", _leading_axis(head, dim=0))  # fmt: skip

    def _score_tails(self, hr_batch: torch.Tensor, tails: torch.Tensor | None) -> torch.Tensor:
        """PyKEEN's ``ERModel.score_t`` on the cached representations: (B, 1, ...) heads and relations, (1, k, ...)
        tails, through the interaction."""
        entities, relations = self._representations()
        batch = hr_batch.unsqueeze(dim=1)
        tail = entities if tails is None else _take(entities, tails)
        return self._interaction_in_chunks({"h": _take(entities, batch[..., 0]), "r": _take(relations, batch[..., 1])},
                                           "t", _leading_axis(tail, dim=0))  # fmt: skip

    def _interaction_in_chunks(self, query: dict[str, Any], side: str, candidates: Any) -> torch.Tensor:
        """(B, k) scores: the interaction of the (B, 1, ...) ``query`` representations (the two of "h", "r", "t" that
        are not ``side``) with the (1, k, ...) ``candidates`` as ``side``, computed over blocks of rows -- and of
        candidates, for an interaction that is elementwise along them (:data:`ELEMENTWISE`) -- of about a quarter of
        the last-level cache in (B, k, d) intermediates (the engine's eager chunk), written into one output.

        PyKEEN's interaction materialises the (B, k, d) broadcast product before it reduces it; on the whole batch
        that product goes to memory and back (ILPC2022-small test, NodePiece dim 100: 3.7 s per evaluation on whole
        batches, 0.49 s in blocks). Every score is computed by the same operations on the same operands as on the
        whole batch: rows are independent (PyKEEN's evaluator splits them by its own batch size), an elementwise
        interaction's reduction runs along each score's own d values, and no block is one row or one candidate wide
        unless the batch is (:func:`_spans`): PyKEEN orders a three-way product by the operands' shapes
        (``pykeen.utils._reorder``), and a width of 1 -- no reordering at all for one row, a tie of costs for one
        candidate -- would multiply in another order, which rounds differently."""
        rows, width = len(_first(query["r"])), _first(candidates).shape[1]
        if rows == 0 or width == 0:
            return self.model.interaction(**query, **{side: candidates})
        parts = [table for part in (*query.values(), candidates) for table in _tables(part)]
        per_score = max(1, max(table[0, 0].numel() for table in parts))
        budget = eager_chunk_elements(last_level_cache()) // per_score
        columns = min(width, max(2, budget)) if type(self.model.interaction) in _elementwise() else width
        block = max(2, budget // columns)
        if rows <= block and columns == width:
            return self.model.interaction(**query, **{side: candidates})
        scores: torch.Tensor | None = None
        for start, stop in _spans(rows, block):
            rows_here = {name: _narrow(part, 0, start, stop - start) for name, part in query.items()}
            for first, last in _spans(width, columns):
                got = self.model.interaction(**rows_here, **{side: _narrow(candidates, 1, first, last - first)})
                if scores is None:  # the interaction's own dtype (real scores of complex representations)
                    scores = got.new_empty((rows, width))
                scores[start:stop, first:last] = got
        assert scores is not None  # rows and width are positive
        return scores

    def score_r(self, ht_batch: torch.Tensor, *, relations: torch.Tensor | None = None) -> torch.Tensor:
        """PyKEEN's ``score_r`` in the mode (relation prediction recomputes the representations, as PyKEEN does)."""
        return super().score_r(ht_batch, relations=relations)


def _first(representation: Any) -> torch.Tensor:
    """A representation's tensor, or the first of a list."""
    return representation if isinstance(representation, torch.Tensor) else representation[0]


def _tables(representation: Any) -> list[torch.Tensor]:
    """A representation's tensor, or every tensor of a list, as a list."""
    return [representation] if isinstance(representation, torch.Tensor) else list(representation)


def _spans(total: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) blocks of at most ``size`` (>= 2) covering ``total`` (>= 1), none of length 1 unless ``total``
    is 1: a last block of one is folded into the one before it (which may then hold ``size`` + 1)."""
    spans = [(start, min(start + size, total)) for start in range(0, total, size)]
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] == 1:
        spans[-2:] = [(spans[-2][0], total)]
    return spans


def _narrow(representation: Any, dim: int, start: int, length: int) -> Any:
    """``length`` entries (fewer at the end) from ``start`` along ``dim`` of a representation, or of each of a list."""
    if isinstance(representation, torch.Tensor):
        return representation.narrow(dim, start, min(length, representation.shape[dim] - start))
    return [_narrow(table, dim, start, length) for table in representation]


def _leading_axis(representation: Any, dim: int) -> Any:
    """A representation (or each of a list) with a broadcast axis at ``dim`` (PyKEEN's ``parallel_unsqueeze``)."""
    if isinstance(representation, torch.Tensor):
        return representation.unsqueeze(dim=dim)
    return [table.unsqueeze(dim=dim) for table in representation]


def _take(representation: Any, indices: torch.Tensor) -> Any:
    """Rows of a representation table, or of each table of a list (an interaction of several representations)."""
    if isinstance(representation, torch.Tensor):
        return representation[indices]
    return [table[indices] for table in representation]


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
