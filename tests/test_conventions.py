"""kgeval.conventions against an independent computation of each tie convention from the scores themselves.

A tie-heavy score table (a few integer levels over 300 entities) is evaluated by kgeval (filtered, with known
triples removed); each convention's expected number comes from the table by brute force: per task, the list of
kept candidates is sorted explicitly with the convention's tie rule (true answer first / last / in id order), the
mean rank from scipy's rankdata, LibKGE's rounded mean from its own formula (rank + num_ties // 2), and the
random-tie expectation as the exact average over every position of the tie block. Nothing expected is derived from
kgeval's output.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import digamma
from scipy.stats import rankdata

from kgeval import RankBasedEvaluator
from kgeval.conventions import (
    CONVENTIONS,
    FILTER_CONVENTIONS,
    convention_metrics,
    expected_random_metrics,
    get_convention,
    index_order_ranks,
    rank_metrics,
)
from tests.helpers.graphs import TableModel, quantised_table, random_graph

ROOT = Path(__file__).resolve().parents[1]
KS = (1, 3, 10)
NUM_ENTITIES, NUM_RELATIONS = 300, 2


# -- the independent reference ---------------------------------------------------------------------------------
def candidate_rows(table: torch.Tensor, graph, filtered: bool = True):
    """Per ranking task (head tasks of every triple, then tail tasks): (side, candidate ids in id order, their
    scores, position of the true answer among them), candidates = all entities minus the known other answers."""
    known = graph.known_triples() if filtered else set()
    scores = table.double().numpy()
    rows = []
    for side in ("head", "tail"):
        for h, r, t in graph.triples.tolist():
            if side == "tail":
                ids = [e for e in range(NUM_ENTITIES) if e == t or (h, r, e) not in known]
                row, true = scores[h, r, ids], ids.index(t)
            else:
                ids = [e for e in range(NUM_ENTITIES) if e == h or (e, r, t) not in known]
                row, true = scores[ids, r, t], ids.index(h)
            rows.append((side, np.asarray(ids), np.asarray(row), true))
    return rows


def sorted_position(row: np.ndarray, true: int, rule: str) -> int:
    """1-based position of the true answer after sorting the candidates by descending score, ties by ``rule``."""
    if rule == "first":
        key = [(-s, 0 if i == true else 1, i) for i, s in enumerate(row)]
    elif rule == "last":
        key = [(-s, 1 if i == true else 0, i) for i, s in enumerate(row)]
    else:  # argsort: a stable sort, ties in candidate-id order
        return int(np.flatnonzero(np.argsort(-row, kind="stable") == true)[0]) + 1
    order = sorted(range(len(row)), key=lambda i: key[i])
    return order.index(true) + 1


def plain_metrics(ranks) -> dict[str, float]:
    ranks = np.asarray(ranks, dtype=np.float64)
    out = {"mrr": float(np.mean(1.0 / ranks)), "mr": float(np.mean(ranks))}
    out.update({f"hits@{k}": float(np.mean(ranks <= k)) for k in KS})
    return out


def reference(rows, convention: str) -> dict[str, float]:
    """The convention's metrics over ``rows``, computed from the scores alone."""
    if convention in ("first", "last", "argsort"):
        return plain_metrics([sorted_position(row, true, convention) for _, _, row, true in rows])
    if convention == "mean":
        return plain_metrics([rankdata(-row, method="average")[true] for _, _, row, true in rows])
    if convention == "rounded-mean":  # LibKGE: rank (0-based) + num_ties // 2, ties counting the true answer
        ranks = []
        for _, _, row, true in rows:
            better, ties = int(np.sum(row > row[true])), int(np.sum(row == row[true]))
            ranks.append(better + ties // 2 + 1)
        return plain_metrics(ranks)
    assert convention == "expected-random"
    reciprocal, position, hits = [], [], {k: [] for k in KS}
    for _, _, row, true in rows:  # every order of the tie block is as likely: the true answer at each position
        ordered = np.sort(-row)
        block = np.flatnonzero(ordered == -row[true]) + 1
        reciprocal.append(math.fsum(1.0 / block) / len(block))
        position.append(float(np.mean(block)))
        for k in KS:
            hits[k].append(float(np.mean(block <= k)))
    out = {"mrr": float(np.mean(reciprocal)), "mr": float(np.mean(position))}
    out.update({f"hits@{k}": float(np.mean(hits[k])) for k in KS})
    return out


@pytest.fixture(scope="module", params=[(3, 0), (12, 1)], ids=["levels3", "levels12"])
def case(request):
    levels, seed = request.param
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, NUM_ENTITIES, NUM_RELATIONS, num_triples=250, num_filter=600)
    table = quantised_table(rng, NUM_ENTITIES, NUM_RELATIONS, levels=levels)
    results = RankBasedEvaluator(ks=KS).evaluate(
        TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    return graph, table, results, candidate_rows(table, graph)


# -- every convention's number ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["first", "last", "mean", "rounded-mean", "expected-random"])
@pytest.mark.parametrize("side", ["both", "head", "tail"])
def test_convention_reproduces_independent_computation(case, name: str, side: str) -> None:
    _, _, results, rows = case
    chosen = [row for row in rows if side in ("both", row[0])]
    expected = reference(chosen, name)
    got = convention_metrics(results, name, ks=KS, side=side)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (name, side, key)


def test_the_case_is_tie_heavy_and_the_conventions_differ(case) -> None:
    _, _, results, rows = case
    tied = np.mean([np.sum(row == row[true]) > 1 for _, _, row, true in rows])
    assert tied > 0.5
    mrr = {name: convention_metrics(results, name)["mrr"] for name in CONVENTIONS if CONVENTIONS[name].from_records}
    assert mrr["first"] > mrr["rounded-mean"] and mrr["first"] > mrr["mean"] > mrr["last"]
    assert mrr["first"] > mrr["expected-random"] > mrr["last"]
    assert mrr["expected-random"] > mrr["mean"]  # Jensen: E[1/k] >= 1/E[k], strictly with ties


def test_rank_frame_and_records_give_the_same_numbers(case) -> None:
    _, _, results, _ = case
    for name in ("first", "expected-random", "rounded-mean"):
        direct = convention_metrics(results, name)
        assert convention_metrics(results.ranks_df(), name) == direct
        assert convention_metrics(results.records, name) == direct


def test_rank_type_conventions_are_kgeval_rank_types(case) -> None:
    _, _, results, _ = case
    for convention in CONVENTIONS.values():
        if convention.rank_type is None:
            continue
        got = convention_metrics(results, convention, ks=KS)
        assert got["mrr"] == pytest.approx(results.get_metric(f"both.{convention.rank_type}.mrr"), rel=1e-12)
        assert got["hits@10"] == pytest.approx(results.get_metric(f"both.{convention.rank_type}.hits@10"), rel=1e-12)


# -- argsort: from the scores ------------------------------------------------------------------------------------
def test_index_order_ranks_match_a_stable_sort(case) -> None:
    graph, table, results, rows = case
    known = graph.known_triples()
    tails = graph.triples[:, 2].numpy()
    scores = table[graph.triples[:, 0], graph.triples[:, 1], :]  # (n, E) tail scores
    filtered = np.array(
        [[(h, r, e) in known and e != t for e in range(NUM_ENTITIES)] for h, r, t in graph.triples.tolist()]
    )
    ranks = index_order_ranks(scores, tails, filtered)
    tail_rows = [row for row in rows if row[0] == "tail"]
    assert ranks.tolist() == [sorted_position(row, true, "argsort") for _, _, row, true in tail_rows]
    expected = reference(tail_rows, "argsort")
    got = rank_metrics(ranks, KS)
    assert got == pytest.approx(expected, rel=1e-12)
    first, last = (convention_metrics(results, name, ks=KS, side="tail") for name in ("first", "last"))
    assert first["mrr"] >= got["mrr"] >= last["mrr"] and first["mr"] <= got["mr"] <= last["mr"]
    assert first["mrr"] > got["mrr"] > last["mrr"]  # ties are common enough for both to be strict


def test_index_order_ranks_small_example() -> None:
    scores = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.0], [5.0, 5.0, 5.0, 5.0, 5.0]])
    assert index_order_ranks(scores, [2, 0]).tolist() == [2, 1]
    assert index_order_ranks(scores, [2, 4]).tolist() == [2, 5]
    filtered = np.zeros((2, 5), dtype=bool)
    filtered[0, 1] = filtered[1, :] = True  # the true answer itself is never removed
    assert index_order_ranks(scores, [2, 4], filtered).tolist() == [1, 1]
    with pytest.raises(ValueError, match="NaN"):
        index_order_ranks([[1.0, float("nan")]], [0])
    with pytest.raises(ValueError, match="true_index"):
        index_order_ranks([[1.0, 2.0]], [2])


