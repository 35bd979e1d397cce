"""PyKEEN's classification protocol, exact and streaming (:func:`classify_all_pairs`): every (query, candidate) pair
of the evaluated queries is an instance -- a known triple positive, every other pair negative, as PyKEEN's
``ClassificationEvaluator`` defines it -- and ROC-AUC, average precision and the confusion counts are computed
exactly without ever holding a (queries x entities) array.

Two passes over the same score tiles (``kgeval._engine.visit_tiles``): the first keeps the positives' scores
(P values) and the highest score; the second counts every negative against the positives' sorted distinct scores
(:class:`~kgeval.variants.classification.pair_counts.PairTally`), on the scores' device. Memory: O(P) beside one
tile; time: twice the scoring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval import _checks
from kgeval._engine import FilterIndex, TileJob, TopKOptions, visit_tiles
from kgeval._inputs import RequestedSizes, check_model_inputs
from kgeval.exceptions import OptimisticThresholdWarning, warn_caller
from kgeval.typing import QUERY_COLUMNS, EntityTarget
from kgeval.variants.classification.metrics import _ratio
from kgeval.variants.classification.pair_counts import Confusion, PairTally, TallyCounter
from kgeval.variants.classification.pykeen_formulas import pykeen_metrics

__all__ = ["AllPairsClassification", "AllPairsResults", "classify_all_pairs", "classify_scored_pairs"]

Threshold = Literal["validation", "top_p"]
#: kgeval's metrics of each side, in this order
ALL_PAIRS_METRICS: tuple[str, ...] = (
    "roc_auc", "average_precision", "accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy",
)  # fmt: skip


@dataclass(frozen=True)
class AllPairsClassification:
    """The all-pairs classification of one side ("head", "tail") or of both together: the exact ROC-AUC and average
    precision of every pair's score, and the confusion counts at ``threshold`` (a pair called true at score >= it;
    NaN for PyKEEN's top-P rule, which calls the P highest pairs true)."""

    tally: PairTally
    threshold: float
    confusion: Confusion
    excluded: int  #: pairs left out of both classes (``exclude``)

    @property
    def num_pairs(self) -> int:
        """Pairs in either class."""
        return self.tally.num_pairs

    def metrics(self) -> dict[str, float]:
        """kgeval's metrics (the names mean what they say): roc_auc, average_precision, and accuracy, precision,
        recall, f1, mcc, balanced_accuracy at the threshold; NaN where a denominator is zero."""
        c = self.confusion
        tp, fp, fn, tn = c.tp, c.fp, c.fn, c.tn
        recall, specificity = _ratio(tp, tp + fn), _ratio(tn, tn + fp)
        margins = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)  # Python ints: exact
        return {
            "roc_auc": self.tally.roc_auc(),
            "average_precision": self.tally.average_precision(),
            "accuracy": _ratio(tp + tn, c.total),
            "precision": _ratio(tp, tp + fp),
            "recall": recall,
            "f1": _ratio(2 * tp, 2 * tp + fp + fn),
            "mcc": (tp * tn - fp * fn) / (margins**0.5) if margins else float("nan"),
            "balanced_accuracy": (recall + specificity) / 2,
        }

    def pykeen_metrics(self) -> dict[str, float]:
        """PyKEEN's 22 metrics as its code computes them (quirks reproduced: ``PYKEEN_QUIRKS``)."""
        return pykeen_metrics(self.confusion, self.tally.roc_auc(), self.tally.average_precision(), self.num_pairs)


@dataclass(frozen=True)
class AllPairsResults:
    """:func:`classify_all_pairs`'s results: an :class:`AllPairsClassification` per side and for "both"."""

    sides: dict[str, AllPairsClassification]
    threshold_rule: str  #: "validation (accuracy)", "validation (f1)", "top_p" or "given"
    validation: dict[str, AllPairsClassification] = field(default_factory=dict)  #: the fit's pairs, if any

    def get_metric(self, key: str) -> float:
        """One metric by ``"[side.]metric"`` (side "both" by default): kgeval's names, or PyKEEN's with a
        ``pykeen.`` prefix (``"tail.pykeen.accuracy"``). KeyError naming the valid keys."""
        parts = key.split(".")
        side = parts[0] if parts[0] in self.sides else "both"
        rest = parts[1:] if parts[0] in self.sides else parts
        if side in self.sides and len(rest) == 1 and rest[0] in ALL_PAIRS_METRICS:
            return self.sides[side].metrics()[rest[0]]
        if side in self.sides and len(rest) == 2 and rest[0] == "pykeen":
            values = self.sides[side].pykeen_metrics()
            if rest[1] in values:
                return values[rest[1]]
        raise KeyError(f"unknown all-pairs classification key {key!r}: '[side.]metric' with side in "
                       f"{sorted(self.sides)} and metric in {list(ALL_PAIRS_METRICS)} or "
                       "'pykeen.<PyKEEN's key>'")  # fmt: skip

    #: what :func:`kgeval.integrations.trackers.log_results` logs by default
    headline_keys: tuple[str, ...] = field(
        default=("both.roc_auc", "both.average_precision", "both.accuracy", "both.f1", "head.roc_auc",
                 "tail.roc_auc"), init=False, repr=False)  # fmt: skip

    def to_flat_dict(self) -> dict[str, float]:
        """kgeval's metrics by flat key ``<side>.<metric>`` (what trackers log)."""
        return {f"{side}.{name}": value for side, result in self.sides.items()
                for name, value in result.metrics().items()}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: per side its metrics, counts, threshold and PyKEEN's 22 numbers."""
        return {
            "threshold_rule": self.threshold_rule,
            "sides": {side: _side_dict(result) for side, result in self.sides.items()},
        }

    def to_df(self) -> pd.DataFrame:
        """One row per (side, metric) of kgeval's metrics."""
        rows = [(side, name, value) for side, result in self.sides.items() for name, value in result.metrics().items()]
        return pd.DataFrame(rows, columns=["Side", "Metric", "Value"])


