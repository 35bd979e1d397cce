"""Batch sizes of a graph-conditioned model from its measured memory per query (kgeval._engine.sizes.measured_sizes,
kgeval._engine.memory_meter): the meter against the profiler's allocator events, the batch a known workspace gives,
the peak of a whole evaluation within the budget, exact ranks, a given batch size, a budget below one query, the
CPU and CUDA defaults (CUDA's memory functions mocked). Every other model scored through its own methods:
tests/engine/test_measured_own_methods.py."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import sizes as batching
from kgeval._engine.memory_meter import LiveTensorBytes, peak_call_bytes
from kgeval.adapters.graph import on_graphs
from kgeval.exceptions import MemoryBudgetWarning
from kgeval.graphs import Graph
from tests.engine.test_memory_budget import peak_bytes
from tests.helpers.graphs import FullScoreTableModel
from tests.helpers.loop_ranks import loop_ranks
from tests.helpers.ranks import assert_same_ranks
from tests.support.fully_inductive import random_fully_inductive

CPU = torch.device("cpu")
GiB, MiB = 2**30, 2**20
ENTITIES, WIDTH = 200, 256  #: the stand-in's graph nodes, and the floats per node of its workspace per query


class WideWorkspace(torch.nn.Module):
    """A graph-conditioned stand-in whose memory per query is known by construction: each call builds a (Q, N, d)
    float32 workspace -- 4 * N * d bytes per query, as a message-passing model holds a d-vector per node per query
    -- and scores from it integer counts of the graph's edges (heavy ties; exact in any batch): a tail candidate e
    of (h, r) scores e's edges of relation r in plus 2 per edge h -> e; a head candidate mirrors it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []  #: the queries of each call, in order
        self._tables: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def tables(self, graph: Graph) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(edges of each relation into each node (R, N), out of each node (R, N), edges u -> v (N, N)), once."""
        if id(graph) not in self._tables:
            with torch.inference_mode(False):
                heads, relations, tails = graph.triples.clone().T
                ones = torch.ones(len(heads))
                shape = (graph.num_relations, graph.num_nodes)
                into = torch.zeros(shape).index_put_((relations, tails), ones, accumulate=True)
                out = torch.zeros(shape).index_put_((relations, heads), ones, accumulate=True)
                between = torch.zeros(graph.num_nodes, graph.num_nodes).index_put_((heads, tails), ones,
                                                                                   accumulate=True)  # fmt: skip
                self._tables[id(graph)] = (into, out, between)
        return self._tables[id(graph)]

    def _scored(self, rows: torch.Tensor) -> torch.Tensor:
        """(Q, N) scores from a (Q, N, WIDTH) workspace: WIDTH copies of each score, summed and divided back."""
        self.calls.append(len(rows))
        workspace = rows.unsqueeze(-1).expand(-1, -1, WIDTH).contiguous()  # 4 * N * WIDTH bytes per query
        return workspace.sum(-1) / WIDTH  # integers below 2**24 / WIDTH: exact

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        into, _out, between = self.tables(graph)
        return self._scored(into[hr_batch[:, 1]] + 2 * between[hr_batch[:, 0]])

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        _into, out, between = self.tables(graph)
        return self._scored(out[rt_batch[:, 0]] + 2 * between[:, rt_batch[:, 1]].T)


def _data():
    return random_fully_inductive(seed=5, entities=ENTITIES)


def _loop(model: WideWorkspace, data, kwargs) -> dict:
    """Each task scored alone by the model's own method (the brute-force reference)."""
    graph = data.graph(kwargs["mode"])

    def row(query: tuple[int, int], side: str):
        method = model.score_t if side == "tail" else model.score_h
        return method(torch.tensor([query]), graph=graph)[0].numpy()

    return loop_ranks(row, kwargs["mapped_triples"], kwargs["additional_filter_triples"])


# -- the meter ----------------------------------------------------------------------------------------------------
def test_the_meter_counts_the_intermediates_a_call_frees_and_not_what_existed_before() -> None:
    weights = torch.randn(1000, 64)

    def call(queries: int) -> torch.Tensor:
        picked = weights[:queries]  # a view of a parameter: no new memory
        weights.mul_(1.0)  # in place on a parameter: none either
        workspace = torch.ones(queries, 1000, 64)  # 256,000 bytes per query, freed before the call returns
        doubled = workspace * 2  # as much again
        del workspace
        return doubled.sum(-1) + picked.sum()  # (queries, 1000) floats kept

    for queries in (1, 2, 4):
        expected = queries * 2 * 1000 * 64 * 4  # two workspaces at once (the rows and the scalar come after one)
        assert peak_call_bytes(lambda: call(queries), CPU) == expected  # noqa: B023
        # the profiler's allocator events: the same, and the 12 bytes of scalars wrapped before any operation
        assert expected <= peak_bytes(lambda: call(queries)) <= expected + 64  # noqa: B023
    with LiveTensorBytes() as meter:
        kept = torch.ones(10, 10)
        torch.ones(100, 100)  # freed at once
    assert (meter.peak, meter.live) == (40_400, 400)  # the kept rows beside the freed table
    del kept


