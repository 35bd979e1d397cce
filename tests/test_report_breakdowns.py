"""The report's frequency-bucket, relation-group and full-vs-sampled sections (``report_html(frequency_buckets=,
relation_groups=, sampled=)`` and ``kgeval report --buckets / --relation-groups / --sampled``): every number the page
prints, read back from its ``data-key`` cells, equals one derived here -- bucket metrics by a short loop over the
rank table, group metrics from ``evaluate(..., restrict_relations_to=...)``, sampled estimates from
``results.sampled_metrics`` (which has its own brute-force tests)."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, RankBasedMetricResults
from kgeval.cli.report import add_report_arguments, run_report
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.report import report_html
from tests.test_report import _parse, _same

N_RESAMPLES = 50
MRR = "both.realistic.inverse_harmonic_mean_rank"


@pytest.fixture(scope="module")
def setup():
    """(nations, {name: model}, {name: filtered test results}) of two seeded untrained DistMult models."""
    data = load_shipped_dataset("nations")
    models = {name: DistMult(data.num_entities, data.num_relations, dim=8, seed=seed)
              for name, seed in (("A", 2), ("B", 7))}  # fmt: skip
    results = {name: RankBasedEvaluator().evaluate(model, use_tqdm=False, **data.evaluation_kwargs("test"))
               for name, model in models.items()}  # fmt: skip
    return data, models, results


def _cells(page: str, prefix: str) -> list[dict[str, str]]:
    return [cell for cell in _parse(page).cells if cell["data-key"].startswith(prefix)]


def _check_text(cell: dict[str, str], expected: float) -> None:
    """The printed text rounds the exact value (a dash for NaN)."""
    text = cell["text"].strip().replace(",", "")
    if math.isnan(expected):
        assert text == "\u2013", cell
        return
    digits = len(text.split(".")[1]) if "." in text else 0
    assert abs(float(text) - expected) <= 0.5 * 10**-digits + 1e-12, cell


def _answer_buckets(data, results: RankBasedMetricResults) -> dict[str, list[float]]:
    """kgeval's answer buckets restated: label -> the realistic ranks of its tasks (counts of train occurrences, head
    or tail; an unseen bucket, then cuts at the ceil(j n / 4)-th smallest seen count, equal cuts merged)."""
    counts: Counter[int] = Counter()
    for head, _relation, tail in data.train.tolist():
        counts[head] += 1
        counts[tail] += 1
    frame = results.ranks_df()
    tasks = [(counts[int(row.head if row.side in (0, "head") else row.tail)], (row.optimistic + row.pessimistic) / 2)
             for row in frame.itertuples(index=False)]  # fmt: skip
    seen = sorted(count for count, _ in tasks if count > 0)
    tops = sorted({seen[math.ceil(j * len(seen) / 4) - 1] for j in (1, 2, 3)} | {seen[-1]})
    buckets = {"unseen": [rank for count, rank in tasks if count == 0]}
    low = 1
    for high in tops:
        label = str(low) if low == high else f"{low}-{high}"
        buckets[label] = [rank for count, rank in tasks if low <= count <= high]
        low = high + 1
    return buckets


def _bucket_value(ranks: list[float], column: str) -> float:
    if not ranks:
        return math.nan
    if column == MRR:
        return float(np.mean([1 / r for r in ranks]))
    k = int(column.rsplit("_", 1)[1])
    return float(np.mean([r <= k for r in ranks]))


def test_bucket_cells_equal_a_loop_over_the_ranks(setup) -> None:
    data, _models, results = setup
    page = report_html(results, frequency_buckets=data.train, n_resamples=N_RESAMPLES)
    cells = _cells(page, "bucket.")
    seen = set()
    for name, result in results.items():
        expected = _answer_buckets(data, result)
        api = result.frequency_buckets(data.train, n_resamples=N_RESAMPLES, seed=0)
        mine = [cell for cell in cells if cell["data-model"] == name]
        assert {cell["data-bucket"] for cell in mine} == set(expected)
        for cell in mine:
            label = cell["data-bucket"]
            column = cell["data-key"][len(f"bucket.{label}.") :]
            ranks = expected[label]
            if column == "num_tasks":
                assert int(cell["data-value"]) == len(ranks)
                continue
            if column.startswith("ci."):
                interval = api.bucket(label).interval
                end = column.rsplit(".", 1)[1]
                assert column == f"ci.{MRR}.{end}"
                assert _same(cell["data-value"], getattr(interval, end))
                mrr = _bucket_value(ranks, MRR)
                assert interval.low <= mrr if end == "low" else mrr <= interval.high
                _check_text(cell, float(cell["data-value"]))
                continue
            value = _bucket_value(ranks, column)
            page_value = float(cell["data-value"])
            assert (math.isnan(value) and math.isnan(page_value)) or page_value == pytest.approx(value, abs=1e-12)
            _check_text(cell, page_value)
            seen.add(column)
    assert seen == {MRR, "both.realistic.hits_at_1", "both.realistic.hits_at_10"}
    assert page.count('data-chart="buckets"') == 1 and "MRR per frequency bucket" in page


def test_group_cells_equal_restricted_evaluations(setup) -> None:
    data, models, results = setup
    labels = {i: label for label, i in data.relation_to_id.items()}
    groups = {"by label": [labels[0], labels[1], labels[2]], "by id": [3, 4, 5, 6]}
    page = report_html(results, relation_groups=groups, relation_labels=data.relation_to_id, n_resamples=N_RESAMPLES)
    cells = _cells(page, "group.")
    kwargs = data.evaluation_kwargs("test")
    checked = Counter()
    for name, model in models.items():
        for group, ids in zip(groups, ([0, 1, 2], [3, 4, 5, 6]), strict=True):
            micro = RankBasedEvaluator().evaluate(model, use_tqdm=False, restrict_relations_to=ids, **kwargs)
            evaluated = sorted(set(ids) & set(data.test[:, 1].tolist()))
            each = [RankBasedEvaluator().evaluate(model, use_tqdm=False, restrict_relations_to=[r], **kwargs)
                    for r in evaluated]  # fmt: skip
            mine = {cell["data-key"]: cell for cell in cells
                    if cell["data-model"] == name and cell["data-group"] == group}  # fmt: skip
            prefix = f"group.{group}."
            assert int(mine[prefix + "num_relations"]["data-value"]) == len(ids)
            assert int(mine[prefix + "num_evaluated"]["data-value"]) == len(evaluated)
            assert int(mine[prefix + "num_tasks"]["data-value"]) == int(micro.get_metric("both.realistic.count"))
            for key in (MRR, "both.realistic.hits_at_1", "both.realistic.hits_at_10"):
                value = float(mine[f"{prefix}micro.{key}"]["data-value"])
                assert value == pytest.approx(micro.get_metric(key), abs=1e-12), (name, group, key)
                macro = float(np.mean([r.get_metric(key) for r in each]))
                assert float(mine[f"{prefix}macro.{key}"]["data-value"]) == pytest.approx(macro, abs=1e-12)
                _check_text(mine[f"{prefix}micro.{key}"], value)
                checked[key] += 1
            low = float(mine[f"{prefix}ci.micro.{MRR}.low"]["data-value"])
            high = float(mine[f"{prefix}ci.micro.{MRR}.high"]["data-value"])
            assert low <= micro.get_metric(MRR) <= high
    assert set(checked.values()) == {4}  # two models, two groups
    assert 'title="accusation, aidenemy' in page  # a group's relations by label, on hover


@pytest.mark.parametrize("sizes", [5, [5, 200]])
def test_sampled_cells_equal_the_estimates_beside_the_full_numbers(setup, sizes) -> None:
    _data, _models, results = setup
    page = report_html(results, sampled=sizes, n_resamples=N_RESAMPLES)
    start = page.index('<section id="sampled">')
    section = page[start : page.index("</section>", start)]
    cells = _parse(section).cells
    for n in [sizes] if isinstance(sizes, int) else sizes:
        for name, result in results.items():
            exact = result.sampled_metrics(n)
            ultra = result.sampled_metrics(n, ks=[k for k in result.ks if k <= n], method="ultra") if n <= 171 else {}
            mine = {cell["data-key"]: cell for cell in cells
                    if cell["data-model"] == name and cell["data-samples"] == str(n)}  # fmt: skip
            expected_keys = set()
            for metric in ("inverse_harmonic_mean_rank", *(f"hits_at_{k}" for k in result.ks)):
                for rank_type in ("realistic", "pessimistic"):
                    expected_keys |= {f"both.{rank_type}.{metric}", f"sampled.both.{rank_type}.{metric}_sampled_{n}"}
                if f"both.pessimistic.{metric}_sampled_{n}_ultra" in ultra:
                    expected_keys.add(f"sampled.both.pessimistic.{metric}_sampled_{n}_ultra")
            assert set(mine) == expected_keys
            for key, cell in mine.items():
                value = (ultra if key.endswith("_ultra") else exact)[key[8:]] if key.startswith("sampled.") else (
                    result.to_flat_dict()[key])  # fmt: skip
                assert _same(cell["data-value"], value), (key, cell)
                _check_text(cell, value)
    assert ("not computed beyond N = 171" in section) == (not isinstance(sizes, int))
    # N = 5 is below the 14 candidates: the estimate differs from the full number; ULTRA's hits@10 needs k <= N
    assert 'data-key="sampled.both.pessimistic.hits_at_10_sampled_5_ultra"' not in section


def test_the_sections_appear_only_when_asked_for(setup) -> None:
    data, _models, results = setup
    plain = report_html(results["A"], n_resamples=N_RESAMPLES)
    for section in ('id="buckets"', 'id="groups"', 'id="sampled"'):
        assert section not in plain
    page = report_html(results["A"], frequency_buckets=data.train, relation_groups={"g": [0]}, sampled=50,
                       n_resamples=N_RESAMPLES)  # fmt: skip
    assert all(section in page for section in ('id="buckets"', 'id="groups"', 'id="sampled"'))


def test_given_tables_are_shown_as_they_are(setup) -> None:
    data, _models, results = setup
    options = {"by": "relation", "scheme": "libkge", "num_relations": data.num_relations}
    computed = report_html(results, frequency_buckets=data.train, bucket_options=options, n_resamples=N_RESAMPLES)
    tables = {name: r.frequency_buckets(data.train, n_resamples=N_RESAMPLES, **options) for name, r in results.items()}
    assert report_html(results, frequency_buckets=tables, n_resamples=N_RESAMPLES) == computed
    assert "<th>count</th>" in computed and "LibKGE&#x27;s buckets hold quarters" in computed  # labels are no ranges
    groups = {name: r.relation_groups({"g": [0, 1]}, n_resamples=N_RESAMPLES) for name, r in results.items()}
    assert report_html(results, relation_groups=groups, n_resamples=N_RESAMPLES) == report_html(
        results, relation_groups={"g": [0, 1]}, n_resamples=N_RESAMPLES)  # fmt: skip
    single = report_html(results["A"], relation_groups=groups["A"], n_resamples=N_RESAMPLES)
    assert 'data-key="group.g.num_tasks"' in single


def test_results_to_html_passes_the_options_on(setup, tmp_path: Path) -> None:
    data, _models, results = setup
    options = {"frequency_buckets": data.train, "relation_groups": {"g": [0, 1]}, "sampled": 5, "n_resamples": 20}
    text = results["A"].to_html(tmp_path / "page.html", **options)
    assert text == report_html(results["A"], **options) and 'id="sampled"' in text


@pytest.mark.parametrize(("options", "message"), [
    ({"frequency_buckets": "TABLE_A"}, "one BucketTable for 2 models"),
    ({"frequency_buckets": {"A": "TABLE_A"}}, "no BucketTable for model(s) 'B'"),
    ({"frequency_buckets": {"A": "TABLE_A", "B": "TABLE_A"}, "bucket_options": {"by": "relation"}},
     "bucket options apply where the report computes the tables"),
    ({"relation_groups": ["not", "a", "mapping"]}, "relation_groups must map group names"),
    ({"relation_groups": {"g": ["no such relation"]}}, "no such relation"),
    ({"sampled": 1}, "sampled must be an integer N >= 2"),
    ({"sampled": []}, "sampled must be an integer N >= 2"),
])  # fmt: skip
def test_bad_options_are_refused(setup, options, message) -> None:
    data, _models, results = setup
    table = results["A"].frequency_buckets(data.train, n_resamples=10)

    def real(value):
        if value == "TABLE_A":
            return table
        return {key: real(item) for key, item in value.items()} if isinstance(value, dict) else value

    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        report_html(results, relation_labels=data.relation_to_id, n_resamples=10,
                    **{key: real(value) for key, value in options.items()})  # fmt: skip


# -- kgeval report ------------------------------------------------------------------------------------------------
def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kgeval report")
    add_report_arguments(parser)
    return run_report(parser.parse_args(argv))


def test_the_command_adds_the_sections_of_its_flags(setup, tmp_path: Path, capsys) -> None:
    data, _models, results = setup
    paths = []
    for name, result in results.items():
        paths.append(str(tmp_path / f"{name}.csv"))
        result.ranks_df(relation_labels=data.relation_to_id).to_csv(paths[-1], index=False)
    labels = {i: label for label, i in data.relation_to_id.items()}
    (tmp_path / "groups.json").write_text(json.dumps({"first": [labels[0], labels[1]], "ids": [3, 4]}))
    out = tmp_path / "page.html"
    argv = ["--ranks", *paths, "--names", "A", "B", "--dataset", "nations", "--no-rule-baseline", "--resamples",
            str(N_RESAMPLES), "--buckets", "relation", "--bucket-reference", "all", "--relation-groups",
            str(tmp_path / "groups.json"), "--sampled", "5", "-o", str(out)]  # fmt: skip
    assert _cli(argv) == 0, capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    reference = torch.cat([data.train, data.valid, data.test])
    as_tables = {name: RankBasedMetricResults.from_rank_table(result.ranks_df(), ks=(1, 3, 5, 10))
                 for name, result in results.items()}  # fmt: skip
    expected = report_html(as_tables, frequency_buckets=reference, n_resamples=N_RESAMPLES,
                           bucket_options={"by": "relation", "num_entities": data.num_entities,
                                           "num_relations": data.num_relations},
                           relation_groups={"first": [0, 1], "ids": [3, 4]}, sampled=5)  # fmt: skip
    for prefix in ("bucket.", "group.", "sampled."):
        got = [(c["data-model"], c["data-key"], c["data-value"]) for c in _cells(page, prefix)]
        assert got and got == [(c["data-model"], c["data-key"], c["data-value"]) for c in _cells(expected, prefix)]
    # relation buckets counted on all the triples: each relation's count restated
    counts = Counter(int(r) for r in reference[:, 1])
    tasks = {cell["data-bucket"]: int(cell["data-value"]) for cell in _cells(page, "bucket.")
             if cell["data-key"].endswith(".num_tasks") and cell["data-model"] == "A"}  # fmt: skip
    per_relation = Counter(int(r) for r in data.test[:, 1])
    for label, number in tasks.items():
        low, _, high = label.partition("-")
        if label == "unseen":
            assert number == 0
            continue
        top = int(high.rstrip("+")) if high else int(low.rstrip("+"))
        inside = [r for r in per_relation if int(low.rstrip("+")) <= counts[r] <= top]
        assert number == 2 * sum(per_relation[r] for r in inside)


def test_the_command_wants_the_dataset_for_buckets(setup, tmp_path: Path, capsys) -> None:
    _data, _models, results = setup
    results["A"].ranks_df().to_csv(tmp_path / "A.csv", index=False)
    assert _cli(["--ranks", str(tmp_path / "A.csv"), "--buckets", "answer", "-o", str(tmp_path / "r.html")]) == 2
    assert "--buckets counts the dataset's triples: give --dataset" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
