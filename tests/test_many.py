"""Many graphs in one run (kgeval.many.evaluate_many, kgeval evaluate-many): on small synthetic folders of the three
kinds (transductive, entity-inductive, fully inductive), every number of the per-graph table equals the graph's own
single-graph evaluation and the brute-force loop over the model's own score rows (METRICS.md's ranks), and each group
average is the mean of its rows."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import on_graphs
from kgeval.cli import main
from kgeval.datasets import FullyInductiveDataset, InductiveDataset, TriplesDataset, load_dataset
from kgeval.graphs import Graph
from kgeval.many import GROUPS, METRIC_COLUMNS, evaluate_many
from kgeval.models import DistMult
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.helpers.loop_ranks import loop_ranks

Rows = list[tuple[str, str, str]]


def random_rows(rng: random.Random, entities: list[str], relations: list[str], count: int) -> Rows:
    """``count`` random labelled triples; the first ``len(entities)`` form a ring, so every entity is in the graph."""
    ring = [(entities[i], relations[i % len(relations)], entities[(i + 1) % len(entities)])
            for i in range(len(entities))]  # fmt: skip
    rest = [(rng.choice(entities), rng.choice(relations), rng.choice(entities)) for _ in range(count - len(ring))]
    return list(dict.fromkeys(ring + rest))  # no repeated triple


def write(folder: Path, files: dict[str, Rows]) -> Path:
    folder.mkdir(parents=True)
    for name, rows in files.items():
        (folder / f"{name}.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    return folder


def queries(rng: random.Random, graph: Rows, count: int) -> Rows:
    """Queries over the graph's own entities and relations (heavy ties for the baseline: few edges)."""
    entities = sorted({h for h, _, _ in graph} | {t for _, _, t in graph})
    relations = sorted({r for _, r, _ in graph})
    return list(dict.fromkeys((rng.choice(entities), rng.choice(relations), rng.choice(entities))
                              for _ in range(count)))  # fmt: skip


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    """Two transductive, one entity-inductive and two fully inductive folders."""
    rng = random.Random(7)
    made = []
    for index in range(2):
        entities, relations = [f"e{i}" for i in range(14 + index)], [f"r{i}" for i in range(4)]
        train = random_rows(rng, entities, relations, 45)
        made.append(write(tmp_path / f"trans{index}", {"train": train, "valid": queries(rng, train, 12),
                                                       "test": queries(rng, train, 15)}))  # fmt: skip
    relations = [f"r{i}" for i in range(3)]
    train = random_rows(rng, [f"a{i}" for i in range(12)], relations, 40)
    inference = random_rows(rng, [f"b{i}" for i in range(13)], relations, 35)
    made.append(write(tmp_path / "ind0", {"train": train, "inference": inference,
                                          "inference_validation": queries(rng, inference, 10),
                                          "inference_test": queries(rng, inference, 14)}))  # fmt: skip
    for index in range(2):
        train = random_rows(rng, [f"a{i}" for i in range(11)], ["r0", "r1", "r2"], 40)
        msg = random_rows(rng, [f"b{i}" for i in range(12 + index)], ["r1", "r2", "n0", "n1", "n2"], 38)
        made.append(write(tmp_path / f"full{index}", {"train": train, "msg": msg, "valid": queries(rng, msg, 11),
                                                      "test": queries(rng, msg, 13)}))  # fmt: skip
    return made


class TrainingGraphModel:
    """The baseline bound by hand to a transductive dataset's training graph (the test's own adapter)."""

    def __init__(self, model: NeighbourhoodBaseline, dataset: TriplesDataset) -> None:
        self.model = model
        self.graph = Graph(dataset.train, dataset.num_entities, dataset.num_relations)
        self.num_entities = dataset.num_entities

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self.model.score_t(hr_batch, graph=self.graph)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self.model.score_h(rt_batch, graph=self.graph)


def single_graph(dataset: Any, split: str) -> tuple[Any, dict[str, dict[str, np.ndarray]]]:
    """(the graph's own evaluation, the brute-force loop's ranks) of the baseline on ``split``."""
    model = NeighbourhoodBaseline()
    kwargs = dataset.evaluation_kwargs(split)
    if isinstance(dataset, TriplesDataset):
        graph = Graph(dataset.train, dataset.num_entities, dataset.num_relations)
        wrapped: Any = TrainingGraphModel(model, dataset)
    else:
        graph = dataset.graph(kwargs["mode"]) if isinstance(dataset, FullyInductiveDataset) else Graph(
            dataset.inference, dataset.num_inference_entities, dataset.num_relations)  # fmt: skip
        wrapped = on_graphs(model, dataset)
    results = RankBasedEvaluator().evaluate(wrapped, **kwargs, use_tqdm=False)

    def row(query: tuple[int, int], side: str) -> np.ndarray:
        method = model.score_t if side == "tail" else model.score_h
        return method(torch.tensor([query]), graph=graph)[0].numpy()

    return results, loop_ranks(row, kwargs["mapped_triples"], kwargs["additional_filter_triples"])


def expected_row(results: Any, loop: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
    """The row's numbers from the single-graph results, each checked against the loop's ranks (METRICS.md)."""
    optimistic = np.concatenate([loop[side]["optimistic"] for side in ("head", "tail")]).astype(float)
    pessimistic = np.concatenate([loop[side]["pessimistic"] for side in ("head", "tail")]).astype(float)
    realistic = (optimistic + pessimistic) / 2
    ranks = {"pessimistic": pessimistic, "realistic": realistic}
    row = {"tasks": len(pessimistic), "tied": float(np.mean(pessimistic > optimistic))}
    for rank_type, rank in ranks.items():
        row[f"mrr_{rank_type}"] = results[f"both.{rank_type}.mrr"]
        assert row[f"mrr_{rank_type}"] == pytest.approx(np.mean(1 / rank), abs=1e-12)
        for k in (1, 10):
            row[f"hits@{k}_{rank_type}"] = results[f"both.{rank_type}.hits@{k}"]
            assert row[f"hits@{k}_{rank_type}"] == pytest.approx(np.mean(rank <= k), abs=1e-12)
    return row


def expected_table(folders: list[Path], split: str) -> pd.DataFrame:
    rows = []
    for folder in folders:
        dataset = load_dataset(folder)
        group = {TriplesDataset: "transductive", InductiveDataset: "inductive (e)",
                 FullyInductiveDataset: "inductive (e, r)"}[type(dataset)]  # fmt: skip
        rows.append({"dataset": dataset.name, "group": group, **expected_row(*single_graph(dataset, split))})
    return pd.DataFrame(rows)


def check_averages(averages: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Each group's average (and "all") is the plain mean of the expected rows of the group."""
    groups = [group for group in GROUPS if group in set(expected["group"])]
    assert list(averages.index) == [*groups, "all"]
    for group in [*groups, "all"]:
        part = expected if group == "all" else expected[expected["group"] == group]
        assert averages.loc[group, "graphs"] == len(part)
        for column in METRIC_COLUMNS:
            assert averages.loc[group, column] == pytest.approx(sum(part[column]) / len(part), abs=1e-12)


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
    written = pd.read_csv(csv)
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
