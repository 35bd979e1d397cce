"""dicee integration: ``dicee.models`` knowledge-graph-embedding models (every subclass of ``BaseKGE``) evaluated
unchanged, through the methods dicee's own evaluator scores with (:func:`dicee_view`).

dicee scores tails against every entity with ``forward_k_vs_all(x=(h, r) batch)`` (the method its KvsAll
evaluation ranks with) and whole triples with ``forward_triples`` (its evaluation of heads, and of models without
an all-entity method). Neither has a head-query form, so heads are scored as triples over candidate slices. No
fast path: dicee's scores pass through its own normalisation and dropout layers (identity in evaluation mode, but
the model's own modules all the same), and the model's own methods are what kgeval ranks.

dicee's evaluators (``dicee.evaluation``), for comparison: filtered (the known triples of train, valid and test
set to -inf), tails through ``forward_k_vs_all`` for KvsAll-trained models, heads and tails through
``forward_triples`` otherwise; the rank is the answer's position after ``torch.sort(descending=True)``, so among
tied scores it lies anywhere between kgeval's optimistic and pessimistic ranks (``torch.sort`` does not order ties),
and a filtered candidate set to -inf ties with an answer whose own score is -inf. kgeval reports the exact tie
bounds and the realistic mean.
"""

from __future__ import annotations

import torch
from dicee.models.base_model import BaseKGE

__all__ = ["DiceeScoring", "dicee_view"]


def dicee_view(model: BaseKGE) -> DiceeScoring:
    """kgeval's model protocol over a dicee model (see the module docstring).

    Raises
    ------
    TypeError
        For byte-pair-encoded models (``byte_pair_encoding=True``: entities are token sequences, not ids), or a
        model without entity and relation counts.
    """
    if getattr(model, "byte_pair_encoding", False):
        raise TypeError(
            f"{type(model).__name__} is a byte-pair-encoded dicee model: it scores token sequences, not entity ids; "
            "kgeval cannot rank its entities by id"
        )
    for name in ("num_entities", "num_relations"):
        if not isinstance(getattr(model, name, None), int):
            raise TypeError(f"the dicee model {type(model).__name__} has no {name} (set in its args)")
    return DiceeScoring(model)


def _implements(model: BaseKGE, method: str) -> bool:
    """Whether ``model``'s class defines ``method`` below BaseKGE (whose versions raise 'does not have ...')."""
    return getattr(type(model), method, None) is not getattr(BaseKGE, method, None)


class DiceeScoring:
    """A dicee model's scores for kgeval: ``score_t`` through ``forward_k_vs_all`` when the model has it, whole
    triples through ``forward_triples``; its entity / relation counts and device."""

    def __init__(self, model: BaseKGE) -> None:
        self.model = model
        self.num_entities: int = model.num_entities
        self.num_relations: int = model.num_relations
        if _implements(model, "forward_k_vs_all"):
            self.score_t = self._score_t

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        """(B, num_entities) scores of (h, r, e) for every entity e: ``forward_k_vs_all(x=hr_batch)``."""
        return self.model.forward_k_vs_all(x=hr_batch)

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """(n,) scores of (h, r, t) rows: ``forward_triples``."""
        return self.model.forward_triples(hrt_batch).reshape(-1)
