"""The evaluator's ``memory_budget``: the default on CUDA (the free memory mocked), the CPU's cache-sized tiles,
an explicit budget honoured by the peak of a real evaluation, and the check of the argument."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from kgeval import RankBasedEvaluator, TemporalRankBasedEvaluator
from kgeval._engine import sizes as batching
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.kernels import COMPARE
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, LoopSettings
from kgeval._engine.scoring import FullRowScorer, SlicedScorer
from kgeval.models import DistMult
from kgeval.variants.macro import MacroRankBasedEvaluator
from tests.helpers.graphs import FullScoreTableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
GiB, MiB = 2**30, 2**20


def _scorer(kind: type, num_candidates: int):
    """A scorer of the given class for ``num_candidates`` candidates (no model needed for sizing)."""
    scorer = object.__new__(kind)
    scorer.num_candidates = num_candidates
    scorer._candidates = torch.zeros(0, 8)
    return scorer


def _free_memory(monkeypatch, free: int) -> None:
    """Pretend a CUDA device with ``free`` bytes free (of 141 GiB)."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 141 * GiB))


def _bytes_of(sizes: batching.Sizes, gemm: bool = False) -> int:
    """The bytes budgeted for a batch of these sizes: the scores it holds at once (DEVICE_BYTES_PER_SCORE each with
    the kernel's temporaries: a tile of a GEMM scorer, else every row of a model call) and its filtered pairs
    (PAIR_BYTES each)."""
    rows = sizes.tile_rows if gemm else sizes.batch_size
    return rows * sizes.slice_size * batching.DEVICE_BYTES_PER_SCORE + sizes.max_pairs * batching.PAIR_BYTES


# -- the default on CUDA ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("free", "expected"), [(140 * GiB, 2 * GiB), (4 * GiB, 1 * GiB), (100 * MiB, 25 * MiB)])
def test_the_cuda_default_is_the_smaller_of_2_gib_and_a_quarter_of_the_free_memory(monkeypatch, free, expected):
    _free_memory(monkeypatch, free)
    assert batching.default_memory_budget(CUDA) == expected
    # FB15k-237's tail side on an H200: every batch of 20,466 test tasks within the budget (half of the free
    # memory before: 70 GiB)
    sizes = batching.choose_sizes(_scorer(GemmScorer, 14541), 20466, CUDA)
    assert _bytes_of(sizes) <= expected
    assert sizes.tile_rows == sizes.batch_size  # no cache tiles on an accelerator
    assert batching.keep_budget(CUDA) * 4 <= expected * batching.KEEP_SHARE


def test_an_explicit_budget_wins_over_the_free_memory_on_cuda(monkeypatch) -> None:
    _free_memory(monkeypatch, 140 * GiB)
    for budget in (64 * MiB, 8 * GiB):
        sizes = batching.choose_sizes(_scorer(FullRowScorer, 10**5), 10**6, CUDA, memory_budget=budget)
        assert _bytes_of(sizes) <= budget
        assert sizes.batch_size == budget // 2 // batching.DEVICE_BYTES_PER_SCORE // 10**5  # the scores' half
        assert sizes.memory_budget == budget
        assert batching.keep_budget(CUDA, budget) == budget // 4 // 4


# -- the CPU ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [GemmScorer, FullRowScorer, SlicedScorer])
def test_the_cpu_keeps_its_cache_sized_sizes_unless_the_budget_is_smaller(kind) -> None:
    default = batching.choose_sizes(_scorer(kind, 14541), 20466, CPU)
    assert batching.choose_sizes(_scorer(kind, 14541), 20466, CPU, memory_budget=64 * GiB) == \
        batching.Sizes(**{**default.__dict__, "memory_budget": 64 * GiB})  # fmt: skip
    small = batching.choose_sizes(_scorer(kind, 14541), 20466, CPU, memory_budget=4 * MiB)
    gemm = kind is GemmScorer
    assert _bytes_of(small, gemm) <= 4 * MiB < _bytes_of(default, gemm)
    tall = batching.with_tall_tiles(small, CPU)
    assert tall.tile_rows * tall.slice_size * batching.DEVICE_BYTES_PER_SCORE <= 4 * MiB * batching.SCORES_SHARE
    assert batching.keep_budget(CPU) == batching.CPU_KEEP_BUDGET
    assert batching.keep_budget(CPU, 4 * MiB) == MiB // 4


def test_mixed_slice_batches_keep_within_the_budget() -> None:
    budget = 8 * MiB
    chosen = batching.choose_sizes(_scorer(SlicedScorer, 300_000), 301, CPU, memory_budget=budget)
    sizes = batching.for_mixed_slices(chosen, CPU, 300_000)
    rows = sizes.batch_size
    assert rows * min(rows * sizes.slice_size, 300_000) * 4 <= budget * batching.KEEP_SHARE


