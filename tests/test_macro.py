"""Macro-weighted metrics (kgeval.variants.macro, kgeval.metrics.weighted) against a brute-force reference written
from the definitions (docs/METRICS.md, Weighted and macro-weighted metrics): weights counted query by query, every
metric and its null-model moments summed task by task in 40-digit decimals, on tie-heavy random records where queries
repeat."""

from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from kgeval import MacroRankBasedEvaluator, RankBasedEvaluator, RankBasedMetricResults
from kgeval.datasets import load_shipped_dataset
from kgeval.metrics.weighted import WeightedRanks, weighted_metrics
from kgeval.models import DistMult
from kgeval.variants.macro import macro_results
from tests.helpers.rank_records import random_records

MAD_SCALE = 1.0 / 0.6744897501960817
SIDES = {0: "head", 1: "tail"}
QUERY = {"head": ("relation", "tail"), "tail": ("head", "relation")}


def reference_weights(records: dict[str, np.ndarray], side: str) -> list[Fraction]:
    """1 / (number of tasks of the side with the same query), task by task in record order, as exact fractions."""
    code = {v: k for k, v in SIDES.items()}[side]
    rows = [i for i in range(len(records["side"])) if records["side"][i] == code]
    queries = [tuple(int(records[column][i]) for column in QUERY[side]) for i in rows]
    counts = Counter(queries)
    return [Fraction(1, counts[query]) for query in queries]


def weighted_median(values: list[float], weights: list[Fraction]) -> float:
    """The smallest value whose cumulative weight share reaches 1/2 (the mean with the next at exactly 1/2),
    summed in exact fractions (a float sum of 1/3 + 1/3 + 1/2 + 1/3 misses 3/2)."""
    pairs = sorted(zip(values, weights, strict=True), key=lambda pair: pair[0])
    total = sum(weights, Fraction(0))
    cumulative = Fraction(0)
    for i, (value, weight) in enumerate(pairs):
        cumulative += weight
        share = cumulative / total
        if share == Fraction(1, 2) and i + 1 < len(pairs):
            return (value + pairs[i + 1][0]) / 2
        if share >= 0.5:
            return value
    raise AssertionError("unreachable")


