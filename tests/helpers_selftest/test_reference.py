"""Self-tests of tests/helpers/reference.py on hand-derived examples (numbers derived from METRICS.md)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.graphs import graphs_and_tables, random_graph, ranks_and_candidates
from tests.helpers.reference import (
    ADJUSTED_KEYS,
    MAD_SCALE,
    PLAIN_KEYS,
    RANK_TYPES,
    SIDES,
    adjusted_keys,
    adjusted_metric,
    canonical_key,
    enumerated_null,
    macro_average_metrics,
    macro_average_reference,
    metrics_from_ranks,
    null_expectation,
    null_variance,
    per_relation_reference,
    plain_keys,
    plain_metric,
    popularity_counts,
    reference_metrics,
    reference_per_relation_metrics,
    reference_ranks,
    sampled_null,
    stratified_reference,
)

# ----------------------------------------------------------------------------------------------- ranks


def _hand_table() -> torch.Tensor:
    """E = 3, R = 1.

    table[0, 0, :] = [5, 5, 3]  -> tail task of (0, 0, 1): true score 5, entity 0 ties, entity 2 is below.
    table[:, 0, 1] = [5, 7, 5]  -> head task of (0, 0, 1): true score 5, entity 1 above, entity 2 ties.
    """
    table = torch.zeros(3, 1, 3)
    table[0, 0, :] = torch.tensor([5.0, 5.0, 3.0])
    table[1, 0, 1] = 7.0
    table[2, 0, 1] = 5.0
    return table


def _one(ranks: dict, side: str, i: int = 0) -> tuple[int, int, float, int]:
    r = ranks[side]
    return (
        int(r["optimistic"][i]),
        int(r["pessimistic"][i]),
        float(r["realistic"][i]),
        int(r["num_candidates"][i]),
    )


def test_tie_gives_optimistic_pessimistic_realistic() -> None:
    ranks = reference_ranks(_hand_table(), [[0, 0, 1]])
    # tail: others {0: 5 (tie), 2: 3}: optimistic 1 + 0, pessimistic 1 + 1, realistic 1.5, C = 1 + 2
    assert _one(ranks, "tail") == (1, 2, 1.5, 3)
    # head: others {1: 7 (above), 2: 5 (tie)}: optimistic 1 + 1, pessimistic 1 + 2, realistic 2.5, C = 3
    assert _one(ranks, "head") == (2, 3, 2.5, 3)


def test_return_format() -> None:
    ranks = reference_ranks(_hand_table(), torch.tensor([[0, 0, 1], [0, 0, 1]]))
    assert set(ranks) == {"head", "tail", "both"}
    for side in ranks:
        assert set(ranks[side]) == {"optimistic", "pessimistic", "realistic", "num_candidates"}
        assert ranks[side]["optimistic"].dtype == np.int64
        assert ranks[side]["pessimistic"].dtype == np.int64
        assert ranks[side]["realistic"].dtype == np.float64
        assert ranks[side]["num_candidates"].dtype == np.int64
    # both = head followed by tail
    np.testing.assert_array_equal(ranks["both"]["realistic"], [2.5, 2.5, 1.5, 1.5])


def test_filter_triples_remove_candidates_but_never_the_true_answer() -> None:
    table = _hand_table()
    # (0, 0, 0) known -> tail task drops entity 0 (the tie): ranks 1, 1, C = 2; head task unaffected.
    ranks = reference_ranks(table, [[0, 0, 1]], [torch.tensor([[0, 0, 0]])])
    assert _one(ranks, "tail") == (1, 1, 1.0, 2)
    assert _one(ranks, "head") == (2, 3, 2.5, 3)
    # additionally (2, 0, 1) known -> head task drops entity 2 (the tie): ranks 2, 2, C = 2
    ranks = reference_ranks(table, [[0, 0, 1]], [torch.tensor([[0, 0, 0]]), torch.tensor([[2, 0, 1]])])
    assert _one(ranks, "head") == (2, 2, 2.0, 2)
    # a single tensor works as well as a list; the true triple in the filter set changes nothing
    ranks = reference_ranks(table, [[0, 0, 1]], torch.tensor([[0, 0, 0], [0, 0, 1]]))
    assert _one(ranks, "tail") == (1, 1, 1.0, 2)


def test_raw_ignores_filters() -> None:
    ranks = reference_ranks(_hand_table(), [[0, 0, 1]], [torch.tensor([[0, 0, 0], [2, 0, 1]])], filtered=False)
    assert _one(ranks, "tail") == (1, 2, 1.5, 3)
    assert _one(ranks, "head") == (2, 3, 2.5, 3)


def test_evaluation_triples_filter_each_other() -> None:
    ranks = reference_ranks(_hand_table(), [[0, 0, 1], [0, 0, 0]])
    # tail of (0,0,1): entity 0 removed since (0,0,0) is evaluated -> 1, 1, C = 2
    assert _one(ranks, "tail", 0) == (1, 1, 1.0, 2)
    # tail of (0,0,0): true score 5; entity 1 removed ((0,0,1) known); entity 2 scores 3 -> 1, 1, C = 2
    assert _one(ranks, "tail", 1) == (1, 1, 1.0, 2)
    # raw: tail of (0,0,0): entity 1 ties (5), entity 2 below -> 1, 2, C = 3
    raw = reference_ranks(_hand_table(), [[0, 0, 1], [0, 0, 0]], filtered=False)
    assert _one(raw, "tail", 1) == (1, 2, 1.5, 3)


def test_whitelist_and_true_answer_outside_it() -> None:
    ranks = reference_ranks(_hand_table(), [[0, 0, 1]], restrict_entities_to=torch.tensor([2, 1]))
    # tail: true 1, others {2: 3 < 5} -> 1, 1, C = 2
    assert _one(ranks, "tail") == (1, 1, 1.0, 2)
    # head: true 0 is not whitelisted but still ranked and counted; others {1: 7 above, 2: 5 tie} -> 2, 3, C = 3
    assert _one(ranks, "head") == (2, 3, 2.5, 3)


def test_infinities_are_ordinary_values() -> None:
    inf = math.inf
    table = torch.tensor([[[inf, inf, -inf]], [[-inf, -inf, -inf]], [[inf, 0.0, -inf]]])  # (3, 1, 3)
    ranks = reference_ranks(table, [[0, 0, 1], [1, 0, 2]], filtered=False)
    # tail of (0,0,1): true +inf; others 0: +inf tie, 2: -inf -> 1, 2
    assert _one(ranks, "tail", 0) == (1, 2, 1.5, 3)
    # tail of (1,0,2): true -inf, others -inf, -inf -> 1, 3
    assert _one(ranks, "tail", 1) == (1, 3, 2.0, 3)
    # head of (1,0,2): table[:, 0, 2] = [-inf, -inf, -inf] -> 1, 3
    assert _one(ranks, "head", 1) == (1, 3, 2.0, 3)
    # head of (0,0,1): table[:, 0, 1] = [inf, -inf, 0]; true +inf -> 1, 1
    assert _one(ranks, "head", 0) == (1, 1, 1.0, 3)


def test_nan_score_is_an_error() -> None:
    table = _hand_table()
    table[0, 0, 2] = math.nan
    with pytest.raises(ValueError, match=r"NaN score of candidate 2 of tail task for triple \(0, 0, 1\)"):
        reference_ranks(table, [[0, 0, 1]])
    # filtered away -> no longer a candidate
    reference_ranks(table, [[0, 0, 1]], [torch.tensor([[0, 0, 2]])])
    table[0, 0, 1] = math.nan
    with pytest.raises(ValueError, match="NaN score of the true answer"):
        reference_ranks(table, [[0, 0, 1]])


def test_input_validation() -> None:
    with pytest.raises(ValueError, match=r"triples must have shape \(n, 3\)"):
        reference_ranks(_hand_table(), [[0, 1]])
    with pytest.raises(ValueError, match="outside the score table"):
        reference_ranks(_hand_table(), [[0, 0, 3]])
    with pytest.raises(ValueError, match="restrict_entities_to contains 5"):
        reference_ranks(_hand_table(), [[0, 0, 1]], restrict_entities_to=[5])
    with pytest.raises(ValueError, match=r"table must have shape \(E, R, E\)"):
        reference_ranks(torch.zeros(3, 3), [[0, 0, 1]])


def _vectorised_ranks(table: np.ndarray, triples: np.ndarray, known: set, universe: np.ndarray) -> dict:
    """A second, differently written implementation (dense numpy masks) to cross-check the loops."""
    out = {}
    for side in ("head", "tail"):
        opt, pes, cnt = [], [], []
        for h, r, t in triples.tolist():
            scores = table[h, r, :] if side == "tail" else table[:, r, t]
            true = t if side == "tail" else h
            mask = np.zeros(table.shape[0], dtype=bool)
            mask[universe] = True
            mask[true] = False
            for e in range(table.shape[0]):
                if ((h, r, e) if side == "tail" else (e, r, t)) in known:
                    mask[e] = False
            opt.append(1 + int(np.sum(mask & (scores > scores[true]))))
            pes.append(1 + int(np.sum(mask & (scores >= scores[true]))))
            cnt.append(1 + int(mask.sum()))
        out[side] = (opt, pes, cnt)
    return out


@settings(max_examples=60, deadline=None)
@given(graphs_and_tables(), st.booleans(), st.booleans())
def test_loops_agree_with_vectorised_version(case, filtered: bool, restrict: bool) -> None:
    graph, table = case
    universe = np.arange(0, graph.num_entities, 2) if restrict else np.arange(graph.num_entities)
    ranks = reference_ranks(
        table, graph.triples, graph.filter_triples, filtered, universe.tolist() if restrict else None
    )
    known = graph.known_triples() if filtered else set()
    expected = _vectorised_ranks(table.numpy(), graph.triples.numpy(), known, universe)
    for side in ("head", "tail"):
        opt, pes, cnt = expected[side]
        np.testing.assert_array_equal(ranks[side]["optimistic"], opt)
        np.testing.assert_array_equal(ranks[side]["pessimistic"], pes)
        np.testing.assert_array_equal(ranks[side]["num_candidates"], cnt)
        np.testing.assert_array_equal(ranks[side]["realistic"], (np.array(opt) + np.array(pes)) / 2)


@settings(max_examples=60, deadline=None)
@given(graphs_and_tables())
def test_rank_invariants(case) -> None:
    graph, table = case
    filtered = reference_ranks(table, graph.triples, graph.filter_triples)
    raw = reference_ranks(table, graph.triples, graph.filter_triples, filtered=False)
    for side in SIDES:
        f, w = filtered[side], raw[side]
        assert np.all(f["optimistic"] >= 1)
        assert np.all(f["optimistic"] <= f["realistic"])
        assert np.all(f["realistic"] <= f["pessimistic"])
        assert np.all(f["pessimistic"] <= f["num_candidates"])
        assert np.all(w["num_candidates"] == graph.num_entities)
        assert np.all(f["optimistic"] <= w["optimistic"])
        assert np.all(f["pessimistic"] <= w["pessimistic"])
        assert np.all(f["num_candidates"] <= w["num_candidates"])
    # identical evaluation triples get identical ranks
    rows = graph.triples.tolist()
    for i, j in itertools.combinations(range(len(rows)), 2):
        if rows[i] == rows[j]:
            for side in ("head", "tail"):
                assert _one(filtered, side, i) == _one(filtered, side, j)


# ----------------------------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("hits_at_10", ("hits_at_k", 10)),
        ("H@3", ("hits_at_k", 3)),
        ("hits@1", ("hits_at_k", 1)),
        ("mrr", ("inverse_harmonic_mean_rank", None)),
        ("Mean_Reciprocal_Rank", ("inverse_harmonic_mean_rank", None)),
        ("mr", ("arithmetic_mean_rank", None)),
        ("mean_rank", ("arithmetic_mean_rank", None)),
        ("gmr", ("geometric_mean_rank", None)),
        ("mad", ("median_absolute_deviation", None)),
        ("rank_var", ("variance", None)),
        ("amri", ("adjusted_arithmetic_mean_rank_index", None)),
        ("adjusted_mrr", ("adjusted_inverse_harmonic_mean_rank", None)),
        ("ah@3", ("adjusted_hits_at_k", 3)),
        ("adjusted_hits_at_10", ("adjusted_hits_at_k", 10)),
        ("zh@10", ("z_hits_at_k", 10)),
        ("z_hits_at_5", ("z_hits_at_k", 5)),
        ("zgmr", ("z_geometric_mean_rank", None)),
    ],
)
def test_canonical_key(name: str, expected: tuple) -> None:
    assert canonical_key(name) == expected


def test_canonical_key_errors() -> None:
    assert canonical_key("hits_at_k", 4) == ("hits_at_k", 4)
    with pytest.raises(ValueError, match="needs k"):
        canonical_key("hits_at_k")
    with pytest.raises(ValueError, match="carries k=10 but k=3"):
        canonical_key("hits_at_10", 3)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        canonical_key("hits_at_0")
    with pytest.raises(ValueError, match="unknown metric"):
        canonical_key("hits_at_10.5")
    with pytest.raises(ValueError, match="takes no k"):
        canonical_key("mrr", 3)


def test_key_lists_are_distinct() -> None:
    keys = plain_keys((1, 3, 5, 10)) + adjusted_keys((1, 3, 5, 10))
    assert len(keys) == len(set(keys)) == len(PLAIN_KEYS) + 4 + len(ADJUSTED_KEYS) + 8


# ----------------------------------------------------------------------------------------------- plain


def test_plain_metrics_by_hand() -> None:
    ranks = [1, 2, 4, 1.5]
    expected = {
        "hits_at_1": 1 / 4,  # only the 1 (1.5 > 1)
        "hits_at_2": 3 / 4,
        "arithmetic_mean_rank": 8.5 / 4,  # 2.125
        "inverse_arithmetic_mean_rank": 4 / 8.5,
        "inverse_harmonic_mean_rank": (1 + 1 / 2 + 1 / 4 + 2 / 3) / 4,
        "harmonic_mean_rank": 4 / (1 + 1 / 2 + 1 / 4 + 2 / 3),
        "geometric_mean_rank": 12 ** (1 / 4),  # 1 * 2 * 4 * 1.5 = 12
        "inverse_geometric_mean_rank": 12 ** (-1 / 4),
        "median_rank": 1.75,  # sorted 1, 1.5, 2, 4 -> (1.5 + 2) / 2
        "inverse_median_rank": 1 / 1.75,
        # deviations from 2.125: -1.125, -0.625, -0.125, 1.875 -> squares sum 5.1875
        "variance": 5.1875 / 4,
        "standard_deviation": math.sqrt(5.1875 / 4),
        # |r - 1.75| = 0.75, 0.25, 2.25, 0.25 -> median 0.5
        "median_absolute_deviation": 0.5 / MAD_SCALE,
        "count": 4.0,
    }
    for key, value in expected.items():
        assert plain_metric(key, ranks) == pytest.approx(value, rel=1e-15), key
    assert plain_metric("hits_at_k", ranks, k=2) == 3 / 4
    assert plain_metric("MRR", np.array(ranks)) == plain_metric("inverse_harmonic_mean_rank", ranks)


def test_plain_metrics_odd_count_and_empty() -> None:
    assert plain_metric("median_rank", [3, 1, 2]) == 2
    assert plain_metric("median_absolute_deviation", [3, 1, 2]) == pytest.approx(1 / MAD_SCALE)
    assert plain_metric("count", []) == 0.0
    assert math.isnan(plain_metric("arithmetic_mean_rank", []))
    with pytest.raises(ValueError, match="is not a plain metric"):
        plain_metric("amri", [1])


def test_metrics_from_ranks_layout_and_sides() -> None:
    ranks = reference_ranks(_hand_table(), [[0, 0, 1]])
    metrics = metrics_from_ranks(ranks, ks=(1, 2))
    # both pools head (2, 3, 2.5) and tail (1, 2, 1.5)
    assert metrics["both", "optimistic", "arithmetic_mean_rank"] == 1.5
    assert metrics["both", "pessimistic", "arithmetic_mean_rank"] == 2.5
    assert metrics["both", "realistic", "hits_at_2"] == 0.5  # 1.5 <= 2, 2.5 > 2
    assert metrics["tail", "realistic", "inverse_harmonic_mean_rank"] == 1 / 1.5
    assert metrics["head", "pessimistic", "count"] == 1.0
    assert ("head", "optimistic", "adjusted_arithmetic_mean_rank_index") in metrics  # every rank type, as PyKEEN
    assert ("head", "realistic", "adjusted_hits_at_2") in metrics
    expected_keys = {
        (side, rank_type, key)
        for side in SIDES
        for rank_type in RANK_TYPES
        for key in plain_keys((1, 2)) + adjusted_keys((1, 2))
    }
    assert set(metrics) == expected_keys
    tail_only = metrics_from_ranks(ranks, ks=(1,), targets=("tail",))
    assert {s for s, _, _ in tail_only} == {"tail", "both"}
    assert tail_only["both", "realistic", "arithmetic_mean_rank"] == 1.5
    assert reference_metrics(_hand_table(), [[0, 0, 1]], ks=(1, 2)) == metrics


# ----------------------------------------------------------------------------------------------- null model


def test_null_moments_by_hand() -> None:
    # C = [1, 2]: E[MR] = (1 + 1.5) / 2; Var = (0 + 3/12) / 4
    assert null_expectation("mr", [1, 2]) == 1.25
    assert null_variance("mr", [1, 2]) == 0.0625
    # MRR: H(1)/1 = 1, H(2)/2 = 0.75 -> E = 0.875; Var = (0 + (2 * 5/4 - 9/4) / 4) / 4 = 1/64
    assert null_expectation("mrr", [1, 2]) == 0.875
    assert null_variance("mrr", [1, 2]) == 1 / 64
    # C = [3]: E[1/r] = 11/18, E[1/r^2] = 49/108 -> Var = 13/162
    assert null_expectation("inverse_harmonic_mean_rank", [3]) == pytest.approx(11 / 18, rel=1e-15)
    assert null_variance("inverse_harmonic_mean_rank", [3]) == pytest.approx(13 / 162, rel=1e-15)
    # hits@1 with C = [1, 4]: p = 1, 1/4 -> E = 5/8, Var = (0 + 3/16) / 4
    assert null_expectation("hits_at_1", [1, 4]) == 5 / 8
    assert null_variance("hits_at_k", [1, 4], k=1) == 3 / 64
    # GMR with n = 1, C = 2: E = 1.5, Var = (1 + 4)/2 - 2.25
    assert null_expectation("gmr", [2]) == pytest.approx(1.5, rel=1e-15)
    assert null_variance("gmr", [2]) == pytest.approx(0.25, rel=1e-12)
    # all C = 1: deterministic
    assert null_variance("gmr", [1, 1, 1]) == 0.0
    assert null_expectation("gmr", [1, 1, 1]) == 1.0
    assert math.isnan(null_expectation("mr", []))
    with pytest.raises(ValueError, match="no null-model moments"):
        null_expectation("median_rank", [2])
    with pytest.raises(ValueError, match="num_candidates must be integers >= 1"):
        null_expectation("mr", [0])


CANDIDATE_SETS = [[1], [2], [5], [1, 1], [1, 2, 3], [4, 4], [3, 5, 2], [2, 7, 1, 3], [6, 6, 6, 6]]


@pytest.mark.parametrize("counts", CANDIDATE_SETS)
@pytest.mark.parametrize(
    ("metric", "k"),
    [("arithmetic_mean_rank", None), ("inverse_harmonic_mean_rank", None), ("geometric_mean_rank", None)]
    + [("hits_at_k", k) for k in (1, 2, 3, 10)],
)
def test_closed_forms_match_enumeration(counts: list[int], metric: str, k: int | None) -> None:
    mean, var = enumerated_null(metric, counts, k=k)
    assert null_expectation(metric, counts, k=k) == pytest.approx(mean, rel=1e-12, abs=1e-15)
    assert null_variance(metric, counts, k=k) == pytest.approx(var, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("counts", [[1, 3, 7, 20, 50], [2] * 30, [60]])
@pytest.mark.parametrize(
    ("metric", "k"),
    [("mr", None), ("mrr", None), ("gmr", None), ("hits_at_k", 1), ("hits_at_k", 5)],
)
def test_closed_forms_match_simulation(counts: list[int], metric: str, k: int | None) -> None:
    draws = sampled_null(metric, counts, k=k, num_samples=40_000, rng=1)
    mean, var = null_expectation(metric, counts, k=k), null_variance(metric, counts, k=k)
    n = len(draws)
    assert abs(draws.mean() - mean) <= 5 * math.sqrt(var / n) + 1e-12
    # standard error of the sample variance: sqrt((mu_4 - sigma^4) / n), mu_4 estimated from the draws
    fourth = np.mean((draws - draws.mean()) ** 4)
    assert abs(draws.var() - var) <= 5 * math.sqrt(max(fourth - var**2, 0.0) / n) + 1e-12


def test_enumeration_guard() -> None:
    with pytest.raises(ValueError, match="exceed max_combinations"):
        enumerated_null("mr", [100] * 4)


# ----------------------------------------------------------------------------------------------- adjusted


def test_adjusted_metrics_by_hand() -> None:
    ranks, counts = [1, 2], [3, 3]
    # MR = 1.5, E[MR] = 2, Var[MR] = (8/12 + 8/12) / 4 = 1/3
    assert adjusted_metric("amr", ranks, counts) == 0.75
    assert adjusted_metric("amri", ranks, counts) == 0.5  # (1.5 - 2) / (1 - 2)
    assert adjusted_metric("zmr", ranks, counts) == pytest.approx(math.sqrt(3) / 2)  # 0.5 / sqrt(1/3)
    # MRR = 3/4, E = 11/18 -> amrr = (27/36 - 22/36) / (14/36) = 5/14; Var = 13/324 -> zmrr = 5 / (2 sqrt 13)
    assert adjusted_metric("amrr", ranks, counts) == pytest.approx(5 / 14)
    assert adjusted_metric("zmrr", ranks, counts) == pytest.approx(5 / (2 * math.sqrt(13)))
    # hits@1 = 1/2, E = 1/3, Var = (2/9 + 2/9) / 4 = 1/9 -> ah@1 = 1/4, zh@1 = (1/6) / (1/3) = 1/2
    assert adjusted_metric("adjusted_hits_at_1", ranks, counts) == pytest.approx(0.25)
    assert adjusted_metric("ah@k", ranks, counts, k=1) == pytest.approx(0.25)
    assert adjusted_metric("z_hits_at_k", ranks, counts, k=1) == pytest.approx(0.5)
    # GMR = sqrt 2; E[GMR] = ((1 + sqrt 2 + sqrt 3) / 3)^2; Var = (E[r])^2 - E^2 with E[r] = 2
    e_gmr = ((1 + math.sqrt(2) + math.sqrt(3)) / 3) ** 2
    assert adjusted_metric("agmri", ranks, counts) == pytest.approx((math.sqrt(2) - e_gmr) / (1 - e_gmr))
    assert adjusted_metric("zgmr", ranks, counts) == pytest.approx(-(math.sqrt(2) - e_gmr) / math.sqrt(4 - e_gmr**2))


def test_zero_denominators_give_nan() -> None:
    ranks, counts = [1, 1], [1, 1]
    for key in ("amri", "amrr", "agmri", "zmr", "zmrr", "zgmr", "ah@1", "zh@1"):
        assert math.isnan(adjusted_metric(key, ranks, counts)), key
    assert adjusted_metric("amr", ranks, counts) == 1.0
    # k >= every C: hits are certain under the null model
    assert math.isnan(adjusted_metric("adjusted_hits_at_3", [1, 2], [2, 3]))
    assert math.isnan(adjusted_metric("z_hits_at_3", [1, 2], [2, 3]))
    assert not math.isnan(adjusted_metric("adjusted_hits_at_1", [1, 2], [2, 3]))
    assert math.isnan(adjusted_metric("amri", [], []))
    with pytest.raises(ValueError, match="differ in length"):
        adjusted_metric("amri", [1], [1, 2])
    with pytest.raises(ValueError, match="is not an adjusted or z metric"):
        adjusted_metric("mrr", [1], [2])


@pytest.mark.parametrize("counts", [[2], [3, 1], [2, 3, 4], [5, 5]])
def test_adjusted_metrics_under_null_model(counts: list[int]) -> None:
    """Enumerating every rank combination: adjusted indices average 0, AMR averages 1, z-scores are standard."""
    keys = [*ADJUSTED_KEYS, "adjusted_hits_at_1", "adjusted_hits_at_2", "z_hits_at_1", "z_hits_at_2"]
    values = {key: [] for key in keys}
    for combination in itertools.product(*(range(1, c + 1) for c in counts)):
        for key in keys:
            values[key].append(adjusted_metric(key, combination, counts))
    for key, vals in values.items():
        vals = np.asarray(vals)
        if np.isnan(vals).any():  # ah@2 / zh@2 with every C <= 2
            assert max(counts) <= 2
            assert key.endswith("_2")
            continue
        expected_mean = 1.0 if key == "adjusted_arithmetic_mean_rank" else 0.0
        assert vals.mean() == pytest.approx(expected_mean, abs=1e-12), key
        if key.startswith("z_"):
            assert vals.var() == pytest.approx(1.0, rel=1e-9), key


@settings(max_examples=50, deadline=None)
@given(ranks_and_candidates())
def test_adjusted_metrics_are_affine_in_the_plain_metric(data) -> None:
    ranks, counts = data
    mr = plain_metric("mr", ranks)
    e_mr = null_expectation("mr", counts)
    value = adjusted_metric("amri", ranks, counts)
    if math.isnan(value):
        assert np.all(counts == 1)
    else:
        assert value == pytest.approx(1 - (mr - 1) / (e_mr - 1), rel=1e-9, abs=1e-12)  # METRICS.md identity
        assert value <= 1 + 1e-12
    assert adjusted_metric("amr", ranks, counts) == pytest.approx(mr / e_mr)


# ----------------------------------------------------------------------------------------------- stratified

# Popularity set P: (0,0,1), (0,0,0), (2,1,1), (1,0,1)
#   N(e0) = 1 + 2 = 3, N(e1) = 1 + 1 + 2 = 4, N(e2) = 1; N(r0) = 3, N(r1) = 1
POPULARITY = torch.tensor([[0, 0, 1], [0, 0, 0], [2, 1, 1], [1, 0, 1]])
STRAT_TRIPLES = torch.tensor([[0, 0, 1], [1, 0, 2], [2, 1, 0]])
M_HEAD, M_TAIL = [1, 0, 1], [0, 1, 1]


def test_popularity_counts() -> None:
    entities, relations = popularity_counts(POPULARITY)
    assert dict(entities) == {0: 3, 1: 4, 2: 1}
    assert dict(relations) == {0: 3, 1: 1}
    entities, _ = popularity_counts([POPULARITY, POPULARITY[:1]])
    assert entities[0] == 4


def test_stratified_by_hand() -> None:
    # beta_e = 1: w0 = 1/3, w1 = 1/4, w2 = 1
    #   strat(0,0,1) = (w1*0 + w0*1) / (w0 + w1) = 4/7; strat(1,0,2) = (w2*1 + w1*0) / (w1 + w2) = 4/5
    #   strat(2,1,0) = 1; strat_r0 = (4/7 + 4/5) / 2 = 24/35; strat_r1 = 1
    # beta_r = 1:  w(r0) = 1/3, w(r1) = 1 -> (8/35 + 1) / (4/3) = 129/140
    # beta_r = -1: w(r0) = 3,   w(r1) = 1 -> (72/35 + 1) / 4 = 107/140
    value = stratified_reference(STRAT_TRIPLES, M_HEAD, M_TAIL, POPULARITY, beta_e=1, beta_r=1)
    assert value == pytest.approx(129 / 140, rel=1e-14)
    value = stratified_reference(STRAT_TRIPLES, M_HEAD, M_TAIL, POPULARITY, beta_e=1, beta_r=-1)
    assert value == pytest.approx(107 / 140, rel=1e-14)
    # beta_e = beta_r = 0: strat = (m_h + m_t)/2 = 1/2, 1/2, 1 -> r0: 1/2, r1: 1 -> 3/4
    assert stratified_reference(STRAT_TRIPLES, M_HEAD, M_TAIL, POPULARITY, 0, 0) == 0.75


def test_stratified_absent_items_and_floor() -> None:
    triples = torch.tensor([[3, 0, 1]])  # entity 3 never occurs in POPULARITY
    with pytest.raises(ValueError, match="entity 3 does not occur"):
        stratified_reference(triples, [1], [0], POPULARITY, 0.5, 0)
    with pytest.raises(ValueError, match="relation 2 does not occur"):
        stratified_reference(torch.tensor([[0, 2, 1]]), [1], [0], POPULARITY, 0, 0.5)
    # floor 1: N(e3) = 1, N(e1) = 4; beta_e = 1 -> w3 = 1, w1 = 1/4 -> (w1*0 + w3*1) / (5/4) = 4/5
    assert stratified_reference(triples, [1], [0], POPULARITY, 1, 0, min_count=1) == pytest.approx(0.8)
    # floor 4 lifts N(e3) to 4 and leaves N(e1) = 4 -> equal weights -> 1/2
    assert stratified_reference(triples, [1], [0], POPULARITY, 1, 0, min_count=4) == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"beta_e must be in \[-1, 1\]"):
        stratified_reference(triples, [1], [0], POPULARITY, 2, 0)
    assert math.isnan(stratified_reference(torch.zeros(0, 3, dtype=torch.long), [], [], POPULARITY, 0, 0))


def _random_case(seed: int):
    graph = random_graph(seed, 15, 3, 40, 60, duplicate_fraction=0.2)
    rng = np.random.default_rng(seed)
    table = torch.from_numpy(rng.integers(0, 4, (15, 3, 15)).astype(np.float32))
    ranks = reference_ranks(table, graph.triples, graph.filter_triples)
    return graph, table, ranks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lemma_1_micro_average(seed: int) -> None:
    """beta_e = 0, beta_r = -1 with popularity counted on the evaluation triples = micro average of 'both'."""
    graph, _, ranks = _random_case(seed)
    metrics = metrics_from_ranks(ranks, ks=(3,))
    head, tail = ranks["head"]["realistic"], ranks["tail"]["realistic"]
    per_task = {
        "hits_at_3": ((head <= 3) * 1.0, (tail <= 3) * 1.0),
        "inverse_harmonic_mean_rank": (1 / head, 1 / tail),
    }
    for key, (m_head, m_tail) in per_task.items():
        value = stratified_reference(graph.triples, m_head, m_tail, graph.triples, beta_e=0, beta_r=-1)
        assert value == pytest.approx(metrics["both", "realistic", key], rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lemma_2_macro_average(seed: int) -> None:
    """beta_e = beta_r = 0 = macro average over relations of the per-relation mean of (m_h + m_t) / 2."""
    graph, _, ranks = _random_case(seed)
    head, tail = 1 / ranks["head"]["pessimistic"], 1 / ranks["tail"]["pessimistic"]
    popularity = [graph.triples, *graph.filter_triples]
    value = stratified_reference(graph.triples, head, tail, popularity, beta_e=0, beta_r=0)
    per_relation = per_relation_reference(graph.triples, head, tail, side="both")
    assert value == pytest.approx(macro_average_reference(per_relation), rel=1e-12)
    # and it differs from the micro average on this unbalanced graph
    micro = (head.sum() + tail.sum()) / (2 * len(head))
    assert value != pytest.approx(micro, rel=1e-6)


# ----------------------------------------------------------------------------------------------- per relation


def test_per_relation_by_hand() -> None:
    triples = torch.tensor([[0, 0, 1], [1, 1, 2], [2, 0, 0]])
    head, tail = [1.0, 0.0, 0.5], [0.0, 1.0, 1.0]
    assert per_relation_reference(triples, head, tail, side="head") == {0: 0.75, 1: 0.0}
    assert per_relation_reference(triples, None, tail, side="tail") == {0: 0.5, 1: 1.0}
    assert per_relation_reference(triples, head, tail) == {0: 2.5 / 4, 1: 0.5}
    assert per_relation_reference(triples, head, tail, reduce=max) == {0: 1.0, 1: 1.0}
    assert macro_average_reference({0: 2.5 / 4, 1: 0.5}) == 0.5625
    assert math.isnan(macro_average_reference({}))
    with pytest.raises(ValueError, match="got 2 per-task values for 3 triples"):
        per_relation_reference(triples, head[:2], tail)


def test_per_relation_metrics_use_global_filtering() -> None:
    graph, table, ranks = _random_case(3)
    per_relation = reference_per_relation_metrics(table, graph.triples, graph.filter_triples, ks=(1, 3))
    assert set(per_relation) == set(graph.triples[:, 1].tolist())
    rows = graph.triples.tolist()
    for relation, metrics in per_relation.items():
        index = [i for i, row in enumerate(rows) if row[1] == relation]
        for side in ("head", "tail"):
            mrr = float(np.mean(1 / ranks[side]["realistic"][index]))
            assert metrics[side, "realistic", "inverse_harmonic_mean_rank"] == pytest.approx(mrr, rel=1e-12)
            assert metrics[side, "optimistic", "count"] == len(index)
    assert sum(m["both", "realistic", "count"] for m in per_relation.values()) == 2 * len(rows)
    macro = macro_average_metrics(per_relation)
    per_relation_mrr = per_relation_reference(
        graph.triples, 1 / ranks["head"]["realistic"], 1 / ranks["tail"]["realistic"]
    )
    assert macro["both", "realistic", "inverse_harmonic_mean_rank"] == pytest.approx(
        macro_average_reference(per_relation_mrr), rel=1e-12
    )


def test_fraction_arithmetic_is_exact() -> None:
    """The MR / MRR / hits moments are exact rationals: E[MRR] for C = 1..4 equals sum H(C)/C / n exactly."""
    harmonic = [sum(Fraction(1, j) for j in range(1, c + 1)) for c in range(1, 5)]
    expected = sum(h / c for h, c in zip(harmonic, range(1, 5), strict=True)) / 4
    assert null_expectation("mrr", [1, 2, 3, 4]) == float(expected)


def test_helpers_do_not_import_kgeval() -> None:
    """The reference must stay independent of the code it checks."""
    import ast
    import pathlib

    helpers = pathlib.Path(__file__).parents[1] / "helpers"
    for path in (helpers / "reference.py", helpers / "graphs.py"):  # invariance.py compares kgeval to them
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            assert not any(m.split(".")[0] == "kgeval" for m in modules), path
