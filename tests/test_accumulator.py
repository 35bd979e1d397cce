"""MetricAccumulator: the contract every accumulator keeps (state names, pickling, state_dict round trip, 1 versus 4
merged, gather-and-merge synchronisation), and merging, reloading and recomputing never change a number."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

from kgeval import MetricAccumulator
from kgeval.records import RankRecords
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


KS = (1, 3, 10)


def rank_batches(seed: int, num_batches: int = 8, max_candidates: int = 12) -> list[dict[str, torch.Tensor]]:
    """Tie-heavy batches of ranks (optimistic < pessimistic often), uneven sizes, one of them empty."""
    rng = np.random.default_rng(seed)
    batches, start = [], 0
    for size in [int(s) for s in rng.integers(0, 15, num_batches)]:
        candidates = rng.integers(1, max_candidates + 1, size)
        optimistic = np.array([rng.integers(1, c + 1) for c in candidates], dtype=np.int64)
        pessimistic = np.array([rng.integers(o, c + 1) for o, c in zip(optimistic, candidates, strict=True)])
        batches.append({
            "optimistic": torch.as_tensor(optimistic, dtype=torch.int64),
            "pessimistic": torch.as_tensor(pessimistic, dtype=torch.int64),
            "num_candidates": torch.as_tensor(candidates, dtype=torch.int64),
            "triples": torch.as_tensor(rng.integers(0, 9, (size, 3)), dtype=torch.int64),
            "task_index": torch.arange(start, start + size),
        })  # fmt: skip
        start += size
    return batches


def fed(batches: list[dict[str, torch.Tensor]], keep_records: bool) -> MetricAccumulator:
    accumulator = MetricAccumulator(ks=KS, keep_records=keep_records)
    for batch in batches:
        accumulator.update(**batch)
    return accumulator


def computed(accumulator: MetricAccumulator) -> dict[tuple[str, str], float]:
    values = {rank_type: accumulator.compute(rank_type) for rank_type in RANK_TYPES}
    return {(rank_type, key): value for rank_type, metrics in values.items() for key, value in metrics.items()}


def assert_same(got: MetricAccumulator, expected: MetricAccumulator, exact: bool) -> None:
    """Same metrics (bit for bit, or to float rounding after sums were added in another order), same records."""
    left, right = computed(got), computed(expected)
    assert left.keys() == right.keys()
    for key, value in right.items():
        if exact:
            assert left[key] == value or (math.isnan(left[key]) and math.isnan(value)), key
        else:
            assert left[key] == pytest.approx(value, rel=1e-12, abs=1e-12, nan_ok=True), key
    assert got.keep_records == expected.keep_records
    if expected.keep_records:
        assert got.records("tail").equals(expected.records("tail"))


def check_accumulator_contract(batches: list[dict[str, torch.Tensor]], keep_records: bool) -> None:
    """Every check of the contract for one stream of batches."""
    whole = fed(batches, keep_records)
    # declared state names: sums (merged by adding), records (merged by concatenating), metadata
    state = whole.state_dict()
    kinds = {name.partition(":")[0] for name in state}
    assert kinds == ({"sum", "cat", "meta"} if keep_records else {"sum", "meta"})
    record_states = {name for name in state if name.startswith("cat:")}
    assert record_states == ({"cat:optimistic", "cat:pessimistic", "cat:num_candidates", "cat:triples",
                              "cat:task_index"} if keep_records else set())  # fmt: skip
    assert all(value.dtype in (torch.float64, torch.int64, torch.bool) for value in state.values())
    # pickling
    assert_same(pickle.loads(pickle.dumps(whole)), whole, exact=True)
    # state_dict round trip, into a new accumulator and into a used one
    assert_same(MetricAccumulator.from_state_dict(state), whole, exact=True)
    used = fed(rank_batches(99), keep_records)
    used.load_state_dict(state)
    assert_same(used, whole, exact=True)
    # 1 versus 4 merged (the parts in order; records concatenate in argument order)
    parts = [fed(batches[2 * i : 2 * i + 2], keep_records) for i in range(4)]
    merged = parts[0].clone().merge(*parts[1:])
    assert_same(merged, whole, exact=False)
    # distributed synchronisation: every rank's state gathered, rebuilt and merged in rank order
    gathered = [MetricAccumulator.from_trusted_state(part.state_dict()) for part in parts]
    synced = gathered[0].merge(*gathered[1:])
    assert_same(synced, whole, exact=False)
    # reset empties every state
    whole.reset()
    assert whole.count == 0
    assert all(not value.any() for name, value in whole.state_dict().items() if name.startswith("sum:"))


@pytest.mark.parametrize("keep_records", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_accumulator_contract(seed: int, keep_records: bool) -> None:
    check_accumulator_contract(rank_batches(seed), keep_records)


def test_records_are_one_table_type() -> None:
    whole = fed(rank_batches(3), keep_records=True)
    records = whole.records("head")
    assert isinstance(records, RankRecords)
    assert set(records.side.tolist()) <= {0}
    assert len(records) == whole.count


def test_metrics_read_once_follow_every_later_change() -> None:
    """The states are read to the host once (one transfer) and kept until the next change: an update, a merge, a
    reset or a loaded state after a read gives the metrics of the new state (the mean reciprocal rank by hand)."""
    first = (torch.tensor([1, 2, 3]), torch.tensor([1, 4, 3]), torch.tensor([10, 10, 10]))
    second = (torch.tensor([5, 1]), torch.tensor([5, 2]), torch.tensor([10, 10]))
    realistic = lambda opt, pess: [(o + p) / 2 for o, p in zip(opt.tolist(), pess.tolist(), strict=True)]  # noqa: E731
    mrr = lambda ranks: sum(1 / r for r in ranks) / len(ranks)  # noqa: E731
    ranks_first, ranks_second = realistic(*first[:2]), realistic(*second[:2])
    acc = MetricAccumulator(ks=(1,))
    acc.update(*first)
    assert acc.compute()["inverse_harmonic_mean_rank"] == pytest.approx(mrr(ranks_first), rel=1e-15)
    other = MetricAccumulator(ks=(1,))
    other.update(*second)
    assert other.compute()["inverse_harmonic_mean_rank"] == pytest.approx(mrr(ranks_second), rel=1e-15)
    merged = acc.clone().merge(other)  # from the two host copies
    assert merged.compute()["inverse_harmonic_mean_rank"] == pytest.approx(mrr(ranks_first + ranks_second), rel=1e-15)
    assert merged.records("head").optimistic.tolist() == [1, 2, 3, 5, 1]
    acc.update(*second)  # after a read
    assert acc.compute()["inverse_harmonic_mean_rank"] == pytest.approx(mrr(ranks_first + ranks_second), rel=1e-15)
    assert acc.compute()["count"] == 5
    acc.load_state_dict(other.state_dict())
    assert acc.compute()["inverse_harmonic_mean_rank"] == pytest.approx(mrr(ranks_second), rel=1e-15)
    acc.reset()
    assert acc.compute()["count"] == 0
    MetricAccumulator(ks=(1,)).state_dict()["sum:count"].add_(7)  # a fresh accumulator's sums are shared zeros
    assert MetricAccumulator(ks=(1,)).compute()["count"] == 0  # that only it reads: a state dict holds copies
