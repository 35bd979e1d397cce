"""Registry-wide tests: every metric's metadata (range, direction, aliases, closed forms, section) against its values.

Test selection comes from each metric's own metadata; expected values come from tests/helpers/reference.py.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from kgeval import UndefinedMetricWarning
from kgeval.metrics import iter_metrics, reported_keys, summarize
from kgeval.metrics.registry import ADJUSTED_SECTION, PLAIN_SECTION, canonical_name
from kgeval.typing import RANK_TYPES
from tests.helpers.reference import NULL_MODEL_KEYS, adjusted_keys, adjusted_metric, plain_keys, plain_metric

KS = (1, 3, 10)
REALISTIC_KEYS = reported_keys(KS, "realistic")
METRICS_MD = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"


def random_tasks(seed: int, n: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(optimistic, pessimistic, num_candidates) with 2 <= C <= 60 and at least one C above every k."""
    rng = np.random.default_rng(seed)
    num_candidates = rng.integers(2, 61, size=n)
    num_candidates[0] = 60
    optimistic = rng.integers(1, num_candidates + 1)
    pessimistic = rng.integers(optimistic, num_candidates + 1)
    return optimistic, pessimistic, num_candidates


def value(key: str, ranks: np.ndarray, num_candidates: np.ndarray) -> float:
    info, k = next((info, k) for reported, info, k in REALISTIC_KEYS if reported == key)
    return info.function(summarize(ranks, num_candidates, ks=KS), k)


def reference_value(key: str, ranks: np.ndarray, num_candidates: np.ndarray) -> float:
    if key in adjusted_keys(KS):
        return adjusted_metric(key, ranks, num_candidates)
    return plain_metric(key, ranks, num_candidates)


# -- keys ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rank_type", RANK_TYPES)
def test_every_registry_key_has_a_reference_and_vice_versa(rank_type: str) -> None:
    registry = {key for key, _info, _k in reported_keys(KS, rank_type)}
    reference = set(plain_keys(KS)) | set(adjusted_keys(KS))  # adjusted for every rank type, as in PyKEEN
    assert registry == reference


@pytest.mark.parametrize("rank_type", RANK_TYPES)
def test_default_reported_keys_are_distinct(rank_type: str) -> None:
    keys = [key for key, _info, _k in reported_keys((1, 3, 5, 10), rank_type)]
    assert len(keys) == len(set(keys))
    assert {f"{family}_at_{k}" for family in ("adjusted_hits", "z_hits") for k in (1, 3, 5, 10)} <= set(keys)


def test_every_alias_resolves_to_its_metric() -> None:
    for info in iter_metrics():
        for alias in info.aliases:
            assert canonical_name(alias.replace("@k", "@10").upper()) == info.key(10), alias


def test_closed_forms_are_declared_for_the_null_model_table_and_the_adjusted_family() -> None:
    with_moments = {info.name for info in iter_metrics() if info.null_moments is not None}
    adjusted_families = {re.sub(r"_at_\d+$", "_at_k", key) for key in adjusted_keys(KS)}
    assert with_moments == set(NULL_MODEL_KEYS) | adjusted_families
    assert {info.name for info in iter_metrics() if info.needs_candidates} == adjusted_families


def github_anchor(heading: str) -> str:
    """GitHub's heading slug: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_sections_are_anchors_of_metrics_md() -> None:
    if not METRICS_MD.exists():
        pytest.skip(f"{METRICS_MD} not present")
    anchors = {github_anchor(line.lstrip("#")) for line in METRICS_MD.read_text().splitlines() if line.startswith("#")}
    assert {PLAIN_SECTION, ADJUSTED_SECTION} <= anchors
    assert {info.section for info in iter_metrics()} <= anchors


# -- values -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("key", "info", "k"), REALISTIC_KEYS, ids=[key for key, _i, _k in REALISTIC_KEYS])
def test_value_matches_the_reference(key: str, info: object, k: int | None, seed: int) -> None:
    optimistic, pessimistic, num_candidates = random_tasks(seed)
    ranks = (optimistic + pessimistic) / 2
    assert value(key, ranks, num_candidates) == pytest.approx(
        reference_value(key, ranks, num_candidates), rel=1e-9, abs=1e-12
    )


def rank_sets(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    optimistic, pessimistic, num_candidates = random_tasks(seed)
    return {
        "random": ((optimistic + pessimistic) / 2, num_candidates),
        "best": (np.ones(num_candidates.size), num_candidates),
        "worst": (num_candidates.astype(np.float64), num_candidates),
    }


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("key", "info", "k"), REALISTIC_KEYS, ids=[key for key, _i, _k in REALISTIC_KEYS])
def test_value_is_in_range_for_random_best_and_worst_ranks(key: str, info, k: int | None, seed: int) -> None:
    for name, (ranks, num_candidates) in rank_sets(seed).items():
        result = value(key, ranks, num_candidates)
        assert result in info.value_range, (name, result, str(info.value_range))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("key", "info", "k"), REALISTIC_KEYS, ids=[key for key, _i, _k in REALISTIC_KEYS])
def test_direction_agrees_with_increasing(key: str, info, k: int | None, seed: int) -> None:
    if info.increasing is None:
        pytest.skip(f"{key} is not a quality measure")
    sign = 1 if info.increasing else -1
    sets = rank_sets(seed)
    assert sign * (value(key, *sets["best"]) - value(key, *sets["worst"])) > 0
    ranks, num_candidates = sets["random"]
    better = np.maximum(ranks - 1, 1)  # every rank one place better (ranks of 1 stay)
    assert sign * (value(key, better, num_candidates) - value(key, ranks, num_candidates)) >= 0


def test_adjusted_values_are_nan_not_inf_for_degenerate_candidate_sets() -> None:
    ones = np.ones(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        values = {key: value(key, ones, ones.astype(np.int64)) for key in adjusted_keys(KS)}
    assert not any(math.isinf(v) for v in values.values())
    assert all(math.isnan(v) for key, v in values.items() if key != "adjusted_arithmetic_mean_rank")
