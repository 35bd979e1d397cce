"""Ranks by counting: the rank rule of kgeval, stated once.

For one ranking task with true score s* and candidate scores s_e (METRICS.md, Rank types)::

    optimistic  = 1 + #{candidates e != true : s_e >  s*}
    pessimistic = 1 + #{candidates e != true : s_e >= s*}
    realistic   = (optimistic + pessimistic) / 2
    num_candidates C = 1 + #{candidates e != true}

Candidates are the candidate set (all entities or the whitelist) minus the filtered ones; the true answer is
never counted against itself and always counts in C. Scores compare exactly; +inf / -inf are ordinary values;
a NaN anywhere in a task's scores is flagged (the evaluator raises after the loop, naming the task).

How it is computed. Each score tile is turned into comparison codes sign(s_e - s*) in {1, 0, -1} right after the
tile is produced, while it is in cache. Per task, the sum of the codes is #above - #below and the sum of their
absolute values #above + #below, which gives #above, and #equal = C - 1 - #above - #below. The filtered
candidates' codes are set to 0 in the tile before the sums (kgeval.pairs), after being read when raw counts are
wanted too, so raw and filtered counts come from one pass. A NaN score is flagged before that, so a NaN at a
filtered entity is an error as well. The tile holding the batch's true answers is scored first (every task of a
batch has its true answer in the same candidate slice; otherwise a first pass reads each true score from its
tile), so the true score comes from the same computation as its candidates and exact ties stay exact.

Two kernels make the codes: ``"sign"`` (two passes: s - s*, then sign) and ``"compare"`` ((s > s*) - (s < s*)
plus a NaN check). ``"sign"`` is faster on CPU but wrong for an infinite true score (inf - inf is NaN), so a
block whose true scores are infinite falls back to ``"compare"`` -- a host check, hence CPU only; other devices
use ``"compare"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

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
    """Counts of a batch of tasks against their candidates (tensors of shape (B,), int64 unless stated)."""

    greater: torch.Tensor  #: #{candidates e != true : s_e > s*}
    equal: torch.Tensor  #: #{candidates e != true : s_e == s*}
    num_candidates: torch.Tensor  #: C = 1 + #{candidates e != true}
    has_nan: torch.Tensor  #: bool: a NaN among the task's scores

    def ranks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(optimistic, pessimistic, num_candidates) per task, by the rule of this module."""
        optimistic = 1 + self.greater
        return optimistic, optimistic + self.equal, self.num_candidates

    @classmethod
    def from_sums(cls, sums: torch.Tensor, num_candidates: torch.Tensor) -> BatchCounts:
        """Counts from the per-task sums of codes and of |codes| (rows of ``sums``, shape (2, B))."""
        has_nan = torch.isnan(sums[0])
        total, absolute = torch.nan_to_num(sums, nan=0.0).to(torch.int64)
        return cls((total + absolute) // 2, num_candidates - 1 - absolute, num_candidates, has_nan)

    @classmethod
    def cat(cls, parts: Sequence[BatchCounts], order: torch.Tensor) -> BatchCounts:
        """The parts concatenated, then indexed by ``order``."""
        return cls(*(torch.cat([getattr(part, f.name) for part in parts])[order] for f in fields(cls)))


@dataclass(frozen=True)
class RowBlock:
    """Task rows [row_start, row_stop) of a batch, scored from distinct-query rows [query_start, query_stop)."""

    row_start: int
    row_stop: int
    query_start: int
    query_stop: int
    #: LongTensor (rows,): the query row (minus query_start) of each task row; None when it is the identity
    query_rows: torch.Tensor | None = None
    #: the slices holding the true answers of these rows, when a batch mixes slices (else empty)
    true_slices: tuple[int, ...] = ()


def slice_bounds(num_candidates: int, slice_size: int) -> list[tuple[int, int]]:
    """Half-open [start, stop) position ranges covering the candidates in slices of ``slice_size``."""
    return [(start, min(start + slice_size, num_candidates)) for start in range(0, num_candidates, slice_size)]


def count_batch(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    true_positions: torch.Tensor,
    true_slice: int | None,
    bounds: Sequence[tuple[int, int]],
    blocks: Sequence[RowBlock],
    pairs: PairTiles | None = None,
    num_filtered: torch.Tensor | None = None,
    raw_too: bool = False,
    kernel: str = "sign",
    workspace: Workspace | None = None,
) -> tuple[BatchCounts, BatchCounts | None]:
    """Count one batch over every (candidate slice, row block) tile, the slice holding the true answers first.

    Parameters
    ----------
    scorer : CandidateScorer
    queries : LongTensor of shape (U, 2)
        The distinct queries of the batch, as passed to score_t / score_h.
    true_positions : LongTensor of shape (B,)
        Candidate position of each task's true answer; all inside ``bounds[true_slice]``.
    true_slice : int or None
        Index into ``bounds`` of the slice holding every true answer of the batch. None: the answers lie in
        several slices (``RowBlock.true_slices``) and a first pass reads the true scores from their tiles.
    bounds : sequence of (start, stop)
        The candidate slices, covering 0 .. num_candidates - 1.
    blocks : sequence of RowBlock
        The task rows in tiles, covering 0 .. B - 1 in order.
    pairs : PairTiles, optional
        The filtered pairs; None ranks against every candidate (raw).
    num_filtered : LongTensor of shape (B,), optional
        Filtered candidates other than the true answer (with ``pairs``).
    raw_too : bool, default=False
        With ``pairs``, also count against every candidate (the filtered codes are read before they are zeroed).
    kernel : {"sign", "compare"}, default="sign"
    workspace : Workspace, optional
        Scratch memory reused across batches.

    Returns
    -------
    counts : BatchCounts
        Filtered counts with ``pairs``, raw counts without.
    raw : BatchCounts or None
        Raw counts when ``pairs`` and ``raw_too``.
    """
    workspace = workspace or Workspace()
    size = true_positions.numel()
    sums = torch.zeros(2, size, dtype=torch.float64, device=true_positions.device)
    true_scores: torch.Tensor | None = None
    scorer.begin(queries)
    if true_slice is None:
        true_scores = _true_scores(scorer, true_positions, bounds, blocks, workspace)
    for j in _slice_order(true_slice, len(bounds)):
        start, stop = bounds[j]
        scorer.start_slice(start, stop)
        for index, block in enumerate(blocks):
            rows = slice(block.row_start, block.row_stop)
            tile, owned = scorer.block(block.query_start, block.query_stop, block.query_rows, workspace)
            if j == true_slice:
                if true_scores is None:
                    true_scores = torch.empty(size, dtype=tile.dtype, device=tile.device)
                true_scores[rows] = tile.gather(1, (true_positions[rows] - start).unsqueeze(1)).squeeze(1)
            true_column = true_scores[rows]  # type: ignore[index]
            codes, nan_rows = _codes(tile, true_column, owned, kernel, workspace, scorer.nan_free)
            if pairs is not None:
                if raw_too:
                    pairs.gather_(codes, index, j)
                pairs.zero_(codes, index, j)
            total = codes.sum(dim=1, dtype=_sum_dtype(codes))
            sums[0, rows] += total if nan_rows is None else torch.where(nan_rows, torch.nan, total)
            sums[1, rows] += codes.abs_().sum(dim=1, dtype=_sum_dtype(codes))
    everything = torch.full((size,), scorer.num_candidates, dtype=torch.int64, device=sums.device)
    if pairs is None or num_filtered is None:
        return BatchCounts.from_sums(sums, everything), None
    counts = BatchCounts.from_sums(sums, everything - num_filtered)
    if not raw_too:
        return counts, None
    return counts, BatchCounts.from_sums(sums + torch.stack(pairs.sums(size)), everything)


def _slice_order(true_slice: int | None, num_slices: int) -> list[int]:
    """The slices in counting order: the one holding the true answers first (when there is one)."""
    if true_slice is None:
        return list(range(num_slices))
    return [true_slice, *(j for j in range(num_slices) if j != true_slice)]


def _true_scores(
    scorer: CandidateScorer,
    true_positions: torch.Tensor,
    bounds: Sequence[tuple[int, int]],
    blocks: Sequence[RowBlock],
    workspace: Workspace,
) -> torch.Tensor:
    """The true scores of a batch whose answers lie in several slices, each read from the tile (of the shape
    counting uses) that holds it."""
    width = bounds[0][1] - bounds[0][0]
    true_slice_of_row = true_positions // width
    true_scores: torch.Tensor | None = None
    for j in sorted({j for block in blocks for j in block.true_slices}):
        start, stop = bounds[j]
        scorer.start_slice(start, stop)
        for block in blocks:
            if j not in block.true_slices:
                continue
            rows = slice(block.row_start, block.row_stop)
            tile, _owned = scorer.block(block.query_start, block.query_stop, block.query_rows, workspace)
            if true_scores is None:
                true_scores = torch.empty(true_positions.numel(), dtype=tile.dtype, device=tile.device)
            columns = (true_positions[rows] - start).clamp(0, stop - start - 1).unsqueeze(1)
            found = tile.gather(1, columns).squeeze(1)
            true_scores[rows] = torch.where(true_slice_of_row[rows] == j, found, true_scores[rows])
    return true_scores  # type: ignore[return-value]


def _sum_dtype(codes: torch.Tensor) -> torch.dtype:
    """Sums of codes are exact integers in float32 (|sum| <= tile width < 2**24) and in float64."""
    return torch.float64 if codes.dtype == torch.float64 else torch.float32


def _codes(
    tile: torch.Tensor, true_scores: torch.Tensor, owned: bool, kernel: str, workspace: Workspace, nan_free: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The comparison codes of a tile (see :func:`comparison_codes`) and its NaN rows (None: no NaN).

    ``torch.sign`` maps NaN to 0, so the "sign" kernel finds NaN rows through the row sums of s - s* (NaN when
    a NaN is present -- or +inf and -inf both are, which an exact check then rules out), unless the scorer
    knows its scores are NaN-free. Its host checks are free on CPU, the only device it runs on.
    """
    true_column = true_scores.unsqueeze(1)
    if kernel == "sign" and not bool(torch.isinf(true_scores).any()):
        codes = tile.sub_(true_column) if owned else torch.sub(tile, true_column, out=workspace.tile(*tile.shape, tile))
        nan_rows = None
        if not nan_free and bool(torch.isnan(codes.sum(dim=1)).any()):
            nan_rows = torch.isnan(codes).any(dim=1)
        return codes.sign_(), nan_rows
    nan_rows = torch.isnan(tile).any(dim=1) | torch.isnan(true_scores)
    below = tile < true_column
    codes = tile if owned else workspace.tile(*tile.shape, tile)
    torch.gt(tile, true_column, out=codes)
    return codes.sub_(below.to(codes.dtype)), nan_rows