def test_the_cuda_meter_reads_the_allocators_peak_above_what_was_allocated(monkeypatch) -> None:
    allocator = {"allocated": 1000, "peak": 5000}  # a peak from before the call: reset, not read

    def allocate(size: int) -> None:
        allocator["allocated"] += size
        allocator["peak"] = max(allocator["peak"], allocator["allocated"])

    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        lambda device=None: allocator.update(peak=allocator["allocated"]))  # fmt: skip
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocator["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: allocator["peak"])

    def call() -> None:
        allocate(3000)  # an intermediate, freed
        allocate(500)
        allocate(-3000)

    assert peak_call_bytes(call, torch.device("cuda")) == 3500


# -- the budgets --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("available", "expected"), [(64 * GiB, 2 * GiB), (2 * GiB, GiB // 2), (None, 2 * GiB)])
def test_the_cpu_default_is_the_smaller_of_2_gib_and_a_quarter_of_the_available_memory(monkeypatch, available,
                                                                                         expected) -> None:  # fmt: skip
    monkeypatch.setattr(batching, "available_host_memory", lambda: available)
    assert batching.measured_memory_budget(CPU) == expected
    assert batching.measured_memory_budget(CPU, 12345) == 12345  # a given budget wins


def test_the_available_memory_without_psutil_comes_from_sysconf(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil raises ImportError
    available = batching.available_host_memory()
    if hasattr(batching.os, "sysconf"):
        assert available == batching.os.sysconf("SC_AVPHYS_PAGES") * batching.os.sysconf("SC_PAGE_SIZE") > 0


@pytest.mark.parametrize(("free", "expected"), [(140 * GiB, 2 * GiB), (100 * MiB, 25 * MiB)])
def test_the_cuda_default_is_the_evaluators(monkeypatch, free, expected) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 141 * GiB))
    assert batching.measured_memory_budget(torch.device("cuda")) == expected


