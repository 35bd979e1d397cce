"""Undirected relation prediction (kgeval.variants.undirected) and top-k relation predictions (predict_top_k with
target="relation"): against brute force over the model's own score_r, and against TorchKGE's
RelationPredictionEvaluator(directed=False) on its own models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgeval import predict_top_k
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult, TransE
from kgeval.variants.undirected import evaluate_undirected_relations


def brute_ranks(model, triples, known, num_relations, convention):
    """(optimistic, pessimistic) per triple: 2R candidates scored by score_r both ways, known ones removed."""
    known_set = {tuple(t) for t in torch.cat([triples, known]).tolist()}
    with torch.no_grad():
        forward = model.score_r(triples[:, [0, 2]])
        backward = model.score_r(triples[:, [2, 0]])
    ranks = []
    for i, (h, r, t) in enumerate(triples.tolist()):
        true = forward[i, r].item()
        optimistic, pessimistic = 1, 1
        for direction, row in ((0, forward[i]), (1, backward[i])):
            for other in range(num_relations):
                if direction == 0 and other == r:
                    continue
                candidate = (h, other, t) if direction == 0 else (t, other, h)
                if convention == "torchkge" and direction == 1:
                    candidate = (h, other, t) if other != r else None  # TorchKGE spares the true relation's
                if candidate in known_set:
                    continue
                optimistic += row[other].item() > true
                pessimistic += row[other].item() >= true
        ranks.append((optimistic, pessimistic))
    return np.array(ranks)


@pytest.mark.parametrize("convention", ["kgeval", "torchkge"])
@pytest.mark.parametrize("model_class", [DistMult, TransE])
def test_ranks_equal_brute_force(convention, model_class):
    data = load_shipped_dataset("nations")
    model = model_class(data.num_entities, data.num_relations, dim=6, seed=1)
    triples = data.test[:60]
    results = evaluate_undirected_relations(model, triples, additional_filter_triples=[data.train, data.valid],
                                            convention=convention, use_tqdm=False)  # fmt: skip
    expected = brute_ranks(model, triples, torch.cat([data.train, data.valid]), data.num_relations, convention)
    records = results.records
    order = np.argsort(records["task_index"], kind="stable")
    assert np.array_equal(records["optimistic"][order], expected[:, 0])
    assert np.array_equal(records["pessimistic"][order], expected[:, 1])
    # DistMult scores (h, r, t) and (t, r, h) alike: its reversed candidates tie with the forward ones
    if model_class is DistMult and convention == "kgeval":
        assert (records["pessimistic"] > records["optimistic"]).any()


def test_torchkges_own_undirected_evaluator():
    torchkge = pytest.importorskip("torchkge")
    from torchkge.data_structures import KnowledgeGraph
    from torchkge.evaluation import RelationPredictionEvaluator
    from torchkge.models import TransEModel

    data = load_shipped_dataset("nations")
    torch.manual_seed(0)
    model = TransEModel(8, data.num_entities, data.num_relations, dissimilarity_type="L2").eval()
    triples = data.test
    kg = KnowledgeGraph(kg={"heads": triples[:, 0], "tails": triples[:, 2], "relations": triples[:, 1]},
                        ent2ix={str(i): i for i in range(data.num_entities)},
                        rel2ix={str(i): i for i in range(data.num_relations)})  # fmt: skip
    theirs = RelationPredictionEvaluator(model, kg, directed=False)
    theirs.evaluate(b_size=32, verbose=False)
    ours = evaluate_undirected_relations(model, triples, convention="torchkge", num_entities=data.num_entities,
                                         num_relations=data.num_relations, use_tqdm=False)  # fmt: skip
    order = np.argsort(ours.records["task_index"], kind="stable")
    assert np.array_equal(ours.records["pessimistic"][order], theirs.filt_rank_true_rels.numpy())
    del torchkge


def test_top_k_relations_are_the_filtered_best_of_score_r():
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=0)
    pairs = data.test[:40][:, [0, 2]]
    ids, scores = predict_top_k(model, pairs, k=5, target="relation", filter_triples=data.train)
    known = {tuple(t) for t in data.train.tolist()}
    with torch.no_grad():
        full = model.score_r(pairs)
    for row, (h, t) in enumerate(pairs.tolist()):
        allowed = [r for r in range(data.num_relations) if (h, r, t) not in known]
        best = sorted(allowed, key=lambda r: (-full[row, r].item(), r))[:5]
        assert ids[row].tolist() == best
        assert torch.equal(scores[row], full[row, best])
    with pytest.raises(ValueError, match="candidates are the relations"):
        predict_top_k(model, pairs, target="relation", restrict_entities_to=[0, 1])
    with pytest.raises(ValueError, match="out of range"):
        predict_top_k(model, torch.tensor([[0, data.num_entities]]), target="relation")


def test_a_bad_convention_is_refused():
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=4, seed=0)
    with pytest.raises(ValueError, match="convention"):
        evaluate_undirected_relations(model, data.test[:3], convention="pykeen")
