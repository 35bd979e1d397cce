"""MetricAccumulator: merging, reloading and recomputing never change a number."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval import MetricAccumulator
from kgeval.typing import RANK_TYPES
from tests.helpers.reference import RANK_TYPES as REFERENCE_RANK_TYPES
from tests.helpers.reference import plain_keys, plain_metric
from tests.support.invariance import same_value

KS = (1, 3, 10)


def random_tasks(seed: int, n: int = 60, max_candidates: int = 30):
    rng = np.random.default_rng(seed)
    candidates = rng.integers(1, max_candidates + 1, n)
    optimistic = np.array([rng.integers(1, c + 1) for c in candidates])
    pessimistic = np.array([rng.integers(o, c + 1) for o, c in zip(optimistic, candidates, strict=True)])
    triples = rng.integers(0, 20, (n, 3))
    return {
        "optimistic": torch.as_tensor(optimistic),
        "pessimistic": torch.as_tensor(pessimistic),
        "num_candidates": torch.as_tensor(candidates),
        "triples": torch.as_tensor(triples),
        "task_index": torch.arange(n),
    }


def take(tasks, index):
    return {name: value[index] for name, value in tasks.items()}


def assert_same_metrics(a: MetricAccumulator, b: MetricAccumulator) -> None:
    for rank_type in RANK_TYPES:
        left, right = a.compute(rank_type), b.compute(rank_type)
        assert left.keys() == right.keys()
        assert all(same_value(left[k], right[k]) for k in left), rank_type


def test_compute_matches_reference() -> None:
    tasks = random_tasks(0)
    acc = MetricAccumulator(ks=KS)
    acc.update(**tasks)
    realistic = (tasks["optimistic"].double() + tasks["pessimistic"].double()) / 2
    values = {"optimistic": tasks["optimistic"], "pessimistic": tasks["pessimistic"], "realistic": realistic}
    assert set(RANK_TYPES) == set(REFERENCE_RANK_TYPES)
    for rank_type in RANK_TYPES:
        computed = acc.compute(rank_type)
        for key in plain_keys(KS):
            expected = plain_metric(key, values[rank_type].numpy(), tasks["num_candidates"].numpy())
            assert same_value(computed[key], expected), (rank_type, key)


@pytest.mark.parametrize("parts", [1, 2, 5])
def test_split_and_merged_in_any_order_equals_one(parts: int) -> None:
    tasks = random_tasks(1)
    whole = MetricAccumulator(ks=KS)
    whole.update(**tasks)
    pieces = []
    for index in np.array_split(np.random.default_rng(parts).permutation(60), parts):
        piece = MetricAccumulator(ks=KS)
        piece.update(**take(tasks, torch.as_tensor(index)))
        pieces.append(piece)
    order = np.random.default_rng(3).permutation(parts)
    merged = MetricAccumulator(ks=KS).merge(*(pieces[i] for i in order))
    assert_same_metrics(merged, whole)
    assert merged.count == 60
    assert sorted(merged.records("tail").task_index.tolist()) == list(range(60))


def test_merge_leaves_inputs_unchanged_and_update_after_merge_works() -> None:
    tasks = random_tasks(2)
    first, second = MetricAccumulator(ks=KS), MetricAccumulator(ks=KS)
    first.update(**take(tasks, slice(0, 20)))
    second.update(**take(tasks, slice(20, 40)))
    before = second.state_dict()
    first.merge(second, MetricAccumulator(ks=KS))
    after = second.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    first.update(**take(tasks, slice(40, 60)))
    whole = MetricAccumulator(ks=KS)
    whole.update(**tasks)
    assert_same_metrics(first, whole)


def test_state_dict_round_trip_and_idempotent_compute() -> None:
    tasks = random_tasks(3)
    acc = MetricAccumulator(ks=KS)
    acc.update(**tasks)
    reloaded = MetricAccumulator.from_state_dict(acc.state_dict())
    assert_same_metrics(acc, reloaded)
    assert acc.compute() == acc.compute()


def test_reset_and_clone() -> None:
    tasks = random_tasks(4)
    acc = MetricAccumulator(ks=KS)
    acc.update(**tasks)
    copy = acc.clone()
    acc.reset()
    assert acc.count == 0 and copy.count == 60
    acc.update(**tasks)
    assert_same_metrics(acc, copy)


def test_without_records_reports_the_sum_metrics_only() -> None:
    tasks = random_tasks(5)
    lean, full = MetricAccumulator(ks=KS, keep_records=False), MetricAccumulator(ks=KS)
    lean.update(**tasks)
    full.update(**tasks)
    lean_values, full_values = lean.compute(), full.compute()
    assert "median_rank" not in lean_values and "median_rank" in full_values
    assert all(same_value(value, full_values[key]) for key, value in lean_values.items())
    merged = MetricAccumulator(ks=KS).merge(lean)
    assert not merged.keep_records
    with pytest.raises(ValueError, match=r"^this accumulator keeps no per-task records \(keep_records=False\)$"):
        lean.records("tail")


def test_empty_accumulator_warns_and_gives_nan() -> None:
    from kgeval import UndefinedMetricWarning

    with pytest.warns(UndefinedMetricWarning, match="undefined"):
        values = MetricAccumulator(ks=(1,)).compute()
    assert values["count"] == 0
    assert np.isnan(values["inverse_harmonic_mean_rank"]) and np.isnan(values["median_rank"])
