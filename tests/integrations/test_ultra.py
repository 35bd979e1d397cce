"""kgeval.adapters.ultra: a ULTRA model (Galkin et al., ICLR 2024) as a graph-conditioned model.

ULTRA itself is no dependency: the ranks are checked with a ULTRA-shaped stand-in written here (ULTRA's
``forward(data, batch)`` contract: a (B, K, 3) batch of (head, tail, relation) candidates, one query per row, a row
whose heads differ turned into tail prediction with the inverse relation as ULTRA's model turns it; integer scores,
heavy ties) against a brute-force loop over the stand-in's per-query scores counted from the graph's triples in
Python. Building ULTRA's graph needs torch_geometric (those tests skip without it); the refusals run everywhere.
With ``KGEVAL_ULTRA_CHECKOUT`` naming a ULTRA checkout, a small randomly initialised ``ultra.models.Ultra`` is also
ranked by kgeval and by ULTRA's own ``tasks.all_negative`` / ``compute_ranking``, task for task.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import on_graphs
from kgeval.adapters.ultra import UltraAdapter
from kgeval.graphs import Graph
from tests.helpers.loop_ranks import loop_ranks
from tests.helpers.ranks import assert_same_ranks
from tests.support.fully_inductive import random_fully_inductive

ROOT = Path(__file__).resolve().parents[2]


class TinyUltra(torch.nn.Module):
    """ULTRA-shaped: ``relation_model`` / ``entity_model`` submodules, ``forward(data, batch)`` -> (B, K). A row is
    one query: its candidates share the head (tail prediction) or, else, the tail (head prediction, answered as
    ULTRA's model answers it: heads and tails swapped, relation r + R). The score of ``(h, r, e)`` is 2 x the edges
    (h, r, e) of ``data`` plus the edges of relation r into e; the relation graph must be there."""

    def __init__(self) -> None:
        super().__init__()
        self.relation_model = torch.nn.Identity()
        self.entity_model = torch.nn.Linear(1, 1)  # a parameter: the adapter's device
        self.data_seen: list[Any] = []

    def forward(self, data: Any, batch: torch.Tensor) -> torch.Tensor:
        self.data_seen.append(data)
        assert data.relation_graph.num_nodes == data.num_relations
        heads, tails, relations = batch.unbind(-1)
        tail_rows = (heads == heads[:, [0]]).all(dim=-1, keepdim=True)
        heads, tails = torch.where(tail_rows, heads, tails), torch.where(tail_rows, tails, heads)
        relations = torch.where(tail_rows, relations, relations + data.num_relations // 2)
        counts = torch.zeros(data.num_relations, data.num_nodes, data.num_nodes)
        counts.index_put_((data.edge_type, data.edge_index[0], data.edge_index[1]), torch.ones(len(data.edge_type)),
                          accumulate=True)  # fmt: skip
        return 2 * counts[relations, heads, tails] + counts.sum(1)[relations, tails]


def count_relation_graph(data: Any) -> Any:
    """A stand-in for ULTRA's build_relation_graph: a relation graph with one node per relation (no edges)."""
    from torch_geometric.data import Data

    data.relation_graph = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=data.num_relations)
    return data


def brute_force_row(graph: Graph, query: tuple[int, int], side: str) -> np.ndarray:
    """The stand-in's scores of one query, counted in Python from the graph's triples and their inverses: a head
    query (r, t) is the tail query (t, r + R)."""
    relations = graph.num_relations
    edges = [*map(tuple, graph.triples.tolist()), *((t, r + relations, h) for h, r, t in graph.triples.tolist())]
    head, relation = query if side == "tail" else (query[1], query[0] + relations)
    scores = np.zeros(graph.num_nodes)
    for h, r, t in edges:
        if r == relation:
            scores[t] += 1 + 2 * (h == head)
    return scores


