"""The key grammar: PyKEEN's examples, aliases, case, defaults and format round trip (table-driven)."""

from __future__ import annotations

import pytest

from kgeval.keys import MetricKey, format_key, parse_key

CASES = [
    ("mrr", ("both", "realistic", "inverse_harmonic_mean_rank")),
    ("hits@10", ("both", "realistic", "hits_at_10")),
    ("h@1", ("both", "realistic", "hits_at_1")),
    ("hits_at_3", ("both", "realistic", "hits_at_3")),
    ("tail.best.mr", ("tail", "optimistic", "arithmetic_mean_rank")),
    ("head.worst.mean_rank", ("head", "pessimistic", "arithmetic_mean_rank")),
    ("both.realistic.hits_at_10", ("both", "realistic", "hits_at_10")),
    ("Both.MRR", ("both", "realistic", "inverse_harmonic_mean_rank")),
    ("avg.gmr", ("both", "realistic", "geometric_mean_rank")),
    ("average.igmr", ("both", "realistic", "inverse_geometric_mean_rank")),
    ("tail.std", ("tail", "realistic", "standard_deviation")),
    ("optimistic.mad", ("both", "optimistic", "median_absolute_deviation")),
    ("ah@3", ("both", "realistic", "adjusted_hits_at_3")),
    ("zh@10", ("both", "realistic", "z_hits_at_10")),
    ("adjusted_mrr", ("both", "realistic", "adjusted_inverse_harmonic_mean_rank")),
    ("count", ("both", "realistic", "count")),
    # PyKEEN's parser: class names, names without underscores, k-families without k (k = 10), a trailing .k
    ("MeanRank", ("both", "realistic", "arithmetic_mean_rank")),
    ("meanrank", ("both", "realistic", "arithmetic_mean_rank")),
    ("InverseMedianRank", ("both", "realistic", "inverse_median_rank")),
    ("rankcount", ("both", "realistic", "count")),
    ("hits_at_k", ("both", "realistic", "hits_at_10")),
    ("hits@k", ("both", "realistic", "hits_at_10")),
    ("HitsAtK", ("both", "realistic", "hits_at_10")),
    ("zahk", ("both", "realistic", "z_hits_at_10")),
    ("ahk", ("both", "realistic", "adjusted_hits_at_10")),
    ("AdjustedHitsAtKRankBasedMetric", ("both", "realistic", "adjusted_hits_at_10")),
    ("head.best.hits_at_k.3", ("head", "optimistic", "hits_at_3")),
    ("tail.adjusted_hits_at_k.5", ("tail", "realistic", "adjusted_hits_at_5")),
    ("hits_at_10.5", ("both", "realistic", "hits_at_10")),  # a k in the name wins over the trailing one
    ("mrr.5", ("both", "realistic", "inverse_harmonic_mean_rank")),  # ignored after a name without k
    ("hits@03", ("both", "realistic", "hits_at_3")),
]


@pytest.mark.parametrize(("key", "expected"), CASES)
def test_parse(key: str, expected: tuple[str, str, str]) -> None:
    assert parse_key(key) == MetricKey(*expected)


@pytest.mark.parametrize(("key", "_expected"), CASES)
def test_format_round_trip(key: str, _expected) -> None:
    parsed = parse_key(key)
    assert parse_key(format_key(parsed)) == parsed


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("mrr.best", "unknown side or rank type 'mrr' in metric key 'mrr.best'"),
        ("a.b.c.d", "malformed metric key 'a.b.c.d': expected '[side.][rank_type.]name[.k]'"),
        ("left.best.mr", "unknown side 'left' in metric key 'left.best.mr'"),
        ("tail.bestest.mr", "unknown rank type 'bestest' in metric key 'tail.bestest.mr'"),
        ("tail..mr", "malformed metric key 'tail..mr': expected '[side.][rank_type.]name[.k]'"),
    ],
)
def test_malformed_keys(key: str, message: str) -> None:
    with pytest.raises(KeyError) as info:
        parse_key(key)
    assert info.value.args[0].startswith(message)


def test_non_string_key() -> None:
    with pytest.raises(TypeError, match="^a metric key must be a str, got int$"):
        parse_key(10)  # type: ignore[arg-type]


def test_zero_k_is_not_a_hits_key() -> None:
    assert parse_key("hits@0").name == "hits@0"
