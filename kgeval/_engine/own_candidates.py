"""Scores of each query's own candidates (:func:`candidate_scorer`): the sampled evaluator ranks a task's answer
among its own negatives, so every query has a row of candidates of its own instead of a shared slice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kgeval._checks import check_scores
from kgeval._engine.triple_scoring import score_triple_block
from kgeval.adapters.triples import triple_function
from kgeval.typing import EntityTarget

__all__ = ["candidate_scorer"]


#: ``score(queries (B, 2), candidates (B, C)) -> (B, C)``
OwnCandidateScores = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def candidate_scorer(model: Any, target: EntityTarget, num_entities: int) -> OwnCandidateScores:
    """``score(queries (B, 2), candidates (B, C)) -> (B, C)``: the scores of each query's own candidates (sampled
    negatives), by whole triples in one call when the model scores them (``model``: its scoring view), else from its
    full score_t / score_h rows with the candidates' columns picked."""
    function = triple_function(model)

    def by_triples(queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        assert function is not None
        score_triples, name = function
        return score_triple_block(score_triples, name, target, queries, candidates)

    def by_rows(queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        method = "score_t" if target == "tail" else "score_h"
        rows = check_scores(getattr(model, method)(queries), (queries.shape[0], num_entities), method, queries.device)
        return rows.gather(1, candidates)

    return by_triples if function is not None else by_rows
