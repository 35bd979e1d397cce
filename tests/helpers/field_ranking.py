"""The temporal KG field's ranking procedure, written from the descriptions in its papers and code (RE-GCN's and
TLogic's evaluation): filter by overwriting the scores of the other known answers with a large negative constant,
then sort each row descending and take the position of the true answer. It does not import kgeval.

``torch.sort`` without ``stable=True`` orders tied scores arbitrarily, so the true answer's position among its
ties is whatever the sort returns: a rank between the optimistic and the pessimistic one. TLogic's default counts
only the strictly higher scores (the optimistic rank).
"""

from __future__ import annotations

import torch

#: the constant the field writes over the scores of filtered answers
FILTERED_SCORE = -10_000_000.0


def filtered_scores(scores: torch.Tensor, answers: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """A copy of ``scores`` (B, E) with every (row, entity) of ``others`` ((m, 2) pairs: the other known answers of
    each row under the filter setting) set to ``FILTERED_SCORE``; the true ``answers`` (B,) keep their score."""
    out = scores.clone()
    if len(others):
        out[others[:, 0], others[:, 1]] = FILTERED_SCORE
    rows = torch.arange(len(answers))
    out[rows, answers] = scores[rows, answers]
    return out


def sort_rank(scores: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """(B,) 1-based positions of ``answers`` in each row of ``scores`` sorted descending by ``torch.sort`` (not
    stable: ties in the order the sort leaves them)."""
    _, order = torch.sort(scores, dim=1, descending=True)
    return (order == answers[:, None]).nonzero()[:, 1] + 1


def strictly_higher_rank(scores: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """(B,) 1 + the number of strictly higher scores (TLogic's default tie handling)."""
    true = scores[torch.arange(len(answers)), answers]
    return 1 + (scores > true[:, None]).sum(dim=1)
