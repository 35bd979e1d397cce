"""Triple classification of a model: each labelled triple scored by the model's own scoring
(:func:`score_triples`), thresholds fitted on validation and applied to test (:func:`classify_triples`; precomputed
scores: :func:`classify_scores`), and the micro, macro and per-relation metrics with the thresholds
(:class:`TripleClassificationResults`); the one module of the package that imports the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval import _checks
from kgeval._engine import candidate_scorer, exact_arithmetic
from kgeval._inputs import check_model_inputs
from kgeval._modes import evaluation_mode
from kgeval.adapters.triples import triple_function
from kgeval.exceptions import OptimisticThresholdWarning, UndefinedMetricWarning, warn_caller
from kgeval.variants.classification.labelled import LabelledTriples
from kgeval.variants.classification.metrics import _ALIASES, CLASSIFICATION_METRICS, _defined_mean, _metrics
from kgeval.variants.classification.thresholds import CONVENTIONS, Convention, Objective, _fit, top_p_predictions

__all__ = ["TripleClassificationResults", "classify_scores", "classify_triples", "score_triples"]

#: triples scored per model call when the model scores whole triples, and score rows (B x entities) otherwise
TRIPLES_PER_CALL = 65536
ROW_SCORES_PER_CALL = 2**22


def score_triples(model: Any, triples: torch.Tensor, *, batch_size: int | None = None) -> torch.Tensor:
    """Each triple's score by the model's own scoring: its ``score_hrt`` / ``forward(h, r, t)``, else its ``score_t``
    row with the tail's column picked.

    Parameters
    ----------
    model : object
        A model kgeval evaluates (the model protocol, a PyKEEN / PyG / TorchKGE model, ...).
    triples : LongTensor of shape (n, 3)
        (head, relation, tail) ids, inside the model's entity and relation counts.
    batch_size : int, optional
        Triples per model call; by default 65,536 for whole-triple scoring, else as many as keep a call's
        (B x entities) score rows at 2**22 entries.

    Returns
    -------
    FloatTensor of shape (n,)
        On the model's device, in its dtype; computed in evaluation mode, under ``torch.inference_mode()``, with the
        caller's reduced-precision settings set aside (as an evaluation is).

    Raises
    ------
    ValueError
        For an id beyond the model's entities or relations (naming the first row) or a NaN score (naming the
        triple).
    """
    checked = check_model_inputs(model, ("tail",))
    view, num_entities, device = checked.model.view, checked.num_entities, checked.model.device
    triples = _checks.check_triples(triples, "triples", num_entities, checked.num_relations).to(device)
    whole = triple_function(view) is not None
    default = TRIPLES_PER_CALL if whole else max(1, ROW_SCORES_PER_CALL // max(1, num_entities))
    size = _checks.check_positive_int(batch_size, "batch_size", allow_none=True) or default
    parts = []
    with evaluation_mode(model), torch.inference_mode(), exact_arithmetic("exact"):
        score = candidate_scorer(view, "tail", num_entities)
        for start in range(0, triples.shape[0], size):
            batch = triples[start : start + size]
            parts.append(score(batch[:, :2], batch[:, 2:]).reshape(-1))
    scores = torch.cat(parts)
    nan = torch.isnan(scores)
    if bool(nan.any()):
        row = int(nan.nonzero()[0, 0])
        raise ValueError(f"the model scored triple {triples[row].tolist()} (row {row}) NaN")
    return scores


@dataclass(frozen=True, eq=False)
class TripleClassificationResults:
    """Triple classification of test triples at thresholds fitted on validation.

    Attributes
    ----------
    convention, objective : str
        How the thresholds were fitted (docs/classification.md).
    thresholds : dict of int to float
        The threshold applied to each relation of the test triples, by relation id.
    global_threshold : float or None
        The threshold fitted on every validation triple (the fallback of ``"kgeval"``; computed and, as CoDEx's
        script does, unused by ``"codex"``; the highest validation negative for ``"torchkge"``).
    fallback : dict of int to str
        The test relations that got no threshold of their own from validation, and why.
    fallback_triples : int
        The test triples of those relations.
    strict : bool
        A triple is predicted true when its score > its threshold (``"torchkge"``), else when score >= threshold.
    micro, macro : dict of str to float
        :data:`CLASSIFICATION_METRICS` over all test triples, and their unweighted mean over the test relations
        where each is defined.
    per_relation : dict of int to dict of str to float
        The metrics of each test relation's triples.
    relation_labels : tuple of str or None
        The label of each relation id, when known.
    scores, labels, predictions, relations : ndarray of shape (n,)
        Each test triple's score (float64), label, prediction and relation id.
    """

    convention: str
    objective: str
    thresholds: dict[int, float]
    global_threshold: float | None
    fallback: dict[int, str]
    fallback_triples: int
    strict: bool
    micro: dict[str, float]
    macro: dict[str, float]
    per_relation: dict[int, dict[str, float]]
    relation_labels: tuple[str, ...] | None = field(default=None, repr=False)
    scores: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    labels: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool), repr=False)
    predictions: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool), repr=False)
    relations: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)

    def relation_name(self, relation: int) -> str:
        """A relation's label, or its id as text."""
        labels = self.relation_labels
        return labels[relation] if labels is not None and relation < len(labels) else str(relation)

    def get_metric(self, key: str) -> float:
        """One number by key: ``"<metric>"`` or ``"micro.<metric>"`` (all test triples), ``"macro.<metric>"``,
        ``"relation.<label or id>.<metric>"``; the metrics are :data:`CLASSIFICATION_METRICS`, case-insensitive, with
        the aliases ``acc``, ``f1_score``, ``auc``, ``ap``, ``matthews_correlation_coefficient``. KeyError otherwise."""
        head, _, name = key.rpartition(".")
        metric = _ALIASES.get(name.lower(), name.lower())
        if metric not in CLASSIFICATION_METRICS:
            raise KeyError(f"unknown metric {name!r} in {key!r}; known: {', '.join(CLASSIFICATION_METRICS)}")
        if head.lower() in ("", "micro"):
            return self.micro[metric]
        if head.lower() == "macro":
            return self.macro[metric]
        scope, _, relation = head.partition(".")
        if scope.lower() == "relation":
            for relation_id, values in self.per_relation.items():
                if relation in (self.relation_name(relation_id), str(relation_id)):
                    return values[metric]
            raise KeyError(f"no test triple of relation {relation!r} in {key!r}")
        raise KeyError(f"{key!r}: a key reads <metric>, micro.<metric>, macro.<metric> or relation.<label>.<metric>")

    def to_dict(self) -> dict[str, Any]:
        """Every number, JSON-ready: the settings, the thresholds, micro, macro and per-relation metrics."""
        relations = {
            self.relation_name(relation): {
                **values,
                "threshold": self.thresholds[relation],
                "positives": int((self.labels & (self.relations == relation)).sum()),
                "negatives": int((~self.labels & (self.relations == relation)).sum()),
                "fallback": self.fallback.get(relation),
            }
            for relation, values in self.per_relation.items()
        }
        return {
            "convention": self.convention, "objective": self.objective, "strict": self.strict,
            "global_threshold": self.global_threshold, "fallback_triples": self.fallback_triples,
            "micro": dict(self.micro), "macro": dict(self.macro), "per_relation": relations,
        }  # fmt: skip

    #: what :func:`kgeval.integrations.trackers.log_results` logs by default
    headline_keys: tuple[str, ...] = field(
        default=("micro.accuracy", "micro.f1", "micro.roc_auc", "micro.average_precision", "macro.accuracy",
                 "macro.f1"), init=False, repr=False)  # fmt: skip

    def to_flat_dict(self) -> dict[str, float]:
        """Every metric by flat key: ``micro.<metric>``, ``macro.<metric>``, ``relation.<label>.<metric>``
        (:data:`CLASSIFICATION_METRICS`; what trackers log)."""
        flat = {f"{scope}.{name}": value for scope, values in (("micro", self.micro), ("macro", self.macro))
                for name, value in values.items()}  # fmt: skip
        for relation, values in self.per_relation.items():
            flat.update({f"relation.{self.relation_name(relation)}.{name}": value for name, value in values.items()})
        return flat

    def to_df(self) -> pd.DataFrame:
        """One row per scope -- ``micro``, ``macro``, then each relation by label -- and a column per metric, with
        each relation's threshold, test positives / negatives and fallback reason."""
        rows = [{"scope": "micro", **self.micro}, {"scope": "macro", **self.macro}]
        rows += [{"scope": name, **values} for name, values in self.to_dict()["per_relation"].items()]
        return pd.DataFrame(rows).set_index("scope")


