"""The audit of a triple-classification setup (labelled validation and test triples): is an accuracy on it worth
reporting? (:func:`audit_classification`)

- **Balance** per split: positives, negatives, triples listed twice, triples labelled both ways, negatives that are
  known true triples (``known``: the dataset's splits);
- **Relations without a threshold of their own**: test relations absent from validation or with one class only
  there -- kgeval's default falls back to a global threshold, CoDEx's script calls all of an absent relation's test
  triples true (docs/classification.md) -- and how many test triples they hold;
- **Model-free baselines** on test: the majority class, and each relation's majority class in validation (a
  relation-only classifier): an accuracy at or below them says nothing about the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kgeval._version import __version__
from kgeval.audit._strict import strict_document, strict_json
from kgeval.variants.classification import LabelledTriples

__all__ = ["ClassificationAuditReport", "RelationWithoutThreshold", "SplitBalance", "audit_classification"]


@dataclass(frozen=True)
class SplitBalance:
    """One split's labelled triples."""

    split: str
    positives: int
    negatives: int
    repeated: int  #: rows whose (triple, label) appeared before in the split
    contradictory: int  #: distinct triples labelled both true and false in the split
    known_negatives: int  #: negatives that are known true triples (None-free: 0 without ``known``)


@dataclass(frozen=True)
class RelationWithoutThreshold:
    """A test relation that validation cannot give a threshold of its own."""

    relation: str
    reason: str  #: "absent from validation" or "one class only in validation"
    test_triples: int
    test_positives: int


@dataclass(frozen=True)
class ClassificationAuditReport:
    """The audit of one classification setup; :meth:`to_markdown` is the card, :meth:`to_json` strict JSON."""

    dataset: str
    kgeval_version: str
    balance: list[SplitBalance]
    without_threshold: list[RelationWithoutThreshold] = field(default_factory=list)
    majority_accuracy: float = float("nan")  #: test accuracy of calling every triple the test's majority class
    relation_prior_accuracy: float = float("nan")  #: each relation's validation majority (ties, absent: true)

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (NaN as None), with a format tag."""
        return strict_document("kgeval-classification-audit-1", self)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON (no NaN)."""
        return strict_json(self.to_dict(), indent)

    def to_markdown(self) -> str:
        """The card: balance per split, relations without a threshold, model-free baselines."""
        lines = [f"## Triple-classification audit: {self.dataset or 'labelled triples'}", "",
                 "| split | positives | negatives | repeated | labelled both ways | negatives known true |",
                 "|---|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {b.split} | {b.positives:,} | {b.negatives:,} | {b.repeated:,} | {b.contradictory:,} | "
                  f"{b.known_negatives:,} |" for b in self.balance]  # fmt: skip
        if self.without_threshold:
            held = sum(r.test_triples for r in self.without_threshold)
            lines += ["", f"{len(self.without_threshold)} test relation(s), {held:,} test triples, get no threshold of "
                      "their own from validation (kgeval: the global threshold; CoDEx's script: every test triple of "
                      "an absent relation called true):", "", "| relation | why | test triples | of them true |",
                      "|---|---|---|---|"]  # fmt: skip
            lines += [f"| {r.relation} | {r.reason} | {r.test_triples:,} | {r.test_positives:,} |"
                      for r in self.without_threshold]  # fmt: skip
        lines += ["", f"Model-free baselines on test: the majority class {self.majority_accuracy:.4f} accuracy; each "
                  f"relation's validation majority {self.relation_prior_accuracy:.4f}. A model's accuracy at or "
                  "below them says nothing about the model.", "",
                  f"kgeval {self.kgeval_version}; docs/classification.md."]  # fmt: skip
        return "\n".join(lines) + "\n"


def audit_classification(
    valid: LabelledTriples, test: LabelledTriples, *, known: torch.Tensor | None = None, dataset: str = ""
) -> ClassificationAuditReport:
    """Audit labelled validation and test triples.

    Parameters
    ----------
    valid, test : LabelledTriples
        The labelled triples thresholds are fitted on and applied to.
    known : LongTensor of shape (m, 3), optional
        The known true triples (e.g. every split of the dataset): negatives among them are counted.
    dataset : str, optional
        A name for the card.

    Returns
    -------
    ClassificationAuditReport
    """
    known_keys = None if known is None else {tuple(row) for row in known.tolist()}
    balance = [_balance(name, split, known_keys) for name, split in (("valid", valid), ("test", test))]
    labels = test.labels.numpy()
    relations = test.triples[:, 1].numpy()
    names = test.relation_labels or valid.relation_labels
    valid_relations, valid_labels = valid.triples[:, 1].numpy(), valid.labels.numpy()
    without: list[RelationWithoutThreshold] = []
    prior = np.zeros(labels.shape, dtype=bool)
    for relation in np.unique(relations):
        in_test = relations == relation
        in_valid = valid_labels[valid_relations == relation]
        positives = int(in_valid.sum())
        prior[in_test] = positives * 2 >= in_valid.size  # the relation's validation majority (ties: true)
        reason = ("absent from validation" if in_valid.size == 0
                  else "one class only in validation" if positives in (0, in_valid.size) else None)  # fmt: skip
        if reason is not None:
            name = names[relation] if names is not None and relation < len(names) else str(int(relation))
            without.append(RelationWithoutThreshold(name, reason, int(in_test.sum()), int(labels[in_test].sum())))
    majority = max(labels.mean(), 1 - labels.mean())
    return ClassificationAuditReport(dataset, __version__, balance, without, float(majority),
                                     float((prior == labels).mean()))  # fmt: skip


def _balance(name: str, split: LabelledTriples, known: set[tuple[int, ...]] | None) -> SplitBalance:
    """The split's counts."""
    rows = split.triples.tolist()
    labels = split.labels.tolist()
    seen: set[tuple[tuple[int, ...], bool]] = set()
    repeated = 0
    classes: dict[tuple[int, ...], set[bool]] = {}
    for row, label in zip(rows, labels, strict=True):
        key = (tuple(row), label)
        repeated += key in seen
        seen.add(key)
        classes.setdefault(tuple(row), set()).add(label)
    contradictory = sum(len(both) == 2 for both in classes.values())
    known_negatives = 0 if known is None else sum(tuple(r) in known for r, label in zip(rows, labels, strict=True)
                                                  if not label)  # fmt: skip
    positives = int(sum(labels))
    return SplitBalance(name, positives, len(labels) - positives, repeated, contradictory, known_negatives)
