"""kgeval.adapters.pyg: PyTorch Geometric's KGE models evaluated unchanged (skipped without torch_geometric).

Expected ranks come from the brute-force reference over a table of every (h, r, t) score computed by the model's
own forward; PyG's KGEModel.test() is compared where its definitions coincide (tail side, raw, no ties).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

kge = pytest.importorskip("torch_geometric.nn.kge")

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer  # noqa: E402
from kgeval._engine.scorer_choice import make_scorer  # noqa: E402
from kgeval._engine.triple_scoring import TripleScorer  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.pyg import PyGScoring  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from tests.helpers.graphs import random_graph  # noqa: E402
from tests.helpers.reference import reference_ranks  # noqa: E402
from tests.support.invariance import assert_ranks_match  # noqa: E402

E, R = 12, 3
CONFIGS = {
    "DistMult": (kge.DistMult, {}, "dot"),
    "ComplEx": (kge.ComplEx, {}, "dot"),
    "TransE-L1": (kge.TransE, {"p_norm": 1.0}, "l1"),
    "TransE-L2": (kge.TransE, {"p_norm": 2.0}, "l2"),
    "RotatE": (kge.RotatE, {}, "l2"),
}
GRAPH = random_graph(0, num_entities=E, num_relations=R, num_triples=30, num_filter=40)


def build(name: str, integer: bool = False):
    cls, kwargs, _ = CONFIGS[name]
    torch.manual_seed(0)
    model = cls(E, R, 6, **kwargs)
    if integer:
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.randint(-2, 3, parameter.shape).float())
    return model


def table_of(model) -> torch.Tensor:
    """Every (h, r, t) score by the model's own forward: the brute-force reference's input."""
    h, r, t = torch.meshgrid(torch.arange(E), torch.arange(R), torch.arange(E), indexing="ij")
    with torch.no_grad():
        return model(h.reshape(-1), r.reshape(-1), t.reshape(-1)).reshape(E, R, E)


def evaluate(model, **options):
    evaluator_options = {key: options.pop(key) for key in ("fast_path", "batch_size", "slice_size", "filtered")
                         if key in options}  # fmt: skip
    return RankBasedEvaluator(**evaluator_options).evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False, **options
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ranks_equal_the_models_own_scoring(name: str) -> None:
    model = build(name)
    expected = reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples)
    assert_ranks_match(evaluate(model, fast_path=False, batch_size=5, slice_size=4), expected)
    assert_ranks_match(evaluate(model), expected)  # fast path: no near-ties in this random model


@pytest.mark.parametrize("name", ["DistMult", "ComplEx"])
def test_integer_embeddings_keep_every_tie_on_the_fast_path(name: str) -> None:
    model = build(name, integer=True)
    expected = reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples)
    results = evaluate(model)
    assert (results.records["pessimistic"] > results.records["optimistic"]).any()
    assert_ranks_match(results, expected)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_fast_path_is_recognised(name: str) -> None:
    model = build(name)
    view = scoring_view(model)
    assert isinstance(view, PyGScoring) and view.num_entities == E and view.num_relations == R
    scorer = make_scorer(model, "tail", E, None)
    assert type(scorer) is {"l1": L1Scorer}.get(CONFIGS[name][2], GemmScorer)
    assert isinstance(make_scorer(model, "head", E, None, fast_path=False), TripleScorer)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_subclass_redefining_forward_keeps_it(name: str) -> None:
    cls = CONFIGS[name][0]

    class Shifted(cls):
        def forward(self, head_index, rel_type, tail_index):
            return -super().forward(head_index, rel_type, tail_index) + 0.1 * tail_index

    torch.manual_seed(0)
    model = Shifted(E, R, 6, **CONFIGS[name][1])
    with pytest.warns(FastPathWarning, match=rf"Shifted.forward redefines PyG's {cls.__name__} scoring"):
        results = evaluate(model)
    with pytest.warns(FastPathWarning):
        scorer = make_scorer(model, "tail", E, None)
    assert isinstance(scorer, TripleScorer)
    assert_ranks_match(results, reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_an_unmodified_subclass_keeps_the_fast_path(name: str) -> None:
    cls = CONFIGS[name][0]
    plain = type(f"Plain{cls.__name__}", (cls,), {"describe": lambda self: "mine"})
    torch.manual_seed(0)
    model = plain(E, R, 6, **CONFIGS[name][1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert isinstance(make_scorer(model, "tail", E, None), GemmScorer | L1Scorer)
        results = evaluate(model)
    assert_ranks_match(results, reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_agrees_with_pygs_own_test_routine(name: str) -> None:
    """KGEModel.test ranks tails, raw, by argsort position (0-based; ties in arbitrary order, none here):
    its MRR and hits@10 are kgeval's raw tail optimistic ones and its mean rank is kgeval's minus 1."""
    model = build(name)
    h, r, t = GRAPH.triples.unbind(dim=1)
    with torch.no_grad():
        mean_rank, mrr, hits = model.test(h, r, t, batch_size=7, k=10, log=False)
    ours = evaluate(model, filtered=False, targets=("tail",))
    assert (ours.records["pessimistic"] == ours.records["optimistic"]).all()
    assert ours["tail.optimistic.mrr"] == pytest.approx(mrr, rel=1e-6)
    assert ours["tail.optimistic.mr"] - 1 == pytest.approx(mean_rank, rel=1e-6)
    assert ours["tail.optimistic.hits@10"] == pytest.approx(hits)
    assert np.isfinite(ours["tail.mrr"])
