"""PyKEEN models scored exactly as PyKEEN predicts (:func:`pykeen_view`), with the GEMM fast path for the
interactions that have a query/candidate form. Imported only when kgeval meets a PyKEEN model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from pykeen.models import ERModel, Model

from kgeval._machine import eager_chunk_elements, last_level_cache
from kgeval.adapters.inductive import check_mode
from kgeval.adapters.overrides import foreign_override
from kgeval.adapters.pykeen_base import (
    PREDICT_METHODS,
    SCORING_METHODS,
    PyKEENPredicting,
    PyKEENRepresentations,
    PyKEENScoring,
)
from kgeval.adapters.pykeen_base import flat_rows as _flat
from kgeval.adapters.pykeen_conve import ENTITY_PARTS_BYTES, ConvEFactors, parameters_version, splittable
from kgeval.adapters.pykeen_conve import relation_table as conve_relation_table
from kgeval.adapters.pykeen_tables import relation_table_form
from kgeval.typing import INDUCTIVE_MODES, InductiveMode, Target

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

    An ``ERModel`` whose interaction is one of PyKEEN's own with a query/candidate form (:data:`FORMS`: its
    scores are a dot product of a per-query vector with per-candidate vectors, a candidate bias or a query constant
    appended as a column; or an L1 / L2 distance) gets the fast path; its representations are those PyKEEN's
    ``_get_representations`` passes the interaction (several per entity or relation where the interaction takes
    several). Heads are scored through the inverse relation's tail query for a model trained with inverse triples;
    without them an interaction whose head scores are not of that form (ConvE, ERMLPE, CrossE, ProjE, Transformer:
    a network of (h, r)) serves tails through the form (``kgeval_targets``) and heads through a per-relation
    candidate table of that network's vectors (:class:`PyKEENHeadTable`, ``kgeval_table_targets``).
    See docs/models.md (PyKEEN) for the table of interactions and their queries.

    Ranks equal PyKEEN's except where two scores differ by float rounding only (the fast path sums in another order;
    for L2 it ranks 2 q.c - ||c||^2); kgeval's probe of each form against the model's own scores guards the rest.
    """
    mode = _checked_mode(model, mode)
    found = _query_candidate_form(model) if mode is None else None
    form, refusal = (None, found) if isinstance(found, str) else (found, None)
    predicting = foreign_override(model, PREDICT_METHODS, "pykeen")
    if predicting is not None:
        return PyKEENPredicting(model, f"{predicting} redefines PyKEEN's prediction" if form else refusal, mode)
    overridden = foreign_override(model, SCORING_METHODS, "pykeen")
    if mode is not None and overridden is None and isinstance(model, ERModel):
        return PyKEENInductiveScoring(model, mode)
    if form is None and overridden is None and mode is None and refusal is None:
        table = relation_table_form(model)
        if table is not None:
            return table
    if form is None or overridden is not None:
        view = PyKEENScoring(model, f"{overridden} redefines PyKEEN's scoring" if form else refusal, mode)
        view.kgeval_no_form = _no_form_reason(model) if form is None and refusal is None else None
        return view
    if _has_head_table(model, form):
        return PyKEENHeadTable(model, form)
    return PyKEENQueryCandidate(model, form)


#: PyKEEN's interactions without a query/candidate form or per-relation table, and why: their score is not a product
#: or distance of a per-query vector and a per-candidate one (nor a relation's transform of the candidate)
NO_FORM: dict[str, str] = {
    "BoxEInteraction": "BoxE's score depends on the candidate's position relative to the query's boxes, a "
    "piecewise function of both together",
    "ConvKBInteraction": "ConvKB convolves (h, r, t) together, then applies a nonlinearity before its linear layer",
    "ERMLPInteraction": "ER-MLP runs an MLP on [h; r; t] together",
    "KG2EInteraction": "KG2E compares two Gaussians: its similarity is a log-determinant and trace of both "
    "covariances together",
    "NTNInteraction": "NTN applies a nonlinearity to a bilinear form of h and t per slice",
    "TorusEInteraction": "TorusE's torus distance (min(|x|, 1 - |x|) per coordinate) is no norm of a difference",
}