def classify_triples(
    model: Any,
    valid: LabelledTriples,
    test: LabelledTriples,
    *,
    convention: Convention = "kgeval",
    objective: Objective = "accuracy",
    batch_size: int | None = None,
) -> TripleClassificationResults:
    """Triple classification: thresholds fitted on ``valid``'s scores, applied to ``test``'s.

    Parameters
    ----------
    model : object
        The model, scored by :func:`score_triples`.
    valid, test : LabelledTriples
        Labelled validation triples (the thresholds are fitted on them) and test triples (the metrics are computed
        on them), of n_valid and n_test triples, in the model's ids.
    convention : {"kgeval", "codex", "torchkge", "global", "pykeen"}, default="kgeval"
        ``"kgeval"``: per relation, the sweep below, and the global threshold for a relation validation lacks or has
        one class of only (warned). ``"codex"``: CoDEx's ``scripts/tc.py``: per relation, the sweep; a relation
        absent from validation gets -inf (every test triple of it predicted true), as its code does. ``"torchkge"``:
        per relation the highest validation-negative score, true when score > it; a relation without validation
        negatives gets the highest of them all (TorchKGE's rule for a relation absent from validation). ``"global"``:
        one threshold, the sweep over all validation triples. ``"pykeen"``: PyKEEN's top-P rule
        (:func:`top_p_predictions`): the P highest-scored test triples are called true, P the number of true test
        triples; validation is not used (nor scored), and an :class:`OptimisticThresholdWarning` says the threshold
        is fitted on the evaluated labels. Its ``thresholds`` are the lowest score called true.
    objective : {"accuracy", "f1"}, default="accuracy"
        What the sweep maximises (not used by ``"torchkge"`` and ``"pykeen"``).
    batch_size : int, optional
        Triples per model call (:func:`score_triples`).

    Returns
    -------
    TripleClassificationResults

    Notes
    -----
    The sweep is exact: every distinct validation score s of the relation is a candidate threshold (a triple is
    true when its score >= s), its objective counted exactly; among the maximisers the lowest score is chosen (as
    CoDEx's script chooses). The metrics are computed in float64 from exact counts: ROC-AUC counts ties half
    (Mann-Whitney), average precision is scikit-learn's step rule (``average_precision_score``); an undefined value
    (a zero denominator, one class only) is NaN with an :class:`kgeval.exceptions.UndefinedMetricWarning`.
    """
    if convention == "pykeen":  # fits nothing on validation: its triples are not scored
        valid_scores: Any = np.zeros(len(valid))
    else:
        valid_scores = score_triples(model, valid.triples, batch_size=batch_size)
    test_scores = score_triples(model, test.triples, batch_size=batch_size)
    return classify_scores(valid, valid_scores, test, test_scores, convention=convention, objective=objective)


