"""Comparison helpers: kgeval's results against the brute-force reference, one job per helper."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from kgeval import RankBasedMetricResults

#: float metrics are sums in float64 whose order depends on batching; ranks and counts compare exactly
RELATIVE_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-12


def same_value(actual: float, expected: float) -> bool:
    """Equal within the stated tolerance, NaN equal to NaN, infinities equal to themselves."""
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    return math.isclose(actual, expected, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE)


def assert_metrics_match(results: RankBasedMetricResults, expected: Mapping[tuple[str, str, str], float]) -> None:
    """Every metric kgeval reports has a reference value, and they agree."""
    missing = sorted(set(results.data) - set(expected))
    assert not missing, f"no reference value for {missing[:5]}"
    wrong = {key: (value, expected[key]) for key, value in results.data.items() if not same_value(value, expected[key])}
    assert not wrong, f"{len(wrong)} metrics differ (kgeval, reference): {dict(list(wrong.items())[:5])}"


def assert_ranks_match(results: RankBasedMetricResults, expected: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    """The per-task records equal the reference ranks and num_candidates exactly, per side, in triple order."""
    assert results.records is not None
    for side_code, side in enumerate(("head", "tail")):
        if side not in results.targets:
            continue
        mask = results.records["side"] == side_code
        order = np.argsort(results.records["task_index"][mask], kind="stable")
        for field in ("optimistic", "pessimistic", "num_candidates"):
            actual = results.records[field][mask][order]
            np.testing.assert_array_equal(actual, expected[side][field], err_msg=f"{side} {field}")


def assert_results_equal(a: RankBasedMetricResults, b: RankBasedMetricResults) -> None:
    """Same keys, same ranks; float metrics within tolerance (batching changes summation order)."""
    assert set(a.data) == set(b.data)
    wrong = {key: (value, b.data[key]) for key, value in a.data.items() if not same_value(value, b.data[key])}
    assert not wrong, f"{len(wrong)} metrics differ: {dict(list(wrong.items())[:5])}"
    if a.records is not None and b.records is not None:
        for name in ("optimistic", "pessimistic", "num_candidates", "task_index", "side"):
            np.testing.assert_array_equal(a.records[name], b.records[name], err_msg=name)
