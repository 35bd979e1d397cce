"""Many graphs in one run (kgeval.many.evaluate_many, kgeval evaluate-many): on small synthetic folders of the three
kinds (transductive, entity-inductive, fully inductive), every number of the per-graph table equals the graph's own
single-graph evaluation and the brute-force loop over the model's own score rows (METRICS.md's ranks), and each group
average is the mean of its rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgeval import RankBasedEvaluator
from kgeval.cli import main
from kgeval.datasets import load_dataset
from kgeval.many import METRIC_COLUMNS, evaluate_many
from kgeval.models import DistMult
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.support.many_graphs import check_averages, expected_table, make_folders


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    """Two transductive, one entity-inductive and two fully inductive folders."""
    return make_folders(tmp_path)


@pytest.mark.parametrize("split", ["test", "valid"])
def test_every_number_equals_the_single_graph_evaluation(folders: list[Path], split: str) -> None:
    expected = expected_table(folders, split)
    assert expected["tied"].max() > 0  # ties really occur, so pessimistic and realistic differ
    many = evaluate_many(lambda dataset: NeighbourhoodBaseline(), [str(f) for f in folders], split=split,
                         use_tqdm=False)  # fmt: skip
    table = many.table
    assert list(table["dataset"]) == list(expected["dataset"])
    assert list(table["group"]) == list(expected["group"])
    assert list(table["tasks"]) == list(expected["tasks"])
    for column in METRIC_COLUMNS:
        assert list(table[column]) == list(expected[column]), column  # exactly the single-graph evaluation's
    check_averages(many.averages, expected)


def test_loaded_datasets_and_one_model_object(folders: list[Path]) -> None:
    datasets = [load_dataset(folder) for folder in folders]
    many = evaluate_many(NeighbourhoodBaseline(), datasets, use_tqdm=False)
    again = evaluate_many(lambda dataset: NeighbourhoodBaseline(), folders, use_tqdm=False)
    pd.testing.assert_frame_equal(many.table.drop(columns="seconds"), again.table.drop(columns="seconds"))
    assert set(many.results) == {dataset.name for dataset in datasets}


def test_an_ordinary_model_per_graph(folders: list[Path]) -> None:
    """A model of kgeval's ordinary form (DistMult built for each transductive graph) is evaluated as the evaluator
    takes it: its rows equal its own evaluation on each graph."""
    datasets = [load_dataset(folder) for folder in folders[:2]]
    models = {dataset.name: DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=3)
              for dataset in datasets}  # fmt: skip
    many = evaluate_many(lambda dataset: models[dataset.name], datasets, use_tqdm=False)
    for dataset, (_, row) in zip(datasets, many.table.iterrows(), strict=True):
        own = RankBasedEvaluator().evaluate(models[dataset.name], **dataset.evaluation_kwargs("test"),
                                            use_tqdm=False)  # fmt: skip
        assert row["group"] == "transductive"
        assert row["mrr_pessimistic"] == own["both.pessimistic.mrr"]
        assert row["hits@10_realistic"] == own["both.realistic.hits@10"]


def test_misuse_is_refused(folders: list[Path]) -> None:
    with pytest.raises(ValueError, match="lack"):
        evaluate_many(NeighbourhoodBaseline(), folders, evaluator=RankBasedEvaluator(ks=(3,)), use_tqdm=False)
    with pytest.raises(ValueError, match="at least one dataset"):
        evaluate_many(NeighbourhoodBaseline(), [], use_tqdm=False)
    with pytest.raises(ValueError, match="two datasets are named"):
        evaluate_many(NeighbourhoodBaseline(), [folders[0], folders[0]], use_tqdm=False)
    with pytest.raises(TypeError, match="takes datasets"):
        evaluate_many(NeighbourhoodBaseline(), [object()], use_tqdm=False)


def test_the_command_prints_the_python_calls_numbers(folders: list[Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    expected = expected_table(folders, "test")
    csv = tmp_path / "table.csv"
    assert main(["evaluate-many", "--datasets", *map(str, folders), "--json", "--csv", str(csv), "--threads", "1"]) \
        == 0  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    printed = pd.DataFrame(document["graphs"])
    assert list(printed["dataset"]) == list(expected["dataset"])
    for column in ["tasks", *METRIC_COLUMNS]:
        assert list(printed[column]) == list(expected[column]), column
    averages = pd.DataFrame(document["averages"]).T
    check_averages(averages.astype({"graphs": int, **{c: float for c in METRIC_COLUMNS}}), expected)
    written = pd.read_csv(csv, float_precision="round_trip")  # pandas 2.0.3's default parser: 1 ulp off
    for column in ["tasks", *METRIC_COLUMNS]:
        np.testing.assert_allclose(written[column], expected[column], rtol=1e-15, atol=0)

    assert main(["evaluate-many", "--datasets", *map(str, folders), "--no-progress"]) == 0
    text = capsys.readouterr().out
    for _, row in expected.iterrows():
        line = next(line for line in text.splitlines() if line.split() and line.split()[0] == row["dataset"])
        assert f"{row['mrr_pessimistic']:.4f}" in line and f"{row['mrr_realistic']:.4f}" in line
        assert f"{row['hits@10_pessimistic']:.4f}" in line and f"{row['tied']:.4f}" in line
    assert "Group averages" in text and f"{expected['mrr_pessimistic'].mean():.4f}" in text


def test_the_command_skips_absent_default_sets_and_refuses_absent_named_ones(
        folders: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("KGEVAL_SHARED_DATA", str(shared))
    assert main(["evaluate-many", "--no-progress"]) == 2
    assert "no dataset to evaluate" in capsys.readouterr().err
    (shared / "InGram-NL-25").symlink_to(folders[3])
    assert main(["evaluate-many", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "skipped ILPC2022-small, ILPC2022-large, InGram-NL-0, InGram-NL-100, InGram-WK-25" in captured.err
    assert "InGram-NL-25" in captured.out and "inductive (e, r)" in captured.out
    assert main(["evaluate-many", "--datasets", str(folders[0]), str(tmp_path / "nowhere"), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval evaluate-many: error:") and "nowhere" in error and len(error.splitlines()) == 1