# -- the argument -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [0, -1, 1.5, 2.0**30, "2GiB", True])
@pytest.mark.parametrize("evaluator", [RankBasedEvaluator, TemporalRankBasedEvaluator])
def test_a_budget_that_is_not_a_positive_integer_is_refused(evaluator, budget) -> None:
    with pytest.raises(ValueError, match=r"memory_budget must be a positive integer or None, got"):
        evaluator(memory_budget=budget)


def test_the_budget_is_kept_and_none_means_the_default() -> None:
    assert RankBasedEvaluator(memory_budget=3 * GiB).memory_budget == 3 * GiB
    assert RankBasedEvaluator().memory_budget is None
    assert TemporalRankBasedEvaluator(memory_budget=MiB).memory_budget == MiB
    assert MacroRankBasedEvaluator(memory_budget=MiB).memory_budget == MiB  # the evaluators built on it take it too


def test_pykeens_evaluator_on_kgeval_takes_the_budget() -> None:
    pytest.importorskip("pykeen")
    from kgeval.integrations.pykeen import RankBasedEvaluator as OnPyKEEN

    assert OnPyKEEN(memory_budget=MiB).memory_budget == MiB
    with pytest.raises(ValueError, match="memory_budget must be a positive integer"):
        OnPyKEEN(memory_budget=0)


# -- the peak of an evaluation ------------------------------------------------------------------------------------
def _walk(nodes) -> Iterator:
    for node in nodes:
        yield node
        yield from _walk(node.children)


def peak_bytes(call: Callable[[], object]) -> int:
    """The most bytes the CPU allocator held at once while ``call`` ran, above what it held before: every
    allocation and free the profiler saw (temporaries inside an op included), replayed in time order."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    events = prof.profiler.kineto_results.experimental_event_tree()  # type: ignore[union-attr]
    allocations = sorted((node.start_time_ns, node.extra_fields.alloc_size) for node in _walk(events)
                         if node.tag == _EventType.Allocation)  # fmt: skip
    live = peak = 0
    for _, size in allocations:
        live += size
        peak = max(peak, live)
    return peak


def _device_path(evaluator: RankBasedEvaluator) -> RankBasedEvaluator:
    """``evaluator`` counting as on an accelerator, on CPU tensors: the explicit comparisons of whole tiles
    (``COMPARE``) in the masked pair layout (the engine's loop settings, which tests use to force a code path)."""
    evaluator._state = EngineState(kernels=KernelChooser(COMPARE), settings=LoopSettings(layout="masked"))
    return evaluator


@pytest.mark.slow
@pytest.mark.parametrize("scorer", ["gemm", "model_rows"])
def test_an_evaluation_stays_within_its_budget(scorer: str) -> None:
    """2,500 entities, 100 triples ranked on both sides, by DistMult's GEMM form or by a model's full score rows:
    with the default CPU sizes an evaluation holds 2-3 MiB at once; with a 512 KiB budget -- on the device's kernel
    and pair layout, the filter index built by a first call -- it never holds more than the budget above what it
    held before, and ranks as the brute force does."""
    graph = random_graph(3, num_entities=2500, num_relations=1, num_triples=100, num_filter=1000)
    model, table = _model_and_table(scorer, 2500)

    def evaluation(evaluator: RankBasedEvaluator) -> Callable[[], object]:
        return lambda: evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples,
                                          use_tqdm=False)  # fmt: skip

    budget = 512 * 2**10
    bounded = _device_path(RankBasedEvaluator(memory_budget=budget))
    results = evaluation(bounded)()  # builds and caches the filter index
    default = _device_path(RankBasedEvaluator())
    evaluation(default)()
    assert peak_bytes(evaluation(default)) > 2 * budget  # the test has something to bound
    assert peak_bytes(evaluation(bounded)) <= budget
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


def _model_and_table(scorer: str, num_entities: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """A one-relation model ranked through a GEMM form (DistMult with integer vectors: exact float32 scores) or
    through full score rows, and its score table (entities, 1, entities)."""
    if scorer == "model_rows":
        table = quantised_table(4, num_entities, 1, levels=3)
        return FullScoreTableModel(table), table
    torch.manual_seed(3)
    model = DistMult(num_entities, 1, dim=16)
    with torch.no_grad():
        for embedding in (model.entity_embeddings, model.relation_embeddings):
            embedding.weight.mul_(4).round_()
    entities = model.entity_embeddings.weight.detach().double()
    relations = model.relation_embeddings.weight.detach().double()
    return model, torch.einsum("hd,rd,td->hrt", entities, relations, entities).float()
