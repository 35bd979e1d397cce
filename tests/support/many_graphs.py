"""Small synthetic folders of the three kinds a many-graph run takes (transductive, entity-inductive, fully
inductive), and each graph's expected row from its own single-graph evaluation, checked against the brute-force loop
over the model's own score rows (METRICS.md's ranks): shared by tests/test_many.py and tests/test_many_resume.py."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import on_graphs
from kgeval.datasets import FullyInductiveDataset, InductiveDataset, TriplesDataset, load_dataset
from kgeval.graphs import Graph
from kgeval.many import GROUPS, METRIC_COLUMNS
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


def make_folders(tmp_path: Path) -> list[Path]:
    """Two transductive, one entity-inductive and two fully inductive folders of random triples, in ``tmp_path``."""
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