def reference_metrics(ranks: list[float], candidates: list[int], weights: list[Fraction], ks: tuple[int, ...]) -> dict:
    """Weighted metrics and their adjusted forms, straight from the definitions, in 40-digit decimals."""
    with localcontext() as context:
        context.prec = 40
        total = sum(Decimal(w.numerator) / Decimal(w.denominator) for w in weights)
        v = [Decimal(w.numerator) / Decimal(w.denominator) / total for w in weights]
        r = [Decimal(x) for x in ranks]
        out: dict[str, float] = {}

        def mean(values: list[Decimal]) -> Decimal:
            return sum(vi * x for vi, x in zip(v, values, strict=True))

        def moments(expected: list[Decimal], variances: list[Decimal]) -> tuple[Decimal, Decimal]:
            return mean(expected), sum(vi * vi * var for vi, var in zip(v, variances, strict=True))

        def uniform(c: int, f) -> tuple[Decimal, Decimal]:  # E[f(r)], Var[f(r)] for r uniform on 1..c
            values = [f(Decimal(j)) for j in range(1, c + 1)]
            e = sum(values) / c
            return e, sum((x - e) ** 2 for x in values) / c

        mr = mean(r)
        mrr = mean([1 / x for x in r])
        gmr = (mean([x.ln() for x in r])).exp()
        out.update(arithmetic_mean_rank=mr, inverse_arithmetic_mean_rank=1 / mr, inverse_harmonic_mean_rank=mrr)
        out.update(harmonic_mean_rank=1 / mrr, geometric_mean_rank=gmr, inverse_geometric_mean_rank=1 / gmr)
        rank_moments = [uniform(c, lambda j: j) for c in candidates]
        reciprocal_moments = [uniform(c, lambda j: 1 / j) for c in candidates]
        null = {
            "arithmetic_mean_rank": moments(*zip(*rank_moments, strict=True)),
            "inverse_harmonic_mean_rank": moments(*zip(*reciprocal_moments, strict=True)),
        }
        first = [uniform(c, lambda j, vi=vi: j**vi)[0] for c, vi in zip(candidates, v, strict=True)]
        second = [uniform(c, lambda j, vi=vi: j ** (2 * vi))[0] for c, vi in zip(candidates, v, strict=True)]
        e_gmr = math.prod(first, start=Decimal(1))
        null["geometric_mean_rank"] = (e_gmr, math.prod(second, start=Decimal(1)) - e_gmr**2)
        for k in ks:
            out[f"hits_at_{k}"] = mean([Decimal(int(x <= k)) for x in ranks])
            p = [min(Decimal(k) / c, Decimal(1)) for c in candidates]
            null[f"hits_at_{k}"] = moments(p, [pi * (1 - pi) for pi in p])

        def adjusted(key: str, base: str, kind: str, sign: int = 1) -> None:
            """key = ratio M / E, index (M - E) / (1 - E) or z sign (M - E) / sqrt(Var) of the base metric M."""
            value, (e, var) = out[base], null[base]
            if kind == "ratio":
                out[key] = value / e
            elif kind == "index" and e != 1:
                out[key] = (value - e) / (1 - e)
            elif kind == "z" and var > 0:
                out[key] = sign * (value - e) / var.sqrt()

        adjusted("adjusted_arithmetic_mean_rank", "arithmetic_mean_rank", "ratio")
        adjusted("adjusted_arithmetic_mean_rank_index", "arithmetic_mean_rank", "index")
        adjusted("z_arithmetic_mean_rank", "arithmetic_mean_rank", "z", -1)
        adjusted("adjusted_inverse_harmonic_mean_rank", "inverse_harmonic_mean_rank", "index")
        adjusted("z_inverse_harmonic_mean_rank", "inverse_harmonic_mean_rank", "z")
        adjusted("adjusted_geometric_mean_rank_index", "geometric_mean_rank", "index")
        adjusted("z_geometric_mean_rank", "geometric_mean_rank", "z", -1)
        for k in ks:
            adjusted(f"adjusted_hits_at_{k}", f"hits_at_{k}", "index")
            adjusted(f"z_hits_at_{k}", f"hits_at_{k}", "z")
        values = {name: float(value) for name, value in out.items()}
    median = weighted_median(ranks, weights)
    values.update(
        median_rank=median,
        inverse_median_rank=1 / median,
        median_absolute_deviation=weighted_median([abs(x - median) for x in ranks], weights) * MAD_SCALE,
        count=float(len(ranks)),
        variance=float(np.var(ranks)),
        standard_deviation=float(np.std(ranks)),
    )
    return values


