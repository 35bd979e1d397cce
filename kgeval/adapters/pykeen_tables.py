"""PyKEEN's distance interactions whose candidates are transformed by the relation alone, as a per-relation candidate
table (:class:`kgeval.protocol.RelationTableModel`): :func:`relation_table_form` gives the view of such a model.

Each interaction of :data:`TABLES` scores -||f(h, r) - g(t, r)||_p (MuRE: a squared distance plus entity biases):
a tail's query is f(h, r) and its candidates g(t, r); a head's query is g(t, r) (less the translation) and its
candidates f(h, r). Both are computed by PyKEEN's own operations on the representations PyKEEN passes the
interaction (``ERModel._get_representations``), so the table's scores are the model's up to the order of the last
sum. Not given a table (and why):

- ``TorusEInteraction``: the distance on the torus, min(frac(x), 1 - frac(x)) of h + r - t, is no norm of a
  difference of a query and a candidate vector;
- ``UMInteraction``, ``TransEInteraction``, ``RotatEInteraction`` and the other interactions of
  ``kgeval.adapters.pykeen.FORMS``: their candidates do not depend on the relation, and they have the plain
  query/candidate form there;
- a p other than 1 or 2 (no GEMM or cdist of that norm), and MuRE with p = 2 without ``power_norm`` (the biases
  are added to the distance itself, which ranks otherwise than its square);
- interactions wrapped by ``ClampedInteraction`` / ``MonotonicAffineTransformationInteraction`` (not unwrapped
  here), subclasses of PyKEEN's interactions and a user's own (matched by class, never by name), inductive models
  (scored per mode), and a model whose class redefines a scoring or prediction method below PyKEEN's.

Imported with ``kgeval.adapters.pykeen``, whose ``pykeen_view`` offers these views where the interaction has no plain
query/candidate form; they build on :class:`kgeval.adapters.pykeen_base.PyKEENRepresentations`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from pykeen.models import ERModel
from pykeen.models.inductive import InductiveERModel
from pykeen.nn import modules
from pykeen.utils import clamp_norm, project_entity

from kgeval.adapters.overrides import foreign_override
from kgeval.adapters.pykeen_base import PREDICT_METHODS, SCORING_METHODS, PyKEENRepresentations
from kgeval.adapters.pykeen_base import flat_rows as _flat
from kgeval.typing import Target

__all__ = ["OWN_METHODS", "TABLES", "PyKEENRelationTable", "Table", "relation_table_form"]

#: the methods through which a PyKEEN model computes and predicts its scores: a subclass that redefines one may score
#: otherwise than its interaction's table
OWN_METHODS: tuple[str, ...] = SCORING_METHODS + PREDICT_METHODS


class Table(NamedTuple):
    """One interaction's table: ``query(interaction, entity, relation, side)`` -> (B, d) from the query entity's
    and relation's representations (B rows each); ``candidates(interaction, entities, relation, side)`` -> (k, d)
    (a bias column last where ``bias``) from k candidates' representations and one relation's (a leading axis of
    1); ``side``: "tail" or "head", the slot of the candidates."""

    query: Callable[[Any, Any, Any, str], torch.Tensor]
    candidates: Callable[[Any, Any, Any, str], torch.Tensor]
    bias: bool = False


def _hyperplane(entity: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
    """TransH's projection onto the hyperplane of ``normal``, as PyKEEN computes it: e - (e . w) w."""
    return entity - torch.einsum("...i, ...i, ...j -> ...j", entity, normal, normal)


def _transh_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    normal, translation = relation
    projected = _hyperplane(entity, normal)
    return projected + translation if side == "tail" else projected - translation


def _transh_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    return _hyperplane(entities, relation[0])


