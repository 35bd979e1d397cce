"""Filtered (task row, candidate position) pairs of one batch, laid out for one gather per score tile.

The filter index yields, for each task of a batch, the run of known answers of its query; the evaluated triple
itself is always known, so every run contains the task's true answer. Counting (kgeval.counting) reads each
pair's comparison code from the tile that holds it and subtracts the codes afterwards, so the filtered entities
never have to be masked in a dense matrix. The true answer's own code is 0 by construction (it equals itself),
so it needs no special case; pairs whose entity is not a candidate (``restrict_entities_to``) are pointed at the
true answer's position for the same reason.

Two layouts serve the per-tile gathers. :class:`SortedPairs` groups the pairs by (candidate slice, row block) once
per batch and reads host-side offsets (host memory, so CPU only: on an accelerator the offsets would cost one
device synchronisation per batch). :class:`MaskedPairs` keeps the pairs as they are and masks them per tile,
which never synchronises and suits devices where the extra elementwise work is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kgeval.filtering import SideIndex, stable_argsort


@dataclass
class BatchPairs:
    """The filtered pairs of one batch (all LongTensor)."""

    rows: torch.Tensor  #: (P,) task row in the batch, non-decreasing
    positions: torch.Tensor  #: (P,) candidate position; the row's true position for non-candidates
    num_filtered: torch.Tensor  #: (B,) filtered candidates other than the true answer

    @classmethod
    def empty(cls, size: int, device: torch.device) -> BatchPairs:
        nothing = torch.zeros(0, dtype=torch.int64, device=device)
        return cls(nothing, nothing, torch.zeros(size, dtype=torch.int64, device=device))


def expand_pairs(
    side: SideIndex,
    starts: torch.Tensor,
    lengths: torch.Tensor,
    total: int,
    true_positions: torch.Tensor,
    position_of: torch.Tensor | None,
) -> BatchPairs:
    """The filtered pairs of a batch from its CSR runs.

    Parameters
    ----------
    side : SideIndex
    starts, lengths : LongTensor of shape (B,)
        Each task's run in ``side.values``; every run holds the task's true answer.
    total : int
        ``lengths.sum()``, known on the host (no synchronisation).
    true_positions : LongTensor of shape (B,)
    position_of : LongTensor of shape (num_entities,), optional
        Candidate position of each entity, -1 for non-candidates; None when every entity is a candidate.
    """
    size = starts.numel()
    rows = torch.repeat_interleave(torch.arange(size, device=starts.device), lengths, output_size=total)
    shift = starts - (torch.cumsum(lengths, dim=0) - lengths)
    entities = side.values[torch.arange(total, device=starts.device) + shift[rows]]
    if position_of is None:
        return BatchPairs(rows, entities, lengths - 1)
    positions = position_of[entities]
    outside = positions < 0
    positions = torch.where(outside, true_positions[rows], positions)
    num_outside = torch.zeros(size, dtype=torch.int64, device=rows.device).index_add_(0, rows, outside.long())
    return BatchPairs(rows, positions, lengths - 1 - num_outside)


class PairTiles:
    """Per-tile gathers of pair codes, then per-row sums of the codes and of their absolute values.

    Parameters
    ----------
    pairs : BatchPairs
    row_starts : sequence of int
        First task row of each row block, then the batch size.
    pair_offsets : sequence of int
        Index of the first pair of each row block, then the number of pairs (pairs are sorted by row).
    bounds : sequence of (start, stop)
        The candidate slices.
    """

    def __init__(
        self,
        pairs: BatchPairs,
        row_starts: Sequence[int],
        pair_offsets: Sequence[int],
        bounds: Sequence[tuple[int, int]],
    ) -> None:
        self.pairs = pairs
        self.row_starts = list(row_starts)
        self.pair_offsets = list(pair_offsets)
        self.bounds = list(bounds)
        self.codes = torch.zeros(pairs.rows.numel(), dtype=torch.float32, device=pairs.rows.device)
        self._rows = pairs.rows

    def gather_(self, tile: torch.Tensor, block: int, slice_index: int) -> None:
        """Read the codes of the pairs inside ``tile`` (the rows of ``block`` x the slice ``slice_index``)."""
        raise NotImplementedError

    def zero_(self, tile: torch.Tensor, block: int, slice_index: int) -> None:
        """Set the codes of the pairs inside ``tile`` to 0: filtered candidates then count as nothing."""
        raise NotImplementedError

    def sums(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row (sum of codes, sum of |codes|) of shape (size,); exact integers (NaN for a NaN code)."""
        zeros = torch.zeros(size, dtype=self.codes.dtype, device=self.codes.device)
        return zeros.index_add(0, self._rows, self.codes), zeros.index_add(0, self._rows, self.codes.abs())

    def _codes_like(self, tile: torch.Tensor) -> torch.Tensor:
        """The code buffer, in the dtype of the score tiles."""
        if self.codes.dtype != tile.dtype:
            self.codes = self.codes.to(tile.dtype)
        return self.codes


