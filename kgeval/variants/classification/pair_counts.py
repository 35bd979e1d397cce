"""Exact classification counts of more pairs than memory holds: every positive's score is kept (sorted, distinct:
the *marks*), every negative is only counted against the marks -- equal to a mark, or in the gap between two -- so
ROC-AUC, average precision and the confusion counts at any mark are exact while the negatives stream past in tiles
(:class:`PairTally`). The all-pairs protocol (:mod:`.all_pairs`) fills the tallies from the engine's score tiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

__all__ = ["Confusion", "PairTally", "TallyCounter"]


@dataclass(frozen=True)
class Confusion:
    """Confusion counts of a binarisation (Python ints); ``tied`` counts the pairs whose class a tie decided."""

    tp: int
    fp: int
    fn: int
    tn: int
    tied: int = 0

    @property
    def total(self) -> int:
        """Every pair."""
        return self.tp + self.fp + self.fn + self.tn


@dataclass
class PairTally:
    """The scores of a group of pairs, counted against sorted distinct ``marks`` (M,).

    ``positives_at[j]`` / ``negatives_at[j]``: pairs of each class scoring exactly ``marks[j]``;
    ``negatives_between[j]``: negatives strictly between ``marks[j - 1]`` and ``marks[j]`` (j = 0: below every mark,
    j = M: above every mark). Integer arrays (int64); a positive's score must be a mark.
    """

    marks: np.ndarray  #: (M,) sorted distinct scores, float64 (every score of the scores' dtype is exact in it)
    positives_at: np.ndarray  #: (M,)
    negatives_at: np.ndarray  #: (M,)
    negatives_between: np.ndarray  #: (M + 1,)
    top_score: float = -np.inf  #: the highest score of any pair (a mark)

    def __add__(self, other: PairTally) -> PairTally:
        """The pairs of both (same marks)."""
        if not np.array_equal(self.marks, other.marks):
            raise ValueError("tallies over different marks cannot be added")
        return PairTally(self.marks, self.positives_at + other.positives_at,
                         self.negatives_at + other.negatives_at, self.negatives_between + other.negatives_between,
                         max(self.top_score, other.top_score))  # fmt: skip

    @property
    def num_positives(self) -> int:
        """P."""
        return int(self.positives_at.sum())

    @property
    def num_negatives(self) -> int:
        """N."""
        return int(self.negatives_at.sum() + self.negatives_between.sum())

    @property
    def num_pairs(self) -> int:
        """P + N."""
        return self.num_positives + self.num_negatives

    # -- exact statistics -------------------------------------------------------------------------------------------

    def negatives_below(self) -> np.ndarray:
        """(M,) negatives scoring strictly below each mark."""
        at_below = np.concatenate([[0], np.cumsum(self.negatives_at)[:-1]])
        return np.cumsum(self.negatives_between[:-1]) + at_below

    def roc_auc(self) -> float:
        """The probability that a random positive outscores a random negative, ties counting one half: sklearn's
        ``roc_auc_score`` (the trapezoids of the ROC curve), computed as an exact fraction. NaN with one class."""
        num_positives, num_negatives = self.num_positives, self.num_negatives
        if num_positives == 0 or num_negatives == 0:
            return float("nan")
        twice = 2 * _dot(self.positives_at, self.negatives_below()) + _dot(self.positives_at, self.negatives_at)
        return float(Fraction(twice, 2 * num_positives * num_negatives))

    def average_precision(self) -> float:
        """sklearn's ``average_precision_score``: the sum over the distinct scores, from the highest, of (the
        recall's increase) x (the precision at that score), a pair predicted true at score >= the threshold.
        NaN without positives."""
        num_positives = self.num_positives
        if num_positives == 0:
            return float("nan")
        tp = np.cumsum(self.positives_at[::-1])[::-1]  # positives at or above each mark
        fp = self.num_negatives - self.negatives_below()
        hit = self.positives_at > 0
        terms = self.positives_at[hit] * (tp[hit] / (tp[hit] + fp[hit]))
        return float(np.sum(terms[::-1]) / num_positives)

    def roc_points(self) -> tuple[np.ndarray, np.ndarray]:
        """(false positive rates, true positive rates) of the exact ROC curve, from (0, 0) to (1, 1): per mark, from
        the highest, the point just above it and the point at it (the negatives of a gap lie on the horizontal
        segment between two marks); float64 arrays of one length."""
        num_positives, num_negatives = self.num_positives, self.num_negatives
        tp_at = np.cumsum(self.positives_at[::-1])[::-1]  # positives at or above each mark
        fp_at = num_negatives - self.negatives_below()
        tp_above = tp_at - self.positives_at
        fp_above = fp_at - self.negatives_at
        order = np.arange(self.marks.shape[0])[::-1]
        fp = np.concatenate([[0], np.stack([fp_above[order], fp_at[order]], axis=1).reshape(-1), [num_negatives]])
        tp = np.concatenate([[0], np.stack([tp_above[order], tp_at[order]], axis=1).reshape(-1), [num_positives]])
        return fp / max(num_negatives, 1), tp / max(num_positives, 1)

    def precision_recall_points(self) -> tuple[np.ndarray, np.ndarray]:
        """(recalls, precisions) at every mark a positive scores, from the highest: the points whose step sum is
        :meth:`average_precision`; float64 arrays of one length."""
        tp = np.cumsum(self.positives_at[::-1])[::-1]
        fp = self.num_negatives - self.negatives_below()
        hit = np.flatnonzero(self.positives_at > 0)[::-1]
        return tp[hit] / max(self.num_positives, 1), tp[hit] / (tp[hit] + fp[hit])

    def confusion_at(self, threshold: float) -> Confusion:
        """The counts when a pair is called true at score >= ``threshold`` (a mark or +-inf)."""
        if threshold == np.inf:
            return Confusion(0, 0, self.num_positives, self.num_negatives)
        position = np.searchsorted(self.marks, threshold)
        if threshold != -np.inf and (position == self.marks.shape[0] or self.marks[position] != threshold):
            raise ValueError(f"the threshold {threshold!r} is not a mark of this tally")
        tp = int(self.positives_at[position:].sum())
        fp = int(self.negatives_at[position:].sum() + self.negatives_between[position + 1 :].sum())
        return Confusion(tp, fp, self.num_positives - tp, self.num_negatives - fp)

    def top_p_confusion(self) -> Confusion:
        """PyKEEN's binarisation (``construct_indicator``): the P highest-scoring pairs called true, P the number of
        positives. Where the P-th score is shared by positives and negatives not all called true, which of them
        NumPy's unstable argsort calls true is not reproducible: the negatives are called true first (the
        pessimistic order) and ``tied`` counts the pairs of that tie."""
        num_positives, num_negatives = self.num_positives, self.num_negatives
        above = int(self.negatives_between[-1])  # pairs scoring above the current mark
        positives_above = 0
        for j in range(self.marks.shape[0] - 1, -1, -1):
            if above >= num_positives:  # the P-th pair is a negative in the gap above marks[j]
                break
            positives, negatives = int(self.positives_at[j]), int(self.negatives_at[j])
            if above + positives + negatives >= num_positives:  # the P-th pair scores marks[j]
                wanted = num_positives - above
                tp = positives_above + max(0, wanted - negatives)
                tied = positives + negatives if positives and negatives and wanted < positives + negatives else 0
                return _from_tp(tp, num_positives, num_positives, num_negatives, tied)
            above += positives + negatives + int(self.negatives_between[j])
            positives_above += positives
        return _from_tp(positives_above, num_positives, num_positives, num_negatives)

    def best_threshold(self, objective: str = "accuracy") -> float:
        """The lowest score maximising ``objective`` ("accuracy" or "f1") over every pair's score, a pair called
        true at score >= the threshold: what ``best_threshold`` gives for the same pairs (only a positive's score or
        the top score can be the lowest maximiser: any other score is beaten by the next positive's above it, and
        above every positive by the top score). Accuracy compared by integer counts, F1 as exact fractions."""
        num_positives, num_negatives = self.num_positives, self.num_negatives
        if num_positives + num_negatives == 0:
            raise ValueError("no pair to fit a threshold on")
        candidate = (self.positives_at > 0) | (self.marks == self.top_score)
        tp = np.cumsum(self.positives_at[::-1])[::-1]
        fp = num_negatives - self.negatives_below()
        if objective == "accuracy":
            correct = np.where(candidate, tp - fp, np.iinfo(np.int64).min)  # tp + (N - fp), less the constant N
            return float(self.marks[int(np.argmax(correct))])
        exact = [(Fraction(2 * int(tp[j]), int(tp[j] + fp[j]) + num_positives), -j) for j in np.flatnonzero(candidate)]
        return float(self.marks[-max(exact)[1]])


def _from_tp(tp: int, predicted: int, num_positives: int, num_negatives: int, tied: int = 0) -> Confusion:
    """Counts of a binarisation calling ``predicted`` pairs true, ``tp`` of them positives."""
    fp = predicted - tp
    return Confusion(tp, fp, num_positives - tp, num_negatives - fp, tied)


class TallyCounter:
    """Counts score tiles into a :class:`PairTally` on the scores' device (no transfer per tile): the marks as a
    sorted tensor, the counts as int64 tensors, read once by :meth:`tally`.

    Each score gets one code, 2 j + 1 when it equals mark j and 2 j when it lies in the gap below mark j (j = M: above
    every mark), so one ``bincount`` per tile counts every pair; the few positives (and excluded pairs) are then
    moved out of the negatives' counts, so the tile is never copied by class."""

    def __init__(self, marks: torch.Tensor, top_score: float) -> None:
        self.marks = marks  #: (M,) sorted distinct, float32 or float64
        size = 2 * marks.shape[0] + 1
        self._negatives = torch.zeros(size, dtype=torch.int64, device=marks.device)
        self._positives = torch.zeros(size, dtype=torch.int64, device=marks.device)
        self.top_score = top_score

    def count(self, scores: torch.Tensor, positive: bool) -> None:
        """Add pairs of one class: ``scores`` (any shape), each counted at its mark or in its gap."""
        counts = self._counts(scores)
        if positive:
            self._positives += counts
        else:
            self._negatives += counts

    def count_tile(self, scores: torch.Tensor, positives: torch.Tensor, excluded: torch.Tensor) -> None:
        """Add a whole tile: every score a negative, but ``positives`` (the positive pairs' scores) and
        ``excluded`` (the scores of pairs in neither class; disjoint from the positives)."""
        positive_counts = self._counts(positives)
        self._negatives += self._counts(scores) - positive_counts - self._counts(excluded)
        self._positives += positive_counts

    def _counts(self, scores: torch.Tensor) -> torch.Tensor:
        """(2M + 1,) counts of the scores' codes."""
        values = scores.reshape(-1).to(self.marks.dtype)
        size = self.marks.shape[0]
        index = torch.searchsorted(self.marks, values)  # the first mark >= the score
        equal = (self.marks[index.clamp(max=size - 1)] == values) & (index < size)
        return torch.bincount(2 * index + equal, minlength=2 * size + 1)

    def tally(self) -> PairTally:
        """The counts so far (one read of the device); ValueError if a positive scored no mark."""
        positives, negatives = self._positives.cpu().numpy(), self._negatives.cpu().numpy()
        if positives[0::2].any():
            raise ValueError("a positive scored differently from the first pass: the model's scores changed")
        marks = self.marks.to("cpu", torch.float64).numpy()
        return PairTally(marks, positives[1::2], negatives[1::2], negatives[0::2], top_score=self.top_score)


def _dot(first: np.ndarray, second: np.ndarray) -> int:
    """The exact integer dot product (Python ints: no int64 overflow)."""
    return sum(int(a) * int(b) for a, b in zip(first.tolist(), second.tolist(), strict=True) if a)
