"""Models that only score whole triples (``score_hrt``, ``forward(h, r, t)`` or a ``score_fn``): each batch of
queries is expanded over one candidate slice at a time into a block of triples, scored in one call.
"""

from __future__ import annotations

from typing import Any

import torch

from kgeval._checks import check_scores
from kgeval._engine.scoring import CandidateScorer, SlicedScorer
from kgeval.adapters.triples import TripleFunction
from kgeval.typing import Target


class TripleScorer(SlicedScorer):
    """For models that only score whole triples: per candidate slice, the (queries x slice) block of triples is
    built and scored in one call, so no more than one (batch x slice) block of triples ever exists."""

    #: a triple costs far more than a score while it is scored (three ids, and the model's gathered embeddings):
    #: batches and slices are sized for this many times fewer scores than a score_t call -- on CPU blocks of 4,096
    #: triples, which keep the gathered embeddings in cache (FB15k-237, PyG DistMult d = 200: 0.32 s per 100 tail
    #: queries against 1.75 s with 64x blocks and 0.90 s with 4x smaller ones)
    memory_per_score = 1024

    def __init__(
        self,
        model: Any,
        target: Target,
        num_entities: int,
        candidate_ids: torch.Tensor | None,
        score_triples: TripleFunction,
        name: str,
    ) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        self._score_triples = score_triples
        self._name = name  #: how the user's function is named in error messages

    def start_slice(self, start: int, stop: int) -> None:
        CandidateScorer.start_slice(self, start, stop)
        self._release()
        if self._reuse(start, stop):
            return
        queries = self._queries
        assert queries is not None
        ids = self._ids(start, stop)
        if ids is None:
            ids = torch.arange(start, stop, device=queries.device)
        candidates = ids.unsqueeze(0).expand(queries.shape[0], -1)
        self._hold(score_triple_block(self._score_triples, self._name, self.target, queries, candidates))


def score_triple_block(
    score_triples: TripleFunction, name: str, target: Target, queries: torch.Tensor, candidates: torch.Tensor
) -> torch.Tensor:
    """Scores (B, C) of the triples completing each query (B, 2) by its own row of candidates (B, C), in one call of
    a whole-triple function; its output, (B * C,) or PyKEEN's (B * C, 1), is checked."""
    rows, width = candidates.shape
    query = queries.repeat_interleave(width, dim=0)
    candidate = candidates.reshape(-1)
    if target == "tail":
        heads, relations, tails = query[:, 0], query[:, 1], candidate
    elif target == "head":
        heads, relations, tails = candidate, query[:, 0], query[:, 1]
    else:  # relation: (h, t) queries
        heads, relations, tails = query[:, 0], candidate, query[:, 1]
    raw = score_triples(heads, relations, tails)
    if isinstance(raw, torch.Tensor) and raw.dim() == 2 and raw.shape[1] == 1:
        raw = raw[:, 0]  # (n, 1), PyKEEN's score_hrt
    if isinstance(raw, torch.Tensor) and raw.dim() == 1 and raw.numel() == rows * width:
        raw = raw.reshape(rows, width)
    return check_scores(raw, (rows, width), name, queries.device)
