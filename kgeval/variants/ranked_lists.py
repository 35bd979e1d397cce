"""Ranked prediction lists a model hands in: each example's K best candidates (ids, scores optional), evaluated
against its true answer (:func:`evaluate_ranked_lists`) -- what generative and re-ranking models produce, and what
OGB-LSC's WikiKG90Mv2 scores (:func:`wikikg90mv2_mrr`, its evaluator reproduced by name).

Filtered as kgeval filters: a listed candidate that forms a known triple with the example's query (and is not its
answer) is removed, the list closing up behind it. The answer's rank in what remains: with scores, optimistic = 1 +
#(others scoring higher), pessimistic = 1 + #(others scoring at least as high); without, its position. An answer
outside the list counts 0 in MRR@K and Hits@k (the list's own metrics, exact). Read as the prefix of the model's
full filtered ranking, the list also bounds the full metrics: an answer outside it ranks after every remaining
entry (K' of them) and at most last among the query's C filtered candidates, so its reciprocal rank lies in
[1 / C, 1 / (K' + 1)] -- the full MRR's interval, with the share of answers outside the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval import _checks
from kgeval.typing import ANSWER_COLUMN, ENTITY_TARGETS, QUERY_COLUMNS, EntityTarget

__all__ = ["ListRanks", "RankedListResults", "evaluate_ranked_lists", "wikikg90mv2_mrr"]


@dataclass(frozen=True)
class ListRanks:
    """Each example's answer in its filtered list (arrays of shape (n,))."""

    optimistic: np.ndarray  #: int64 rank in the list, 0 outside it
    pessimistic: np.ndarray  #: int64 rank in the list, 0 outside it
    remaining: np.ndarray  #: int64 list entries left after filtering (K')
    num_candidates: np.ndarray  #: int64 filtered candidates of the query (C; 0 when unknown)

    @property
    def in_list(self) -> np.ndarray:
        """bool: the answer is among the remaining entries."""
        return self.optimistic > 0


@dataclass(frozen=True)
class RankedListResults:
    """:func:`evaluate_ranked_lists`' results: the list's own metrics (exact), the full metrics' intervals."""

    k: int  #: the lists' length K
    ranks: ListRanks = field(repr=False)
    ks: tuple[int, ...] = (1, 3, 10)

    def mrr_at_k(self, rank_type: str = "realistic") -> float:
        """MRR@K: the mean of 1 / rank in the list, 0 outside it."""
        return float(np.mean(self._reciprocal(rank_type)))

    def hits_at_k(self, k: int, rank_type: str = "realistic") -> float:
        """Hits@k within the lists (k <= K): the share of answers in the list at rank <= k."""
        if not 1 <= k <= self.k:
            raise ValueError(f"k must be in [1, {self.k}] (the lists' length), got {k}")
        ranks = self._ranks(rank_type)
        return float(np.mean((ranks > 0) & (ranks <= k)))

    @property
    def share_outside(self) -> float:
        """The share of answers not among their list's remaining entries."""
        return float(np.mean(~self.ranks.in_list))

    def full_mrr_interval(self, rank_type: str = "realistic") -> tuple[float, float]:
        """[lower, upper] of the full filtered MRR if each list is the prefix of the model's ranking: an answer
        outside ranks in [K' + 1, C] (lower bound 0 where C is unknown)."""
        inside = self._reciprocal(rank_type)
        outside = ~self.ranks.in_list
        upper = np.where(outside, 1.0 / (self.ranks.remaining + 1), inside)
        known = self.ranks.num_candidates > 0
        lower = np.where(outside, np.where(known, 1.0 / np.maximum(self.ranks.num_candidates, 1), 0.0), inside)
        return float(np.mean(lower)), float(np.mean(upper))

    def to_dict(self) -> dict[str, Any]:
        """Every number, JSON-ready."""
        types = ("optimistic", "pessimistic", "realistic")
        return {
            "k": self.k,
            "examples": int(self.ranks.optimistic.shape[0]),
            "share_outside": self.share_outside,
            "mrr_at_k": {t: self.mrr_at_k(t) for t in types},
            "hits_at_k": {str(k): {t: self.hits_at_k(k, t) for t in types} for k in self.ks if k <= self.k},
            "full_mrr_interval": {t: list(self.full_mrr_interval(t)) for t in types},
        }

    def _ranks(self, rank_type: str) -> np.ndarray:
        if rank_type == "optimistic":
            return self.ranks.optimistic.astype(np.float64)
        if rank_type == "pessimistic":
            return self.ranks.pessimistic.astype(np.float64)
        if rank_type == "realistic":
            return (self.ranks.optimistic + self.ranks.pessimistic) / 2
        raise ValueError(f"rank_type must be optimistic, pessimistic or realistic, got {rank_type!r}")

    def _reciprocal(self, rank_type: str) -> np.ndarray:
        ranks = self._ranks(rank_type)
        return np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)


