"""Graph-conditioned models (kgeval.adapters.graph): kgeval hands the model the mode's graph (inverse edges where the
model asks for them) and ranks its rows task for task as a brute-force loop over the model's own per-query scores
does -- on random fully inductive graphs with heavy ties, at several batch / slice sizes, and on shared inductive
sets with the built-in NeighbourhoodBaseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import GraphConditionedModel, graphs_of, on_graphs
from kgeval.datasets import load_inductive_dataset, shared_data_dir
from kgeval.datasets.fully_inductive import load_fully_inductive_folder
from kgeval.graphs import Graph
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.helpers.loop_ranks import loop_ranks
from tests.helpers.ranks import assert_same_ranks
from tests.support.fully_inductive import random_fully_inductive


class InverseEdgeCounter(torch.nn.Module):
    """Integer scores from the graph's edges, inverse ones included (heavy ties): a tail candidate e of (h, r)
    scores the inverse edges (e, r + R, ·) -- e's count as a tail of r -- plus 2 for each edge from h to e;
    a head candidate e of (r, t) its edges (e, r, ·) plus 2 for each edge from e to t."""

    kgeval_inverse_edges = True

    def __init__(self) -> None:
        super().__init__()
        self.graphs_seen: list[Graph] = []

    def _counts(self, graph: Graph) -> tuple[torch.Tensor, torch.Tensor, int]:
        self.graphs_seen.append(graph)
        relations = graph.num_relations // 2
        by_relation = torch.zeros(graph.num_relations, graph.num_nodes)
        by_relation.index_put_((graph.edge_type, graph.edge_index[0]), torch.ones(len(graph.edge_type)),
                               accumulate=True)  # fmt: skip
        between = torch.zeros(graph.num_nodes, graph.num_nodes)
        forward = graph.edge_type < relations
        between.index_put_((graph.edge_index[0, forward], graph.edge_index[1, forward]),
                           torch.ones(int(forward.sum())), accumulate=True)  # fmt: skip
        return by_relation, between, relations

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        by_relation, between, relations = self._counts(graph)
        return by_relation[hr_batch[:, 1] + relations] + 2 * between[hr_batch[:, 0]]

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        by_relation, between, _ = self._counts(graph)
        return by_relation[rt_batch[:, 0]] + 2 * between[:, rt_batch[:, 1]].T


def loop_reference(model: Any, graph: Graph, kwargs: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """Each task scored alone by the model's own method, given the graph as it asks for it."""
    handed = graph.with_inverse_edges() if getattr(model, "kgeval_inverse_edges", False) else graph

    def row(query: tuple[int, int], side: str) -> np.ndarray:
        method = model.score_t if side == "tail" else model.score_h
        return method(torch.tensor([query]), graph=handed)[0].numpy()

    return loop_ranks(row, kwargs["mapped_triples"], kwargs["additional_filter_triples"])


def baseline_with_sparse_products() -> NeighbourhoodBaseline:
    """The baseline counting every batch of two or more queries by sparse-sparse products (the loop's single
    queries by sparse-dense ones): both ways must give the same scores."""
    model = NeighbourhoodBaseline()
    model.sparse_products_from = 2
    return model


@pytest.mark.parametrize("model_class", [InverseEdgeCounter, NeighbourhoodBaseline, baseline_with_sparse_products])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (1, 3), (7, 11)])
@pytest.mark.parametrize(("split", "validation_filter"), [("valid", "inference+test"), ("test", "inference")])
def test_ranks_equal_the_loop_over_the_models_rows(model_class, batch_size, slice_size, split,
                                                   validation_filter) -> None:  # fmt: skip
    data = random_fully_inductive(seed=11)
    model = model_class()
    kwargs = data.evaluation_kwargs(split, validation_filter=validation_filter)
    results = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size).evaluate(
        on_graphs(model, data), **kwargs, use_tqdm=False)  # fmt: skip
    expected = loop_reference(model, data.graph(kwargs["mode"]), kwargs)
    assert_same_ranks(results.records, expected)
    ties = np.concatenate([expected[side]["pessimistic"] - expected[side]["optimistic"] for side in expected])
    assert ties.max() >= 3  # heavy ties really occur