def _no_form_reason(model: Any) -> str:
    """Why ``model`` (without a form or table) has no fast path, for kgeval's log line: :data:`NO_FORM`'s reason for
    PyKEEN's own interactions, a note for anything else."""
    interaction = getattr(model, "interaction", None)
    name = _pykeen_class(interaction) if interaction is not None else None
    if name is None:
        return (f"{type(interaction).__name__ if interaction is not None else type(model).__name__} is not one of "
                "PyKEEN's own interactions (kgeval gives forms to those it knows by class)")  # fmt: skip
    return NO_FORM.get(name, f"PyKEEN's {name} has no query/candidate form kgeval knows")


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


def _query_candidate_form(model: Any) -> InteractionForm | str | None:
    """The query/candidate form of a model's interaction (:func:`_interaction_form`); a string: why an interaction of
    that family has none with the model's settings (kgeval warns it); None: no form."""
    if not isinstance(model, ERModel):
        return None
    return _interaction_form(model)


def _interaction_form(model: Any) -> InteractionForm | str | None:
    """:func:`_query_candidate_form` of an ``ERModel`` (``Any``: torch types its submodules as Tensor | Module): the
    form of its interaction (``_form_of``), given the model holds as many entity and relation representations as
    the interaction takes (PyKEEN's ``entity_shape`` / ``relation_shape``)."""
    interaction = model.interaction
    expected = _representation_counts(interaction)
    if expected is None:
        return None
    if (len(model.entity_representations), len(model.relation_representations)) != expected:
        return None
    return _form_of(interaction)


def _representation_counts(interaction: Any) -> tuple[int, int] | None:
    """(entity, relation) representations ``interaction`` takes (its shapes), None for a class that is not PyKEEN's
    own."""
    if _pykeen_class(interaction) is None:
        return None
    return len(interaction.entity_shape), len(interaction.relation_shape)


def _pykeen_class(interaction: Any) -> str | None:
    """The class name of ``interaction`` when its class is PyKEEN's own (``pykeen.nn.modules``), else None: a user's
    class of the same name, or a subclass of PyKEEN's, may compute otherwise."""
    from pykeen.nn import modules

    cls = type(interaction)
    name = cls.__name__
    if not (cls.__module__ or "").startswith("pykeen.") or getattr(modules, name, None) is not cls:
        return None
    return name


def _form_of(interaction: Any) -> InteractionForm | str | None:
    """The form of one interaction: an entry of :data:`FORMS` where its settings allow (:func:`_setting_refusal`),
    or the form of the interaction it wraps -- unclamped (``ClampedInteraction``), scaled and shifted
    (``MonotonicAffineTransformationInteraction``), averaged over both directions (``SimplEInteraction``; a plain
    ``DirectionAverageInteraction`` declares one entity representation, which PyKEEN cannot split into the two
    directions: none). A string: why it has none (a clamp); None: no form."""
    name = _pykeen_class(interaction)
    if name is None:
        return None
    if name == "ClampedInteraction":
        if interaction.clamp_score is None:
            return _form_of(interaction.base)
        base = _form_of(interaction.base)
        if base is None or isinstance(base, str):
            return base
        low, high = interaction.clamp_score
        return (f"its ClampedInteraction clamps the scores to [{low}, {high}], which ties every score beyond them "
                "(the fast path's dot products keep those apart)")  # fmt: skip
    if name == "MonotonicAffineTransformationInteraction":
        return _affine_form(interaction, _form_of(interaction.base))
    if name == "SimplEInteraction":
        return _direction_average_form(_form_of(interaction.base))
    if name not in FORMS:
        return None
    query, candidates, similarity, sides = FORMS[name]
    refusal = _setting_refusal(name, interaction)
    if refusal is not None:
        return refusal or None
    if similarity is None:  # a distance: its p
        p = int(interaction.p) if float(interaction.p).is_integer() else 0
        similarity = {1: "l1", 2: "l2"}.get(p) if name != "RotatEInteraction" else ("l2" if p == 2 else None)
        if similarity is None:
            return None
    return InteractionForm(name, functools.partial(query, interaction), functools.partial(candidates, interaction),
                           similarity, sides)  # fmt: skip


