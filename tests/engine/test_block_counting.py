"""Counting each GEMM block while in cache (kgeval._engine.kernels.block_counting, the numba kernel's CPU fast path).

Every evaluation here is compared with the brute-force reference on integer vectors (exact in any summation
order, so the reference's float64 scores are the GEMM's), with many ties: raw and filtered, DistMult ("dot") and
TransE ("l2"), a whitelist in shuffled order (whose filtered runs need sorting), forced query groups, several
batch sizes, blocks of a few columns and row blocks of a few queries. A spy checks that every batch was counted
block by block -- never silently by the tile path -- and, in the fallback tests, that a band that misses or
overflows sends the batch to the tile path, with the same exact ranks.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import loop as ranking
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.kernels import NUMBA, block_counting
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, LoopSettings
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

pytest.importorskip("numba")


def integer_model(model, seed: int, dtype: torch.dtype = torch.float32):
    """The model with embeddings in {-1, 0, 1}: exact scores in every summation order, many ties."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for embedding in (model.entity_embeddings, model.relation_embeddings):
            embedding.weight.copy_(torch.randint(-1, 2, embedding.weight.shape, generator=generator))
    return model.to(dtype)


def score_table(model) -> torch.Tensor:
    """score[h, r, t] in float64 from the model's integer embeddings (TransE: -||h + r - t||^2, which orders the
    tails like its -||h + r - t||)."""
    entities = model.entity_embeddings.weight.double()
    relations = model.relation_embeddings.weight.double()
    if isinstance(model, DistMult):
        return torch.einsum("hd,rd,td->hrt", entities, relations, entities)
    translated = entities[:, None, None, :] + relations[None, :, None, :] - entities[None, None, :, :]
    return -(translated * translated).sum(dim=-1)


class Spy:
    """Records what :func:`block_counting.count_in_cache` returned for each batch."""

    def __init__(self, monkeypatch) -> None:
        self.results: list[bool] = []
        original = block_counting.count_in_cache

        def spy(*args, **kwargs):
            counted = original(*args, **kwargs)
            self.results.append(counted is not None)
            return counted

        monkeypatch.setattr(block_counting, "count_in_cache", spy)


@pytest.fixture
def small_blocks(monkeypatch) -> None:
    """Blocks of 16 candidates, up to 3 per kernel call (the last group shorter), row blocks of 5 queries, room for
    every tie: many blocks, groups and row blocks on a small graph, and no fallback."""
    monkeypatch.setattr(GemmScorer, "block_columns", 16)
    monkeypatch.setattr(block_counting, "SCORES_PER_CALL", 16 * 3 * 40)  # 3 blocks for 40 tasks, 1 for 120
    monkeypatch.setattr(block_counting, "MAX_BLOCKS_PER_CALL", 3)
    monkeypatch.setattr(block_counting, "BLOCK_ROWS", 5)
    monkeypatch.setattr(block_counting, "KEPT_PER_TASK", 256)


