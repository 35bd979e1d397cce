"""``kgeval evaluate --buckets / --relation-groups``: the tables after the headline and the ``--json`` keys, each
expectation derived here from the rank table by a short loop (bucket counts, cuts, tasks, MRR, hits@10) or from
``evaluate(..., restrict_relations_to=...)`` (groups), never from kgeval's bucket or group code."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kgeval import RankBasedEvaluator
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    """(nations, a seeded untrained DistMult, its filtered test results, their rank table's path)."""
    nations = load_shipped_dataset("nations")
    model = DistMult(nations.num_entities, nations.num_relations, dim=8, seed=0)
    results = RankBasedEvaluator().evaluate(model, use_tqdm=False, **nations.evaluation_kwargs("test"))
    path = tmp_path_factory.mktemp("breakdowns") / "ranks.csv"
    results.ranks_df().to_csv(path, index=False)
    return nations, model, results, path


def _tasks(results):
    """(answer, relation, realistic rank) per head / tail task, from the rank table."""
    frame = results.ranks_df()
    rows = []
    for row in frame.itertuples(index=False):
        answer = row.head if row.side in (0, "head") else row.tail
        rows.append((int(answer), int(row.relation), (row.optimistic + row.pessimistic) / 2))
    return rows


def test_buckets_in_json_hold_every_task_their_counts_cuts_metrics_and_intervals(setup, capsys) -> None:
    nations, _model, results, path = setup
    base = ["evaluate", "--ranks", str(path), "--dataset", "nations", "--buckets", "answer"]
    assert main([*base, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    table = document["frequency_buckets"]
    assert (table["by"], table["scheme"], table["reference"]) == ("answer", "kgeval", "train")
    assert table["interval_key"] == "both.realistic.inverse_harmonic_mean_rank"
    counts = Counter()
    for head, _relation, tail in nations.train.tolist():
        counts[head] += 1
        counts[tail] += 1
    tasks = _tasks(results)
    seen = sorted(counts[answer] for answer, _, _ in tasks if counts[answer] > 0)
    # kgeval's cuts: the ceil(j n / 4)-th smallest seen count, j = 1, 2, 3, then the largest; equal cuts merge
    tops = sorted({seen[math.ceil(j * len(seen) / 4) - 1] for j in (1, 2, 3)} | {seen[-1]})
    buckets = table["buckets"]
    assert buckets[0]["label"] == "unseen" and [b["high"] for b in buckets[1:]] == tops
    assert sum(b["num_tasks"] for b in buckets) == len(tasks)
    for bucket in buckets:
        low, high = bucket["low"], bucket["high"]
        ranks = [rank for answer, _, rank in tasks if low <= counts[answer] <= high]
        assert bucket["num_tasks"] == len(ranks)
        metrics, interval = bucket["metrics"], bucket["interval"]
        if not ranks:
            assert metrics["both.realistic.inverse_harmonic_mean_rank"] is None and interval is None
            continue
        mrr = sum(1 / rank for rank in ranks) / len(ranks)
        assert metrics["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(mrr, abs=1e-12)
        assert metrics["both.realistic.hits_at_10"] == pytest.approx(np.mean([r <= 10 for r in ranks]), abs=1e-12)
        assert interval["estimate"] == pytest.approx(mrr, abs=1e-12)
        assert interval["low"] <= mrr <= interval["high"] and interval["level"] == 0.95
    # the text: the headline, then the table
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "Metrics per answer frequency bucket (kgeval scheme; counted on the train triples" in out
    assert out.index("Metrics per answer") > out.index("== ranks of")


def test_bucket_reference_and_scheme(setup, capsys) -> None:
    nations, _model, results, path = setup
    argv = ["evaluate", "--ranks", str(path), "--dataset", "nations", "--buckets", "relation", "--bucket-reference",
            "all", "--bucket-scheme", "libkge", "--json"]  # fmt: skip
    assert main(argv) == 0
    table = json.loads(capsys.readouterr().out)["frequency_buckets"]
    assert (table["scheme"], table["reference"]) == ("libkge", "all")
    assert [b["label"] for b in table["buckets"]] == ["25%", "50%", "75%", "top"]
    # LibKGE's rule restated: relations sorted by count over all triples (stable), cut at int(f * n)
    counts = Counter(r for split in (nations.train, nations.valid, nations.test) for _h, r, _t in split.tolist())
    order = sorted(range(nations.num_relations), key=lambda r: counts[r])
    size = nations.num_relations
    quarter = {r: j for j, (a, b) in enumerate([(0, .25), (.25, .5), (.5, .75), (.75, 1)])
               for r in order[int(a * size):int(b * size)]}  # fmt: skip
    tasks = _tasks(results)
    for j, bucket in enumerate(table["buckets"]):
        ranks = [rank for _answer, relation, rank in tasks if quarter[relation] == j]
        assert bucket["num_tasks"] == len(ranks)
        if ranks:
            mrr = sum(1 / r for r in ranks) / len(ranks)
            assert bucket["metrics"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(mrr, abs=1e-12)


def test_relation_groups_equal_restricted_evaluations(setup, tmp_path: Path, capsys) -> None:
    nations, model, _results, path = setup
    labels = {i: label for label, i in nations.relation_to_id.items()}
    groups = {"first": [labels[0], labels[1], labels[2]], "ids": [3, 4, 5, 6]}
    (tmp_path / "groups.json").write_text(json.dumps(groups))
    groups_file = str(tmp_path / "groups.json")
    base = ["evaluate", "--ranks", str(path), "--dataset", "nations", "--relation-groups", groups_file]
    assert main([*base, "--json"]) == 0
    table = json.loads(capsys.readouterr().out)["relation_groups"]
    assert [g["name"] for g in table["groups"]] == ["first", "ids"]
    for group, ids in zip(table["groups"], ([0, 1, 2], [3, 4, 5, 6]), strict=True):
        restricted = RankBasedEvaluator().evaluate(model, use_tqdm=False, restrict_relations_to=ids,
                                                   **nations.evaluation_kwargs("test"))  # fmt: skip
        assert group["relations"] == ids
        assert group["num_tasks"] == int(restricted.get_metric("both.realistic.count"))
        for key in ("both.realistic.inverse_harmonic_mean_rank", "tail.pessimistic.hits_at_10",
                    "head.optimistic.arithmetic_mean_rank"):  # fmt: skip
            assert group["micro"][key] == pytest.approx(restricted.get_metric(key), abs=1e-12), key
        evaluated = sorted(set(ids) & set(nations.test[:, 1].tolist()))  # the macro mean's relations
        assert group["num_evaluated"] == len(evaluated)
        kwargs = nations.evaluation_kwargs("test")
        per_relation = [RankBasedEvaluator().evaluate(model, use_tqdm=False, restrict_relations_to=[r], **kwargs)
                        for r in evaluated]  # fmt: skip
        macro = np.mean([r.get_metric("both.realistic.inverse_harmonic_mean_rank") for r in per_relation])
        assert group["macro"]["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(macro, abs=1e-12)
        interval = group["interval"]
        assert interval["low"] <= group["micro"]["both.realistic.inverse_harmonic_mean_rank"] <= interval["high"]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "Relation groups (micro and macro" in out and "first" in out and "ids" in out


def test_buckets_of_a_rank_table_need_the_dataset(setup, capsys) -> None:
    _nations, _model, _results, path = setup
    assert main(["evaluate", "--ranks", str(path), "--buckets", "answer"]) == 2
    assert "give --dataset with --ranks" in capsys.readouterr().err