def _setting_refusal(name: str, interaction: Any) -> str | None:
    """Why ``interaction`` (of :data:`FORMS`) has no form with its settings; "" for no form, said nothing about; None
    where it has its form."""
    if name == "ProjEInteraction" and type(interaction.outer_activation) is not torch.nn.Identity:
        return (f"its ProjE interaction applies {type(interaction.outer_activation).__name__} to the dot product, "
                "which the fast path's scores would leave out")  # fmt: skip
    if name == "TuckERInteraction":
        for norm in (interaction.head_batch_norm, interaction.head_relation_batch_norm):
            if norm is not None and norm.running_mean is None:
                return ("its TuckER interaction normalises with batch statistics (BatchNorm1d without running "
                        "statistics), which the fast path's per-query vectors cannot reproduce")  # fmt: skip
    return None


def _affine_form(interaction: Any, base: InteractionForm | str | None) -> InteractionForm | str | None:
    """The form of ``scale * base + bias`` (scale = exp(log_scale) > 0): a dot form's query scaled, the bias a query
    constant; an "l2" form unchanged (it ranks the order of the distances, which the transformation keeps)."""
    if base is None or isinstance(base, str):
        return base
    if base.similarity == "l2":
        return base._replace(name=f"MonotonicAffineTransformation({base.name})")
    if base.similarity != "dot":
        return None

    def query(entity: Any, relation: Any, side: str) -> torch.Tensor:
        vectors = _flat(base.query(entity, relation, side))
        scale, bias = interaction.log_scale.exp(), interaction.bias
        return torch.cat([scale * vectors, bias.to(vectors.dtype).expand(len(vectors), 1)], dim=-1)

    def candidates(entities: Any, side: str) -> torch.Tensor:
        return _with_ones(_flat(base.candidates(entities, side)))

    return InteractionForm(f"MonotonicAffineTransformation({base.name})", query, candidates, "dot", base.sides)


def _direction_average_form(base: InteractionForm | str | None) -> InteractionForm | None:
    """The form of 0.5 (f(h_fwd, r_fwd, t_fwd) + f(t_bwd, r_bwd, h_bwd)) for a base f with a dot form on both sides:
    the candidate's forward representation takes f's form on the target side, its backward one f's form on the
    other side (it sits in the other slot), the two parts side by side."""
    if not isinstance(base, InteractionForm) or base.similarity != "dot" or set(base.sides) != {"head", "tail"}:
        return None
    other = {"head": "tail", "tail": "head"}

    def query(entity: Any, relation: Any, side: str) -> torch.Tensor:
        forward = _flat(base.query(entity[0], relation[0], side))
        backward = _flat(base.query(entity[1], relation[1], other[side]))
        return 0.5 * torch.cat([forward, backward], dim=-1)

    def candidates(entities: Any, side: str) -> torch.Tensor:
        forward = _flat(base.candidates(entities[0], side))
        return torch.cat([forward, _flat(base.candidates(entities[1], other[side]))], dim=-1)

    return InteractionForm(f"DirectionAverage({base.name})", query, candidates, "dot", ("head", "tail"))


