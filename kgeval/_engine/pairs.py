"""Filtered (task row, candidate position) pairs of one batch, laid out for one gather per score tile.

Each pair's score is read from the tile that holds it and its comparison code subtracted from the counts, so
filtered entities are never written into a dense matrix (layouts: :class:`SortedPairs`, :class:`MaskedPairs`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from kgeval._engine.filter_index import SideIndex, stable_argsort
from kgeval._engine.kernels import codes_against, counts_from_code_sums


def code_sums(rows: torch.Tensor, codes: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per task row of ``size``: (sum of the pairs' comparison codes, sum of their |codes|), exact integers in
    float64, from each pair's row (P,) and code (P,)."""
    zeros = torch.zeros(size, dtype=torch.float64, device=codes.device)
    codes = codes.double()
    return zeros.index_add(0, rows, codes), zeros.index_add(0, rows, codes.abs())


@dataclass
class BatchPairs:
    """The filtered pairs of one batch (LongTensors unless stated).

    With a finer filter besides (kgeval._engine.loop.SideTasks.fine_index: every task's fine run is a subset of its run
    here, its true answer included), ``in_fine`` marks the pairs the fine filter removes too, and ``num_fine``
    counts them as ``num_filtered`` counts these: the same gathered codes give both filters' counts."""

    rows: torch.Tensor  #: (P,) task row in the batch, non-decreasing
    positions: torch.Tensor  #: (P,) candidate position; the row's true position for non-candidates
    num_filtered: torch.Tensor  #: (B,) filtered candidates other than the true answer
    in_fine: torch.Tensor | None = None  #: BoolTensor (P,): the pair is in the finer filter too
    num_fine: torch.Tensor | None = None  #: (B,) the finer filter's candidates other than the true answer

    def counts_against(
        self, values: torch.Tensor, true_scores: torch.Tensor, fine: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per task row: (#pairs whose score ``values`` (P,) lies above, #below the row's true score (B,)),
        LongTensors of shape (B,); NaN scores lie in neither. ``fine``: the pairs of the finer filter only."""
        rows = self.rows
        if fine:
            assert self.in_fine is not None
            rows, values = rows[self.in_fine], values[self.in_fine]
        codes = codes_against(values, true_scores[rows], mark_nan=False)
        return counts_from_code_sums(*code_sums(rows, codes, self.num_filtered.numel()))

    def candidates_only(self, row_starts: Sequence[int]) -> tuple[BatchPairs, list[int]]:
        """These pairs without those at position -1 (non-candidates of tasks whose true answer is not a candidate
        here either, kgeval._engine.sharding), and the index of the first pair of each row block starting at
        ``row_starts`` (then the number of pairs): one host synchronisation."""
        keep = self.positions >= 0
        rows, positions = self.rows[keep], self.positions[keep]
        in_fine = self.in_fine[keep] if self.in_fine is not None else None
        bounds = torch.tensor(list(row_starts), dtype=rows.dtype, device=rows.device)
        offsets = torch.searchsorted(rows, bounds).tolist()
        return BatchPairs(rows, positions, self.num_filtered, in_fine, self.num_fine), offsets

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
    fine: tuple[SideIndex, torch.Tensor, torch.Tensor] | None = None,
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
    fine : (SideIndex, starts, lengths), optional
        A finer filter: each task's run (shapes (B,)) in that index, a subset of its run in ``side`` holding the
        true answer too. Marks the pairs it removes (``BatchPairs.in_fine``) and counts them (``num_fine``).
    """
    size = starts.numel()
    rows, entities = side.expand(starts, lengths, total)
    in_fine = num_fine = None
    if fine is not None:
        fine_side, fine_starts, fine_lengths = fine
        in_fine = fine_side.contains(fine_starts[rows], fine_lengths[rows], entities)
        num_fine = fine_lengths - 1
    if position_of is None:
        return BatchPairs(rows, entities, lengths - 1, in_fine, num_fine)
    positions = position_of[entities]
    outside = positions < 0
    positions = torch.where(outside, true_positions[rows], positions)
    zeros = torch.zeros(size, dtype=torch.int64, device=rows.device)
    num_outside = zeros.index_add(0, rows, outside.long())
    if in_fine is not None and num_fine is not None:
        num_fine = num_fine - zeros.index_add(0, rows, (outside & in_fine).long())
    return BatchPairs(rows, positions, lengths - 1 - num_outside, in_fine, num_fine)


@dataclass
class QueryGroup:
    """Task rows [row_start, row_stop) of a batch that share a query and so their filtered candidates."""

    row_start: int
    row_stop: int
    positions: torch.Tensor  #: (m,) sorted candidate positions of the known answers (the true answers included)

    @property
    def num_filtered(self) -> int:
        """Filtered candidates other than the true answer (which every run holds)."""
        return int(self.positions.numel()) - 1


@dataclass(frozen=True)
class QueryGroups:
    """Every query group of a batch as flat tensors, so that their filtered candidates cost a fixed number of
    operations per batch and per tile, however many groups there are (no per-group operation, no host read).

    Group g holds the task rows [row_bounds[g][0], row_bounds[g][1]) of the batch and the candidate positions
    ``positions[offsets[g]:offsets[g + 1]]`` of its query's known answers, ascending; an answer that is no candidate
    sits at the end of its group as ``sentinel`` (the number of candidates: inside no slice)."""

    row_bounds: tuple[tuple[int, int], ...]  #: (row_start, row_stop) of each group, ascending, disjoint
    offsets: tuple[int, ...]  #: (G + 1,) each group's first index into ``positions``, then their number
    positions: torch.Tensor  #: LongTensor (M,)
    sentinel: int  #: the position of answers that are no candidates
    rows: torch.Tensor  #: LongTensor (n,): the task rows of every group, ascending
    num_filtered: torch.Tensor  #: LongTensor (n,): each of those rows' filtered candidates but the true answer
    has_sentinels: bool = False  #: some positions may be the sentinel (the candidates are a subset)

    def __len__(self) -> int:
        return len(self.row_bounds)

    def __iter__(self) -> Iterator[QueryGroup]:
        """Each group as a :class:`QueryGroup` (its candidates only): a few operations per group, for host-side
        consumers (kgeval._engine.kernels.block_counting)."""
        for g, (row_start, row_stop) in enumerate(self.row_bounds):
            positions = self.positions[self.offsets[g] : self.offsets[g + 1]]
            yield QueryGroup(row_start, row_stop, positions[positions < self.sentinel])

    @classmethod
    def of(cls, groups: Sequence[QueryGroup], num_candidates: int, device: torch.device) -> QueryGroups:
        """From :class:`QueryGroup` objects (sorted candidate positions each)."""
        parts = [group.positions.to(device) for group in groups]
        positions = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=device)
        lengths = np.array([part.numel() for part in parts], dtype=np.int64)
        return cls._build(tuple((g.row_start, g.row_stop) for g in groups), positions, lengths, num_candidates,
                          all_candidates=True)  # fmt: skip

    @classmethod
    def _build(cls, row_bounds: tuple[tuple[int, int], ...], positions: torch.Tensor, lengths: np.ndarray,
               num_candidates: int, all_candidates: bool) -> QueryGroups:  # fmt: skip
        """Groups from their concatenated positions (``lengths`` per group). ``all_candidates``: every position is
        a candidate's, ascending within its group; else -1 marks a non-candidate and each group is sorted here
        (a candidate list in another order than the entity ids). Host-known sizes travel in one transfer each."""
        device = positions.device
        offsets = (0, *np.cumsum(lengths).tolist())
        row_counts = np.array([stop - start for start, stop in row_bounds], dtype=np.int64)
        rows = np.repeat([start for start, _ in row_bounds], row_counts) + _ranks_within(row_counts)
        if all_candidates:
            per_row = to_device(np.stack([rows, np.repeat(lengths - 1, row_counts)]), device)
            return cls(row_bounds, offsets, positions, num_candidates, per_row[0], per_row[1])
        group_of = _group_ids(lengths, device)
        stride = num_candidates + 1  # by (group, position): groups stay where they are, each one ascending
        positions = torch.where(positions < 0, num_candidates, positions)
        positions = torch.sort(group_of * stride + positions).values - group_of * stride
        candidates = torch.zeros(lengths.size, dtype=torch.int64, device=device)
        candidates.index_add_(0, group_of, (positions < num_candidates).long())
        per_row = to_device(np.stack([rows, np.repeat(np.arange(lengths.size), row_counts)]), device)
        return cls(row_bounds, offsets, positions, num_candidates, per_row[0], candidates[per_row[1]] - 1, True)


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array (int64) as a tensor on ``device``. On CUDA it is copied from pinned memory without blocking the
    host: a copy from pageable memory waits for the device (a synchronisation, which
    ``torch.cuda.set_sync_debug_mode`` reports); the pinned block is kept by torch until the copy is done."""
    host = torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


def _group_ids(lengths: np.ndarray, device: torch.device) -> torch.Tensor:
    """(sum(lengths),) on ``device``: the index of the group each of the groups' concatenated positions belongs to."""
    return to_device(np.repeat(np.arange(lengths.size), lengths), device)


def _ranks_within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., counts[0] - 1, 0, 1, ..., counts[1] - 1, ... (host)."""
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]) if ends.size else 0) - np.repeat(ends - counts, counts)


def query_groups(
    side: SideIndex, plans: Sequence, position_of: torch.Tensor | None, num_candidates: int
) -> QueryGroups | None:
    """The :class:`QueryGroups` of a batch's planned groups (kgeval._engine.plan.QueryGroupPlan), None without
    any: one gather of their runs, a fixed number of operations whatever their number."""
    if not plans:
        return None
    lengths = np.array([plan.run_length for plan in plans], dtype=np.int64)
    starts = np.array([plan.run_start for plan in plans], dtype=np.int64)
    run_index = np.repeat(starts, lengths) + _ranks_within(lengths)
    positions = side.values[to_device(run_index, side.values.device)]
    if position_of is not None:
        positions = position_of[positions]
    row_bounds = tuple((plan.row_start, plan.row_stop) for plan in plans)
    return QueryGroups._build(row_bounds, positions, lengths, num_candidates, all_candidates=position_of is None)


class PairTiles:
    """Per-tile gathers of the filtered pairs' comparison codes, then per-row counts of the codes above / below.

    Parameters
    ----------
    pairs : BatchPairs
    row_starts : sequence of int
        First task row of each row block, then the batch size.
    pair_offsets : sequence of int
        Index of the first pair of each row block, then the number of pairs (pairs are sorted by row).
    bounds : sequence of (start, stop)
        The candidate slices.

    Every tile of the batch passes through :meth:`gather_` once; a tile's rows are the task rows of its block,
    or, with a row map ``tile_rows``, the distinct-query rows those tasks use.
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
        #: (P,) the comparison code of each pair: 1 above, -1 below its row's true score, 0 equal (or NaN score)
        self.codes = torch.zeros(pairs.rows.numel(), dtype=torch.float32, device=pairs.rows.device)
        self.groups: QueryGroups | None = None  #: the batch's query groups (the "sorted" layout's)
        self._rows = pairs.rows
        self._in_fine = pairs.in_fine  #: in the order of ``codes``

    def gather_(
        self,
        tile: torch.Tensor,
        tile_rows: torch.Tensor | None,
        true_scores: torch.Tensor,
        block: int,
        slice_index: int,
    ) -> None:
        """Record the codes of the pairs inside ``tile`` (the rows of ``block`` x the slice ``slice_index``).

        ``tile_rows`` maps the block's task rows to tile rows (None: the identity); ``true_scores`` has shape
        (B,) and is set for the block's rows."""
        raise NotImplementedError

    def counts(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row: (#filtered candidates above, #below the true score), LongTensors of shape (size,)."""
        return counts_from_code_sums(*self._sums(size))

    def fine_counts(self, size: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """:meth:`counts` of the finer filter's pairs only (``BatchPairs.in_fine``); None without a finer filter."""
        if self._in_fine is None:
            return None
        return counts_from_code_sums(*code_sums(self._rows[self._in_fine], self.codes[self._in_fine], size))

    def _sums(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row: (sum of codes, sum of |codes|), exact integers in float64."""
        return code_sums(self._rows, self.codes, size)


class SortedPairs(PairTiles):
    """Pairs grouped by (slice, row block) with host-side offsets: each tile gathers one contiguous segment.

    With a single slice the pairs are already grouped (they are sorted by row) and the offsets come from the
    plan; with several slices one stable sort per batch groups them. :class:`QueryGroups` are expanded per tile:
    a fixed number of operations gathers the codes of every group row inside the tile against its group's
    positions in the slice, however many groups there are -- except in a tile of distinct queries (the CPU's
    kernels), where each group reads its one shared row once instead.
    """

    def __init__(
        self,
        pairs: BatchPairs,
        row_starts: Sequence[int],
        pair_offsets: Sequence[int],
        bounds: Sequence[tuple[int, int]],
        groups: QueryGroups | None = None,
    ) -> None:
        super().__init__(pairs, row_starts, pair_offsets, bounds)
        self.groups = groups
        if groups and pairs.in_fine is not None:
            raise ValueError("query groups share one run of pairs: a finer filter needs them expanded into pairs")
        self._placed = self._place_groups(groups)
        #: one slice takes each group's whole run, its non-candidates (the sentinel) masked while gathering; several
        #: slices take ranges without them
        self._masks_sentinels = groups is not None and groups.has_sentinels and len(self.bounds) == 1
        self._group_sums = torch.zeros(2, self.row_starts[-1], dtype=torch.float64, device=pairs.rows.device)
        rows, positions = pairs.rows, pairs.positions
        self._positions = positions
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
        if pairs.in_fine is not None:
            self._in_fine = pairs.in_fine[order]
        self.segments = [0, *torch.cumsum(torch.bincount(key, minlength=len(bounds) * num_blocks), 0).tolist()]

    def _segment(
        self, tile: torch.Tensor, tile_rows: torch.Tensor | None, block: int, slice_index: int
    ) -> tuple[int, int, torch.Tensor]:
        """The pair range [lo, hi) of a tile and the pairs' flat indices into it."""
        segment = slice_index * (len(self.row_starts) - 1) + block
        lo, hi = self.segments[segment], self.segments[segment + 1]
        first_row, (start, _stop) = self.row_starts[block], self.bounds[slice_index]
        if tile_rows is None and len(self.bounds) == 1:
            return lo, hi, self._flat[lo:hi] - first_row * tile.shape[1]
        local = self._rows[lo:hi] - first_row
        if tile_rows is not None:
            local = tile_rows[local]
        return lo, hi, local * tile.shape[1] + (self._positions[lo:hi] - start)

    def _place_groups(self, groups: QueryGroups | None) -> dict[tuple[int, int], np.ndarray]:
        """Per tile (block, slice) with group rows: a (4, k) host array of (first row, rows, first index into the
        groups' positions, positions) of the k groups inside it. With several slices each group's range per slice
        comes from one search over all groups and one host read per batch; with one slice a group's whole run is
        used and its non-candidates (at the sentinel, outside the slice) are masked while gathering."""
        if not groups:
            return {}
        num_slices = len(self.bounds)
        offsets = np.asarray(groups.offsets)
        if num_slices == 1:
            ranges = np.stack([offsets[:-1], offsets[1:]], axis=1)
        else:
            group_of = _group_ids(np.diff(offsets), groups.positions.device)
            stride = groups.sentinel + 1
            keys = group_of * stride + groups.positions  # ascending: groups in order, each ascending
            edges = torch.tensor([start for start, _ in self.bounds] + [groups.sentinel], device=keys.device)
            probes = torch.arange(len(groups), device=keys.device).unsqueeze(1) * stride + edges
            ranges = torch.searchsorted(keys, probes).cpu().numpy()  # (G, S + 1): one host read per batch
        placed: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
        for g, (row_start, row_stop) in enumerate(groups.row_bounds):
            for block, (first, last) in enumerate(itertools.pairwise(self.row_starts)):
                lo, hi = max(row_start, first), min(row_stop, last)
                if lo >= hi:
                    continue
                for j in range(num_slices):
                    a, b = int(ranges[g, j]), int(ranges[g, j + 1])
                    if b > a:
                        placed.setdefault((block, j), []).append((lo, hi - lo, a, b - a))
        return {tile: np.array(entries, dtype=np.int64).T for tile, entries in placed.items()}

    def gather_(
        self,
        tile: torch.Tensor,
        tile_rows: torch.Tensor | None,
        true_scores: torch.Tensor,
        block: int,
        slice_index: int,
    ) -> None:
        lo, hi, flat = self._segment(tile, tile_rows, block, slice_index)
        if hi > lo:
            values = torch.take(tile, flat)
            self.codes[lo:hi] = codes_against(values, true_scores[self._rows[lo:hi]], mark_nan=False)
        placed = self._placed.get((block, slice_index))
        if placed is None:
            return
        if tile_rows is None:
            self._gather_groups(tile, true_scores, block, slice_index, placed)
        else:
            self._gather_shared_rows(tile, tile_rows, true_scores, block, slice_index, placed)

    def _gather_groups(
        self, tile: torch.Tensor, true_scores: torch.Tensor, block: int, slice_index: int, placed: np.ndarray
    ) -> None:
        """Add the codes of every group row of a tile with a row per task against its group's positions in the
        slice to the group sums: the (row, position index) pairs laid out on the host from the plan's sizes, one
        transfer, one gather for all groups."""
        assert self.groups is not None
        first_rows, row_counts, first_indices, lengths = placed
        rows = np.repeat(first_rows, row_counts) + _ranks_within(row_counts)
        per_row = np.repeat(lengths, row_counts)
        pair_rows = np.repeat(rows, per_row)
        indices = np.repeat(np.repeat(first_indices, row_counts), per_row) + _ranks_within(per_row)
        host = to_device(np.stack([pair_rows, indices]), tile.device)  # one transfer
        batch_rows, positions = host[0], self.groups.positions[host[1]]
        start, stop = self.bounds[slice_index]
        local = batch_rows - self.row_starts[block]
        values = torch.take(tile, local * tile.shape[1] + self._columns(positions, start, stop))
        codes = codes_against(values, true_scores[batch_rows], mark_nan=False)
        if self._masks_sentinels:
            codes.masked_fill_(positions >= stop, 0)
        self._group_sums.index_add_(1, batch_rows, torch.stack([codes, codes.abs()]).double())

    def _gather_shared_rows(
        self,
        tile: torch.Tensor,
        tile_rows: torch.Tensor,
        true_scores: torch.Tensor,
        block: int,
        slice_index: int,
        placed: np.ndarray,
    ) -> None:
        """:meth:`_gather_groups` for a tile of distinct queries (a row map): a group's tasks share one tile row,
        so each group's positions are read once and compared with its rows' true scores by broadcasting -- a few
        operations per group, which on the CPU costs less time than expanding rows x positions (FB15k-237, eager:
        1.38 s against 1.11 s per evaluation)."""
        assert self.groups is not None
        first, (start, stop) = self.row_starts[block], self.bounds[slice_index]
        for lo, count, a, length in placed.T.tolist():
            positions = self.groups.positions[a : a + length]
            values = tile[tile_rows[lo - first]].index_select(0, self._columns(positions, start, stop)).unsqueeze(0)
            codes = codes_against(values, true_scores[lo : lo + count].unsqueeze(1), mark_nan=False)
            if self._masks_sentinels:
                codes.masked_fill_(positions >= stop, 0)
            self._group_sums[0, lo : lo + count] += codes.sum(dim=1, dtype=torch.float64)
            self._group_sums[1, lo : lo + count] += codes.abs_().sum(dim=1, dtype=torch.float64)

    def _columns(self, positions: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Group positions as columns of a tile of slice [start, stop): the sentinel, where it may be present, held
        inside the tile (its codes are masked)."""
        columns = positions - start
        return columns.clamp_(max=stop - start - 1) if self._masks_sentinels else columns

    def _sums(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        total, absolute = super()._sums(size)
        return total + self._group_sums[0], absolute + self._group_sums[1]


class MaskedPairs(PairTiles):
    """Pairs in their original order, masked per tile: no host offsets, so no device synchronisation."""

    def gather_(
        self,
        tile: torch.Tensor,
        tile_rows: torch.Tensor | None,
        true_scores: torch.Tensor,
        block: int,
        slice_index: int,
    ) -> None:
        if not self.codes.numel():
            return
        rows, positions = self.pairs.rows, self.pairs.positions
        first_row, last_row = self.row_starts[block], self.row_starts[block + 1]
        start, stop = self.bounds[slice_index]
        local_row, local_column = rows - first_row, positions - start
        inside = (local_row >= 0) & (local_row < last_row - first_row) & (local_column >= 0)
        inside &= local_column < stop - start
        local_row = local_row.clamp(0, last_row - first_row - 1)
        if tile_rows is not None:
            local_row = tile_rows[local_row]
        flat = (local_row * tile.shape[1] + local_column).clamp_(0, tile.numel() - 1)
        codes = codes_against(torch.take(tile, flat), true_scores[rows], mark_nan=False)
        self.codes.add_(torch.where(inside, codes, torch.zeros_like(codes)))


def pair_tiles(
    pairs: BatchPairs,
    row_starts: Sequence[int],
    pair_offsets: Sequence[int],
    bounds: Sequence[tuple[int, int]],
    layout: str,
    groups: QueryGroups | Sequence[QueryGroup] | None = None,
) -> PairTiles:
    """The pair layout by name: ``"sorted"`` (may take query groups: :class:`QueryGroups`, or a sequence of
    :class:`QueryGroup` over the candidates the bounds cover) or ``"masked"`` (no synchronisation at all; groups
    must be expanded into pairs instead)."""
    if groups is not None and not isinstance(groups, QueryGroups):
        groups = QueryGroups.of(groups, bounds[-1][1], pairs.rows.device) if groups else None
    if layout == "sorted":
        return SortedPairs(pairs, row_starts, pair_offsets, bounds, groups)
    if groups:
        raise ValueError("query groups need the 'sorted' pair layout")
    return MaskedPairs(pairs, row_starts, pair_offsets, bounds)