def evaluate_ranked_lists(
    lists: Any,
    triples: torch.Tensor,
    *,
    scores: Any = None,
    target: EntityTarget = "tail",
    filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
    num_entities: int | None = None,
    ks: Sequence[int] = (1, 3, 10),
) -> RankedListResults:
    """Evaluate ranked lists of candidates against the true answers.

    Parameters
    ----------
    lists : LongTensor or array of shape (n, K)
        Each example's candidates, best first; -1 pads a shorter list (after its entries).
    triples : LongTensor of shape (n, 3)
        The evaluated triples: the query is (h, r) for ``target="tail"`` ((r, t) for heads), the answer t (h).
    scores : FloatTensor or array of shape (n, K), optional
        The candidates' scores (higher = better): ranks then count ties (optimistic / pessimistic). Without them the
        list order is the ranking.
    target : {"tail", "head"}
    filter_triples : LongTensor (m, 3) or a sequence of them, optional
        Known triples: a listed candidate completing a known triple (other than the answer) is removed. Also what
        makes each query's number of filtered candidates C, for the full MRR's lower bound (with ``num_entities``).
    num_entities : int, optional
        Every entity's a candidate: C = num_entities - the query's known answers other than its own.
    ks : sequence of int
        The Hits@k reported by ``to_dict`` (those <= K).

    Returns
    -------
    RankedListResults

    Raises
    ------
    ValueError
        For mismatched shapes, a duplicate candidate in a list (naming the row), NaN scores, ids out of range,
        or a target other than head / tail.
    """
    if target not in ENTITY_TARGETS:
        raise ValueError(f"target must be 'head' or 'tail', got {target!r}")
    ids = _as_ids(lists)
    triples = _checks.check_triples(triples, "triples", num_entities=num_entities or 2**62)
    if ids.ndim != 2 or ids.shape[0] != triples.shape[0] or ids.shape[1] == 0:
        raise ValueError(f"lists must have shape (n, K) with n = {triples.shape[0]} triples, got {ids.shape}")
    values = _as_scores(scores, ids.shape)
    _check_lists(ids, num_entities)
    query = triples[:, QUERY_COLUMNS[target]].numpy()
    answers = triples[:, ANSWER_COLUMN[target]].numpy()
    known = (
        _checks.check_filter_triples(filter_triples, num_entities or 2**62, None) if filter_triples is not None else []
    )
    removed = _known_entries(ids, query, answers, known, target)
    kept = (ids >= 0) & ~removed
    remaining = kept.sum(axis=1)
    optimistic, pessimistic = _ranks(ids, values, kept, answers)
    count = _num_candidates(query, answers, known, target, num_entities, ids.shape[0])
    ranks = ListRanks(optimistic, pessimistic, remaining.astype(np.int64), count)
    return RankedListResults(ids.shape[1], ranks, tuple(_checks.check_ks(ks)))


def wikikg90mv2_mrr(t_pred_top10: Any, t: Any) -> float:
    """OGB-LSC WikiKG90Mv2's MRR, as its ``WikiKG90Mv2Evaluator.eval`` computes it (ogb/lsc/wikikg90mv2.py): exactly
    10 predictions per triple, the reciprocal of the answer's column + 1, 0 when absent, averaged in float32 -- and
    0 for the whole set when any row repeats a prediction (ids < 0 excepted), which its evaluator prints. No
    filtering: its lists are the model's. Use :func:`evaluate_ranked_lists` for filtered, tie-aware ranks."""
    predictions = torch.as_tensor(np.asarray(t_pred_top10))
    answers = torch.as_tensor(np.asarray(t))
    if predictions.dim() != 2 or predictions.shape[1] != 10 or predictions.shape[0] != answers.shape[0]:
        raise ValueError(f"t_pred_top10 must have shape (n, 10) for n answers, got {tuple(predictions.shape)} and "
                         f"{tuple(answers.shape)}")  # fmt: skip
    for row in predictions:
        listed = row[row >= 0]
        if torch.unique(listed).numel() != listed.numel():
            return 0.0
    found = torch.nonzero(answers.view(-1, 1) == predictions, as_tuple=False)
    reciprocal = torch.zeros(len(answers))
    reciprocal[found[:, 0]] = 1.0 / (found[:, 1].float() + 1.0)
    return float(reciprocal.mean().item())


