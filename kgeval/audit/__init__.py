"""Audits of a dataset and its evaluation: is a number on it worth reporting?

One module per kind of dataset: :mod:`kgeval.audit.triples` (leakage, relation pairs, coverage, a rule-only
baseline), :mod:`kgeval.audit.temporal`, :mod:`kgeval.audit.inductive`, and for triple classification
:mod:`kgeval.audit.classification` (labelled triples: balance, relations without a threshold, model-free baselines).
"""

from kgeval.audit.classification import (
    ClassificationAuditReport,
    RelationWithoutThreshold,
    SplitBalance,
    audit_classification,
)
from kgeval.audit.inductive import InductiveAuditReport, audit_inductive_dataset
from kgeval.audit.temporal import TemporalAuditReport, audit_temporal_dataset, split_fingerprint
from kgeval.audit.triples import (
    AuditReport,
    Coverage,
    HubRelation,
    Leakage,
    Protocol,
    RelationPair,
    RuleBaseline,
    RuleModel,
    Ties,
    audit_dataset,
    hub_relations,
    relation_pairs,
)

__all__ = [
    "AuditReport",
    "ClassificationAuditReport",
    "Coverage",
    "HubRelation",
    "InductiveAuditReport",
    "Leakage",
    "Protocol",
    "RelationPair",
    "RelationWithoutThreshold",
    "RuleBaseline",
    "RuleModel",
    "SplitBalance",
    "TemporalAuditReport",
    "Ties",
    "audit_classification",
    "audit_dataset",
    "audit_inductive_dataset",
    "audit_temporal_dataset",
    "hub_relations",
    "relation_pairs",
    "split_fingerprint",
]
