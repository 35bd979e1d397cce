"""Counting one batch: per task, the scores of every tile above and below its true score, minus the filtered
pairs, as raw and filtered counts from one pass. The rank rule is stated in docs/design.md (The rank rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from kgeval._engine.kernels import SIGN, Kernel, block_counting, codes_against
from kgeval._engine.pairs import PairTiles
from kgeval._engine.scoring import CandidateScorer, Workspace


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
    return codes_against(scores, true_scores.unsqueeze(1))


@dataclass
class BatchCounts:
    """Counts of a batch of tasks against their candidates (tensors of shape (B,), int64 unless stated)."""

    greater: torch.Tensor  #: #{candidates e != true : s_e > s*}
    equal: torch.Tensor  #: #{candidates e != true : s_e == s*}
    num_candidates: torch.Tensor  #: C = 1 + #{candidates e != true}
    has_nan: torch.Tensor  #: bool: a NaN among the task's scores

    def to(self, device: torch.device | str) -> BatchCounts:
        """These counts with every tensor on ``device``."""
        return BatchCounts(*(getattr(self, f.name).to(device) for f in fields(self)))

    def ranks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(optimistic, pessimistic, num_candidates) per task, by the rule of this module."""
        optimistic = 1 + self.greater
        return optimistic, optimistic + self.equal, self.num_candidates

    @classmethod
    def from_counts(
        cls, greater: torch.Tensor, less: torch.Tensor, has_nan: torch.Tensor, num_candidates: torch.Tensor
    ) -> BatchCounts:
        """Counts from #above and #below the true score among the C - 1 other candidates (shapes (B,))."""
        return cls(greater, num_candidates - 1 - greater - less, num_candidates, has_nan)

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


@dataclass(frozen=True)
class BatchWork:
    """One batch as counting sees it: its distinct queries, its tasks' true answers, its tiles and filtered pairs."""

    queries: torch.Tensor  #: LongTensor (U, 2): the distinct queries, as passed to score_t / score_h
    true_positions: torch.Tensor  #: LongTensor (B,): candidate position of each task's true answer
    #: index into ``bounds`` of the slice holding every true answer; None: the answers lie in several slices
    #: (``RowBlock.true_slices``) and a first pass reads the true scores from their tiles
    true_slice: int | None
    bounds: Sequence[tuple[int, int]]  #: the candidate slices, covering 0 .. num_candidates - 1
    blocks: Sequence[RowBlock]  #: the task rows in tiles, covering 0 .. B - 1 in order
    pairs: PairTiles | None = None  #: the filtered pairs; None ranks against every candidate (raw)
    num_filtered: torch.Tensor | None = None  #: LongTensor (B,): filtered candidates other than the true answer
    #: FloatTensor (B,): the true scores, given because the answers are not among these candidates (a shard of
    #: them, kgeval._engine.sharding); then no slice is read for them, ``true_slice`` is None and every candidate
    #: here counts (none is the true answer). None: read from the tiles holding the answers
    true_scores: torch.Tensor | None = None


@dataclass(frozen=True)
class SideCounts:
    """The counts of some tasks: filtered (raw when nothing was filtered), raw as well when asked for, and under a
    finer filter as well when the tasks have one (kgeval._engine.loop.SideTasks.fine_index)."""

    counts: BatchCounts
    raw: BatchCounts | None = None
    #: FloatTensor (n,): each task's true score as counting read it (None where not kept, e.g. resumed parts)
    true_scores: torch.Tensor | None = None
    fine: BatchCounts | None = None  #: the counts under the finer filter, from the same codes

    def to(self, device: torch.device | str) -> SideCounts:
        """These counts with every tensor on ``device``."""
        raw, fine = (None if part is None else part.to(device) for part in (self.raw, self.fine))
        true_scores = None if self.true_scores is None else self.true_scores.to(device)
        return SideCounts(self.counts.to(device), raw, true_scores, fine)

    @classmethod
    def scatter(cls, parts: Sequence[tuple[torch.Tensor, SideCounts]], size: int) -> SideCounts:
        """The counts of ``size`` tasks from parts that each hold the tasks at their rows (LongTensor)."""
        rows = torch.cat([part_rows for part_rows, _ in parts])
        order = torch.empty_like(rows)
        order[rows] = torch.arange(size, device=rows.device)
        return cls.cat([counts for _, counts in parts], order)

    @classmethod
    def cat(cls, parts: Sequence[SideCounts], order: torch.Tensor) -> SideCounts:
        """The parts concatenated, then indexed by ``order``."""
        counts = BatchCounts.cat([part.counts for part in parts], order)
        raw, fine = (_cat_present([getattr(part, name) for part in parts], order) for name in ("raw", "fine"))
        scores = [part.true_scores for part in parts]
        true_scores = torch.cat(scores)[order] if scores and all(s is not None for s in scores) else None  # type: ignore[arg-type]
        return cls(counts, raw, true_scores, fine)


