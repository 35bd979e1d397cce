"""Batch and slice sizes from measured memory for every model scored through its own methods
(kgeval._engine.sizes.measured_sizes): the probe's solution on a known cost, the sizes a known workspace per
(query, candidate) gets within a budget -- each call's peak measured inside the model, independently --, exact
ranks, a budget below one query, a probe that fails, the measure kept, a cheap model's sizes unchanged, and a tiny
PyKEEN ConvE ranking heads without inverse triples."""

from __future__ import annotations

import warnings

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._engine import front
from kgeval._engine import sizes as batching
from kgeval._engine.memory_meter import LiveTensorBytes
from kgeval._engine.scoring import FullRowScorer, SlicedScorer
from kgeval.exceptions import MemoryBudgetWarning
from kgeval.models import DistMult
from tests.engine.test_memory_budget import peak_bytes
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph
from tests.helpers.ranks import assert_same_ranks, ranks_by_side
from tests.helpers.reference import reference_ranks

CPU = torch.device("cpu")
KiB, MiB, GiB = 2**10, 2**20, 2**30
ENTITIES, RELATIONS = 200, 3
PROBE = batching.MEMORY_PROBE_CANDIDATES


class PairWorkspace(torch.nn.Module):
    """Table scores through a (B, k, width) float32 workspace per call of B queries and k candidates -- 4 * width
    bytes per (query, candidate) pair, as a convolution per pair holds its feature maps -- reduced back to the
    table's integer scores (exact in any batch). Records (queries, candidates, peak bytes) of every call, the peak
    measured inside the call by its own LiveTensorBytes (the table's row gathered, the workspace, the scores)."""

    def __init__(self, table: torch.Tensor, width: int) -> None:
        super().__init__()
        self.register_buffer("table", table.clone())
        self.width = width
        self.num_entities, self.num_relations = table.shape[0], table.shape[1]
        self.calls: list[tuple[int, int, int]] = []

    def _scored(self, rows: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        with LiveTensorBytes() as meter:
            picked = rows if ids is None else rows[:, ids]
            workspace = picked.unsqueeze(-1).expand(-1, -1, self.width).contiguous()
            scores = workspace.sum(-1) / self.width  # integers below 2**24 / width: exact
            del workspace, picked
        self.calls.append((rows.shape[0], scores.shape[1], meter.peak))
        return scores

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        return self._scored(self.table[hr_batch[:, 0], hr_batch[:, 1]], tails)

    def score_h(self, rt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        return self._scored(self.table[:, rt_batch[:, 0], rt_batch[:, 1]].T, heads)


class RowWorkspace(PairWorkspace):
    """:class:`PairWorkspace` without candidate ids: whole rows, a (B, entities, width) workspace per call."""

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().score_t(hr_batch)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().score_h(rt_batch)


def _setting(seed: int = 0, entities: int = ENTITIES, triples: int = 20):
    graph = random_graph(seed, entities, RELATIONS, num_triples=triples, num_filter=60)
    return graph, quantised_table(seed, entities, RELATIONS, levels=4)


def _evaluate(evaluator: RankBasedEvaluator, model, graph):
    return evaluator.evaluate(model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False)


def _probe_calls(width: int = PROBE) -> list[tuple[int, int]]:
    """The sliced probe's calls (queries, candidates): its first call, then the four corners."""
    return [(1, width), (1, width), (1, 2 * width), (4, width), (4, 2 * width)]


# -- the probe's solution -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("distinct", [4, 1])
def test_the_probe_solves_a_known_cost_per_call_query_candidate_and_pair(distinct: int) -> None:
    fixed, per_query, per_candidate, per_pair = 1000, 300, 70, 4096
    table = quantised_table(0, 100, 2)
    scorer = SlicedScorer(TableModel(table), "tail", 100, None)
    seen = []

    def meter(call, device) -> int:
        rows, width = call().shape
        seen.append((rows, width))
        return fixed + per_query * rows + per_candidate * width + per_pair * rows * width

    queries = torch.tensor([[0, 0], [1, 1], [2, 0], [3, 1], [4, 0]])[:distinct].repeat(3, 1)
    measured = batching.measure_memory_per_pair(scorer, queries, 8, meter)
    if distinct > 1:
        assert measured == batching.MemoryPerQuery(fixed, per_query, per_candidate, per_pair)
        assert seen == [(1, 8), (1, 8), (1, 16), (4, 8), (4, 16)]
    else:  # one query: exact for one, its per-query cost counted per query and its per-candidate cost per pair
        assert measured == batching.MemoryPerQuery(0, fixed + per_query, 0, per_candidate + per_pair, complete=False)
        assert seen == [(1, 8), (1, 8), (1, 16)]


# -- sizes within the budget ---------------------------------------------------------------------------------------
# The evaluators whose model calls are counted here run without the fast path's probes (check_fast_path=False): the
# stability probe's calls are bounded in tests/engine/test_score_stability.py.
def _loop_calls(model: PairWorkspace, probes: int) -> list[tuple[int, int, int]]:
    """The calls of each side after its probe's ``probes`` calls (head side first, then tail)."""
    half = len(model.calls) // 2
    return model.calls[probes:half] + model.calls[half + probes :]


def test_batches_of_a_known_workspace_per_pair_keep_every_call_within_the_budget() -> None:
    graph, table = _setting()
    model, budget = PairWorkspace(table, width=256), 512 * KiB
    evaluator = RankBasedEvaluator(memory_budget=budget, check_fast_path=False)
    _evaluate(evaluator, model, graph)  # the filter index, built once
    model.calls.clear()
    ranks = {}
    peak = peak_bytes(lambda: ranks.update(results=_evaluate(evaluator, model, graph)))  # measured: no probe now
    room = budget * 3 // 4
    usual = batching.choose_sizes(SlicedScorer(model, "tail", ENTITIES, None), 20, CPU, memory_budget=budget)
    for side in ("head", "tail"):
        measured = evaluator.measured_batches[None, side, "cpu"]
        assert 4 * 256 <= measured.per_pair_bytes <= 4 * 256 + 16  # the workspace and the pair's score
        assert measured.slice_size == usual.slice_size == 64  # the usual slice: a query of it fits
        within = (room - measured.fixed_bytes - 64 * measured.per_candidate_bytes) // (
            measured.per_query_bytes + 64 * measured.per_pair_bytes)  # fmt: skip
        assert measured.batch_size == measured.queries_within_budget == within < usual.batch_size
        assert 1 < measured.batch_size < 20
    assert max(rows for rows, _, _ in model.calls) <= evaluator.measured_batches[None, "head", "cpu"].batch_size
    assert max(call_peak for _, _, call_peak in model.calls) <= room  # each call, measured inside it
    assert peak <= budget  # the allocator's bytes held at once by the whole evaluation
    assert_same_ranks(ranks["results"].records, reference_ranks(table, graph.triples, graph.filter_triples))
    explicit = _evaluate(RankBasedEvaluator(batch_size=7), PairWorkspace(table, width=4), graph)
    assert_same_ranks(ranks["results"].records, ranks_by_side(explicit.records))


def test_where_one_query_of_a_slice_does_not_fit_the_slice_shrinks() -> None:
    graph, table = _setting(1)
    model, budget = PairWorkspace(table, width=2048), 256 * KiB  # 8 KiB a pair: the usual 32 candidates 256 KiB
    evaluator = RankBasedEvaluator(memory_budget=budget, check_fast_path=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        results = _evaluate(evaluator, model, graph)
    room = budget * 3 // 4
    usual = batching.choose_sizes(SlicedScorer(model, "tail", ENTITIES, None), 20, CPU, memory_budget=budget)
    measured = evaluator.measured_batches[None, "tail", "cpu"]
    assert measured.batch_size == measured.queries_within_budget == 1 and measured.within_budget
    assert 1 < measured.slice_size < usual.slice_size == 32
    assert measured.slice_size == (room - measured.fixed_bytes - measured.per_query_bytes) // (
        measured.per_candidate_bytes + measured.per_pair_bytes)  # fmt: skip
    loop = _loop_calls(model, len(_probe_calls(16)))
    assert {rows for rows, _, _ in loop} == {1} and max(width for _, width, _ in loop) == measured.slice_size
    assert max(call_peak for _, _, call_peak in loop) <= room
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


def test_whole_rows_of_a_known_workspace_keep_every_call_within_the_budget() -> None:
    graph, table = _setting(2)
    model, budget = RowWorkspace(table, width=256), MiB  # 200 KiB a query
    evaluator = RankBasedEvaluator(memory_budget=budget, check_fast_path=False)
    results = _evaluate(evaluator, model, graph)
    room = budget * 3 // 4
    for side in ("head", "tail"):
        measured = evaluator.measured_batches[None, side, "cpu"]
        assert 4 * 256 * ENTITIES <= measured.per_query_bytes <= 4 * 256 * ENTITIES + 16 * ENTITIES
        assert (measured.per_candidate_bytes, measured.per_pair_bytes, measured.slice_size) == (0, 0, ENTITIES)
        assert measured.batch_size == (room - measured.fixed_bytes) // measured.per_query_bytes == 3
    assert [rows for rows, _, _ in model.calls[:3]] == [1, 1, 4]  # the whole-row probe
    loop = _loop_calls(model, 3)
    assert max(rows for rows, _, _ in loop) == 3
    assert max(call_peak for _, _, call_peak in loop) <= room
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


def test_a_given_slice_size_is_kept_and_the_batch_lowered() -> None:
    graph, table = _setting(3)
    model = PairWorkspace(table, width=256)
    evaluator = RankBasedEvaluator(memory_budget=512 * KiB, slice_size=50, check_fast_path=False)
    results = _evaluate(evaluator, model, graph)
    measured = evaluator.measured_batches[None, "tail", "cpu"]
    assert measured.slice_size == 50 and 1 < measured.batch_size < 20
    assert [(rows, width) for rows, width, _ in model.calls[:5]] == _probe_calls(25)  # within the given slice
    assert {width for _, width, _ in _loop_calls(model, 5)} == {50}  # 200 candidates, four slices of 50
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


def test_a_budget_below_one_query_and_one_candidate_warns_and_scores_one_query_at_a_time() -> None:
    graph, table = _setting(4, entities=30, triples=10)
    model = PairWorkspace(table, width=2048)  # 8 KiB a pair
    evaluator = RankBasedEvaluator(memory_budget=8 * KiB, check_fast_path=False)
    with pytest.warns(
        MemoryBudgetWarning,
        match=r"one (head|tail) query of PairWorkspace against 1 candidate\(s\) "
        r"needs 0\.00\d+ MiB .* more than the memory budget's 0\.00586 MiB .* one query at a time",
    ):
        results = _evaluate(evaluator, model, graph)  # fmt: skip
    measured = evaluator.measured_batches[None, "head", "cpu"]
    assert not measured.within_budget and (measured.batch_size, measured.slice_size) == (1, 1)
    # the usual slice is one candidate already: the probe calls for one candidate's id (1, 1 and 4 queries)
    assert [(rows, width) for rows, width, _ in model.calls[:3]] == [(1, 1), (1, 1), (4, 1)]
    assert {(rows, width) for rows, width, _ in _loop_calls(model, 3)} == {(1, 1)}
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


class QueryWorkspace(PairWorkspace):
    """:class:`PairWorkspace` (4 floats a pair) whose every query also holds a (query_width,) float32 workspace,
    whatever its candidates."""

    def __init__(self, table: torch.Tensor, query_width: int) -> None:
        super().__init__(table, width=4)
        self.query_width = query_width

    def _scored(self, rows: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        with LiveTensorBytes() as meter:
            query = torch.zeros(rows.shape[0], self.query_width).sum(-1, keepdim=True)
            scores = super()._scored(rows, ids) + query
        self.calls[-1] = (*self.calls[-1][:2], meter.peak)
        return scores


def test_a_query_beyond_the_budget_whatever_its_slice_keeps_the_slice_the_budget_holds() -> None:
    """64 KiB per query whatever its candidates, a 64 KiB budget: not one query fits, and slices of one candidate
    would not make it fit -- the usual slice stays (its candidates' costs fit the budget), one query a call."""
    graph, table = _setting(8)
    model = QueryWorkspace(table, query_width=2**14)
    budget = 64 * KiB
    evaluator = RankBasedEvaluator(memory_budget=budget, check_fast_path=False)
    with pytest.warns(MemoryBudgetWarning, match=r"query of QueryWorkspace against 8 candidate\(s\) needs 0\.06"):
        results = _evaluate(evaluator, model, graph)
    usual = batching.choose_sizes(SlicedScorer(model, "tail", ENTITIES, None), 20, CPU, memory_budget=budget)
    measured = evaluator.measured_batches[None, "tail", "cpu"]
    assert measured.per_query_bytes >= 4 * 2**14 and measured.per_pair_bytes < 64
    assert (measured.batch_size, measured.slice_size, measured.within_budget) == (1, usual.slice_size, False)
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


def test_the_measure_is_kept_and_a_given_batch_size_measures_nothing() -> None:
    graph, table = _setting(5)
    model = PairWorkspace(table, width=16)
    evaluator = RankBasedEvaluator(memory_budget=MiB, check_fast_path=False)
    _evaluate(evaluator, model, graph)
    assert [(rows, width) for rows, width, _ in model.calls[:5]] == _probe_calls()
    model.calls.clear()
    _evaluate(evaluator, model, graph)
    # no probe the second time: the loop's slices only (200 candidates: 128, then 72)
    assert {width for _, width, _ in model.calls} == {128, 72}
    model.calls.clear()
    given = RankBasedEvaluator(batch_size=6, memory_budget=MiB, check_fast_path=False)
    _evaluate(given, model, graph)
    assert given.measured_batches == {} and max(rows for rows, _, _ in model.calls) == 6


class OneQueryFails(PairWorkspace):
    """Raises for a call of one query (as batch norm in training mode does)."""

    def _scored(self, rows: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        if rows.shape[0] == 1:
            raise ValueError("Expected more than 1 value per channel when training")
        return super()._scored(rows, ids)


def test_a_probe_that_raises_leaves_the_usual_sizes_and_the_evaluation_its_own_calls() -> None:
    graph, table = _setting(6)
    model = OneQueryFails(table, width=4)
    evaluator = RankBasedEvaluator(memory_budget=MiB, check_fast_path=False)
    results = _evaluate(evaluator, model, graph)  # 20 tasks a side in one batch: never one query alone
    assert evaluator.measured_batches == {}
    assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))


# -- a cheap model keeps its sizes ----------------------------------------------------------------------------------
def _chosen_sizes(monkeypatch, model, budget: int | None, **options) -> tuple[RankBasedEvaluator, list]:
    """The evaluator after one evaluation of ``model`` on a 3,000-entity graph, and the (scorer class, tasks,
    sizes) of each side's loop."""
    monkeypatch.setattr(batching, "available_host_memory", lambda: 64 * GiB)  # the default measured budget: 2 GiB
    graph, _table = _setting(7, entities=3000, triples=300)
    chosen = []
    original = front.rank_side

    def recording(scorer, tasks, sizes, state, observer=None):
        chosen.append((type(scorer), tasks.queries.shape[0], sizes))
        return original(scorer, tasks, sizes, state, observer)

    monkeypatch.setattr(front, "rank_side", recording)
    evaluator = RankBasedEvaluator(memory_budget=budget, check_fast_path=False, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        _evaluate(evaluator, model, graph)
    return evaluator, chosen


@pytest.mark.parametrize("budget", [None, 4 * MiB])
@pytest.mark.parametrize("kind", ["DistMult, slices", "table, whole rows"])
def test_a_model_whose_calls_cost_its_scores_keeps_the_usual_sizes(monkeypatch, kind: str, budget) -> None:
    """Sliced: kgeval's DistMult through its own score_t / score_h (fast_path=False), whose call holds its query
    and candidate vectors and its scores; whole rows: a table's rows. The sizes are choose_sizes' exactly."""
    if kind.startswith("DistMult"):
        model, options, expected = DistMult(3000, RELATIONS, dim=32, seed=0), {"fast_path": False}, SlicedScorer
    else:
        model, options, expected = FullScoreTableModel(quantised_table(7, 3000, RELATIONS)), {}, FullRowScorer
    evaluator, chosen = _chosen_sizes(monkeypatch, model, budget, **options)
    assert len(chosen) == 2 and len(evaluator.measured_batches) == 2  # measured, each side
    for scorer_class, tasks, sizes in chosen:
        assert scorer_class is expected
        scorer = object.__new__(scorer_class)
        scorer.num_candidates = 3000
        assert sizes == batching.choose_sizes(scorer, tasks, CPU, memory_budget=budget)


def test_a_sliced_model_that_gathers_whole_rows_is_lowered_only_where_the_budget_needs_it(monkeypatch) -> None:
    """TableModel takes candidate ids but gathers each query's whole row first (12 KB of 3,000 entities): within
    the default budget the usual sizes, within 4 MiB fewer queries per call than the usual 256 by 512 candidates."""
    table = quantised_table(7, 3000, RELATIONS)
    _evaluator, chosen = _chosen_sizes(monkeypatch, TableModel(table), None)
    scorer = object.__new__(SlicedScorer)
    scorer.num_candidates = 3000
    assert all(sizes == batching.choose_sizes(scorer, tasks, CPU) for _, tasks, sizes in chosen)
    evaluator, chosen = _chosen_sizes(monkeypatch, TableModel(table), 4 * MiB)
    usual = batching.choose_sizes(scorer, 300, CPU, memory_budget=4 * MiB)
    measured = evaluator.measured_batches[None, "tail", "cpu"]
    assert measured.per_query_bytes >= 4 * 3000 and measured.slice_size == usual.slice_size == 512
    assert 1 < measured.batch_size < usual.batch_size == 256
    assert chosen[1][2].batch_size == measured.batch_size


# -- PyKEEN ConvE ranking heads without inverse triples -------------------------------------------------------------
def test_pykeen_conve_without_inverse_triples_gets_small_head_batches_with_the_ranks_of_one_query_at_a_time():
    pytest.importorskip("pykeen")
    from pykeen.models import ConvE
    from pykeen.triples import TriplesFactory

    generator = torch.Generator().manual_seed(0)
    entities, relations = 50, 4
    triples = torch.stack([torch.randint(entities, (300,), generator=generator),
                           torch.randint(relations, (300,), generator=generator),
                           torch.randint(entities, (300,), generator=generator)], 1)  # fmt: skip
    factory = TriplesFactory(triples, {str(e): e for e in range(entities)}, {str(r): r for r in range(relations)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvE "should be trained with inverse triples"
        model = ConvE(triples_factory=factory, embedding_dim=16, random_seed=0).eval()
    test, known = triples[:40], triples[40:]
    budget = 2 * MiB
    # through its own score_h (its heads' per-relation table, the fast path, would skip the convolution per pair)
    evaluator = RankBasedEvaluator(memory_budget=budget, fast_path=False)
    measured = evaluator.evaluate(model, test, additional_filter_triples=known, use_tqdm=False)
    head = evaluator.measured_batches[None, "head", "cpu"]
    # a convolution per (query, candidate head): kilobytes a pair, a batch of a few queries by every candidate
    assert head.per_pair_bytes > 1000 and head.model == "ConvE"
    assert 1 <= head.batch_size < 40 and head.slice_size == entities
    assert head.fixed_bytes + head.batch_size * (head.per_query_bytes + entities * head.per_pair_bytes) + (
        entities * head.per_candidate_bytes) <= budget * 3 // 4  # fmt: skip
    single = RankBasedEvaluator(batch_size=1, fast_path=False).evaluate(model, test, additional_filter_triples=known,
                                                                        use_tqdm=False)  # fmt: skip
    assert measured.get_metric("mrr") == single.get_metric("mrr")
    assert_same_ranks(measured.records, ranks_by_side(single.records))


def test_a_model_without_a_fast_path_says_so_and_why(caplog: pytest.LogCaptureFixture) -> None:
    """One INFO line per side for a model scored through its own methods: there is no shortcut, and why; a model
    with a form, or one evaluated with fast_path=False, gets none."""
    table = quantised_table(0, 12, 2, levels=3)
    triples = torch.tensor([[0, 0, 1], [2, 1, 3], [4, 0, 5]])
    with caplog.at_level("INFO", logger="kgeval.scoring"):
        RankBasedEvaluator().evaluate(TableModel(table), triples, use_tqdm=False)
    lines = [record.getMessage() for record in caplog.records if record.name == "kgeval.scoring"]
    assert len(lines) == 2, lines
    for side, method in (("head", "score_h"), ("tail", "score_t")):
        line = next(line for line in lines if f"its {side} candidates" in line)
        assert f"through its own {method}, with no shortcut: it declares no query/candidate form" in line
    caplog.clear()
    with caplog.at_level("INFO", logger="kgeval.scoring"):
        RankBasedEvaluator().evaluate(DistMult(12, 2, 4), triples, use_tqdm=False)
        RankBasedEvaluator(fast_path=False).evaluate(TableModel(table), triples, use_tqdm=False)
    assert not [record for record in caplog.records if record.name == "kgeval.scoring"]


def test_pykeens_interactions_without_a_form_say_which_and_why(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("pykeen")
    from pykeen.models import ConvKB, TorusE

    from tests.integrations.test_pykeen_forms import _factory, split

    evaluated, known = split()
    for cls, reason in ((ConvKB, "ConvKB convolves (h, r, t) together"), (TorusE, "torus distance")):
        model = cls(triples_factory=_factory(False), embedding_dim=4, random_seed=0).eval()
        caplog.clear()
        with caplog.at_level("INFO", logger="kgeval.scoring"):
            RankBasedEvaluator().evaluate(model, evaluated[:5], additional_filter_triples=known, use_tqdm=False)
        lines = [record.getMessage() for record in caplog.records if record.name == "kgeval.scoring"]
        assert len(lines) == 2 and all("with no shortcut" in line and reason in line for line in lines), lines
