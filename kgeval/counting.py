"""Ranks by counting: the rank rule of kgeval, stated once.

For one ranking task with true score s* and candidate scores s_e (METRICS.md, Rank types)::

    optimistic  = 1 + #{candidates e != true : s_e >  s*}
    pessimistic = 1 + #{candidates e != true : s_e >= s*}
    realistic   = (optimistic + pessimistic) / 2
    num_candidates C = 1 + #{candidates e != true}

Candidates are the candidate set (all entities or the whitelist) minus the filtered ones; the true answer is
never counted against itself and always counts in C. Scores compare exactly; +inf / -inf are ordinary values;
a NaN anywhere in a task's scores is flagged (the evaluator raises after the loop, naming the task).

How it is computed. Each score tile is turned into comparison codes sign(s_e - s*) in {1, 0, -1} (NaN for NaN),
right after the tile is produced, while it is in cache. Per task, the sum of the codes is #above - #below and the
sum of their absolute values #above + #below, which gives #above, and #equal = C - 1 - #above - #below; a NaN
makes the first sum NaN, which is the NaN flag. The filtered candidates' codes are gathered from the same tiles
(kgeval.pairs) and subtracted, so raw and filtered counts come from one pass. The tile holding the batch's true
answers is scored first (every task of a batch has its true answer in the same candidate slice), so the true
score is read from the same computation as its candidates and exact ties stay exact.

Two kernels make the codes: ``"sign"`` (two passes: s - s*, then sign) and ``"compare"`` ((s > s*) - (s < s*)
plus a NaN check). ``"sign"`` is faster on CPU but wrong for an infinite true score (inf - inf is NaN), so a
block whose true scores are infinite falls back to ``"compare"`` -- a host check, hence CPU only; other devices
use ``"compare"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kgeval.pairs import PairTiles
from kgeval.scoring import CandidateScorer, Workspace

KERNELS: tuple[str, ...] = ("sign", "compare")


def comparison_codes(scores: torch.Tensor, true_scores: torch.Tensor) -> torch.Tensor:
    """The comparison code of every score against its row's true score (the reference form of the kernels).

    Parameters
    ----------
    scores : FloatTensor of shape (B, S)
    true_scores : FloatTensor of shape (B,)

    Returns
    -------
    FloatTensor of shape (B, S)
        1 where s > s*, 0 where s == s*, -1 where s < s* (+/-inf compare as ordinary values); NaN where s or
        s* is NaN.

    Examples
    --------
    >>> comparison_codes(torch.tensor([[3.0, 1.0, 2.0, float("inf")]]), torch.tensor([2.0]))
    tensor([[ 1., -1.,  0.,  1.]])
    """
    true_column = true_scores.unsqueeze(1)
    codes = (scores > true_column).to(scores.dtype) - (scores < true_column).to(scores.dtype)
    return torch.where(torch.isnan(scores) | torch.isnan(true_column), torch.nan, codes)


@dataclass
class BatchCounts:
    """Counts of one batch of tasks (all tensors of shape (B,), int64 unless stated)."""

    greater: torch.Tensor  #: raw #{e != true : s_e > s*}
    equal: torch.Tensor  #: raw #{e != true : s_e == s*}
    filtered_greater: torch.Tensor  #: of the above, how many are filtered candidates
    filtered_equal: torch.Tensor
    num_filtered: torch.Tensor  #: filtered candidates other than the true answer
    has_nan: torch.Tensor  #: bool: a NaN among the task's scores

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


@dataclass(frozen=True)
class RowBlock:
    """Task rows [row_start, row_stop) of a batch, scored from distinct-query rows [query_start, query_stop)."""

    row_start: int
    row_stop: int
    query_start: int
    query_stop: int
    #: LongTensor (rows,): the query row (minus query_start) of each task row; None when it is the identity
    query_rows: torch.Tensor | None = None


def slice_bounds(num_candidates: int, slice_size: int) -> list[tuple[int, int]]:
    """Half-open [start, stop) position ranges covering the candidates in slices of ``slice_size``."""
    return [(start, min(start + slice_size, num_candidates)) for start in range(0, num_candidates, slice_size)]


def count_batch(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    true_positions: torch.Tensor,
    true_slice: int,
    bounds: Sequence[tuple[int, int]],
    blocks: Sequence[RowBlock],
    pairs: PairTiles | None,
    num_filtered: torch.Tensor | None,
    kernel: str = "sign",
    workspace: Workspace | None = None,
) -> BatchCounts:
    """Count one batch over every (candidate slice, row block) tile, the slice holding the true answers first.

    Parameters
    ----------
    scorer : CandidateScorer
    queries : LongTensor of shape (U, 2)
        The distinct queries of the batch, as passed to score_t / score_h.
    true_positions : LongTensor of shape (B,)
        Candidate position of each task's true answer; all inside ``bounds[true_slice]``.
    true_slice : int
        Index into ``bounds`` of the slice holding every true answer of the batch.
    bounds : sequence of (start, stop)
        The candidate slices, covering 0 .. num_candidates - 1.
    blocks : sequence of RowBlock
        The task rows in tiles, covering 0 .. B - 1 in order.
    pairs : PairTiles, optional
        The filtered pairs (None: unfiltered).
    num_filtered : LongTensor of shape (B,), optional
        Filtered candidates other than the true answer (with ``pairs``).
    kernel : {"sign", "compare"}, default="sign"
    workspace : Workspace, optional
        Scratch memory reused across batches.
    """
    workspace = workspace or Workspace()
    size = true_positions.numel()
    device = true_positions.device
    sums = torch.zeros(2, size, dtype=torch.float64, device=device)
    true_scores: torch.Tensor | None = None
    scorer.begin(queries)
    for j in [true_slice, *(j for j in range(len(bounds)) if j != true_slice)]:
        start, stop = bounds[j]
        scorer.start_slice(start, stop)
        for index, block in enumerate(blocks):
            rows = slice(block.row_start, block.row_stop)
            tile, owned = scorer.block(block.query_start, block.query_stop, block.query_rows, workspace)
            if j == true_slice:
                if true_scores is None:
                    true_scores = torch.empty(size, dtype=tile.dtype, device=device)
                true_scores[rows] = tile.gather(1, (true_positions[rows] - start).unsqueeze(1)).squeeze(1)
            codes, nan_rows = _codes(tile, true_scores[rows], owned, kernel, workspace)  # type: ignore[index]
            if pairs is not None:
                pairs.gather_(codes, index, j)
            above_minus_below = codes.sum(dim=1, dtype=_sum_dtype(codes))
            if nan_rows is not None:
                above_minus_below = torch.where(nan_rows, torch.nan, above_minus_below)
            sums[0, rows] += above_minus_below
            sums[1, rows] += codes.abs_().sum(dim=1, dtype=_sum_dtype(codes))
    return _batch_counts(sums, pairs, num_filtered, scorer.num_candidates)


def _sum_dtype(codes: torch.Tensor) -> torch.dtype:
    """Sums of codes are exact integers in float32 (|sum| <= tile width < 2**24) and in float64."""
    return torch.float64 if codes.dtype == torch.float64 else torch.float32


def _codes(
    tile: torch.Tensor, true_scores: torch.Tensor, owned: bool, kernel: str, workspace: Workspace
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The comparison codes of a tile (see :func:`comparison_codes`) and, for "compare", its NaN rows."""
    true_column = true_scores.unsqueeze(1)
    if kernel == "sign" and not bool(torch.isinf(true_scores).any()):
        codes = tile.sub_(true_column) if owned else torch.sub(tile, true_column, out=workspace.tile(*tile.shape, tile))
        return codes.sign_(), None
    nan_rows = torch.isnan(tile).any(dim=1) | torch.isnan(true_scores)
    below = tile < true_column
    codes = tile if owned else workspace.tile(*tile.shape, tile)
    torch.gt(tile, true_column, out=codes)
    return codes.sub_(below.to(codes.dtype)), nan_rows


def _batch_counts(
    sums: torch.Tensor, pairs: PairTiles | None, num_filtered: torch.Tensor | None, num_candidates: int
) -> BatchCounts:
    """Integer counts from the code sums: above = (sum + |sum|) / 2, below = (|sum| - sum) / 2."""
    has_nan = torch.isnan(sums[0])
    sums = torch.nan_to_num(sums, nan=0.0)
    greater = ((sums[0] + sums[1]) / 2).to(torch.int64)
    equal = num_candidates - 1 - sums[1].to(torch.int64)
    zeros = torch.zeros_like(greater)
    if pairs is None or num_filtered is None:
        return BatchCounts(greater, equal, zeros, zeros.clone(), zeros.clone(), has_nan)
    filtered_sum, filtered_abs = (torch.nan_to_num(part).to(torch.int64) for part in pairs.sums(greater.numel()))
    filtered_greater = (filtered_sum + filtered_abs) // 2
    filtered_equal = num_filtered - filtered_abs
    return BatchCounts(greater, equal, filtered_greater, filtered_equal, num_filtered, has_nan)
