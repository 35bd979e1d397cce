"""Triple classification: can the model tell a true triple from a false one? Each labelled triple is scored by the
model, a threshold per relation is fitted on validation, and test triples scoring at or above their relation's
threshold are called true (:func:`classify_triples`; precomputed scores: :func:`classify_scores`).

The labelled triples come from a dataset split and CoDEx's hard negatives (:func:`load_split_with_negatives`), from a
``head relation tail label`` file as WN11 and FB13 ship them (:func:`read_labelled_triples`), or from tensors
(:class:`LabelledTriples`). docs/classification.md describes the conventions (``"kgeval"``, ``"codex"``,
``"torchkge"``, ``"global"``) and the metrics.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval import _checks
from kgeval._engine import candidate_scorer, exact_arithmetic
from kgeval._inputs import check_model_inputs
from kgeval._modes import evaluation_mode
from kgeval.adapters.triples import triple_function
from kgeval.datasets.reading import iter_data_lines
from kgeval.exceptions import KnownNegativesWarning, ThresholdFallbackWarning, UndefinedMetricWarning, warn_caller

__all__ = [
    "CLASSIFICATION_METRICS",
    "CONVENTIONS",
    "LabelledTriples",
    "TripleClassificationResults",
    "average_precision",
    "best_threshold",
    "classify_scores",
    "classify_triples",
    "load_split_with_negatives",
    "read_labelled_triples",
    "roc_auc",
    "score_triples",
]

Convention = Literal["kgeval", "codex", "torchkge", "global"]
Objective = Literal["accuracy", "f1"]
KnownNegatives = Literal["keep", "drop"]

#: the threshold conventions by name (docs/classification.md)
CONVENTIONS: tuple[str, ...] = ("kgeval", "codex", "torchkge", "global")
#: the metrics reported micro, per relation and macro, in this order
CLASSIFICATION_METRICS: tuple[str, ...] = (
    "accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy", "roc_auc", "average_precision",
)  # fmt: skip
_ALIASES = {
    "acc": "accuracy", "f1_score": "f1", "matthews_correlation_coefficient": "mcc", "auc": "roc_auc",
    "auc_roc": "roc_auc", "ap": "average_precision", "tpr": "recall", "sensitivity": "recall",
}  # fmt: skip
#: triples scored per model call when the model scores whole triples, and score rows (B x entities) otherwise
TRIPLES_PER_CALL = 65536
ROW_SCORES_PER_CALL = 2**22


@dataclass(frozen=True, eq=False)
class LabelledTriples:
    """Triples with a true / false label each, in a model's ids.

    Attributes
    ----------
    triples : LongTensor of shape (n, 3)
        (head, relation, tail) ids.
    labels : BoolTensor of shape (n,)
        True for a true triple, False for a false one.
    relation_labels : tuple of str, optional
        The label of each relation id (results then name relations by label).
    known_negatives : int, default=0
        Given negatives found among the known triples when they were read (warned; kept or dropped as asked).
    source : str, default=""
        Where the triples came from, for messages.
    """

    triples: torch.Tensor = field(repr=False)
    labels: torch.Tensor = field(repr=False)
    relation_labels: tuple[str, ...] | None = field(default=None, repr=False)
    known_negatives: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        triples = _checks.check_triples(self.triples, "triples", num_entities=2**62)
        if not isinstance(self.labels, torch.Tensor) or self.labels.dtype != torch.bool or self.labels.dim() != 1:
            raise TypeError("labels must be a BoolTensor of shape (n,); LabelledTriples.from_labels converts 0 / 1")
        if self.labels.shape[0] != triples.shape[0] or triples.shape[0] == 0:
            raise ValueError(f"labels must have one entry per triple, and there must be one: got {triples.shape[0]} "
                             f"triples and {self.labels.shape[0]} labels")  # fmt: skip
        object.__setattr__(self, "triples", triples.cpu())
        object.__setattr__(self, "labels", self.labels.cpu())

    @classmethod
    def from_labels(cls, triples: torch.Tensor, labels: Any, **kwargs: Any) -> LabelledTriples:
        """Labelled triples from labels given as bools or as the numbers 0 / 1 (a tensor, array or list); any other
        value is a ValueError naming the first row holding one."""
        values = labels.cpu() if isinstance(labels, torch.Tensor) else torch.as_tensor(np.asarray(labels))
        if values.dtype != torch.bool:
            bad = ~((values == 0) | (values == 1))
            if bool(bad.any()):
                row = int(bad.nonzero()[0, 0])
                raise ValueError(
                    f"labels must be 0 / 1 (false / true) or bools: row {row} holds {values[row].item()!r}"
                )
            values = values == 1
        return cls(triples, values.reshape(-1), **kwargs)

    @classmethod
    def from_positives_and_negatives(cls, positives: torch.Tensor, negatives: torch.Tensor,
                                     **kwargs: Any) -> LabelledTriples:  # fmt: skip
        """The positives (n, 3) labelled true, then the negatives (m, 3) labelled false."""
        labels = torch.cat(
            [torch.ones(len(positives), dtype=torch.bool), torch.zeros(len(negatives), dtype=torch.bool)]
        )
        return cls(torch.cat([positives.cpu(), negatives.cpu()]), labels, **kwargs)

    def __len__(self) -> int:
        return int(self.triples.shape[0])

    @property
    def num_positives(self) -> int:
        return int(self.labels.sum())

    @property
    def num_negatives(self) -> int:
        return len(self) - self.num_positives


def load_split_with_negatives(
    dataset: Any,
    split: str,
    *,
    negatives: str | os.PathLike[str] | None = None,
    known_negatives: KnownNegatives = "keep",
) -> LabelledTriples:
    """A split's triples labelled true beside the hard negatives of CoDEx's layout labelled false.

    Parameters
    ----------
    dataset : TriplesDataset
        The dataset (:func:`kgeval.datasets.load_dataset`); its ``entity_to_id`` / ``relation_to_id`` map the
        negatives' labels, and its three splits are the known triples.
    split : {"valid", "test"}
        The split whose triples are the positives.
    negatives : path, optional
        The negatives' file, one ``head<TAB>relation<TAB>tail`` per line (gzipped when its name ends in ``.gz``);
        by default ``{split}_negatives.txt`` or ``.txt.gz`` beside the split's file (CoDEx ships them so).
    known_negatives : {"keep", "drop"}, default="keep"
        A negative that is a triple of train, valid or test: kept (labelled false) or dropped; either way a
        :class:`KnownNegativesWarning` counts them, and so does the result's ``known_negatives``.

    Returns
    -------
    LabelledTriples
        The split's positives, then the negatives, in the files' order.

    Raises
    ------
    ValueError
        For a label outside the dataset's vocabulary or a malformed line (naming the file and line), or when the
        negatives' file is not found (naming the names tried).
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    positives = getattr(dataset, split)
    path = Path(negatives) if negatives is not None else _negatives_beside(dataset, split)
    read = _read_rows(path, dataset.entity_to_id, dataset.relation_to_id, with_labels=False)[0]
    known = torch.cat([dataset.train, dataset.valid, dataset.test])
    false = torch.zeros(len(read), dtype=torch.bool)
    (kept, _), count = _known_negatives(read, false, known, known_negatives, str(path))
    return LabelledTriples.from_positives_and_negatives(
        positives, kept, relation_labels=_labels_by_id(dataset.relation_to_id), known_negatives=count,
        source=f"{split} + {path}",
    )  # fmt: skip


