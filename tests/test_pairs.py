"""kgeval.pairs: filtered pairs of a batch, and per-tile gathers / zeroing in both layouts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from kgeval.counting import slice_bounds
from kgeval.filtering import FilterIndex
from kgeval.pairs import BatchPairs, MaskedPairs, SortedPairs, expand_pairs, pair_tiles


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
    starts, lengths = index.lookup("tail", tasks[:, :2])
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


@pytest.mark.parametrize("slice_size", [12, 5, 3])
@pytest.mark.parametrize("seed", range(3))
def test_sorted_and_masked_layouts_agree(seed: int, slice_size: int) -> None:
    *_unused, pairs = _setup(seed, restrict=False)
    row_starts = [0, 4, 9, 15]
    lengths = torch.bincount(pairs.rows, minlength=15)
    offsets = [int(lengths[:start].sum()) for start in row_starts]
    bounds = slice_bounds(12, slice_size)
    rng = np.random.default_rng(seed)
    scores = torch.from_numpy(rng.integers(-1, 2, size=(15, 12)).astype(np.float32))
    results = {}
    for layout in ("sorted", "masked"):
        tiles = pair_tiles(pairs, row_starts, offsets, bounds, layout)
        assert isinstance(tiles, SortedPairs if layout == "sorted" else MaskedPairs)
        zeroed = scores.clone()
        for block, (first, last) in enumerate(itertools.pairwise(row_starts)):
            for j, (start, stop) in enumerate(bounds):
                tile = zeroed[first:last, start:stop].contiguous()
                tiles.gather_(tile, block, j)
                tiles.zero_(tile, block, j)
                zeroed[first:last, start:stop] = tile
        results[layout] = (zeroed, *tiles.sums(15))
    for a, b in zip(results["sorted"], results["masked"], strict=True):
        assert torch.equal(a, b)
    expected = scores.clone()
    expected[pairs.rows, pairs.positions] = 0
    assert torch.equal(results["sorted"][0], expected)
    code_sum = torch.zeros(15).index_add_(0, pairs.rows, scores[pairs.rows, pairs.positions])
    assert torch.equal(results["sorted"][1], code_sum)


def test_empty_pairs() -> None:
    pairs = BatchPairs.empty(3, torch.device("cpu"))
    tiles = pair_tiles(pairs, [0, 3], [0, 0], [(0, 4)], "sorted")
    tile = torch.ones(3, 4)
    tiles.gather_(tile, 0, 0)
    tiles.zero_(tile, 0, 0)
    assert torch.equal(tile, torch.ones(3, 4))
    assert all(torch.equal(part, torch.zeros(3)) for part in tiles.sums(3))
