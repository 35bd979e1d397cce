"""The evaluation audit (kgeval.audit) against brute-force loops written from the definitions
(docs/METRICS.md, Evaluation audit), on random graphs and on a small graph built to contain each pathology; the
known contrast of WN18 and WN18RR when the shared data is present."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.audit import RuleModel, audit_dataset, relation_pairs
from kgeval.cli import main
from kgeval.datasets import TriplesDataset, load_dataset, shared_data_dir
from tests.helpers.reference import reference_ranks


def dataset_of(train, valid, test, num_entities: int, num_relations: int) -> TriplesDataset:
    as_tensor = lambda rows: torch.tensor(rows, dtype=torch.long).reshape(-1, 3)  # noqa: E731
    return TriplesDataset(
        name="built", train=as_tensor(train), valid=as_tensor(valid), test=as_tensor(test),
        entity_to_id={f"e{i}": i for i in range(num_entities)},
        relation_to_id={f"r{i}": i for i in range(num_relations)},
    )  # fmt: skip


def random_dataset(seed: int, num_entities: int = 12, num_relations: int = 4) -> TriplesDataset:
    rng = np.random.default_rng(seed)
    train = rng.integers(0, [num_entities, num_relations, num_entities], (60, 3))
    train[:, 1] = rng.integers(0, num_relations - 1, 60)  # the last relation only in test: unseen
    reversed_rows = train[:10][:, [2, 1, 0]]  # some reverse-leaked test triples, some duplicates
    test = np.concatenate([reversed_rows, train[10:14], rng.integers(0, [num_entities, num_relations, num_entities],
                                                                      (20, 3))])  # fmt: skip
    test[-3:, 0] = num_entities  # an entity never in train
    valid = rng.integers(0, [num_entities, num_relations - 1, num_entities], (10, 3))
    return dataset_of(train.tolist(), valid.tolist(), test.tolist(), num_entities + 1, num_relations)


def brute_leakage(split: list, train: list) -> dict[str, int]:
    train_set = {tuple(row) for row in train}
    counts = {"duplicates": 0, "reverse": 0, "relation_pair": 0}
    for h, r, t in split:
        counts["duplicates"] += (h, r, t) in train_set
        counts["reverse"] += any((t, other, h) in train_set for other in range(100))
        counts["relation_pair"] += any((h, other, t) in train_set for other in range(100) if other != r)
    return counts


def brute_pairs(train: list, threshold: float) -> set[tuple[str, str, str, int]]:
    train_set = {tuple(row) for row in train}
    relations = sorted({r for _, r, _ in train_set})
    found = set()
    for r in relations:
        own = [(h, t) for h, rel, t in train_set if rel == r]
        for other in relations:
            inverse = sum((t, other, h) in train_set for h, t in own)
            if inverse / len(own) >= threshold:
                found.add((f"r{r}", f"r{other}", "symmetric" if r == other else "inverse", inverse))
            if other != r:
                same = sum((h, other, t) in train_set for h, t in own)
                if same / len(own) >= threshold:
                    found.add((f"r{r}", f"r{other}", "duplicate", same))
    return found


@pytest.mark.parametrize("seed", range(5))
def test_leakage_and_coverage_equal_brute_force(seed: int) -> None:
    ds = random_dataset(seed)
    report = audit_dataset(ds, threshold=0.3, rule_baseline=False)
    train = ds.train.tolist()
    for leak, split in zip(report.leakage, (ds.valid, ds.test), strict=True):
        expected = brute_leakage(split.tolist(), train)
        assert {kind: getattr(leak, kind) for kind in expected} == expected
        assert leak.triples == len(split)
    test_leak = report.leakage[1]
    assert test_leak.reverse >= 10 and test_leak.duplicates >= 4  # the graph was built to leak
    seen_entities = {h for h, _, _ in train} | {t for _, _, t in train}
    seen_relations = {r for _, r, _ in train}
    for coverage, split in zip(report.coverage, (ds.valid, ds.test), strict=True):
        rows = split.tolist()
        unseen = {e for h, _, t in rows for e in (h, t) if e not in seen_entities}
        assert coverage.unseen_entities == len(unseen)
        assert coverage.unseen_relations == len({r for _, r, _ in rows if r not in seen_relations})
        assert coverage.triples_affected == sum(h not in seen_entities or t not in seen_entities
                                                or r not in seen_relations for h, r, t in rows)  # fmt: skip
    got = {(p.relation, p.other, p.kind, p.support) for p in report.relation_pairs}
    assert got == brute_pairs(train, 0.3)


def test_a_built_graph_with_every_pathology() -> None:
    """r1 is the inverse of r0, r2 duplicates r0, r3 is symmetric; the test triples leak one way each."""
    train = [(0, 0, 1), (2, 0, 3), (4, 0, 5), (1, 1, 0), (3, 1, 2), (5, 1, 4), (0, 2, 1), (2, 2, 3), (4, 2, 5),
             (6, 3, 7), (7, 3, 6), (8, 3, 9), (9, 3, 8)]  # fmt: skip
    test = [(0, 0, 1), (7, 1, 6), (8, 0, 9), (10, 0, 11)]
    ds = dataset_of(train, [(0, 0, 1)], test, 12, 4)
    report = audit_dataset(ds)
    leak = report.leakage[1]
    assert (leak.duplicates, leak.reverse, leak.relation_pair) == (1, 3, 3)
    # (0,0,1): duplicate, reverse via (1,1,0), other relation via (0,2,1); (7,1,6): reverse via (6,3,7), other
    # relation via (7,3,6); (8,0,9): reverse via (9,3,8), other relation via (8,3,9); (10,0,11): nothing
    kinds = {(p.relation, p.other, p.kind) for p in report.relation_pairs}
    assert {("r0", "r1", "inverse"), ("r1", "r0", "inverse"), ("r0", "r2", "duplicate"), ("r2", "r0", "duplicate"),
            ("r3", "r3", "symmetric")} <= kinds  # fmt: skip
    assert report.coverage[1].unseen_entities == 2 and report.coverage[1].triples_affected == 1
    card = report.to_markdown()
    for heading in ("### Leakage into train", "### Relation pairs", "### Coverage", "### Rule-only baseline"):
        assert heading in card
    document = json.loads(report.to_json())
    assert document["format"] == "kgeval-audit-1" and document["leakage"][1]["reverse"] == 3


@pytest.mark.parametrize("seed", range(3))
def test_the_rule_model_scores_by_implying_facts(seed: int) -> None:
    """Its score of (h, r, t) is the number of training facts implying it (loops over the rules), and the
    baseline's MRR is the filtered evaluation of that table."""
    ds = random_dataset(seed)
    train = ds.train.tolist()
    train_set = {tuple(row) for row in train}
    inverse, duplicate = [(0, 1), (2, 2)], [(1, 0)]
    model = RuleModel(ds.train, ds.num_entities, ds.num_relations, inverse, duplicate)
    e, rels = ds.num_entities, ds.num_relations
    table = torch.zeros(e, rels, e)
    for h in range(e):
        for r in range(rels):
            for t in range(e):
                by_inverse = sum((t, other, h) in train_set for rel, other in inverse if rel == r)
                by_duplicate = sum((h, other, t) in train_set for rel, other in duplicate if rel == r)
                table[h, r, t] = ((h, r, t) in train_set) + by_inverse + by_duplicate
    hr = torch.cartesian_prod(torch.arange(e), torch.arange(rels))
    torch.testing.assert_close(model.score_t(hr), table.reshape(e * rels, e))
    rt = torch.cartesian_prod(torch.arange(rels), torch.arange(e))
    torch.testing.assert_close(model.score_h(rt), table.permute(1, 2, 0).reshape(rels * e, e))
    kwargs = ds.evaluation_kwargs("test")
    ranks = reference_ranks(table, kwargs["mapped_triples"], kwargs["additional_filter_triples"])
    expected_mrr = float(np.mean(1.0 / ranks["both"]["realistic"]))
    got = RankBasedEvaluator().evaluate(model, use_tqdm=False, **kwargs)
    assert got.get_metric("mrr") == pytest.approx(expected_mrr, rel=1e-12)


