"""Hits@k and MRR among N sampled candidates (kgeval.analysis.sampled_estimates), each expectation derived here
independently: (a) every subset of negatives enumerated in exact fractions; (b) kgeval's own sampled evaluator
averaged over many seeds on Nations; (c) ULTRA's binomial formula re-stated; (d) C = 5,000,000 against exact
rational sums (and SciPy's hypergeometric pmf). The rank rules are METRICS.md's (optimistic, pessimistic, realistic
= their mean) and docs/conventions.md's expected-random rule; nothing expected comes from kgeval's output."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, SampledRankBasedEvaluator
from kgeval.analysis.sampled_estimates import (
    sampled_hits_at_k,
    sampled_hits_at_k_per_task,
    sampled_key,
    sampled_metrics,
    sampled_mrr,
    sampled_reciprocal_rank_per_task,
)
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.records import RankRecords

RULES = [("optimistic", "mean"), ("pessimistic", "mean"), ("realistic", "mean"), ("realistic", "expected-random")]


def records_of(above, tied, candidates, sides=None) -> RankRecords:
    """Records of tasks with ``above`` negatives scoring above the answer, ``tied`` tying, ``candidates`` = C."""
    above, tied, candidates = (np.asarray(value, dtype=np.int64) for value in (above, tied, candidates))
    n = len(above)
    return RankRecords.from_columns(
        {
            "head": np.zeros(n, dtype=np.int64),
            "relation": np.zeros(n, dtype=np.int64),
            "tail": np.ones(n, dtype=np.int64),
            "side": np.ones(n, dtype=np.int64) if sides is None else np.asarray(sides),
            "optimistic": 1 + above,
            "pessimistic": 1 + above + tied,
            "num_candidates": candidates,
        }
    )


# -- the values of one sampled outcome: x drawn negatives above the answer, y tied with it ------------------------
def outcome(x: int, y: int, k: int, rank_type: str, ties: str) -> tuple[Fraction, Fraction]:
    """(hits@k, reciprocal rank) of an answer with x drawn negatives above and y tied, in exact fractions."""
    if rank_type == "optimistic":
        rank = Fraction(1 + x)
    elif rank_type == "pessimistic":
        rank = Fraction(1 + x + y)
    elif ties == "mean":
        rank = Fraction(2 + 2 * x + y, 2)
    else:  # a uniformly random position of the tie block 1 + x ... 1 + x + y
        positions = range(1 + x, 2 + x + y)
        return (Fraction(sum(p <= k for p in positions), y + 1), sum(Fraction(1, p) for p in positions) / (y + 1))
    return Fraction(int(rank <= k)), 1 / rank


def brute_force(above: int, tied: int, candidates: int, num_samples: int, k: int, rank_type: str, ties: str):
    """(E[hits@k], E[1 / rank]) over every set of min(N - 1, C - 1) distinct negatives, equally likely."""
    labels = ["above"] * above + ["tied"] * tied + ["below"] * (candidates - 1 - above - tied)
    size = min(num_samples - 1, len(labels))
    hits = reciprocal = Fraction(0)
    count = 0
    for subset in itertools.combinations(range(len(labels)), size):
        drawn = [labels[i] for i in subset]
        h, r = outcome(drawn.count("above"), drawn.count("tied"), k, rank_type, ties)
        hits, reciprocal, count = hits + h, reciprocal + r, count + 1
    return hits / count, reciprocal / count


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("rank_type", "ties"), RULES)
def test_every_subset_enumerated_in_fractions(seed: int, rank_type: str, ties: str) -> None:
    """Small tasks with heavy ties; N from 2 to beyond C (then every negative is drawn)."""
    rng = np.random.default_rng(seed)
    tasks = []
    for _ in range(24):
        candidates = int(rng.integers(1, 12))
        above = int(rng.integers(0, candidates))
        tied = int(rng.integers(0, candidates - above))
        tasks.append((above, tied, candidates))
    tasks += [(0, 0, 1), (0, 5, 6), (5, 0, 6), (2, 3, 6)]  # one candidate; all tied; all above; none below
    records = records_of(*zip(*tasks, strict=True))
    for num_samples in (2, 3, 5, 13):
        for k in (1, 2, 3, 7):
            expected = [brute_force(*task, num_samples, k, rank_type, ties) for task in tasks]
            hits = sampled_hits_at_k_per_task(records, k, num_samples, rank_type=rank_type, ties=ties)
            np.testing.assert_allclose(hits, [float(h) for h, _ in expected], rtol=0, atol=1e-12)
        reciprocal = sampled_reciprocal_rank_per_task(records, num_samples, rank_type=rank_type, ties=ties)
        np.testing.assert_allclose(reciprocal, [float(r) for _, r in expected], rtol=0, atol=1e-12)
        mean = sampled_mrr(records, num_samples, rank_type=rank_type, ties=ties)
        assert mean == pytest.approx(float(sum(r for _, r in expected) / len(expected)), abs=1e-12)


def test_a_list_as_long_as_the_candidates_gives_the_records_own_metrics() -> None:
    """N >= C draws every negative: the sampled ranks are the records' ranks, and the numbers METRICS.md's."""
    rng = np.random.default_rng(7)
    candidates = rng.integers(1, 40, 300)
    above = rng.integers(0, candidates)
    tied = rng.integers(0, candidates - above)
    records = records_of(above, tied, candidates)
    low, high = 1 + above, 1 + above + tied
    for rank_type, rank in (("optimistic", low), ("pessimistic", high), ("realistic", (low + high) / 2)):
        for k in (1, 3, 10):
            assert sampled_hits_at_k(records, k, 40, rank_type=rank_type) == pytest.approx(np.mean(rank <= k))
        assert sampled_mrr(records, 40, rank_type=rank_type) == pytest.approx(np.mean(1 / rank), abs=1e-14)


def test_hits_beyond_every_possible_rank_are_exactly_one() -> None:
    records = records_of([0, 3, 10, 2], [4, 0, 20, 0], [30, 30, 31, 3])
    for rank_type, ties in RULES:
        assert np.all(sampled_hits_at_k_per_task(records, 5, 5, rank_type=rank_type, ties=ties) == 1.0)


# -- (b) kgeval's own sampled evaluator, averaged over seeds --------------------------------------------------------
def sampled_values(records: RankRecords, k: int) -> dict[tuple[str, str], tuple[float, float]]:
    """The mean (hits@k, reciprocal rank) of one sampled evaluation's records under each rule, from METRICS.md and
    the expected-random rule (each position of the tie block equally likely)."""
    low, high = records.optimistic.astype(np.float64), records.pessimistic.astype(np.float64)
    values = {}
    for rank_type, rank in (("optimistic", low), ("pessimistic", high), ("realistic", (low + high) / 2)):
        values[rank_type, "mean"] = (float(np.mean(rank <= k)), float(np.mean(1 / rank)))
    width = high - low + 1
    harmonic = np.concatenate([[0.0], np.cumsum(1 / np.arange(1, int(high.max()) + 1))])
    hits = np.clip(k - low + 1, 0, width) / width
    reciprocal = (harmonic[high.astype(int)] - harmonic[low.astype(int) - 1]) / width
    values["realistic", "expected-random"] = (float(hits.mean()), float(reciprocal.mean()))
    return values


@pytest.fixture(scope="module")
def nations_model():
    """Nations and a seeded DistMult whose embeddings are small integers: exact scores with many ties, equal in
    the full and the sampled evaluator."""
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=3, seed=0)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for table in (model.entity_embeddings, model.relation_embeddings):
            table.weight.copy_(torch.randint(-1, 2, table.weight.shape, generator=generator).float())
    return data, model


@pytest.mark.slow
@pytest.mark.parametrize(("num_negatives", "repeats"), [(3, 40), (6, 15)])
def test_kgevals_sampled_evaluator_averages_to_the_expectation(nations_model, num_negatives: int, repeats: int) -> None:
    """SampledRankBasedEvaluator draws num_negatives distinct negatives uniformly from the entities that are neither
    the answer nor complete a known triple (train, valid, test) -- the full evaluation's filtered candidates -- and
    all of them where there are fewer (Nations has 14 entities). Each test triple is evaluated ``repeats`` times in
    one call (each row draws its own negatives); the mean over the rows lies within 5 standard errors of the
    expectation among N = num_negatives + 1 computed from the full evaluation's records -- and the two realistic
    rules are further apart than that, so the check tells them apart."""
    data, model = nations_model
    full = RankBasedEvaluator().evaluate(model, data.test, additional_filter_triples=[data.train, data.valid])
    records = full.records
    assert records is not None
    assert np.count_nonzero(records.pessimistic > records.optimistic) > len(records) // 4  # the test is about ties
    assert np.count_nonzero(records.num_candidates <= num_negatives) > 0  # and tasks with fewer negatives than asked
    k, num_samples = 2, num_negatives + 1
    evaluator = SampledRankBasedEvaluator(num_negatives=num_negatives,
                                          additional_filter_triples=[data.train, data.valid], seed=0)  # fmt: skip
    sampled = evaluator.evaluate(model, data.test.repeat(repeats, 1)).records
    assert sampled is not None and len(sampled) == repeats * len(records)
    observed = sampled_values(sampled, k)
    for rank_type, ties_rule in RULES:
        hits = sampled_hits_at_k_per_task(records, k, num_samples, rank_type=rank_type, ties=ties_rule)
        reciprocal = sampled_reciprocal_rank_per_task(records, num_samples, rank_type=rank_type, ties=ties_rule)
        for index, expected in enumerate((hits, reciprocal)):
            # values in [0, 1] with mean p have variance at most p (1 - p); rows draw independently
            error = math.sqrt(np.sum(expected * (1 - expected)) / repeats) / len(expected)
            difference = observed[rank_type, ties_rule][index] - expected.mean()
            assert abs(difference) <= 5 * error + 1e-12, (rank_type, ties_rule, index, difference, error)
    mean_rule = sampled_hits_at_k_per_task(records, k, num_samples)
    random_rule = sampled_hits_at_k_per_task(records, k, num_samples, ties="expected-random")
    error = math.sqrt(np.sum(mean_rule * (1 - mean_rule)) / repeats) / len(mean_rule)
    assert abs(random_rule.mean() - mean_rule.mean()) > 10 * error


# -- (c) ULTRA's binomial formula ----------------------------------------------------------------------------------
def ultra_by_hand(pessimistic, num_candidates, k: int, num_samples: int) -> torch.Tensor:
    """ULTRA's estimate re-stated: fp = (rank - 1) / (C - 1) in float32; the float32 sum over i < k of the Python
    float C(N-1, i) (a quotient of factorials) times fp^i times (1 - fp)^(N-1-i)."""
    fp = (torch.tensor(pessimistic) - 1).float() / (torch.tensor(num_candidates) - 1)
    total = torch.zeros(len(pessimistic))
    for i in range(k):
        choose = math.factorial(num_samples - 1) / math.factorial(i) / math.factorial(num_samples - 1 - i)
        total = total + choose * fp**i * (1 - fp) ** (num_samples - 1 - i)
    return total


def test_ultra_matches_its_formula_restated_and_in_float64() -> None:
    pessimistic = [1, 2, 5, 50, 100, 1_000, 14_505, 14_541, 3, 7]
    num_candidates = [14_541, 14_541, 14_541, 14_541, 14_541, 14_541, 14_541, 14_541, 10, 7]
    records = records_of(np.asarray(pessimistic) - 1, np.zeros(10), num_candidates)
    for k, num_samples in ((1, 2), (3, 50), (10, 50), (50, 50), (10, 171)):
        values = sampled_hits_at_k_per_task(records, k, num_samples, method="ultra")
        assert np.array_equal(values, ultra_by_hand(pessimistic, num_candidates, k, num_samples).double().numpy())
        assert np.array_equal(values, values.astype(np.float32).astype(np.float64))  # float32 numbers
        exact = []
        for rank, candidates in zip(pessimistic, num_candidates, strict=True):
            fp = Fraction(rank - 1, candidates - 1)
            exact.append(float(sum(math.comb(num_samples - 1, i) * fp**i * (1 - fp) ** (num_samples - 1 - i)
                                   for i in range(k))))  # fmt: skip
        np.testing.assert_allclose(values, exact, rtol=2e-5, atol=1e-6)
        mean = sampled_hits_at_k(records, k, num_samples, method="ultra")
        assert mean == float(torch.from_numpy(values).float().mean())  # averaged in float32


def test_ultra_takes_the_pessimistic_rank_and_a_task_with_one_candidate_is_nan() -> None:
    tied = records_of([0, 2], [3, 0], [10, 10])  # pessimistic ranks 4 and 3
    assert sampled_hits_at_k_per_task(tied, 1, 2, method="ultra") == pytest.approx([6 / 9, 7 / 9])
    assert np.isnan(sampled_hits_at_k_per_task(records_of([0], [0], [1]), 1, 2, method="ultra")[0])


def test_ultra_approximates_the_hypergeometric_expectation_when_c_is_large() -> None:
    """The binomial formula draws with replacement: close to the exact value (pessimistic) when C >> N."""
    rng = np.random.default_rng(3)
    candidates = rng.integers(1_000_000, 2_000_000, 200)
    above = (candidates * rng.random(200) ** 4).astype(np.int64)
    records = records_of(above, np.zeros(200), candidates)
    for k in (1, 10):
        ultra = sampled_hits_at_k(records, k, 50, method="ultra")
        exact = sampled_hits_at_k(records, k, 50, rank_type="pessimistic")
        assert ultra == pytest.approx(exact, abs=1e-4)


# -- (d) numerical stability ---------------------------------------------------------------------------------------
def exact_expectation(above: int, tied: int, candidates: int, n: int, k: int, rank_type: str, ties: str):
    """(E[hits@k], E[1 / rank]) from the multivariate hypergeometric pmf in exact integers and fractions."""
    below = candidates - 1 - above - tied
    total = math.comb(candidates - 1, n)
    hits = reciprocal = Fraction(0)
    for x in range(min(above, n) + 1):
        for y in range(min(tied, n - x) + 1):
            ways = math.comb(above, x) * math.comb(tied, y) * math.comb(below, n - x - y)
            if ways:
                h, r = outcome(x, y, k, rank_type, ties)
                hits, reciprocal = hits + ways * h, reciprocal + ways * r
    return hits / total, reciprocal / total


@pytest.mark.parametrize(("rank_type", "ties"), RULES)
def test_five_million_candidates_against_exact_sums(rank_type: str, ties: str) -> None:
    candidates = 5_000_000
    tasks = [(0, 0), (1, 0), (17, 0), (250_000, 0), (2_500_000, 0), (4_999_990, 0), (0, 3), (40, 1_000),
             (250_000, 2_000_000), (2_000_000, 2_999_000), (0, 4_999_999)]  # fmt: skip
    records = records_of(*zip(*tasks, strict=True), [candidates] * len(tasks))
    for k in (1, 10, 50):
        values = sampled_hits_at_k_per_task(records, k, 50, rank_type=rank_type, ties=ties)
        assert np.all(np.isfinite(values)) and np.all((values >= 0) & (values <= 1))
        expected = [float(exact_expectation(*task, candidates, 49, k, rank_type, ties)[0]) for task in tasks]
        np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-300)
    reciprocal = sampled_reciprocal_rank_per_task(records, 50, rank_type=rank_type, ties=ties)
    expected = [float(exact_expectation(*task, candidates, 49, 1, rank_type, ties)[1]) for task in tasks]
    np.testing.assert_allclose(reciprocal, expected, rtol=1e-12)


def test_five_million_candidates_against_scipy() -> None:
    """The float64 reference, SciPy's hypergeometric pmf (optimistic ranks: rank = 1 + X), N = 1000; SciPy's own
    error here is about 5e-10 relative, so exact sums check the first tasks to 1e-12."""
    stats = pytest.importorskip("scipy.stats")
    candidates, n = 5_000_000, 999
    above = np.array([0, 3, 2_000, 5_000, 100_000, 2_500_000, 4_999_000])
    records = records_of(above, np.zeros(len(above)), [candidates] * len(above))
    x = np.arange(n + 1)
    pmf = stats.hypergeom(candidates - 1, above[:, None], n).pmf(x[None, :])
    for k in (1, 10, 100):
        values = sampled_hits_at_k_per_task(records, k, n + 1, rank_type="optimistic")
        np.testing.assert_allclose(values, pmf[:, :k].sum(axis=1), rtol=5e-9, atol=1e-300)  # SciPy's error: ~5e-10
        exact = [sum(Fraction(math.comb(g, x) * math.comb(candidates - 1 - g, n - x)) for x in range(k))
                 / math.comb(candidates - 1, n) for g in above[:5].tolist()]  # fmt: skip
        np.testing.assert_allclose(values[:5], [float(value) for value in exact], rtol=1e-12)
    reciprocal = sampled_reciprocal_rank_per_task(records, n + 1, rank_type="optimistic")
    np.testing.assert_allclose(reciprocal, pmf @ (1 / (1 + x)), rtol=5e-9)


# -- sides, keys -------------------------------------------------------------------------------------------------
def test_sides_average_their_own_tasks_and_both_pools_head_and_tail() -> None:
    records = records_of([0, 3, 1, 8, 0], [1, 0, 2, 0, 0], [10, 10, 12, 30, 4], sides=[0, 1, 1, 0, 2])
    per_task = sampled_hits_at_k_per_task(records, 2, 5)
    assert sampled_hits_at_k(records, 2, 5, side="head") == pytest.approx(per_task[[0, 3]].mean())
    assert sampled_hits_at_k(records, 2, 5, side="tail") == pytest.approx(per_task[[1, 2]].mean())
    assert sampled_hits_at_k(records, 2, 5) == pytest.approx(per_task[:4].mean())
    assert sampled_hits_at_k(records, 2, 5, side="relation") == pytest.approx(per_task[4])


def test_sampled_metrics_keys_and_values() -> None:
    records = records_of([0, 3, 1, 8], [1, 0, 2, 0], [10, 10, 12, 30], sides=[0, 1, 1, 0])
    metrics = sampled_metrics(records, (1, 10), 50)
    assert len(metrics) == 3 * 3 * 3  # sides head, tail, both; three rank types; hits at 1 and 10, MRR
    assert metrics["both.realistic.hits_at_10_sampled_50"] == sampled_hits_at_k(records, 10, 50)
    assert metrics["tail.optimistic.inverse_harmonic_mean_rank_sampled_50"] == sampled_mrr(
        records, 50, rank_type="optimistic", side="tail"
    )
    random = sampled_metrics(records, (1,), 50, ties="expected-random", sides=["both"], rank_types=["realistic"])
    assert random == {
        "both.realistic.hits_at_1_sampled_50_expected_random": sampled_hits_at_k(
            records, 1, 50, ties="expected-random"
        ),
        "both.realistic.inverse_harmonic_mean_rank_sampled_50_expected_random": sampled_mrr(
            records, 50, ties="expected-random"
        ),
    }
    ultra = sampled_metrics(records, (1, 10), 50, method="ultra")
    assert set(ultra) == {f"{side}.pessimistic.hits_at_{k}_sampled_50_ultra" for side in ("head", "tail", "both")
                          for k in (1, 10)}  # fmt: skip
    assert ultra["both.pessimistic.hits_at_10_sampled_50_ultra"] == sampled_hits_at_k(records, 10, 50, method="ultra")
    assert (
        sampled_key("tail", "pessimistic", "hits_at_3", 50, method="ultra")
        == "tail.pessimistic.hits_at_3_sampled_50_ultra"
    )


# -- errors --------------------------------------------------------------------------------------------------------
RECORDS = records_of([0, 2], [1, 0], [10, 10])


ERRORS = [
    (lambda: sampled_hits_at_k(RECORDS, 0, 50), "k must be a positive integer, got 0"),
    (lambda: sampled_hits_at_k(RECORDS, 1, 1), "num_samples must be at least 2 (the answer and one negative), got 1"),
    (lambda: sampled_mrr(RECORDS, 0), "num_samples must be a positive integer, got 0"),
    (
        lambda: sampled_mrr(RECORDS, 50, method="binomial"),
        "method must be one of ('hypergeometric', 'ultra'), got 'binomial'",
    ),
    (
        lambda: sampled_mrr(RECORDS, 50, rank_type="best"),
        "rank_type must be one of ('optimistic', 'pessimistic', 'realistic'), got 'best'",
    ),
    (lambda: sampled_mrr(RECORDS, 50, ties="random"), "ties must be one of ('mean', 'expected-random'), got 'random'"),
    (
        lambda: sampled_mrr(RECORDS, 50, rank_type="optimistic", ties="expected-random"),
        "ties='expected-random' is a rule for realistic ranks; rank_type='optimistic' has its own",
    ),
    (
        lambda: sampled_hits_at_k(RECORDS, 1, 50, method="ultra", rank_type="realistic"),
        "ULTRA's estimator ranks pessimistically (its rank counts ties against the answer); got "
        "rank_type='realistic': use rank_type='pessimistic' or method='hypergeometric'",
    ),
    (
        lambda: sampled_mrr(RECORDS, 50, method="ultra"),
        "ULTRA and NBFNet estimate no MRR among sampled negatives (their MRR is the full ranking's): use "
        "method='hypergeometric'",
    ),
    (
        lambda: sampled_hits_at_k(RECORDS, 1, 172, method="ultra"),
        "ULTRA's formula divides factorials as floats, which overflow for num_samples > 171; got 172",
    ),
    (
        lambda: sampled_hits_at_k(RECORDS, 51, 50, method="ultra"),
        "ULTRA's formula sums k terms C(N-1, i), i < k, which fails for k > N: got k=51, num_samples=50",
    ),
    (
        lambda: sampled_mrr(RECORDS, 50, side="left"),
        "side must be one of ('head', 'tail', 'relation', 'both'), got 'left'",
    ),
    (lambda: sampled_mrr(RECORDS, 50, side="head"), "the records hold no head tasks (sides held: tail)"),
    (
        lambda: sampled_mrr({"side": [1]}, 50),
        "sampled estimates' records lack the columns ['head', 'relation', 'tail', 'optimistic', 'pessimistic']",
    ),
    (
        lambda: sampled_mrr(dataclasses.replace(RECORDS, num_candidates=None), 50),
        "these rank records hold no num_candidates (a rank table without the column): a sampled estimate needs the "
        "number of candidates each answer was ranked among",
    ),
]


@pytest.mark.parametrize(("call", "message"), ERRORS)
def test_errors(call, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()
