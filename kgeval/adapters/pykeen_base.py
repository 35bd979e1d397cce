"""The views of a PyKEEN model every kgeval view builds on: its scores as ``model.predict`` computes them
(:class:`PyKEENScoring`, :class:`PyKEENPredicting`) and the representations PyKEEN passes its interaction
(:class:`PyKEENRepresentations`, the base of the fast-path views of ``kgeval.adapters.pykeen`` and
``kgeval.adapters.pykeen_tables``). Imported only when kgeval meets a PyKEEN model.
"""

from __future__ import annotations

from typing import Any

import torch
from pykeen.models import Model

from kgeval.typing import InductiveMode, Target

__all__ = [
    "PREDICT_METHODS",
    "SCORING_METHODS",
    "PyKEENPredicting",
    "PyKEENRepresentations",
    "PyKEENScoring",
    "flat_rows",
    "single_representation",
]

#: the methods through which a PyKEEN model computes its scores: a subclass that redefines one may score otherwise
#: than its interaction's GEMM form, so it is scored through its own methods
SCORING_METHODS: tuple[str, ...] = (
    "score_hrt", "score_t", "score_h", "score_r", "score_hrt_inverse", "score_t_inverse", "score_h_inverse",
    "forward", "_get_representations", "_prepare_batch", "_prepare_inverse_batch",
)  # fmt: skip
#: the methods PyKEEN's own evaluator calls: a subclass that redefines one is scored through them, as PyKEEN does
PREDICT_METHODS: tuple[str, ...] = ("predict", "predict_t", "predict_h", "predict_r")


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
    kgeval_no_form : str or None
        Why the model has no fast path at all (its interaction has no form), for kgeval's log line.
    """

    def __init__(self, model: Model, refusal: str | None = None, mode: InductiveMode | None = None) -> None:
        self.model: Any = model  # its attributes are PyKEEN's (typed by torch as Tensor | Module)
        self.kgeval_form_refused = refusal
        self.kgeval_no_form: str | None = None
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


class PyKEENRepresentations(PyKEENScoring):
    """:class:`PyKEENScoring` that reads the representations PyKEEN passes the model's interaction: the base of the
    fast-path views (``kgeval.adapters.pykeen.PyKEENQueryCandidate``,
    ``kgeval.adapters.pykeen_tables.PyKEENRelationTable``)."""

    def _entities(self, ids: torch.Tensor | None, slot: str) -> Any:
        """The entity representations PyKEEN passes the interaction as ``slot`` ("head" or "tail"): those of its
        ``head_indices`` / ``tail_indices``, one tensor where there is one (``ERModel._get_representations``)."""
        indices = self.model.interaction.head_indices if slot == "head" else self.model.interaction.tail_indices
        return single_representation([self.model.entity_representations[i](indices=ids) for i in indices])

    def _relations(self, ids: torch.Tensor) -> Any:
        return single_representation(
            [representation(indices=ids) for representation in self.model.relation_representations]
        )

    def _side(self, target: Target) -> str:
        """The slot the candidates of ``target`` take: tails', for heads through the inverse relation."""
        return "tail" if target == "tail" or self.inverse else "head"

    def _query_parts(self, batch: torch.Tensor, target: Target) -> tuple[Any, Any, str]:
        """(entity representations, relation representations, the candidates' slot) of the queries of a (B, 2)
        batch: (h, r) rows for target "tail", (r, t) rows for "head" -- (t, r_inv, ?) as a tail query for a model
        trained with inverse triples."""
        if target == "tail":
            mapped = self._mapped(batch, 1)
            return self._entities(mapped[:, 0], "head"), self._relations(mapped[:, 1]), "tail"
        if self.inverse:
            mapped = self._mapped(batch, 0, invert=True)
            return self._entities(mapped[:, 1], "head"), self._relations(mapped[:, 0]), "tail"
        return self._entities(batch[:, 1], "tail"), self._relations(batch[:, 0]), "head"


def flat_rows(x: torch.Tensor) -> torch.Tensor:
    """(n, ...) representations as (n, d) real rows: complex ones as interleaved real views, matrices (CP's
    (k, d), QuatE's (d, 4)) flattened. A query and its candidates of the same layout flatten alike."""
    if x.is_complex():
        x = torch.view_as_real(x)
    return x.reshape(x.shape[0], -1)


def single_representation(representations: list[torch.Tensor]) -> Any:
    """One representation as a tensor, several as the list: what PyKEEN passes its interactions."""
    return representations[0] if len(representations) == 1 else representations
