"""Audits of a dataset and its evaluation: is a number on it worth reporting?

One module per kind of dataset: :mod:`kgeval.audit.triples` (leakage, relation pairs, coverage, a rule-only
baseline), :mod:`kgeval.audit.temporal` and :mod:`kgeval.audit.inductive`.
"""

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
    "Coverage",
    "HubRelation",
    "InductiveAuditReport",
    "Leakage",
    "Protocol",
    "RelationPair",
    "RuleBaseline",
    "RuleModel",
    "TemporalAuditReport",
    "Ties",
    "audit_dataset",
    "audit_inductive_dataset",
    "audit_temporal_dataset",
    "hub_relations",
    "relation_pairs",
    "split_fingerprint",
]