class PyKEENQueryCandidate(PyKEENRepresentations):
    """:class:`PyKEENScoring` with the query/candidate form (kgeval.protocol.QueryCandidateModel) of the model's
    interaction (:class:`InteractionForm`).

    Attributes
    ----------
    kind : str
        The interaction's class name (wrapped ones: ``"DirectionAverage(DistMultInteraction)"``).
    kgeval_targets : tuple of str
        The targets the form serves: both with inverse triples (heads through the inverse relation's tail query),
        else those of the interaction's form.
    """

    def __init__(self, model: Model, form: InteractionForm) -> None:
        super().__init__(model)
        self.form = form
        self.kind = form.name
        self.kgeval_similarity = form.similarity
        self.kgeval_targets: tuple[Target, ...] = ("head", "tail") if self.inverse else form.sides

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        """The (E, d) candidate vectors of ``target`` (real views of complex and quaternion representations, a
        bias or a column of ones appended where the form has one)."""
        side = self._side(target)
        return _flat(self.form.candidates(self._entities(None, side), side))

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail") or (r, t) rows (target "head")."""
        return _flat(self.form.query(*self._query_parts(batch, target)))


class PyKEENHeadTable(PyKEENQueryCandidate):
    """:class:`PyKEENQueryCandidate` of a tails-only dot form (a network of (h, r) makes the tail query: ConvE,
    ERMLPE, CrossE, ProjE, Transformer, and those wrapped by a monotonic affine transformation or a clamp of None)
    without inverse triples, whose heads are ranked through a per-relation candidate table
    (:class:`kgeval.protocol.RelationTableModel`).

    The score of (h, r, t) is q(h, r) . c(t), the form's tail query against its tail candidate, whichever side is
    ranked. For a head query (r, t) the candidate h's vector q(h, r) depends on the candidate and the relation
    only: the table of relation r holds the form's tail query of every candidate head with r (the interaction's
    own network, in evaluation mode as the engine scores), and the head query is c(t), the form's candidate vector
    of the tail (ConvE's [t, b_t], ProjE's [t, 1]), so the table's dot products are the model's scores, their
    constants included. The network runs on at most ``NETWORK_CHUNK_ELEMENTS`` elements of its widest layers at a
    time (``network_width``), however wide the slice the engine asks for.

    Attributes
    ----------
    kgeval_targets : tuple of str
        ("tail",): the plain form's.
    kgeval_table_targets : tuple of str
        ("head",): the table's.
    chunk_rows : int
        The candidates the network computes at once.
    """

    kgeval_table_targets: tuple[Target, ...] = ("head",)

    def __init__(self, model: Model, form: InteractionForm) -> None:
        super().__init__(model, form)
        self.kgeval_candidate_bias = False
        self.chunk_rows = max(1, NETWORK_CHUNK_ELEMENTS // network_width(self.model.interaction))
        #: (parameters' version, every entity's parts or None above the cap, the split network) of ConvE's table
        self._conve_parts: tuple[Any, tuple[torch.Tensor, torch.Tensor] | None, ConvEFactors] | None = None

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail": the form's query) or (r, t) rows (target "head": the
        form's candidate vector of t, as PyKEEN passes the interaction t)."""
        if target == "tail":
            return super().kgeval_query(batch, target)
        return _flat(self.form.candidates(self._entities(batch[:, 1], "tail"), "tail"))

    def kgeval_relation_candidates(self, relation: int, target: Target, entities: torch.Tensor) -> torch.Tensor:
        """The (k, d) vectors q(h, r) of the candidate heads ``entities`` with ``relation``: the form's tail query,
        the interaction's network applied to (h, r), in chunks of ``chunk_rows`` candidates."""
        if target != "head":
            raise ValueError(f"{self.kind}'s per-relation table ranks heads only, not {target!r}")
        if splittable(self.model.interaction):
            return self._conve_table(relation, entities)
        parts = []
        for start in range(0, max(1, entities.numel()), self.chunk_rows):
            chunk = entities[start : start + self.chunk_rows]
            relations = torch.full_like(chunk, relation)
            parts.append(_flat(self.form.query(self._entities(chunk, "head"), self._relations(relations), "tail")))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _conve_table(self, relation: int, entities: torch.Tensor) -> torch.Tensor:
        """ConvE's table (``kgeval.adapters.pykeen_conve``): per (entity, relation) only the convolution rows that
        read both, every entity's own part computed once per evaluation (where it fits ``ENTITY_PARTS_BYTES``)."""
        parts, factors = self._conve_state()
        embedding = self._relations(torch.full((1,), relation, dtype=torch.long, device=entities.device))
        hidden = conve_relation_table(factors, embedding, entities, lambda ids: self._entities(ids, "head"), parts,
                                      self.chunk_rows)  # fmt: skip
        return _with_ones(hidden)

    def _conve_state(self) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, ConvEFactors]:
        """(every entity's parts -- :meth:`ConvEFactors.entity_parts`, None where they would take more than
        ``ENTITY_PARTS_BYTES`` --, the split network), both kept while no parameter changed."""
        version = parameters_version(self.model)
        if version is not None and self._conve_parts is not None and self._conve_parts[0] == version:
            return self._conve_parts[1], self._conve_parts[2]
        factors = ConvEFactors(self.model.interaction)
        entities = self.model.num_entities
        parts: tuple[torch.Tensor, torch.Tensor] | None = None
        if entities * factors.entity_part_width * factors.conv.weight.element_size() <= ENTITY_PARTS_BYTES:
            own, maps = [], []
            for start in range(0, entities, self.chunk_rows):
                ids = torch.arange(start, min(entities, start + self.chunk_rows), device=factors.conv.weight.device)
                entity_own, entity_mixed = factors.entity_parts(self._entities(ids, "head"))
                own.append(entity_own)
                maps.append(entity_mixed)
            parts = (torch.cat(own), torch.cat(maps))
        self._conve_parts = (version, parts, factors)
        return parts, factors


