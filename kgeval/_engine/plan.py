"""Planning one ranking side: the order of its tasks (by the slice of their answer, then by query), its batches
and the row blocks of each batch, read to the host in one synchronisation before the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from kgeval._engine.counting import RowBlock
from kgeval._engine.filter_index import pack_pairs


@dataclass(frozen=True)
class PlannedBatch:
    """One batch, ready to count: tasks [begin, end) of the plan's order."""

    begin: int
    end: int
    tasks: torch.Tensor  #: LongTensor (B,): positions into the side's tasks
    queries: torch.Tensor  #: LongTensor (U, 2): the distinct queries of the batch
    true_slice: int | None  #: the slice holding every true answer; None: answers in several slices
    num_pairs: int  #: filtered pairs of the batch (host-known)
    blocks: tuple[RowBlock, ...]
    #: index of the first filtered pair of each row block, then ``num_pairs`` (pairs are sorted by task row)
    pair_offsets: tuple[int, ...]
    #: repeated queries whose filtered candidates are handled as a block (kgeval._engine.pairs.QueryGroup)
    groups: tuple[QueryGroupPlan, ...] = ()
    #: LongTensor (B,): filtered pairs to expand per task (0 for the tasks of ``groups``)
    pair_counts: torch.Tensor | None = None


@dataclass(frozen=True)
class QueryGroupPlan:
    """Task rows [row_start, row_stop) of a batch sharing one query, whose known answers are the index run
    [run_start, run_start + run_length)."""

    row_start: int
    row_stop: int
    run_start: int
    run_length: int


