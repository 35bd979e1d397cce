"""kgeval._engine.filter_index: the CSR filter index against brute force, its build paths and its content cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval._engine.filter_index import FilterIndex, FilterIndexCache, stable_argsort
from tests.support.filtering import excluded


def _brute_force(known: set, target: str, queries: list, num_entities: int) -> list[tuple[int, int]]:
    pairs = []
    for row, (a, b) in enumerate(queries):
        for e in range(num_entities):
            if ((a, b, e) if target == "tail" else (e, a, b)) in known:
                pairs.append((row, e))
    return pairs


@pytest.mark.parametrize("scale", [1, 2**22])  # 2**22: ids too large to pack into one int64
@pytest.mark.parametrize("seed", range(4))
def test_excluded_pairs_match_brute_force(seed: int, scale: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 6, size=(60, 3))
    triples = torch.from_numpy(ids * np.array([scale, 1, scale]))  # entities spaced by `scale`
    index = FilterIndex(triples)
    assert index.num_triples == len({tuple(row) for row in ids.tolist()})
    known = {tuple(row) for row in triples.tolist()}
    for target in ("tail", "head"):
        queries = rng.integers(0, 6, size=(25, 2)) * (
            np.array([scale, 1]) if target == "tail" else np.array([1, scale])
        )
        rows, entities = excluded(index, target, torch.from_numpy(queries))
        entity_ids = sorted({row[0] for row in known} | {row[2] for row in known})
        expected = [
            (row, e)
            for row, (a, b) in enumerate(queries.tolist())
            for e in entity_ids
            if ((a, b, e) if target == "tail" else (e, a, b)) in known
        ]
        assert list(zip(rows.tolist(), entities.tolist(), strict=True)) == expected


def test_duplicates_and_empty_index() -> None:
    index = FilterIndex(torch.tensor([[0, 0, 1], [0, 0, 1], [2, 1, 0]]))
    assert index.num_triples == 2
    rows, entities = excluded(index, "head", torch.tensor([[0, 1], [1, 0]]))
    assert (rows.tolist(), entities.tolist()) == ([0, 1], [0, 2])
    empty = FilterIndex(torch.zeros(0, 3, dtype=torch.long))
    rows, entities = excluded(empty, "tail", torch.tensor([[0, 0]]))
    assert rows.numel() == entities.numel() == 0


def test_cache_is_keyed_by_content() -> None:
    cache = FilterIndexCache(max_size=2)
    first = torch.tensor([[0, 0, 1], [1, 0, 2]])
    index = cache.get([first], torch.device("cpu"))
    assert cache.get([first.clone()], torch.device("cpu")) is index
    assert (cache.hits, cache.misses) == (1, 1)
    assert cache.get([first[:1], first[1:]], torch.device("cpu")) is not index  # other tensor boundaries
    cache.get([first + 1], torch.device("cpu"))
    cache.get([first.flip(0)], torch.device("cpu"))
    assert cache.get([first], torch.device("cpu")) is not index  # evicted (least recently used)


def test_each_stride_is_cached_apart_and_the_content_hashed_once(monkeypatch) -> None:
    from kgeval._engine import filter_index

    digests = []
    digest = filter_index.content_fingerprint
    monkeypatch.setattr(filter_index, "content_fingerprint", lambda tensors: digests.append(1) or digest(tensors))
    cache = FilterIndexCache()
    triples = torch.tensor([[0, 0, 1], [0, 1, 2], [3, 2, 2]])
    coarse, exact = cache.get_each([triples], torch.device("cpu"), (2, 1))
    assert len(digests) == 1 and (cache.hits, cache.misses) == (0, 2)
    assert (coarse.relation_stride, exact.relation_stride) == (2, 1)
    assert cache.get([triples], torch.device("cpu"), 2) is coarse and cache.get([triples], torch.device("cpu")) is exact


def test_stable_argsort_matches_torch() -> None:
    values = torch.from_numpy(np.random.default_rng(0).integers(0, 5, size=200))
    assert torch.equal(stable_argsort(values), torch.argsort(values, stable=True))


# -- property-based: against a dense brute force over every entity --------------------------------------------
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
    rows, entities = excluded(FilterIndex(triples), target, queries)
    pairs = list(zip(rows.tolist(), entities.tolist(), strict=True))
    assert len(pairs) == len(set(pairs))  # duplicates in the triples collapse
    assert set(pairs) == dense_pairs(triples, queries, target)


def test_changes_in_two_blocks_that_cancel_in_weights_alone_change_the_key() -> None:
    """Blocks were weighted 1, 3, 5, ...: a change at one offset of block 0 and of block 1 in the ratio -3 : 1 left
    the key as it was, and a reused evaluator ranked with the stale index (a known triple left unfiltered)."""
    import torch

    from kgeval._engine.filter_index import FINGERPRINT_CHUNK, content_fingerprint

    first = torch.tensor([[5, 0, 5]]).repeat(FINGERPRINT_CHUNK // 3 + 2, 1)
    second = first.clone()
    second[0, 2] = 2  # -3 at offset 2 of block 0
    offset = FINGERPRINT_CHUNK + 2  # offset 2 of block 1
    second.view(-1)[offset] += 1
    assert content_fingerprint([first]) != content_fingerprint([second])