def _cat_present(parts: Sequence[BatchCounts | None], order: torch.Tensor) -> BatchCounts | None:
    """:meth:`BatchCounts.cat` of parts that all hold counts; None if any does not."""
    if not parts or any(part is None for part in parts):
        return None
    return BatchCounts.cat(parts, order)  # type: ignore[arg-type]


def count_batch(
    scorer: CandidateScorer,
    work: BatchWork,
    kernel: Kernel = SIGN,
    workspace: Workspace | None = None,
    raw_too: bool = False,
) -> SideCounts:
    """Count one batch over every (candidate slice, row block) tile, the slice holding the true answers first.

    Returns the filtered counts with ``work.pairs`` (raw counts without), and the raw counts of the same pass as
    well when ``raw_too``.
    """
    scorer.begin(work.queries)
    if runs_fused(kernel, scorer):
        return _count_fused(kernel, *scorer.fused_operands(), work, raw_too)
    if block_counting.applies(kernel, scorer, work.true_scores is not None):
        counted = _count_in_cache(scorer, work, raw_too)
        if counted is not None:
            return counted
    workspace = workspace or Workspace()
    true_positions, bounds, blocks, true_slice, pairs = (
        work.true_positions,
        work.bounds,
        work.blocks,
        work.true_slice,
        work.pairs,
    )
    size = true_positions.numel()
    device = true_positions.device
    greater = torch.zeros(size, dtype=torch.int64, device=device)
    less = torch.zeros(size, dtype=torch.int64, device=device)
    has_nan = torch.zeros(size, dtype=torch.bool, device=device)
    true_scores: torch.Tensor | None = work.true_scores
    first = true_slice
    if true_scores is None and true_slice is None:
        true_scores, first = _true_scores(scorer, work, kernel, workspace)
    for j in _slice_order(first, len(bounds)):
        start, stop = bounds[j]
        scorer.start_slice(start, stop)
        for index, block in enumerate(blocks):
            rows = slice(block.row_start, block.row_stop)
            tile, tile_rows, owned = _tile(scorer, block, kernel, workspace)
            if j == true_slice:
                if true_scores is None:
                    true_scores = torch.empty(size, dtype=tile.dtype, device=tile.device)
                true_scores[rows] = _read(tile, tile_rows, true_positions[rows] - start)
            if pairs is not None:  # before the kernel, which may overwrite the tile
                pairs.gather_(tile, tile_rows, true_scores, index, j)  # type: ignore[arg-type]
            nan_free = kernel is SIGN and scorer.nan_free  # only that kernel asks (a NaN check may cost a pass)
            truth = true_scores[rows]  # type: ignore[index]
            above, below, nan = kernel.count(tile, truth, tile_rows, owned, nan_free, workspace)
            greater[rows] += above
            less[rows] += below
            has_nan[rows] |= nan
        tile = None  # type: ignore[assignment]  # a view of the scorer's scores: let go before the next slice
    filtered = fine = None
    if pairs is not None and work.num_filtered is not None:
        filtered, fine = pairs.counts(size), pairs.fine_counts(size)
    num_fine = pairs.pairs.num_fine if pairs is not None else None
    return _side_counts(greater, less, has_nan, scorer.num_candidates, (filtered, work.num_filtered), raw_too,
                        (fine, num_fine), true_scores)  # fmt: skip