def test_thresholds_and_the_command_line(capsys) -> None:
    with pytest.raises(ValueError, match="threshold"):
        audit_dataset(random_dataset(0), threshold=0)
    assert relation_pairs(np.zeros((0, 3), dtype=np.int64), 0.5) == []
    assert main(["audit", "--dataset", "nations", "--no-baseline"]) == 0
    assert capsys.readouterr().out.startswith("## Evaluation audit: nations")
    assert main(["audit", "--dataset", "nations", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["rule_baseline"]["mrr"] > 0 and document["dataset"] == "nations"


@pytest.mark.skipif(shared_data_dir() is None or not (shared_data_dir() / "WN18").is_dir(),
                    reason="needs the shared WN18 / WN18RR data")  # fmt: skip
def test_wn18_leaks_through_reversed_pairs_and_wn18rr_much_less() -> None:
    """The known contrast (Dettmers et al. 2018): most of WN18's test triples have their reverse in train and a
    rule-only baseline nearly matches the best models; WN18RR removed the inverse relations."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wn18 = audit_dataset(load_dataset(shared_data_dir() / "WN18"))
        wn18rr = audit_dataset(load_dataset(shared_data_dir() / "WN18RR"))
    assert wn18.leakage[1].fraction("reverse") > 0.9 and wn18.rule_baseline.mrr > 0.9
    assert wn18rr.leakage[1].fraction("reverse") < 0.4 and wn18rr.rule_baseline.mrr < 0.4
    assert not [p for p in wn18rr.relation_pairs if p.kind == "inverse"]  # only symmetric relations are left


def test_hub_relations_equal_brute_force() -> None:
    ds = random_dataset(4, num_entities=6, num_relations=3)
    train = {tuple(row) for row in ds.train.tolist()}
    expected = set()
    for r in {r for _, r, _ in train}:
        rows = [(h, t) for h, rel, t in train if rel == r]
        for side, index in (("head", 0), ("tail", 1)):
            values = [pair[index] for pair in rows]
            best = max(sorted(set(values)), key=values.count)
            if len(rows) >= 2 and values.count(best) / len(rows) >= 0.3:
                expected.add((f"r{r}", side, f"e{best}", len(rows)))
    got = {(h.relation, h.side, h.entity, h.triples) for h in audit_dataset(ds, threshold=0.3, rule_baseline=False)
           .hub_relations}  # fmt: skip
    assert got == expected and got


def test_ties_and_protocol_with_a_model(tmp_path) -> None:
    """A DistMult whose embeddings are rounded to a coarse grid ties many candidates: the ties section counts the
    tasks whose optimistic and pessimistic ranks differ, warns, and the protocol reports the sampled gap."""
    from kgeval.datasets import load_shipped_dataset
    from kgeval.models import DistMult

    ds = load_shipped_dataset("nations")
    model = DistMult(ds.num_entities, ds.num_relations, dim=4, seed=0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.sign(parameter))
    report = audit_dataset(ds, model=model, sampled_k=5, rule_baseline=False)
    expected = RankBasedEvaluator().evaluate(model, use_tqdm=False, **ds.evaluation_kwargs("test"))
    records = expected.records
    assert report.ties.tasks == len(records)
    assert report.ties.tied_tasks == int((records.optimistic != records.pessimistic).sum()) > 0
    assert report.ties.mrr["optimistic"] == expected.get_metric("both.optimistic.mrr")
    assert report.ties.warning is not None and "realistic" in report.ties.warning
    assert report.protocol.full_mrr == expected.get_metric("mrr") and report.protocol.sampled_k == 5
    assert report.protocol.sampled_mrr > report.protocol.full_mrr  # 5 negatives flatter the model
    from kgeval.analysis.sampled_estimates import sampled_mrr

    assert report.protocol.expected_sampled_mrr == pytest.approx(sampled_mrr(records, 6), abs=1e-12)
    card = report.to_markdown()
    assert f"from the full ranks: MRR {report.protocol.expected_sampled_mrr:.4f}" in card
    assert "### Ties" in card and "**Warning:**" in card and "5 sampled negatives" in card
    with_baseline = audit_dataset(ds, model=model, sampled_k=5)
    # Nations: every test pair occurs reversed in train, so the rules rank well; this untrained model does not
    assert with_baseline.rule_baseline.mrr > report.protocol.full_mrr
    assert "is within 0.05 of this baseline (or below it)" in with_baseline.to_markdown()
    json.loads(report.to_json())
    # the same ties from a rank table, through the command line
    expected.ranks_df().to_csv(tmp_path / "ranks.csv", index=False)
    assert audit_dataset(ds, results=RankBasedMetricResults.from_records(expected.records),
                         rule_baseline=False).ties == report.ties  # fmt: skip


def test_the_command_line_with_a_checkpoint_and_ranks(tmp_path, capsys) -> None:
    from kgeval.datasets import load_shipped_dataset
    from kgeval.models import DistMult
    from kgeval.models.checkpoint import save_checkpoint

    ds = load_shipped_dataset("nations")
    model = DistMult(ds.num_entities, ds.num_relations, dim=8, seed=0)
    save_checkpoint(model, tmp_path / "model.pt")
    argv = ["audit", "--dataset", "nations", "--no-baseline", "--sampled-k", "10"]
    assert main([*argv, "--checkpoint", str(tmp_path / "model.pt")]) == 0
    card = capsys.readouterr().out
    assert "### Ties" in card and "10 sampled negatives" in card
    results = RankBasedEvaluator().evaluate(model, use_tqdm=False, **ds.evaluation_kwargs("test"))
    results.ranks_df().to_csv(tmp_path / "ranks.csv", index=False)
    assert main([*argv, "--ranks", str(tmp_path / "ranks.csv"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ties"]["tasks"] == 2 * len(ds.test) and document["protocol"]["sampled_mrr"] is None


def test_ties_of_ranks_without_triples_name_no_relation() -> None:
    """Tied ranks fed to an accumulator without triples (relation -1): the ties are counted, and no relation "-1"
    is named among those they concentrate in."""
    from kgeval import MetricAccumulator
    from kgeval.datasets import load_shipped_dataset

    accumulators = {side: MetricAccumulator(ks=(1,)) for side in ("head", "tail")}
    for accumulator in accumulators.values():
        accumulator.update(torch.tensor([1, 2, 3]), torch.tensor([4, 2, 5]), torch.tensor([9, 9, 9]),
                           task_index=torch.arange(3))  # fmt: skip
    results = RankBasedMetricResults.from_accumulators(accumulators, (1,))
    report = audit_dataset(load_shipped_dataset("nations"), results=results, rule_baseline=False)
    assert (report.ties.tasks, report.ties.tied_tasks) == (6, 4)
    assert report.ties.top_relations == []
    assert "Ties concentrate in" not in report.to_markdown()