def classify_all_pairs(
    model: Any,
    triples: torch.Tensor,
    *,
    known: torch.Tensor | Sequence[torch.Tensor] | None = None,
    exclude: torch.Tensor | Sequence[torch.Tensor] | None = None,
    validation: torch.Tensor | None = None,
    threshold: Threshold | float | None = None,
    objective: Literal["accuracy", "f1"] = "accuracy",
    targets: Sequence[EntityTarget] = ("head", "tail"),
    num_entities: int | None = None,
    batch_size: int | None = None,
    slice_size: int | None = None,
    memory_budget: int | None = None,
    fast_path: bool = False,
    check_fast_path: bool = True,
) -> AllPairsResults:
    """PyKEEN's classification protocol, exact: every (query, entity) pair of the distinct queries of ``triples``
    (per side) is an instance, positive when it is one of ``triples`` or ``known``.

    Parameters
    ----------
    model
        Any model kgeval evaluates (its ``score_h`` / ``score_t``, fast paths verified as for ranking).
    triples : LongTensor of shape (n, 3)
        The evaluated triples: their queries ((r, t) for heads, (h, r) for tails) are the instances' rows.
    known : LongTensor (m, 3) or a sequence of them, optional
        Other true triples, positive too (PyKEEN's ``additional_filter_triples``: training and validation).
    exclude : LongTensor (m, 3) or a sequence of them, optional
        Triples whose pairs count in neither class (e.g. the training triples, which PyKEEN counts as positives).
    validation : LongTensor (v, 3), optional
        Triples whose pairs (the same ``known`` / ``exclude``) fit the threshold: the lowest score maximising
        ``objective`` over every validation pair of both sides, applied to every side.
    threshold : {"validation", "top_p"} or float, optional
        How pairs are called true: fitted on ``validation`` (the default when it is given), PyKEEN's top-P rule (the
        P highest pairs of the evaluated side; the default otherwise, with an :class:`OptimisticThresholdWarning`
        unless asked for by name), or a given score (true at score >= it).
    targets : sequence of {"head", "tail"}
        The sides; "both" pools them.
    batch_size, slice_size, memory_budget, check_fast_path
        As for :class:`kgeval.RankBasedEvaluator`.
    fast_path : bool, default=False
        Score through the model's query / candidate form (a matrix multiply) instead of its own ``score_t`` /
        ``score_h``. Off by default: pairs of *different* queries and sides are compared here, so the model's own
        bits matter -- a matrix multiply rounds differently and splits exact ties across queries (DistMult scores
        (h, r, t) as its head query scores it; on Nations, d = 16, the fast path moved the pooled average precision
        by 1.2e-4). Turn it on for speed where such ties do not matter.

    Returns
    -------
    AllPairsResults
        Per side and "both": exact ROC-AUC (ties count one half) and average precision (sklearn's step rule),
        the confusion counts at the threshold, kgeval's metrics and PyKEEN's 22.

    Raises
    ------
    ValueError
        For bad triples or ids, a side without a positive or a negative pair, an unknown threshold rule, or
        ``threshold="validation"`` without validation triples.
    """
    rule, fixed = _threshold_rule(threshold, validation, objective)
    checked = check_model_inputs(model, tuple(_checks.check_targets(targets, ("head", "tail"))), num_entities)
    resolved, num_entities_, num_relations = checked.model, checked.num_entities, checked.num_relations
    device = resolved.device
    sides: tuple[EntityTarget, ...] = tuple(_checks.check_targets(targets, ("head", "tail")))  # type: ignore[arg-type]
    triples = _checks.check_triples(triples, "triples", num_entities_, num_relations).to(device)
    known_triples = [t.to(device) for t in _checks.check_filter_triples(known, num_entities_, num_relations)]
    excluded = [t.to(device) for t in _checks.check_filter_triples(exclude, num_entities_, num_relations)]
    sizes = RequestedSizes(_checks.check_positive_int(batch_size, "batch_size", allow_none=True),
                           _checks.check_positive_int(slice_size, "slice_size", allow_none=True),
                           _checks.check_positive_int(memory_budget, "memory_budget", allow_none=True))  # fmt: skip
    options = TopKOptions(sizes, bool(fast_path), bool(check_fast_path))
    run = _Run(resolved, num_entities_, options, known_triples, excluded, sides)
    fitted: dict[str, AllPairsClassification] = {}
    if rule.startswith("validation"):
        assert validation is not None
        validation = _checks.check_triples(validation, "validation", num_entities_, num_relations).to(device)
        tallies, counts = run.tallies(validation, ())
        fixed = tallies["both"].best_threshold(objective)
        fitted = {side: _classified(tally, fixed, counts[side]) for side, tally in tallies.items()}
    tallies, counts = run.tallies(triples, () if fixed is None else (fixed,))
    results = {side: _classified(tally, fixed, counts[side]) for side, tally in tallies.items()}
    return AllPairsResults(results, rule, fitted)


