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

from kgeval.filtering import SideIndex


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
    """Per-tile gathers of pair codes, then per-row sums of the codes and of their absolute values."""

    def __init__(self, pairs: BatchPairs, row_starts: Sequence[int], slice_size: int, num_slices: int) -> None:
        self.pairs = pairs
        self.row_starts = list(row_starts)  #: first row of each row block, then the batch size
        self.slice_size = slice_size
        self.num_slices = num_slices
        self.codes = torch.zeros(pairs.rows.numel(), dtype=torch.float32, device=pairs.rows.device)

    def _codes_like(self, tile: torch.Tensor) -> torch.Tensor:
        """The code buffer, in the dtype of the score tiles (allocated on first use)."""
        if self.codes.dtype != tile.dtype:
            self.codes = self.codes.to(tile.dtype)
        return self.codes

    def gather_(self, tile: torch.Tensor, block: int, slice_index: int, start: int) -> None:
        """Read the codes of the pairs inside ``tile`` (rows of ``block``, candidates from ``start``)."""
        raise NotImplementedError

    def sums(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row (sum of codes, sum of |codes|), float64 of shape (size,)."""
        zeros = torch.zeros(size, dtype=torch.float64, device=self.codes.device)
        codes = self.codes.to(torch.float64)
        return zeros.index_add(0, self._rows, codes), zeros.index_add(0, self._rows, codes.abs())


class SortedPairs(PairTiles):
    """Pairs grouped by (slice, row block) with host-side offsets: each tile gathers one contiguous segment."""

    def __init__(self, pairs: BatchPairs, row_starts: Sequence[int], slice_size: int, num_slices: int) -> None:
        super().__init__(pairs, row_starts, slice_size, num_slices)
        rows, positions = pairs.rows, pairs.positions
        num_blocks = len(self.row_starts) - 1
        bounds = torch.tensor(self.row_starts[1:-1], dtype=torch.int64, device=rows.device)
        block = torch.bucketize(rows, bounds, right=True)
        key = block
        if num_slices > 1:  # rows are sorted; slices are not: one stable sort by (slice, block)
            key = (positions // slice_size) * num_blocks + block
            order = torch.argsort(key, stable=True)
            rows, positions, key = rows[order], positions[order], key[order]
        counts = torch.bincount(key, minlength=num_slices * num_blocks)
        self.offsets = [0, *torch.cumsum(counts, dim=0).tolist()]
        self._rows, self._positions = rows, positions

    def gather_(self, tile: torch.Tensor, block: int, slice_index: int, start: int) -> None:
        segment = slice_index * (len(self.row_starts) - 1) + block
        lo, hi = self.offsets[segment], self.offsets[segment + 1]
        if lo == hi:
            return
        width = tile.shape[1]
        flat = (self._rows[lo:hi] - self.row_starts[block]) * width + (self._positions[lo:hi] - start)
        torch.take(tile, flat, out=self._codes_like(tile)[lo:hi])


class MaskedPairs(PairTiles):
    """Pairs in their original order, masked per tile: no host offsets, so no device synchronisation."""

    def __init__(self, pairs: BatchPairs, row_starts: Sequence[int], slice_size: int, num_slices: int) -> None:
        super().__init__(pairs, row_starts, slice_size, num_slices)
        self._rows = pairs.rows

    def gather_(self, tile: torch.Tensor, block: int, slice_index: int, start: int) -> None:
        if self.codes.numel() == 0:
            return
        rows, positions = self.pairs.rows, self.pairs.positions
        first_row, width = self.row_starts[block], tile.shape[1]
        local_row, local_column = rows - first_row, positions - start
        inside = (local_row >= 0) & (local_row < tile.shape[0]) & (local_column >= 0) & (local_column < width)
        flat = (local_row * width + local_column).clamp_(0, tile.numel() - 1)
        values = torch.take(tile, flat)
        self._codes_like(tile).add_(torch.where(inside, values, torch.zeros_like(values)))


def pair_tiles(
    pairs: BatchPairs, row_starts: Sequence[int], slice_size: int, num_slices: int, layout: str
) -> PairTiles:
    """The pair layout by name: ``"sorted"`` (CPU) or ``"masked"`` (devices, no synchronisation)."""
    kind = SortedPairs if layout == "sorted" else MaskedPairs
    return kind(pairs, row_starts, slice_size, num_slices)
