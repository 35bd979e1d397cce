"""Relation prediction without the direction (:func:`evaluate_undirected_relations`): the true relation of
(h, ?, t) ranked among every relation in both directions -- the 2R candidates (h, r', t) and (t, r', h) -- as
TorchKGE's ``RelationPredictionEvaluator(directed=False)`` asks it.

The model is evaluated by :class:`kgeval.RankBasedEvaluator` through a view of 2R relations
(:class:`BothDirections`: relation r' < R scores (h, r', t), relation R + r' scores (t, r', h)), so the ranks, ties
and metrics are kgeval's. Filtered as kgeval filters (convention ``"kgeval"``): a candidate is removed when it is a
known triple in its own direction. TorchKGE's convention (``"torchkge"``) filters the reversed candidates by the
relations known for (h, t) instead -- (t, r', h) removed when (h, r', t) is known, except (t, r, h) of the true
relation, which stays a candidate -- as its code does (``filter_scores`` of both halves with the same (h, t) key
and the true relation's index spared); docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch

from kgeval._modes import evaluation_mode
from kgeval.adapters import scoring_view
from kgeval.adapters.triples import triple_function
from kgeval.evaluator import RankBasedEvaluator
from kgeval.records import RankRecords
from kgeval.results import RankBasedMetricResults

__all__ = ["UNDIRECTED_CONVENTIONS", "BothDirections", "evaluate_undirected_relations"]

#: the filters of the reversed candidates, by name
UNDIRECTED_CONVENTIONS: tuple[str, ...] = ("kgeval", "torchkge")


class BothDirections:
    """A model's relation scores in both directions: ``score_r`` of (h, t) pairs gives (B, 2R) scores, column r' <
    R the model's score of (h, r', t), column R + r' its score of (t, r', h). Holds the model (kgeval puts it in
    eval mode and watches it as it would the model itself)."""

    def __init__(self, model: Any, num_entities: int, num_relations: int) -> None:
        self.model = model
        self.num_entities = num_entities
        self.num_relations = 2 * num_relations
        self._relations = num_relations
        self._view = scoring_view(model)

    def score_r(self, ht_batch: torch.Tensor, relations: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 2R) scores of the pairs (or of the given relation columns, (B, len(relations)) or (B, k))."""
        scores = torch.cat([self._one_direction(ht_batch), self._one_direction(ht_batch.flip(1))], dim=1)
        if relations is None:
            return scores
        return scores.gather(1, relations.expand(scores.shape[0], -1)) if relations.dim() == 1 else scores.gather(
            1, relations)  # fmt: skip

    def _one_direction(self, pairs: torch.Tensor) -> torch.Tensor:
        """(B, R) scores of (h, r', t) for every relation r'."""
        score_r = getattr(self._view, "score_r", None)
        if callable(score_r):
            return score_r(pairs)
        found = triple_function(self._view)
        if found is None:
            raise TypeError(f"{type(self.model).__name__} scores no relations: it has neither score_r nor a triple "
                            "scoring function")  # fmt: skip
        score = found[0]
        relations = torch.arange(self._relations, device=pairs.device).repeat(pairs.shape[0])
        heads, tails = (pairs[:, column].repeat_interleave(self._relations) for column in (0, 1))
        return score(heads, relations, tails).reshape(pairs.shape[0], self._relations)


def evaluate_undirected_relations(
    model: Any,
    triples: torch.Tensor,
    *,
    additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
    convention: Literal["kgeval", "torchkge"] = "kgeval",
    num_entities: int | None = None,
    num_relations: int | None = None,
    evaluator: RankBasedEvaluator | None = None,
    **evaluate_kwargs: Any,
) -> RankBasedMetricResults:
    """Rank the true relation of each (h, r, t) among the 2R candidates (h, r', t) and (t, r', h).

    Parameters
    ----------
    model
        Any model kgeval ranks relations of (``score_r``, or whole triples).
    triples : LongTensor of shape (n, 3)
    additional_filter_triples : LongTensor (m, 3) or a sequence of them, optional
        Known triples (the evaluated ones are known too).
    convention : {"kgeval", "torchkge"}, default="kgeval"
        How the reversed candidates are filtered (module docstring).
    num_entities, num_relations : int, optional
        Default: the model's.
    evaluator : RankBasedEvaluator, optional
        Its settings (``filtered``, ``ks``, sizes); default ``RankBasedEvaluator()``.
    **evaluate_kwargs
        Passed to ``evaluate`` (``use_tqdm``, ...).

    Returns
    -------
    RankBasedMetricResults
        The side ``relation``: each task's rank among 2R candidates (column R + r' is (t, r', h)).
    """
    if convention not in UNDIRECTED_CONVENTIONS:
        raise ValueError(f"convention must be one of {UNDIRECTED_CONVENTIONS}, got {convention!r}")
    entities = num_entities if num_entities is not None else getattr(model, "num_entities", None)
    relations = num_relations if num_relations is not None else getattr(model, "num_relations", None)
    if entities is None or relations is None:
        raise ValueError("pass num_entities and num_relations (the model declares neither)")
    view = BothDirections(model, int(entities), int(relations))
    if isinstance(additional_filter_triples, torch.Tensor):
        additional_filter_triples = [additional_filter_triples]
    known = torch.cat([triples, *(additional_filter_triples or [])])
    filters = [*(additional_filter_triples or []), _reversed(known, int(relations), convention)]
    evaluator = evaluator or RankBasedEvaluator()
    results = evaluator.evaluate(view, triples, additional_filter_triples=filters, targets=("relation",),
                                 **evaluate_kwargs)  # fmt: skip
    if convention == "torchkge" and evaluator.filtered:
        return _true_reversal_spared(results, view, evaluator.ks)
    return results


def _true_reversal_spared(results: RankBasedMetricResults, view: BothDirections,
                          ks: Sequence[int]) -> RankBasedMetricResults:  # fmt: skip
    """TorchKGE's filter spares (t, r, h) of the true relation r: each task's ranks with that candidate back -- one
    more candidate, above the answer where it scores higher (optimistic) or as high (pessimistic)."""
    records = results.records
    assert records is not None
    pairs = torch.as_tensor(np.stack([records.head, records.tail], axis=1))
    relation = torch.as_tensor(records.relation)
    with evaluation_mode(view.model), torch.no_grad():
        rows = torch.arange(pairs.shape[0])
        forward = view.score_r(pairs)[rows, relation]
        backward = view.score_r(pairs)[rows, relation + view.num_relations // 2]
    above, level = (backward > forward).numpy(), (backward >= forward).numpy()
    columns = {name: getattr(records, name) for name in ("head", "relation", "tail", "side", "task_index")}
    columns.update(optimistic=records.optimistic + above, pessimistic=records.pessimistic + level)
    if records.num_candidates is not None:
        columns["num_candidates"] = records.num_candidates + 1
    return RankBasedMetricResults.from_records(RankRecords.from_columns(columns), ks=ks)


def _reversed(triples: torch.Tensor, num_relations: int, convention: str) -> torch.Tensor:
    """The filter triples of the reversed candidates: a known (a, r', b) removes candidate R + r' of the pair (b, a)
    ("kgeval": (t, r', h) is that triple) or of the pair (a, b) ("torchkge")."""
    relation = triples[:, 1] + num_relations
    if convention == "kgeval":
        return torch.stack([triples[:, 2], relation, triples[:, 0]], dim=1)
    return torch.stack([triples[:, 0], relation, triples[:, 2]], dim=1)
