"""kgeval._engine.plan: task order, distinct queries, batch ranges and row blocks of one side."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval._engine.plan import SidePlan


def _plan(seed: int, slice_size: int = 4, with_pairs: bool = True):
    rng = np.random.default_rng(seed)
    queries = torch.from_numpy(rng.integers(0, 4, size=(40, 2)))
    true_positions = torch.from_numpy(rng.integers(0, 10, size=40))
    pair_counts = torch.from_numpy(rng.integers(1, 6, size=40)) if with_pairs else None
    return queries, true_positions, pair_counts, SidePlan(queries, true_positions, slice_size, pair_counts)


@pytest.mark.parametrize("seed", range(3))
def test_order_groups_by_true_slice_then_query(seed: int) -> None:
    queries, true_positions, _counts, plan = _plan(seed)
    order = plan.order
    assert sorted(order.tolist()) == list(range(40))
    keys = [(int(p) // 4, *queries[i].tolist()) for i, p in zip(order.tolist(), true_positions[order], strict=True)]
    assert keys == sorted(keys)
    for position, task in enumerate(order.tolist()):
        assert plan.distinct_queries[plan.query_id[position]].tolist() == queries[task].tolist()
    assert len(plan.distinct_queries) == len(set(keys))


@pytest.mark.parametrize(("batch_size", "max_pairs"), [(7, 1000), (40, 12), (1, 1), (100, 1)])
def test_ranges_respect_sizes_and_groups(batch_size: int, max_pairs: int) -> None:
    _queries, true_positions, counts, plan = _plan(0)
    ranges = list(plan.ranges(batch_size, max_pairs))
    assert [begin for begin, _ in ranges] == [0, *(end for _, end in ranges[:-1])]
    assert ranges[-1][1] == 40
    sorted_counts = counts[plan.order]
    sorted_slices = (true_positions[plan.order] // 4).tolist()
    for begin, end in ranges:
        assert 1 <= end - begin <= batch_size
        assert end - begin == 1 or int(sorted_counts[begin:end].sum()) <= max_pairs
        assert len(set(sorted_slices[begin:end])) == 1


@pytest.mark.parametrize("tile_rows", [1, 3, 16])
def test_batch_blocks_map_task_rows_to_distinct_queries(tile_rows: int) -> None:
    queries, true_positions, counts, plan = _plan(1)
    for begin, end in plan.ranges(12, 10**6):
        batch = plan.batch(begin, end, tile_rows)
        assert torch.equal(batch.tasks, plan.order[begin:end])
        assert batch.true_slice == int(true_positions[batch.tasks[0]]) // 4
        assert batch.num_pairs == int(counts[batch.tasks].sum())
        covered = []
        for block in batch.blocks:
            assert block.row_stop - block.row_start <= tile_rows
            rows = range(block.row_start, block.row_stop)
            local = list(rows) if block.query_rows is None else block.query_rows.tolist()
            if block.query_rows is None:
                local = [r - block.row_start for r in rows]
            for row, query_row in zip(rows, local, strict=True):
                query = batch.queries[block.query_start + query_row]
                assert query.tolist() == queries[batch.tasks[row]].tolist()
            covered.extend(rows)
        assert covered == list(range(end - begin))
        per_task = counts[batch.tasks].tolist()
        expected_offsets = [sum(per_task[: block.row_start]) for block in batch.blocks] + [sum(per_task)]
        assert list(batch.pair_offsets) == expected_offsets


def test_unfiltered_plan_has_no_pairs() -> None:
    _queries, _true, _counts, plan = _plan(2, with_pairs=False)
    batch = plan.batch(0, 5, 2)
    assert batch.num_pairs == 0
    assert set(batch.pair_offsets) == {0}


def test_repeated_queries_with_many_pairs_become_groups() -> None:
    queries = torch.tensor([[0, 0], [1, 0], [0, 0], [2, 0], [0, 0], [1, 0]])
    pair_counts, pair_starts = torch.tensor([5, 1, 5, 9, 5, 1]), torch.tensor([10, 3, 10, 20, 10, 3])
    plan = SidePlan(queries, torch.zeros(6, dtype=torch.long), 4, pair_counts, pair_starts, group_min_pairs=10)
    batch = plan.batch(0, 6, 6)
    # order: the three (0, 0) tasks (15 pairs: a group), the two (1, 0) tasks (2 pairs), then (2, 0)
    assert [(g.row_start, g.row_stop, g.run_start, g.run_length) for g in batch.groups] == [(0, 3, 10, 5)]
    assert batch.pair_counts.tolist() == [0, 0, 0, 1, 1, 9]
    assert batch.num_pairs == 11
    split = plan.batch(1, 4, 2)
    assert [(g.row_start, g.row_stop) for g in split.groups] == [(0, 2)]
    assert SidePlan(queries, torch.zeros(6, dtype=torch.long), 4, pair_counts, pair_starts).batch(0, 6, 6).groups == ()


def test_mixed_slices_order_by_query_only_and_list_each_blocks_true_slices() -> None:
    queries, true_positions, counts, _ = _plan(3)
    plan = SidePlan(queries, true_positions, 4, counts, by_true_slice=False)
    keys = [tuple(queries[i].tolist()) for i in plan.order.tolist()]
    assert keys == sorted(keys)
    assert list(plan.ranges(40, 10**6)) == [(0, 40)]
    batch = plan.batch(0, 40, 7)
    assert batch.true_slice is None
    for block in batch.blocks:
        rows = batch.tasks[block.row_start : block.row_stop]
        assert block.true_slices == tuple(sorted(set((true_positions[rows] // 4).tolist())))


@pytest.mark.parametrize("tile_rows", [1, 2, 5])
@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_batches_and_blocks_by_distinct_queries(batch_size: int, tile_rows: int) -> None:
    """For kernels that read repeated queries in place: sizes count distinct queries, not tasks."""
    queries, _true_positions, _counts, plan = _plan(2)
    ranges = list(plan.ranges(batch_size, 10**6, by_queries=True))
    assert [begin for begin, _ in ranges] == [0, *(end for _, end in ranges[:-1])]
    assert ranges[-1][1] == 40
    for begin, end in ranges:
        distinct = len(set(plan.query_id[begin:end].tolist()))
        assert 1 <= distinct <= batch_size
        batch = plan.batch(begin, end, tile_rows, by_queries=True)
        covered = []
        for block in batch.blocks:
            assert 1 <= block.query_stop - block.query_start <= tile_rows
            local = range(block.row_stop - block.row_start) if block.query_rows is None else block.query_rows.tolist()
            for row, query_row in zip(range(block.row_start, block.row_stop), local, strict=True):
                assert batch.queries[block.query_start + query_row].tolist() == queries[batch.tasks[row]].tolist()
            covered.extend(range(block.row_start, block.row_stop))
        assert covered == list(range(end - begin))
    # a batch holds every task of its queries unless the size or a slice group cuts it
    sizes = [len(set(plan.query_id[b:e].tolist())) for b, e in ranges]
    assert max(sizes) == min(batch_size, len(set(plan.query_id.tolist())))


@pytest.mark.parametrize("seed", range(3))
def test_key_columns_order_each_slice_group_by_the_first_named_column(seed: int) -> None:
    """A scorer's query_order (1, 0) -- a per-relation table's tail side, queries (h, r) -- orders each slice group
    by relation, then head: a relation's tasks are contiguous there; the distinct queries are the same."""
    rng = np.random.default_rng(seed)
    queries = torch.from_numpy(rng.integers(0, 5, size=(60, 2)))
    true_positions = torch.from_numpy(rng.integers(0, 12, size=60))
    plan = SidePlan(queries, true_positions, 4, key_columns=(1, 0))
    order = plan.order.tolist()
    keys = [(int(true_positions[i]) // 4, int(queries[i, 1]), int(queries[i, 0])) for i in order]
    assert keys == sorted(keys)
    default = SidePlan(queries, true_positions, 4)
    assert sorted(map(tuple, plan.distinct_queries.tolist())) == sorted(map(tuple, default.distinct_queries.tolist()))
    for position, task in enumerate(order):
        assert plan.distinct_queries[plan.query_id[position]].tolist() == queries[task].tolist()