def test_ranks_equal_the_brute_force_loop_through_on_graphs() -> None:
    pytest.importorskip("torch_geometric")
    data = random_fully_inductive(seed=5)
    model = TinyUltra()
    kwargs = data.evaluation_kwargs("test")
    adapter = UltraAdapter(model, build_relation_graph=count_relation_graph)
    bound = on_graphs(adapter, data)
    results = RankBasedEvaluator(batch_size=4).evaluate(bound, **kwargs, use_tqdm=False)
    graph = data.graph("testing")
    expected = loop_ranks(lambda query, side: brute_force_row(graph, query, side), kwargs["mapped_triples"],
                          kwargs["additional_filter_triples"])  # fmt: skip
    assert_same_ranks(results.records, expected)
    optimistic = np.concatenate([expected[side]["optimistic"] for side in ("head", "tail")])
    pessimistic = np.concatenate([expected[side]["pessimistic"] for side in ("head", "tail")])
    assert (pessimistic - optimistic).max() >= 3  # heavy ties really occur
    for rank_type, ranks in (("optimistic", optimistic), ("pessimistic", pessimistic),
                             ("realistic", (optimistic + pessimistic) / 2)):  # fmt: skip
        assert results[f"both.{rank_type}.mrr"] == pytest.approx(float(np.mean(1 / ranks)))
    # the graph ULTRA reasons over: every edge then its inverse, renumbered, built once and kept
    assert len({id(seen) for seen in model.data_seen}) == 1
    seen = model.data_seen[0]
    built, node_id, relation_id = adapter.data(bound.graph("testing"))
    assert built is seen
    heads, tails = node_id[graph.triples[:, 0]], node_id[graph.triples[:, 2]]
    relations = relation_id[graph.triples[:, 1]]
    assert torch.equal(seen.edge_index, torch.stack([torch.cat([heads, tails]), torch.cat([tails, heads])]))
    assert torch.equal(seen.edge_type, torch.cat([relations, relations + graph.num_relations]))
    assert (seen.num_nodes, seen.num_relations) == (graph.num_nodes, 2 * graph.num_relations)


def test_the_graph_is_renumbered_by_first_appearance_as_ultras_loaders_number_it() -> None:
    pytest.importorskip("torch_geometric")
    triples = torch.tensor([[5, 2, 3], [3, 0, 5], [1, 2, 0]])
    graph = Graph(triples, num_nodes=7, num_relations=3).with_inverse_edges()
    adapter = UltraAdapter(TinyUltra(), build_relation_graph=count_relation_graph)
    data, node_id, relation_id = adapter.data(graph)
    # first appearance, head then tail, row by row: 5, 3, 1, 0; then the nodes without an edge: 2, 4, 6
    assert node_id.tolist() == [3, 2, 4, 1, 5, 0, 6]
    assert relation_id.tolist() == [1, 2, 0]  # relations 2, 0, then 1 (no edge)
    assert data.edge_index.tolist() == [[0, 1, 2, 1, 0, 3], [1, 0, 3, 0, 1, 2]]
    assert data.edge_type.tolist() == [0, 1, 0, 3, 4, 3]


def test_head_and_tail_batches_are_ultras_all_negative_layout() -> None:
    """score_t's batch row b is (h_b, e, r_b) for every node e, score_h's (e, t_b, r_b), in the renumbered ids: as
    ULTRA's t_batch and h_batch (tasks.all_negative), recorded from the model's calls."""
    pytest.importorskip("torch_geometric")
    graph = random_fully_inductive(seed=2).graph("testing").with_inverse_edges()
    batches: list[torch.Tensor] = []

    class Recording(TinyUltra):
        def forward(self, data: Any, batch: torch.Tensor) -> torch.Tensor:
            batches.append(batch)
            return super().forward(data, batch)

    adapter = UltraAdapter(Recording(), build_relation_graph=count_relation_graph)
    adapter.score_t(torch.tensor([[3, 1], [0, 2]]), graph=graph)
    adapter.score_h(torch.tensor([[1, 4]]), graph=graph)
    _, node_id, relation_id = adapter.data(graph)
    nodes = torch.arange(graph.num_nodes)

    def rows(head: Any, tail: Any, relation: int) -> torch.Tensor:
        return torch.stack(torch.broadcast_tensors(torch.as_tensor(head), torch.as_tensor(tail),
                                                   torch.as_tensor(int(relation_id[relation]))), dim=1)  # fmt: skip

    expected_t = torch.stack([rows(node_id[3], nodes, 1), rows(node_id[0], nodes, 2)])
    expected_h = rows(nodes, node_id[4], 1)[None]
    assert torch.equal(batches[0], expected_t)
    assert torch.equal(batches[1], expected_h)


def test_refusals() -> None:
    with pytest.raises(TypeError, match="takes a ULTRA model"):
        UltraAdapter(torch.nn.Linear(2, 2))
    graph = random_fully_inductive(seed=1).graph("testing")
    adapter = UltraAdapter(TinyUltra(), build_relation_graph=lambda data: data)
    with pytest.raises(ValueError, match="needs the graph with its inverse edges"):
        adapter.score_t(torch.tensor([[0, 0]]), graph=graph)  # without inverse edges


