"""Which scorer a model gets (:func:`make_scorer`): the query/candidate GEMM when the model has that form for the
target, else its scoring method per slice or for whole rows, else whole triples.
"""

from __future__ import annotations

from typing import Any

import torch

from kgeval._checks import accepts_keyword, check_model
from kgeval._engine.form_check import FormChecks, method_below_form, model_name, probe_disagreement
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
    probe_queries: torch.Tensor | None = None,
    checks: FormChecks | None = None,
) -> CandidateScorer:
    """The fastest scorer the model supports: GEMM (or cdist for L1), then per-slice calls, then whole rows, then
    whole triples (``score_fn``, ``score_hrt`` or ``forward(h, r, t)``; ``score_fn`` wins over everything).

    A model of another library is scored through its integration's view (:func:`kgeval.integrations.scoring_view`).
    The GEMM form is used only where it computes the model's own scores: not when a subclass redefines the scoring
    method below the class that declares the form (or an integration refused the form for that reason), nor when
    the one-off probe of ``probe_queries`` (a (B, 2) batch of the evaluation's queries; None: no probe) finds the
    two disagree; a FastPathWarning says so, through ``checks`` (one evaluation's verdicts and warnings).
    """
    if score_fn is not None:
        function, name = triple_function(model, score_fn)  # type: ignore[misc]
        return TripleScorer(model, target, num_entities, candidate_ids, function, name)
    checks = checks if checks is not None else FormChecks(probe=probe_queries is not None)
    view = scoring_view(model)
    form = query_candidate_form(view) if fast_path else None
    if form is not None and target not in getattr(form, "kgeval_targets", ("head", "tail")):
        form = None  # a form for entity candidates only
    refused = getattr(view, "kgeval_form_refused", None)
    if fast_path and refused:
        checks.warn(_refusal_message(view, refused, declare=False))
    own_name = own_method(view, target)
    if form is not None and own_name is not None:
        overridden = method_below_form(form, own_name)
        if overridden is not None:
            reason = f"{overridden} overrides the scoring method the fast path stands in for"
            checks.warn(_refusal_message(view, reason))
            form = None
    if form is None:
        return _own_scorer(view, target, num_entities, candidate_ids)
    scorer = (L1Scorer if form.kgeval_similarity == "l1" else GemmScorer)(form, target, num_entities, candidate_ids)
    if own_name is None or probe_queries is None or not checks.probe:
        return scorer
    known, problem = checks.verdict(model, target)
    if known and problem is None:
        return scorer
    own = _own_scorer(view, target, num_entities, candidate_ids)
    if not known:
        try:
            problem = probe_disagreement(scorer, own, probe_queries, own_name)
        except Exception as error:  # the model's own method fails where its form works (e.g. cdist of float16 on CPU)
            checks.warn(f"kgeval: the query/candidate fast path of {model_name(view)} could not be checked against "
                        f"its own {own_name}, which raised {type(error).__name__}: {error}; the fast path is used "
                        "unchecked")  # fmt: skip
            problem = None
        checks.record(model, target, problem)
    if problem is None:
        return scorer
    name = model_name(view)
    checks.warn(f"kgeval: the query/candidate fast path of {name} disagrees with its own {own_name} ({problem}); "
                f"{name} is scored through {own_name} instead, with the ranks it gives. If the model is known "
                "to be right, RankBasedEvaluator(check_fast_path=False) skips this check")  # fmt: skip
    return own


def own_method(model: Any, target: Target) -> str | None:
    """The name of the method kgeval scores ``model``'s ``target`` side through when it does not use a GEMM form:
    ``score_t`` / ``score_h`` / ``score_r``, else ``score_hrt`` or ``forward``; None when it has none."""
    if callable(getattr(model, SCORE_METHOD[target], None)):
        return SCORE_METHOD[target]
    triples = triple_function(model)
    return None if triples is None else triples[1]


def _own_scorer(model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> CandidateScorer:
    """The scorer of the model's own methods (:func:`own_method`), or a TypeError naming what is missing."""
    method = getattr(model, SCORE_METHOD[target], None)
    if callable(method):
        if accepts_keyword(method, CANDIDATE_KEYWORD[target]):
            return SlicedScorer(model, target, num_entities, candidate_ids)
        return FullRowScorer(model, target, num_entities, candidate_ids)
    triples = triple_function(model)
    if triples is None:  # the model cannot rank this side: the message of the evaluators' own check
        check_model(model, (target,))
        raise AssertionError("check_model accepted a model without a way to score")  # pragma: no cover
    return TripleScorer(model, target, num_entities, candidate_ids, *triples)


def _refusal_message(view: Any, reason: str, declare: bool = True) -> str:
    """The warning for a form turned off by the class check; ``declare``: suggest declaring the form below."""
    name = model_name(view)
    message = (f"kgeval: {name} is not scored through its query/candidate fast path: {reason}, so it is scored "
               "through its own methods (slower; the ranks are those of its methods)")  # fmt: skip
    if declare:
        message += f". Declare the form on {name} itself (kgeval_query / kgeval_candidates) to keep the fast path"
    return message