# -- expected-random with large ranks ----------------------------------------------------------------------------
def _exact_mean_reciprocal(low: int, high: int) -> float:
    """(1/low + ... + 1/high) / (high - low + 1), summed as exact fractions (fsum of rounded terms for wide blocks)."""
    if high - low < 5000:
        return float(sum(Fraction(1, j) for j in range(low, high + 1)) / (high - low + 1))
    return math.fsum(1.0 / j for j in range(low, high + 1)) / (high - low + 1)


@pytest.mark.parametrize(
    ("low", "high"),
    [(1, 1), (3, 3), (2, 65), (2, 66), (1, 64), (15, 80), (16, 81), (9, 400), (1, 1_000_000), (10**8, 10**8 + 1000),
     (5 * 10**8, 5 * 10**8 + 70), (10**12, 10**12 + 100), (2**53 - 100, 2**53)],
)  # fmt: skip
def test_expected_reciprocal_rank_is_exact_for_wide_and_far_blocks(low: int, high: int) -> None:
    """To a few units in the last place wherever the block lies (abs=0: the values are as small as 1e-16; a
    difference of two digammas was 2.6e-9 off at rank 5e8 and 7e-6 at 1e12)."""
    width = high - low + 1
    got = expected_random_metrics([low], [high], ks=(1, 10**8))
    assert got["mrr"] == pytest.approx(_exact_mean_reciprocal(low, high), rel=1e-14, abs=0)
    assert got["mr"] == (low + high) / 2
    assert got["hits@1"] == (1.0 / width if low == 1 else 0.0)
    assert got["hits@100000000"] == pytest.approx(min(max(10**8 - low + 1, 0), width) / width, rel=1e-15, abs=0)


