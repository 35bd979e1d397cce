"""Ranks by counting: the rank rule of kgeval, stated once.

For one ranking task with true score s* and candidate scores s_e (METRICS.md, Rank types)::

    optimistic  = 1 + #{candidates e != true : s_e >  s*}
    pessimistic = 1 + #{candidates e != true : s_e >= s*}
    realistic   = (optimistic + pessimistic) / 2
    num_candidates C = 1 + #{candidates e != true}

Candidates are the candidate set (all entities or the whitelist) minus the filtered ones; the true answer is
never counted against itself and always counts in C. Scores compare exactly; +inf / -inf are ordinary values;
a NaN among a task's candidate scores (the true one included; filtered entities are no candidates) is
flagged, and the evaluator raises after the loop, naming the task.

Counting works slice by slice over candidate positions: the slice holding the batch's true answers is scored
first (every task of a batch has its true answer in the same slice), so each later slice is compared as soon as
it is produced and the (B, num_candidates) matrix never has to exist. Filtered candidates are handled by
subtracting their contributions, gathered at the few (row, position) pairs of the filter index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kgeval.scoring import CandidateScorer


def count_above(scores: torch.Tensor, true_scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Count, per row, the scores above and equal to the row's true score.

    Parameters
    ----------
    scores : FloatTensor of shape (B, S)
    true_scores : FloatTensor of shape (B,)

    Returns
    -------
    greater, equal : LongTensor of shape (B,)
        #{s > s*} and #{s == s*} (NaN compares unequal to everything).

    Examples
    --------
    >>> count_above(torch.tensor([[3.0, 1.0, 2.0, 2.0]]), torch.tensor([2.0]))
    (tensor([1]), tensor([2]))
    """
    true_column = true_scores.unsqueeze(1)
    return (scores > true_column).sum(dim=1), (scores == true_column).sum(dim=1)


@dataclass
class BatchCounts:
    """Counts of one batch of tasks (all tensors of shape (B,), int64 unless stated)."""

    greater: torch.Tensor  #: raw #{e != true : s_e > s*}
    equal: torch.Tensor  #: raw #{e != true : s_e == s*}
    filtered_greater: torch.Tensor  #: of the above, how many are filtered candidates
    filtered_equal: torch.Tensor
    num_filtered: torch.Tensor  #: filtered candidates other than the true answer
    nan: torch.Tensor  #: raw #{candidates with a NaN score}, the true answer included
    filtered_nan: torch.Tensor  #: of the above, how many are filtered candidates

    def has_nan(self, filtered: bool) -> torch.Tensor:
        """Bool (B,): a NaN among the scores of the task's candidates (filtered ones excluded when filtering)."""
        return (self.nan - self.filtered_nan > 0) if filtered else self.nan > 0

    def ranks(self, num_candidates: int, filtered: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(optimistic, pessimistic, num_candidates) per task, filtered or raw, by the rule of this module."""
        greater, equal = self.greater, self.equal
        count = torch.full_like(greater, num_candidates)
        if filtered:
            greater = greater - self.filtered_greater
            equal = equal - self.filtered_equal
            count = count - self.num_filtered
        optimistic = 1 + greater
        return optimistic, optimistic + equal, count


def slice_bounds(num_candidates: int, slice_size: int) -> list[tuple[int, int]]:
    """Half-open [start, stop) position ranges covering the candidates in slices of ``slice_size``."""
    return [(start, min(start + slice_size, num_candidates)) for start in range(0, num_candidates, slice_size)]


def count_batch(
    scorer: CandidateScorer,
    batch: torch.Tensor,
    true_positions: torch.Tensor,
    true_slice: int,
    bounds: Sequence[tuple[int, int]],
    excluded_rows: torch.Tensor,
    excluded_positions: torch.Tensor,
) -> BatchCounts:
    """Count one batch over every candidate slice, the slice holding the true answers first.

    Parameters
    ----------
    scorer : CandidateScorer
        Produces the (B, S) scores of a slice of candidate positions.
    batch : LongTensor of shape (B, 2)
        The queries, as passed to score_t / score_h.
    true_positions : LongTensor of shape (B,)
        Candidate position of each task's true answer; all inside ``bounds[true_slice]``.
    true_slice : int
        Index into ``bounds`` of the slice holding every true answer of the batch.
    bounds : sequence of (start, stop)
        The candidate slices, covering 0 .. num_candidates - 1.
    excluded_rows, excluded_positions : LongTensor of shape (nnz,)
        Filtered (row, candidate position) pairs; positions < 0 (not a candidate) and the row's true answer
        itself are ignored.
    """
    scorer.begin(batch)
    size = batch.shape[0]
    zeros = torch.zeros(size, dtype=torch.int64, device=batch.device)
    greater, equal, filtered_greater, filtered_equal = zeros.clone(), zeros.clone(), zeros.clone(), zeros.clone()
    nan, filtered_nan = zeros.clone(), zeros.clone()
    valid = (excluded_positions >= 0) & (excluded_positions != true_positions[excluded_rows])
    num_filtered = zeros.clone().index_add_(0, excluded_rows, valid.long())

    start, stop = bounds[true_slice]
    first = scorer.scores(start, stop)
    true_scores = first.gather(1, (true_positions - start).unsqueeze(1)).squeeze(1)
    true_of_pair = true_scores[excluded_rows]
    order = [true_slice, *(j for j in range(len(bounds)) if j != true_slice)]
    for j in order:
        start, stop = bounds[j]
        scores = first if j == true_slice else scorer.scores(start, stop)
        slice_greater, slice_equal = count_above(scores, true_scores)
        greater += slice_greater
        equal += slice_equal
        nan += torch.isnan(scores).sum(dim=1)
        in_slice = valid & (excluded_positions >= start) & (excluded_positions < stop)
        local = (excluded_positions - start).clamp(0, stop - start - 1)
        pair_scores = scores[excluded_rows, local]
        filtered_greater.index_add_(0, excluded_rows, ((pair_scores > true_of_pair) & in_slice).long())
        filtered_equal.index_add_(0, excluded_rows, ((pair_scores == true_of_pair) & in_slice).long())
        filtered_nan.index_add_(0, excluded_rows, (torch.isnan(pair_scores) & in_slice).long())
    equal -= 1  # the true answer equals itself (a NaN true score is flagged instead)
    return BatchCounts(greater, equal, filtered_greater, filtered_equal, num_filtered, nan, filtered_nan)