# -- the batch size and the peak of an evaluation ------------------------------------------------------------------
# The evaluators whose model calls are counted here run without the fast path's probes (check_fast_path=False): the
# stability probe's calls (at most four of four queries a side, before the memory probe's) are bounded in
# tests/engine/test_score_stability.py.
def test_the_batch_is_what_the_budget_holds_of_the_known_workspace_and_the_evaluation_stays_within_it() -> None:
    data, model, budget = _data(), WideWorkspace(), 3 * MiB
    kwargs = data.evaluation_kwargs("test")
    evaluator = RankBasedEvaluator(memory_budget=budget, check_fast_path=False)  # the loop's calls only
    bound = on_graphs(model, data)
    # what stays for the process and the model (the filter's fingerprint weights, the model's tables): built before
    everything = RankBasedEvaluator(batch_size=len(kwargs["mapped_triples"]))
    assert peak_bytes(lambda: everything.evaluate(bound, **kwargs, use_tqdm=False)) > 2 * budget  # if unbounded
    results = {}
    model.calls.clear()
    peak = peak_bytes(lambda: results.update(ranks=evaluator.evaluate(bound, **kwargs, use_tqdm=False)))
    workspace = 4 * ENTITIES * WIDTH  # per query, by construction
    for side in ("head", "tail"):
        measured = evaluator.measured_batches["testing", side, "cpu"]
        # the workspace, and a few (Q, N) float rows beside it (picked counts, their sum, the scores)
        assert workspace <= measured.per_query_bytes <= workspace + 4 * (4 * ENTITIES)
        assert measured.fixed_bytes <= 4 * ENTITIES
        lowest = (budget * 3 // 4 - 4 * ENTITIES) // (workspace + 16 * ENTITIES)
        highest = budget * 3 // 4 // workspace
        assert lowest <= measured.batch_size <= highest
        within = (budget * 3 // 4 - measured.fixed_bytes) // measured.per_query_bytes
        assert measured.batch_size == measured.queries_within_budget == within  # below the usual batch (491 here)
        assert measured.batch_size < len(kwargs["mapped_triples"])  # the budget, not the tasks, decides
        assert (measured.memory_budget, measured.within_budget, measured.model) == (budget, True, "WideWorkspace")
    batch = evaluator.measured_batches["testing", "head", "cpu"].batch_size
    tasks = len(kwargs["mapped_triples"])
    head, tail = model.calls[: len(model.calls) // 2], model.calls[len(model.calls) // 2 :]
    for calls in (head, tail):  # each side: its probe (one query, its first call; one; four), then its batches
        assert calls[:3] == [1, 1, 4]
        assert len(calls[3:]) == -(-tasks // batch) and max(calls[3:]) == batch  # its distinct queries at most
    assert peak <= budget  # the allocator's bytes held at once: every batch, the filter and the probes included
    assert_same_ranks(results["ranks"].records, _loop(model, data, kwargs))


def test_ranks_equal_those_of_one_query_at_a_time_and_the_measure_is_kept() -> None:
    data, model = _data(), WideWorkspace()
    bound = on_graphs(model, data)
    for split in ("valid", "test"):
        kwargs = data.evaluation_kwargs(split)
        evaluator = RankBasedEvaluator(memory_budget=2 * MiB, check_fast_path=False)
        measured = evaluator.evaluate(bound, **kwargs, use_tqdm=False)
        single = RankBasedEvaluator(batch_size=1).evaluate(bound, **kwargs, use_tqdm=False)
        assert_same_ranks(measured.records, _loop(model, data, kwargs))
        assert_same_ranks(single.records, _loop(model, data, kwargs))
        model.calls.clear()
        evaluator.evaluate(bound, **kwargs, use_tqdm=False)  # measured once: no probe the second time
        batch = evaluator.measured_batches[kwargs["mode"], "tail", "cpu"].batch_size
        tasks = len(kwargs["mapped_triples"])
        assert len(model.calls) == 2 * -(-tasks // batch) and max(model.calls) <= batch  # distinct queries at most


def test_a_given_batch_size_wins_and_nothing_is_measured() -> None:
    data, model = _data(), WideWorkspace()
    evaluator = RankBasedEvaluator(batch_size=6, memory_budget=3 * MiB, check_fast_path=False)
    evaluator.evaluate(on_graphs(model, data), **data.evaluation_kwargs("test"), use_tqdm=False)
    assert evaluator.measured_batches == {}
    assert len(model.calls) == 2 * -(-40 // 6) and max(model.calls) == 6  # 40 tasks a side, 6 at a time
    model.calls.clear()
    RankBasedEvaluator(memory_budget=3 * MiB, check_fast_path=False).evaluate(
        on_graphs(model, data), **data.evaluation_kwargs("test"), batch_size=5, use_tqdm=False)  # fmt: skip
    assert len(model.calls) == 2 * -(-40 // 5) and max(model.calls) == 5


def test_a_budget_below_one_query_scores_one_at_a_time_with_a_warning() -> None:
    data, model = _data(), WideWorkspace()
    kwargs = data.evaluation_kwargs("test")
    evaluator = RankBasedEvaluator(memory_budget=64 * 2**10, check_fast_path=False)
    with pytest.warns(MemoryBudgetWarning, match=r"one (head|tail) query of WideWorkspace needs 0\.19\d MiB .*"
                      r"more than the memory budget's 0\.0469 MiB .* one query at a time"):  # fmt: skip
        results = evaluator.evaluate(on_graphs(model, data), **kwargs, use_tqdm=False)
    assert set(model.calls) == {1, 4} and model.calls.count(4) == 2  # the probes' four, else one query a call
    assert not evaluator.measured_batches["testing", "tail", "cpu"].within_budget
    assert_same_ranks(results.records, _loop(model, data, kwargs))


def test_a_model_without_the_declaration_is_measured_too_and_keeps_its_usual_sizes() -> None:
    """Every model scored through its own methods is measured (tests/engine/test_measured_own_methods.py); one whose
    rows cost their scores keeps the usual batch (here every task), without a warning."""
    table = torch.randint(0, 5, (30, 7, 30)).float()
    triples = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 0, 7]])
    evaluator = RankBasedEvaluator(memory_budget=MiB)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        evaluator.evaluate(FullScoreTableModel(table), triples, use_tqdm=False)
    measured = evaluator.measured_batches[None, "tail", "cpu"]
    assert (measured.model, measured.batch_size, measured.slice_size) == ("FullScoreTableModel", 3, 30)
    assert measured.queries_within_budget > 1000


def test_the_measure_lowers_the_usual_batch_and_never_raises_it(monkeypatch) -> None:
    data, model = _data(), WideWorkspace()
    kwargs = data.evaluation_kwargs("test")
    monkeypatch.setattr(batching, "CPU_SCORE_BUDGET", 7 * ENTITIES)  # the usual CPU batch: 7 rows of scores
    evaluator = RankBasedEvaluator(memory_budget=GiB)
    results = evaluator.evaluate(on_graphs(model, data), **kwargs, use_tqdm=False)
    measured = evaluator.measured_batches["testing", "tail", "cpu"]
    assert measured.queries_within_budget > 1000 and measured.batch_size == 7
    assert max(model.calls) == 7
    assert_same_ranks(results.records, _loop(model, data, kwargs))


def test_one_model_on_two_graphs_is_measured_on_each() -> None:
    model, evaluator = WideWorkspace(), RankBasedEvaluator(memory_budget=3 * MiB, check_fast_path=False)
    for seed, entities in ((5, ENTITIES), (6, ENTITIES), (5, ENTITIES // 2)):  # the same node count, then fewer
        data = random_fully_inductive(seed=seed, entities=entities)
        model.calls.clear()
        evaluator.evaluate(on_graphs(model, data), **data.evaluation_kwargs("test"), use_tqdm=False)
        assert model.calls[:3] == [1, 1, 4]  # probed: a graph of its own, whatever its node count
        workspace = 4 * entities * WIDTH
        measured = evaluator.measured_batches["testing", "tail", "cpu"]
        assert workspace <= measured.per_query_bytes <= workspace + 4 * (4 * entities)
