"""FilterIndex against a dense brute force (property-based), and its content-keyed cache."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval.filtering import FilterIndex, FilterIndexCache

triples_strategy = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 2), st.integers(0, 6)), min_size=1, max_size=40
).map(lambda rows: torch.tensor(rows, dtype=torch.long))
queries_strategy = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=15).map(
    lambda rows: torch.tensor(rows, dtype=torch.long)
)


def dense_pairs(triples: torch.Tensor, queries: torch.Tensor, target: str) -> set[tuple[int, int]]:
    known = {tuple(row) for row in triples.tolist()}
    pairs = set()
    for row, (a, b) in enumerate(queries.tolist()):
        for entity in range(8):
            triple = (a, b, entity) if target == "tail" else (entity, a, b)
            if triple in known:
                pairs.add((row, entity))
    return pairs


@settings(max_examples=150, deadline=None)
@given(triples=triples_strategy, queries=queries_strategy, target=st.sampled_from(["head", "tail"]))
def test_excluded_pairs_equal_dense_brute_force(triples, queries, target) -> None:
    rows, entities = FilterIndex(triples).excluded(target, queries)
    pairs = list(zip(rows.tolist(), entities.tolist(), strict=True))
    assert len(pairs) == len(set(pairs))  # duplicates in the triples collapse
    assert set(pairs) == dense_pairs(triples, queries, target)


def test_values_sorted_within_each_key() -> None:
    index = FilterIndex(torch.tensor([[0, 0, 5], [0, 0, 1], [0, 0, 3], [2, 0, 1]]))
    _rows, entities = index.excluded("tail", torch.tensor([[0, 0]]))
    assert entities.tolist() == [1, 3, 5]
    assert index.num_triples == 4


def test_cache_is_keyed_by_content() -> None:
    cache = FilterIndexCache(max_size=2)
    a = torch.tensor([[0, 0, 1], [1, 0, 2]])
    first = cache.get([a], torch.device("cpu"))
    assert cache.get([a.clone()], torch.device("cpu")) is first
    assert (cache.hits, cache.misses) == (1, 1)
    other = cache.get([a, torch.tensor([[2, 0, 2]])], torch.device("cpu"))
    assert other is not first and cache.misses == 2
    cache.get([torch.tensor([[3, 0, 3]])], torch.device("cpu"))  # evicts the least recently used (first)
    cache.get([a], torch.device("cpu"))
    assert cache.misses == 4
