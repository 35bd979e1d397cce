"""Exactness of the ranking loop (kgeval._engine.loop) end to end, against the brute-force reference.

Every scorer path (whole rows, per-slice calls), every counting kernel ("sign", "compare", "numba"), both
pair layouts ("sorted", "masked"), several batch and slice sizes, filtered / raw / both, and entity restriction,
on random tie-heavy graphs with +/-inf scores and repeated triples.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval._engine import loop as ranking
from kgeval._engine.kernels import KERNEL_OBJECTS
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, LoopSettings
from tests.helpers.graphs import FullScoreTableModel, TableModel, edge_cases, graphs_and_tables
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks
from tests.support.invariance import assert_results_equal

MODELS = {"sliced": TableModel, "full_rows": FullScoreTableModel}
#: (counting kernel, pair layout, GROUP_MIN_PAIRS, MIN_TASKS_PER_SLICE): GROUP_MIN_PAIRS = 1 makes every
#: repeated query a block-filtered group; MIN_TASKS_PER_SLICE = 10**9 makes every multi-slice batch mix slices
VARIANTS = [("sign", "sorted", 1, None), ("sign", "sorted", None, 10**9), ("compare", "masked", None, None),
            ("sign", "masked", None, 10**9), ("compare", "sorted", 1, 10**9), ("numba", "sorted", 1, None),
            ("numba", "masked", None, 10**9), ("numba", "sorted", None, None)]  # fmt: skip
SIZES = [(None, None), (1, 1), (2, 3), (100, None), (None, 2), (3, 100)]


def _engine_state(variant) -> EngineState:
    """Force a counting kernel, a pair layout (the defaults depend on the device) and the planning thresholds."""
    kernel, layout, group_min_pairs, min_tasks_per_slice = variant
    settings = LoopSettings(
        layout=layout,
        group_min_pairs=group_min_pairs or ranking.GROUP_MIN_PAIRS,
        min_tasks_per_slice=min_tasks_per_slice or ranking.MIN_TASKS_PER_SLICE,
    )
    return EngineState(kernels=KernelChooser(KERNEL_OBJECTS[kernel]), settings=settings)


@pytest.fixture(params=VARIANTS, ids=["-".join(map(str, v)) for v in VARIANTS])
def variant(request) -> tuple:
    return request.param


def _evaluate(
    graph, table, model_kind, filtered, batch_size, slice_size, variant=None, **kwargs
) -> RankBasedMetricResults:
    evaluator = RankBasedEvaluator(filtered=filtered, batch_size=batch_size, slice_size=slice_size)
    if variant is not None:
        evaluator._state = _engine_state(variant)
    model = MODELS[model_kind](table)
    return evaluator.evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False, **kwargs
    )


@pytest.mark.parametrize("model_kind", list(MODELS))
@pytest.mark.parametrize("case", list(edge_cases()))
def test_edge_cases_match_reference(case: str, model_kind: str, variant) -> None:
    graph, table = edge_cases()[case]
    for batch_size, slice_size in SIZES:
        results = _evaluate(graph, table, model_kind, "both", batch_size, slice_size, variant)
        assert_same_ranks(results.records, reference_ranks(table, graph.triples, graph.filter_triples))
        raw = reference_ranks(table, graph.triples, graph.filter_triples, filtered=False)
        assert_same_ranks(results.raw.records, raw)


@settings(max_examples=40, deadline=None)
@given(
    data=graphs_and_tables(max_entities=14),
    model_kind=st.sampled_from(list(MODELS)),
    filtered=st.sampled_from([True, False]),
    sizes=st.sampled_from(SIZES),
    variant=st.sampled_from(VARIANTS),
)
def test_random_graphs_match_reference(data, model_kind, filtered, sizes, variant) -> None:
    graph, table = data
    results = _evaluate(graph, table, model_kind, filtered, *sizes, variant)
    expected = reference_ranks(table, graph.triples, graph.filter_triples, filtered=filtered)
    assert_same_ranks(results.records, expected)


@settings(max_examples=30, deadline=None)
@given(
    data=graphs_and_tables(min_entities=2, max_entities=14),
    model_kind=st.sampled_from(list(MODELS)),
    filtered=st.sampled_from([True, False]),
    sizes=st.sampled_from(SIZES),
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 2**16),
)
def test_restricted_candidates_match_reference(data, model_kind, filtered, sizes, variant, seed) -> None:
    graph, table = data
    rng = np.random.default_rng(seed)
    allowed = rng.choice(graph.num_entities, size=int(rng.integers(1, graph.num_entities + 1)), replace=False)
    keep = [i for i, (h, _, t) in enumerate(graph.triples.tolist()) if h in set(allowed) and t in set(allowed)]
    if not keep:
        return
    results = _evaluate(
        graph, table, model_kind, filtered, *sizes, variant,
        restrict_entities_to=torch.from_numpy(allowed), drop_outside_restriction=True,
    )  # fmt: skip
    # the dropped triples are still known triples
    known = [graph.triples, *graph.filter_triples]
    expected = reference_ranks(table, graph.triples[keep], known, filtered, restrict_entities_to=allowed.tolist())
    assert_same_ranks(results.records, expected, task_rows=keep)


@pytest.mark.slow
@pytest.mark.parametrize("chunk_elements", [1, 7])
@pytest.mark.parametrize("model_kind", list(MODELS))
def test_sign_kernel_in_row_chunks_matches_reference(monkeypatch, model_kind: str, chunk_elements: int) -> None:
    """The "sign" kernel coding one or a few task rows per chunk (kgeval._engine.kernels.EAGER_CHUNK_ELEMENTS),
    through every edge case, batch and slice size, filtered and raw."""
    from kgeval._engine import kernels

    monkeypatch.setattr(kernels, "EAGER_CHUNK_ELEMENTS", chunk_elements)
    for graph, table in edge_cases().values():
        for batch_size, slice_size in SIZES:
            for variant in [v for v in VARIANTS if v[0] == "sign"]:
                results = _evaluate(graph, table, model_kind, "both", batch_size, slice_size, variant)
                filtered = reference_ranks(table, graph.triples, graph.filter_triples)
                assert_same_ranks(results.records, filtered)
                raw = reference_ranks(table, graph.triples, graph.filter_triples, filtered=False)
                assert_same_ranks(results.raw.records, raw)


def test_both_equals_separate_filtered_and_raw_runs() -> None:
    graph, table = edge_cases()["duplicated_triples"]
    both = _evaluate(graph, table, "sliced", "both", 4, 3)
    filtered = _evaluate(graph, table, "sliced", True, 4, 3)
    raw = _evaluate(graph, table, "sliced", False, 4, 3)
    assert_results_equal(both, filtered)  # NaN-aware: tiny graphs leave some adjusted metrics undefined
    assert_results_equal(both.raw, raw)
    assert both.raw.raw is None
    assert both.get_metric("mrr") >= both.raw.get_metric("mrr")


def test_both_round_trips_through_json() -> None:
    graph, table = edge_cases()["duplicated_triples"]
    results = _evaluate(graph, table, "sliced", "both", None, None)
    again = RankBasedMetricResults.from_json(results.to_json())
    assert again == results
    assert again.raw == results.raw
    assert "raw" in json.loads(results.to_json(include_records=False))
    assert RankBasedMetricResults.from_json(_evaluate(graph, table, "sliced", True, None, None).to_json()).raw is None


def test_invalid_filtered_mode_raises() -> None:
    with pytest.raises(ValueError, match=r"^filtered must be True, False or 'both', got 'raw'$"):
        RankBasedEvaluator(filtered="raw")


def test_scores_each_distinct_query_once_per_batch() -> None:
    graph, table = edge_cases()["duplicated_triples"]
    model = FullScoreTableModel(table)
    # the fast path's probes off: the loop's calls are counted (the probes' are bounded in test_score_stability.py)
    RankBasedEvaluator(batch_size=1000, check_fast_path=False).evaluate(
        model, graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    distinct = {"score_t": len({(h, r) for h, r, _ in graph.triples.tolist()})}
    distinct["score_h"] = len({(r, t) for _, r, t in graph.triples.tolist()})
    rows = {method: sum(size for name, size, _ in model.score_calls if name == method) for method in distinct}
    assert rows == distinct


@pytest.mark.parametrize("model_kind", list(MODELS))
def test_nan_score_raises_with_its_triple(model_kind: str, variant) -> None:
    graph, table = edge_cases()["duplicated_triples"]
    h, r, t = graph.triples[0].tolist()
    table = table.clone()
    table[h, r, (t + 1) % graph.num_entities] = float("nan")  # a candidate of the tail task of row 0
    rows = [i for i, row in enumerate(graph.triples.tolist()) if row[:2] == [h, r]]
    message = (
        f"the model produced NaN scores for the tail task of triple {[h, r, t]} (row 0 of mapped_triples); "
        f"{len(rows)} tail task(s) affected"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _evaluate(graph, table, model_kind, True, 2, 3)