class SortedPairs(PairTiles):
    """Pairs grouped by (slice, row block) with host-side offsets: each tile gathers one contiguous segment.

    With a single slice the pairs are already grouped (they are sorted by row) and the offsets come from the
    plan; with several slices one stable sort per batch groups them.
    """

    def __init__(
        self,
        pairs: BatchPairs,
        row_starts: Sequence[int],
        pair_offsets: Sequence[int],
        bounds: Sequence[tuple[int, int]],
    ) -> None:
        super().__init__(pairs, row_starts, pair_offsets, bounds)
        rows, positions = pairs.rows, pairs.positions
        if len(self.bounds) == 1:
            self.segments = self.pair_offsets
            self._flat = rows * self.bounds[0][1] + positions
            return
        num_blocks = len(self.row_starts) - 1
        block_sizes = torch.tensor(self.pair_offsets, device=rows.device).diff()
        block = torch.repeat_interleave(torch.arange(num_blocks, device=rows.device), block_sizes)
        slice_size = self.bounds[0][1] - self.bounds[0][0]
        key = (positions // slice_size) * num_blocks + block
        order = stable_argsort(key)
        self._rows, self._positions = rows[order], positions[order]
        self.segments = [0, *torch.cumsum(torch.bincount(key, minlength=len(bounds) * num_blocks), 0).tolist()]

    def _segment(self, tile: torch.Tensor, block: int, slice_index: int) -> tuple[int, int, torch.Tensor]:
        """The pair range [lo, hi) of a tile and the pairs' flat indices into it."""
        segment = slice_index * (len(self.row_starts) - 1) + block
        lo, hi = self.segments[segment], self.segments[segment + 1]
        first_row, (start, _stop) = self.row_starts[block], self.bounds[slice_index]
        if len(self.bounds) == 1:
            return lo, hi, self._flat[lo:hi] - first_row * tile.shape[1]
        return lo, hi, (self._rows[lo:hi] - first_row) * tile.shape[1] + (self._positions[lo:hi] - start)

    def gather_(self, tile: torch.Tensor, block: int, slice_index: int) -> None:
        lo, hi, flat = self._segment(tile, block, slice_index)
        if hi > lo:
            torch.take(tile, flat, out=self._codes_like(tile)[lo:hi])

    def zero_(self, tile: torch.Tensor, block: int, slice_index: int) -> None:
        lo, hi, flat = self._segment(tile, block, slice_index)
        if hi > lo:
            tile.view(-1).index_fill_(0, flat, 0)


class MaskedPairs(PairTiles):
    """Pairs in their original order, masked per tile: no host offsets, so no device synchronisation."""

    def _inside(self, tile: torch.Tensor, block: int, slice_index: int) -> tuple[torch.Tensor, ...]:
        """For every pair: whether it lies in the tile, its (clamped) flat index, and its code there (0 outside)."""
        rows, positions = self.pairs.rows, self.pairs.positions
        first_row, (start, _stop) = self.row_starts[block], self.bounds[slice_index]
        local_row, local_column = rows - first_row, positions - start
        inside = (local_row >= 0) & (local_row < tile.shape[0]) & (local_column >= 0)
        inside &= local_column < tile.shape[1]
        flat = (local_row * tile.shape[1] + local_column).clamp_(0, tile.numel() - 1)
        values = torch.take(tile, flat)
        return inside, flat, torch.where(inside, values, torch.zeros_like(values))

    def gather_(self, tile: torch.Tensor, block: int, slice_index: int) -> None:
        if self.codes.numel():
            self._codes_like(tile).add_(self._inside(tile, block, slice_index)[2])

    def zero_(self, tile: torch.Tensor, block: int, slice_index: int) -> None:
        if self.codes.numel():  # adding -code inside the tile, 0 elsewhere: no write races on clamped indices
            _inside, flat, values = self._inside(tile, block, slice_index)
            tile.view(-1).index_put_((flat,), values.neg_(), accumulate=True)


def pair_tiles(
    pairs: BatchPairs,
    row_starts: Sequence[int],
    pair_offsets: Sequence[int],
    bounds: Sequence[tuple[int, int]],
    layout: str,
) -> PairTiles:
    """The pair layout by name: ``"sorted"`` (CPU) or ``"masked"`` (devices, no synchronisation)."""
    kind = SortedPairs if layout == "sorted" else MaskedPairs
    return kind(pairs, row_starts, pair_offsets, bounds)
