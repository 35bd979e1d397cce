"""A temporal model seen by the engine as a static one (:class:`TemporalView`): a quadruple (h, r, t, τ) is the
triple (h, ρ, t) of the *packed relation* ρ = r · T + τ (T times), so the engine's queries (h, ρ) and (ρ, t), its
filter index keyed by them and its scorers work unchanged, and this view unpacks each query before it calls the
model: ``score_t`` of (h, r, τ) rows, ``score_h`` of (r, t, τ) rows, ``kgeval_query`` of either.

With ``inverse_relations=R`` (the forecasting convention of models that only predict objects), the head query
(?, r, t, τ) is asked as the tail query (t, r + R, ?, τ) of ``score_t`` (and of ``kgeval_query(..., "tail")``).
"""

from __future__ import annotations

from typing import Any

import torch

from kgeval.adapters import model_device
from kgeval.adapters.overrides import method_below_form
from kgeval.adapters.signatures import candidate_argument
from kgeval.adapters.wrappers import describe
from kgeval.protocol import QueryCandidateModel
from kgeval.typing import Target

__all__ = ["TemporalView", "pack_quadruples", "temporal_view"]


def pack_quadruples(quadruples: torch.Tensor, num_times: int) -> torch.Tensor:
    """(n, 4) (h, r, t, τ) -> (n, 3) (h, r · num_times + τ, t)."""
    return torch.stack([quadruples[:, 0], quadruples[:, 1] * num_times + quadruples[:, 3], quadruples[:, 2]], dim=1)


class TemporalView:
    """The static protocol over a temporal model (see the module docstring).

    Parameters
    ----------
    model : object
        Has ``score_t(hrτ_batch)`` / ``score_h(rtτ_batch)`` ((B, 3) rows, (B, num_entities) scores; optionally
        ``tails=`` / ``heads=`` candidate ids), and optionally the query/candidate form over (B, 3) batches.
    num_entities, num_relations, num_times : int
        ``num_relations`` counts the relations of the data (the inverse ones excluded).
    inverse_relations : int, optional
        Score (?, r, t, τ) as (t, r + inverse_relations, ?, τ) through ``score_t``.
    form_refused : str, optional
        Why the model's form may not stand in for its methods (its class redefines one below the form); then the
        view has no form.
    """

    def __init__(
        self,
        model: Any,
        num_entities: int,
        num_relations: int,
        num_times: int,
        inverse_relations: int | None = None,
        form_refused: str | None = None,
    ) -> None:
        self.model = model
        self.num_entities = num_entities
        self.num_relations = num_relations * num_times  #: packed relation ids
        self.num_times = num_times
        self.inverse_relations = inverse_relations
        self.kgeval_form_refused = form_refused
        for target in ("tail", "head"):  # score_t / score_h: (B, 2) packed rows -> the model's scores
            self._bind(target)

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    def unpack(self, batch: torch.Tensor, target: Target) -> tuple[torch.Tensor, Target]:
        """The model's (B, 3) query rows of a (B, 2) packed batch, and the target it is asked for: (h, r, τ) for
        tails; (r, t, τ) for heads -- or (t, r + R, τ) for tails with ``inverse_relations`` R."""
        column = 1 if target == "tail" else 0
        packed = batch[:, column]
        relation, time = packed // self.num_times, packed % self.num_times
        entity = batch[:, 1 - column]
        if target == "tail":
            return torch.stack([entity, relation, time], dim=1), "tail"
        if self.inverse_relations is not None:
            return torch.stack([entity, relation + self.inverse_relations, time], dim=1), "tail"
        return torch.stack([relation, entity, time], dim=1), "head"

    def _method(self, target: Target) -> tuple[Any, str]:
        """The model's method that scores a ``target`` query of this view, and its candidate keyword."""
        if target == "tail" or self.inverse_relations is not None:
            return getattr(self.model, "score_t", None), "tails"
        return getattr(self.model, "score_h", None), "heads"

    def _score(self, batch: torch.Tensor, target: Target, candidates: torch.Tensor | None = None) -> torch.Tensor:
        rows, asked = self.unpack(batch, target)
        method = getattr(self.model, "score_t" if asked == "tail" else "score_h")
        if candidates is None:
            return method(rows)
        keyword = "tails" if asked == "tail" else "heads"
        if candidate_argument(method, keyword) == "positional":
            return method(rows, candidates)
        return method(rows, **{keyword: candidates})

    def _bind(self, target: Target) -> None:
        """Give the view the scoring method of ``target`` the model has for it, taking candidate ids where the
        model's does (the engine then scores slices) and not where it does not (whole rows)."""
        method, keyword = self._method(target)
        if not callable(method):
            return
        name = "score_t" if target == "tail" else "score_h"
        if candidate_argument(method, keyword) is None:
            setattr(self, name, lambda batch: self._score(batch, target))
        elif target == "tail":
            setattr(self, name, lambda hr_batch, tails=None: self._score(hr_batch, "tail", tails))
        else:
            setattr(self, name, lambda rt_batch, heads=None: self._score(rt_batch, "head", heads))

    def __repr__(self) -> str:
        return f"TemporalView({describe(self.model)}, num_times={self.num_times})"


class TemporalQueryCandidate(TemporalView):
    """:class:`TemporalView` with the model's query/candidate form: queries of unpacked rows, the model's
    candidates and similarity. The class check was made on the model (:func:`temporal_view`): the view's own
    methods, bound per instance, are no subclass's (``kgeval_form_checked``); the probe still compares the two."""

    kgeval_form_checked = True

    def __init__(self, model: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(model, *args, **kwargs)
        self.kgeval_similarity = model.kgeval_similarity

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        rows, asked = self.unpack(batch, target)
        return self.model.kgeval_query(rows, asked)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        return self.model.kgeval_candidates("tail" if self.inverse_relations is not None else target)


def temporal_view(
    model: Any, num_entities: int, num_relations: int, num_times: int, inverse_relations: int | None = None
) -> TemporalView:
    """The view of ``model``: with its query/candidate form where the model has one whose class does not redefine
    the scoring methods below it (the static class check of kgeval._engine.form_check), else its methods only."""
    args = (num_entities, num_relations, num_times, inverse_relations)
    if not isinstance(model, QueryCandidateModel):
        return TemporalView(model, *args)
    methods = ("score_t",) if inverse_relations is not None else ("score_t", "score_h")
    overridden = next((found for method in methods if (found := method_below_form(model, method)) is not None), None)
    if overridden is not None:
        return TemporalView(model, *args, form_refused=f"{overridden} overrides the scoring method the fast path "
                                                        "stands in for")  # fmt: skip
    return TemporalQueryCandidate(model, *args)
