"""Evaluation scenarios (kgeval/scenarios.py): validation filters train + valid, the final test adds test."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.datasets.scenarios import SCENARIOS, evaluation_kwargs, filter_triples_for
from tests.helpers.graphs import TableModel, quantised_table, random_graph
from tests.helpers.reference import reference_metrics

MRR = ("both", "realistic", "inverse_harmonic_mean_rank")


def _splits(seed: int = 0):
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, 10, 2, 60, 0, duplicate_fraction=0.0)
    train, valid, test = graph.triples[:30], graph.triples[30:45], graph.triples[45:]
    return train, valid, test, quantised_table(rng, 10, 2, levels=3)


@pytest.mark.parametrize("split", ["valid", "validation", "val", "VALID"])
def test_validation_filters_train_and_valid_never_test(split):
    train, valid, test, _ = _splits()
    filters = filter_triples_for(split, train, valid, test)
    assert len(filters) == 2
    assert filters[0] is train
    assert filters[1] is valid


def test_test_filters_train_valid_and_test():
    train, valid, test, _ = _splits()
    assert [id(t) for t in filter_triples_for("test", train, valid, test)] == [id(train), id(valid), id(test)]
    assert SCENARIOS == {"valid": ("train", "valid"), "test": ("train", "valid", "test")}


def test_validation_does_not_need_the_test_triples():
    train, valid, _, _ = _splits()
    kwargs = evaluation_kwargs("valid", train, valid)
    assert kwargs["mapped_triples"] is valid
    assert [id(t) for t in kwargs["additional_filter_triples"]] == [id(train), id(valid)]


@pytest.mark.parametrize("seed", range(3))
def test_scenario_evaluations_agree_with_the_reference_filter_sets(seed):
    train, valid, test, table = _splits(seed)
    model, evaluator = TableModel(table), RankBasedEvaluator(ks=(1, 3))
    for split, evaluated, known in (("valid", valid, [train]), ("test", test, [train, valid])):
        results = evaluator.evaluate(model, **evaluation_kwargs(split, train, valid, test), use_tqdm=False)
        expected = reference_metrics(table, evaluated, known, ks=(1, 3))[MRR]
        assert math.isclose(results.data[MRR], expected, rel_tol=1e-12)


def test_filtering_test_triples_during_validation_would_change_the_ranks():
    """The leak the scenarios prevent: filtering test triples changes validation numbers (here, on this graph)."""
    train, valid, test, table = _splits(1)
    leaked = reference_metrics(table, valid, [train, test], ks=(1,))[MRR]
    clean = RankBasedEvaluator(ks=(1,)).evaluate(
        TableModel(table), **evaluation_kwargs("valid", train, valid, test), use_tqdm=False
    )
    assert clean.data[MRR] != leaked


def test_dataset_evaluation_kwargs():
    data = load_shipped_dataset("nations")
    valid = data.evaluation_kwargs("valid")
    test = data.evaluation_kwargs("test")
    assert valid["mapped_triples"] is data.valid
    assert [id(t) for t in valid["additional_filter_triples"]] == [id(data.train), id(data.valid)]
    assert test["mapped_triples"] is data.test
    assert [id(t) for t in test["additional_filter_triples"]] == [id(data.train), id(data.valid), id(data.test)]


def test_raises_for_an_unknown_split():
    train, valid, test, _ = _splits()
    message = "split must be one of ('valid', 'validation', 'val', 'test'), got 'train'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        filter_triples_for("train", train, valid, test)


def test_raises_when_the_test_scenario_lacks_test_triples():
    train, valid, _, _ = _splits()
    message = "the test scenario filters train + valid + test: pass the test triples"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        evaluation_kwargs("test", train, valid)


def test_filter_triples_are_returned_unchanged():
    train, valid, test, _ = _splits()
    before = [t.clone() for t in (train, valid, test)]
    filter_triples_for("test", train, valid, test)
    assert all(torch.equal(a, b) for a, b in zip(before, (train, valid, test), strict=True))
