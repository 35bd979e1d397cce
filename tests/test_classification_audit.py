"""The triple-classification audit (kgeval.audit.classification) on hand-built labelled triples whose counts are
known by construction, and on CoDEx-S's hard negatives when ../shared/data has them."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from kgeval.audit import audit_classification
from kgeval.datasets import load_dataset, shared_data_dir
from kgeval.variants import LabelledTriples, load_split_with_negatives


def labelled(rows: list[tuple[int, int, int, bool]], names=None) -> LabelledTriples:
    triples = torch.tensor([row[:3] for row in rows])
    return LabelledTriples(triples, torch.tensor([row[3] for row in rows]), relation_labels=names)


def test_counts_fallbacks_and_baselines_by_construction():
    names = ("likes", "knows", "owns", "hates")
    valid = labelled([(0, 0, 1, True), (0, 0, 2, True), (1, 0, 2, False),  # likes: mostly true
                      (0, 1, 1, False), (2, 1, 3, False),  # knows: false only
                      (3, 2, 0, True), (3, 2, 1, False)], names)  # owns: a tie -> true  # fmt: skip
    # a repeated row; one triple labelled both ways; hates absent from validation; a known negative
    test = labelled([(5, 0, 6, True), (5, 0, 6, True), (6, 0, 7, False),
                     (1, 1, 2, True), (1, 1, 2, False),
                     (4, 2, 5, False), (4, 3, 5, True), (0, 0, 1, False)], names)  # fmt: skip
    report = audit_classification(valid, test, known=torch.tensor([[0, 0, 1], [9, 9, 9]]), dataset="toy")
    valid_balance, test_balance = report.balance
    assert (valid_balance.positives, valid_balance.negatives, valid_balance.repeated) == (3, 4, 0)
    assert (test_balance.positives, test_balance.negatives) == (4, 4)
    assert (test_balance.repeated, test_balance.contradictory, test_balance.known_negatives) == (1, 1, 1)
    assert [(r.relation, r.reason, r.test_triples, r.test_positives) for r in report.without_threshold] == [
        ("knows", "one class only in validation", 2, 1),
        ("hates", "absent from validation", 1, 1),
    ]
    assert report.majority_accuracy == 0.5
    # priors: likes true, knows false, owns true (tie), hates true (absent: 0 >= 0) -> right on rows 0, 1, 4, 6
    assert report.relation_prior_accuracy == 4 / 8
    card = report.to_markdown()
    assert "| test | 4 | 4 | 1 | 1 | 1 |" in card and "| hates | absent from validation | 1 | 1 |" in card
    assert json.loads(report.to_json())["format"] == "kgeval-classification-audit-1"


def test_codex_s():
    if shared_data_dir() is None or not (shared_data_dir() / "codex-s").exists():
        pytest.skip("CoDEx-S is not in ../shared/data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = load_dataset("codex-s")
        valid, test = (load_split_with_negatives(dataset, split) for split in ("valid", "test"))
    report = audit_classification(valid, test, known=torch.cat([dataset.train, dataset.valid, dataset.test]))
    assert [(b.positives, b.negatives, b.known_negatives) for b in report.balance] == [(1827, 1827, 0),
                                                                                        (1828, 1828, 0)]  # fmt: skip
    assert sum(r.test_triples for r in report.without_threshold) == 23  # docs/classification.md's count
    assert [r.relation for r in report.without_threshold if r.reason == "absent from validation"] == ["P35"]
    assert report.relation_prior_accuracy > 0.75  # a relation-only classifier (docs/classification.md)