class SidePlan:
    """Task order and batches of one side.

    Parameters
    ----------
    queries : LongTensor of shape (n, 2)
        The query of every task (layout of score_t / score_h).
    true_positions : LongTensor of shape (n,)
        Candidate position of every task's true answer.
    slice_size : int
        Width of the candidate slices.
    pair_counts, pair_starts : LongTensor of shape (n,), optional
        Length and start of every task's run in the filter index (None: unfiltered).
    group_min_pairs : int, optional
        A query shared by several tasks whose runs hold at least this many pairs in total becomes a group:
        its filtered candidates are removed with one block operation per tile instead of pair by pair
        (kgeval._engine.pairs). None: no groups.
    by_true_slice : bool, default=True
        Group the tasks by the slice of their true answer, so each batch reads its true scores from the tiles
        it counts. False (few tasks over many slices) mixes the slices in a batch: the true scores then come
        from a first pass over the true answers' tiles (same tile shapes), at most doubling the scoring.
    key_columns : (int, int), default=(0, 1)
        The query columns the tasks of a slice group are ordered by, the first first (the scorer's
        ``query_order``: a per-relation candidate table wants a relation's tasks together).
    """

    def __init__(
        self,
        queries: torch.Tensor,
        true_positions: torch.Tensor,
        slice_size: int,
        pair_counts: torch.Tensor | None = None,
        pair_starts: torch.Tensor | None = None,
        group_min_pairs: int | None = None,
        by_true_slice: bool = True,
        key_columns: tuple[int, int] = (0, 1),
    ) -> None:
        device = queries.device
        keys = pack_pairs(queries[:, key_columns[0]], queries[:, key_columns[1]])
        columns = [keys, true_positions]
        if pair_counts is not None:
            columns.append(pair_counts)
            if group_min_pairs is not None and pair_starts is not None:
                columns.append(pair_starts)
        # the single host synchronisation of the plan: every per-task column in one transfer, planned in numpy
        host = torch.stack(columns).cpu().numpy()
        true_slices = host[1] // slice_size
        slice_of_task = true_slices if by_true_slice else np.zeros_like(true_slices)
        order = np.lexsort((host[0], slice_of_task))  # by slice, then by query (stable)
        sorted_keys, sorted_slices = host[0][order], slice_of_task[order]
        new_query = np.ones(order.size, dtype=bool)
        new_query[1:] = (sorted_keys[1:] != sorted_keys[:-1]) | (sorted_slices[1:] != sorted_slices[:-1])
        query_id = np.cumsum(new_query) - 1
        self.by_true_slice = by_true_slice
        self._true_slices = true_slices[order]
        self.order = torch.from_numpy(order).to(device)
        self.query_id = torch.from_numpy(query_id).to(device)  #: distinct-query id of each task, in plan order
        self.distinct_queries = queries.index_select(0, torch.from_numpy(order[new_query]).to(device))
        self.num_tasks = int(order.size)
        self._query_id = query_id
        self._slices = sorted_slices
        counts = host[2][order] if pair_counts is not None else np.zeros(self.num_tasks, np.int64)
        self._run_lengths = counts
        self._grouped = np.zeros(self.num_tasks, dtype=bool)
        if len(columns) == 4 and self.num_tasks:
            multiplicity = np.bincount(self._query_id)[self._query_id]
            self._grouped = (multiplicity >= 2) & (multiplicity * counts >= group_min_pairs)
            self._run_starts = host[3][order]
        expanded = np.where(self._grouped, 0, counts)
        self._pairs_before = np.concatenate([[0], np.cumsum(expanded)])
        self._expanded = torch.from_numpy(expanded).to(device)

    def ranges(self, batch_size: int, max_pairs: int, by_queries: bool = False) -> Iterator[tuple[int, int]]:
        """Batches as [begin, end) ranges of the order: at most ``batch_size`` tasks (``by_queries``: distinct
        queries) and, beyond a first task, at most ``max_pairs`` filtered pairs; never across a slice group."""
        boundaries = np.flatnonzero(np.diff(self._slices)) + 1
        for group_begin, group_end in zip([0, *boundaries], [*boundaries, self.num_tasks], strict=True):
            begin = int(group_begin)
            while begin < group_end:
                limit = int(np.searchsorted(self._pairs_before, self._pairs_before[begin] + max_pairs, side="right"))
                size_end = begin + batch_size
                if by_queries:
                    size_end = int(np.searchsorted(self._query_id, self._query_id[begin] + batch_size, side="left"))
                end = min(size_end, int(group_end), max(limit - 1, begin + 1))
                yield begin, end
                begin = end

    def batch(self, begin: int, end: int, tile_rows: int, by_queries: bool = False) -> PlannedBatch:
        """Materialise tasks [begin, end) with row blocks of at most ``tile_rows`` tasks (``by_queries``: tasks
        of at most ``tile_rows`` distinct queries, for kernels that read repeated queries' rows in place)."""
        ids = self._query_id[begin:end]
        first = int(ids[0])
        blocks = []
        if by_queries:
            cuts = np.searchsorted(ids - first, np.arange(tile_rows, int(ids[-1]) - first + 1, tile_rows))
            row_ranges: Iterable[tuple[int, int]] = zip([0, *cuts.tolist()], [*cuts.tolist(), end - begin], strict=True)
        else:
            row_ranges = ((start, min(start + tile_rows, end - begin)) for start in range(0, end - begin, tile_rows))
        for row_start, row_stop in row_ranges:
            query_start, query_stop = int(ids[row_start]) - first, int(ids[row_stop - 1]) - first + 1
            query_rows = None
            if query_stop - query_start != row_stop - row_start:
                query_rows = self.query_id[begin + row_start : begin + row_stop] - (first + query_start)
            true_slices = (
                ()
                if self.by_true_slice
                else tuple(np.unique(self._true_slices[begin + row_start : begin + row_stop]).tolist())
            )
            blocks.append(RowBlock(row_start, row_stop, query_start, query_stop, query_rows, true_slices))
        before = self._pairs_before
        pair_offsets = tuple(int(before[begin + block.row_start] - before[begin]) for block in blocks)
        return PlannedBatch(
            groups=self._groups(begin, end),
            pair_counts=self._expanded[begin:end],
            begin=begin,
            end=end,
            tasks=self.order[begin:end],
            queries=self.distinct_queries[first : int(ids[-1]) + 1],
            true_slice=int(self._slices[begin]) if self.by_true_slice else None,
            num_pairs=int(before[end] - before[begin]),
            blocks=tuple(blocks),
            pair_offsets=(*pair_offsets, int(before[end] - before[begin])),
        )

    def _groups(self, begin: int, end: int) -> tuple[QueryGroupPlan, ...]:
        """The grouped tasks of [begin, end), one entry per query (rows relative to ``begin``)."""
        rows = np.flatnonzero(self._grouped[begin:end])
        if rows.size == 0:
            return ()
        ids = self._query_id[begin + rows]
        firsts = np.flatnonzero(np.diff(ids, prepend=-1))
        lasts = [*(firsts[1:] - 1), rows.size - 1]
        return tuple(
            QueryGroupPlan(
                int(rows[a]), int(rows[b]) + 1, int(self._run_starts[begin + rows[a]]),
                int(self._run_lengths[begin + rows[a]]),
            )
            for a, b in zip(firsts, lasts, strict=True)
        )  # fmt: skip
