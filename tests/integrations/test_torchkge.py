"""kgeval.adapters.torchkge: TorchKGE models evaluated unchanged (skipped without torchkge).

Expected ranks: the brute-force reference over every (h, r, t) score of the model's own scoring_function, and
TorchKGE's own LinkPredictionEvaluator (#(scores >= true) = kgeval's pessimistic rank; it filters the facts of
the knowledge graph it evaluates, so kgeval filters the same triples).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

torchkge = pytest.importorskip("torchkge")

from torchkge.data_structures import KnowledgeGraph  # noqa: E402
from torchkge.evaluation import LinkPredictionEvaluator  # noqa: E402
from torchkge.models import ConvKBModel, DistMultModel, TransEModel, TransHModel  # noqa: E402

from kgeval import RankBasedEvaluator  # noqa: E402
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer  # noqa: E402
from kgeval._engine.relation_tables import RelationTableScorer  # noqa: E402
from kgeval._engine.scorer_choice import make_scorer  # noqa: E402
from kgeval._engine.triple_scoring import TripleScorer  # noqa: E402
from kgeval.adapters import scoring_view  # noqa: E402
from kgeval.adapters.torchkge import TorchKGEScoring  # noqa: E402
from kgeval.exceptions import FastPathWarning  # noqa: E402
from tests.helpers.graphs import random_graph  # noqa: E402
from tests.helpers.reference import reference_ranks  # noqa: E402
from tests.support.invariance import assert_ranks_match  # noqa: E402

E, R = 12, 3
GRAPH = random_graph(1, num_entities=E, num_relations=R, num_triples=30, num_filter=40, duplicate_fraction=0.0)
CONFIGS = {
    "TransE-L1": (lambda: TransEModel(6, E, R, dissimilarity_type="L1"), L1Scorer),
    "TransE-L2": (lambda: TransEModel(6, E, R, dissimilarity_type="L2"), GemmScorer),
    "DistMult": (lambda: DistMultModel(6, E, R), GemmScorer),
    "TransH": (lambda: TransHModel(6, E, R), RelationTableScorer),  # a per-relation candidate table
    "ConvKB": (lambda: ConvKBModel(6, 2, E, R), TripleScorer),  # no form: its scoring_function
}


def build(name: str):
    torch.manual_seed(0)
    return CONFIGS[name][0]().eval()


def table_of(model) -> torch.Tensor:
    h, r, t = torch.meshgrid(torch.arange(E), torch.arange(R), torch.arange(E), indexing="ij")
    with torch.no_grad():
        return model.scoring_function(h.reshape(-1), t.reshape(-1), r.reshape(-1)).reshape(E, R, E)


def knowledge_graph(triples: torch.Tensor) -> KnowledgeGraph:
    """TorchKGE's graph of the triples (its evaluators filter its facts)."""
    return KnowledgeGraph(
        kg={"heads": triples[:, 0], "tails": triples[:, 2], "relations": triples[:, 1]},
        ent2ix={str(i): i for i in range(E)},
        rel2ix={str(i): i for i in range(R)},
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ranks_equal_the_models_own_scoring(name: str) -> None:
    model = build(name)
    expected = reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples)
    for fast_path in (False, True):
        results = RankBasedEvaluator(fast_path=fast_path, batch_size=5, slice_size=4).evaluate(
            model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
        )
        assert_ranks_match(results, expected)
    assert isinstance(scoring_view(model), TorchKGEScoring)
    assert type(make_scorer(model, "tail", E, None)) is CONFIGS[name][1]


@pytest.mark.parametrize("name", ["TransE-L1", "TransE-L2", "DistMult"])
def test_a_subclass_redefining_its_scoring_function_keeps_it(name: str) -> None:
    base = type(build(name))

    class Negated(base):
        def scoring_function(self, h_idx, t_idx, r_idx):
            return -super().scoring_function(h_idx, t_idx, r_idx)

    model = build(name)
    model.__class__ = Negated
    with pytest.warns(FastPathWarning, match="Negated.scoring_function redefines TorchKGE's scoring"):
        results = RankBasedEvaluator().evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                                use_tqdm=False)  # fmt: skip
    with pytest.warns(FastPathWarning):
        scorer = make_scorer(model, "tail", E, None)
    assert isinstance(scorer, TripleScorer)
    assert_ranks_match(results, reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples))


@pytest.mark.parametrize("name", ["TransE-L1", "TransE-L2", "DistMult"])
def test_an_unmodified_subclass_keeps_the_fast_path(name: str) -> None:
    model = build(name)
    model.__class__ = type(f"Plain{type(model).__name__}", (type(model),), {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)
        assert type(make_scorer(model, "tail", E, None)) is CONFIGS[name][1]
        results = RankBasedEvaluator().evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                                use_tqdm=False)  # fmt: skip
    assert_ranks_match(results, reference_ranks(table_of(model), GRAPH.triples, GRAPH.filter_triples))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pessimistic_ranks_equal_torchkges_evaluator(name: str) -> None:
    model = build(name)
    triples = GRAPH.triples
    kg = knowledge_graph(triples)
    evaluator = LinkPredictionEvaluator(model, kg)
    evaluator.evaluate(b_size=7, verbose=False)
    ours = RankBasedEvaluator().evaluate(model, triples, use_tqdm=False)  # filters the evaluated triples only
    records = ours.records
    for side, theirs in ((0, evaluator.filt_rank_true_heads), (1, evaluator.filt_rank_true_tails)):
        chosen = records["side"] == side
        order = np.argsort(records["task_index"][chosen], kind="stable")
        np.testing.assert_array_equal(records["pessimistic"][chosen][order], theirs.numpy())


@pytest.mark.parametrize("name", list(CONFIGS))
def test_relation_ranks_equal_torchkges_relation_prediction_evaluator(name: str) -> None:
    """Relation prediction: TorchKGE's RelationPredictionEvaluator (directed) ranks by #(scores >= true) among all
    relations, filtering the facts of its graph -- kgeval's pessimistic filtered ranks of the same triples, and its
    raw ranks unfiltered."""
    from torchkge.evaluation import RelationPredictionEvaluator

    model = build(name)
    triples = GRAPH.triples
    kg = knowledge_graph(triples)
    evaluator = RelationPredictionEvaluator(model, kg)
    evaluator.evaluate(b_size=7, verbose=False)
    ours = RankBasedEvaluator(filtered="both").evaluate(model, triples, targets=("relation",), use_tqdm=False)
    for results, theirs in ((ours, evaluator.filt_rank_true_rels), (ours.raw, evaluator.rank_true_rels)):
        records = results.records
        order = np.argsort(records["task_index"], kind="stable")
        np.testing.assert_array_equal(records["pessimistic"][order], theirs.numpy())
