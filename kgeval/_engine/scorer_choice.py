"""Which scorer a model gets (:func:`make_scorer`): the query/candidate GEMM when the model has that form for the
target, else its per-relation candidate table (``kgeval._engine.relation_tables``), else its scoring method per
slice or for whole rows, else whole triples; and whether the scores it gives are a function of the query (the
stability probe, :func:`kgeval._engine.form_check.probe_instability`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from kgeval._checks import check_model
from kgeval._engine.form_check import (
    PROBE_QUERIES,
    PROBE_WINDOW,
    FormChecks,
    model_name,
    probe_disagreement,
    probe_instability,
    stability_message,
    stale_cache_message,
    stale_parametrizations,
)
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer
from kgeval._engine.relation_tables import RelationTableScorer
from kgeval._engine.scoring import CANDIDATE_KEYWORD, SCORE_METHOD, CandidateScorer, FullRowScorer, SlicedScorer
from kgeval._engine.triple_scoring import TripleScorer
from kgeval._inputs import ResolvedModel, resolve_model
from kgeval.adapters.overrides import method_below_form
from kgeval.adapters.signatures import candidate_argument
from kgeval.adapters.triples import TripleFunction, triple_function
from kgeval.protocol import SIMILARITIES, QueryCandidateModel, RelationTableModel
from kgeval.typing import Target

logger = logging.getLogger("kgeval.scoring")


def make_scorer(
    model: Any | ResolvedModel,
    target: Target,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    fast_path: bool = True,
    score_fn: TripleFunction | None = None,
    probe_queries: torch.Tensor | None = None,
    checks: FormChecks | None = None,
    model_scores_only: bool = False,
    batch_size: int | None = None,
    slice_size: int | None = None,
) -> CandidateScorer:
    """The fastest scorer the model supports (:func:`_chosen_scorer`), its scores' stability probed.

    With ``probe_queries`` (and ``checks``' probe on), once per evaluation (``checks``) and target, the scorer
    chosen -- whatever it is -- scores a few of them twice and in other batch compositions
    (:func:`kgeval._engine.form_check.probe_instability`), and once per evaluation the parametrized weights of
    the model are checked against ``torch.nn.utils.parametrize``'s cache
    (:func:`kgeval._engine.form_check.stale_parametrizations`): a
    :class:`~kgeval.exceptions.ScoreStabilityWarning` names the cause, once per evaluation and cause. The
    scorer returned is the same either way (its ranks are those of the scores the model gives). ``batch_size``
    and ``slice_size`` (the evaluation's requested sizes; None: not requested) bound the probe's calls, as they
    bound the evaluation's.
    """
    resolved = resolve_model(model)
    checks = checks if checks is not None else FormChecks(probe=probe_queries is not None)
    scorer = _chosen_scorer(resolved, target, num_entities, candidate_ids, fast_path, score_fn, probe_queries, checks,
                            model_scores_only)  # fmt: skip
    if probe_queries is not None and checks.probe:
        _check_stability(resolved, scorer, target, probe_queries, checks, score_fn, (batch_size, slice_size))
    return scorer


def _check_stability(
    resolved: ResolvedModel,
    scorer: CandidateScorer,
    target: Target,
    queries: torch.Tensor,
    checks: FormChecks,
    score_fn: TripleFunction | None,
    sizes: tuple[int | None, int | None],
) -> None:
    """Warn, once per evaluation and cause, when ``scorer``'s scores of ``queries`` (the side's (B, 2) queries) are
    not a function of the query, or the model reads a stale parametrize cache (see :func:`make_scorer`); ``sizes``:
    the requested (batch_size, slice_size) bounding the probe's calls."""
    view = resolved.view
    if checks.first_cache_check(resolved.model):
        stale = stale_parametrizations(resolved.model)
        if stale:
            checks.warn_stability("cache", stale_cache_message(model_name(view), stale))
    if not checks.first_stability_probe(resolved.model, target):
        return
    instability = probe_instability(scorer, queries, *sizes)
    if instability is not None:
        if score_fn is not None:
            method = "score_fn"
        elif isinstance(scorer, GemmScorer | RelationTableScorer):
            method = "its query/candidate form"
        else:
            method = own_method(view, target) or "its scoring method"
        checks.warn_stability(instability.cause, stability_message(model_name(view), method, instability))


def _chosen_scorer(
    resolved: ResolvedModel,
    target: Target,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    fast_path: bool,
    score_fn: TripleFunction | None,
    probe_queries: torch.Tensor | None,
    checks: FormChecks,
    model_scores_only: bool,
) -> CandidateScorer:
    """The fastest scorer the model supports: GEMM (or cdist for L1) where the query/candidate form serves the
    target (its ``kgeval_targets``), then the per-relation candidate table where it serves the target
    (:class:`kgeval.protocol.RelationTableModel`, :func:`table_targets`: a view may serve tails through the plain
    form and heads through a table), then per-slice calls, then whole rows, then whole triples (``score_fn``,
    ``score_hrt`` or ``forward(h, r, t)``; ``score_fn`` wins over everything).

    ``resolved`` is the model resolved once by the caller (:func:`kgeval._inputs.resolve_model`: a model of another
    library, or inside torch's wrappers, is scored through an adapter's view), or by :func:`make_scorer` when it is
    given as handed over. The GEMM form is used only where it computes the model's own scores:

    - not when a subclass redefines the scoring method below the class that declares the form (or an integration
      refused the form for that reason);
    - not for a form in float16 / bfloat16 when the model has scoring methods of its own: a GEMM rounds its
      half-precision sums otherwise than the model's computation, and at that precision the rounding ties and
      unties candidates, so the model's own methods score it;
    - not when the probe of ``probe_queries`` (the evaluation's (B, 2) queries of this side; None: no probe)
      finds the form and the model's own method disagree.

    A per-relation candidate table passes the same checks (its tiles are GEMMs or cdists per relation of the
    tile, :class:`kgeval._engine.relation_tables.RelationTableScorer`).

    A module with no form of its own that holds one model with a form (a LightningModule whose ``score_t`` calls
    ``self.model.score_t``) is scored through that model's form only where the probe, run on one query of every
    relation among ``probe_queries``, finds it agrees with the module's own method (never without the probe). A
    FastPathWarning says when a form is not used, through ``checks`` (one evaluation's verdicts and warnings).
    ``model_scores_only``: no form whose tiles order the candidates like the scores without being them ("l2", or
    a relation table with a candidate bias, whose tiles leave out the query's constant).

    Raises
    ------
    TypeError
        When a half-precision model's own method fails on the evaluation's first query (e.g. complex arithmetic
        in bfloat16), with what to do instead.
    """
    view = resolved.view
    if score_fn is not None:
        function, name = triple_function(view, score_fn)  # type: ignore[misc]
        return TripleScorer(view, target, num_entities, candidate_ids, function, name)
    own_name = own_method(view, target)
    form = resolved.form if fast_path else None
    if form is not None and target not in getattr(form, "kgeval_targets", ENTITY_TARGETS):
        form = None  # a form for other targets only: the table's, if the view has one for this target
    table = form is None and fast_path and _relation_table(view, target)
    form = view if table else form
    delegated = form is None and fast_path and own_name is not None and checks.probe and probe_queries is not None
    form = resolved.held_form if delegated else form
    delegated = delegated and form is not None
    if delegated and target not in getattr(form, "kgeval_targets", ENTITY_TARGETS):
        form = None  # a held form for other targets only
    if form is not None and model_scores_only and form.kgeval_similarity == "l2":
        form = None
    if form is not None and model_scores_only and table and getattr(form, "kgeval_candidate_bias", False) is True:
        form = None
    refused = getattr(view, "kgeval_form_refused", None)
    if fast_path and refused:
        checks.warn(_refusal_message(view, refused, declare=False))
    if form is not None and own_name is not None and not delegated and not getattr(form, "kgeval_form_checked", False):
        overridden = method_below_form(form, own_name)
        if overridden is not None:
            reason = f"{overridden} overrides the scoring method the fast path stands in for"
            checks.warn(_refusal_message(view, reason))
            form = None
    half = parameter_dtype(form) if form is not None and own_name is not None else None
    if half in HALF_DTYPES:  # judged before the form is built: building it may fail in half precision already
        own = _own_scorer(view, target, num_entities, candidate_ids, probe_queries)  # fails first, if it fails
        checks.warn(_half_message(view, f"its parameters are {half}"))
        return own
    if form is None:
        if fast_path and own_name is not None and not refused:
            _log_no_fast_path(view, target, own_name)
        return _own_scorer(view, target, num_entities, candidate_ids, probe_queries)
    chosen = RelationTableScorer if table else L1Scorer if form.kgeval_similarity == "l1" else GemmScorer
    scorer = chosen(form, target, num_entities, candidate_ids)
    if own_name is None:
        return scorer
    if scorer.vector_dtype in HALF_DTYPES:
        own = _own_scorer(view, target, num_entities, candidate_ids, probe_queries)
        checks.warn(_half_message(view, f"its vectors are {scorer.vector_dtype}"))
        return own
    if probe_queries is None or not checks.probe:
        return scorer
    known, problem = checks.verdict(view, target)
    if known and problem is None:
        return scorer
    own = _own_scorer(view, target, num_entities, candidate_ids)
    if not known:
        queries = _relation_probe(probe_queries, target, scorer.num_candidates) if delegated else probe_queries
        try:
            problem = probe_disagreement(scorer, own, queries, own_name, limit=len(queries) if delegated else None)
        except Exception as error:  # the model's own method fails where its form works (e.g. cdist of float16 on CPU)
            if delegated:
                raise
            checks.warn(f"kgeval: the query/candidate fast path of {model_name(view)} could not be checked against "
                        f"its own {own_name}, which raised {type(error).__name__}: {error}; the fast path is used "
                        "unchecked")  # fmt: skip
            problem = None
        checks.record(view, target, problem)
    if problem is None:
        return scorer
    name = model_name(view)
    if delegated:  # a module that scores otherwise than the model it holds: its own method, without a word
        return own
    checks.warn(f"kgeval: the query/candidate fast path of {name} disagrees with its own {own_name} ({problem}); "
                f"{name} is scored through {own_name} instead, with the ranks it gives. If the model is known "
                "to be right, RankBasedEvaluator(check_fast_path=False) skips this check")  # fmt: skip
    return own


def _log_no_fast_path(view: Any, target: Target, method: str) -> None:
    """An INFO line: ``view`` is scored through its own ``method`` for ``target``, there is no shortcut, and why
    (its adapter's ``kgeval_no_form`` where it says)."""
    why = getattr(view, "kgeval_no_form", None) or (
        "it declares no query/candidate form (kgeval.protocol."
        "QueryCandidateModel) and no per-relation table for this target"
    )
    logger.info("kgeval: %s ranks its %s candidates through its own %s, with no shortcut: %s. Its calls are sized "
                "from the memory one call takes, each distinct query scored once per candidate block",
                model_name(view), target, method, why)  # fmt: skip


#: the targets a form or table serves when it does not say (``kgeval_targets``)
ENTITY_TARGETS: tuple[Target, ...] = ("head", "tail")


def table_targets(view: Any) -> tuple[Target, ...]:
    """The targets ``view``'s per-relation candidate table serves: its ``kgeval_table_targets`` where it declares
    them; else, for a view without the plain query/candidate form, its ``kgeval_targets`` (default both entity
    sides); else none (the plain form serves what it serves, and the rest is scored by the model's own methods)."""
    declared = getattr(view, "kgeval_table_targets", None)
    if declared is not None:
        return tuple(declared)
    if isinstance(view, QueryCandidateModel):
        return ()
    return tuple(getattr(view, "kgeval_targets", ENTITY_TARGETS))


def _relation_table(view: Any, target: Target) -> bool:
    """Whether ``view`` declares a per-relation candidate table (:class:`kgeval.protocol.RelationTableModel`) that
    serves ``target`` (:func:`table_targets`).

    Raises
    ------
    ValueError
        For a table whose ``kgeval_similarity`` is none of :data:`kgeval.protocol.SIMILARITIES`.
    """
    if not isinstance(view, RelationTableModel) or target not in table_targets(view):
        return False
    if view.kgeval_similarity not in SIMILARITIES:
        raise ValueError(f"model.kgeval_similarity must be one of {SIMILARITIES}, got {view.kgeval_similarity!r}")
    return True


#: vector dtypes whose fast path is not used for a model with scoring methods of its own (see make_scorer)
HALF_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)