def test_the_model_is_handed_the_modes_graph() -> None:
    data = random_fully_inductive(seed=3)
    model = InverseEdgeCounter()
    RankBasedEvaluator().evaluate(on_graphs(model, data), **data.evaluation_kwargs("test"), use_tqdm=False)
    expected = data.graph("testing")
    assert model.graphs_seen
    for graph in model.graphs_seen:
        assert graph.num_nodes == data.num_inference_entities
        assert graph.num_relations == 2 * data.num_inference_relations
        assert torch.equal(graph.triples[: len(data.inference)], data.inference)
        assert torch.equal(
            graph.triples[len(data.inference) :],
            data.inference[:, [2, 1, 0]] + torch.tensor([0, data.num_inference_relations, 0]),
        )
        assert graph.relation_labels is not None and graph.relation_labels[: expected.num_relations] == \
            expected.relation_labels  # fmt: skip
    plain = on_graphs(model, data, inverse_edges=False)
    assert plain.graph("validation") is expected or torch.equal(plain.graph("validation").triples, data.inference)
    assert isinstance(model, GraphConditionedModel)


def test_misuse_is_refused() -> None:
    data = random_fully_inductive(seed=3)
    with pytest.raises(TypeError, match="is no graph-conditioned model"):
        on_graphs(torch.nn.Linear(2, 2), data)
    with pytest.raises(ValueError, match="graph modes must be among"):
        on_graphs(NeighbourhoodBaseline(), {"inference": data.graph("testing")})
    with pytest.raises(TypeError, match="graphs_of takes an inductive dataset"):
        graphs_of(object())
    only_training = on_graphs(NeighbourhoodBaseline(), {"training": data.graph("training")})
    with pytest.raises(ValueError, match="no graph for mode 'testing'"):
        RankBasedEvaluator().evaluate(only_training, **data.evaluation_kwargs("test"), use_tqdm=False)

    class Wrong(NeighbourhoodBaseline):
        def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
            return super().score_t(hr_batch, graph=graph)[:, :-1]

    with pytest.raises(ValueError, match="must return a"):
        RankBasedEvaluator().evaluate(on_graphs(Wrong(), data), **data.evaluation_kwargs("test"), use_tqdm=False)


def shared(name: str) -> Any:
    root = shared_data_dir()
    if root is None or not (root / name).is_dir():
        pytest.skip(f"needs the shared {name} data")
    if name.startswith("InGram"):
        return load_fully_inductive_folder(root / name)
    return load_inductive_dataset(root / name)


@pytest.mark.parametrize("name", ["InGram-NL-25", "InGram-WK-25", "ILPC2022-small"])
def test_the_baseline_on_a_shared_set_equals_the_loop(name: str) -> None:
    data = shared(name)
    model = NeighbourhoodBaseline()
    kwargs = data.evaluation_kwargs("test")
    rows = torch.arange(0, len(data.test), 12)  # every 12th test triple; the others stay in the filter
    kwargs["additional_filter_triples"] = [*kwargs["additional_filter_triples"], data.test]
    kwargs["mapped_triples"] = data.test[rows]
    results = RankBasedEvaluator().evaluate(on_graphs(model, data), **kwargs, use_tqdm=False)
    expected = loop_reference(model, graphs_of(data)["testing"], kwargs)
    assert_same_ranks(results.records, expected)


def test_the_example_script_reads_a_folder_and_prints_a_row_per_split(tmp_path, capsys) -> None:
    import runpy

    folder = tmp_path / "tiny"
    folder.mkdir()
    files = {"train": [("a", "r", "b"), ("b", "r", "c")], "msg": [("x", "r", "y"), ("y", "s", "z"), ("z", "s", "x")],
             "valid": [("x", "s", "z")], "test": [("y", "r", "z")]}  # fmt: skip
    for file, rows in files.items():
        (folder / f"{file}.txt").write_text("".join("\t".join(row) + "\n" for row in rows))
    example = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "graph_baseline.py"))
    rows = example["main"]([str(folder)])
    assert [(row["dataset"], row["split"], row["tasks"]) for row in rows] == [("tiny", "valid", 2), ("tiny", "test", 2)]
    assert len(capsys.readouterr().out.splitlines()) == 3
