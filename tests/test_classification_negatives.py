"""Drawn negatives for triple classification and PyKEEN's top-P convention (issue 60), each checked from its
definition (docs/classification.md), never from kgeval's own output."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from kgeval.constraints import TypeConstraints
from kgeval.datasets import load_shipped_dataset
from kgeval.exceptions import NegativeShortfallWarning, OptimisticThresholdWarning
from kgeval.models import DistMult
from kgeval.variants.classification import (
    LabelledTriples,
    classify_scores,
    classify_triples,
    draw_negatives,
    split_with_drawn_negatives,
)


def random_graph(seed: int, num_entities: int = 30, num_relations: int = 4, size: int = 200) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [
            torch.randint(num_entities, (size,), generator=generator),
            torch.randint(num_relations, (size,), generator=generator),
            torch.randint(num_entities, (size,), generator=generator),
        ],
        dim=1,
    )
    return torch.unique(triples, dim=0)


def grouped(negatives: torch.Tensor, counts: torch.Tensor) -> list[list[tuple[int, ...]]]:
    """The negatives of each positive, as lists of tuples."""
    rows = [tuple(row) for row in negatives.tolist()]
    out, at = [], 0
    for count in counts.tolist():
        out.append(rows[at : at + count])
        at += count
    return out


@pytest.mark.parametrize("strategy", ["uniform", "positional", "type-constrained"])
@pytest.mark.parametrize("seed", range(3))
def test_drawn_negatives_are_k_distinct_corruptions_never_known_nor_the_positive(strategy: str, seed: int) -> None:
    known = random_graph(seed)
    positives = known[::3]
    constraints = TypeConstraints.from_triples(known) if strategy == "type-constrained" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NegativeShortfallWarning)
        negatives, report = draw_negatives(positives, known, 30, per_positive=3, strategy=strategy,
                                           type_constraints=constraints, seed=seed)  # fmt: skip
    known_set = {tuple(row) for row in known.tolist()}
    assert report.counts.shape == (len(positives),)
    assert int(report.counts.sum()) == len(negatives) == report.drawn
    assert report.missing == 3 * len(positives) - report.drawn
    assert report.short_positives == int((report.counts < 3).sum())
    for positive, own in zip(positives.tolist(), grouped(negatives, report.counts), strict=True):
        assert len(own) == len(set(own)) <= 3  # distinct, at most K
        for negative in own:
            assert negative not in known_set and negative != tuple(positive)
            assert negative[1] == positive[1]
            same = (negative[0] == positive[0]) + (negative[2] == positive[2])
            assert same == 1  # exactly one side corrupted
    if strategy == "uniform":
        assert report.short_positives == 0 and len(negatives) == 3 * len(positives)


def test_the_same_seed_gives_the_same_negatives_and_the_global_rng_is_untouched() -> None:
    known = random_graph(7)
    state = torch.random.get_rng_state()
    first, report = draw_negatives(known[:50], known, 30, per_positive=2, seed=11)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(123)  # the global state does not matter
    second, _ = draw_negatives(known[:50], known, 30, per_positive=2, seed=11)
    other, _ = draw_negatives(known[:50], known, 30, per_positive=2, seed=12)
    assert torch.equal(first, second)
    assert not torch.equal(first, other)
    assert report.drawn == 100


def test_positional_draws_only_entities_seen_in_that_position_for_that_relation() -> None:
    known = random_graph(3, num_entities=40, num_relations=3, size=120)
    heads = {r: set(known[known[:, 1] == r, 0].tolist()) for r in range(3)}
    tails = {r: set(known[known[:, 1] == r, 2].tolist()) for r in range(3)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NegativeShortfallWarning)
        negatives, report = draw_negatives(known, known, 40, per_positive=2, strategy="positional", seed=0)
    assert report.drawn > 0
    for positive, own in zip(known.tolist(), grouped(negatives, report.counts), strict=True):
        for h, r, t in own:
            if h != positive[0]:
                assert h in heads[r]
            else:
                assert t in tails[r]


def test_a_relation_whose_positional_candidates_are_all_known_falls_short_in_every_round() -> None:
    # relation 0: head 0 only, tails 1..20 all known: a head draw is the positive itself, a tail draw a known triple
    known = torch.cat([torch.tensor([[0, 0, t] for t in range(1, 21)]), torch.tensor([[30, 1, 31], [32, 1, 33]])])
    with pytest.warns(NegativeShortfallWarning, match="20 of 22 positives"):
        _, report = draw_negatives(known, known, 34, per_positive=1, strategy="positional", seed=0, max_rounds=5)
    assert report.short_positives == 20 and report.rounds == 5 and report.drawn == 2
    assert report.rejected == 20 * 5  # every draw of relation 0, in each of the 5 rounds


def test_type_constrained_draws_only_allowed_entities() -> None:
    known = random_graph(5)
    allowed_heads = {0: [1, 2, 3, 4, 5, 6], 1: [7, 8, 9, 10, 11, 12, 13]}
    allowed_tails = {0: [20, 21, 22, 23, 24, 25, 26, 27], 2: list(range(10, 29))}
    constraints = TypeConstraints.from_mappings(heads=allowed_heads, tails=allowed_tails)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NegativeShortfallWarning)
        negatives, report = draw_negatives(known, known, 30, per_positive=2, strategy="type-constrained",
                                           type_constraints=constraints, seed=1)  # fmt: skip
    assert report.drawn > 0
    for positive, own in zip(known.tolist(), grouped(negatives, report.counts), strict=True):
        for h, r, t in own:
            if h != positive[0] and r in allowed_heads:
                assert h in allowed_heads[r]
            if t != positive[2] and r in allowed_tails:
                assert t in allowed_tails[r]


def test_a_tiny_graph_where_positives_cannot_get_k_negatives_is_warned_and_counted() -> None:
    # 3 entities, 1 relation; known: (0,0,1), (1,0,2), (0,0,2). Corruptions of (0,0,1): heads (1,0,1), (2,0,1);
    # tails (0,0,0) -- (0,0,2) is known: 3 possible negatives, so K = 5 leaves it 2 short.
    known = torch.tensor([[0, 0, 1], [1, 0, 2], [0, 0, 2]])
    positives = known[:1]
    possible = {(1, 0, 1), (2, 0, 1), (0, 0, 0)}
    with pytest.warns(NegativeShortfallWarning, match=r"1 of 1 positives got fewer than 5 negatives \(2 missing"):
        negatives, report = draw_negatives(positives, known, 3, per_positive=5, seed=0)
    assert {tuple(row) for row in negatives.tolist()} == possible
    assert report.drawn == 3 and report.missing == 2 and report.short_positives == 1
    assert report.rounds == 100 and report.enumerated == 1  # the rounds, then the enumeration, found no more
    # every draw is accepted, rejected or a duplicate: the two slots left empty are refused in every round
    assert report.rejected + report.duplicates >= 2 * 100


def test_the_split_helper_labels_positives_and_drawn_negatives() -> None:
    dataset = load_shipped_dataset("nations")
    test = split_with_drawn_negatives(dataset, "test", per_positive=2, seed=4)
    assert test.num_positives == len(dataset.test)
    assert test.drawn is not None and test.num_negatives == test.drawn.drawn
    known = {tuple(row) for row in torch.cat([dataset.train, dataset.valid, dataset.test]).tolist()}
    assert not any(tuple(row) in known for row in test.triples[~test.labels].tolist())
    with pytest.raises(ValueError, match="split must be"):
        split_with_drawn_negatives(dataset, "dev")
    with pytest.raises(ValueError, match="type_constraints is required"):
        split_with_drawn_negatives(dataset, "test", strategy="type-constrained")


def brute_force_top_p(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """PyKEEN's rule from its description: sort the scores descending as reversed np.argsort, call the first P
    (P the number of true labels) true."""
    count = int(labels.sum())
    order = np.argsort(scores)[::-1]
    predicted = np.zeros(len(scores), dtype=bool)
    for index in order[:count]:
        predicted[index] = True
    return predicted


@pytest.mark.parametrize("seed", range(8))
def test_the_pykeen_convention_equals_a_brute_force_top_p_with_ties_and_warns(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    scores = rng.integers(0, 6, n).astype(np.float64)  # heavy ties
    labels = rng.random(n) < 0.4
    labels[0], labels[1] = True, False
    relations = rng.integers(0, 3, n)
    triples = torch.tensor(np.stack([np.arange(n) % 7, relations, np.arange(n) % 11], 1))
    test = LabelledTriples(triples, torch.tensor(labels))
    valid = LabelledTriples(triples[:2], torch.tensor([True, False]))
    with pytest.warns(OptimisticThresholdWarning, match="fitted on the evaluated labels"):
        results = classify_scores(valid, [0.0, 0.0], test, scores, convention="pykeen")
    expected = brute_force_top_p(scores, labels)
    assert np.array_equal(results.predictions, expected)
    p = int(labels.sum())
    assert int(results.predictions.sum()) == p
    assert scores[expected].min() >= scores[~expected].max(initial=-math.inf)  # the top P, whatever the ties
    tp = int((expected & labels).sum())
    assert results.micro["accuracy"] == (tp + int((~expected & ~labels).sum())) / n
    assert results.micro["precision"] == results.micro["recall"] == tp / p  # P called true, P true
    with pytest.raises(ValueError, match="fits no objective"):
        classify_scores(valid, [0.0, 0.0], test, scores, convention="pykeen", objective="f1")


@pytest.mark.parametrize("convention", ["kgeval", "pykeen"])
def test_classify_triples_end_to_end_with_drawn_negatives_on_nations(convention: str) -> None:
    dataset = load_shipped_dataset("nations")
    valid = split_with_drawn_negatives(dataset, "valid", per_positive=1, strategy="uniform", seed=0)
    test = split_with_drawn_negatives(dataset, "test", per_positive=1, strategy="uniform", seed=1)
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=16, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = classify_triples(model, valid, test, convention=convention)  # type: ignore[arg-type]
    assert len(results.scores) == len(test)
    for name, value in results.micro.items():
        assert 0.0 <= value <= 1.0 or (name == "mcc" and -1.0 <= value <= 1.0), (name, value)


@pytest.mark.parametrize("strategy", ["uniform", "positional", "type-constrained"])
@pytest.mark.parametrize("seed", range(4))
def test_a_positive_falls_short_exactly_when_it_has_fewer_than_k_possible_negatives(strategy: str, seed: int) -> None:
    # a dense little graph: many positives have few possible negatives
    known = random_graph(seed, num_entities=8, num_relations=3, size=150)
    known_set = {tuple(row) for row in known.tolist()}
    allowed = {r: set(range(8)) for r in range(3)}
    heads, tails = dict(allowed), dict(allowed)
    constraints = None
    if strategy == "positional":
        heads = {r: set(known[known[:, 1] == r, 0].tolist()) for r in range(3)}
        tails = {r: set(known[known[:, 1] == r, 2].tolist()) for r in range(3)}
    elif strategy == "type-constrained":
        heads = {0: {0, 1, 2}, 1: {3, 4, 5, 6, 7}, 2: set(range(8))}
        tails = {0: {5, 6}, 1: set(range(8)), 2: {1, 2, 3}}
        constraints = TypeConstraints.from_mappings(
            heads={0: [0, 1, 2], 1: [3, 4, 5, 6, 7]}, tails={0: [5, 6], 2: [1, 2, 3]}
        )
    k = 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        negatives, report = draw_negatives(known, known, 8, per_positive=k, strategy=strategy,
                                           type_constraints=constraints, seed=seed, max_rounds=3)  # fmt: skip
    expected_counts = []
    for h, r, t in known.tolist():
        possible = {(x, r, t) for x in heads[r]} | {(h, r, x) for x in tails[r]}
        expected_counts.append(min(k, len(possible - known_set - {(h, r, t)})))
    assert report.counts.tolist() == expected_counts
    short = sum(count < k for count in expected_counts)
    assert report.short_positives == short
    assert any(issubclass(w.category, NegativeShortfallWarning) for w in caught) == (short > 0)
    for positive, own in zip(known.tolist(), grouped(negatives, report.counts), strict=True):
        h, r, t = positive
        assert len(set(own)) == len(own)
        for negative in own:
            assert negative not in known_set
            assert (negative[0] in heads[r] and negative[2] == t) or (negative[2] in tails[r] and negative[0] == h)


def test_a_positive_is_never_drawn_as_anothers_negative_even_when_known_lacks_it() -> None:
    """Two positives of one query, ``known`` empty: a negative of one was the other (labelled true and false)."""
    positives = torch.tensor([[0, 0, 1], [0, 0, 2]])
    keys = {tuple(row) for row in positives.tolist()}
    for seed in range(20):
        negatives, _ = draw_negatives(positives, torch.empty((0, 3), dtype=torch.long), 4, per_positive=2, seed=seed)
        assert not keys & {tuple(row) for row in negatives.tolist()}