def classify_scored_pairs(
    pairs: Mapping[str, Sequence[tuple[torch.Tensor, torch.Tensor]]], threshold: float | Literal["top_p"] = "top_p"
) -> AllPairsResults:
    """The all-pairs classification of pairs scored already: per side ("head", "tail"), blocks of (scores, positive)
    -- a FloatTensor and a bool tensor of one shape -- as PyKEEN's evaluation loops hand them over; "both" pools the
    sides. Exact as :func:`classify_all_pairs` (one pass: the blocks are at hand). ValueError for a NaN score, a
    side with one class only, or mismatched shapes."""
    positives: dict[str, list[torch.Tensor]] = {}
    top = -torch.inf
    for side, blocks in pairs.items():
        for scores, positive in blocks:
            if scores.shape != positive.shape:
                raise ValueError(f"scores {tuple(scores.shape)} and positive {tuple(positive.shape)} differ in shape")
            if bool(torch.isnan(scores).any()):
                raise ValueError(f"a NaN score among the {side} pairs")
            positives.setdefault(side, []).append(scores[positive.bool()])
            if scores.numel():
                top = max(top, float(scores.max()))
    passes = _Passes(() if threshold == "top_p" else (float(threshold),))
    passes.positives, passes.top = positives, torch.tensor(top)
    for side, blocks in pairs.items():
        for scores, positive in blocks:
            counter = passes.counter(side)
            counter.count(scores[positive.bool()], positive=True)
            counter.count(scores[~positive.bool()], positive=False)
    tallies = _checked_tallies({side: counter.tally() for side, counter in passes.counters.items()})
    fixed = None if threshold == "top_p" else float(threshold)
    results = {side: _classified(tally, fixed, 0) for side, tally in tallies.items()}
    return AllPairsResults(results, "top_p" if fixed is None else "given")


@dataclass
class _Run:
    """The fixed parts of one classification: the model, the sizes, the known and excluded triples, the sides."""

    model: Any
    num_entities: int
    options: TopKOptions
    known: list[torch.Tensor]
    excluded: list[torch.Tensor]
    sides: tuple[EntityTarget, ...]

    def tallies(self, triples: torch.Tensor, thresholds: tuple[float, ...]) -> tuple[dict[str, PairTally],
                                                                                      dict[str, int]]:  # fmt: skip
        """(tally per side and "both", excluded pairs per side and "both") of every pair of ``triples``' queries,
        with ``thresholds`` among the marks."""
        positives = FilterIndex(torch.cat([triples, *self.known]))
        excluded = FilterIndex(torch.cat(self.excluded)) if self.excluded else None
        jobs = [TileJob(torch.unique(triples[:, QUERY_COLUMNS[side]], dim=0), side,
                        (positives.sides[side], None if excluded is None else excluded.sides[side]))
                for side in self.sides]  # fmt: skip
        passes = _Passes(thresholds)
        visit_tiles(self.model, jobs, self.num_entities, self.options, [passes.first, passes.second])
        tallies = _checked_tallies({side: counter.tally() for side, counter in passes.counters.items()})
        counts = {side: int(count) for side, count in passes.excluded.items()}
        counts["both"] = sum(counts.values())
        return tallies, counts