def _count_in_cache(scorer: CandidateScorer, work: BatchWork, raw_too: bool) -> SideCounts | None:
    """:func:`count_batch` of a begun batch, each GEMM block counted while in cache
    (kgeval._engine.kernels.block_counting); None when a task's band missed (the caller then counts the batch tile by
    tile)."""
    task_rows = _task_query_rows(work.blocks, work.true_positions.device)
    counted = block_counting.count_in_cache(scorer, task_rows, work.true_positions, work.pairs)
    if counted is None:
        return None
    # the scorer's scores cannot hold NaN (checked)
    has_nan = torch.zeros(task_rows.numel(), dtype=torch.bool, device=counted.greater.device)
    num_fine = work.pairs.pairs.num_fine if work.pairs is not None else None
    return _side_counts(counted.greater, counted.less, has_nan, scorer.num_candidates,
                        (counted.pairs, work.num_filtered), raw_too, (counted.fine, num_fine),
                        counted.true_scores)  # fmt: skip


def runs_fused(kernel: Kernel, scorer: CandidateScorer) -> bool:
    """Whether ``kernel`` multiplies this scorer's vectors itself (then no tile is written and the filtered pairs are
    scored as a list)."""
    return kernel.fuses_gemm and scorer.fusable


def _count_fused(
    kernel: Kernel, queries: torch.Tensor, candidates: torch.Tensor, work: BatchWork, raw_too: bool
) -> SideCounts:
    """:func:`count_batch` by a kernel that multiplies the vectors itself: the true scores and the filtered pairs'
    scores are picked by the arithmetic of its counting tiles, the counts cover every candidate at once (no
    slices, no score written), and the filtered pairs' codes are subtracted as on the tile path."""
    task_rows = _task_query_rows(work.blocks, work.true_positions.device)
    true_scores = work.true_scores
    if true_scores is None:
        true_scores = kernel.pick_scores(queries, candidates, task_rows, work.true_positions)  # type: ignore[attr-defined]
    greater, less, has_nan = kernel.fused_counts(queries, candidates, task_rows, true_scores)  # type: ignore[attr-defined]
    filtered = fine = num_fine = None
    if work.pairs is not None and work.num_filtered is not None:
        pairs = work.pairs.pairs
        positions = pairs.positions
        if work.true_scores is not None:  # answers elsewhere: pairs at -1 are not candidates here (NaN: no code)
            positions = positions.clamp(min=0)
        values = kernel.pick_scores(queries, candidates, task_rows[pairs.rows], positions)  # type: ignore[attr-defined]
        if work.true_scores is not None:
            values = values.masked_fill(pairs.positions < 0, float("nan"))
        filtered = pairs.counts_against(values, true_scores)
        if pairs.in_fine is not None:
            fine, num_fine = pairs.counts_against(values, true_scores, fine=True), pairs.num_fine
    return _side_counts(greater, less, has_nan, candidates.shape[0], (filtered, work.num_filtered), raw_too,
                        (fine, num_fine), true_scores)  # fmt: skip


#: the pairs' (#above, #below) per task and the number of filtered candidates per task, of one filter (None:
#: no such filter)
FilterCounts = tuple[tuple[torch.Tensor, torch.Tensor] | None, torch.Tensor | None]