def test_expected_reciprocal_rank_is_exact_for_random_wide_blocks() -> None:
    """Blocks of 65 to 400 ranks starting anywhere in 1..40 (the digamma's shifted and series parts both in play),
    against sums of exact fractions."""
    rng = np.random.default_rng(0)
    low = rng.integers(1, 40, 60)
    high = low + rng.integers(64, 400, 60)
    got = expected_random_metrics(low, high, ks=(1,))
    exact = np.mean([_exact_mean_reciprocal(int(a), int(b)) for a, b in zip(low, high, strict=True)])
    assert got["mrr"] == pytest.approx(exact, rel=1e-14, abs=0)


def test_expected_reciprocal_rank_for_huge_pessimistic_ranks() -> None:
    high = np.array([10**12, 10**15, 2**53])
    got = expected_random_metrics(np.ones(3, dtype=np.int64), high, ks=(1,))
    exact = np.mean((digamma(high.astype(np.float64) + 1) - digamma(1.0)) / high)  # no cancellation from rank 1
    assert got["mrr"] == pytest.approx(exact, rel=1e-13, abs=0)
    assert np.isfinite(got["mr"]) and got["hits@1"] == pytest.approx(np.mean(1.0 / high), rel=1e-14, abs=0)


def test_ranks_that_are_no_integers_are_refused() -> None:
    """Before, 1.9 and 3.7 were truncated to 1 and 3 without a word; NaN and inf gave NumPy's conversion errors."""
    for bad, shown in ((1.9, "1.9"), (float("nan"), "nan"), (float("inf"), "inf")):
        with pytest.raises(ValueError, match=rf"column 'optimistic' row 0 = {shown} is not an integer >= 1"):
            expected_random_metrics([bad], [4], ks=(1,))
    with pytest.raises(ValueError, match=r"column 'true_index' row 0 = 1.7 is not an integer >= 0"):
        index_order_ranks([[1.0, 2.0]], [1.7])
    with pytest.raises(ValueError, match="ks must be a sequence of positive integers, got 10"):
        rank_metrics([1, 2], ks=10)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_scores_and_ranks(dtype: torch.dtype) -> None:
    """bfloat16 tensors (NumPy has no such dtype) are widened exactly: the ranks of the float32 copy."""
    generator = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 3, (30, 9), generator=generator).to(dtype)
    target = torch.randint(0, 9, (30,), generator=generator)
    expected = index_order_ranks(scores.float(), target)
    np.testing.assert_array_equal(index_order_ranks(scores, target), expected)
    assert rank_metrics(torch.tensor(expected, dtype=dtype)) == rank_metrics(expected)