#: elements of the network's widest layers a head table computes at once (:class:`PyKEENHeadTable`: 128 MiB of
#: float32), its candidates in chunks of as many rows as that allows
NETWORK_CHUNK_ELEMENTS = 2**25


def _has_head_table(model: Any, form: InteractionForm) -> bool:
    """Whether ``model`` (with ``form``) ranks heads through :class:`PyKEENHeadTable`: a dot form that serves tails
    only, without inverse triples, of an interaction with no batch norm that normalises with batch statistics (in
    evaluation mode a batch norm without running statistics depends on the batch: the table's chunks are not
    PyKEEN's batches)."""
    if model.use_inverse_triples or form.similarity != "dot" or "head" in form.sides:
        return False
    norms = (torch.nn.modules.batchnorm._BatchNorm,)
    return all(module.running_mean is not None for module in model.interaction.modules() if isinstance(module, norms))


def network_width(interaction: Any) -> int:
    """About how many elements per candidate the network of a tails-only interaction holds at once (the widest
    layers' outputs alive together), for :class:`PyKEENHeadTable`'s chunks; wrappers (``base``) unwrapped."""
    while _pykeen_class(interaction) in ("ClampedInteraction", "MonotonicAffineTransformationInteraction"):
        interaction = interaction.base
    linear = [module for module in interaction.modules() if isinstance(module, torch.nn.Linear)]
    widest = max([module.in_features for module in linear] + [module.out_features for module in linear] + [1])
    name = _pykeen_class(interaction)
    if name == "ConvEInteraction":  # the feature maps: the convolution's, its batch norm's and ReLU's outputs
        return 3 * interaction.shape_info.num_in_features + 4 * interaction.shape_info.embedding_dim
    if name == "TransformerInteraction":  # a sequence of two: the feed-forward layers' and the attention's outputs
        return 2 * 4 * widest
    return 4 * max(widest, _entity_width(interaction))


def _entity_width(interaction: Any) -> int:
    """The width of the interaction's bias-like parameters (CrossE's, ProjE's: d), 1 without one."""
    return max([parameter.shape[-1] for parameter in interaction.parameters() if parameter.dim() >= 1] + [1])


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


def _with_ones(x: torch.Tensor) -> torch.Tensor:
    """(n, d) rows with a column of ones appended: the candidates of a form with a query constant."""
    return torch.cat([x, x.new_ones(x.shape[0], 1)], dim=-1)