#: score elements the delegation probe asks the module's own method for at most (one query per relation)
DELEGATION_PROBE_SCORES = 2**22


def _relation_probe(queries: torch.Tensor, target: Target, num_candidates: int) -> torch.Tensor:
    """The probe of a delegated form: the first :data:`PROBE_QUERIES` queries and the first query of every relation
    among ``queries`` (entity targets), as many as :data:`DELEGATION_PROBE_SCORES` whole rows allow."""
    most = max(PROBE_QUERIES, DELEGATION_PROBE_SCORES // max(1, num_candidates))
    if target == "relation":
        return queries[:most]
    relations = queries[:, 1 if target == "tail" else 0]
    order = torch.argsort(relations, stable=True)
    first = torch.ones_like(relations, dtype=torch.bool)
    first[1:] = relations[order][1:] != relations[order][:-1]
    rows = torch.cat([torch.arange(min(PROBE_QUERIES, len(queries)), device=queries.device), order[first]])
    return queries[torch.unique(rows)[:most]]


def own_method(model: Any, target: Target) -> str | None:
    """The name of the method kgeval scores ``model``'s ``target`` side through when it does not use a GEMM form:
    ``score_t`` / ``score_h`` / ``score_r``, else ``score_hrt`` or ``forward``; None when it has none."""
    if callable(getattr(model, SCORE_METHOD[target], None)):
        return SCORE_METHOD[target]
    triples = triple_function(model)
    return None if triples is None else triples[1]


def _own_scorer(
    model: Any,
    target: Target,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    probe_queries: torch.Tensor | None = None,
) -> CandidateScorer:
    """The scorer of the model's own methods (:func:`own_method`), or a TypeError naming what is missing; for a
    half-precision model, tried on the first of ``probe_queries`` (given) so that a model that cannot score in
    its precision fails here with what to do, not in the middle of the loop."""
    scorer = _own_method_scorer(model, target, num_entities, candidate_ids)
    dtype = parameter_dtype(model)
    if probe_queries is not None and len(probe_queries) and dtype in HALF_DTYPES:
        try:
            scorer.begin(probe_queries[:1])
            scorer.start_slice(0, min(scorer.num_candidates, PROBE_WINDOW))
            scorer.query_tile(0, 1)
        except Exception as error:
            name, method = model_name(model), own_method(model, target)
            raise TypeError(
                f"{name} holds {dtype} parameters, and its own {method} cannot score in {dtype} here: it raised "
                f"{type(error).__name__}: {error}. Evaluate a float32 copy of the model instead (e.g. "
                "copy.deepcopy(model).float()), or on a device where its operations support that precision"
            ) from error
    return scorer


def parameter_dtype(model: Any) -> torch.dtype | None:
    """The dtype of the first floating-point parameter of ``model`` (or of the model an integration's view holds),
    None when it has none."""
    module = model if isinstance(model, torch.nn.Module) else getattr(model, "model", None)
    if not isinstance(module, torch.nn.Module):
        return None
    return next((p.dtype for p in module.parameters() if p.dtype.is_floating_point), None)


def _own_method_scorer(
    model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None
) -> CandidateScorer:
    """The scorer of the model's own methods (:func:`own_method`), or a TypeError naming what is missing."""
    method = getattr(model, SCORE_METHOD[target], None)
    if callable(method):
        passing = candidate_argument(method, CANDIDATE_KEYWORD[target])
        if passing is None:
            return FullRowScorer(model, target, num_entities, candidate_ids)
        scorer = SlicedScorer(model, target, num_entities, candidate_ids)
        scorer.passing = passing
        return scorer
    triples = triple_function(model)
    if triples is None:  # the model cannot rank this side: the message of the evaluators' own check
        check_model(model, (target,))
        raise AssertionError("check_model accepted a model without a way to score")  # pragma: no cover
    return TripleScorer(model, target, num_entities, candidate_ids, *triples)


def _half_message(view: Any, what: str) -> str:
    """The warning for a form not used in half precision (``what``: which dtype was seen where)."""
    reason = (f"{what}, and in half precision the fast path's GEMM rounds otherwise than the model's own methods, "
              "which ties and unties candidates")  # fmt: skip
    return _refusal_message(view, reason, declare=False)


def _refusal_message(view: Any, reason: str, declare: bool = True) -> str:
    """The warning for a form turned off by the class check; ``declare``: suggest declaring the form below."""
    name = model_name(view)
    message = (f"kgeval: {name} is not scored through its query/candidate fast path: {reason}, so it is scored "
               "through its own methods (slower; the ranks are those of its methods)")  # fmt: skip
    if declare:
        message += f". Declare the form on {name} itself (kgeval_query / kgeval_candidates) to keep the fast path"
    return message