# -- names and errors ----------------------------------------------------------------------------------------------
def test_aliases_resolve() -> None:
    assert get_convention("best_rank").name == "first"
    assert get_convention("Worst_Rank").name == "last"
    assert get_convention("optimistic").name == "first"
    assert get_convention("realistic").name == "mean"
    assert get_convention("rounded_mean_rank").name == "rounded-mean"
    assert get_convention("random").name == "expected-random"
    assert get_convention("ordinal").name == "argsort"
    assert get_convention(CONVENTIONS["last"]) is CONVENTIONS["last"]
    names = [alias for convention in CONVENTIONS.values() for alias in (convention.name, *convention.aliases)]
    assert len(names) == len(set(names))


def test_unknown_convention_lists_the_known_ones(case) -> None:
    _, _, results, _ = case
    with pytest.raises(ValueError, match="unknown tie convention 'median'") as error:
        convention_metrics(results, "median")
    for name in CONVENTIONS:
        assert name in str(error.value)


def test_argsort_needs_the_scores(case) -> None:
    _, _, results, _ = case
    with pytest.raises(ValueError, match=r"candidate id.*index_order_ranks\(scores"):
        convention_metrics(results, "argsort")
    with pytest.raises(ValueError, match="candidate id"):
        convention_metrics(results, "stable_argsort")


def test_filter_conventions_point_to_the_evaluator(case) -> None:
    _, _, results, _ = case
    with pytest.raises(ValueError, match=r"filter convention.*filtered=False"):
        convention_metrics(results, "raw")
    with pytest.raises(ValueError, match="TemporalRankBasedEvaluator"):
        convention_metrics(results, "time-aware")


def test_bad_arguments(case) -> None:
    graph, table, results, _ = case
    with pytest.raises(ValueError, match="side must be one of"):
        convention_metrics(results, "first", side="relation")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ks must be a non-empty sequence of positive integers"):
        convention_metrics(results, "first", ks=(0,))
    with pytest.raises(TypeError, match="RankBasedMetricResults or a rank DataFrame"):
        convention_metrics([1, 2], "first")
    bare = RankBasedEvaluator(keep_records=False).evaluate(TableModel(table), graph.triples[:5], use_tqdm=False)
    with pytest.raises(ValueError, match="keep_records=True"):
        convention_metrics(bare, "first")
    with pytest.raises(ValueError, match=">= 1"):
        rank_metrics([0.5, 2.0])


# -- the documentation -------------------------------------------------------------------------------------------
def test_docs_table_names_every_convention_and_its_example_runs() -> None:
    text = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    for name in (*CONVENTIONS, *FILTER_CONVENTIONS):
        assert f"`{name}`" in text, name
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/conventions.md", "exec"), {})  # the documentation's own example