class _Passes:
    """The two visitors of one classification: the first keeps each side's positives' scores and the top score,
    the second counts every pair against the marks (the positives' distinct scores, the top score, thresholds)."""

    def __init__(self, thresholds: tuple[float, ...]) -> None:
        self.thresholds = thresholds
        self.positives: dict[str, list[torch.Tensor]] = {}
        self.top: torch.Tensor | None = None
        self.counters: dict[str, TallyCounter] = {}
        self.excluded: dict[str, int] = {}

    def first(self, side: EntityTarget, tile: Any) -> None:
        """Keep the positives' scores and the highest score of the counted pairs."""
        positives, excluded = _scores_of_classes(tile)
        self.positives.setdefault(side, []).append(positives)
        scores = tile.scores
        if excluded.numel():  # the highest of the counted pairs only
            rows, columns = tile.marked[1]
            scores = scores.clone()
            scores[rows, columns] = -torch.inf
        top = scores.max()
        self.top = top if self.top is None else torch.maximum(self.top, top)

    def second(self, side: EntityTarget, tile: Any) -> None:
        """Count the tile's pairs of each class; the excluded ones are counted apart."""
        positives, excluded = _scores_of_classes(tile)
        self.counter(side).count_tile(tile.scores, positives, excluded)
        self.excluded[side] = self.excluded.get(side, 0) + excluded.numel()

    def counter(self, side: str) -> TallyCounter:
        """The side's counter (all made on the first call, once the first pass has seen every side)."""
        if not self.counters:
            self._start()
        return self.counters[side]

    def _start(self) -> None:
        """The marks: every side's positives' distinct scores, the top score, the thresholds."""
        assert self.top is not None
        scores = torch.cat([torch.cat(values) for values in self.positives.values()])
        dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
        extra = torch.tensor([float(self.top), *self.thresholds], dtype=dtype, device=scores.device)
        marks = torch.unique(torch.cat([scores.to(dtype), extra]))
        self.counters = {side: TallyCounter(marks, float(self.top)) for side in self.positives}


def _checked_tallies(tallies: dict[str, PairTally]) -> dict[str, PairTally]:
    """The sides' tallies and "both" (their sum); ValueError for a side with one class only."""
    for side, tally in tallies.items():
        if tally.num_positives == 0 or tally.num_negatives == 0:
            raise ValueError(f"the {side} side has {tally.num_positives} positive and {tally.num_negatives} "
                             "negative pairs: both classes are needed")  # fmt: skip
    first, *rest = tallies.values()
    return {**tallies, "both": sum(rest, first)}


def _scores_of_classes(tile: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(the positive pairs' scores, the excluded pairs' scores) of the tile: its known pairs less the excluded ones,
    and the excluded ones (both 1-D; no tile-sized mask)."""
    scores, width = tile.scores, tile.scores.shape[1]
    (rows, columns), (out_rows, out_columns) = tile.marked
    if out_rows.numel():
        kept = ~torch.isin(rows * width + columns, out_rows * width + out_columns)
        rows, columns = rows[kept], columns[kept]
    return scores[rows, columns], scores[out_rows, out_columns]


def _classified(tally: PairTally, threshold: float | None, excluded: int) -> AllPairsClassification:
    """The side's classification at ``threshold`` (None: PyKEEN's top-P rule)."""
    if threshold is None:
        return AllPairsClassification(tally, float("nan"), tally.top_p_confusion(), excluded)
    return AllPairsClassification(tally, threshold, tally.confusion_at(threshold), excluded)


def _threshold_rule(threshold: Any, validation: Any, objective: str) -> tuple[str, float | None]:
    """(the rule's name, the given threshold or None)."""
    if objective not in ("accuracy", "f1"):
        raise ValueError(f"objective must be 'accuracy' or 'f1', got {objective!r}")
    if threshold is None:
        if validation is not None:
            return f"validation ({objective})", None
        warn_caller("no validation triples: pairs are called true by PyKEEN's top-P rule, P taken from the "
                    "evaluated labels (optimistic; pass validation= to fit the threshold there)",
                    OptimisticThresholdWarning)  # fmt: skip
        return "top_p", None
    if isinstance(threshold, str):
        if threshold == "validation":
            if validation is None:
                raise ValueError("threshold='validation' needs validation triples (validation=...)")
            return f"validation ({objective})", None
        if threshold == "top_p":
            return "top_p", None
        raise ValueError(f"threshold must be 'validation', 'top_p' or a number, got {threshold!r}")
    value = float(threshold)
    if np.isnan(value):
        raise ValueError("threshold must not be NaN")
    return "given", value


def _side_dict(result: AllPairsClassification) -> dict[str, Any]:
    c = result.confusion
    return {
        "num_pairs": result.num_pairs,
        "num_positives": result.tally.num_positives,
        "excluded_pairs": result.excluded,
        "threshold": None if np.isnan(result.threshold) else result.threshold,
        "confusion": {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn, "tied": c.tied},
        "metrics": result.metrics(),
        "pykeen": result.pykeen_metrics(),
    }
