"""kgeval._engine.pairs: filtered pairs of a batch, and per-tile gathers of their comparison codes in both layouts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from kgeval._engine.counting import slice_bounds
from kgeval._engine.filter_index import FilterIndex
from kgeval._engine.pairs import BatchPairs, MaskedPairs, QueryGroup, SortedPairs, expand_pairs, pair_tiles


def _setup(seed: int, restrict: bool):
    rng = np.random.default_rng(seed)
    num_entities = 12
    known = torch.from_numpy(rng.integers(0, [num_entities, 3, num_entities], size=(80, 3)))
    tasks = known[torch.from_numpy(rng.choice(len(known), size=15))]  # evaluated triples are known
    index = FilterIndex(known)
    position_of = None
    candidates = list(range(num_entities))
    if restrict:
        candidates = sorted(set(rng.choice(num_entities, size=8, replace=False).tolist()) | set(tasks[:, 2].tolist()))
        position_of = torch.full((num_entities,), -1)
        position_of[candidates] = torch.arange(len(candidates))
    true_positions = position_of[tasks[:, 2]] if restrict else tasks[:, 2]
    starts, lengths = index.sides["tail"].lookup(tasks[:, 0], tasks[:, 1])
    pairs = expand_pairs(index.sides["tail"], starts, lengths, int(lengths.sum()), true_positions, position_of)
    return known, tasks, candidates, true_positions, pairs


@pytest.mark.parametrize("restrict", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_expand_pairs_lists_every_known_answer(seed: int, restrict: bool) -> None:
    known, tasks, candidates, true_positions, pairs = _setup(seed, restrict)
    known_set = set(map(tuple, known.tolist()))
    position = {e: p for p, e in enumerate(candidates)}
    for row, (h, r, t) in enumerate(tasks.tolist()):
        answers = sorted(e for e in range(12) if (h, r, e) in known_set)
        got = pairs.positions[pairs.rows == row].tolist()
        expected = [position[e] if e in position else int(true_positions[row]) for e in answers]
        assert got == expected
        filtered = [e for e in answers if e != t and e in position]
        assert int(pairs.num_filtered[row]) == len(filtered)
    assert torch.equal(pairs.rows, torch.sort(pairs.rows).values)


def _expected_counts(scores: torch.Tensor, true_scores: torch.Tensor, pairs: BatchPairs) -> tuple[list, list]:
    """Per row: filtered pairs scored above / below the row's true score, by brute force."""
    greater, less = [0] * len(true_scores), [0] * len(true_scores)
    for row, position in zip(pairs.rows.tolist(), pairs.positions.tolist(), strict=True):
        value, true = float(scores[row, position]), float(true_scores[row])
        greater[row] += value > true
        less[row] += value < true
    return greater, less


@pytest.mark.parametrize("row_map", [False, True])
@pytest.mark.parametrize("slice_size", [12, 5, 3])
@pytest.mark.parametrize("seed", range(3))
def test_both_layouts_count_the_pairs_above_and_below(seed: int, slice_size: int, row_map: bool) -> None:
    *_unused, pairs = _setup(seed, restrict=seed == 2)
    row_starts = [0, 4, 9, 15]
    lengths = torch.bincount(pairs.rows, minlength=15)
    offsets = [int(lengths[:start].sum()) for start in row_starts]
    bounds = slice_bounds(12, slice_size)
    rng = np.random.default_rng(seed)
    scores = torch.from_numpy(rng.integers(-1, 2, size=(15, 12)).astype(np.float32))
    true_scores = torch.from_numpy(rng.integers(-1, 2, size=15).astype(np.float32))
    # with a row map, tiles hold the distinct rows (row r of the batch is row 2 * r of a taller score matrix)
    source = torch.zeros(30, 12).index_copy_(0, torch.arange(0, 30, 2), scores) if row_map else scores
    for layout in ("sorted", "masked"):
        tiles = pair_tiles(pairs, row_starts, offsets, bounds, layout)
        assert isinstance(tiles, SortedPairs if layout == "sorted" else MaskedPairs)
        for block, (first, last) in enumerate(itertools.pairwise(row_starts)):
            for j, (start, stop) in enumerate(bounds):
                if row_map:
                    tile_rows = torch.arange(last - first) * 2 + 1  # odd rows: decoys between them
                    tile = torch.full((2 * (last - first) + 1, stop - start), 99.0)
                    tile[tile_rows] = source[2 * first : 2 * last : 2, start:stop]
                else:
                    tile_rows, tile = None, scores[first:last, start:stop].contiguous()
                tiles.gather_(tile, tile_rows, true_scores, block, j)
        greater, less = tiles.counts(15)
        assert (greater.tolist(), less.tolist()) == _expected_counts(scores, true_scores, pairs), layout


def test_query_groups_count_like_their_pairs() -> None:
    """A group's known answers, counted as one block per tile, equal the same answers counted pair by pair."""
    rng = np.random.default_rng(7)
    scores = torch.from_numpy(rng.integers(-1, 2, size=(6, 10)).astype(np.float32))
    true_scores = torch.from_numpy(rng.integers(-1, 2, size=6).astype(np.float32))
    positions = torch.tensor([1, 4, 5, 8])  # rows 2..4 share a query with these known answers
    group = QueryGroup(2, 5, positions)
    rows = torch.tensor([0, 0, 1, 5])
    singles = BatchPairs(rows, torch.tensor([3, 9, 2, 0]), torch.zeros(6, dtype=torch.long))
    everything = BatchPairs(
        torch.cat([rows[:3], torch.arange(2, 5).repeat_interleave(4), rows[3:]]),
        torch.cat([singles.positions[:3], positions.repeat(3), singles.positions[3:]]),
        singles.num_filtered,
    )
    for slice_size in (10, 4, 3):
        bounds = slice_bounds(10, slice_size)
        grouped = pair_tiles(singles, [0, 3, 6], [0, 3, 4], bounds, "sorted", [group])
        for block, (first, last) in enumerate([(0, 3), (3, 6)]):
            for j, (start, stop) in enumerate(bounds):
                grouped.gather_(scores[first:last, start:stop], None, true_scores, block, j)
        counted = [part.tolist() for part in grouped.counts(6)]
        assert counted == list(_expected_counts(scores, true_scores, everything))


def test_empty_pairs() -> None:
    pairs = BatchPairs.empty(3, torch.device("cpu"))
    tiles = pair_tiles(pairs, [0, 3], [0, 0], [(0, 4)], "sorted")
    tile = torch.ones(3, 4)
    tiles.gather_(tile, None, torch.zeros(3), 0, 0)
    assert torch.equal(tile, torch.ones(3, 4))
    assert all(torch.equal(part, torch.zeros(3, dtype=torch.long)) for part in tiles.counts(3))