def _transr_projection(interaction: Any, entity: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """TransR's clamped projection, as PyKEEN computes it: clamp_norm(e M_r)."""
    projected = torch.einsum("...e, ...er -> ...r", entity, matrix)
    return clamp_norm(projected, p=interaction.p, dim=-1, maxnorm=interaction.max_projection_norm)


def _transr_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    translation, matrix = relation
    projected = _transr_projection(interaction, entity, matrix)
    return projected + translation if side == "tail" else projected - translation


def _transr_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    return _transr_projection(interaction, entities, relation[1])


def _transd_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    (vector, projection), (translation, relation_projection) = entity, relation
    projected = project_entity(e=vector, e_p=projection, r_p=relation_projection)
    return projected + translation if side == "tail" else projected - translation


def _transd_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    (vectors, projections), (_translation, relation_projection) = entities, relation
    return project_entity(e=vectors, e_p=projections, r_p=relation_projection)


def _pairre_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    head_scale, tail_scale = relation
    return entity * (head_scale if side == "tail" else tail_scale)


def _pairre_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    head_scale, tail_scale = relation
    return entities * (tail_scale if side == "tail" else head_scale)


def _se_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    return torch.einsum("...rd,...d->...r", relation[0 if side == "tail" else 1], entity)


def _se_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    return torch.einsum("...rd,...d->...r", relation[1 if side == "tail" else 0], entities)


def _scales(interaction: Any, relation: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(head scale, translation, tail scale) of TripleRE (its u added, as PyKEEN adds it) and LineaRE."""
    head, middle, tail = relation
    u = getattr(interaction, "u", None)
    if u is not None:
        head, tail = head + u, tail + u
    return head, middle, tail


def _scaled_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    head, middle, tail = _scales(interaction, relation)
    return entity * head + middle if side == "tail" else entity * tail - middle


def _scaled_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    head, _middle, tail = _scales(interaction, relation)
    return entities * (tail if side == "tail" else head)


def _mure_query(interaction: Any, entity: Any, relation: Any, side: str) -> torch.Tensor:
    (vector, _bias), (translation, scale) = entity, relation
    return vector * scale + translation if side == "tail" else vector - translation


def _mure_candidates(interaction: Any, entities: Any, relation: Any, side: str) -> torch.Tensor:
    (vectors, bias), (_translation, scale) = entities, relation
    transformed = vectors if side == "tail" else vectors * scale
    return torch.cat([transformed, bias.reshape(-1, 1).to(transformed.dtype)], dim=-1)


#: PyKEEN interaction class name -> its table (matched by class: ``pykeen.nn.modules``' own classes only)
TABLES: dict[str, Table] = {
    "TransHInteraction": Table(_transh_query, _transh_candidates),
    "TransRInteraction": Table(_transr_query, _transr_candidates),
    "TransDInteraction": Table(_transd_query, _transd_candidates),
    "PairREInteraction": Table(_pairre_query, _pairre_candidates),
    "SEInteraction": Table(_se_query, _se_candidates),
    "TripleREInteraction": Table(_scaled_query, _scaled_candidates),
    "LineaREInteraction": Table(_scaled_query, _scaled_candidates),
    "MuREInteraction": Table(_mure_query, _mure_candidates, bias=True),
}


def relation_table_form(model: Any) -> PyKEENRelationTable | None:
    """The per-relation candidate table view (:class:`PyKEENRelationTable`) of a PyKEEN model whose interaction is
    one of :data:`TABLES` with a p of 1 or 2, else None (the module docstring lists what has none, and why).

    A transductive ``ERModel`` only, holding as many entity and relation representations as its interaction takes,
    whose class redefines none of PyKEEN's scoring or prediction methods (:data:`OWN_METHODS`) below PyKEEN's own
    classes, and whose interaction's class is PyKEEN's own (``pykeen.nn.modules``; a subclass or a user's class of
    the same name may compute otherwise)."""
    if not isinstance(model, ERModel) or isinstance(model, InductiveERModel):
        return None
    interaction = model.interaction
    cls = type(interaction)
    name = cls.__name__
    if not (cls.__module__ or "").startswith("pykeen.") or getattr(modules, name, None) is not cls:
        return None
    if name not in TABLES or foreign_override(model, OWN_METHODS, "pykeen") is not None:
        return None
    counts = (len(model.entity_representations), len(model.relation_representations))
    if counts != (len(interaction.entity_shape), len(interaction.relation_shape)):
        return None
    similarity = _similarity(interaction, TABLES[name].bias)
    if similarity is None:
        return None
    return PyKEENRelationTable(model, name, similarity)


def _similarity(interaction: Any, bias: bool) -> str | None:
    """ "l1" or "l2" for the interaction's p (a distance's power does not change its order); with a bias the
    distance's power does: "l2" only for its square (``power_norm``), "l1" for p = 1 either way."""
    p = interaction.p
    if isinstance(p, str) or not float(p).is_integer() or int(p) not in (1, 2):
        return None
    if bias and int(p) == 2 and not interaction.power_norm:
        return None
    return "l1" if int(p) == 1 else "l2"


class PyKEENRelationTable(PyKEENRepresentations):
    """A PyKEEN model with a per-relation candidate table (:class:`kgeval.protocol.RelationTableModel`): its own
    scores as PyKEEN predicts them (:class:`kgeval.adapters.pykeen.PyKEENScoring`), and the table of its interaction
    (:data:`TABLES`).

    Attributes
    ----------
    model : pykeen.models.ERModel
    num_entities, num_relations : int
        The entities and the relations of the data (without the inverse ones).
    kind : str
        The interaction's class name.
    kgeval_similarity : str
        "l1" or "l2".
    kgeval_candidate_bias : bool
        Whether the table's last column is a candidate bias (MuRE's).
    """

    kgeval_targets: tuple[Target, ...] = ("head", "tail")

    def __init__(self, model: ERModel, kind: str, similarity: str) -> None:
        super().__init__(model)
        self.kind = kind
        self.table = TABLES[kind]
        self.kgeval_similarity = similarity
        self.kgeval_candidate_bias = self.table.bias

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries from (h, r) rows (target "tail") or (r, t) rows (target "head")."""
        return _flat(self.table.query(self.model.interaction, *self._query_parts(batch, target)))

    def kgeval_relation_candidates(self, relation: int, target: Target, entities: torch.Tensor) -> torch.Tensor:
        """The (k, d) candidates ``entities`` of ``target`` transformed for ``relation`` (a relation of the data;
        its inverse for heads of a model trained with inverse triples), a bias column last for MuRE."""
        ids = torch.tensor([[relation]], dtype=torch.int64, device=entities.device)
        stored = self._mapped(ids, 0, invert=target == "head")[:, 0]
        side = self._side(target)
        candidates = self._entities(entities, side)
        return _flat(self.table.candidates(self.model.interaction, candidates, self._relations(stored), side))