def read_labelled_triples(
    path: str | os.PathLike[str],
    entity_to_id: Mapping[str, int],
    relation_to_id: Mapping[str, int],
    *,
    known_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
    known_negatives: KnownNegatives = "keep",
    sep: str = "\t",
) -> LabelledTriples:
    """Labelled triples from a ``head relation tail label`` file (WN11's and FB13's ``valid.txt`` / ``test.txt``).

    Parameters
    ----------
    path : path
        One ``head<sep>relation<sep>tail<sep>label`` per line, gzipped when the name ends in ``.gz``; the labels of
        a file are ``1`` / ``-1`` (WN11, FB13) or ``1`` / ``0``.
    entity_to_id, relation_to_id : mapping of str to int
        The model's vocabularies.
    known_triples : LongTensor (m, 3) or a sequence of them, optional
        Known (true) triples: a triple labelled false among them is counted and warned about
        (:class:`KnownNegativesWarning`), then kept or dropped as ``known_negatives`` says.
    known_negatives : {"keep", "drop"}, default="keep"
    sep : str, default="\\t"

    Returns
    -------
    LabelledTriples

    Raises
    ------
    ValueError
        For a label other than the file's two classes (``-1`` and ``0`` in one file included), a head, relation or
        tail outside the vocabularies, or a line without four fields: the message names the file and line.
    """
    path = Path(path)
    triples, labels = _read_rows(path, entity_to_id, relation_to_id, with_labels=True, sep=sep)
    assert labels is not None
    if known_triples is not None:
        known = torch.cat(list(known_triples)) if not isinstance(known_triples, torch.Tensor) else known_triples
        (triples, labels), count = _known_negatives(triples, labels, known.long().cpu(), known_negatives, str(path))
    else:
        count = 0
    return LabelledTriples(triples, labels, _labels_by_id(relation_to_id), known_negatives=count, source=str(path))


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
    convention : {"kgeval", "codex", "torchkge", "global"}, default="kgeval"
        ``"kgeval"``: per relation, the sweep below, and the global threshold for a relation validation lacks or has
        one class of only (warned). ``"codex"``: CoDEx's ``scripts/tc.py``: per relation, the sweep; a relation
        absent from validation gets -inf (every test triple of it predicted true), as its code does. ``"torchkge"``:
        per relation the highest validation-negative score, true when score > it; a relation without validation
        negatives gets the highest of them all (TorchKGE's rule for a relation absent from validation). ``"global"``:
        one threshold, the sweep over all validation triples.
    objective : {"accuracy", "f1"}, default="accuracy"
        What the sweep maximises (not used by ``"torchkge"``).
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
    fitted_on = _as_scores(valid_scores, valid, "valid_scores")
    scores, labels = _as_scores(test_scores, test, "test_scores"), test.labels.numpy()
    fitted = _fit(fitted_on, valid.labels.numpy(), valid.triples[:, 1].numpy(), test.triples[:, 1].numpy(),
                  convention, objective)  # fmt: skip
    thresholds, global_threshold, fallback, strict = fitted
    relations = test.triples[:, 1].numpy()
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


# -- thresholds ------------------------------------------------------------------------------------------------------


def best_threshold(scores: np.ndarray, labels: np.ndarray, objective: Objective = "accuracy") -> float:
    """The lowest of the distinct ``scores`` (n,) that maximises ``objective`` when a triple is called true at
    score >= threshold, ``labels`` (n,) bool; counted exactly (accuracy by its integer count, F1 as a fraction)."""
    order = np.argsort(scores, kind="stable")
    distinct, first = np.unique(scores[order], return_index=True)  # first: how many scores lie below a candidate
    positives_below = np.concatenate([[0], np.cumsum(labels[order])])[first]
    num_positives, num_negatives = int(labels.sum()), int(labels.size - labels.sum())
    tp = num_positives - positives_below
    fp = num_negatives - (first - positives_below)
    if objective == "accuracy":
        return float(distinct[int(np.argmax(tp - fp))])  # correct = tp + (N - fp); argmax: the first, lowest
    f1 = 2 * tp / (tp + fp + num_positives)  # 2tp / (2tp + fp + fn); tp + fp >= 1 at every candidate
    near = np.nonzero(f1 >= f1.max() * (1 - 1e-9))[0]  # the float maximum's neighbours, decided exactly below
    exact = [Fraction(2 * int(tp[j]), int(tp[j] + fp[j]) + num_positives) for j in near]
    return float(distinct[near[exact.index(max(exact))]])


def _fit(
    scores: np.ndarray,
    labels: np.ndarray,
    relations: np.ndarray,
    test_relations: np.ndarray,
    convention: str,
    objective: Objective,
) -> tuple[dict[int, float], float | None, dict[int, str], bool]:
    """(threshold per relation of validation and test, global threshold, fallback reasons, strict comparison)."""
    wanted = sorted(set(np.unique(relations).tolist()) | set(np.unique(test_relations).tolist()))
    present = set(np.unique(relations).tolist())
    if convention == "torchkge":
        if labels.all():
            raise ValueError("convention 'torchkge' needs validation negatives: valid holds none")
        top = float(scores[~labels].max())
        own = {r: float(scores[(relations == r) & ~labels].max()) for r in np.unique(relations[~labels]).tolist()}
        fallback = {r: "no validation negatives: the highest of all" for r in wanted if r not in own}
        return {r: own.get(r, top) for r in wanted}, top, fallback, True
    one_class = labels.all() or not labels.any()
    if one_class and convention in ("kgeval", "global"):
        raise ValueError(f"the validation triples hold one class only ({'true' if labels.all() else 'false'}): no "
                         "threshold can be fitted on them")  # fmt: skip
    overall = best_threshold(scores, labels, objective)
    if convention == "global":
        return dict.fromkeys(wanted, overall), overall, {}, False
    thresholds, fallback = {}, {}
    for r in wanted:
        mask = relations == r
        if convention == "codex":
            thresholds[r] = best_threshold(scores[mask], labels[mask], objective) if r in present else -math.inf
            if r not in present:
                fallback[r] = "absent from validation: -inf, every triple true (CoDEx's tc.py)"
        elif r not in present:
            thresholds[r], fallback[r] = overall, "absent from validation: the global threshold"
        elif labels[mask].all() or not labels[mask].any():
            thresholds[r], fallback[r] = overall, "one class only in validation: the global threshold"
        else:
            thresholds[r] = best_threshold(scores[mask], labels[mask], objective)
    tested = set(np.unique(test_relations).tolist())
    told = {r: why for r, why in fallback.items() if r in tested}
    if told:
        count = int(np.isin(test_relations, list(told)).sum())
        warn_caller(f"{len(told)} test relation(s) got no threshold of their own from validation ({count} test "
                    f"triples): " + "; ".join(f"relation {r}: {why}" for r, why in told.items()),
                    ThresholdFallbackWarning)  # fmt: skip
    return thresholds, overall, fallback, False


# -- metrics ---------------------------------------------------------------------------------------------------------


def _metrics(labels: np.ndarray, predictions: np.ndarray, scores: np.ndarray, undefined: dict[str, list[str]],
             scope: str) -> dict[str, float]:  # fmt: skip
    """:data:`CLASSIFICATION_METRICS` of one scope's triples; an undefined one is NaN, its scope noted."""
    tp = int((labels & predictions).sum())
    fp = int((~labels & predictions).sum())
    fn = int((labels & ~predictions).sum())
    tn = int((~labels & ~predictions).sum())
    p, n = tp + fn, tn + fp
    denominator = (tp + fp) * p * n * (tn + fn)
    values = {
        "accuracy": _ratio(tp + tn, p + n),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, p),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "mcc": (tp * tn - fp * fn) / math.sqrt(denominator) if denominator else math.nan,
        "balanced_accuracy": (_ratio(tp, p) + _ratio(tn, n)) / 2 if p and n else math.nan,
        "roc_auc": roc_auc(scores, labels) if p and n else math.nan,
        "average_precision": average_precision(scores, labels) if p else math.nan,
    }
    for name, value in values.items():
        if math.isnan(value):
            undefined.setdefault(name, []).append(scope)
    return values


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else math.nan