def test_torch_geometric_missing_is_one_line_naming_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    graph = random_fully_inductive(seed=1).graph("testing").with_inverse_edges()
    adapter = UltraAdapter(TinyUltra(), build_relation_graph=lambda data: data)
    with pytest.raises(ImportError, match=r"needs torch_geometric .*pip install torch_geometric") as error:
        adapter.score_t(torch.tensor([[0, 0]]), graph=graph)
    assert "\n" not in str(error.value)


def test_build_relation_graph_comes_from_the_models_package(tmp_path, monkeypatch) -> None:
    package = tmp_path / "fakeultra"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(
        "import torch\n\nclass Ultra(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.relation_model = torch.nn.Identity()\n        self.entity_model = torch.nn.Identity()\n"
    )
    (package / "tasks.py").write_text("def build_relation_graph(graph):\n    return graph\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fakeultra.models
    import fakeultra.tasks

    assert UltraAdapter(fakeultra.models.Ultra()).relation_graph_builder() is fakeultra.tasks.build_relation_graph
    with pytest.raises(ImportError, match="found no tests.integrations.tasks module"):
        UltraAdapter(TinyUltra()).relation_graph_builder()  # TinyUltra's package (tests) has no tasks module


def test_the_benchmark_without_a_checkout_prints_how_to_run_it() -> None:
    environment = {key: value for key, value in os.environ.items() if key != "KGEVAL_ULTRA_CHECKOUT"}
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ultra.py")], capture_output=True, text=True,
                          env=environment, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "KGEVAL_ULTRA_CHECKOUT is not set" in done.stdout


@pytest.fixture
def ultra_checkout() -> Path:
    checkout = os.environ.get("KGEVAL_ULTRA_CHECKOUT")
    if not checkout:
        pytest.skip("KGEVAL_ULTRA_CHECKOUT names no ULTRA checkout")
    pytest.importorskip("torch_geometric")
    try:
        import torch_scatter  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(ROOT / "benchmarks" / "_torch_scatter_standin"))
    sys.path.insert(0, checkout)
    return Path(checkout)


def test_a_real_ultra_model_ranks_as_ultras_own_ranking(ultra_checkout) -> None:
    """A small randomly initialised ultra.models.Ultra: kgeval's pessimistic ranks equal ULTRA's compute_ranking
    over its all_negative batches and strict_negative_mask filter, task for task."""
    import types

    from torch_geometric.data import Data
    from torch_geometric.nn.conv import MessagePassing
    from ultra import layers, models, tasks

    torch.manual_seed(0)
    config = {"input_dim": 8, "hidden_dims": [8, 8], "message_func": "distmult", "aggregate_func": "sum",
              "short_cut": True, "layer_norm": True}  # fmt: skip
    model = models.Ultra(rel_model_cfg={"class": "RelNBFNet", **config},
                         entity_model_cfg={"class": "EntityNBFNet", **config}).eval()  # fmt: skip
    for module in model.modules():
        if isinstance(module, layers.GeneralizedRelationalConv):  # no rspmm extension on the CPU
            module.propagate = types.MethodType(MessagePassing.propagate, module)
            module.flow = "target_to_source"  # the extension's direction (docs/inductive.md, "ULTRA")
    data = random_fully_inductive(seed=7)
    kwargs = data.evaluation_kwargs("test")
    results = RankBasedEvaluator(batch_size=5).evaluate(on_graphs(UltraAdapter(model), data), **kwargs,
                                                        use_tqdm=False)  # fmt: skip
    graph = data.graph("testing").with_inverse_edges()
    plain = Data(edge_index=graph.edge_index, edge_type=graph.edge_type, num_nodes=graph.num_nodes,
                 num_relations=graph.num_relations)  # fmt: skip
    ultra_data = tasks.build_relation_graph(plain)
    known = torch.cat([data.inference, data.valid, data.test])
    filtered = Data(edge_index=known[:, [0, 2]].T, edge_type=known[:, 1], num_nodes=graph.num_nodes)
    batch = data.test[:, [0, 2, 1]]
    with torch.no_grad():
        t_batch, h_batch = tasks.all_negative(ultra_data, batch)
        t_mask, h_mask = tasks.strict_negative_mask(filtered, batch)
        expected = {"tail": tasks.compute_ranking(model(ultra_data, t_batch), batch[:, 1], t_mask).numpy(),
                    "head": tasks.compute_ranking(model(ultra_data, h_batch), batch[:, 0], h_mask).numpy()}  # fmt: skip
    records = results.records
    for side, code in (("head", 0), ("tail", 1)):
        mine = records.side == code
        order = np.argsort(records.task_index[mine], kind="stable")
        np.testing.assert_array_equal(records.pessimistic[mine][order], expected[side], err_msg=side)
