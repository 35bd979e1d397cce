"""Scoring: the model protocol, and scorers that produce the scores of one candidate slice at a time.

The model protocol (DESIGN.md, The model protocol)::

    model.score_t(hr_batch: LongTensor[B, 2]) -> FloatTensor[B, num_entities]   # (h, r, e) for all e
    model.score_h(rt_batch: LongTensor[B, 2]) -> FloatTensor[B, num_entities]   # (e, r, t) for all e

A model whose ``score_t`` / ``score_h`` accept ``tails=`` / ``heads=`` (PyKEEN's signature: a LongTensor of
candidate ids, returning only those columns) is scored slice by slice. A model with the query/candidate form
(:class:`QueryCandidateModel`) is scored by one GEMM per slice and never calls a per-candidate interaction.

Candidates are addressed by *position*: 0 .. num_candidates - 1 index ``candidate_ids`` (all entities, or the
sorted whitelist of ``restrict_entities_to``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch

from kgeval._checks import accepts_keyword, check_scores
from kgeval.keys import Target

SCORE_METHOD: dict[Target, str] = {"tail": "score_t", "head": "score_h"}
CANDIDATE_KEYWORD: dict[Target, str] = {"tail": "tails", "head": "heads"}


@runtime_checkable
class QueryCandidateModel(Protocol):
    """A model whose scores are a similarity between a query vector and a candidate vector.

    ``kgeval_query(batch, target)`` maps a (B, 2) batch ((h, r) for target "tail", (r, t) for "head") to
    queries of shape (B, d); ``kgeval_candidates(target)`` is the (num_entities, d) candidate matrix;
    ``kgeval_similarity`` names the similarity ("dot": score = query @ candidates.T).
    """

    kgeval_similarity: str

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor: ...

    def kgeval_candidates(self, target: Target) -> torch.Tensor: ...


class CandidateScorer:
    """Scores of one batch of queries against candidate slices, for one target side.

    Use: ``scorer.begin(batch)`` once per batch, then ``scorer.scores(start, stop)`` for each slice of candidate
    positions; the result has shape (B, stop - start), dtype float.
    """

    #: whether computing a slice costs work proportional to its size (False: the whole row is computed at begin)
    slices_save_work: bool = True

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        self.model = model
        self.target = target
        self.num_entities = num_entities
        self.candidate_ids = candidate_ids  #: None means all entities, in id order
        self.num_candidates = num_entities if candidate_ids is None else int(candidate_ids.numel())
        self._batch: torch.Tensor | None = None

    def begin(self, batch: torch.Tensor) -> None:
        self._batch = batch

    def scores(self, start: int, stop: int) -> torch.Tensor:
        raise NotImplementedError

    def _ids(self, start: int, stop: int) -> torch.Tensor | None:
        """Entity ids of candidate positions [start, stop), or None when that is every entity."""
        if self.candidate_ids is None:
            if start == 0 and stop == self.num_entities:
                return None
            return torch.arange(start, stop, device=self._batch.device)  # type: ignore[union-attr]
        return self.candidate_ids[start:stop]


class FullRowScorer(CandidateScorer):
    """For models that only score all entities at once: one call per batch, slices are views."""

    slices_save_work = False

    def begin(self, batch: torch.Tensor) -> None:
        method = SCORE_METHOD[self.target]
        scores = check_scores(getattr(self.model, method)(batch), (batch.shape[0], self.num_entities), method)
        if self.candidate_ids is not None:
            scores = scores.index_select(1, self.candidate_ids)
        self._row = scores

    def scores(self, start: int, stop: int) -> torch.Tensor:
        return self._row[:, start:stop]


class SlicedScorer(CandidateScorer):
    """For models accepting ``tails=`` / ``heads=``: one call per slice with that slice's candidate ids."""

    def scores(self, start: int, stop: int) -> torch.Tensor:
        method = SCORE_METHOD[self.target]
        ids = self._ids(start, stop)
        if ids is None:
            raw = getattr(self.model, method)(self._batch)
        else:
            raw = getattr(self.model, method)(self._batch, **{CANDIDATE_KEYWORD[self.target]: ids})
        return check_scores(raw, (self._batch.shape[0], stop - start), method)  # type: ignore[union-attr]


class GemmScorer(CandidateScorer):
    """For :class:`QueryCandidateModel` with dot similarity: queries once per batch, one GEMM per slice."""

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        candidates = model.kgeval_candidates(target)
        if candidate_ids is not None:
            candidates = candidates.index_select(0, candidate_ids)
        self._candidates = candidates

    def begin(self, batch: torch.Tensor) -> None:
        self._queries = self.model.kgeval_query(batch, self.target)

    def scores(self, start: int, stop: int) -> torch.Tensor:
        return self._queries @ self._candidates[start:stop].T


def make_scorer(
    model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None, fast_path: bool = True
) -> CandidateScorer:
    """The fastest scorer the model supports: GEMM, then per-slice calls, then whole rows."""
    if fast_path and isinstance(model, QueryCandidateModel) and model.kgeval_similarity == "dot":
        return GemmScorer(model, target, num_entities, candidate_ids)
    if accepts_keyword(getattr(model, SCORE_METHOD[target]), CANDIDATE_KEYWORD[target]):
        return SlicedScorer(model, target, num_entities, candidate_ids)
    return FullRowScorer(model, target, num_entities, candidate_ids)


def model_device(model: Any) -> torch.device:
    """The device the model's parameters live on (``model.device`` if set; CPU for parameter-free models)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device | str):
        return torch.device(device)
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        for parameter in parameters():
            return parameter.device
    return torch.device("cpu")
