"""``filtered="all"`` in one pass: the static filter's pairs are gathered once and the time-aware filter's are
marked among them (kgeval._engine.pairs.BatchPairs.in_fine), so the model scores every query once and the three
settings come from the same scores. Each setting equals the brute-force reference
(tests/helpers/temporal_reference.py) on every counting path: the eager kernels, numba, both pair layouts, forced
query groups (which the finer filter turns off), mixed-slice batches, the fused Triton kernel under the
interpreter, the fast path and the models' own methods, inverse relations, and a progress file resumed after a
crash."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from kgeval import TemporalRankBasedEvaluator
from kgeval._engine import loop as ranking
from kgeval._engine.filter_index import FilterIndex, SideIndex
from kgeval._engine.kernels import KERNEL_OBJECTS
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, LoopSettings
from kgeval.exceptions import UndefinedMetricWarning
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.temporal_reference import SETTINGS, temporal_reference_ranks
from tests.test_temporal import (
    E,
    IntegerTemporalDistMult,
    ObjectsOnly,
    R,
    TableTemporal,
    overlapping_filters,
    random_quadruples,
    tie_heavy_table,
)

#: (counting kernel, pair layout, GROUP_MIN_PAIRS, MIN_TASKS_PER_SLICE), as tests/engine/test_loop.py forces them:
#: GROUP_MIN_PAIRS = 1 would make every repeated query a group; MIN_TASKS_PER_SLICE = 10**9 mixes slices
VARIANTS = [("sign", "sorted", 1, None), ("sign", "sorted", None, 10**9), ("compare", "masked", None, None),
            ("sign", "masked", None, 10**9), ("numba", "sorted", 1, None),
            ("numba", "masked", None, 10**9)]  # fmt: skip
SIZES = [(None, None), (3, 4), (1, 1), (7, 11)]


def engine_state(variant: tuple) -> EngineState:
    kernel, layout, group_min_pairs, min_tasks_per_slice = variant
    settings = LoopSettings(layout=layout, group_min_pairs=group_min_pairs or ranking.GROUP_MIN_PAIRS,
                            min_tasks_per_slice=min_tasks_per_slice or ranking.MIN_TASKS_PER_SLICE)  # fmt: skip
    return EngineState(kernels=KernelChooser(KERNEL_OBJECTS[kernel]), settings=settings)


def evaluate_all(model, quadruples, filters, variant=None, batch_size=None, slice_size=None, kernel="auto",
                 check_fast_path=True, **options):  # fmt: skip
    evaluator = TemporalRankBasedEvaluator(filtered="all", batch_size=batch_size, slice_size=slice_size,
                                           kernel=kernel, check_fast_path=check_fast_path)  # fmt: skip
    if variant is not None:
        evaluator._state = engine_state(variant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return evaluator.evaluate(model, quadruples, additional_filter_quadruples=filters, use_tqdm=False, **options)


def assert_all_settings(results, tail_table, head_table, quadruples, filters) -> None:
    """The time-aware results and their .static and .raw equal the reference of each setting."""
    for setting, got in (("time-aware", results), ("static", results.static), ("raw", results.raw)):
        assert got is not None and got.setting == setting
        expected = temporal_reference_ranks(tail_table, head_table, quadruples, filters, setting)
        assert_same_ranks(got.records, expected)


@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(map(str, v)) for v in VARIANTS])
def test_every_counting_path_gives_the_three_settings_of_the_reference(variant, batch_size, slice_size) -> None:
    quadruples = random_quadruples(50, 40)
    filters = overlapping_filters(51, quadruples)
    table = tie_heavy_table(52)
    results = evaluate_all(TableTemporal(table), quadruples, filters, variant, batch_size, slice_size)
    assert_all_settings(results, table, table, quadruples, filters)


@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
@pytest.mark.parametrize("variant", VARIANTS[:1] + VARIANTS[4:5], ids=["eager", "numba"])
def test_the_fast_path_with_integer_vectors(variant, batch_size, slice_size) -> None:
    model = IntegerTemporalDistMult(53)
    quadruples = random_quadruples(54, 40)
    filters = overlapping_filters(55, quadruples)
    results = evaluate_all(model, quadruples, filters, variant, batch_size, slice_size)
    table = model.table()
    assert_all_settings(results, table, table, quadruples, filters)
    assert (results.records.pessimistic > results.records.optimistic).any()  # the integers tie candidates


@pytest.mark.parametrize("offset", [R, R + 1])
def test_inverse_relations(offset: int) -> None:
    table = tie_heavy_table(56, relations=R + offset)
    quadruples = random_quadruples(57, 40)
    filters = overlapping_filters(58, quadruples)
    results = evaluate_all(ObjectsOnly(table), quadruples, filters, slice_size=5, inverse_relations=offset)
    head_table = table[:, offset:].permute(2, 1, 0, 3)[:, :R]  # head_table[e, r, t, τ] = table[t, r + R, e, τ]
    assert_all_settings(results, table[:, :R], head_table, quadruples, filters)


def test_the_fused_triton_kernel() -> None:
    """Under Triton's interpreter on CPU (compiled on a GPU): the kernel that multiplies the vectors itself and
    picks the filtered pairs' scores as a list."""
    pytest.importorskip("triton")
    model = IntegerTemporalDistMult(59)
    quadruples = random_quadruples(60, 30)
    filters = overlapping_filters(61, quadruples)
    results = evaluate_all(model, quadruples, filters, kernel="triton", batch_size=7)
    table = model.table()
    assert_all_settings(results, table, table, quadruples, filters)