def classify_scores(
    valid: LabelledTriples,
    valid_scores: Any,
    test: LabelledTriples,
    test_scores: Any,
    *,
    convention: Convention = "kgeval",
    objective: Objective = "accuracy",
) -> TripleClassificationResults:
    """:func:`classify_triples` on precomputed scores: ``valid_scores`` (n_valid,) and ``test_scores`` (n_test,),
    one per labelled triple (higher = more plausible; no NaN)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if objective not in ("accuracy", "f1"):
        raise ValueError(f"objective must be 'accuracy' or 'f1', got {objective!r}")
    if convention == "torchkge" and objective != "accuracy":
        raise ValueError(
            "convention 'torchkge' fits no objective (its thresholds are the highest validation negatives)"
        )
    if convention == "codex" and objective != "accuracy":
        raise ValueError("convention 'codex' fits accuracy, as CoDEx's scripts/tc.py does (use 'kgeval' for F1)")
    if convention == "pykeen" and objective != "accuracy":
        raise ValueError("convention 'pykeen' fits no objective (it calls the top-P test scores true)")
    scores, labels = _as_scores(test_scores, test, "test_scores"), test.labels.numpy()
    relations = test.triples[:, 1].numpy()
    thresholds: dict[int, float]
    global_threshold: float | None
    fallback: dict[int, str]
    if convention == "pykeen":
        predictions = top_p_predictions(scores, labels)
        called = scores[predictions]
        global_threshold = float(called.min()) if called.size else math.inf
        thresholds = dict.fromkeys(np.unique(relations).tolist(), global_threshold)
        fallback, strict = {}, False
        warn_caller(f"convention 'pykeen' calls the {int(labels.sum())} highest-scored test triples true, as many as "
                    "the test labels hold: the threshold is fitted on the evaluated labels, and the binarised metrics "
                    "are optimistic", OptimisticThresholdWarning)  # fmt: skip
    else:
        fitted_on = _as_scores(valid_scores, valid, "valid_scores")
        fitted = _fit(fitted_on, valid.labels.numpy(), valid.triples[:, 1].numpy(), relations, convention, objective)
        thresholds, global_threshold, fallback, strict = fitted
        limits = np.array([thresholds[int(r)] for r in relations], dtype=np.float64)
        predictions = scores > limits if strict else scores >= limits
    undefined: dict[str, list[str]] = {}
    micro = _metrics(labels, predictions, scores, undefined, "micro")
    names = test.relation_labels
    per_relation = {
        int(r): _metrics(labels[relations == r], predictions[relations == r], scores[relations == r], undefined,
                         names[int(r)] if names is not None and int(r) < len(names) else str(int(r)))
        for r in np.unique(relations)
    }  # fmt: skip
    macro = {name: _defined_mean([values[name] for values in per_relation.values()]) for name in CLASSIFICATION_METRICS}
    if undefined:
        listed = "; ".join(f"{name}: {', '.join(scopes[:5])}{' ...' if len(scopes) > 5 else ''} ({len(scopes)})"
                           for name, scopes in undefined.items())  # fmt: skip
        warn_caller(f"undefined (NaN; left out of the macro averages) -- {listed}", UndefinedMetricWarning)
    return TripleClassificationResults(
        convention=convention, objective=objective, thresholds={r: thresholds[r] for r in per_relation},
        global_threshold=global_threshold, fallback={r: why for r, why in fallback.items() if r in per_relation},
        fallback_triples=int(np.isin(relations, list(fallback)).sum()), strict=strict, micro=micro, macro=macro,
        per_relation=per_relation, relation_labels=test.relation_labels, scores=scores, labels=labels,
        predictions=predictions, relations=relations,
    )  # fmt: skip


def _as_scores(scores: Any, triples: LabelledTriples, name: str) -> np.ndarray:
    """Scores as a float64 array (n,) (exact: every float dtype widens exactly), checked: one per triple, no NaN."""
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().double().numpy()
    values = np.asarray(scores, dtype=np.float64).reshape(-1)
    if values.shape[0] != len(triples):
        raise ValueError(f"{name} must hold one score per labelled triple: {values.shape[0]} for {len(triples)}")
    if np.isnan(values).any():
        row = int(np.nonzero(np.isnan(values))[0][0])
        raise ValueError(f"{name} row {row} (triple {triples.triples[row].tolist()}) is NaN")
    return values