def _with_column(x: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
    """(n, d) rows with ``column`` ((n,), or a scalar for every row) appended: a query constant or candidate bias."""
    return torch.cat([x, column.to(x.dtype).reshape(-1, 1).expand(x.shape[0], 1)], dim=-1)


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(dim=-1)


# -- queries: (interaction, the known entity's representation, the relation's, side) -> (B, ...) vectors whose dot
# -- product with the candidates' rows (or distance to them) are the scores; side "tail": the entity is the head


def _distmult(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """DistMult, CP: h * r (t * r for heads), elementwise over (d,) or (k, d)."""
    return entity * relation


def _complex_query(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    entity, relation = _complex(entity), _complex(relation)
    return entity * relation if side == "tail" else relation.conj() * entity


def _rescal(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    if side == "tail":
        return torch.einsum("bd,bde->be", entity, relation)
    return torch.einsum("bde,be->bd", relation, entity)


def _transe(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    return entity + relation if side == "tail" else entity - relation


def _rotate(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    entity, relation = _complex(entity), _complex(relation)
    return entity * relation if side == "tail" else entity * relation.conj()


def _unstructured(interaction: Any, entity: torch.Tensor, relation: Any, side: str) -> torch.Tensor:
    """UM: -||h - t||, no relation: the entity itself."""
    return entity


def _distma(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """DistMA: <h, r> + <r, t> + <h, t> = [e + r, <e, r>] . [c, 1] (symmetric in h and t)."""
    return _with_column(entity + relation, _dot(entity, relation))


def _transf(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """TransF: 2 <h, t> + <r, t> - <h, r> = [2h + r, -<h, r>] . [t, 1] = [2t - r, <r, t>] . [h, 1]."""
    if side == "tail":
        return _with_column(2 * entity + relation, -_dot(entity, relation))
    return _with_column(2 * entity - relation, _dot(relation, entity))


def _hole(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """HolE: r . (h ⋆ t), with (h ⋆ t)_i = sum_k h_k t_(i+k mod d), is t . (h * r), the circular convolution
    (h * r)_j = sum_k h_k r_(j-k mod d), and h . (r ⋆ t), the circular correlation; by FFT, as PyKEEN's own."""
    size = entity.shape[-1]
    if side == "tail":
        spectrum = torch.fft.rfft(entity, dim=-1) * torch.fft.rfft(relation, dim=-1)
    else:
        spectrum = torch.conj(torch.fft.rfft(relation, dim=-1)) * torch.fft.rfft(entity, dim=-1)
    return torch.fft.irfft(spectrum, n=size, dim=-1)


def _quate(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """QuatE: -sum h_di r_dj t_dk T_ijk (T: the Hamilton product's table) over (d, 4) quaternions."""
    table = interaction.table.to(entity.dtype)
    if side == "tail":
        return -torch.einsum("bdi,bdj,ijk->bdk", entity, relation, table)
    return -torch.einsum("bdj,bdk,ijk->bdi", relation, entity, table)


def _multilinear_tucker(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """MultiLinearTucker: sum Z_ijk h_i r_j t_k, the core contracted with the known entity and the relation."""
    if side == "tail":
        return torch.einsum("ijk,bi,bj->bk", interaction.core_tensor, entity, relation)
    return torch.einsum("ijk,bj,bk->bi", interaction.core_tensor, relation, entity)


def _tucker(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """TuckER: BN_hr((Z x_2 r) x_1 BN_h(h)) . t. Tails: PyKEEN's own steps up to the dot product. Heads: the batch
    norms are affine in evaluation mode (BN(x) = a x + c), so the score is a h . (a_h ∘ M (a_hr ∘ t)) + a
    constant (M = Z x_2 r): the query [a_h ∘ v, c_h . v + c_hr . t] against [h, 1]."""
    matrix = interaction.relation_dropout(torch.einsum("ijk,bj->bik", interaction.core_tensor, relation))
    if side == "tail":
        head = interaction.head_dropout(_batch_norm(entity, interaction.head_batch_norm))
        return interaction.head_relation_dropout(
            _batch_norm(torch.einsum("bik,bi->bk", matrix, head), interaction.head_relation_batch_norm)
        )
    scale, shift = _affine(interaction.head_relation_batch_norm, entity)
    head_scale, head_shift = _affine(interaction.head_batch_norm, entity)
    vectors = torch.einsum("bik,bk->bi", matrix, scale * entity)
    return _with_column(head_scale * vectors, _dot(head_shift, vectors) + _dot(shift, entity))


def _batch_norm(x: torch.Tensor, norm: Any) -> torch.Tensor:
    """PyKEEN's ``apply_optional_bn`` on (B, d) rows."""
    return x if norm is None else norm(x)


def _affine(norm: Any, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, shift) of a BatchNorm1d in evaluation mode, (x - mean) / sqrt(var + eps) * weight + bias, as a x + c;
    (1, 0) for none."""
    if norm is None:
        return like.new_ones(like.shape[-1]), like.new_zeros(like.shape[-1])
    scale = torch.rsqrt(norm.running_var.to(like.dtype) + norm.eps)
    if norm.weight is not None:
        scale = scale * norm.weight.to(like.dtype)
    shift = -norm.running_mean.to(like.dtype) * scale
    if norm.bias is not None:
        shift = shift + norm.bias.to(like.dtype)
    return scale, shift


def _autosf(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    """AutoSF: sum over blocks (i_h, i_r, i_t, s) of s <h[i_h], r[i_r], t[i_t]>: the candidate's block j is
    multiplied by the sum of s e[i] * r[i_r] over the blocks that put it at j."""
    entities, relations = _blocks(entity), _blocks(relation)
    parts = [torch.zeros_like(entities[0]) for _ in interaction.entity_shape]
    for head, rel, tail, sign in interaction.coefficients:
        known, slot = (head, tail) if side == "tail" else (tail, head)
        parts[slot] = parts[slot] + sign * (entities[known] * relations[rel])
    return torch.stack(parts, dim=1)


def _blocks(representation: Any) -> list[torch.Tensor]:
    return [representation] if isinstance(representation, torch.Tensor) else list(representation)


# -- tails only (heads through the inverse relation): a network of (h, r) gives the query


def _conve(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """ConvE: PyKEEN's convolution of the (h, r) image up to the dot product, and a 1 for the tail's bias."""
    info = interaction.shape_info
    image = (info.input_channels, info.image_height, info.image_width)
    x = torch.cat([entity.view(-1, *image), relation.view(-1, *image)], dim=-2)
    x = interaction.hr1d(interaction.hr2d(x).view(-1, info.num_in_features))
    return _with_ones(x.view(entity.shape[0], -1))


def _ermlpe(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """ER-MLP (E): the MLP of [h; r]."""
    return interaction.mlp(torch.cat([entity, relation], dim=-1))


def _crosse(interaction: Any, entity: torch.Tensor, relation: list[torch.Tensor], side: str) -> torch.Tensor:
    """CrossE: act(b + c_r ∘ h + c_r ∘ h ∘ r), then its dropout, in PyKEEN's order."""
    embedding, interaction_vector = relation
    head = interaction_vector * entity
    x = interaction.activation(interaction.bias.view(1, -1) + head + head * embedding)
    return x if interaction.dropout is None else interaction.dropout(x)


def _proje(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """ProjE (identity outer activation): [f(d_e ∘ h + d_r ∘ r + b_c), b_p] against [t, 1]."""
    x = interaction.inner_activation(entity * interaction.d_e + relation * interaction.d_r + interaction.b_c)
    return _with_column(x, interaction.b_p)


def _transformer(interaction: Any, entity: torch.Tensor, relation: torch.Tensor, side: str) -> torch.Tensor:
    """Transformer: the final projection of the sum-pooled encoding of [h + pe_0; r + pe_1]."""
    x = torch.stack([entity, relation], dim=0) + interaction.position_embeddings.unsqueeze(dim=1)
    return interaction.final(interaction.transformer(src=x).sum(dim=0))


# -- candidates: (interaction, the candidates' representation(s) in the slot they take, side) -> (E, ...)


def _plain(interaction: Any, entities: torch.Tensor, side: str) -> torch.Tensor:
    return entities


def _ones_appended(interaction: Any, entities: torch.Tensor, side: str) -> torch.Tensor:
    return _with_ones(_flat(entities))


def _tucker_candidates(interaction: Any, entities: torch.Tensor, side: str) -> torch.Tensor:
    return entities if side == "tail" else _with_ones(entities)


def _stacked(interaction: Any, entities: Any, side: str) -> torch.Tensor:
    return torch.stack(_blocks(entities), dim=1)


def _biased(interaction: Any, entities: list[torch.Tensor], side: str) -> torch.Tensor:
    """ConvE's tails: [t, b_t]."""
    embedding, bias = entities
    return _with_column(embedding, bias)


Query = Callable[[Any, Any, Any, str], torch.Tensor]
Candidates = Callable[[Any, Any, str], torch.Tensor]
BOTH: tuple[Target, ...] = ("head", "tail")
TAILS: tuple[Target, ...] = ("tail",)

#: PyKEEN interaction class name -> (query, candidates, similarity (None: "l1" / "l2" by the interaction's p), the
#: targets it serves without inverse triples); wrappers of these (clamp None, monotonic affine, direction average,
#: SimplE) in ``_form_of``
FORMS: dict[str, tuple[Query, Candidates, str | None, tuple[Target, ...]]] = {
    "DistMultInteraction": (_distmult, _plain, "dot", BOTH),
    "CPInteraction": (_distmult, _plain, "dot", BOTH),
    "ComplExInteraction": (_complex_query, _plain, "dot", BOTH),
    "RESCALInteraction": (_rescal, _plain, "dot", BOTH),
    "TransEInteraction": (_transe, _plain, None, BOTH),
    "RotatEInteraction": (_rotate, _plain, None, BOTH),
    "UMInteraction": (_unstructured, _plain, None, BOTH),
    "DistMAInteraction": (_distma, _ones_appended, "dot", BOTH),
    "TransFInteraction": (_transf, _ones_appended, "dot", BOTH),
    "HolEInteraction": (_hole, _plain, "dot", BOTH),
    "QuatEInteraction": (_quate, _plain, "dot", BOTH),
    "MultiLinearTuckerInteraction": (_multilinear_tucker, _plain, "dot", BOTH),
    "TuckERInteraction": (_tucker, _tucker_candidates, "dot", BOTH),
    "AutoSFInteraction": (_autosf, _stacked, "dot", BOTH),
    "ConvEInteraction": (_conve, _biased, "dot", TAILS),
    "ERMLPEInteraction": (_ermlpe, _plain, "dot", TAILS),
    "CrossEInteraction": (_crosse, _plain, "dot", TAILS),
    "ProjEInteraction": (_proje, _ones_appended, "dot", TAILS),
    "TransformerInteraction": (_transformer, _plain, "dot", TAILS),
}


class InteractionForm(NamedTuple):
    """One interaction's query/candidate form, bound to the interaction: ``query(entity, relation, side)`` and
    ``candidates(entities, side)`` (side "tail": the entity is the head, the candidates tails), ``similarity``, and
    the ``sides`` it serves without inverse triples."""

    name: str
    query: Callable[[Any, Any, str], torch.Tensor]
    candidates: Callable[[Any, str], torch.Tensor]
    similarity: str
    sides: tuple[Target, ...]


__all__ = (
    "FORMS", "InteractionForm", "PyKEENHeadTable", "PyKEENPredicting", "PyKEENQueryCandidate", "PyKEENScoring",
    "pykeen_view",
)  # fmt: skip