def side_columns(records: dict[str, np.ndarray], side: str, rank_type: str) -> tuple[list[float], list[int]]:
    rows = [i for i in range(len(records["side"])) if SIDES[int(records["side"][i])] == side]
    low, high = records["optimistic"], records["pessimistic"]
    pick = {"optimistic": lambda i: float(low[i]), "pessimistic": lambda i: float(high[i]),
            "realistic": lambda i: (float(low[i]) + float(high[i])) / 2}[rank_type]  # fmt: skip
    return [pick(i) for i in rows], [int(records["num_candidates"][i]) for i in rows]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_macro_results_equal_the_reference(seed: int) -> None:
    """Every side, rank type and metric; a small graph so queries repeat (weights 1/2, 1/3, ...)."""
    records = random_records(seed, n=60, num_entities=4, num_relations=2)
    ks = (1, 3, 10)
    results = macro_results(RankBasedMetricResults.from_records(records, ks=ks))
    assert results.records is None
    for rank_type in ("optimistic", "pessimistic", "realistic"):
        pooled: tuple[list, list, list] = ([], [], [])
        for side in ("head", "tail"):
            ranks, candidates = side_columns(records, side, rank_type)
            weights = reference_weights(records, side)
            assert min(weights) < 1  # queries repeat
            for part, values in zip(pooled, (ranks, candidates, weights), strict=True):
                part.extend(values)
            expected = reference_metrics(ranks, candidates, weights, ks)
            for name, value in expected.items():
                got = results.data[(side, rank_type, name)]
                assert got == pytest.approx(value, rel=1e-9, abs=1e-12), (side, rank_type, name)
        expected = reference_metrics(*pooled, ks)
        for name, value in expected.items():
            assert results.data[("both", rank_type, name)] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_distinct_queries_give_the_unweighted_metrics() -> None:
    """Every query once (weights all 1): the macro metrics are the micro ones."""
    rng = np.random.default_rng(5)
    n = 40
    triples = np.column_stack([np.arange(n), rng.integers(0, 3, n), np.arange(n, 2 * n)])  # every query distinct
    optimistic = rng.integers(1, 9, 2 * n)
    pessimistic = optimistic + rng.integers(0, 3, 2 * n)
    records = {"head": np.tile(triples[:, 0], 2), "relation": np.tile(triples[:, 1], 2),
               "tail": np.tile(triples[:, 2], 2), "side": np.repeat(np.array([0, 1], dtype=np.int8), n),
               "optimistic": optimistic, "pessimistic": pessimistic,
               "num_candidates": pessimistic + rng.integers(0, 4, 2 * n),
               "task_index": np.tile(np.arange(n), 2)}  # fmt: skip
    micro = RankBasedMetricResults.from_records(records)
    macro = macro_results(micro)
    assert macro.data.keys() == micro.data.keys()
    for key, value in micro.data.items():
        assert macro.data[key] == pytest.approx(value, rel=1e-12, abs=1e-15, nan_ok=True), key
    for key, moments in micro.null_model.items():
        assert macro.null_model[key] == pytest.approx(moments, rel=1e-9, abs=1e-15, nan_ok=True), key


def test_weighted_ranks_are_checked() -> None:
    ranks, candidates = np.array([1.0, 2.0]), np.array([3, 3])
    with pytest.raises(ValueError, match="positive"):
        WeightedRanks(ranks, candidates, np.array([1.0, 0.0]), (1,))
    with pytest.raises(ValueError, match="shape"):
        WeightedRanks(ranks, candidates, np.array([1.0]), (1,))
    assert weighted_metrics(WeightedRanks(ranks, candidates, np.array([3.0, 1.0]), (1,)), "realistic")[
        "arithmetic_mean_rank"
    ] == pytest.approx(1.25)


def test_macro_evaluator_is_the_macro_of_the_evaluation() -> None:
    """kgeval.MacroRankBasedEvaluator ranks as RankBasedEvaluator and reports the macro weights of its records,
    raw ones too with filtered='both'; it refuses to drop the records it needs."""
    ds = load_shipped_dataset("nations")
    model = DistMult(ds.num_entities, ds.num_relations, dim=16, seed=0)
    kwargs = {"additional_filter_triples": [ds.train, ds.valid], "use_tqdm": False}
    micro = RankBasedEvaluator(filtered="both").evaluate(model, ds.test, **kwargs)
    macro = MacroRankBasedEvaluator(filtered="both").evaluate(model, ds.test, **kwargs)
    expected = macro_results(micro)
    assert macro.data == expected.data and macro.raw is not None and macro.raw.data == expected.raw.data
    assert abs(macro.get_metric("mrr") - micro.get_metric("mrr")) > 1e-4  # Nations test repeats queries
    with pytest.raises(ValueError, match="keep_records"):
        MacroRankBasedEvaluator(keep_records=False)
    without = RankBasedEvaluator(keep_records=False).evaluate(model, ds.test, **kwargs)
    with pytest.raises(ValueError, match="records"):
        macro_results(without)


def test_the_weighted_median_meets_an_exact_half() -> None:
    """Tail ranks 1..6 of weights 1/3, 1/3, 1/2, 1/3, 1, 1/2 (queries of 3, 2 and 1 answers): the cumulative weight
    at rank 4 is 3/2 of 3, exactly half, so the median is (4 + 5) / 2 -- a float sum (1.4999999999999998) gave 5."""
    ranks = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    denominators = np.array([3, 3, 2, 3, 1, 2])
    weighted = WeightedRanks(ranks, np.full(6, 10), 1.0 / denominators, (1,), denominators)
    assert weighted.median(ranks, "median_rank") == 4.5