class CountingTable(TableTemporal):
    """Counts the score rows it is asked for."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table)
        self.rows = 0

    def score_t(self, hrt: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        self.rows += hrt.shape[0]
        return super().score_t(hrt, tails)

    def score_h(self, rtt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        self.rows += rtt.shape[0]
        return super().score_h(rtt, heads)


def test_the_model_scores_every_query_once() -> None:
    """ "all" asks the model for as many score rows as one setting alone (before, it asked for two settings')."""
    quadruples = random_quadruples(62, 50)
    filters = overlapping_filters(63, quadruples)
    table = tie_heavy_table(64)
    alone = CountingTable(table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        TemporalRankBasedEvaluator(filtered="time-aware").evaluate(
            alone, quadruples, additional_filter_quadruples=filters, use_tqdm=False
        )
    every = CountingTable(table)
    results = evaluate_all(every, quadruples, filters)
    assert every.rows == alone.rows > 0
    assert_all_settings(results, table, table, quadruples, filters)


class Crash(RuntimeError):
    pass


#: query rows of the identity probe a resumable evaluation scores first (kgeval._engine.identity): two per side
PROBE_ROWS = 4


class CrashingTable(CountingTable):
    """Raises once it has been asked for more than ``fail_after`` score rows."""

    def __init__(self, table: torch.Tensor, fail_after: int | None = None) -> None:
        super().__init__(table)
        self.fail_after = fail_after

    def score_t(self, hrt: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        if self.fail_after is not None and self.rows + hrt.shape[0] > self.fail_after:
            raise Crash
        return super().score_t(hrt, tails)

    def score_h(self, rtt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        if self.fail_after is not None and self.rows + rtt.shape[0] > self.fail_after:
            raise Crash
        return super().score_h(rtt, heads)


@pytest.mark.parametrize("fail_after", [0, 12, 50])
def test_a_crash_resumed_gives_the_three_settings_scoring_only_what_was_left(tmp_path, fail_after: int) -> None:
    """One progress file for the one pass: it keeps the static, time-aware and raw counts of the batches done."""
    quadruples = random_quadruples(65, 40)
    filters = overlapping_filters(66, quadruples)
    table = tie_heavy_table(67)
    path = tmp_path / "progress.pt"
    # the fast path's probes off: the rows counted are the ranking's and those of the identity probe each resumable
    # call scores first (two queries per side: PROBE_ROWS)
    options = {"batch_size": 4, "check_fast_path": False}
    whole = CrashingTable(table)  # the same class each time: the progress file names the model
    evaluate_all(whole, quadruples, filters, **options)
    first = CrashingTable(table, fail_after)
    with pytest.raises(Crash):
        evaluate_all(first, quadruples, filters, progress_path=path, save_every=0, **options)
    assert path.exists() == (first.rows > PROBE_ROWS)
    second = CrashingTable(table)
    results = evaluate_all(second, quadruples, filters, progress_path=path, save_every=0, **options)
    assert list(tmp_path.iterdir()) == []
    probes = min(first.rows, PROBE_ROWS) + PROBE_ROWS  # the crashed call may have stopped in its probe
    assert first.rows + second.rows - probes == whole.rows
    assert_all_settings(results, table, table, quadruples, filters)


def test_side_index_contains_marks_the_values_of_each_run() -> None:
    """SideIndex.contains against Python sets, with runs of unknown keys, values beyond the largest, negative ones,
    and ids too large for the packed keys (the overflow path)."""
    triples = torch.tensor([[0, 0, 1], [0, 0, 3], [0, 1, 2], [2, 0, 0], [2, 0, 4], [2, 0, 5]])
    for scale in (1, 2**61):
        index = FilterIndex(triples * torch.tensor([1, 1, scale]))
        side: SideIndex = index.sides["tail"]
        heads = torch.tensor([0, 0, 0, 0, 2, 2, 1, 0, 2])
        relations = torch.tensor([0, 0, 1, 1, 0, 0, 0, 0, 0])
        values = torch.tensor([1, 2, 2, 1, 5, 3, 1, 7, -1]) * scale
        starts, lengths = side.lookup(heads, relations)
        known = {(h, r, t * scale) for h, r, t in triples.tolist()}
        expected = [(h, r, v) in known for h, r, v in zip(heads.tolist(), relations.tolist(), values.tolist(),
                                                          strict=True)]  # fmt: skip
        assert side.contains(starts, lengths, values).tolist() == expected


def test_every_setting_alone_still_equals_its_part_of_all() -> None:
    quadruples = random_quadruples(68, 40)
    filters = overlapping_filters(69, quadruples)
    table = torch.randn((E, R, E, 6), generator=torch.Generator().manual_seed(70))
    every = evaluate_all(TableTemporal(table), quadruples, filters)
    for setting in SETTINGS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            alone = TemporalRankBasedEvaluator(filtered=setting).evaluate(
                TableTemporal(table), quadruples, additional_filter_quadruples=filters, use_tqdm=False
            )
        part = {"time-aware": every, "static": every.static, "raw": every.raw}[setting]
        assert list(part.data) == list(alone.data)
        np.testing.assert_array_equal(list(part.data.values()), list(alone.data.values()))  # NaN equals NaN
