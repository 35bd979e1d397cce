"""The evaluation audit of a dataset (docs/METRICS.md, Evaluation audit): is a link-prediction number on it worth
reporting? :func:`audit_dataset` counts the known ways a benchmark flatters models -- test triples leaked through
duplicates, reversed entity pairs (Toutanova & Chen 2015; Dettmers et al. 2018) and other relations between the
same entities; relations that are near-inverses or near-duplicates of each other in train; entities and relations
unseen in train -- and ranks the test split with a rule-only baseline through kgeval's own engine, filtered as the
real evaluation is. :class:`AuditReport` renders as Markdown (the "evaluation card") and strict JSON.

Every number is exact (set operations on the integer triples); the definitions are in docs/METRICS.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from kgeval._display import all_or_nothing_note
from kgeval._version import __version__
from kgeval.audit._strict import strict_document, strict_json
from kgeval.datasets import TriplesDataset
from kgeval.evaluator import RankBasedEvaluator
from kgeval.results import RankBasedMetricResults
from kgeval.variants.sampled import SampledRankBasedEvaluator

__all__ = [
    "AuditReport", "Coverage", "HubRelation", "Leakage", "Protocol", "RelationPair", "RuleBaseline", "RuleModel",
    "Ties", "audit_dataset", "hub_relations", "relation_pairs",
]  # fmt: skip

#: overlap from which two relations count as near-inverses / near-duplicates (and a relation as symmetric)
DEFAULT_THRESHOLD = 0.8
#: relations listed per leakage kind
DEFAULT_TOP = 5
#: a model's MRR less than this above the rule-only baseline's is flagged on the card
BASELINE_MARGIN = 0.05


@dataclass(frozen=True)
class Leakage:
    """Leakage of one evaluation split into train: counts of its triples (h, r, t) with ...

    - ``duplicates``: (h, r, t) itself in train;
    - ``reverse``: some (t, r', h) in train, any r' (r' = r included);
    - ``relation_pair``: some (h, r', t) in train with r' != r.

    A triple may count in several. ``top_*``: the relations of the split with the most such triples.
    """

    split: str
    triples: int
    duplicates: int
    reverse: int
    relation_pair: int
    top_reverse: list[tuple[str, int]] = field(default_factory=list)
    top_relation_pair: list[tuple[str, int]] = field(default_factory=list)

    def fraction(self, kind: str) -> float:
        """``kind``'s count over the split's triples (NaN for an empty split)."""
        return getattr(self, kind) / self.triples if self.triples else math.nan


@dataclass(frozen=True)
class RelationPair:
    """Two relations of train whose triples imply each other's: ``kind`` "inverse" (a share ``overlap`` of
    ``relation``'s triples (h, r, t) have (t, other, h) in train), "symmetric" (inverse of itself) or "duplicate"
    ((h, other, t) in train, other != relation); ``support`` = the number of such triples."""

    relation: str
    other: str
    kind: str
    overlap: float
    support: int


@dataclass(frozen=True)
class Coverage:
    """Entities and relations of one split that never occur in train, and the split's triples holding one."""

    split: str
    unseen_entities: int
    unseen_relations: int
    triples_affected: int


@dataclass(frozen=True)
class HubRelation:
    """A near-Cartesian relation of train: one entity is the ``side`` ("head" / "tail") of a ``share`` of its
    ``triples`` (e.g. every person's gender is one of two values), so guessing that entity ranks well."""

    relation: str
    side: str
    entity: str
    share: float
    triples: int


@dataclass(frozen=True)
class Ties:
    """Ties among the evaluated ranks (from a model's evaluation or a rank table): the share of tasks whose
    optimistic and pessimistic ranks differ, the MRR of each rank type, the relations with the largest share of
    tied tasks, and whether the optimistic MRR exceeds the realistic one by more than ``margin``."""

    tasks: int
    tied_tasks: int
    mrr: dict[str, float]
    top_relations: list[tuple[str, float, int]]  #: (relation, share of its tasks tied, its tasks)
    margin: float
    warning: str | None

    @property
    def tied_fraction(self) -> float:
        return self.tied_tasks / self.tasks if self.tasks else math.nan


@dataclass(frozen=True)
class Protocol:
    """How the evaluated number was (or is to be) computed: filter sets, candidates, sides, rank type, and for a
    model the gap between its full-ranking MRR and a sampled one with ``sampled_k`` negatives."""

    filtered_by: list[str]
    candidates: str
    sides: list[str]
    rank_type: str
    full_mrr: float | None = None
    sampled_k: int | None = None
    sampled_mrr: float | None = None
    expected_sampled_mrr: float | None = None  #: over every draw of sampled_k negatives, from the full ranks
    expected_sampled_hits_at_10: float | None = None


@dataclass(frozen=True)
class RuleBaseline:
    """The rule-only baseline on the test split (both sides, filtered by train + valid + test, realistic ranks)."""

    mrr: float
    hits_at_10: float
    rules: int  #: relation pairs (and symmetric relations) it used


@dataclass(frozen=True)
class AuditReport:
    """The audit of one dataset; :meth:`to_markdown` is the evaluation card, :meth:`to_json` strict JSON."""

    dataset: str
    kgeval_version: str
    threshold: float
    sizes: dict[str, int]
    leakage: list[Leakage]
    relation_pairs: list[RelationPair]
    coverage: list[Coverage]
    rule_baseline: RuleBaseline | None
    hub_relations: list[HubRelation] = field(default_factory=list)
    ties: Ties | None = None
    protocol: Protocol | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (NaN as None), with a format tag."""
        return strict_document("kgeval-audit-1", self)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON (no NaN)."""
        return strict_json(self.to_dict(), indent)

    def to_markdown(self) -> str:
        """The evaluation card."""
        sections = [_leakage_lines(self), _pair_lines(self), _coverage_lines(self), _tie_lines(self.ties),
                    _baseline_lines(self.rule_baseline, self.protocol), _protocol_lines(self.protocol)]  # fmt: skip
        lines = [f"## Evaluation audit: {self.dataset}", ""]
        lines.append("Triples: " + ", ".join(f"{split} {count:,}" for split, count in self.sizes.items()) + ".")
        for section in sections:
            lines += section
        lines += ["", f"kgeval {self.kgeval_version}; definitions: docs/METRICS.md, Evaluation audit."]
        return "\n".join(lines) + "\n"


# -- the card's sections ------------------------------------------------------------------------------------------
def _leakage_lines(report: AuditReport) -> list[str]:
    header = "| split | duplicates | reverse (t, r', h) | other relation (h, r', t) |"
    lines = ["", "### Leakage into train", "", header, "|---|---|---|---|"]
    for leak in report.leakage:
        cells = [f"{getattr(leak, kind):,} ({leak.fraction(kind):.1%})" for kind in ("duplicates", "reverse",
                                                                                    "relation_pair")]  # fmt: skip
        lines.append(f"| {leak.split} | " + " | ".join(cells) + " |")
    for leak in report.leakage:
        if leak.top_reverse:
            top = ", ".join(f"{name} ({count:,})" for name, count in leak.top_reverse)
            lines.append(f"\nMost reverse-leaked {leak.split} relations: {top}.")
    return lines


def _pair_lines(report: AuditReport) -> list[str]:
    lines = ["", f"### Relation pairs in train (overlap >= {report.threshold:g})", ""]
    if not report.relation_pairs:
        return [*lines, "None."]
    lines += ["| relation | other | kind | overlap | support |", "|---|---|---|---|---|"]
    return lines + [f"| {p.relation} | {p.other} | {p.kind} | {p.overlap:.3f} | {p.support:,} |"
                    for p in report.relation_pairs]  # fmt: skip


def _coverage_lines(report: AuditReport) -> list[str]:
    lines = ["", "### Coverage", "", "| split | unseen entities | unseen relations | triples affected |",
             "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {c.split} | {c.unseen_entities:,} | {c.unseen_relations:,} | {c.triples_affected:,} |"
              for c in report.coverage]  # fmt: skip
    if report.hub_relations:
        lines += ["", f"Near-Cartesian relations of train (one entity is the head or tail of >= {report.threshold:g} "
                  "of their triples):"]  # fmt: skip
        lines += [f"- {h.relation}: {h.side} {h.entity} in {h.share:.0%} of {h.triples:,} triples"
                  for h in report.hub_relations]  # fmt: skip
    return lines


def _tie_lines(ties: Ties | None) -> list[str]:
    if ties is None:
        return []
    by_type = ", ".join(f"{rank_type} {value:.4f}" for rank_type, value in ties.mrr.items())
    lines = [
        "",
        "### Ties",
        "",
        f"{ties.tied_tasks:,} of {ties.tasks:,} tasks ({ties.tied_fraction:.1%}) have tied scores. MRR {by_type}.",
    ]
    if ties.top_relations:
        top = ", ".join(f"{name} ({share:.0%} of {count:,})" for name, share, count in ties.top_relations)
        lines.append(f"Ties concentrate in: {top}.")
    if ties.warning:
        lines.append(f"**Warning:** {ties.warning}")
    return lines


def _baseline_lines(baseline: RuleBaseline | None, protocol: Protocol | None) -> list[str]:
    if baseline is None:
        return []
    lines = ["", "### Rule-only baseline", "",
             f"A model that scores a candidate by the training triples implying it through the {baseline.rules} "
             f"relation pair(s) above (and the triple itself) reaches MRR {baseline.mrr:.4f}, Hits@10 "
             f"{baseline.hits_at_10:.4f} on test (filtered, realistic ranks). An embedding model near this number has "
             "learned little beyond these rules."]  # fmt: skip
    note = all_or_nothing_note("the rule-only baseline", baseline.mrr, {10: baseline.hits_at_10})
    if note:
        lines[-1] += " " + note
    model_mrr = protocol.full_mrr if protocol is not None else None
    if model_mrr is not None:
        gap = model_mrr - baseline.mrr
        if gap < BASELINE_MARGIN:
            lines.append(
                f"**The audited model's MRR ({model_mrr:.4f}) is within {BASELINE_MARGIN:g} of this "
                "baseline (or below it): its number may say more about the dataset than about the model.**"
            )
        else:
            lines.append(f"The audited model's MRR ({model_mrr:.4f}) exceeds it by {gap:.4f}.")
    return lines


def _protocol_lines(protocol: Protocol | None) -> list[str]:
    if protocol is None:
        return []
    filters = " + ".join(protocol.filtered_by) or "nothing (raw)"
    lines = ["", "### Protocol", "",
             f"Filtered by {filters}; candidates: {protocol.candidates}; sides: {', '.join(protocol.sides)}; rank "
             f"type: {protocol.rank_type}."]  # fmt: skip
    if protocol.sampled_mrr is not None and protocol.full_mrr is not None:
        lines.append(f"With {protocol.sampled_k} sampled negatives instead of every entity the same model's MRR would "
                     f"read {protocol.sampled_mrr:.4f} instead of {protocol.full_mrr:.4f}.")  # fmt: skip
    if protocol.expected_sampled_mrr is not None and protocol.expected_sampled_hits_at_10 is not None:
        lines.append(f"Its expectation over every draw of {protocol.sampled_k} distinct filtered negatives, from the "
                     f"full ranks: MRR {protocol.expected_sampled_mrr:.4f}, Hits@10 "
                     f"{protocol.expected_sampled_hits_at_10:.4f} (docs/conventions.md).")  # fmt: skip
    return lines


# -- the audit ----------------------------------------------------------------------------------------------------
def audit_dataset(
    dataset: TriplesDataset,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    top: int = DEFAULT_TOP,
    rule_baseline: bool = True,
    model: Any = None,
    results: RankBasedMetricResults | None = None,
    sampled_k: int = 50,
    tie_margin: float = 0.01,
) -> AuditReport:
    """Audit ``dataset`` (see the module docstring and docs/METRICS.md, Evaluation audit).

    Parameters
    ----------
    dataset : TriplesDataset
    threshold : float, default=0.8
        Overlap from which relation pairs are reported and used by the rule baseline, and share from which a
        relation is near-Cartesian; in (0, 1].
    top : int, default=5
        Relations listed per leakage kind and for ties.
    rule_baseline : bool, default=True
        Rank the test split with the rule-only baseline (one full filtered evaluation).
    model : optional
        A model of the dataset: its test split is evaluated (filtered by train + valid + test) for the ties section,
        and with ``sampled_k`` sampled negatives for the protocol's sampled-vs-full gap.
    results : RankBasedMetricResults with records, optional
        Ranks already computed (e.g. a rank table): the ties section reads them (a ``model`` is not needed).
    sampled_k : int, default=50
    tie_margin : float, default=0.01
        The card warns when the optimistic MRR exceeds the realistic one by more than this.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    names = {index: label for label, index in dataset.relation_to_id.items()}
    train = _unique(dataset.train)
    splits = {"valid": dataset.valid, "test": dataset.test}
    index = _TrainIndex.of(train)
    leakage = [_leakage(split, triples.numpy(), index, names, top) for split, triples in splits.items()]
    pairs = relation_pairs(train, threshold, names)
    coverage = [_coverage(split, triples.numpy(), index) for split, triples in splits.items()]
    baseline = _rule_baseline(dataset, pairs) if rule_baseline and len(dataset.test) else None
    sizes = {"train": len(dataset.train), "valid": len(dataset.valid), "test": len(dataset.test)}
    hubs = hub_relations(train, threshold, names, {i: label for label, i in dataset.entity_to_id.items()})
    protocol = Protocol(filtered_by=["train", "valid", "test"], candidates="every entity", sides=["head", "tail"],
                        rank_type="realistic")  # fmt: skip
    if model is not None:
        results = RankBasedEvaluator().evaluate(model, use_tqdm=False, **dataset.evaluation_kwargs("test"))
        sampled = SampledRankBasedEvaluator(num_negatives=sampled_k, keep_records=False).evaluate(
            model, dataset.test, additional_filter_triples=[dataset.train, dataset.valid]
        )
        samples = sampled_k + 1  # the answer and its negatives
        expected = results.sampled_metrics(samples, ks=(10,), rank_types=("realistic",), sides=("both",))
        mrr = expected[f"both.realistic.inverse_harmonic_mean_rank_sampled_{samples}"]
        hits = expected[f"both.realistic.hits_at_10_sampled_{samples}"]
        protocol = Protocol(**{**asdict(protocol), "full_mrr": results.get_metric("mrr"), "sampled_k": sampled_k,
                               "sampled_mrr": sampled.get_metric("mrr"), "expected_sampled_mrr": mrr,
                               "expected_sampled_hits_at_10": hits})  # fmt: skip
    ties = _ties(results, names, top, tie_margin) if results is not None else None
    return AuditReport(dataset.name, __version__, threshold, sizes, leakage, pairs, coverage, baseline, hubs, ties,
                       protocol)  # fmt: skip


def _unique(triples: torch.Tensor) -> np.ndarray:
    return np.unique(triples.numpy().astype(np.int64), axis=0) if len(triples) else np.zeros((0, 3), np.int64)


def _pair_keys(heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """One int64 per (head, tail) pair (ids below 2**31)."""
    return heads.astype(np.int64) << 32 | tails.astype(np.int64)


def _top(relations: np.ndarray, names: dict[int, str], top: int) -> list[tuple[str, int]]:
    if relations.size == 0:
        return []
    ids, counts = np.unique(relations, return_counts=True)
    order = np.lexsort((ids, -counts))[:top]
    return [(names.get(int(ids[i]), str(int(ids[i]))), int(counts[i])) for i in order]


@dataclass(frozen=True)
class _TrainIndex:
    """What the leakage and coverage counts look up in train, built once per audit (train: unique (n, 3) array)."""

    triples: frozenset[tuple[int, int, int]]
    pairs: np.ndarray  #: the (head, tail) pair keys of train (:func:`_pair_keys`)
    relations_per_pair: pd.DataFrame  #: per pair key: its number of relations ("nunique") and one of them ("first")
    entities: np.ndarray  #: entities occurring as a head or a tail
    relations: np.ndarray  #: relations occurring

    @classmethod
    def of(cls, train: np.ndarray) -> _TrainIndex:
        pairs = _pair_keys(train[:, 0], train[:, 2])
        same_pair = pd.DataFrame({"key": pairs, "r": train[:, 1]})
        return cls(
            triples=frozenset(map(tuple, train.tolist())),
            pairs=pairs,
            relations_per_pair=same_pair.groupby("key")["r"].agg(["nunique", "first"]),
            entities=np.union1d(train[:, 0], train[:, 2]),
            relations=np.unique(train[:, 1]),
        )


def _leakage(split: str, triples: np.ndarray, index: _TrainIndex, names: dict[int, str], top: int) -> Leakage:
    duplicate = np.array([tuple(row) in index.triples for row in triples.tolist()], dtype=bool)
    reverse = np.isin(_pair_keys(triples[:, 2], triples[:, 0]), index.pairs)
    # (h, r', t) in train with r' != r: the entity pair occurs in train with a relation other than r
    found = index.relations_per_pair.reindex(_pair_keys(triples[:, 0], triples[:, 2]))
    other_relation = ((found["nunique"] > 1) | ((found["nunique"] == 1) & (found["first"] != triples[:, 1]))).to_numpy()
    return Leakage(
        split=split,
        triples=len(triples),
        duplicates=int(duplicate.sum()),
        reverse=int(reverse.sum()),
        relation_pair=int(other_relation.sum()),
        top_reverse=_top(triples[reverse, 1], names, top),
        top_relation_pair=_top(triples[other_relation, 1], names, top),
    )


def relation_pairs(train: np.ndarray, threshold: float, names: dict[int, str] | None = None) -> list[RelationPair]:
    """The near-inverse, symmetric and near-duplicate relations of ``train`` (unique (n, 3) int array), overlap at
    least ``threshold``, strongest first."""
    names = names or {}
    frame = pd.DataFrame(train, columns=["h", "r", "t"])
    size = frame.groupby("r").size()
    found = []
    reversed_frame = frame.rename(columns={"h": "t", "t": "h", "r": "other"})
    inverse = frame.merge(reversed_frame, on=["h", "t"]).groupby(["r", "other"]).size()
    duplicate = frame.merge(frame.rename(columns={"r": "other"}), on=["h", "t"])
    duplicate = duplicate[duplicate["r"] != duplicate["other"]].groupby(["r", "other"]).size()
    for kind_of, counts in (("inverse", inverse), ("duplicate", duplicate)):
        for (relation, other), support in counts.items():
            overlap = support / size[relation]
            if overlap >= threshold:
                kind = "symmetric" if kind_of == "inverse" and relation == other else kind_of
                found.append(RelationPair(names.get(int(relation), str(relation)), names.get(int(other), str(other)),
                                          kind, float(overlap), int(support)))  # fmt: skip
    found.sort(key=lambda pair: (-pair.overlap, -pair.support, pair.relation, pair.other))
    return found


def _coverage(split: str, triples: np.ndarray, index: _TrainIndex) -> Coverage:
    unseen_head = ~np.isin(triples[:, 0], index.entities)
    unseen_tail = ~np.isin(triples[:, 2], index.entities)
    unseen_relation = ~np.isin(triples[:, 1], index.relations)
    entities = np.union1d(triples[unseen_head, 0], triples[unseen_tail, 2])
    return Coverage(split, int(entities.size), int(np.unique(triples[unseen_relation, 1]).size),
                    int((unseen_head | unseen_tail | unseen_relation).sum()))  # fmt: skip


def hub_relations(
    train: np.ndarray, threshold: float, names: dict[int, str] | None = None, entities: dict[int, str] | None = None
) -> list[HubRelation]:
    """Relations of ``train`` (unique (n, 3) int array) one of whose entities is the head (or tail) of at least
    ``threshold`` of their triples, with at least 2 triples; largest share first."""
    names, entities = names or {}, entities or {}
    frame = pd.DataFrame(train, columns=["h", "r", "t"])
    found = []
    for side, column in (("head", "h"), ("tail", "t")):
        counts = frame.groupby(["r", column]).size().rename("n").reset_index()
        totals = frame.groupby("r").size()
        best = counts.sort_values(["r", "n", column], ascending=[True, False, True]).drop_duplicates("r")
        for relation, entity, n in best[["r", column, "n"]].itertuples(index=False):
            total = int(totals[relation])
            if total >= 2 and n / total >= threshold:
                found.append(HubRelation(names.get(int(relation), str(relation)), side,
                                         entities.get(int(entity), str(entity)), n / total, total))  # fmt: skip
    found.sort(key=lambda hub: (-hub.share, -hub.triples, hub.relation, hub.side))
    return found


def _ties(results: RankBasedMetricResults, names: dict[int, str], top: int, margin: float) -> Ties:
    """The ties section from results with per-task records."""
    records = results.records
    if records is None:
        raise ValueError("the ties section needs the per-task records (evaluate with keep_records=True)")
    entity_tasks = records.side != 2  # head and tail tasks, as "both"
    tied = (records.pessimistic != records.optimistic) & entity_tasks
    mrr = {rank_type: results.get_metric(f"both.{rank_type}.mrr") for rank_type in ("optimistic", "realistic",
                                                                                    "pessimistic")}  # fmt: skip
    known = entity_tasks & (records.relation >= 0)  # a rank table without triples has no relation to name (-1)
    frame = pd.DataFrame({"r": records.relation[known], "tied": tied[known]})
    shares = frame.groupby("r")["tied"].agg(["mean", "size"])
    shares = shares[shares["mean"] > 0].sort_values(["mean", "size"], ascending=[False, False]).head(top)
    top_relations = [(names.get(int(r), str(r)), float(row["mean"]), int(row["size"])) for r, row in shares.iterrows()]
    warning = None
    if mrr["optimistic"] - mrr["realistic"] > margin:
        warning = (f"the optimistic MRR ({mrr['optimistic']:.4f}) exceeds the realistic one "
                   f"({mrr['realistic']:.4f}) by more than {margin:g}: the model's scores tie, and an evaluator that "
                   "breaks ties in the true answer's favour would report a better number than the model earns; "
                   "report realistic ranks")  # fmt: skip
    return Ties(int(entity_tasks.sum()), int(tied.sum()), mrr, top_relations, margin, warning)


# -- the rule-only baseline ---------------------------------------------------------------------------------------
class RuleModel:
    """Scores (h, r, t) by the distinct training triples that imply it: the triple itself, (t, r', h) for every r'
    whose triples reverse r's (inverse rules; r' = r for a symmetric r), and (h, r', t) for every near-duplicate r'
    (kgeval's model protocol: ``score_t`` / ``score_h`` full rows).

    Parameters
    ----------
    train : LongTensor (n, 3)
    num_entities, num_relations : int
    inverse_rules, duplicate_rules : list of (r, r')
        r' implies r through a reversed / a same-direction entity pair.
    """

    def __init__(
        self,
        train: torch.Tensor,
        num_entities: int,
        num_relations: int,
        inverse_rules: list[tuple[int, int]],
        duplicate_rules: list[tuple[int, int]],
    ) -> None:
        self.num_entities, self.num_relations = num_entities, num_relations
        train = torch.unique(train, dim=0)  # distinct facts: a repeated training triple implies nothing more
        implied = [train]
        for relation, other in inverse_rules:
            rows = train[train[:, 1] == other]
            implied.append(torch.stack([rows[:, 2], torch.full_like(rows[:, 1], relation), rows[:, 0]], dim=1))
        for relation, other in duplicate_rules:
            rows = train[train[:, 1] == other]
            implied.append(torch.stack([rows[:, 0], torch.full_like(rows[:, 1], relation), rows[:, 2]], dim=1))
        self._facts = torch.cat(implied)

    def _rows(self, queries: torch.Tensor, query_columns: tuple[int, int], answer_column: int) -> torch.Tensor:
        """(B, E) counts of implied facts completing each query."""
        facts = self._facts
        width = max(self.num_entities, self.num_relations)
        fact_keys = facts[:, query_columns[0]] * width + facts[:, query_columns[1]]
        order = torch.argsort(fact_keys)
        sorted_keys, answers = fact_keys[order], facts[order, answer_column]
        keys = queries[:, 0] * width + queries[:, 1]
        starts = torch.searchsorted(sorted_keys, keys)
        stops = torch.searchsorted(sorted_keys, keys, right=True)
        lengths = stops - starts
        rows = torch.repeat_interleave(torch.arange(len(queries), device=lengths.device), lengths)
        run_starts = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
        # position of each fact within its query's run
        offsets = torch.arange(int(lengths.sum()), device=lengths.device) - run_starts
        columns = answers[torch.repeat_interleave(starts, lengths) + offsets]
        scores = torch.zeros(len(queries), self.num_entities, device=queries.device)
        scores.index_put_((rows, columns), torch.ones(len(rows), device=queries.device), accumulate=True)
        return scores

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._rows(hr_batch, (0, 1), 2)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._rows(rt_batch, (1, 2), 0)


def _rule_baseline(dataset: TriplesDataset, pairs: list[RelationPair]) -> RuleBaseline:
    ids = dataset.relation_to_id
    inverse = [(ids[p.relation], ids[p.other]) for p in pairs if p.kind in ("inverse", "symmetric")]
    duplicate = [(ids[p.relation], ids[p.other]) for p in pairs if p.kind == "duplicate"]
    model = RuleModel(dataset.train, dataset.num_entities, dataset.num_relations, inverse, duplicate)
    results = RankBasedEvaluator(ks=(10,), keep_records=False).evaluate(
        model, use_tqdm=False, **dataset.evaluation_kwargs("test")
    )
    return RuleBaseline(results.get_metric("mrr"), results.get_metric("hits@10"), len(inverse) + len(duplicate))