def evaluate(model, graph, filtered=True, batch_size=None, whitelist=None, group_min_pairs=None):
    evaluator = RankBasedEvaluator(filtered=filtered, kernel="numba", batch_size=batch_size)
    settings = LoopSettings(group_min_pairs=group_min_pairs or ranking.GROUP_MIN_PAIRS)
    evaluator._state = EngineState(kernels=KernelChooser(NUMBA), settings=settings)
    triples = graph.triples
    if whitelist is not None:  # the evaluation triples whose head and tail are candidates
        allowed = torch.zeros(model.num_entities, dtype=torch.bool)
        allowed[whitelist] = True
        triples = triples[allowed[triples[:, 0]] & allowed[triples[:, 2]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = evaluator.evaluate(model, triples, additional_filter_triples=graph.filter_triples,
                                     restrict_entities_to=whitelist, use_tqdm=False)  # fmt: skip
    return results, triples


def assert_reference(results, model, triples, graph, filtered, whitelist=None) -> None:
    restrict = None if whitelist is None else whitelist.tolist()
    table = score_table(model)
    if filtered in (True, "both"):
        expected = reference_ranks(table, triples, graph.filter_triples, filtered=True, restrict_entities_to=restrict)
        assert_same_ranks(results.records, expected)
    raw = results.raw.records if filtered == "both" else (results.records if not filtered else None)
    if raw is not None:
        expected = reference_ranks(table, triples, graph.filter_triples, filtered=False, restrict_entities_to=restrict)
        assert_same_ranks(raw, expected)


@pytest.mark.parametrize("model_class", [DistMult, TransE])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("filtered", "batch_size", "restrict", "group_min_pairs"), [
    (True, None, False, None), ("both", 7, False, 1), (False, 3, False, None), (True, 5, True, None),
    ("both", None, True, 1), (True, 1, False, None)])  # fmt: skip
def test_block_counts_equal_the_reference(model_class, dtype, filtered, batch_size, restrict, group_min_pairs,
                                          small_blocks, monkeypatch) -> None:  # fmt: skip
    graph = random_graph(20, num_entities=70, num_relations=3, num_triples=60, num_filter=200)
    model = integer_model(model_class(70, 3, dim=4), seed=21, dtype=dtype)
    # a whitelist in shuffled order: candidate positions do not follow entity ids, so filtered runs need sorting
    whitelist = torch.from_numpy(np.random.default_rng(22).permutation(70)[:50]) if restrict else None
    monkeypatch.setattr(GemmScorer, "_scores", lambda *args: pytest.fail("a score tile was written"))
    spy = Spy(monkeypatch)
    results, triples = evaluate(model, graph, filtered, batch_size, whitelist, group_min_pairs)
    assert spy.results and all(spy.results)  # every batch counted block by block
    assert_reference(results, model, triples, graph, filtered, whitelist)
    assert (results.records.pessimistic > results.records.optimistic).any()  # the integers tie candidates


@pytest.mark.parametrize("model_class", [DistMult, TransE])
@pytest.mark.parametrize(("filtered", "restrict", "group_min_pairs"), [("both", False, 1), (True, True, None)])
def test_scores_inside_a_wide_band_are_compared_exactly(model_class, filtered, restrict, group_min_pairs,
                                                        small_blocks, monkeypatch) -> None:  # fmt: skip
    """Bands widened to +-1.5 around integer scores: the scores one above and one below the true score fall
    inside, so the kept scores decide the counts (with the narrow bands only exact ties with the true score fall
    inside, and losing one of those would not change a count)."""
    original = GemmScorer.score_bands

    def widened(self, query_rows, positions):
        low, high = original(self, query_rows, positions)
        return low - 1.5, high + 1.5

    monkeypatch.setattr(GemmScorer, "score_bands", widened)
    graph = random_graph(33, num_entities=70, num_relations=3, num_triples=60, num_filter=200)
    model = integer_model(model_class(70, 3, dim=4), seed=34)
    whitelist = torch.from_numpy(np.random.default_rng(35).permutation(70)[:50]) if restrict else None
    spy = Spy(monkeypatch)
    results, triples = evaluate(model, graph, filtered, 6, whitelist, group_min_pairs)
    assert spy.results and all(spy.results)
    assert_reference(results, model, triples, graph, filtered, whitelist)


def test_more_ties_than_kept_fall_back_to_the_tile_path(small_blocks, monkeypatch) -> None:
    monkeypatch.setattr(block_counting, "KEPT_PER_TASK", 1)  # the true score and one more tie overflow it
    graph = random_graph(25, num_entities=70, num_relations=3, num_triples=60, num_filter=200)
    model = integer_model(DistMult(70, 3, dim=4), seed=26)
    spy = Spy(monkeypatch)
    results, triples = evaluate(model, graph, "both")
    assert spy.results and not any(spy.results)  # every batch had a task with ties: counted tile by tile
    assert_reference(results, model, triples, graph, "both")


def test_a_band_that_misses_the_true_score_falls_back_to_the_tile_path(small_blocks, monkeypatch) -> None:
    original = GemmScorer.score_bands

    def shifted(self, query_rows, positions):
        low, high = original(self, query_rows, positions)
        return low + 100, high + 100  # holds no score of these integer vectors

    monkeypatch.setattr(GemmScorer, "score_bands", shifted)
    graph = random_graph(27, num_entities=70, num_relations=3, num_triples=60, num_filter=200)
    model = integer_model(TransE(70, 3, dim=4), seed=28)
    spy = Spy(monkeypatch)
    results, triples = evaluate(model, graph, True, batch_size=9)
    assert spy.results and not any(spy.results)
    assert_reference(results, model, triples, graph, True)


def test_unbounded_scores_take_the_tile_path(monkeypatch) -> None:
    """An infinite embedding: scores of +-inf, where no band can be built, so no batch is counted by blocks (the
    tile path ranks them as ordinary values)."""
    graph = random_graph(29, num_entities=30, num_relations=2, num_triples=20, num_filter=40)
    model = integer_model(DistMult(30, 2, dim=3), seed=30)
    with torch.no_grad():  # entries of +-1 only (no inf * 0 = NaN), one of them infinite
        for embedding in (model.entity_embeddings, model.relation_embeddings):
            embedding.weight.copy_(torch.where(embedding.weight >= 0, 1.0, -1.0))
        model.entity_embeddings.weight[3, 0] = float("inf")
    spy = Spy(monkeypatch)
    results, triples = evaluate(model, graph, True)
    assert not spy.results
    assert_reference(results, model, triples, graph, True)


@torch.no_grad()
def test_the_bands_hold_the_gemms_scores_on_random_vectors() -> None:
    """Float vectors, where the GEMM rounds: every true score lies inside its band (else the batch would fall back)
    and the bands are narrow -- on a 14,000-candidate row, a handful of other scores fall inside."""
    generator = torch.Generator().manual_seed(31)
    model = DistMult(14_000, 2, dim=200, seed=32)
    scorer = GemmScorer(model, "tail", 14_000, None)
    queries = torch.stack([torch.randint(0, 14_000, (300,), generator=generator),
                           torch.randint(0, 2, (300,), generator=generator)], dim=1)  # fmt: skip
    scorer.begin(queries)
    assert scorer.counts_in_cache
    rows, answers = torch.arange(300), torch.randint(0, 14_000, (300,), generator=generator)
    low, high = scorer.score_bands(rows, answers)
    scores = torch.empty(300, 14_000)
    for first in range(0, 14_000, scorer.block_columns):
        stop = min(first + scorer.block_columns, 14_000)
        block = torch.empty(300, stop - first)
        scorer.product_block(0, 300, first, stop, block)
        scores[:, first:stop] = block
    true = scores[rows, answers]
    assert bool(((low <= true) & (true <= high)).all())
    inside = ((scores >= low[:, None]) & (scores <= high[:, None])).sum(dim=1)
    assert int(inside.max()) <= 16 and float(inside.double().mean()) < 4


@pytest.mark.parametrize("kernel", ["eager", "numba"])
def test_tiles_with_cache_line_rows_equal_the_reference(kernel, monkeypatch) -> None:
    """The tile path (the eager kernel; numba with block counting off): 1,030 candidates, so tiles are written in
    column blocks through a row stride padded to whole cache lines (1,040), which every reader must step over."""
    monkeypatch.setattr(block_counting, "applies", lambda *args: False)
    graph = random_graph(36, num_entities=1030, num_relations=3, num_triples=80, num_filter=3000)
    model = integer_model(DistMult(1030, 3, dim=4), seed=37)
    strides = []
    original = GemmScorer._scores

    def recorded(self, vectors):
        tile = original(self, vectors)
        strides.append(tile.stride(0))
        return tile

    monkeypatch.setattr(GemmScorer, "_scores", recorded)
    evaluator = RankBasedEvaluator(filtered="both", kernel=kernel)
    results = evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples,
                                 use_tqdm=False)  # fmt: skip
    assert set(strides) == {1040}
    assert_reference(results, model, graph.triples, graph, "both")