def _defined_mean(values: list[float]) -> float:
    defined = [v for v in values if not math.isnan(v)]
    return math.fsum(defined) / len(defined) if defined else math.nan


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve, (#(pos, neg) pairs ordered right + half the tied ones) / (P N), from the
    positives' mid-ranks summed exactly (Mann-Whitney); both classes must be present."""
    order = np.argsort(scores, kind="stable")
    ranked, positive = scores[order], labels[order]
    _, start = np.unique(ranked, return_index=True)
    end = np.append(start[1:], ranked.size)  # group g spans sorted positions [start, end): mid-rank (start+end+1)/2
    positives_per_group = np.add.reduceat(positive.astype(np.int64), start)
    twice_rank_sum = int(np.sum(positives_per_group * (start + end + 1)))
    p = int(labels.sum())
    n = labels.size - p
    return (twice_rank_sum - p * (p + 1)) / (2 * p * n)


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Σ_k (R_k - R_{k-1}) P_k over the distinct scores, descending, as scikit-learn's ``average_precision_score``:
    P_k and R_k the precision and recall of calling true the triples scoring >= the k-th score."""
    order = np.argsort(-scores, kind="stable")
    ranked, positive = scores[order], labels[order].astype(np.int64)
    # the last position of each distinct score (compared, not subtracted: -inf - -inf is NaN)
    last = np.append(np.nonzero(ranked[1:] != ranked[:-1])[0], ranked.size - 1)
    tp = np.cumsum(positive)[last]
    predicted = last + 1
    gained = np.diff(np.concatenate([[0], tp]))
    return float(np.sum(gained / tp[-1] * (tp / predicted)))


# -- reading ---------------------------------------------------------------------------------------------------------


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


def _negatives_beside(dataset: Any, split: str) -> Path:
    source = getattr(dataset, "sources", {}).get(split)
    if not source:
        raise ValueError(f"the dataset knows no file for its {split} split (built in memory?): pass negatives=<path>")
    folder = Path(source).parent
    names = [f"{split}_negatives.txt", f"{split}_negatives.txt.gz"]
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise ValueError(f"{what} negatives file for {split} in {str(folder)!r}; tried {', '.join(names)}")
    return found[0]


def _read_rows(path: Path, entity_to_id: Mapping[str, int], relation_to_id: Mapping[str, int], *, with_labels: bool,
               sep: str = "\t") -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(triples (n, 3), labels (n,) or None) of a file of ``head relation tail [label]`` lines, mapped."""
    if not path.is_file():
        raise ValueError(f"no file {str(path)!r}")
    width, rows, labels, seen = 4 if with_labels else 3, [], [], set()
    for line_number, line in iter_data_lines(path.parent, path.name, str(path)):
        fields = [part.strip() for part in line.split(sep)]
        where = f"{path} line {line_number}"
        if len(fields) != width:
            named = "head, relation, tail, label" if with_labels else "head, relation, tail"
            raise ValueError(f"{where}: expected {width} fields ({named}), got {len(fields)}")
        ids = []
        for kind, label, vocabulary in zip(("head", "relation", "tail"), fields[:3],
                                           (entity_to_id, relation_to_id, entity_to_id), strict=True):  # fmt: skip
            if label not in vocabulary:
                raise ValueError(f"{where}: unknown {kind} {label!r} (not in the model's vocabulary)")
            ids.append(int(vocabulary[label]))
        rows.append(ids)
        if with_labels:
            if fields[3] not in ("1", "+1", "-1", "0"):
                raise ValueError(f"{where}: label {fields[3]!r} is none of 1 (true), -1 or 0 (false)")
            seen.add(fields[3].lstrip("+"))
            if {"-1", "0"} <= seen:
                raise ValueError(f"{where}: the file labels false triples both -1 and 0; its two classes must be "
                                 "1 / -1 or 1 / 0")  # fmt: skip
            labels.append(fields[3].lstrip("+") == "1")
    if not rows:
        raise ValueError(f"{path} holds no triple")
    return torch.tensor(rows, dtype=torch.long), torch.tensor(labels, dtype=torch.bool) if with_labels else None


def _known_negatives(triples: torch.Tensor, labels: torch.Tensor, known: torch.Tensor, keep: KnownNegatives,
                     where: str) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:  # fmt: skip
    """((triples, labels) with the false-labelled known triples kept or dropped, how many there were), warned."""
    if keep not in ("keep", "drop"):
        raise ValueError(f"known_negatives must be 'keep' or 'drop', got {keep!r}")
    _, inverse = torch.unique(torch.cat([triples, known]), dim=0, return_inverse=True)
    is_known = torch.isin(inverse[: len(triples)], inverse[len(triples) :]) & ~labels
    count = int(is_known.sum())
    if count:
        done = "kept, labelled false" if keep == "keep" else "dropped"
        warn_caller(f"{count} of {int((~labels).sum())} negatives of {where} are known triples ({done})",
                    KnownNegativesWarning)  # fmt: skip
        if keep == "drop":
            triples, labels = triples[~is_known], labels[~is_known]
    return (triples, labels), count


def _labels_by_id(label_to_id: Mapping[str, int]) -> tuple[str, ...]:
    labels = [""] * (max(label_to_id.values(), default=-1) + 1)
    for label, index in label_to_id.items():
        labels[index] = labels[index] or label
    return tuple(labels)
