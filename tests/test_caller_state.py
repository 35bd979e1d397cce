"""What an evaluation leaves of its caller's state, and what it tells about a model whose scores depend on its
history (issue 58):

- the caller's random number generators are given back as they were, also when the model draws random numbers
  while it is scored (before: the caller's stream advanced by the evaluation's draws, so a seeded training run
  depended on whether and how often it was evaluated);
- ``evaluate_many`` warns when a graph-conditioned model serves a graph from a cache of another graph (before: the
  second graph's numbers were the first graph's features', without a word), and when a model scores a graph
  otherwise after the next graph was evaluated.
"""

from __future__ import annotations

import random
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, predict_top_k
from kgeval.datasets import load_shipped_dataset
from kgeval.exceptions import ModelChangedWarning
from kgeval.graphs import Graph
from kgeval.many import evaluate_many
from kgeval.models import DistMult
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.support.many_graphs import random_rows, write


@pytest.fixture(scope="module")
def umls():
    return load_shipped_dataset("umls")


class Noisy(DistMult):
    """A DistMult that adds noise in eval mode (it draws from torch's, Python's and numpy's global generators)."""

    def score_t(self, hr_batch: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        random.random()
        np.random.random()  # noqa: NPY002 -- the legacy global generator is the point
        scores = super().score_t(hr_batch, **kwargs)
        return scores + 1e-3 * torch.randn_like(scores)


def states() -> tuple[torch.Tensor, Any, Any]:
    return torch.get_rng_state(), random.getstate(), np.random.get_state()  # noqa: NPY002


def same(a: tuple[torch.Tensor, Any, Any], b: tuple[torch.Tensor, Any, Any]) -> bool:
    numpy_same = a[2][0] == b[2][0] and np.array_equal(a[2][1], b[2][1]) and a[2][2:] == b[2][2:]
    return torch.equal(a[0], b[0]) and a[1] == b[1] and numpy_same


@pytest.mark.parametrize("call", ["evaluate", "evaluate with a progress file", "predict_top_k", "score_signature"])
def test_the_callers_random_generators_are_given_back(umls, tmp_path: Path, call: str) -> None:
    model = Noisy(umls.num_entities, umls.num_relations, dim=8, seed=0)
    torch.manual_seed(5)
    random.seed(5)
    np.random.seed(5)  # noqa: NPY002
    before = states()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the noise is warned about (ScoreStabilityWarning): not this test's point
        if call == "evaluate":
            RankBasedEvaluator().evaluate(model, umls.test[:50], use_tqdm=False)
        elif call == "evaluate with a progress file":
            RankBasedEvaluator().evaluate(model, umls.test[:50], use_tqdm=False, progress_path=tmp_path / "p")
        elif call == "predict_top_k":
            predict_top_k(model, umls.test[:5, :2], k=3)
        else:
            RankBasedEvaluator().score_signature(model, umls.test[:50])
    assert same(before, states())


class WaitsForADraw(DistMult):
    """A deterministic DistMult whose first ``score_t`` call lets another thread draw from torch's generator (and
    waits until it has)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started, self.drawn = threading.Event(), threading.Event()

    def score_t(self, hr_batch: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.started.set()
        self.drawn.wait(10)
        return super().score_t(hr_batch, **kwargs)


def test_another_threads_draws_during_the_evaluation_of_a_deterministic_model_are_kept(umls) -> None:
    """The generators are process-wide: giving them back after every evaluation would undo the draws of a thread
    training beside it (its dropout masks repeated). A model that draws nothing leaves them alone: the other
    thread's 100 draws stay drawn."""
    model = WaitsForADraw(umls.num_entities, umls.num_relations, dim=8, seed=0)
    torch.manual_seed(3)
    torch.rand(100)
    expected = torch.get_rng_state()
    torch.manual_seed(3)

    def trainer() -> None:
        model.started.wait(10)
        torch.rand(100)
        model.drawn.set()

    thread = threading.Thread(target=trainer)
    thread.start()
    RankBasedEvaluator().evaluate(model, umls.test[:50], use_tqdm=False)
    thread.join()
    assert torch.equal(torch.get_rng_state(), expected)


class CachesItsFirstGraph(NeighbourhoodBaseline):
    """A graph-conditioned model that keeps the first graph it is handed for every later call with as many entities
    (a cache of node features keyed by the graph's size)."""

    def __init__(self) -> None:
        super().__init__()
        self.cached: dict[int, Graph] = {}

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        return super().score_t(hr_batch, graph=self.cached.setdefault(graph.num_nodes, graph))

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        return super().score_h(rt_batch, graph=self.cached.setdefault(graph.num_nodes, graph))


def two_graphs_of_one_size(folder: Path) -> list[Path]:
    """Two transductive folders over the same 30 entities and 4 relations, with other training triples."""
    entities, relations = [f"e{i}" for i in range(30)], [f"r{i}" for i in range(4)]
    folders = []
    for number in range(2):
        rng = random.Random(number)
        rows = random_rows(rng, entities, relations, 150)
        rng.shuffle(rows)
        folders.append(write(folder / f"graph{number}", {"train": rows[:110], "valid": rows[110:130],
                                                         "test": rows[130:]}))  # fmt: skip
    return folders


def test_evaluate_many_warns_when_a_model_serves_a_graph_from_another_graphs_cache(tmp_path: Path) -> None:
    folders = two_graphs_of_one_size(tmp_path)
    alone = evaluate_many(NeighbourhoodBaseline(), folders[1:], use_tqdm=False)
    with pytest.warns(ModelChangedWarning, match=r"scores graph1's probe queries the same whether it is handed"):
        run = evaluate_many(CachesItsFirstGraph(), folders, use_tqdm=False)
    assert run.table["mrr_realistic"][1] != alone.table["mrr_realistic"][0]  # what the warning is about
    with warnings.catch_warnings():  # a model that reads the graph it is handed: no warning
        warnings.simplefilter("error", ModelChangedWarning)
        honest = evaluate_many(NeighbourhoodBaseline(), folders, use_tqdm=False)
    assert honest.table["mrr_realistic"][1] == alone.table["mrr_realistic"][0]


class FollowsTheLastGraph(NeighbourhoodBaseline):
    """A model whose scores of any graph move a little with every graph it is handed (a running average kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        self.seen += hr_batch.shape[0]
        return super().score_t(hr_batch, graph=graph) + 1e-2 * self.seen

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        return super().score_h(rt_batch, graph=graph)


def test_evaluate_many_warns_when_a_graph_scores_otherwise_after_the_next_was_evaluated(tmp_path: Path) -> None:
    folders = two_graphs_of_one_size(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate_many(FollowsTheLastGraph(), folders, use_tqdm=False)
    moved = [w for w in caught if issubclass(w.category, ModelChangedWarning) and "otherwise after" in str(w.message)]
    assert moved and "the model scores graph0 otherwise after graph1 was evaluated" in str(moved[0].message)


def test_two_datasets_over_one_training_graph_are_not_called_a_cache(tmp_path: Path) -> None:
    """The same training graph under two names (other test splits): a model that scores them the same is not serving
    a cache -- no warning."""
    first = two_graphs_of_one_size(tmp_path)[0]
    second = tmp_path / "graph0-again"
    second.mkdir()
    for name in ("train", "valid", "test"):
        lines = (first / f"{name}.txt").read_text(encoding="utf-8").splitlines(keepends=True)
        (second / f"{name}.txt").write_text("".join(lines if name != "test" else lines[::-1]), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        evaluate_many(CachesItsFirstGraph(), [first, second], use_tqdm=False)
