"""Which scorer a model gets (:func:`make_scorer`): the query/candidate GEMM when the model has that form for the
target, else its scoring method per slice or for whole rows, else whole triples.
"""

from __future__ import annotations

from typing import Any

import torch

from kgeval._checks import accepts_keyword
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer, query_candidate_form
from kgeval._engine.scoring import CANDIDATE_KEYWORD, SCORE_METHOD, CandidateScorer, FullRowScorer, SlicedScorer
from kgeval._engine.triple_scoring import TripleFunction, TripleScorer, triple_function
from kgeval.integrations import scoring_view
from kgeval.typing import Target


def make_scorer(
    model: Any,
    target: Target,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    fast_path: bool = True,
    score_fn: TripleFunction | None = None,
) -> CandidateScorer:
    """The fastest scorer the model supports: GEMM (or cdist for L1), then per-slice calls, then whole rows, then
    whole triples (``score_fn``, ``score_hrt`` or ``forward(h, r, t)``; ``score_fn`` wins over everything).

    A model of another library is scored through its integration's view (:func:`kgeval.integrations.scoring_view`).
    """
    if score_fn is not None:
        function, name = triple_function(model, score_fn)  # type: ignore[misc]
        return TripleScorer(model, target, num_entities, candidate_ids, function, name)
    model = scoring_view(model)
    form = query_candidate_form(model) if fast_path else None
    if form is not None and target not in getattr(form, "kgeval_targets", ("head", "tail")):
        form = None  # a form for entity candidates only
    if form is not None:
        scorer = L1Scorer if form.kgeval_similarity == "l1" else GemmScorer
        return scorer(form, target, num_entities, candidate_ids)
    method = getattr(model, SCORE_METHOD[target], None)
    if callable(method):
        if accepts_keyword(method, CANDIDATE_KEYWORD[target]):
            return SlicedScorer(model, target, num_entities, candidate_ids)
        return FullRowScorer(model, target, num_entities, candidate_ids)
    triples = triple_function(model)
    if triples is None:
        raise TypeError(
            f"the model has no {SCORE_METHOD[target]}(batch), score_hrt(hrt_batch) or forward(h, r, t) to rank "
            f"{target}s with; pass score_fn=... (a function of heads, relations, tails) to evaluate"
        )
    return TripleScorer(model, target, num_entities, candidate_ids, *triples)