def _side_counts(
    greater: torch.Tensor,
    less: torch.Tensor,
    has_nan: torch.Tensor,
    num_candidates: int,
    filtered: FilterCounts,
    raw_too: bool,
    fine: FilterCounts = (None, None),
    true_scores: torch.Tensor | None = None,
) -> SideCounts:
    """A batch's counts from #above / #below its true scores among all ``num_candidates`` (raw), and, given a
    filter's pairs' (#above, #below) and each task's number of filtered candidates, the filtered counts too (the
    raw ones minus the pairs'); likewise under the finer filter ``fine``, from the same raw counts."""
    everything = torch.full_like(greater, num_candidates)
    raw = BatchCounts.from_counts(greater, less, has_nan, everything)

    def without(pairs: FilterCounts) -> BatchCounts | None:
        above_below, number = pairs
        if above_below is None or number is None:
            return None
        return BatchCounts.from_counts(greater - above_below[0], less - above_below[1], has_nan, everything - number)

    counts = without(filtered)
    if counts is None:
        return SideCounts(raw, None, true_scores)
    return SideCounts(counts, raw if raw_too else None, true_scores, without(fine))


def _task_query_rows(blocks: Sequence[RowBlock], device: torch.device) -> torch.Tensor:
    """The distinct-query row of every task row of a batch (LongTensor (B,)), from its row blocks."""
    parts = []
    for block in blocks:
        if block.query_rows is None:
            parts.append(torch.arange(block.query_start, block.query_stop, device=device))
        else:
            parts.append(block.query_rows + block.query_start)
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=device)


def _tile(
    scorer: CandidateScorer, block: RowBlock, kernel: Kernel, workspace: Workspace
) -> tuple[torch.Tensor, torch.Tensor | None, bool]:
    """The scores of a block against the current slice: (tile, tile row of each task or None, owned).

    The numba kernel reads repeated queries' rows in place, so it gets the distinct-query tile and the row map;
    the eager kernels get one row per task (copied, or recomputed when cheaper -- the scorer decides)."""
    if kernel.reads_rows_in_place:
        return scorer.query_tile(block.query_start, block.query_stop), block.query_rows, False
    tile, owned = scorer.block(block.query_start, block.query_stop, block.query_rows, workspace)
    return tile, None, owned


def _read(tile: torch.Tensor, tile_rows: torch.Tensor | None, columns: torch.Tensor) -> torch.Tensor:
    """tile[tile_rows[i], columns[i]] for every task i (tile row i without a row map)."""
    if tile_rows is None:
        return tile.gather(1, columns.unsqueeze(1)).squeeze(1)
    return tile[tile_rows, columns]


def _slice_order(first: int | None, num_slices: int) -> list[int]:
    """The slices in counting order: ``first`` first (the one holding the true answers, or the one a first pass
    over the answers' slices read last, whose scores a scorer still holds), then the others in order."""
    if first is None:
        return list(range(num_slices))
    return [first, *(j for j in range(num_slices) if j != first)]


def _true_scores(
    scorer: CandidateScorer, work: BatchWork, kernel: Kernel, workspace: Workspace
) -> tuple[torch.Tensor, int | None]:
    """The true scores of a batch whose answers lie in several slices, each read from the tile (of the shape
    counting uses) that holds it; and the slice read last (counting starts there, so that a scorer holding its
    scores need not score it again)."""
    true_positions, bounds, blocks = work.true_positions, work.bounds, work.blocks
    width = bounds[0][1] - bounds[0][0]
    true_slice_of_row = true_positions // width
    true_scores: torch.Tensor | None = None
    answer_slices = sorted({j for block in blocks for j in block.true_slices})
    for j in answer_slices:
        start, stop = bounds[j]
        scorer.start_slice(start, stop)
        scorer.keep_slice()  # counting needs this slice again: a scorer that can, keeps it instead of rescoring
        for block in blocks:
            if j not in block.true_slices:
                continue
            rows = slice(block.row_start, block.row_stop)
            tile, tile_rows, _owned = _tile(scorer, block, kernel, workspace)
            if true_scores is None:
                true_scores = torch.empty(true_positions.numel(), dtype=tile.dtype, device=tile.device)
            found = _read(tile, tile_rows, (true_positions[rows] - start).clamp(0, stop - start - 1))
            true_scores[rows] = torch.where(true_slice_of_row[rows] == j, found, true_scores[rows])
    return true_scores, (answer_slices[-1] if answer_slices else None)  # type: ignore[return-value]