def _as_ids(lists: Any) -> np.ndarray:
    array = lists.detach().cpu().numpy() if isinstance(lists, torch.Tensor) else np.asarray(lists)
    if array.dtype.kind not in "iu":
        raise TypeError(f"lists must hold integer entity ids, got dtype {array.dtype}")
    return array.astype(np.int64)


def _as_scores(scores: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    if scores is None:
        return None
    array = scores.detach().cpu().double().numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores, float)
    if array.shape != shape:
        raise ValueError(f"scores must have the lists' shape {shape}, got {array.shape}")
    if np.isnan(array).any():
        row = int(np.isnan(array).any(axis=1).nonzero()[0][0])
        raise ValueError(f"scores row {row} holds NaN")
    return array


def _check_lists(ids: np.ndarray, num_entities: int | None) -> None:
    """ValueError for an id out of range, a padded list with entries after its padding, or a repeated id."""
    if (ids < -1).any() or (num_entities is not None and (ids >= num_entities).any()):
        row = int(((ids < -1) | (ids >= (num_entities or 2**62))).any(axis=1).nonzero()[0][0])
        raise ValueError(f"lists row {row} holds an id out of range: {ids[row].tolist()}")
    padding = ids < 0
    late = (~padding[:, 1:] & padding[:, :-1]).any(axis=1)
    if late.any():
        raise ValueError(f"lists row {int(late.nonzero()[0][0])} has entries after its padding (-1 must come last)")
    ordered = np.sort(np.where(padding, -np.arange(1, ids.shape[1] + 1), ids), axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if repeated.any():
        row = int(repeated.any(axis=1).nonzero()[0][0])
        raise ValueError(f"lists row {row} repeats a candidate: {ids[row].tolist()}")


def _known_entries(ids: np.ndarray, query: np.ndarray, answers: np.ndarray, known: list[torch.Tensor],
                   target: EntityTarget) -> np.ndarray:  # fmt: skip
    """(n, K) bool: the listed candidate completes a known triple and is not the answer."""
    if not known:
        return np.zeros(ids.shape, dtype=bool)
    triples = torch.cat(known).numpy()
    known_index = pd.MultiIndex.from_arrays([triples[:, c] for c in (*QUERY_COLUMNS[target], ANSWER_COLUMN[target])])
    n, k = ids.shape
    candidates = pd.MultiIndex.from_arrays([np.repeat(query[:, 0], k), np.repeat(query[:, 1], k), ids.reshape(-1)])
    hit = candidates.isin(known_index).reshape(n, k)
    return hit & (ids != answers[:, None]) & (ids >= 0)


def _ranks(ids: np.ndarray, values: np.ndarray | None, kept: np.ndarray,
           answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(optimistic, pessimistic) rank of each answer among its kept entries; 0 outside."""
    is_answer = kept & (ids == answers[:, None])
    inside = is_answer.any(axis=1)
    if values is None:
        position = np.cumsum(kept, axis=1)
        rank = np.where(inside, (position * is_answer).sum(axis=1), 0)
        return rank.astype(np.int64), rank.astype(np.int64)
    answer_score = np.where(is_answer, values, 0.0).sum(axis=1)[:, None]
    others = kept & ~is_answer
    optimistic = 1 + (others & (values > answer_score)).sum(axis=1)
    pessimistic = 1 + (others & (values >= answer_score)).sum(axis=1)
    return np.where(inside, optimistic, 0).astype(np.int64), np.where(inside, pessimistic, 0).astype(np.int64)


def _num_candidates(query: np.ndarray, answers: np.ndarray, known: list[torch.Tensor], target: EntityTarget,
                    num_entities: int | None, n: int) -> np.ndarray:  # fmt: skip
    """C per example: every entity less the query's known answers other than its own (0 without num_entities)."""
    if num_entities is None:
        return np.zeros(n, dtype=np.int64)
    if not known:
        return np.full(n, num_entities, dtype=np.int64)
    triples = np.unique(torch.cat(known).numpy(), axis=0)
    columns = QUERY_COLUMNS[target]
    frame = pd.DataFrame({"a": triples[:, columns[0]], "b": triples[:, columns[1]],
                          "answer": triples[:, ANSWER_COLUMN[target]]})  # fmt: skip
    answers_per_query = frame.groupby(["a", "b"]).size()
    index = pd.MultiIndex.from_arrays([query[:, 0], query[:, 1]])
    counts = answers_per_query.reindex(index, fill_value=0).to_numpy()
    own_known = pd.MultiIndex.from_arrays([query[:, 0], query[:, 1], answers]).isin(
        pd.MultiIndex.from_arrays([frame["a"], frame["b"], frame["answer"]]))  # fmt: skip
    return (num_entities - counts + own_known).astype(np.int64)
