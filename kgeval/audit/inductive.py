"""The evaluation audit of an inductive split (``kgeval audit`` on an inductive folder): is a number on it worth
reporting, and over which graph?

- **Graphs**: the entities of the training and inference graphs, and the entities both hold (a disjoint split holds
  none: every validation and test entity is new to the model).
- **Dropped triples**: triples of the inference graph, validation and test that no model of these graphs scores --
  a relation the training graph lacks (fully inductive relations), an entity outside the inference graph -- which
  PyKEEN and kgeval's loader drop.
- **Leakage**: test triples that are also in the inference graph or in the validation triples (filtered away from
  the candidates, but a model that memorises the inference graph ranks them first).
- **Filter sizes**: the mean number of other known answers (inference graph, validation, test) a test task's
  filter removes.
- **Baselines**: a rule-only baseline -- relation pairs (inverse, symmetric, near-duplicate) learned on the
  training graph, applied to the inference graph's triples -- and, given a model, the model's MRR (mode
  ``"testing"``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from kgeval._display import all_or_nothing_note
from kgeval._version import __version__
from kgeval.audit._strict import strict_document, strict_json
from kgeval.audit.triples import DEFAULT_THRESHOLD, RuleModel, relation_pairs
from kgeval.datasets.inductive import InductiveDataset
from kgeval.evaluator import RankBasedEvaluator

__all__ = ["InductiveAuditReport", "audit_inductive_dataset"]

#: the files whose rows the loader may drop
_CHECKED_FILES = ("inference", "inference_validation", "inference_test")


@dataclass(frozen=True)
class InductiveAuditReport:
    """The audit of one inductive dataset; :meth:`to_markdown` is the evaluation card, :meth:`to_json` strict
    JSON. Counts are of triples unless named otherwise."""

    dataset: str
    kgeval_version: str
    training_entities: int
    inference_entities: int
    relations: int
    sizes: dict[str, int]  #: train, inference, valid, test
    shared_entities: int  #: entity labels in both graphs
    dropped: dict[str, dict[str, int]]  #: file -> {"entity": n, "relation": m} triples the loader dropped
    test_in_inference: int  #: distinct test triples that are also triples of the inference graph
    test_in_valid: int  #: distinct test triples that are also validation triples
    filter_sizes: dict[str, float]  #: "valid" / "test" -> mean other known answers removed per task
    rule_mrr: float | None = None  #: the rule-only baseline's realistic MRR on test
    rule_hits_at_10: float | None = None
    rules: int | None = None  #: relation pairs the rule baseline used
    model_mrr: float | None = None  #: the model's realistic MRR on test (mode "testing")

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (NaN as None), with a format tag."""
        return strict_document("kgeval-inductive-audit-1", self)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON (no NaN)."""
        return strict_json(self.to_dict(), indent)

    def to_markdown(self) -> str:
        """The evaluation card."""
        graphs = (
            "The two graphs are disjoint: every validation and test entity is new to the model."
            if not self.shared_entities
            else f"The two graphs share {self.shared_entities:,} entities: a model may have trained on them."
        )
        lines = [f"## Inductive evaluation audit: {self.dataset}", "",
                 f"Training graph: {self.training_entities:,} entities, {self.sizes['train']:,} triples. Inference "
                 f"graph: {self.inference_entities:,} entities, {self.sizes['inference']:,} triples. "
                 f"{self.relations:,} relations. Validation {self.sizes['valid']:,}, test {self.sizes['test']:,} "
                 "triples, ranked against the inference graph's entities.", "",
                 "### Graphs", "", graphs, "",
                 "### Dropped triples", "", "| file | unknown relation | entity outside the inference graph |",
                 "|---|---|---|"]  # fmt: skip
        lines += [f"| {file} | {counts.get('relation', 0):,} | {counts.get('entity', 0):,} |"
                  for file, counts in self.dropped.items()]  # fmt: skip
        lines += ["", "No model of these graphs scores them; PyKEEN drops them too. A relation first seen at test time "
                  "(fully inductive) needs a model that represents relations from context.", "",
                  "### Leakage", "", f"Test triples also in the inference graph: {self.test_in_inference:,}; also "
                  f"in the validation triples: {self.test_in_valid:,}.", "",
                  "### Filter sizes", "", "Other known answers removed per task (mean over head and tail tasks): "
                  + ", ".join(f"{split} {size:.2f}" for split, size in self.filter_sizes.items()) + ".", "",
                  "### Baselines", ""]  # fmt: skip
        if self.rule_mrr is not None:
            lines.append(f"Rule-only baseline (the {self.rules} relation pairs of the training graph applied to the "
                         f"inference graph's triples): MRR {self.rule_mrr:.4f}, Hits@10 {self.rule_hits_at_10:.4f}. "
                         "A model below it learned little beyond those rules.")  # fmt: skip
            hits_at_10 = math.nan if self.rule_hits_at_10 is None else self.rule_hits_at_10
            note = all_or_nothing_note("the rule-only baseline", self.rule_mrr, {10: hits_at_10})
            if note:
                lines[-1] += " " + note
        else:
            lines.append("Rule-only baseline: not run.")
        if self.model_mrr is not None:
            lines.append(f'The model (mode "testing"): MRR {self.model_mrr:.4f}.')
        lines += ["", f"kgeval {self.kgeval_version}; definitions: docs/inductive.md."]
        return "\n".join(lines) + "\n"


def audit_inductive_dataset(
    dataset: InductiveDataset,
    *,
    rule_baseline: bool = True,
    model: Any = None,
    threshold: float = DEFAULT_THRESHOLD,
    use_tqdm: bool = False,
) -> InductiveAuditReport:
    """Audit ``dataset`` (see the module docstring).

    Parameters
    ----------
    dataset : InductiveDataset
    rule_baseline : bool, default=True
        Rank the test split with the rule-only baseline (filtered as the test protocol says).
    model : optional
        An inductive model of the dataset: its test split is ranked in mode ``"testing"``.
    threshold : float, default=0.8
        The overlap from which a relation pair of the training graph becomes a rule (as
        :func:`kgeval.audit.audit_dataset`).
    use_tqdm : bool, default=False
    """
    frames = {split: _frame(getattr(dataset, split)) for split in ("train", "inference", "valid", "test")}
    test = frames["test"].drop_duplicates()
    report = InductiveAuditReport(
        dataset=dataset.name, kgeval_version=__version__, training_entities=dataset.num_training_entities,
        inference_entities=dataset.num_inference_entities, relations=dataset.num_relations,
        sizes={split: len(frame) for split, frame in frames.items()}, shared_entities=dataset.shared_entities,
        dropped={file: dict(dataset.dropped.get(file, {"entity": 0, "relation": 0})) for file in _CHECKED_FILES},
        test_in_inference=len(test.merge(frames["inference"].drop_duplicates(), how="inner")),
        test_in_valid=len(test.merge(frames["valid"].drop_duplicates(), how="inner")),
        filter_sizes={split: _filter_size(frames, split) for split in ("valid", "test")},
    )  # fmt: skip
    changes: dict[str, Any] = {}
    if rule_baseline and len(dataset.test):
        changes.update(_rule_baseline(dataset, threshold, use_tqdm))
    if model is not None and len(dataset.test):
        results = RankBasedEvaluator(keep_records=False).evaluate(model, **dataset.evaluation_kwargs("test"),
                                                                  use_tqdm=use_tqdm)  # fmt: skip
        changes["model_mrr"] = float(results["mrr"])
    return InductiveAuditReport(**{**asdict(report), **changes})


def _frame(triples: Any) -> pd.DataFrame:
    return pd.DataFrame(triples.numpy().reshape(-1, 3), columns=["h", "r", "t"])


def _filter_size(frames: dict[str, pd.DataFrame], split: str) -> float:
    """Mean other known answers per task of ``split``: the distinct known triples (the inference graph, the
    validation triples, and for test the test triples) that share the task's query, less its answer."""
    known_splits = ["inference", "valid"] + (["test"] if split == "test" else [])
    known = pd.concat([frames[name] for name in known_splits]).drop_duplicates()
    evaluated = frames[split]
    if not len(evaluated):
        return math.nan
    removed = []
    for query, answer in ((["h", "r"], "t"), (["r", "t"], "h")):
        answers = known[[*query, answer]].groupby(query).size().rename("n").reset_index()
        removed.append(evaluated.merge(answers, on=query, how="left")["n"].fillna(1).to_numpy() - 1)
    return float(np.concatenate(removed).mean())


def _rule_baseline(dataset: InductiveDataset, threshold: float, use_tqdm: bool) -> dict[str, Any]:
    """The rule-only baseline's test MRR and Hits@10: relation pairs of the training graph, facts of the inference
    graph."""
    train = np.unique(dataset.train.numpy(), axis=0)
    pairs = relation_pairs(train, threshold)
    inverse = [(int(p.relation), int(p.other)) for p in pairs if p.kind in ("inverse", "symmetric")]
    duplicate = [(int(p.relation), int(p.other)) for p in pairs if p.kind == "duplicate"]
    model = RuleModel(dataset.inference, dataset.num_inference_entities, dataset.num_relations, inverse, duplicate)
    kwargs = dataset.evaluation_kwargs("test")
    del kwargs["mode"]  # the rule model is a model of the inference graph's ids
    results = RankBasedEvaluator(ks=(10,), keep_records=False).evaluate(model, **kwargs, use_tqdm=use_tqdm)
    return {"rule_mrr": float(results["mrr"]), "rule_hits_at_10": float(results["hits@10"]),
            "rules": len(inverse) + len(duplicate)}  # fmt: skip
